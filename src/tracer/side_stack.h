/* SPDX-License-Identifier: MIT */
/* A stack of the tracer's own for the sampling path's one-off work.
 *
 * A sample runs on whatever stack the program allocates from, and programs allocate from
 * small ones: a coroutine's (makecontext, Boost.Context: often 8-64 KiB, malloc'd, with the
 * allocator's own data right below), a sigaltstack handler's. The sampling path's steady
 * state takes a few hundred bytes there (a frame-pointer walk; libunwind's and the mixed
 * walk's context, cursor and rules go to the thread's walk stack, below); its one-off work took
 * much more at one sample it could not choose: the session's first sample (the lazy writer's spawn,
 * which reads /proc/self/status into two 4 KiB buffers: ~9 KB), a thread's first (its stack's
 * extent: a 4 KiB buffer for /proc/self/maps) and the first walk that needs libunwind (its dlopen).
 * Boost.Coroutine2 with 8 KiB stacks was fine untraced and died at the default rate
 * ("munmap_chunk(): invalid pointer": the overflow wrote over the block's malloc header). That work
 * runs here instead.
 *
 * Thread-safety: any thread, any time (inside the allocator). One stack for the process,
 * taken by a flag, not a lock: a second thread that finds it taken, a call made from the
 * side stack itself, or a program whose signal handler left it with a longjmp (the flag
 * then stays set), run `fn` on their own stack, as before. Errors: none. */
#ifndef CTS_TRACER_SIDE_STACK_H
#define CTS_TRACER_SIDE_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracer_internal.h"

/* The side stack and the walk stacks: x86-64, not under a sanitizer (they track the stack
 * they run on). */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define CTS__HAVE_WALK_STACK 1
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#undef CTS__HAVE_WALK_STACK
#define CTS__HAVE_WALK_STACK 0
#endif
#endif
#else
#define CTS__HAVE_WALK_STACK 0
#endif

/* Whether sp lies on the process's initial stack, which grows on demand up to RLIMIT_STACK's
 * soft value: within 1 MiB below its top (__libc_stack_end, the loader's; the kernel keeps
 * every other mapping a guard gap of 1 MiB away from it). A thread's stack, a coroutine's or
 * a sigaltstack is not. Any thread, any time. */
static inline bool cts__on_initial_stack(uintptr_t sp) {
  extern void *__libc_stack_end;
  const uintptr_t top = (uintptr_t)__libc_stack_end;
  return sp <= top && top - sp < ((uintptr_t)1 << 20);
}

/* Runs fn(arg) on the side stack when it is free (x86-64, not under a sanitizer); when
 * another thread holds it, on the calling thread's walk stack (below) unless the caller is
 * near its own stack's top (the work then has the room it had before) or the walk stack is
 * in use or cannot be had; else on the caller's stack. Returns when fn has. fn must not
 * leave by longjmp. */
void cts__call_on_side_stack(void (*fn)(void *), void *arg);

/* Runs fn(arg) where the stack has `room` bytes: in place when the caller's stack allows
 * that much below its frame (the process's initial stack: RLIMIT_STACK's soft value; another
 * thread's: its size, pthread_getattr_np), else on a stack of its own of `room` bytes (a
 * private mapping, pages touched as used, an inaccessible page under it), unmapped after
 * (x86-64; elsewhere in place). For a process's long-lived code that needs a stack of the
 * usual size whatever stack it was forked from (the writer process: `ulimit -s 128`, which
 * sets the hard limit too, killed it at its first packet; so did a session started through
 * the API from a thread with a 64 KiB stack). One getrlimit on the initial stack, else
 * pthread_getattr_np (one allocation); a mapping and an mprotect where the room is less.
 * fn may not return (then nothing is unmapped). Call it where allocating is safe (the
 * writer process). */
void cts__call_with_stack_room(void (*fn)(void *), void *arg, size_t room);

/* Runs fn(arg) on the calling thread's walk stack and returns true; false (fn not run) when
 * there is none to be had: the thread's is in use (a signal handler that samples while a
 * walk is on it, a handler that left it with a longjmp: the flag then stays set), its
 * mapping could not be made, or no such stack on this target (not x86-64, a sanitizer).
 * For a libunwind walk that starts on a stack of the program's that is not the thread's own
 * (a coroutine's, a sigaltstack handler's): it takes ~5 KB of stack (its context, cursor and
 * steps), more than a coroutine's stack may have left (Boost.Coroutine2 with 6 KiB stacks
 * died at --rate 1).
 *
 * The stack: one per thread that needs one, made at its first such call (one mmap and one
 * mprotect: WALK_STACK_BYTES, side_stack.c, of address space with an inaccessible page under
 * it, pages touched as used), kept for the thread's later walks. At the thread's exit (a
 * pthread key's destructor) and in a fork's child (every thread's but the forking one's) it
 * goes back to a process-wide list that the next thread to need one takes it from: never
 * unmapped (a thread exiting while another walks cannot race an munmap), so the process
 * holds as many as threads ever needed one at once. A signal handler that runs while the
 * walk is there runs on it too (without a sigaltstack of the program's): it gets what the
 * walk left of the stack, ~1 MiB. The frame that switches stacks has call frame
 * information leading back to the caller's: an unwinder that starts on the walk stack goes
 * on into the caller's frames. fn must not leave by longjmp. Thread-safety: any thread; a
 * stack is its thread's alone, the list lock-free. Errors: none (false). */
#if CTS__HAVE_WALK_STACK
/* The calling thread's walk stack, made or taken from the list (into t->walk_stack); false
 * if none can be had. cts__call_on_walk_stack's first. */
bool cts__walk_stack_claim(cts__thread_t *t);
/* fn(arg) with %rsp at `top`, from a frame whose call frame information leads back to the
 * caller's (side_stack.c). */
void cts__call_framed(void *arg, void (*fn)(void *), void *top)
    __attribute__((visibility("hidden")));

/* Inline: the switching frame is then the walk's caller's own, one frame less for libunwind
 * to step through back into the program (~100 instructions a walk). */
static CTS_FORCE_INLINE bool cts__call_on_walk_stack(void (*fn)(void *), void *arg) {
  cts__thread_t *const t = &cts__thread;
  if (CTS_UNLIKELY(!t->walk_stack) && !cts__walk_stack_claim(t)) return false;
  if (t->walk_stack_busy) return false;
  t->walk_stack_busy = true;
  __atomic_signal_fence(__ATOMIC_SEQ_CST); /* set before the switch, as a handler sees it */
  cts__call_framed(arg, fn, (void *)((uintptr_t)t->walk_stack & ~(uintptr_t)15));
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t->walk_stack_busy = false;
  return true;
}
#else
static inline bool cts__call_on_walk_stack(void (*fn)(void *), void *arg) {
  (void)fn;
  (void)arg;
  return false;
}
#endif

/* After a fork, in the child: the side stack free (the thread that held it is not there),
 * and the walk stacks of every thread but the calling one. */
void cts__side_stack_atfork_child(void);

/* Makes the walk stacks' pthread key and binds, at a session's start (on the side stack),
 * what a walk stack's claim and cts__call_on_side_stack's choice of stack call: a thread
 * whose first sample comes from a coroutine while another thread holds the side stack
 * claims its walk stack in place (cts__call_on_side_stack), where the loader's lazy binding
 * of a first call saves the vector registers (~2.8 KB with AVX-512). No system call. Call
 * it under the control lock. Errors: none (without the key no walk stack is made: walks
 * run in place, as where none can be had). */
void cts__walk_stack_prepare(void);

#endif /* CTS_TRACER_SIDE_STACK_H */
