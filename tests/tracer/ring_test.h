/* SPDX-License-Identifier: MIT */
/* Test helpers for the ring tests: a rate-1 session with a writer process and records
 * without backtraces, and stopping that writer process (SIGSTOP) where it holds no lock the
 * program may need, so that a thread's records pile up in its ring. Include after
 * tracer/tracer_state.h (cts__ctl). */
#ifndef CTS_TEST_RING_TEST_H
#define CTS_TEST_RING_TEST_H

#include <ctfscope/tracer.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* A block address for record i (never dereferenced). */
static inline const void *fake_ptr(uint64_t i) {
  return (const void *)(uintptr_t)(0x300000000ull + i * 64u);
}

static inline void sleep_ms(long ms) {
  const struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* The state letter of process `pid` ('T': stopped), or 0. */
static inline char state_of(int pid) {
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
static inline bool stop_writer_unlocked(int pid) {
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

/* Starts a session at rate 1 into the file at `path`, with a writer process, no unwinder
 * and no symbols, and waits until its writer process runs: 0, or the tracer's error. */
static inline int start_ring_session(const char *path) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.unwind = CTS_TRACER_UNWIND_NONE;
  cfg.writer = CTS_TRACER_WRITER_PROCESS;
  cfg.symbolize = false;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = path;
  const int e = cts_tracer_start(&cfg, &sink);
  return e ? e : cts_tracer_flush();
}

#endif /* CTS_TEST_RING_TEST_H */
