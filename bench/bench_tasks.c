/* SPDX-License-Identifier: MIT */
/* Cost of a task-tracing event (include/ctfscope/tasks.h), side by side with its parts
 * (the clock) and with an LTTng-UST tracepoint, in one run:
 *
 *   bench_tasks [--events N] [--threads T] [--runs R] [--dir DIR]
 *
 * The hook measured is cts_task_resolved(): a 25-byte `fulfills` event (timestamp, id,
 * thread, resolvee) into an mmap'd ring file of 64 packets of 1 MiB in DIR (default
 * /dev/shm, else /tmp), written by 1 thread and by T threads at once (default 4). The
 * LTTng-UST tracepoint carries an int and a long; it is enabled when an LTTng session has
 * enabled the event `cts_bench:event` (bench/run_tasks_bench.sh sets one up), else it is
 * measured compiled in but disabled. Each figure is the best of R runs (default 5) of N
 * events per thread (default 5,000,000), after an untimed pass that fills the ring once.
 * Times are per event and per thread: CPU time of the thread (CLOCK_THREAD_CPUTIME_ID,
 * which a loaded machine does not inflate) and wall time.
 *
 * `bench_tasks --mutex` times an uncontended pthread_mutex_lock + unlock instead, to be
 * run with and without the preload library (run_tasks_bench.sh does both). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/tasks.h>

#include "common/cpu_counter.h"
#include "os/tsc_clock.h"
#ifdef CTS_BENCH_LTTNG
#include "bench_lttng.h"
#endif

#define PACKETS     64u
#define PACKET_SIZE (1u << 20)
#define RING_SIZE   ((size_t)PACKETS * PACKET_SIZE)
#define MAX_THREADS 64

static uint64_t events = 5000000;
static int runs = 5;
static int nthreads = 4;
static const char *dir;

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- what is timed ----------------------------------------------------------------------- */

typedef void (*events_fn)(uint64_t n);

static void cts_events(uint64_t n) {
  for (uint64_t i = 0; i < n; i++) cts_task_resolved((cts_task_id_t)i);
}

static volatile uint64_t sink;

static void clock_gettime_only(uint64_t n) {
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s += (uint64_t)ts.tv_nsec;
  }
  sink = s;
}

#if CTS_HAVE_CPU_COUNTER
static void rdtsc_only(uint64_t n) {
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += cts__cpu_counter();
  sink = s;
}
#endif

#ifdef CTS_BENCH_LTTNG
static void lttng_events(uint64_t n) {
  bench_lttng_events(n);
}
#endif

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct result {
  double cpu_ns, wall_ns; /* per event, best run */
} result_t;

typedef struct worker {
  pthread_t th;
  events_fn fn;
  uint64_t warmup;
  result_t r;
} worker_t;

static pthread_barrier_t barrier;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  w->r.cpu_ns = w->r.wall_ns = INFINITY;
  if (w->warmup) w->fn(w->warmup);
  for (int run = 0; run < runs; run++) {
    pthread_barrier_wait(&barrier); /* the threads of a case run at the same time */
    const double c0 = cpu_s(), t0 = wall_s();
    w->fn(events);
    const double c1 = cpu_s(), t1 = wall_s();
    w->r.cpu_ns = fmin(w->r.cpu_ns, (c1 - c0) * 1e9 / (double)events);
    w->r.wall_ns = fmin(w->r.wall_ns, (t1 - t0) * 1e9 / (double)events);
  }
  cts_task_thread_exit(); /* its packet goes back to the ring */
  return NULL;
}

/* Runs @p fn on @p n threads; prints one line; returns thread 0's figures and the mean. */
static result_t measure(const char *what, events_fn fn, int n, uint64_t warmup) {
  worker_t w[MAX_THREADS];
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    w[i].fn = fn;
    w[i].warmup = warmup;
    pthread_create(&w[i].th, NULL, worker_main, &w[i]);
  }
  result_t mean = {0, 0};
  for (int i = 0; i < n; i++) {
    pthread_join(w[i].th, NULL);
    mean.cpu_ns += w[i].r.cpu_ns / n;
    mean.wall_ns += w[i].r.wall_ns / n;
  }
  pthread_barrier_destroy(&barrier);
  printf("%-52s %3d  %8.2f  %8.2f", what, n, mean.cpu_ns, mean.wall_ns);
  if (n > 1) {
    printf("   (cpu per thread:");
    for (int i = 0; i < n; i++) printf(" %.2f", w[i].r.cpu_ns);
    printf(")");
  }
  printf("\n");
  fflush(stdout);
  return mean;
}

/* ---- rings ------------------------------------------------------------------------------- */

typedef enum clock_kind { CLOCK_TSC, CLOCK_VDSO, CLOCK_NONE } clock_kind_t;

static uint64_t vdso_clock(void *unused) {
  (void)unused;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t no_clock(void *unused) {
  (void)unused;
  return 1;
}

typedef struct bench_ring {
  void *map;
  cts_mprof_ring_t *ring;
  uint64_t state[CTS_MPROF_RING_STATE_SIZE(PACKETS) / 8];
  char path[4096];
} bench_ring_t;

/* An mmap'd ring file as the preload library makes one; false if the clock is missing. */
static bool ring_open(bench_ring_t *r, clock_kind_t kind) {
  snprintf(r->path, sizeof r->path, "%s/cts-bench-tasks-%d.ctf", dir, (int)getpid());
  const int fd = open(r->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ftruncate(fd, (off_t)RING_SIZE) != 0) {
    fprintf(stderr, "bench_tasks: %s: %s\n", r->path, strerror(errno));
    exit(1);
  }
  r->map = mmap(NULL, RING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (r->map == MAP_FAILED) {
    fprintf(stderr, "bench_tasks: mmap: %s\n", strerror(errno));
    exit(1);
  }
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = r->map;
  cfg.buffer_size = RING_SIZE;
  cfg.packets = PACKETS;
  cfg.clock = kind == CLOCK_NONE ? no_clock : vdso_clock;
  if (kind == CLOCK_TSC && cts_os_tsc_clock(&cfg.tsc) != 0) {
    munmap(r->map, RING_SIZE);
    unlink(r->path);
    return false;
  }
  if (cts_mprof_ring_init(&r->ring, r->state, sizeof r->state, &cfg) != 0) exit(1);
  cts_task_start(r->ring);
  return true;
}

static void ring_close(bench_ring_t *r) {
  cts_task_stop();
  const uint64_t dropped = cts_mprof_ring_dropped(r->ring);
  if (dropped)
    printf("    (%llu events dropped: more threads than packets)\n", (unsigned long long)dropped);
  munmap(r->map, RING_SIZE);
  unlink(r->path);
}

/* ---- uncontended mutex (for the preload library's pthread hooks) --------------------------- */

static void *idle_thread(void *unused) {
  (void)unused;
  pause();
  return NULL;
}

/* pthread_mutex_lock + unlock of a free mutex, with a second thread alive (glibc skips its
 * atomic instructions in a single-threaded process). Run it with and without
 * LD_PRELOAD=libctfscope-preload.so and CTFSCOPE_TASKS to see what the hooks add. */
static int mutex_case(void) {
  pthread_t idle;
  pthread_create(&idle, NULL, idle_thread, NULL);
  static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  double best = INFINITY;
  for (int run = 0; run < runs; run++) {
    const double c0 = cpu_s();
    for (uint64_t i = 0; i < events; i++) {
      pthread_mutex_lock(&m);
      pthread_mutex_unlock(&m);
    }
    best = fmin(best, (cpu_s() - c0) * 1e9 / (double)events);
  }
  printf("uncontended pthread_mutex_lock + unlock: %.2f ns\n", best);
  return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

static int usage(void) {
  fprintf(stderr,
          "usage: bench_tasks [--events N] [--threads T] [--runs R] [--dir DIR]\n"
          "       bench_tasks --mutex [--events N] [--runs R]\n");
  return 2;
}

int main(int argc, char **argv) {
  bool mutex = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--mutex") == 0) {
      mutex = true;
      continue;
    }
    if (i + 1 >= argc) return usage();
    if (strcmp(argv[i], "--events") == 0)
      events = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--threads") == 0)
      nthreads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--runs") == 0)
      runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--dir") == 0)
      dir = argv[++i];
    else
      return usage();
  }
  if (events == 0 || runs < 1 || nthreads < 1 || nthreads > MAX_THREADS) return usage();
  if (mutex) return mutex_case();
  if (!dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const uint64_t fill = RING_SIZE / 25; /* events that go round the ring once */
  static bench_ring_t ring;

  printf("bench_tasks: %llu events per thread per run, best of %d runs; ring %zu MiB in %s\n",
         (unsigned long long)events, runs, RING_SIZE >> 20, dir);
  printf("TSC clock: %s\n", cts_os_tsc_usable() ? "usable (constant_tsc, nonstop_tsc)"
                                                : "not usable here: CLOCK_MONOTONIC instead");
  printf("%-52s %3s  %8s  %8s\n", "case", "thr", "cpu ns", "wall ns");

  const result_t off = measure("cts_task_resolved, tracing not started", cts_events, 1, 0);
  result_t tsc1 = {NAN, NAN}, tscn = {NAN, NAN};
  if (ring_open(&ring, CLOCK_TSC)) {
    tsc1 = measure("cts_task_resolved, mmap'd ring, TSC clock", cts_events, 1, fill);
    ring_close(&ring);
    ring_open(&ring, CLOCK_TSC);
    tscn = measure("cts_task_resolved, mmap'd ring, TSC clock", cts_events, nthreads,
                   fill / (uint64_t)nthreads);
    ring_close(&ring);
  }
  ring_open(&ring, CLOCK_VDSO);
  const result_t vdso1 =
      measure("cts_task_resolved, mmap'd ring, clock_gettime", cts_events, 1, fill);
  ring_close(&ring);
  ring_open(&ring, CLOCK_NONE);
  const result_t none1 =
      measure("cts_task_resolved, mmap'd ring, constant clock", cts_events, 1, fill);
  ring_close(&ring);
#if CTS_HAVE_CPU_COUNTER
  measure("rdtsc alone (the TSC clock's floor)", rdtsc_only, 1, 0);
#endif
  measure("clock_gettime(CLOCK_MONOTONIC) alone", clock_gettime_only, 1, 0);

#ifdef CTS_BENCH_LTTNG
  const bool enabled = bench_lttng_enabled();
  const result_t lt1 = measure(enabled ? "LTTng-UST tracepoint (int, long), enabled"
                                       : "LTTng-UST tracepoint (int, long), DISABLED",
                               lttng_events, 1, enabled ? fill : 0);
  const result_t ltn = measure(enabled ? "LTTng-UST tracepoint (int, long), enabled"
                                       : "LTTng-UST tracepoint (int, long), DISABLED",
                               lttng_events, nthreads, 0);
#endif

  const result_t on1 = isnan(tsc1.cpu_ns) ? vdso1 : tsc1;
  printf("\nsummary (cpu time per event and thread):\n");
  printf("  tracing not started:            %.3f ns\n", off.cpu_ns);
  printf(
      "  enabled, 1 thread:               %.2f ns (%s clock; %.2f ns of it is the write "
      "without a clock)\n",
      on1.cpu_ns, isnan(tsc1.cpu_ns) ? "clock_gettime" : "TSC", none1.cpu_ns);
  if (!isnan(tscn.cpu_ns))
    printf("  enabled, %d threads at once:      %.2f ns per thread\n", nthreads, tscn.cpu_ns);
#ifdef CTS_BENCH_LTTNG
  if (enabled)
    printf("  LTTng-UST enabled, 1 thread:     %.2f ns -> ctfscope is %.1fx cheaper\n", lt1.cpu_ns,
           lt1.cpu_ns / on1.cpu_ns);
  else
    printf(
        "  LTTng-UST: no session enabled cts_bench:event, only the disabled tracepoint "
        "(%.3f ns) was measured; run bench/run_tasks_bench.sh for the enabled one\n",
        lt1.cpu_ns);
  if (enabled && !isnan(tscn.cpu_ns))
    printf("  LTTng-UST enabled, %d threads:    %.2f ns per thread -> %.1fx\n", nthreads,
           ltn.cpu_ns, ltn.cpu_ns / tscn.cpu_ns);
#else
  printf(
      "  LTTng-UST: not compared (bench built without lttng-ust; apt-get install "
      "liblttng-ust-dev)\n");
#endif
  return 0;
}
