/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>

#include "report.h"

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if it is invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  const unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, min = 0x10000;
  else
    return 0;
  if (len > n) return 0;
  unsigned cp = c & (0x3fu >> (len - 1));
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

void report_json_strn(cts_out_t *o, const char *str, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  cts_out_char(o, '"');
  size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    if (c == '"' || c == '\\') {
      cts_out_char(o, '\\');
      cts_out_char(o, (char)c);
      i++;
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
      /* Markup characters too: the JSON sits inside an HTML <script> element. */
      const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      cts_out_write(o, esc, sizeof esc);
      i++;
    } else if (c < 0x80) {
      cts_out_char(o, (char)c);
      i++;
    } else {
      const size_t len = utf8_len(s + i, n - i);
      if (len == 0) {
        cts_out_str(o, "\\ufffd"); /* invalid byte: the replacement character */
        i++;
      } else if (len == 3 && c == 0xe2 && s[i + 1] == 0x80 &&
                 (s[i + 2] == 0xa8 || s[i + 2] == 0xa9)) {
        cts_out_str(o, s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029");
        i += 3;
      } else {
        cts_out_write(o, s + i, len);
        i += len;
      }
    }
  }
  cts_out_char(o, '"');
}

void report_json_str(cts_out_t *o, const char *s) {
  report_json_strn(o, s ? s : "", s ? strlen(s) : 0);
}

void report_json_num(cts_out_t *o, double v) {
  if (!isfinite(v)) v = 0;
  if (v == floor(v) && fabs(v) < 9e15) {
    cts_out_i64(o, (int64_t)v);
    return;
  }
  char buf[40];
  snprintf(buf, sizeof buf, "%.6g", v);
  cts_out_str(o, buf);
}

/* ----------------------------------------------------------------------------------- */
/* Compact columns. Large integer arrays would be ~7 bytes a value as JSON text and cost the
 * browser a slow JSON.parse; instead each column is a little-endian array of the narrowest
 * fixed width that holds its values (u8 ... i32, else f64), optionally of the differences
 * between neighbours, deflated (a zlib stream, by libdeflate) and written as one base64 string. The
 * viewer inflates it with DecompressionStream and uses the bytes as a typed array as they are (no
 * decoding loop; only delta columns take one pass of sums). Base64 has no '<', '>' or '&', so it is
 * safe inside the <script> element whatever the data. */

/* Values a chunk of a column: 64 KiB, from the heap. A column grows by chunks, never by a
 * copy: grown by realloc, its buffer was copied or not as the heap's layout allowed (+57
 * instructions an event of memcpy on gen_trace's default shape in one layout, none in another:
 * wip/h39rec16). */
#define REPORT_COL_CHUNK 8192u

void report_col_init(report_col_t *c, bool delta) {
  memset(c, 0, sizeof *c);
  c->delta = delta;
  c->min = INT64_MAX;
  c->max = INT64_MIN;
}

/* A new last chunk for c's values; false (c->err set) without memory. */
static bool col_grow(report_col_t *c) {
  if (c->err) return false;
  if (c->nchunks == c->chunk_cap) { /* the chunks' pointers only: 8 bytes a 64 KiB */
    const size_t cap = c->chunk_cap ? c->chunk_cap * 2 : 8;
    int64_t **p = realloc(c->chunk, cap * sizeof *p);
    if (!p) {
      c->err = true;
      return false;
    }
    c->chunk = p;
    c->chunk_cap = cap;
  }
  int64_t *v = malloc(REPORT_COL_CHUNK * sizeof *v);
  if (!v) {
    c->err = true;
    return false;
  }
  c->chunk[c->nchunks++] = v;
  c->at = v;
  c->end = v + REPORT_COL_CHUNK;
  return true;
}

void report_col_put(report_col_t *c, int64_t v) {
  if (c->at == c->end && !col_grow(c)) return;
  const int64_t d = c->delta ? (int64_t)((uint64_t)v - (uint64_t)c->prev) : v;
  c->prev = v;
  c->n++;
  if (c->delta && c->n == 1) { /* the first value is written apart ("b"): often large */
    c->base = d;
    *c->at++ = 0;
    return;
  }
  *c->at++ = d;
  if (d < c->min) c->min = d;
  if (d > c->max) c->max = d;
}

/* Value i of c (i < c->n). */
static inline int64_t col_value(const report_col_t *c, size_t i) {
  return c->chunk[i / REPORT_COL_CHUNK][i % REPORT_COL_CHUNK];
}

/* Frees c's values. */
static void col_free(report_col_t *c) {
  for (size_t k = 0; k < c->nchunks; k++) free(c->chunk[k]);
  free(c->chunk);
}

static void write_base64(cts_out_t *o, const uint8_t *p, size_t n) {
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char chunk[4];
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    chunk[0] = b64[v >> 18], chunk[1] = b64[v >> 12 & 63], chunk[2] = b64[v >> 6 & 63];
    chunk[3] = b64[v & 63];
    cts_out_write(o, chunk, 4);
  }
  if (i < n) {
    const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
    chunk[0] = b64[v >> 18], chunk[1] = b64[v >> 12 & 63];
    chunk[2] = i + 1 < n ? b64[v >> 6 & 63] : '=';
    chunk[3] = '=';
    cts_out_write(o, chunk, 4);
  }
}

/* The columns' compression level: zlib's default, whose ratio the report's size was
 * measured with. libdeflate rather than zlib: the same zlib stream format, the stream a bit
 * smaller at this level, in well under half the CPU (deflate was ~7 % of `report` on a
 * rate-1 trace of sqlite3 and on gen_trace --shape survivors: bench/JOURNAL.md, "Issue 20:
 * report on survivors (wip/h27surv)"). */
#define DEFLATE_LEVEL 6

/* prefix then "n":N,"z":"…" for bytes p[0..len), deflated; false when out of memory
 * (nothing written then). */
static bool write_deflated(cts_out_t *o, const char *prefix, const char *key, size_t n,
                           const uint8_t *p, size_t len) {
  struct libdeflate_compressor *c = libdeflate_alloc_compressor(DEFLATE_LEVEL);
  if (!c) return false;
  const size_t bound = libdeflate_zlib_compress_bound(c, len);
  uint8_t *z = malloc(bound ? bound : 1);
  /* Never 0 (too small) with the bound's room. */
  const size_t zlen = z ? libdeflate_zlib_compress(c, p, len, z, bound) : 0;
  libdeflate_free_compressor(c);
  if (!zlen) {
    free(z);
    return false;
  }
  cts_out_str(o, prefix);
  cts_out_printf(o, "\"n\":%zu,\"%s\":\"", n, key);
  write_base64(o, z, zlen);
  cts_out_char(o, '"');
  free(z);
  return true;
}

void report_col_write(cts_out_t *o, const char *name, report_col_t *c) {
  static const struct {
    const char *name;
    int64_t lo, hi;
    unsigned size;
  } types[] = {{"u8", 0, 255, 1},         {"i8", -128, 127, 1},
               {"u16", 0, 65535, 2},      {"i16", -32768, 32767, 2},
               {"u32", 0, 4294967295, 4}, {"i32", INT32_MIN, INT32_MAX, 4}};
  cts_out_printf(o, "\"%s\":", name);
  const char *type = "f64";
  unsigned size = 8;
  for (size_t t = 0; t < sizeof types / sizeof *types && c->min <= c->max; t++)
    if (c->min >= types[t].lo && c->max <= types[t].hi) {
      type = types[t].name;
      size = types[t].size;
      break;
    }
  if (c->min > c->max) type = "u8", size = 1; /* no value, or only a base */
  uint8_t *bytes = c->err ? NULL : malloc(c->n * size + 1);
  if (bytes) {
    for (size_t i = 0; i < c->n; i++) {
      uint8_t *p = bytes + i * size;
      if (size == 8) {
        const double d = (double)col_value(c, i);
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        for (unsigned k = 0; k < 8; k++) p[k] = (uint8_t)(u >> (8 * k));
      } else {
        const uint64_t u = (uint64_t)col_value(c, i);
        for (unsigned k = 0; k < size; k++) p[k] = (uint8_t)(u >> (8 * k));
      }
    }
  }
  char prefix[32];
  snprintf(prefix, sizeof prefix, "{\"t\":\"%s\",", type);
  if (!bytes || !write_deflated(o, prefix, "z", c->n, bytes, c->n * size))
    cts_out_str(o, "null"); /* out of memory: the viewer shows the column as missing */
  else if (c->delta)
    cts_out_printf(o, ",\"d\":1,\"b\":%lld}", (long long)c->base);
  else
    cts_out_char(o, '}');
  free(bytes);
  col_free(c);
  report_col_init(c, c->delta);
}

void report_strs_write(cts_out_t *o, const char *name, const char *const *s, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += strlen(s[i]) + 1;
  uint8_t *buf = malloc(len + 1);
  cts_out_printf(o, "\"%s\":", name);
  if (buf) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
      const size_t l = strlen(s[i]);
      memcpy(buf + at, s[i], l);
      buf[at + l] = '\0'; /* separator: trace strings end at a NUL, so none contains one */
      at += l + 1;
    }
    if (write_deflated(o, "{", "zs", n, buf, len)) {
      cts_out_char(o, '}');
      free(buf);
      return;
    }
    free(buf);
  }
  /* Out of memory for the blob: plain JSON strings. */
  cts_out_char(o, '[');
  for (size_t i = 0; i < n; i++) {
    if (i) cts_out_char(o, ',');
    report_json_str(o, s[i]);
  }
  cts_out_char(o, ']');
}
