/* SPDX-License-Identifier: MIT */
/* Debug assertions for invariants that must hold whatever the input: ring bounds, ids,
 * ownership of packets and slots. Never for checking input (bad input gets an error
 * code, see docs/exit-codes.md).
 *
 * CTS_ASSERT(cond) is checked when CTS_CHECKS is 1: the dev, clang, asan, tsan and fuzz
 * presets set it (CMake option CTS_CHECKS, default ON unless the build type is
 * Release/RelWithDebInfo). Otherwise it compiles to nothing, but still type-checks its
 * argument, so release builds keep the hot paths as they are.
 *
 * A failed check writes "ctfscope: check failed: FILE:LINE: COND" to fd 2 and aborts
 * (hosted code), or traps (freestanding code, which has no write(2)). Safe in any thread
 * and in signal handlers; allocates nothing. */
#ifndef CTS_CHECK_H
#define CTS_CHECK_H

#ifndef CTS_CHECKS
#define CTS_CHECKS 0
#endif

#define CTS__STR2(x) #x
#define CTS__STR(x)  CTS__STR2(x)

#if __STDC_HOSTED__ && !defined(CTS_FREESTANDING)
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((noreturn, cold, unused)) static void cts__check_failed(const char *what) {
  static const char head[] = "ctfscope: check failed: ";
  ssize_t rc = write(2, head, sizeof head - 1);
  rc = write(2, what, strlen(what));
  rc = write(2, "\n", 1);
  (void)rc;
  abort();
}
#else
__attribute__((noreturn, cold, unused)) static inline void cts__check_failed(const char *what) {
  (void)what;
  __builtin_trap();
}
#endif

#if CTS_CHECKS
#define CTS_ASSERT(cond)                   \
  (__builtin_expect(!!(cond), 1) ? (void)0 \
                                 : cts__check_failed(__FILE__ ":" CTS__STR(__LINE__) ": " #cond))
#else
#define CTS_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif /* CTS_CHECK_H */
