/* SPDX-License-Identifier: MIT */
/* A ring re-initialised in the same state memory and started again (what a forked child or
 * a reopened ring file at a reused address does) while a thread still has a writer attached
 * to the old one: that thread's next hook must forget its old packet, not send and free the
 * packet another writer now holds at the same index. Owner tokens make the difference:
 * hook writers' tokens are unique in the process, explicit writers' unique in their ring,
 * and the two ranges never meet (src/core/mprof_writer.h). */
#include <pthread.h>
#include <semaphore.h>

#include <ctfscope/tasks.h>

#include "../test.h"

static unsigned sink_calls;
static int counting_sink(void *ud, const void *buf, size_t len) {
  (void)ud, (void)buf, (void)len;
  __atomic_add_fetch(&sink_calls, 1, __ATOMIC_RELAXED);
  return 0;
}

static uint64_t ticks;
static uint64_t tick_clock(void *ud) {
  (void)ud;
  return __atomic_add_fetch(&ticks, 1, __ATOMIC_RELAXED);
}

static uint8_t buffer[4 * 4096];
static uint64_t state[CTS_MPROF_RING_STATE_SIZE(4) / 8];

static cts_mprof_ring_t *init_ring(void) {
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buffer;
  cfg.buffer_size = sizeof buffer;
  cfg.packets = 4;
  cfg.clock = tick_clock;
  cfg.sink = counting_sink;
  cts_mprof_ring_t *ring = NULL;
  if (cts_mprof_ring_init(&ring, state, sizeof state, &cfg) != 0) return NULL;
  return ring;
}

/* The stale thread: one event into the first ring, then one more after the restart. */
static sem_t go, done;
static unsigned calls_during_second_event;
static void *stale_thread(void *arg) {
  (void)arg;
  sem_wait(&go);
  cts_task_label(CTS_TASK_MAIN, "before"); /* takes packet 1 of the first ring */
  sem_post(&done);
  sem_wait(&go);
  const unsigned before = __atomic_load_n(&sink_calls, __ATOMIC_RELAXED);
  cts_task_label(CTS_TASK_MAIN, "after");
  calls_during_second_event = __atomic_load_n(&sink_calls, __ATOMIC_RELAXED) - before;
  sem_post(&done);
  return NULL;
}

static void *one_event_thread(void *arg) {
  (void)arg;
  cts_task_label(CTS_TASK_MAIN, "other hook thread"); /* keeps its packet: no thread_exit */
  return NULL;
}

/* Starts a ring, lets the stale thread write, restarts a new ring in the same memory, has
 * @p explicit_writer or another hook thread take packet 1, then lets the stale thread
 * write again: that hook must send nothing to the sink (it owns no packet any more). */
static void restart_under_a_stale_writer(bool explicit_writer) {
  sem_init(&go, 0, 0);
  sem_init(&done, 0, 0);
  pthread_t th;
  cts_mprof_ring_t *ring = init_ring();
  CTS_ASSERT(ring != NULL);
  CTS_ASSERT_EQ_INT(cts_task_start(ring), 0); /* main: switch(0) in packet 0 */
  CTS_ASSERT_EQ_INT(pthread_create(&th, NULL, stale_thread, NULL), 0);
  sem_post(&go);
  sem_wait(&done);
  cts_task_stop();

  cts_mprof_ring_t *again = init_ring();
  CTS_ASSERT(again == ring);                   /* same state memory, same address */
  CTS_ASSERT_EQ_INT(cts_task_start(again), 0); /* main: packet 0 again */
  cts_mprof_writer_t w;
  if (explicit_writer) {
    cts_mprof_writer_init(&w, again);
    const cts_mprof_event_t ev = {.time_ns = CTS_TIME_NOW, .id = CTS_MPROF_SWITCH, .thread = 7};
    CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w, &ev), 0); /* packet 1 */
  } else {
    pthread_t other;
    CTS_ASSERT_EQ_INT(pthread_create(&other, NULL, one_event_thread, NULL), 0);
    pthread_join(other, NULL); /* packet 1, still held */
  }
  sem_post(&go);
  sem_wait(&done);
  pthread_join(th, NULL);
  if (explicit_writer) cts_mprof_writer_fini(&w);
  cts_task_stop();
  CTS_ASSERT_EQ_INT(cts_mprof_ring_flush(again), 0);
  CTS_ASSERT_EQ_U64(cts_mprof_ring_dropped(again), 0);
  sem_destroy(&go);
  sem_destroy(&done);
  CTS_ASSERT_EQ_INT(calls_during_second_event, 0);
}

CTS_TEST(stale_hook_writer_leaves_an_explicit_writers_packet_alone) {
  restart_under_a_stale_writer(true);
}

CTS_TEST(stale_hook_writer_leaves_another_hook_threads_packet_alone) {
  restart_under_a_stale_writer(false);
}

CTS_TEST_MAIN()
