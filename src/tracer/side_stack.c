/* SPDX-License-Identifier: MIT */
/* The tracer's side stack: see side_stack.h. */
#define _GNU_SOURCE
#include "side_stack.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "raw_system_call.h"
#include "tracer_internal.h"

#if CTS__HAVE_WALK_STACK

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

/* fn(arg) on the side stack and true when it is free; false, fn not run, when it is taken
 * (by another thread, or by this one: a call from the side stack's own work, a signal
 * handler that interrupted it there). */
static bool call_on_free_side_stack(void (*fn)(void *), void *arg) {
  if (atomic_flag_test_and_set_explicit(&side_stack_taken, memory_order_acquire)) return false;
  call_with_stack(fn, arg, side_stack + sizeof side_stack);
  atomic_flag_clear_explicit(&side_stack_taken, memory_order_release);
  return true;
}

/* Whether `sp` is near the top of the calling thread's own stack, where the one-off work
 * has the room it had before there was a side stack: on the process's initial stack or
 * within 16 KiB below the thread's descriptor (glibc puts it at the top of every thread's
 * stack). */
static bool near_own_stack_top(uintptr_t sp) {
  const uintptr_t self = (uintptr_t)pthread_self();
  return cts__on_initial_stack(sp) || (sp < self && self - sp < 16384);
}

void cts__call_on_side_stack(void (*fn)(void *), void *arg) {
  const uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  const bool on_it = sp >= (uintptr_t)side_stack && sp < (uintptr_t)side_stack + sizeof side_stack;
  if (on_it) {
    fn(arg);
    return;
  }
  if (call_on_free_side_stack(fn, arg)) return;
  /* Taken by another thread: threads that start coroutines at once make their first
   * samples at once. Off the thread's own stack the work goes to the thread's walk stack,
   * not in place: 4 threads each running a coroutine on a 5 KiB stack died at --rate 1
   * (the thread's first sample read /proc/self/maps into a 4 KiB buffer there). */
  if (near_own_stack_top(sp) || !cts__call_on_walk_stack(fn, arg)) fn(arg);
}

/* ---- walk stacks -------------------------------------------------------------------------- */

/* 1 MiB of address space: a libunwind walk takes ~5-10 KB (its first, the dlopen of the
 * library, ~10 KB more); the rest is for a program's signal handler that runs meanwhile,
 * which gets about what a thread of glibc's smallest default would. Pages touched as used. */
#define WALK_STACK_BYTES ((size_t)1 << 20)

/* A walk stack's header, in its top bytes (the stack grows down from below it). Made once,
 * pushed on walk_stacks once, never removed nor unmapped. */
typedef struct cts__walk_stack {
  struct cts__walk_stack *next;
  atomic_bool owned; /* by a live thread (cts__thread.walk_stack) */
} walk_stack_t;

static _Atomic(walk_stack_t *) walk_stacks; /* every one made */
/* Made at the first session's start (cts__walk_stack_prepare, under the control lock), not
 * by pthread_once at the first claim: glibc's pthread_once wakes waiters with a futex call
 * after the first, and a claim may run in place, where a first call's binding would not fit. */
static pthread_key_t walk_stack_key;
static atomic_bool walk_stack_key_ok;

/* The thread exits: its walk stack goes back to the list. */
static void walk_stack_release(void *p) {
  walk_stack_t *const w = p;
  if (cts__thread.walk_stack == w) cts__thread.walk_stack = NULL;
  atomic_store_explicit(&w->owned, false, memory_order_release);
}

/* A walk stack for the calling thread: one a thread left, else a new mapping; NULL if
 * none can be had. */
static walk_stack_t *walk_stack_claim(void) {
  if (!atomic_load_explicit(&walk_stack_key_ok, memory_order_acquire))
    return NULL; /* it could never go back: not made */
  walk_stack_t *w = atomic_load_explicit(&walk_stacks, memory_order_acquire);
  for (; w; w = w->next) {
    bool unowned = false;
    if (!atomic_load_explicit(&w->owned, memory_order_relaxed) &&
        atomic_compare_exchange_strong(&w->owned, &unowned, true))
      break;
  }
  if (!w) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *const map = mmap(NULL, page + WALK_STACK_BYTES, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (map == MAP_FAILED) return NULL;
    /* an overflow faults, as at a stack's end (a system call without libc's wrapper, whose
     * first call's binding would take ~2.8 KB where this runs in place) */
    cts__raw_system_call(SYS_mprotect, (long)map, (long)page, PROT_NONE, 0, 0, 0);
    w = (walk_stack_t *)(map + page + WALK_STACK_BYTES - sizeof *w);
    atomic_init(&w->owned, true);
    w->next = atomic_load_explicit(&walk_stacks, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&walk_stacks, &w->next, w, memory_order_release,
                                                  memory_order_relaxed)) {}
  }
  pthread_setspecific(walk_stack_key, w);
  return w;
}

/* fn(arg) with %rsp at `top` (16-byte aligned), from a frame whose call frame information
 * says where the caller's is: its CFA is %rbp + 16, %rbp pointing at the frame record it
 * pushed on the caller's stack. An unwinder that starts on the new stack (libunwind's fast
 * path takes such a frame as a standard one) steps through it back into the caller's
 * frames. A function of its own, not inline asm in a C one: the enclosing function's call
 * frame information would not know of the switch. */
void cts__call_framed(void *arg, void (*fn)(void *), void *top)
    __attribute__((visibility("hidden")));
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl cts__call_framed\n"
    ".hidden cts__call_framed\n"
    ".type cts__call_framed, @function\n"
    "cts__call_framed:\n"
    "  .cfi_startproc\n"
    "  push %rbp\n"
    "  .cfi_def_cfa_offset 16\n"
    "  .cfi_offset %rbp, -16\n"
    "  mov %rsp, %rbp\n"
    "  .cfi_def_cfa_register %rbp\n"
    "  mov %rdx, %rsp\n"
    "  call *%rsi\n"
    "  mov %rbp, %rsp\n"
    "  pop %rbp\n"
    "  .cfi_def_cfa %rsp, 8\n"
    "  ret\n"
    "  .cfi_endproc\n"
    ".size cts__call_framed, .-cts__call_framed\n");

static void walk_stack_claim_on_side_stack(void *claimed) {
  *(walk_stack_t **)claimed = walk_stack_claim();
}

bool cts__walk_stack_claim(cts__thread_t *t) {
  /* one-off work (and the loader's lazy binding of what it calls: ~3 KB) on the side
   * stack, as the thread's other firsts */
  walk_stack_t *w = NULL;
  /* (in place when the side stack is taken: cts__call_on_side_stack would come back here) */
  if (!call_on_free_side_stack(walk_stack_claim_on_side_stack, &w)) w = walk_stack_claim();
  t->walk_stack = w;
  return w != NULL;
}

static void walk_stack_prepare_on_side_stack(void *unused) {
  (void)unused;
  if (!atomic_load_explicit(&walk_stack_key_ok, memory_order_relaxed) &&
      pthread_key_create(&walk_stack_key, walk_stack_release) == 0)
    atomic_store_explicit(&walk_stack_key_ok, true, memory_order_release);
  if (atomic_load_explicit(&walk_stack_key_ok, memory_order_relaxed))
    pthread_setspecific(walk_stack_key, pthread_getspecific(walk_stack_key));
  (void)sysconf(_SC_PAGESIZE);
  /* (near_own_stack_top's; volatile: the call is const, it would be dropped) */
  volatile pthread_t self = pthread_self();
  (void)self;
}

void cts__walk_stack_prepare(void) {
  cts__call_on_side_stack(walk_stack_prepare_on_side_stack, NULL);
}

void cts__side_stack_atfork_child(void) {
  atomic_flag_clear_explicit(&side_stack_taken, memory_order_relaxed);
  /* The other threads are not in the child: their walk stacks are free, the calling
   * thread's its own still (a walk on it was not interrupted by the fork). */
  walk_stack_t *const mine = cts__thread.walk_stack;
  for (walk_stack_t *w = atomic_load_explicit(&walk_stacks, memory_order_acquire); w; w = w->next)
    if (w != mine) atomic_store_explicit(&w->owned, false, memory_order_relaxed);
}

/* Whether the stack the caller runs on has `room` bytes below its frame. The process's
 * initial stack (cts__on_initial_stack) grows to RLIMIT_STACK's soft value; any other thread's
 * is the size it was made with (pthread_getattr_np: the thread's descriptor, no file read;
 * one allocation, untraced in the tracer's processes), e.g. 64 KiB for a thread that
 * started a session through the API. */
static bool stack_has_room(size_t room) {
  const uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  if (cts__on_initial_stack(sp)) {
    struct rlimit lim;
    return getrlimit(RLIMIT_STACK, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY ||
           lim.rlim_cur >= room;
  }
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return false;
  void *lowest = NULL;
  size_t size = 0;
  const bool known = pthread_attr_getstack(&attr, &lowest, &size) == 0;
  pthread_attr_destroy(&attr);
  return known && sp > (uintptr_t)lowest && sp - (uintptr_t)lowest >= room;
}

void cts__call_with_stack_room(void (*fn)(void *), void *arg, size_t room) {
  if (stack_has_room(room)) {
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

void cts__walk_stack_prepare(void) {}

void cts__side_stack_atfork_child(void) {}

void cts__call_with_stack_room(void (*fn)(void *), void *arg, size_t room) {
  (void)room;
  fn(arg);
}

#endif
