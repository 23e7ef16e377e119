/* SPDX-License-Identifier: MIT */
/* Task tracing of a threaded program into a file-backed ring (include/ctfscope/ring.h),
 * what mirage-profile's MProf_unix.mmap_buffer does, then reading the trace back.
 *
 *   task_ring TRACE.ctf
 *
 * Four worker threads each run a few labelled tasks; the main thread waits for them. The
 * trace is then read with cts_os_mprof_read_file() and the events counted: the program
 * prints "N events, D dropped" and exits 0 when every event of every thread is there.
 * Build it against an installed ctfscope with
 *   cc task_ring.c $(pkg-config --cflags --libs ctfscope) -o task_ring
 * (add -pthread on a libc older than glibc 2.34). `ctfscope dump TRACE.ctf` shows it. */
#include <ctfscope/ring.h>
#include <ctfscope/tasks.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define WORKERS 4
#define JOBS    25

/* Per job: creates, label, switch to it, fulfills, switch back; per worker first a label
 * of its own task and a switch to it. */
#define EVENTS_PER_JOB    5
#define EVENTS_PER_WORKER (2 + JOBS * EVENTS_PER_JOB)

static void *worker(void *arg) {
  const cts_task_id_t self = (cts_task_id_t)(intptr_t)arg;
  cts_task_label(self, "worker");
  cts_task_switch(self);
  for (int i = 0; i < JOBS; i++) {
    const cts_task_id_t job = cts_task_create(CTS_TASK_TASK);
    cts_task_label(job, "job");
    cts_task_switch(job);
    cts_task_resolved(job);
    cts_task_switch(self);
  }
  cts_task_thread_exit(); /* hand this thread's packet back before the thread ends */
  return NULL;
}

static int count_event(void *user_data, const cts_mprof_event_t *ev) {
  (void)ev;
  ++*(uint64_t *)user_data;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: task_ring TRACE.ctf\n");
    return 2;
  }
  cts_os_mprof_ring_t *ring;
  /* 1 MiB in 16 packets: one per thread writing at once, with room to spare. */
  int err = cts_os_mprof_ring_open(&ring, argv[1], 1u << 20, 16);
  if (err) {
    fprintf(stderr, "task_ring: %s: %s\n", argv[1], cts_strerror(err));
    return 1;
  }
  if (cts_task_start(cts_os_mprof_ring_borrow(ring)) != 0) return 1;
  pthread_t threads[WORKERS];
  int started = 0;
  for (; started < WORKERS; started++) {
    const cts_task_id_t id = cts_task_create(CTS_TASK_TASK);
    if (pthread_create(&threads[started], NULL, worker, (void *)(intptr_t)id) != 0) break;
  }
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  cts_task_stop();
  const uint64_t dropped = cts_mprof_ring_dropped(cts_os_mprof_ring_borrow(ring));
  err = cts_os_mprof_ring_close(ring);
  if (err || started != WORKERS) {
    fprintf(stderr, "task_ring: %s\n", err ? cts_strerror(err) : "cannot start the threads");
    return 1;
  }

  uint64_t events = 0;
  cts_mprof_handler_t h = {.user_data = &events, .on_event = count_event};
  char msg[256];
  bool input_error;
  err = cts_os_mprof_read_file(argv[1], &h, false, NULL, msg, sizeof msg, &input_error);
  if (err) {
    fprintf(stderr, "task_ring: %s\n", msg);
    return 1;
  }
  /* The main thread: switch(0) at the start, then creates per worker. */
  const uint64_t expected = 1 + WORKERS + (uint64_t)WORKERS * EVENTS_PER_WORKER;
  printf("%llu events, %llu dropped\n", (unsigned long long)events, (unsigned long long)dropped);
  return events == expected && dropped == 0 ? 0 : 1;
}
