/* SPDX-License-Identifier: MIT */
/* The system call itself, as glibc's syscall() makes it (its own syscall.S), for the
 * preload library's own system calls that must not reach its interposed syscall()
 * (src/preload/preload_syscall.c), which hands an execve or execveat to the exec hooks: the
 * writer executable's exec (writer_process.c, from a vfork'd child on the program's memory
 * and a 16 KiB stack) and the execveat hook's own. -1 and errno on an error. Any thread;
 * async-signal-safe. Where the instruction is not known here (not x86-64 nor AArch64),
 * libc's syscall(), which the library does not interpose there. */
#ifndef CTS_TRACER_RAW_SYSTEM_CALL_H
#define CTS_TRACER_RAW_SYSTEM_CALL_H

#include <errno.h>
#include <unistd.h>

#include "../common/compiler.h"

#if defined(__x86_64__) || defined(__aarch64__)
/* errno = -result; returns -1. Out of line: the callers' own paths save nothing (a copy in
 * each file that includes this; unused in most). */
__attribute__((unused)) static CTS_NOINLINE long cts__raw_system_call_failed(long result) {
  errno = (int)-result;
  return -1;
}

static inline long cts__raw_system_call(long number, long a1, long a2, long a3, long a4, long a5,
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
  return CTS_UNLIKELY((unsigned long)result > -4096UL) ? cts__raw_system_call_failed(result)
                                                       : result;
}
#else
#define cts__raw_system_call(number, a1, a2, a3, a4, a5, a6) syscall(number, a1, a2, a3, a4, a5, a6)
#endif

#endif /* CTS_TRACER_RAW_SYSTEM_CALL_H */
