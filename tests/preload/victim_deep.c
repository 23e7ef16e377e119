/* SPDX-License-Identifier: MIT */
/* A recursion DEPTH calls deep (the argument, default 0) that allocates BLOCKS blocks at
 * its bottom: their stacks are DEPTH frames deeper than one made at depth 0, so that a test
 * can put them exactly at the tracer's frame limit or past it. Prints its counts. */
#include "victim.h"

enum { BLOCKS = 3 };

/* Not inlined, and the barrier after the call keeps it from being a tail call: each level
 * is a frame of its own. */
__attribute__((noinline)) static void *dive(int depth) {
  if (depth <= 0) return malloc(48);
  void *const p = dive(depth - 1);
  __asm__ volatile("" ::: "memory");
  return p;
}

int main(int argc, char **argv) {
  victim_quiet_stdio();
  const int depth = argc > 1 ? atoi(argv[1]) : 0;
  int allocs = 0, frees = 0;
  for (int i = 0; i < BLOCKS; i++) {
    void *const p = dive(depth);
    if (!p) return 1;
    allocs++;
    free(p);
    frees++;
  }
  printf("allocs=%d frees=%d\n", allocs, frees);
  return 0;
}
