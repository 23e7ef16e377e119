/* SPDX-License-Identifier: MIT */
/* A program that asks for its threads' stacks with pthread_getattr_np, as Rust's start-up
 * and std::thread do: glibc calls realloc() (and, for the main thread, fopen()) while it
 * holds the thread's descriptor lock. A tracer that looked the stack up the same way from
 * its malloc hook deadlocked here. Prints the number of successful calls. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int ask(void) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void *addr;
  size_t size;
  const int ok = pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0;
  pthread_attr_destroy(&attr);
  return ok;
}

static void *body(void *arg) {
  int *n = arg;
  for (int i = 0; i < 50; i++) *n += ask();
  return NULL;
}

int main(void) {
  int main_ok = 0, thread_ok = 0;
  for (int i = 0; i < 50; i++) main_ok += ask();
  pthread_t th;
  if (pthread_create(&th, NULL, body, &thread_ok) != 0) return 2;
  pthread_join(th, NULL);
  printf("%d %d\n", main_ok, thread_ok);
  return main_ok == 50 && thread_ok == 50 ? 0 : 1;
}
