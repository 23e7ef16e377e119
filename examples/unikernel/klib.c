/* SPDX-License-Identifier: MIT */
/* The few C library functions that compilers and the core codecs expect of any freestanding
 * environment (tests/core/check_freestanding.cmake lists them). Written with string
 * instructions so that the compiler cannot turn a loop back into a call to itself. */
#include "klib.h"

#include <stdint.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
  void *d = dst;
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
  return dst;
}

void *memmove(void *dst, const void *src, size_t n) {
  if ((uintptr_t)dst <= (uintptr_t)src || (uintptr_t)dst >= (uintptr_t)src + n)
    return memcpy(dst, src, n);
  /* Overlapping with dst above src: copy backwards. */
  void *d = (char *)dst + n - 1;
  const void *s = (const char *)src + n - 1;
  __asm__ volatile("std; rep movsb; cld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  return dst;
}

void *memset(void *dst, int c, size_t n) {
  void *d = dst;
  __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
  return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

void *memchr(const void *s, int c, size_t n) {
  const unsigned char *p = s;
  for (size_t i = 0; i < n; i++)
    if (p[i] == (unsigned char)c) return (void *)(p + i);
  return NULL;
}

size_t strlen(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  return n;
}
