/* SPDX-License-Identifier: MIT */
/* A strict JSON syntax check (RFC 8259) for the fuzz targets whose output must parse: one
 * value, optional whitespace around it, strings of valid UTF-8 without raw control
 * characters, numbers in JSON's grammar only (no NaN, no Infinity, no leading zeros).
 * Nesting deeper than FUZZ_JSON_DEPTH counts as invalid, so the check's own recursion is
 * bounded whatever the text. */
#ifndef CTS_FUZZ_JSON_H
#define CTS_FUZZ_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define FUZZ_JSON_DEPTH 200

typedef struct fuzz_json {
  const unsigned char *p, *end;
} fuzz_json_t;

static inline void fuzz_json_ws(fuzz_json_t *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static inline bool fuzz_json_lit(fuzz_json_t *j, const char *s) {
  for (; *s; s++, j->p++)
    if (j->p >= j->end || *j->p != (unsigned char)*s) return false;
  return true;
}

static inline bool fuzz_json_digits(fuzz_json_t *j) {
  const unsigned char *const start = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  return j->p > start;
}

static inline bool fuzz_json_number(fuzz_json_t *j) {
  if (j->p < j->end && *j->p == '-') j->p++;
  if (j->p < j->end && *j->p == '0')
    j->p++;
  else if (!fuzz_json_digits(j))
    return false;
  if (j->p < j->end && *j->p == '.') {
    j->p++;
    if (!fuzz_json_digits(j)) return false;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    if (!fuzz_json_digits(j)) return false;
  }
  return true;
}

/* One UTF-8 sequence starting at j->p (not ASCII): shortest form, no surrogates, at most
 * U+10FFFF. */
static inline bool fuzz_json_utf8(fuzz_json_t *j) {
  const unsigned char c = *j->p;
  unsigned n;
  unsigned long cp;
  if (c >= 0xC2 && c <= 0xDF)
    n = 1, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 2, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 3, cp = c & 0x07u;
  else
    return false;
  if ((size_t)(j->end - j->p) <= n) return false;
  for (unsigned i = 1; i <= n; i++) {
    if ((j->p[i] & 0xC0u) != 0x80u) return false;
    cp = cp << 6 | (j->p[i] & 0x3Fu);
  }
  if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
    return false;
  j->p += n + 1;
  return true;
}

static inline bool fuzz_json_string(fuzz_json_t *j) {
  if (!fuzz_json_lit(j, "\"")) return false;
  while (j->p < j->end) {
    const unsigned char c = *j->p;
    if (c == '"') {
      j->p++;
      return true;
    }
    if (c < 0x20) return false;
    if (c == '\\') {
      if (++j->p >= j->end) return false;
      const unsigned char e = *j->p++;
      if (e == 'u') {
        for (int i = 0; i < 4; i++, j->p++) {
          if (j->p >= j->end) return false;
          const unsigned char h = *j->p;
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
            return false;
        }
      } else if (!(e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                   e == 'r' || e == 't')) {
        return false;
      }
    } else if (c < 0x80) {
      j->p++;
    } else if (!fuzz_json_utf8(j)) {
      return false;
    }
  }
  return false;
}

static inline bool fuzz_json_value(fuzz_json_t *j, unsigned depth) {
  fuzz_json_ws(j);
  if (j->p >= j->end) return false;
  const unsigned char c = *j->p;
  if (c == '{' || c == '[') {
    if (depth >= FUZZ_JSON_DEPTH) return false;
    const unsigned char close = c == '{' ? '}' : ']';
    j->p++;
    fuzz_json_ws(j);
    if (j->p < j->end && *j->p == close) {
      j->p++;
      return true;
    }
    for (;;) {
      if (c == '{') {
        fuzz_json_ws(j);
        if (!fuzz_json_string(j)) return false;
        fuzz_json_ws(j);
        if (!fuzz_json_lit(j, ":")) return false;
      }
      if (!fuzz_json_value(j, depth + 1)) return false;
      fuzz_json_ws(j);
      if (j->p >= j->end) return false;
      if (*j->p == close) {
        j->p++;
        return true;
      }
      if (*j->p++ != ',') return false;
    }
  }
  if (c == '"') return fuzz_json_string(j);
  if (c == 't') return fuzz_json_lit(j, "true");
  if (c == 'f') return fuzz_json_lit(j, "false");
  if (c == 'n') return fuzz_json_lit(j, "null");
  return fuzz_json_number(j);
}

/* Whether text[0..len) is one JSON value. */
static inline bool fuzz_json_valid(const char *text, size_t len) {
  fuzz_json_t j = {(const unsigned char *)text, (const unsigned char *)text + len};
  if (!fuzz_json_value(&j, 0)) return false;
  fuzz_json_ws(&j);
  return j.p == j.end;
}

#endif /* CTS_FUZZ_JSON_H */
