/* SPDX-License-Identifier: MIT */
/* Calls each hook of the malloc family HOT_CALLS times in a loop of its own, for callgrind
 * to count the instructions of each loop (test_preload.c,
 * preload_hooks_instructions_per_unsampled_call): the loops do the same whether the
 * preload library is there or not, and the real allocator's work per call is the same in
 * both runs (the same sizes, freed and taken again from the same lists), so the difference
 * is the hooks' own instructions. The process has had a second thread before the loops,
 * traced or not: glibc's allocator takes other paths once a process has had one (the
 * tracer's writer thread, which callgrind needs: it cannot run the writer process). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "victim.h"

#define HOT_CALLS 100000u

/* Where the loops' blocks go, so that nothing is optimised away. */
static void *volatile sink;
static volatile size_t total;

/* Sizes of 16 to 79 bytes, as programs ask for most. */
static size_t size_of(unsigned i) {
  return 16u + (i & 63u);
}

__attribute__((noinline)) static void hot_malloc_free(void) {
  for (unsigned i = 0; i < HOT_CALLS; i++) {
    void *const p = malloc(size_of(i));
    sink = p;
    free(p);
  }
}

__attribute__((noinline)) static void hot_calloc_free(void) {
  for (unsigned i = 0; i < HOT_CALLS; i++) {
    void *const p = calloc(1, size_of(i));
    sink = p;
    free(p);
  }
}

/* A block grown and shrunk in place (one chunk of the real allocator). */
__attribute__((noinline)) static void hot_realloc(void) {
  void *p = malloc(96);
  for (unsigned i = 0; i < HOT_CALLS; i++) {
    p = realloc(p, (i & 1u) ? 96u : 48u);
    sink = p;
  }
  free(p);
}

__attribute__((noinline)) static void hot_usable_size(void) {
  void *const p = malloc(40);
  size_t n = 0;
  for (unsigned i = 0; i < HOT_CALLS; i++) n += malloc_usable_size(p);
  total = n;
  free(p);
}

static void *idle_thread(void *arg) {
  return arg;
}

/* A block at the start of a page (jemalloc gives every block of a page or more so): the
 * hooks cannot read the 16 bytes before it. */
__attribute__((noinline)) static void hot_page_usable_size(void) {
  void *const p = memalign(4096, 64);
  size_t n = 0;
  for (unsigned i = 0; i < HOT_CALLS; i++) n += malloc_usable_size(p);
  total = n;
  free(p);
}

int main(void) {
  victim_quiet_stdio();
  pthread_t thread;
  if (pthread_create(&thread, NULL, idle_thread, NULL) != 0 || pthread_join(thread, NULL) != 0)
    return 2;
  /* Once each first: a thread's first allocation while sampling draws its countdown. */
  free(malloc(16));
  hot_malloc_free();
  hot_calloc_free();
  hot_realloc();
  hot_usable_size();
  hot_page_usable_size();
  printf("calls %u each\n", HOT_CALLS);
  return 0;
}
