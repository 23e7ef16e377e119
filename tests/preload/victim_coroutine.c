/* SPDX-License-Identifier: MIT */
/* Victim: allocations on a coroutine's stack (makecontext on a static array, as coroutine
 * libraries run them on a malloc'd or mmap'd one).
 *
 *   victim_coroutine first   the coroutine makes the program's first allocations (the
 *                            session's first sample, the thread's first); prints "used N",
 *                            the bytes of the coroutine's stack that were ever written
 *   victim_coroutine later   main allocates first, then the coroutine: "used N" as above
 *   victim_coroutine stray   main allocates, then the coroutine, whose outermost frame's
 *                            saved %rbp is an address in no mapping (in -O2 code %rbp is a
 *                            general register: whatever it held is saved); prints "done" */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define STACK_BYTES (256 * 1024)
#define UNTOUCHED   0xa5

static ucontext_t main_context, coroutine_context;
static unsigned char coroutine_stack[STACK_BYTES];
static void *volatile kept;

/* With frame pointers (the victims' options): the walk climbs to the coroutine's entry. */
static __attribute__((noinline)) void allocate(size_t size) {
  kept = malloc(size);
  free(kept);
}

static void coroutine(void) {
  for (size_t i = 0; i < 8; i++) allocate(40 + i);
}

int main(int argc, char **argv) {
  const char *const mode = argc > 1 ? argv[1] : "first";
  const int first = strcmp(mode, "first") == 0, stray = strcmp(mode, "stray") == 0;
  /* glibc's malloc set up here, untraced (no word to sample): its first call takes ~3 KB
   * of stack, which would otherwise fall on the coroutine in one mode only. */
  allocate(0);
  if (!first) allocate(100);
  memset(coroutine_stack, UNTOUCHED, sizeof coroutine_stack);
  if (getcontext(&coroutine_context) != 0) return 2;
  coroutine_context.uc_stack.ss_sp = coroutine_stack;
  coroutine_context.uc_stack.ss_size = sizeof coroutine_stack;
  coroutine_context.uc_link = &main_context;
  makecontext(&coroutine_context, coroutine, 0);
#if defined(__x86_64__)
  /* Mapped nowhere: between the heap and the stack, below the libraries. */
  if (stray) coroutine_context.uc_mcontext.gregs[REG_RBP] = (greg_t)0x7e0000001000;
#endif
  if (swapcontext(&main_context, &coroutine_context) != 0) return 2;
  size_t untouched = 0;
  while (untouched < sizeof coroutine_stack && coroutine_stack[untouched] == UNTOUCHED) untouched++;
  if (stray)
    printf("done\n");
  else
    printf("used %zu\n", sizeof coroutine_stack - untouched);
  return 0;
}
