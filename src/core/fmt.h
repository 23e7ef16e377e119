/* SPDX-License-Identifier: MIT */
/* A heap-free printf subset for the freestanding core (and for the preload library, which
 * must not call stdio). Supports %s %c %d %i %u %x with the l, ll and z modifiers, a
 * minimum width and '0' padding, and %%. Always NUL-terminates when size > 0 and returns
 * the length that was written (truncating silently). */
#ifndef CTS_FMT_H
#define CTS_FMT_H

#include <stdarg.h>
#include <stddef.h>

#include "../common/compiler.h"

size_t cts__vfmt(char *buf, size_t size, const char *fmt, va_list ap);
size_t cts__fmt(char *buf, size_t size, const char *fmt, ...) CTS_PRINTF(3, 4);

#endif /* CTS_FMT_H */
