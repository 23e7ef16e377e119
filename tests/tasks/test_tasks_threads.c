/* SPDX-License-Identifier: MIT */
/* Many OS threads tracing at once through the hooks: every event comes back whole, each
 * thread's events in its own order, none lost while the ring has a packet per thread, and
 * the shared counter's values are all distinct. Run under TSan too: the tsan preset (label
 * concurrent). */
#include <pthread.h>

#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#include "../test.h"
#include "mprof_test_util.h"

#define THREADS           4
#define EVENTS_PER_THREAD 20000u

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *stream;
static size_t stream_len, stream_cap;

static int locked_sink(void *ud, const void *buf, size_t len) {
  (void)ud;
  pthread_mutex_lock(&sink_lock);
  if (stream_len + len > stream_cap) {
    stream_cap = (stream_len + len) * 2;
    stream = realloc(stream, stream_cap);
  }
  memcpy(stream + stream_len, buf, len);
  stream_len += len;
  pthread_mutex_unlock(&sink_lock);
  return 0;
}

static uint64_t ticks;
static uint64_t atomic_clock(void *ud) {
  (void)ud;
  return __atomic_add_fetch(&ticks, 1, __ATOMIC_RELAXED);
}

static cts_task_counter_t shared_counter = CTS_TASK_COUNTER_INIT("shared", 0);

static void *worker(void *arg) {
  const int64_t base = (int64_t)(intptr_t)arg << 32;
  for (uint32_t i = 0; i < EVENTS_PER_THREAD; i++) {
    if (i % 4 == 3) {
      cts_task_counter_increase(&shared_counter, 1);
    } else if (i % 4 == 1) {
      cts_task_switch(base + i); /* the counter events carry this as their thread */
    } else {
      cts_task_label(base + i, "a label long enough to cross packet boundaries often");
    }
  }
  cts_task_thread_exit(); /* its last packet goes to the sink now, not at the flush */
  return NULL;
}

CTS_TEST(threads_never_tear_events) {
  static uint8_t buffer[32 * 4096];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(32) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buffer;
  cfg.buffer_size = sizeof buffer;
  cfg.packets = 32;
  cfg.clock = atomic_clock;
  cfg.sink = locked_sink;
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, sizeof state, &cfg), 0);
  CTS_ASSERT_EQ_INT(cts_task_start(ring), 0);
  pthread_t th[THREADS];
  for (intptr_t i = 0; i < THREADS; i++)
    CTS_ASSERT_EQ_INT(pthread_create(&th[i], NULL, worker, (void *)(i + 1)), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  const size_t before_stop = stream_len;
  cts_task_stop(); /* sends the main thread's packet: only switch(0) */
  CTS_ASSERT_EQ_U64(stream_len, before_stop + 30 + 17);
  CTS_ASSERT_EQ_INT(cts_mprof_ring_flush(ring), 0);
  CTS_ASSERT_EQ_U64(stream_len, before_stop + 30 + 17); /* nothing was left to flush */
  CTS_ASSERT_EQ_U64(cts_mprof_ring_dropped(ring), 0);
  CTS_ASSERT_EQ_INT(cts_task_counter_value(&shared_counter), THREADS * EVENTS_PER_THREAD / 4);

  tu_events_t t = {0};
  char msg[256];
  CTS_ASSERT_MSG(tu_read(stream, stream_len, &t, true, NULL, msg, sizeof msg) == 0, "%s", msg);
  CTS_ASSERT_EQ_U64(t.warnings, 0);
  CTS_ASSERT_EQ_U64(t.n, 1 + THREADS * EVENTS_PER_THREAD); /* + the start's switch(0) */
  uint32_t next[THREADS + 1] = {0};
  static uint8_t seen_value[THREADS * EVENTS_PER_THREAD / 4 + 1];
  int main_switches = 0;
  for (size_t k = 0; k < t.n; k++) {
    const cts_mprof_event_t *e = &t.ev[k];
    if (e->thread == 0) { /* cts_task_start()'s switch(0), in the main thread's packet */
      CTS_ASSERT_EQ_INT(e->id, CTS_MPROF_SWITCH);
      main_switches++;
      continue;
    }
    const int64_t owner = e->thread >> 32;
    const uint32_t i = (uint32_t)e->thread;
    CTS_ASSERT_MSG(owner >= 1 && owner <= THREADS, "event %zu: thread %llx", k,
                   (unsigned long long)e->thread);
    /* events of one thread are in its order: its packets go out in sequence */
    if (e->id == CTS_MPROF_COUNTER) {
      CTS_ASSERT_STR_EQ(e->str, "shared");
      CTS_ASSERT(e->value >= 1 && e->value <= THREADS * EVENTS_PER_THREAD / 4);
      CTS_ASSERT(!seen_value[e->value]);
      seen_value[e->value] = 1;
      CTS_ASSERT_EQ_U64(i + 2, next[owner]); /* current task = the last switch */
      next[owner]++;
      continue;
    }
    CTS_ASSERT_EQ_U64(i, next[owner]);
    if (e->id == CTS_MPROF_LABEL)
      CTS_ASSERT_STR_EQ(e->str, "a label long enough to cross packet boundaries often");
    else
      CTS_ASSERT_EQ_INT(e->id, CTS_MPROF_SWITCH);
    next[owner] = i + 1;
  }
  CTS_ASSERT_EQ_INT(main_switches, 1);
  for (int o = 1; o <= THREADS; o++) CTS_ASSERT_EQ_U64(next[o], EVENTS_PER_THREAD);
  tu_events_free(&t);
  free(stream);
}

CTS_TEST_MAIN()
