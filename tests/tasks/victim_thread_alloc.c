/* SPDX-License-Identifier: MIT */
/* A threaded program for test_thread_stacks: two threads with distinct start routines
 * allocate blocks they keep, the main thread one. Built with frame pointers and without
 * -rdynamic: the routines are named from the symbol table. */
#include <pthread.h>
#include <stdlib.h>

static void *volatile kept[3000];

__attribute__((noinline)) static void *big_blocks_routine(void *arg) {
  for (int i = 0; i < 1000; i++) kept[i] = malloc(2048);
  return arg;
}

__attribute__((noinline)) static void *small_blocks_routine(void *arg) {
  for (int i = 0; i < 1000; i++) kept[1000 + i] = malloc(64);
  return arg;
}

int main(void) {
  pthread_t a, b;
  if (pthread_create(&a, NULL, big_blocks_routine, NULL) != 0 ||
      pthread_create(&b, NULL, small_blocks_routine, NULL) != 0)
    return 1;
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  for (int i = 0; i < 1000; i++) kept[2000 + i] = malloc(16);
  return 0;
}
