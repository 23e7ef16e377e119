/* SPDX-License-Identifier: MIT */
/* Many OS threads tracing at once through the hooks: every event comes back whole, each
 * thread's events in its own order, none lost while the ring has a packet per thread, and
 * the shared counter's values are all distinct. Run under TSan too: the tsan preset (label
 * concurrent). */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#include "../test.h"
#include "../../src/cli/record_tasks.h"
#include "../run_cmd.h"
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

/* A ring of `packets` over buffer, on atomic_clock, sending to sink (may be NULL). */
static int make_ring(cts_mprof_ring_t **ring, uint8_t *buffer, size_t size, uint64_t *state,
                     size_t state_size, uint32_t packets, cts_write_cb sink) {
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buffer;
  cfg.buffer_size = size;
  cfg.packets = packets;
  cfg.clock = atomic_clock;
  cfg.sink = sink;
  return cts_mprof_ring_init(ring, state, state_size, &cfg);
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
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(make_ring(&ring, buffer, sizeof buffer, state, sizeof state, 32, locked_sink),
                    0);
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

static void *three_labels(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; i++) cts_task_label(5, "no room");
  return NULL;
}

/* What even the shared packet cannot take is counted, written into the trace at stop
 * (ctfscope_lost) and printed by info and stats. Here an explicit writer holds the packet
 * the hooks kept for sharing, so a second thread's events have nowhere to go. */
CTS_TEST(events_without_room_are_counted_in_the_trace) {
  static uint8_t buffer[2 * 4096];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(2) / 8];
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(make_ring(&ring, buffer, sizeof buffer, state, sizeof state, 2, NULL), 0);
  CTS_ASSERT_EQ_INT(cts_task_start(ring), 0); /* this thread's packet */
  cts_mprof_writer_t w;
  cts_mprof_writer_init(&w, ring);
  const cts_mprof_event_t ev = {.time_ns = 1, .id = CTS_MPROF_SWITCH, .thread = 9};
  CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w, &ev), 0); /* the other packet */
  pthread_t th;
  CTS_ASSERT_EQ_INT(pthread_create(&th, NULL, three_labels, NULL), 0);
  pthread_join(th, NULL);
  CTS_ASSERT_EQ_U64(cts_mprof_ring_dropped(ring), 3);
  cts_mprof_writer_fini(&w);
  cts_task_stop();
  tu_events_t t = {0};
  char msg[256];
  CTS_ASSERT_MSG(tu_read(buffer, sizeof buffer, &t, false, NULL, msg, sizeof msg) == 0, "%s", msg);
  size_t lost = 0;
  for (size_t k = 0; k < t.n; k++)
    if (t.ev[k].id == CTS_MPROF_LOST) {
      CTS_ASSERT_EQ_U64(t.ev[k].arg, 3);
      CTS_ASSERT_EQ_INT(t.ev[k].thread, CTS_TASK_MAIN); /* the task running at stop */
      lost++;
    }
  CTS_ASSERT_EQ_U64(lost, 1);
  tu_events_free(&t);
  char path[64];
  snprintf(path, sizeof path, "/tmp/cts_lost_%d.ctf", (int)getpid());
  FILE *f = fopen(path, "wb");
  CTS_ASSERT(f && fwrite(buffer, 1, sizeof buffer, f) == sizeof buffer && fclose(f) == 0);
  char *info[] = {(char *)CTS_TEST_CTFSCOPE, "info", "--json", path, NULL};
  char *stats[] = {(char *)CTS_TEST_CTFSCOPE, "stats", path, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(info, NULL, 60, &r) && r.exit_code == 0);
  CTS_ASSERT_MSG(strstr(r.out, "\"events_lost\": 3"), "%s", r.out);
  run_result_free(&r);
  CTS_ASSERT(run_cmd(stats, NULL, 60, &r) && r.exit_code == 0);
  CTS_ASSERT_MSG(strstr(r.out, "Lost     3 events"), "%s", r.out);
  run_result_free(&r);
  /* record's summary of the task trace it collected */
  char err_path[64];
  snprintf(err_path, sizeof err_path, "/tmp/cts_lost_%d.err", (int)getpid());
  fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  FILE *err = fopen(err_path, "w+");
  CTS_ASSERT(saved >= 0 && err && dup2(fileno(err), STDERR_FILENO) >= 0);
  record_tasks_summarise(path, false);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  char said[2048] = "";
  rewind(err);
  const size_t n = fread(said, 1, sizeof said - 1, err);
  said[n] = '\0';
  fclose(err);
  unlink(err_path);
  CTS_ASSERT_MSG(strstr(said, "3 events of the task trace were lost"), "%s", said);
  unlink(path);
}

CTS_TEST_MAIN()
