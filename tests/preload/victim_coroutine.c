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
 *                            general register: whatever it held is saved); prints "done"
 *   victim_coroutine steady [BYTES]
 *                            as `later`, the coroutine run twice on the same stack (the
 *                            first run takes the one-off work: the loader's lazy binding),
 *                            "used N" of the second, its allocations made through a frame
 *                            of code without call frame information (as Boost.Context's
 *                            assembly entry frames: the mixed unwinder hands such a walk
 *                            over to libunwind)
 *   With BYTES, the coroutine's stack is BYTES (else 256 KiB) whose lowest byte is just above
 *   an inaccessible page: a sample that takes more than the program left of it is killed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define STACK_BYTES (256 * 1024)
#define UNTOUCHED   0xa5

static ucontext_t main_context, coroutine_context;
static unsigned char coroutine_array[STACK_BYTES];
static void *volatile kept;
static int through_no_cfi;

#if defined(__x86_64__)
/* Calls fn() from a function that has no call frame information (no .cfi directives, so
 * no FDE covers it) and keeps no frame pointer: what Boost.Context's make_fcontext
 * trampolines are to an unwinder. */
void call_without_cfi(void (*fn)(void));
__asm__(
    ".text\n"
    ".globl call_without_cfi\n"
    ".type call_without_cfi, @function\n"
    "call_without_cfi:\n"
    "  push %rbx\n" /* (%rsp 16-byte aligned at the call, as the ABI wants) */
    "  call *%rdi\n"
    "  pop %rbx\n"
    "  ret\n"
    ".size call_without_cfi, .-call_without_cfi\n");
#else
static void call_without_cfi(void (*fn)(void)) {
  fn();
}
#endif

/* With frame pointers (the victims' options): the walk climbs to the coroutine's entry. */
static __attribute__((noinline)) void allocate(size_t size) {
  kept = malloc(size);
  free(kept);
}

static void allocate_some(void) {
  for (size_t i = 0; i < 8; i++) allocate(40 + i);
}

static void coroutine(void) {
  if (through_no_cfi)
    call_without_cfi(allocate_some);
  else
    allocate_some();
}

/* `bytes` of stack whose lowest byte is just above an inaccessible page; NULL if it cannot
 * be had. */
static unsigned char *guarded_stack(size_t bytes) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t pages = (bytes + page - 1) / page;
  unsigned char *const map =
      mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || mprotect(map, page, PROT_NONE) != 0) return NULL;
  return map + page;
}

/* Runs the coroutine on `stack`, filled with UNTOUCHED first; 0, else 2. */
static int run_coroutine(unsigned char *stack, size_t stack_bytes, int stray) {
  memset(stack, UNTOUCHED, stack_bytes);
  if (getcontext(&coroutine_context) != 0) return 2;
  coroutine_context.uc_stack.ss_sp = stack;
  coroutine_context.uc_stack.ss_size = stack_bytes;
  coroutine_context.uc_link = &main_context;
  makecontext(&coroutine_context, coroutine, 0);
#if defined(__x86_64__)
  /* Mapped nowhere: between the heap and the stack, below the libraries. */
  if (stray) coroutine_context.uc_mcontext.gregs[REG_RBP] = (greg_t)0x7e0000001000;
#endif
  if (swapcontext(&main_context, &coroutine_context) != 0) return 2;
  return 0;
}

int main(int argc, char **argv) {
  const char *const mode = argc > 1 ? argv[1] : "first";
  const int first = strcmp(mode, "first") == 0, stray = strcmp(mode, "stray") == 0;
  through_no_cfi = strcmp(mode, "steady") == 0;
  const size_t stack_bytes = argc > 2 ? (size_t)strtoul(argv[2], NULL, 0) : STACK_BYTES;
  unsigned char *const coroutine_stack = argc > 2 ? guarded_stack(stack_bytes) : coroutine_array;
  if (!coroutine_stack || stack_bytes < 1024) return 2;
  /* glibc's malloc set up here, untraced (no word to sample): its first call takes ~3 KB
   * of stack, which would otherwise fall on the coroutine in one mode only. */
  allocate(0);
  if (!first) allocate(100);
  for (int run = through_no_cfi ? 2 : 1; run > 0; run--)
    if (run_coroutine(coroutine_stack, stack_bytes, stray) != 0) return 2;
  size_t untouched = 0;
  while (untouched < stack_bytes && coroutine_stack[untouched] == UNTOUCHED) untouched++;
  if (stray)
    printf("done\n");
  else
    printf("used %zu\n", stack_bytes - untouched);
  return 0;
}
