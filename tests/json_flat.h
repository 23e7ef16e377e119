/* SPDX-License-Identifier: MIT */
/* Test-only JSON reader: parses a document strictly and flattens it into (path, value)
 * pairs — "info.sample_rate" → "0.01", "packet_list[3].size" → "28574" — so tests can
 * compare a command's --json output with golden key/value files. Numbers keep their text;
 * strings are unescaped (\uXXXX below 0x80 only, others kept as '?'); null is "null". */
#ifndef CTS_JSON_FLAT_H
#define CTS_JSON_FLAT_H

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct json_pair {
  char *path;
  char *value;
  bool is_string;
} json_pair_t;

typedef struct json_flat {
  json_pair_t *pairs;
  size_t n, cap;
  const char *p, *end, *start;
  char error[128];
} json_flat_t;

static void jf_add(json_flat_t *j, const char *path, const char *v, size_t vlen, bool str) {
  if (j->n == j->cap) {
    j->cap = j->cap ? j->cap * 2 : 64;
    j->pairs = realloc(j->pairs, j->cap * sizeof *j->pairs);
  }
  json_pair_t *pr = &j->pairs[j->n++];
  pr->path = strdup(path);
  pr->value = malloc(vlen + 1);
  memcpy(pr->value, v, vlen);
  pr->value[vlen] = '\0';
  pr->is_string = str;
}

static void jf_ws(json_flat_t *j) {
  while (j->p < j->end && isspace((unsigned char)*j->p)) j->p++;
}

static bool jf_fail(json_flat_t *j, const char *what) {
  if (!j->error[0])
    snprintf(j->error, sizeof j->error, "%s at byte %ld", what, (long)(j->p - j->start));
  return false;
}

/* Parses a string at j->p (after the quote has been checked) into a malloc'd buffer. */
static bool jf_string(json_flat_t *j, char **out, size_t *len) {
  j->p++;
  size_t cap = 64, n = 0;
  char *s = malloc(cap);
  while (j->p < j->end && *j->p != '"') {
    char c = *j->p++;
    if ((unsigned char)c < 0x20) {
      free(s);
      return jf_fail(j, "control character in string");
    }
    if (c == '\\') {
      if (j->p >= j->end) break;
      const char e = *j->p++;
      switch (e) {
        case 'n':
          c = '\n';
          break;
        case 't':
          c = '\t';
          break;
        case 'r':
          c = '\r';
          break;
        case 'b':
          c = '\b';
          break;
        case 'f':
          c = '\f';
          break;
        case '/':
        case '\\':
        case '"':
          c = e;
          break;
        case 'u': {
          if (j->end - j->p < 4) break;
          char hex[5] = {j->p[0], j->p[1], j->p[2], j->p[3], 0};
          j->p += 4;
          const long v = strtol(hex, NULL, 16);
          c = v < 0x80 ? (char)v : '?';
          break;
        }
        default:
          free(s);
          return jf_fail(j, "bad escape");
      }
    }
    if (n + 1 >= cap) s = realloc(s, cap *= 2);
    s[n++] = c;
  }
  if (j->p >= j->end) {
    free(s);
    return jf_fail(j, "unterminated string");
  }
  j->p++;
  s[n] = '\0';
  *out = s;
  *len = n;
  return true;
}

static bool jf_value(json_flat_t *j, const char *path);

static bool jf_object(json_flat_t *j, const char *path) {
  j->p++;
  jf_ws(j);
  if (j->p < j->end && *j->p == '}') return j->p++, true;
  for (;;) {
    jf_ws(j);
    if (j->p >= j->end || *j->p != '"') return jf_fail(j, "expected a key");
    char *key;
    size_t klen;
    if (!jf_string(j, &key, &klen)) return false;
    char sub[512];
    snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
    free(key);
    jf_ws(j);
    if (j->p >= j->end || *j->p != ':') return jf_fail(j, "expected ':'");
    j->p++;
    if (!jf_value(j, sub)) return false;
    jf_ws(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      continue;
    }
    if (j->p < j->end && *j->p == '}') return j->p++, true;
    return jf_fail(j, "expected ',' or '}'");
  }
}

static bool jf_array(json_flat_t *j, const char *path) {
  j->p++;
  jf_ws(j);
  if (j->p < j->end && *j->p == ']') return j->p++, true;
  for (int i = 0;; i++) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s[%d]", path, i);
    if (!jf_value(j, sub)) return false;
    jf_ws(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      continue;
    }
    if (j->p < j->end && *j->p == ']') return j->p++, true;
    return jf_fail(j, "expected ',' or ']'");
  }
}

static bool jf_value(json_flat_t *j, const char *path) {
  jf_ws(j);
  if (j->p >= j->end) return jf_fail(j, "unexpected end");
  const char c = *j->p;
  if (c == '{') return jf_object(j, path);
  if (c == '[') return jf_array(j, path);
  if (c == '"') {
    char *s;
    size_t n;
    if (!jf_string(j, &s, &n)) return false;
    jf_add(j, path, s, n, true);
    free(s);
    return true;
  }
  const char *start = j->p;
  if (c == '-' || isdigit((unsigned char)c)) {
    j->p++;
    while (j->p < j->end && (isdigit((unsigned char)*j->p) || strchr(".eE+-", *j->p))) j->p++;
  } else {
    static const char *const words[] = {"true", "false", "null"};
    size_t i = 0;
    for (; i < 3; i++)
      if ((size_t)(j->end - j->p) >= strlen(words[i]) && !strncmp(j->p, words[i], strlen(words[i])))
        break;
    if (i == 3) return jf_fail(j, "unexpected character");
    j->p += strlen(words[i]);
  }
  jf_add(j, path, start, (size_t)(j->p - start), false);
  return true;
}

/* Parses text[0..len); returns false with j->error set on malformed JSON. */
static inline bool json_flat_parse(json_flat_t *j, const char *text, size_t len) {
  memset(j, 0, sizeof *j);
  j->p = j->start = text;
  j->end = text + len;
  if (!jf_value(j, "")) return false;
  jf_ws(j);
  if (j->p != j->end) return jf_fail(j, "trailing characters");
  return true;
}

static inline const json_pair_t *json_flat_get(const json_flat_t *j, const char *path) {
  for (size_t i = 0; i < j->n; i++)
    if (strcmp(j->pairs[i].path, path) == 0) return &j->pairs[i];
  return NULL;
}

/* The number at path, NAN if there is none. */
static inline double json_flat_num(const json_flat_t *j, const char *path) {
  const json_pair_t *p = json_flat_get(j, path);
  return p ? strtod(p->value, NULL) : NAN;
}

/* The value at path (a string's text), "(missing)" if there is none. */
static inline const char *json_flat_str(const json_flat_t *j, const char *path) {
  const json_pair_t *p = json_flat_get(j, path);
  return p ? p->value : "(missing)";
}

/* The first i below max whose "<array>[i].<key>" is value, or -1. */
static inline int json_flat_find(const json_flat_t *j, const char *array, const char *key,
                                 const char *value, int max) {
  for (int i = 0; i < max; i++) {
    char path[256];
    snprintf(path, sizeof path, "%s[%d].%s", array, i, key);
    const json_pair_t *p = json_flat_get(j, path);
    if (!p) return -1;
    if (strcmp(p->value, value) == 0) return i;
  }
  return -1;
}

static inline void json_flat_free(json_flat_t *j) {
  for (size_t i = 0; i < j->n; i++) free(j->pairs[i].path), free(j->pairs[i].value);
  free(j->pairs);
  memset(j, 0, sizeof *j);
}

#endif /* CTS_JSON_FLAT_H */
