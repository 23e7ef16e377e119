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

/* 2.5 MiB of alloc records without backtraces (REC_ALLOC_WORDS words each). */
#define BURST_ALLOCS ((uint64_t)(5u << 19) / (REC_ALLOC_WORDS * sizeof(uint64_t)))

static const void *fake_ptr(uint64_t i) {
  return (const void *)(uintptr_t)(0x300000000ull + i * 64u);
}

static void sleep_ms(long ms) {
  const struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* The state letter of process `pid` ('T': stopped), or 0. */
static char state_of(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *const f = fopen(path, "r");
  if (!f) return 0;
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *const close_paren = strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

/* Stops the writer process where it holds no lock the program may need (the control lock:
 * a thread whose ring is half full takes it to wake the writer). True once stopped. */
static bool stop_writer_unlocked(int pid) {
  for (int attempt = 0; attempt < 100; attempt++) {
    if (kill(pid, SIGSTOP) != 0) return false;
    for (int i = 0; i < 1000 && state_of(pid) != 'T'; i++) sleep_ms(1);
    if (state_of(pid) == 'T' && pthread_mutex_trylock(&cts__ctl->lock) == 0) {
      pthread_mutex_unlock(&cts__ctl->lock);
      return true;
    }
    kill(pid, SIGCONT);
    sleep_ms(1);
  }
  return false;
}

static void *burst(void *arg) {
  (void)arg;
  for (uint64_t i = 0; i < BURST_ALLOCS; i++) cts_tracer_track_alloc(fake_ptr(i), 64);
  return NULL;
}

CTS_TEST(a_ring_holds_a_burst_while_the_writer_waits_for_a_cpu) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/cts_ring_room_%d.ctf", (int)getpid());
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.unwind = CTS_TRACER_UNWIND_NONE;
  cfg.writer = CTS_TRACER_WRITER_PROCESS;
  cfg.symbolize = false;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = path;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), 0); /* the writer process runs */
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
