/* SPDX-License-Identifier: MIT */
/**
 * @file common.h
 * Types shared by every ctfscope component: injected allocator, write and clock
 * functions. These are what lets the core codecs run without an OS (unikernels,
 * firmware): the core never calls malloc, write(2) or a clock by itself.
 *
 * Ownership vocabulary used in all ctfscope headers:
 *  - `create` → the caller owns the result and must call the matching `destroy`.
 *  - `init`   → the caller provides the memory; `fini`/`close` releases what it holds.
 *  - `borrow` → valid until the parent is destroyed or until the next mutating call on it.
 *  - Returned strings are borrowed `const char *`.
 *  - Input buffers are never kept after a call returns unless the doc says so.
 */
#ifndef CTFSCOPE_COMMON_H
#define CTFSCOPE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(CTS_STATIC_BUILD)
#define CTS_API __attribute__((visibility("default")))
#else
#define CTS_API
#endif

/** Pass as a time argument to mean "read the injected clock now". */
#define CTS_TIME_NOW UINT64_MAX

/**
 * An injectable allocator. `alloc` returns NULL on failure; `free` accepts NULL.
 * `size` is passed back to `free` so that arena allocators need no headers.
 */
typedef struct cts_allocator {
  void *(*alloc)(void *user_data, size_t size);
  void (*free)(void *user_data, void *ptr, size_t size);
  void *user_data;
} cts_allocator_t;

/**
 * Writes all @p len bytes of @p buf somewhere (file, socket, shared page…).
 * Returns 0, or a negative error (a -errno or a CTS_E_* code) which the caller
 * propagates unchanged. A short write is the callback's business to finish.
 */
typedef int (*cts_write_cb)(void *user_data, const void *buf, size_t len);

/** Returns the current time in microseconds since the Unix epoch. */
typedef uint64_t (*cts_clock_us_cb)(void *user_data);

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_COMMON_H */
