/* SPDX-License-Identifier: MIT */
/* The tracer's side stack: see side_stack.h. */
#include "side_stack.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tracer_internal.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CTS_NO_SIDE_STACK 1 /* the sanitizers track the stack they run on */
#endif
#endif
#else
#define CTS_NO_SIDE_STACK 1
#endif

#ifndef CTS_NO_SIDE_STACK

/* 64 KiB: dlopen of libunwind with its relocations takes ~10 KB, the spawn ~10 KB; the
 * rest is room for a signal handler that runs meanwhile. Cold: an image that never samples
 * never touches it (tracer_internal.h, CTS__COLD_BSS). */
static CTS__COLD_BSS _Alignas(64) unsigned char side_stack[64 * 1024];
static atomic_flag side_stack_taken = ATOMIC_FLAG_INIT;

/* fn(arg) with %rsp at `top` (16-byte aligned: the call's return address makes the callee's
 * entry 8 mod 16, as the ABI wants), and %rsp back after. %rbx (callee-saved) keeps the
 * caller's stack pointer; every caller-saved register is declared clobbered. The red zone
 * below the caller's %rsp is untouched: the call pushes on the side stack. */
static void call_with_stack(void (*fn)(void *), void *arg, void *top) {
  __asm__ volatile(
      "mov %%rsp, %%rbx\n\t"
      "mov %[top], %%rsp\n\t"
      "call *%[fn]\n\t"
      "mov %%rbx, %%rsp"
      : "+D"(arg)
      : [fn] "r"(fn), [top] "r"(top)
      : "rax", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "rbx", "xmm0", "xmm1", "xmm2", "xmm3",
        "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
        "xmm15", "memory", "cc");
}

void cts__call_on_side_stack(void (*fn)(void *), void *arg) {
  const uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  const bool on_it = sp >= (uintptr_t)side_stack && sp < (uintptr_t)side_stack + sizeof side_stack;
  if (on_it || atomic_flag_test_and_set_explicit(&side_stack_taken, memory_order_acquire)) {
    fn(arg);
    return;
  }
  call_with_stack(fn, arg, side_stack + sizeof side_stack);
  atomic_flag_clear_explicit(&side_stack_taken, memory_order_release);
}

void cts__side_stack_atfork_child(void) {
  atomic_flag_clear_explicit(&side_stack_taken, memory_order_relaxed);
}

void cts__call_with_stack_room(void (*fn)(void *), void *arg, size_t room) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_STACK, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= room) {
    fn(arg);
    return;
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  room = (room + page - 1) / page * page;
  unsigned char *const map = mmap(NULL, room + page, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) {
    fn(arg);
    return;
  }
  mprotect(map, page, PROT_NONE); /* an overflow faults, as at a stack's end */
  call_with_stack(fn, arg, map + page + room);
  munmap(map, room + page);
}

#else

void cts__call_on_side_stack(void (*fn)(void *), void *arg) {
  fn(arg);
}

void cts__side_stack_atfork_child(void) {}

void cts__call_with_stack_room(void (*fn)(void *), void *arg, size_t room) {
  (void)room;
  fn(arg);
}

#endif
