/* SPDX-License-Identifier: MIT */
/* The first sample taken while another thread holds a lock that one of the program's
 * pthread_atfork handlers takes. A tracer that made its writer process there with glibc's
 * fork() would run that handler in the sampling thread and wait for the lock, which the
 * other thread lets go only once the sampling thread's malloc has returned: a deadlock,
 * broken here after 5 s ("deadlock" on stdout, exit status 1). At the default rate the
 * program's small allocations before are seldom sampled (~12 k words: about one run in a
 * hundred); its 1 GiB block (mapped, never touched) always is. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "victim.h"

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool holding, allocated, timed_out;

static void before_fork(void) {
  pthread_mutex_lock(&held);
}

static void after_fork(void) {
  pthread_mutex_unlock(&held);
}

static void *holder(void *arg) {
  (void)arg;
  pthread_mutex_lock(&held);
  atomic_store(&holding, true);
  for (int i = 0; i < 5000 && !atomic_load(&allocated); i++) usleep(1000);
  atomic_store(&timed_out, !atomic_load(&allocated));
  pthread_mutex_unlock(&held);
  return NULL;
}

int main(void) {
  victim_quiet_stdio();
  pthread_atfork(before_fork, after_fork, after_fork);
  pthread_t thread;
  if (pthread_create(&thread, NULL, holder, NULL) != 0) return 2;
  while (!atomic_load(&holding)) usleep(100);
  void *const block = malloc((size_t)1 << 30);
  atomic_store(&allocated, true);
  pthread_join(thread, NULL);
  free(block);
  const bool late = atomic_load(&timed_out);
  printf("%s\n", late ? "deadlock" : "ok");
  return late ? 1 : 0;
}
