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

/* 1 when built with AddressSanitizer (gcc says so with a macro, clang with a feature). */
#if defined(__SANITIZE_ADDRESS__)
#define CTS_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CTS_UNDER_ASAN 1
#endif
#endif
#ifndef CTS_UNDER_ASAN
#define CTS_UNDER_ASAN 0
#endif

#endif /* CTS_COMPILER_H */
