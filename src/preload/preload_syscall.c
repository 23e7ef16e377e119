/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so, libc's syscall() function: libseccomp's seccomp_load installs its
 * filter with the seccomp system call through syscall(), which no other hook sees (the
 * prctl hook sees PR_SET_SECCOMP only). A filter of libseccomp's usual shape kills by
 * default and allows a list; the lazy writer's first sample then made the writer process
 * (clone, exec) or asked prctl(PR_GET_SECCOMP) under it, and the program was killed. A
 * SECCOMP_SET_MODE_FILTER or _STRICT here first makes a waiting lazy session's writer, as
 * the prctl hook does (cts__tracer_before_confinement). A raw execve or execveat (a
 * program's own `syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH)`) goes through
 * the exec hooks, as glibc's execve does: the next image's trace was lost without a word
 * (the exec hooks make their own system calls by cts__raw_system_call, not by syscall(),
 * which would come back here). Every other call goes to the kernel
 * as glibc's syscall() sends it: six arguments read whether given or not, -1 and errno on
 * an error, not a cancellation point. Any other number costs a bit test more than glibc's.
 * Only where the system call instruction is known (x86-64, AArch64): elsewhere libc's
 * syscall() is not interposed (and such filters are seen at the first sample only). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload_internal.h"

#if defined(__x86_64__) || defined(__aarch64__)

/* The numbers the hook does more than pass on: one bit each, by the number's low 6 bits,
 * tested in one instruction (bt); a number that shares a bit (x86-64: 2, 66, 123, ...)
 * takes the out-of-line path and is passed on there. */
#define HOOKED_BIT(number) (1ULL << ((number)&63))
static const unsigned long long hooked_numbers =
    HOOKED_BIT(SYS_seccomp) | HOOKED_BIT(SYS_execve) | HOOKED_BIT(SYS_execveat);

/* The numbers whose bit is set in hooked_numbers: a seccomp filter's, and the execs, which
 * go to the exec hooks (preload_exec.c: cts__exec_system_call) so that the next image's
 * trace is not lost without a word; any other to the kernel. */
static CTS_NOINLINE long hooked_call(long number, long a1, long a2, long a3, long a4, long a5,
                                     long a6) {
  /* A sandbox's filter may forbid the clone and exec that make the writer process. */
  if (number == SYS_seccomp && (a1 == SECCOMP_SET_MODE_FILTER || a1 == SECCOMP_SET_MODE_STRICT))
    cts__tracer_before_seccomp();
  if (number == SYS_execve || number == SYS_execveat)
    return cts__exec_system_call(number, a1, a2, a3, a4, a5);
  return cts__raw_system_call(number, a1, a2, a3, a4, a5, a6);
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
  if (CTS_UNLIKELY((hooked_numbers >> ((unsigned long)number & 63)) & 1))
    return hooked_call(number, a1, a2, a3, a4, a5, a6);
  return cts__raw_system_call(number, a1, a2, a3, a4, a5, a6);
}

#endif
