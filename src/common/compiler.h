/* SPDX-License-Identifier: MIT */
/* Compiler hints, in one place. Add a hint only where a benchmark shows it helps. */
#ifndef CTS_COMPILER_H
#define CTS_COMPILER_H

#if defined(__GNUC__)
#define CTS_LIKELY(x)    __builtin_expect(!!(x), 1)
#define CTS_UNLIKELY(x)  __builtin_expect(!!(x), 0)
#define CTS_NOINLINE     __attribute__((noinline))
#define CTS_FORCE_INLINE inline __attribute__((always_inline))
#define CTS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define CTS_UNUSED       __attribute__((unused))
#else
#define CTS_LIKELY(x)   (x)
#define CTS_UNLIKELY(x) (x)
#define CTS_NOINLINE
#define CTS_FORCE_INLINE inline
#define CTS_PRINTF(f, a)
#define CTS_UNUSED
#endif

#define CTS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* CTS_COMPILER_H */
