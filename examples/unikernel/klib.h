/* SPDX-License-Identifier: MIT */
/* The kernel's own memcpy & co. (klib.c): the C library functions the compiler and the core
 * codecs may call. No libc is linked. */
#ifndef UNIKERNEL_KLIB_H
#define UNIKERNEL_KLIB_H

#include <stddef.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
void *memchr(const void *s, int c, size_t n);
size_t strlen(const char *s);

#endif /* UNIKERNEL_KLIB_H */
