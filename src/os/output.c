/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void cts_out_init(cts_out_t *o, int fd) {
  o->fd = fd;
  o->err = 0;
  o->len = 0;
}

int cts_out_flush(cts_out_t *o) {
  const char *p = o->buf;
  size_t n = o->len;
  while (n && !o->err) {
    const ssize_t w = write(o->fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      o->err = -errno;
      break;
    }
    p += w;
    n -= (size_t)w;
  }
  o->len = 0;
  return o->err;
}

void cts_out_write(cts_out_t *o, const void *p, size_t n) {
  if (CTS_UNLIKELY(o->len + n > CTS_OUT_BUFSIZE)) {
    cts_out_flush(o);
    if (n > CTS_OUT_BUFSIZE) {
      const char *c = p;
      while (n) {
        const size_t k = n < CTS_OUT_BUFSIZE ? n : CTS_OUT_BUFSIZE;
        memcpy(o->buf, c, k);
        o->len = k;
        cts_out_flush(o);
        c += k;
        n -= k;
      }
      return;
    }
  }
  memcpy(o->buf + o->len, p, n);
  o->len += n;
}

void cts_out_str(cts_out_t *o, const char *s) {
  cts_out_write(o, s, strlen(s));
}

void cts_out_u64(cts_out_t *o, uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[19 - n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  cts_out_write(o, tmp + 20 - n, (size_t)n);
}

void cts_out_i64(cts_out_t *o, int64_t v) {
  if (v < 0) {
    cts_out_char(o, '-');
    cts_out_u64(o, (uint64_t)0 - (uint64_t)v);
  } else {
    cts_out_u64(o, (uint64_t)v);
  }
}

void cts_out_printf(cts_out_t *o, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    cts_out_write(o, tmp, (size_t)n);
    return;
  }
  char big[(size_t)n + 1];
  va_start(ap, fmt);
  vsnprintf(big, sizeof big, fmt, ap);
  va_end(ap);
  cts_out_write(o, big, (size_t)n);
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s) {
  const unsigned c = s[0];
  size_t n;
  unsigned min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0)
    n = 2, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    n = 4, min = 0x10000;
  else
    return 0;
  unsigned cp = c & (0x7Fu >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void cts_out_json_str(cts_out_t *o, const char *s) {
  static const char hex[] = "0123456789abcdef";
  cts_out_char(o, '"');
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      cts_out_char(o, '\\');
      cts_out_char(o, (char)c);
      p++;
    } else if (c < 0x20) {
      const char *esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
      if (esc) {
        cts_out_str(o, esc);
      } else {
        const char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        cts_out_write(o, u, 6);
      }
      p++;
    } else if (c < 0x80) {
      cts_out_char(o, (char)c);
      p++;
    } else {
      const size_t n = utf8_len(p);
      if (n) {
        cts_out_write(o, p, n);
        p += n;
      } else {
        cts_out_str(o, "\xEF\xBF\xBD");
        p++;
      }
    }
  }
  cts_out_char(o, '"');
}

void cts_out_xml_text(cts_out_t *o, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&':
        cts_out_str(o, "&amp;");
        break;
      case '<':
        cts_out_str(o, "&lt;");
        break;
      case '>':
        cts_out_str(o, "&gt;");
        break;
      case '"':
        cts_out_str(o, "&quot;");
        break;
      case '\'':
        cts_out_str(o, "&#39;");
        break;
      default:
        cts_out_char(o, *s);
    }
  }
}
