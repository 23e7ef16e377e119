/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so, libc's syscall() function: libseccomp's seccomp_load installs its
 * filter with the seccomp system call through syscall(), which no other hook sees (the
 * prctl hook sees PR_SET_SECCOMP only). A filter of libseccomp's usual shape kills by
 * default and allows a list; the lazy writer's first sample then made the writer process
 * (clone, exec) or asked prctl(PR_GET_SECCOMP) under it, and the program was killed. A
 * SECCOMP_SET_MODE_FILTER or _STRICT here first makes a waiting lazy session's writer, as
 * the prctl hook does (cts__tracer_before_confinement); every call then goes to the kernel
 * as glibc's syscall() sends it: six arguments read whether given or not, -1 and errno on
 * an error, not a cancellation point. Any other number costs one compare more than glibc's.
 * Only where the system call instruction is known (x86-64, AArch64): elsewhere libc's
 * syscall() is not interposed (and such filters are seen at the first sample only). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload_internal.h"

#if defined(__x86_64__) || defined(__aarch64__)

/* A system call's error: errno, and -1. Out of line: the hook's own path saves nothing. */
static CTS_NOINLINE long failed(long result) {
  errno = (int)-result;
  return -1;
}

/* The system call itself, as glibc's syscall() makes it (its own syscall.S). */
static inline long raw_system_call(long number, long a1, long a2, long a3, long a4, long a5,
                                   long a6) {
  long result;
#if defined(__x86_64__)
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
#else
  register long x8 __asm__("x8") = number;
  register long x0 __asm__("x0") = a1;
  register long x1 __asm__("x1") = a2;
  register long x2 __asm__("x2") = a3;
  register long x3 __asm__("x3") = a4;
  register long x4 __asm__("x4") = a5;
  register long x5 __asm__("x5") = a6;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  result = x0;
#endif
  return CTS_UNLIKELY((unsigned long)result > -4096UL) ? failed(result) : result;
}

/* syscall() itself, under another name in C: its six arguments taken as named ones, in
 * the registers (and the stack slot) a variadic call puts them in on these two ABIs, as
 * glibc's syscall.S reads them. As `long syscall(long, ...)` it read them with va_arg, its
 * register save area spilled on every call: 32 instructions a call against glibc's 11
 * (callgrind); so about 13. */
CTS__PRELOAD_EXPORT long cts__syscall_hook(long number, long a1, long a2, long a3, long a4, long a5,
                                           long a6) __asm__("syscall");

CTS__PRELOAD_EXPORT long cts__syscall_hook(long number, long a1, long a2, long a3, long a4, long a5,
                                           long a6) {
  /* A sandbox's filter may forbid the clone and exec that make the writer process. */
  if (CTS_UNLIKELY(number == SYS_seccomp) &&
      (a1 == SECCOMP_SET_MODE_FILTER || a1 == SECCOMP_SET_MODE_STRICT))
    cts__tracer_before_seccomp();
  return raw_system_call(number, a1, a2, a3, a4, a5, a6);
}

#endif
