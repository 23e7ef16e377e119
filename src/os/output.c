/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* mkostemp */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/endian.h"

void cts_out_init(cts_out_t *o, int fd) {
  o->fd = fd;
  o->err = 0;
  o->len = 0;
  o->term = false;
}

/* Writes p[0..n) to the descriptor unless an error was seen (it becomes sticky). */
static void write_all(cts_out_t *o, const char *p, size_t n) {
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
}

static size_t term_char(const unsigned char *p, const unsigned char *end, bool *control);
static size_t term_escape(unsigned char c, char e[4]);

/* Writes buf[0..n) with the controls escaped (as cts_term_text does), through a small staging
 * buffer so that a name full of controls is not one write per byte. */
static void write_term(cts_out_t *o, const char *buf, size_t n) {
  char stage[16384];
  size_t len = 0;
  const unsigned char *p = (const unsigned char *)buf, *end = p + n;
  while (p < end) {
    bool control;
    const size_t k = term_char(p, end, &control);
    if (len + 4 * k > sizeof stage) {
      write_all(o, stage, len);
      len = 0;
    }
    if (control)
      for (size_t i = 0; i < k; i++) len += term_escape(p[i], stage + len);
    else
      memcpy(stage + len, p, k), len += k;
    p += k;
  }
  write_all(o, stage, len);
}

/* Bytes at the end of buf[0..n) that start a UTF-8 sequence the buffer cuts short. */
static size_t cut_sequence(const unsigned char *buf, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    const unsigned char c = buf[n - back];
    if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
    const size_t need = (c & 0xE0) == 0xC0   ? 2
                        : (c & 0xF0) == 0xE0 ? 3
                        : (c & 0xF8) == 0xF0 ? 4
                                             : 1;
    return need > back ? back : 0;
  }
  return 0;
}

int cts_out_flush(cts_out_t *o) {
  if (o->term)
    write_term(o, o->buf, o->len);
  else
    write_all(o, o->buf, o->len);
  o->len = 0;
  return o->err;
}

void cts__out_flush_full(cts_out_t *o) {
  if (!o->term) {
    cts_out_flush(o);
    return;
  }
  /* A character cut by the end of the buffer waits for the rest of its bytes: escaping
   * its halves apart would take its continuation bytes for C1 controls. */
  const size_t keep = cut_sequence((const unsigned char *)o->buf, o->len);
  write_term(o, o->buf, o->len - keep);
  memmove(o->buf, o->buf + o->len - keep, keep);
  o->len = keep;
}

void cts_out_write(cts_out_t *o, const void *p, size_t n) {
  if (CTS_UNLIKELY(o->len + n > CTS_OUT_BUFSIZE)) {
    const char *c = p;
    while (n) {
      if (o->len == CTS_OUT_BUFSIZE) cts__out_flush_full(o);
      const size_t k = n < CTS_OUT_BUFSIZE - o->len ? n : CTS_OUT_BUFSIZE - o->len;
      memcpy(o->buf + o->len, c, k);
      o->len += k;
      c += k;
      n -= k;
    }
    return;
  }
  memcpy(o->buf + o->len, p, n);
  o->len += n;
}

void cts_out_str(cts_out_t *o, const char *s) {
  cts_out_write(o, s, strlen(s));
}

/* 10^i, for the digit count. */
static const uint64_t pow10_u64[20] = {1u,
                                       10u,
                                       100u,
                                       1000u,
                                       10000u,
                                       100000u,
                                       1000000u,
                                       10000000u,
                                       100000000u,
                                       1000000000u,
                                       10000000000u,
                                       100000000000u,
                                       1000000000000u,
                                       10000000000000u,
                                       100000000000000u,
                                       1000000000000000u,
                                       10000000000000000u,
                                       100000000000000000u,
                                       1000000000000000000u,
                                       10000000000000000000u};

/* The digit count of v (v | 1: "0" is one digit): from the bit length (x log10 2 ~ 1233 /
 * 4096), corrected by one comparison. */
static inline unsigned digit_count(uint64_t v) {
  const unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1);
  const unsigned guess = (bits * 1233u) >> 12; /* 0..19 */
  return guess + ((v | 1) >= pow10_u64[guess]);
}

static inline void store8(char *d, uint64_t w) {
  cts_st_le64((uint8_t *)d, w);
}

/* v < 10^8 with its n digits at d: 8 bytes stored, the digits first. */
static inline void put_short(char *d, uint32_t v, unsigned n) {
  store8(d, cts_dec_digits8(v) >> (8u * (8u - n)));
}

size_t cts__fmt_u64_long(char *d, uint64_t v) {
  const unsigned n = digit_count(v);
  if (n <= 8) {
    put_short(d, (uint32_t)v, n);
  } else if (n <= 16) {
    put_short(d, (uint32_t)(v / 100000000u), n - 8);
    store8(d + n - 8, cts_dec_digits8((uint32_t)(v % 100000000u)));
  } else {
    const uint64_t high = v / 100000000u;
    put_short(d, (uint32_t)(high / 100000000u), n - 16);
    store8(d + n - 16, cts_dec_digits8((uint32_t)(high % 100000000u)));
    store8(d + n - 8, cts_dec_digits8((uint32_t)(v % 100000000u)));
  }
  return n;
}

void cts__fmt_memo_add(cts_fmt_memo_t *m, unsigned step) {
  unsigned carry = step;
  for (int i = m->len - 1; carry && i >= 0; i--) {
    const unsigned digit = (unsigned)(m->text[i] - '0') + carry;
    m->text[i] = (char)('0' + digit % 10u);
    carry = digit / 10u;
  }
  if (carry) { /* 9...9 + step: one digit more (at most 20: the value fits a u64) */
    memmove(m->text + 1, m->text, m->len);
    m->text[0] = (char)('0' + carry);
    m->len++;
  }
}

void cts_out_u64(cts_out_t *o, uint64_t v) {
  char *d = cts_out_reserve(o, CTS_U64_DIGITS);
  o->len += cts_fmt_u64(d, v);
}

/* v as "%.*f" into d (room for 1 + 20 + 1 + 9 bytes), or 0 when v is outside what is done
 * here: not finite, 2^64 or more, a fraction below 1, or decimals beyond 9. */
static size_t fmt_fixed(char *d, double v, int decimals) {
  static const uint64_t pow10[10] = {1,      10,      100,      1000,      10000,
                                     100000, 1000000, 10000000, 100000000, 1000000000};
  if (decimals < 0 || decimals > 9 || !isfinite(v)) return 0;
  const bool neg = signbit(v);
  const double a = neg ? -v : v;
  if (a >= 0x1p64) return 0;
  uint64_t ip = (uint64_t)a, q = 0;
  if ((double)ip != a) {
    /* a = m × 2^-s with m an integer of 53 bits: its integer part is m >> s and its
     * fraction f / 2^s exactly, f = the low s bits; the decimals are f × 10^d / 2^s,
     * rounded half to even as printf does with the exact value. */
    if (a < 1) return 0;
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    const uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    /* 1..52: a is normal, in (1, 2^53) and not whole */
    const unsigned s = 1075u - (unsigned)(bits >> 52);
    const uint64_t f = m & ((UINT64_C(1) << s) - 1), p = pow10[decimals];
    if (f > UINT64_MAX / p) return 0;
    const uint64_t prod = f * p, r = prod & ((UINT64_C(1) << s) - 1), half = UINT64_C(1) << (s - 1);
    ip = m >> s;
    q = prod >> s;
    const bool odd = decimals ? (q & 1) : (ip & 1);
    if (r > half || (r == half && odd)) q++;
    if (q == p) ip++, q = 0; /* for decimals 0, q is 1 here and p 1: a carry too */
  }
  size_t n = 0;
  if (neg) d[n++] = '-';
  n += cts_fmt_u64(d + n, ip);
  if (decimals) {
    d[n++] = '.';
    for (int i = decimals - 1; i >= 0; i--, q /= 10) d[n + (size_t)i] = (char)('0' + q % 10);
    n += (size_t)decimals;
  }
  return n;
}

void cts_out_fixed(cts_out_t *o, double v, int decimals) {
  char *d = cts_out_reserve(o, 32);
  const size_t n = fmt_fixed(d, v, decimals);
  if (n)
    o->len += n;
  else
    cts_out_printf(o, "%.*f", decimals, v);
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

/* Escapes the characters of the string at *p into d as JSON wants them (without the
 * quotes), as many whole characters as room holds (room ≥ 6: one escape), stopping at the
 * NUL; advances *p past them and returns the bytes written. */
static size_t json_escape_some(char *d, size_t room, const unsigned char **p) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = *p;
  size_t n = 0;
  while (*s && n + 6 <= room) {
    const unsigned char c = *s;
    if (c == '"' || c == '\\') {
      d[n++] = '\\';
      d[n++] = (char)c;
      s++;
    } else if (c < 0x20) {
      d[n++] = '\\';
      if (c == '\n' || c == '\t' || c == '\r') {
        d[n++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
      } else {
        memcpy(d + n, "u00", 3);
        d[n + 3] = hex[c >> 4];
        d[n + 4] = hex[c & 15];
        n += 5;
      }
      s++;
    } else if (c < 0x80) {
      d[n++] = (char)c;
      s++;
    } else {
      const size_t k = utf8_len(s);
      if (k) {
        memcpy(d + n, s, k);
        n += k;
        s += k;
      } else {
        memcpy(d + n, "\xEF\xBF\xBD", 3);
        n += 3;
        s++;
      }
    }
  }
  *p = s;
  return n;
}

void cts_out_json_str(cts_out_t *o, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  cts_out_char(o, '"');
  while (*p) {
    char *d = cts_out_reserve(o, 4096);
    o->len += json_escape_some(d, 4096, &p);
  }
  cts_out_char(o, '"');
}

size_t cts_fmt_json_str(char *d, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  d[0] = '"';
  const size_t n = 1 + json_escape_some(d + 1, (size_t)-1, &p);
  d[n] = '"';
  return n + 1;
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

/* The escape of the control byte c into e; its length. */
static size_t term_escape(unsigned char c, char e[4]) {
  static const char hex[] = "0123456789abcdef";
  e[0] = '\\';
  e[1] = 'x';
  e[2] = hex[c >> 4];
  e[3] = hex[c & 15];
  return 4;
}

/* The length of the character at p (before end; a valid UTF-8 sequence is kept whole);
 * *control when its bytes must be escaped: C0 but the tab and the newline, DEL, C1 as UTF-8
 * (c2 80-9f), and a stray byte 80-9f, which an 8-bit terminal takes for a C1 control. */
static size_t term_char(const unsigned char *p, const unsigned char *end, bool *control) {
  *control = false;
  if (p[0] < 0x80) {
    *control = (p[0] < 0x20 && p[0] != '\t' && p[0] != '\n') || p[0] == 0x7f;
    return 1;
  }
  unsigned char seq[4] = {0};
  const size_t avail = (size_t)(end - p) < 4 ? (size_t)(end - p) : 4;
  memcpy(seq, p, avail); /* NUL-padded: utf8_len stops at a missing byte */
  const size_t n = utf8_len(seq);
  if (n) {
    *control = p[0] == 0xc2 && p[1] <= 0x9f;
    return n;
  }
  *control = p[0] <= 0x9f;
  return 1;
}

const char *cts_term_text(const char *s, char *buf, size_t size) {
  if (!size) return buf;
  size_t len = 0;
  const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
  while (p < end) {
    bool control;
    const size_t k = term_char(p, end, &control);
    char e[16];
    size_t n = 0;
    if (control || *p == '\n')
      for (size_t i = 0; i < k; i++) n += term_escape(p[i], e + n);
    else
      memcpy(e, p, n = k);
    if (len + n >= size) break;
    memcpy(buf + len, e, n);
    len += n;
    p += k;
  }
  buf[len] = 0;
  return buf;
}

/* ---- output files --------------------------------------------------------------------- */

int cts_outfile_same_input(const char *path, const char *const *inputs, size_t n) {
  struct stat out;
  if (path && strcmp(path, "-") != 0) {
    if (stat(path, &out) != 0) return -1; /* not there yet: no input can be it */
  } else if (fstat(STDOUT_FILENO, &out) != 0 || !S_ISREG(out.st_mode)) {
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    struct stat in;
    const int r = strcmp(inputs[i], "-") == 0 ? fstat(STDIN_FILENO, &in) : stat(inputs[i], &in);
    if (r == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino) return (int)i;
  }
  return -1;
}

int cts_outfile_open(cts_outfile_t *f, const char *path) {
  memset(f, 0, sizeof *f);
  f->fd = STDOUT_FILENO;
  f->in_place = true;
  if (!path || strcmp(path, "-") == 0) {
    snprintf(f->path, sizeof f->path, "-");
    return 0;
  }
  if (strlen(path) >= sizeof f->path - 16) return -ENAMETOOLONG;
  snprintf(f->path, sizeof f->path, "%s", path);
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    /* The link stays a link: its target is what gets replaced. */
    char target[PATH_MAX];
    if (realpath(path, target) && strlen(target) < sizeof f->path - 16)
      snprintf(f->path, sizeof f->path, "%s", target);
  }
  if (stat(f->path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return -EISDIR;
    /* A device or a FIFO cannot be replaced, and holds no file to lose. */
    f->fd = open(f->path, O_WRONLY | O_CLOEXEC);
    if (f->fd < 0) return -errno;
    f->owns_fd = true;
    return 0;
  }
  /* A file the user may not write stays so: replacing it by rename would get round that. */
  if (access(f->path, F_OK) == 0 && access(f->path, W_OK) != 0) return -errno;
  const char *slash = strrchr(f->path, '/');
  const int n = slash ? snprintf(f->tmp, sizeof f->tmp, "%.*s/.%s.XXXXXX", (int)(slash - f->path),
                                 f->path, slash + 1)
                      : snprintf(f->tmp, sizeof f->tmp, ".%s.XXXXXX", f->path);
  if (n < 0 || (size_t)n >= sizeof f->tmp) return -ENAMETOOLONG;
  f->fd = mkostemp(f->tmp, O_CLOEXEC);
  if (f->fd < 0) {
    const int e = -errno;
    f->tmp[0] = 0;
    /* A file the user may write in a directory they may not (no room for a temporary
     * file beside it): written in place, as before, rather than refused. */
    if (e == -EACCES && access(f->path, W_OK) == 0) {
      f->fd = open(f->path, O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (f->fd < 0) return -errno;
      f->owns_fd = true;
      return 0;
    }
    return e;
  }
  f->in_place = false;
  f->owns_fd = true;
  return 0;
}

const char *cts_outfile_write_path(const cts_outfile_t *f) {
  return f->in_place ? f->path : f->tmp;
}

int cts_outfile_commit(cts_outfile_t *f) {
  int e = 0;
  if (!f->in_place) {
    struct stat st;
    mode_t mode;
    if (stat(f->path, &st) == 0) {
      mode = st.st_mode & 07777;
    } else {
      const mode_t mask = umask(0);
      umask(mask);
      mode = 0644 & ~mask;
    }
    if (fchmod(f->fd, mode) != 0) e = -errno;
  }
  if (f->owns_fd && close(f->fd) != 0 && !e) e = -errno;
  f->owns_fd = false;
  if (!f->in_place) {
    if (!e && rename(f->tmp, f->path) != 0) e = -errno;
    if (e) unlink(f->tmp);
    f->tmp[0] = 0;
  }
  return e;
}

void cts_outfile_discard(cts_outfile_t *f) {
  if (f->owns_fd) close(f->fd);
  f->owns_fd = false;
  if (!f->in_place && f->tmp[0]) unlink(f->tmp);
  f->tmp[0] = 0;
}

void cts_log_line(cts_log_cb log, void *user_data, const char *fmt, ...) {
  char line[CTS_LOG_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (log)
    log(user_data, line);
  else
    fprintf(stderr, "%s\n", line);
}
