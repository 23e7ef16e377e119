/* SPDX-License-Identifier: MIT */
#include "fmt.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
  char *buf;
  size_t size, len;
} sink_t;

static void put(sink_t *s, char c) {
  if (s->len + 1 < s->size) s->buf[s->len] = c;
  s->len++;
}

static void put_uint(sink_t *s, uint64_t v, unsigned base, int width, char pad) {
  char tmp[24];
  int n = 0;
  do {
    const unsigned d = (unsigned)(v % base);
    tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    v /= base;
  } while (v);
  for (; width > n; width--) put(s, pad);
  while (n) put(s, tmp[--n]);
}

size_t cts__vfmt(char *buf, size_t size, const char *fmt, va_list ap) {
  sink_t s = {buf, size, 0};
  for (const char *p = fmt; *p; p++) {
    if (*p != '%') {
      put(&s, *p);
      continue;
    }
    p++;
    char pad = ' ';
    int width = 0, longs = 0;
    bool is_size = false;
    if (*p == '0') pad = '0', p++;
    while (*p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
    while (*p == 'l') longs++, p++;
    if (*p == 'z') is_size = true, p++;
    switch (*p) {
      case 's': {
        const char *str = va_arg(ap, const char *);
        if (!str) str = "(null)";
        while (*str) put(&s, *str++);
        break;
      }
      case 'c':
        put(&s, (char)va_arg(ap, int));
        break;
      case 'd':
      case 'i': {
        const int64_t v = is_size      ? (int64_t)va_arg(ap, ptrdiff_t)
                          : longs >= 2 ? va_arg(ap, long long)
                          : longs == 1 ? va_arg(ap, long)
                                       : va_arg(ap, int);
        if (v < 0) put(&s, '-');
        put_uint(&s, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, 10, width, pad);
        break;
      }
      case 'u':
      case 'x': {
        const uint64_t v = is_size      ? va_arg(ap, size_t)
                           : longs >= 2 ? va_arg(ap, unsigned long long)
                           : longs == 1 ? va_arg(ap, unsigned long)
                                        : va_arg(ap, unsigned);
        put_uint(&s, v, *p == 'x' ? 16 : 10, width, pad);
        break;
      }
      case '%':
        put(&s, '%');
        break;
      case '\0':
        p--;
        break;
      default:
        put(&s, '%');
        put(&s, *p);
        break;
    }
  }
  if (size) buf[s.len < size ? s.len : size - 1] = '\0';
  return s.len < size ? s.len : (size ? size - 1 : 0);
}

size_t cts__fmt(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const size_t n = cts__vfmt(buf, size, fmt, ap);
  va_end(ap);
  return n;
}
