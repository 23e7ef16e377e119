/* SPDX-License-Identifier: MIT */
/* A control for bench/run_alloc_bench.sh: preloaded into the untraced benchmark, it starts
 * one thread that only sleeps. glibc's malloc takes faster paths while a process has a
 * single thread (no atomic operations on its arenas); a writer thread of the tracer
 * (CTFSCOPE_WRITER=thread) ends them, as any second thread does, and its default writer
 * process does not. Against this control, the tracer's own cost shows without that
 * effect, which programs with threads of their own never see. */
#include <pthread.h>
#include <unistd.h>

static void *sleep_forever(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

__attribute__((constructor)) static void start_idle_thread(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, sleep_forever, NULL) == 0) pthread_detach(t);
}
