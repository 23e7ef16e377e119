/* SPDX-License-Identifier: MIT */
/* Cost of a task-tracing hook (include/ctfscope/tasks.h): compiled in but not started,
 * and started, with one thread and with several at once.
 *
 *   bench_tasks [EVENTS_PER_THREAD [THREADS [RING_BYTES]]]
 *
 * The hook measured is cts_task_resolved() (a 25-byte `fulfills` event) into a ring of 64
 * packets (64 MiB unless told). Two clocks: CLOCK_MONOTONIC into the mmap'd ring file (what a
 * program pays), and a thread-local counter into caller memory (the tracer's own cost). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/tasks.h>

#include "os/mprof_ring.h"

static size_t ring_size = 64u << 20;
#define PACKETS 64u

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static __thread uint64_t ticks;
static uint64_t counter_clock(void *ud) {
  (void)ud;
  return ++ticks;
}

static uint64_t events = 20000000;

static double run_hooks(uint64_t n) {
  const double t0 = now_s();
  for (uint64_t i = 0; i < n; i++) cts_task_resolved((cts_task_id_t)i);
  return (now_s() - t0) * 1e9 / (double)n;
}

typedef struct worker {
  pthread_t th;
  double ns;
} worker_t;

static pthread_barrier_t barrier;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  pthread_barrier_wait(&barrier);
  w->ns = run_hooks(events);
  return NULL;
}

static void run_threads(const char *what, cts_mprof_ring_t *ring, int nthreads) {
  worker_t w[64];
  if (nthreads > 64) nthreads = 64;
  cts_task_start(ring);
  pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
  for (int i = 0; i < nthreads; i++) pthread_create(&w[i].th, NULL, worker_main, &w[i]);
  for (int i = 0; i < nthreads; i++) pthread_join(w[i].th, NULL);
  pthread_barrier_destroy(&barrier);
  cts_task_stop();
  printf("started, %s, %d threads: ", what, nthreads);
  for (int i = 0; i < nthreads; i++) printf("%s%.2f", i ? " / " : "", w[i].ns);
  printf(" ns/event per thread (dropped %llu)\n", (unsigned long long)cts_mprof_ring_dropped(ring));
}

int main(int argc, char **argv) {
  if (argc > 1) events = strtoull(argv[1], NULL, 10);
  const int nthreads = argc > 2 ? atoi(argv[2]) : 4;
  if (argc > 3) ring_size = strtoull(argv[3], NULL, 10);
  char path[] = "/tmp/cts-bench-tasks-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return 1;
  close(fd);
  printf("hook: cts_task_resolved (25-byte event), %llu events per thread\n",
         (unsigned long long)events);
  printf("compiled in, not started: %.3f ns/call\n", run_hooks(events));

  /* the tracer's own cost: caller memory, counter clock */
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(PACKETS) / 8];
  uint8_t *memory = calloc(1, ring_size);
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = memory;
  cfg.buffer_size = ring_size;
  cfg.packets = PACKETS;
  cfg.clock = counter_clock;
  cts_mprof_ring_t *ring;
  if (!memory || cts_mprof_ring_init(&ring, state, sizeof state, &cfg) != 0) return 1;
  run_threads("memory ring, counter clock", ring, 1);
  run_threads("memory ring, counter clock", ring, nthreads);

  /* what a program pays: the mmap'd file and CLOCK_MONOTONIC */
  cts_os_mprof_ring_t *r;
  if (cts_os_mprof_ring_open(&r, path, ring_size, PACKETS) != 0) return 1;
  run_threads("mmap'd file, CLOCK_MONOTONIC", cts_os_mprof_ring_borrow(r), 1);
  cts_os_mprof_ring_close(r);
  if (cts_os_mprof_ring_open(&r, path, ring_size, PACKETS) != 0) return 1;
  run_threads("mmap'd file, CLOCK_MONOTONIC", cts_os_mprof_ring_borrow(r), nthreads);
  cts_os_mprof_ring_close(r);
  unlink(path);
  free(memory);
  return 0;
}
