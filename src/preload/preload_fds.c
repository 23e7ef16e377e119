/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so, the calls that close or replace descriptors: close, close_range,
 * closefrom, dup2, dup3. While a lazy session waits for its first sample (no writer process
 * yet: docs/tracing.md, "The lazy writer"), its rings' memfd and its trace file are the
 * program's descriptors alone; a program that closes every descriptor at its start (a
 * daemon's closefrom(3), a loop of close) would take them with it, and its trace would end
 * with no samples. Such a call first makes the writer process, which then holds copies of
 * its own, as a writer made at the session's start did; the call then goes ahead unchanged
 * (same result, errno, and cancellation point). Otherwise each hook costs one load and a
 * compare before its tail call. glibc's own closes (fclose, daemon, posix_spawn's child)
 * are not seen: none of them closes a descriptor it did not open, or one above 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "preload_internal.h"

/* glibc's exported aliases of close and dup2: bound like any other call, with no look-up
 * of our own at the first call (most programs close something at their start). */
extern int __close(int fd);
extern int __dup2(int old_fd, int new_fd);

CTS__PRELOAD_EXPORT int close(int fd) {
  if (CTS_UNLIKELY(cts__tracer_fds_watched()))
    cts__tracer_before_fds_close((unsigned)fd, (unsigned)fd);
  return __close(fd);
}

/* Nothing is closed when both are the same descriptor. */
CTS__PRELOAD_EXPORT int dup2(int old_fd, int new_fd) {
  if (CTS_UNLIKELY(cts__tracer_fds_watched()) && old_fd != new_fd)
    cts__tracer_before_fds_close((unsigned)new_fd, (unsigned)new_fd);
  return __dup2(old_fd, new_fd);
}

/* The three below have no exported alias: their real functions are looked up at their
 * first call (few programs call them, once). */
CTS__PRELOAD_EXPORT int dup3(int old_fd, int new_fd, int flags) {
  if (CTS_UNLIKELY(cts__tracer_fds_watched()) && old_fd != new_fd)
    cts__tracer_before_fds_close((unsigned)new_fd, (unsigned)new_fd);
  int (*real)(int, int, int);
  cts__lazy_real(CTS__LAZY_dup3, &real, sizeof real);
  if (!real) return errno = ENOSYS, -1;
  return real(old_fd, new_fd, flags);
}

/* CLOSE_RANGE_CLOEXEC closes nothing now (and an exec ends a waiting session's trace). */
CTS__PRELOAD_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  if (CTS_UNLIKELY(cts__tracer_fds_watched()) && !(flags & CLOSE_RANGE_CLOEXEC))
    cts__tracer_before_fds_close(first, last);
  int (*real)(unsigned, unsigned, int);
  cts__lazy_real(CTS__LAZY_close_range, &real, sizeof real);
  if (!real) return errno = ENOSYS, -1;
  return real(first, last, flags);
}

/* glibc takes a negative lowest descriptor for 0. */
CTS__PRELOAD_EXPORT void closefrom(int lowest) {
  if (CTS_UNLIKELY(cts__tracer_fds_watched()))
    cts__tracer_before_fds_close(lowest < 0 ? 0u : (unsigned)lowest, UINT_MAX);
  void (*real)(int);
  cts__lazy_real(CTS__LAZY_closefrom, &real, sizeof real);
  if (real) real(lowest);
}
