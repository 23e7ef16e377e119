/* SPDX-License-Identifier: MIT */
/* A thread's ring holds what a busy program writes while its writer waits for a CPU: on a
 * loaded machine the writer process is left 1-6 ms, now and then 25 ms, between being
 * woken and running, and cc1 at rate 1 writes ~150 MB of records a second. A thread that
 * writes 2.5 MiB of records while the writer process is stopped must not wait for it
 * (tracer_state.h, RING_WORDS; bench/JOURNAL.md, "Issue 16: cc1's wall after exit"). */
#define _GNU_SOURCE
#include <ctfscope/tracer.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* The tracer's state first (the control lock): its inline functions keep common/check.h's
 * CTS_ASSERT; the tests' own takes the name after it. */
#include "tracer/tracer_state.h"
#undef CTS_ASSERT

#include "../test.h"
#include "decoded.h"
#include "ring_test.h"

/* 2.5 MiB of alloc records without backtraces (REC_ALLOC_WORDS words each). */
#define BURST_ALLOCS ((uint64_t)(5u << 19) / (REC_ALLOC_WORDS * sizeof(uint64_t)))

static void *burst(void *arg) {
  (void)arg;
  for (uint64_t i = 0; i < BURST_ALLOCS; i++) cts_tracer_track_alloc(fake_ptr(i), 64);
  return NULL;
}

CTS_TEST(a_ring_holds_a_burst_while_the_writer_waits_for_a_cpu) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/cts_ring_room_%d.ctf", (int)getpid());
  CTS_ASSERT_EQ_INT(start_ring_session(path), 0);
  const int pid = cts__tracer_writer_pid();
  CTS_ASSERT(pid > 0);
  CTS_ASSERT(stop_writer_unlocked(pid));

  /* A thread of its own: a ring of its own, empty. */
  pthread_t t;
  CTS_ASSERT_EQ_INT(pthread_create(&t, NULL, burst, NULL), 0);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  const int joined = pthread_timedjoin_np(t, NULL, &deadline);
  kill(pid, SIGCONT);
  if (joined != 0) pthread_join(t, NULL);
  CTS_ASSERT_MSG(joined == 0, "the thread waited for the stopped writer (%s)", strerror(joined));

  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(st.waits, 0);
  CTS_ASSERT_EQ_U64(st.samples, BURST_ALLOCS);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, BURST_ALLOCS);
  decoded_fini(&d);
  unlink(path);
}

CTS_TEST_MAIN()
