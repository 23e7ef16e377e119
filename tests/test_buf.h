/* SPDX-License-Identifier: MIT */
/* A growable byte buffer for tests: a cts_write_cb that appends to it (traces written in
 * memory), and a whole-file reader. */
#ifndef CTS_TEST_BUF_H
#define CTS_TEST_BUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/errors.h>

typedef struct buf {
  uint8_t *data;
  size_t len, cap;
} buf_t;

/* cts_write_cb: appends to the buf_t in ud. */
static inline int buf_write(void *ud, const void *p, size_t n) {
  buf_t *b = ud;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + n) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) return CTS_E_NOMEM;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

/* Appends the whole file to b; false if it cannot be opened. */
static inline bool read_file(const char *path, buf_t *b) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  uint8_t tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf_write(b, tmp, n);
  fclose(f);
  return true;
}

/* The whole file, NUL-terminated so it reads as a string (*len excludes the NUL); malloc'd,
 * or NULL if it cannot be read. */
static inline char *slurp(const char *path, size_t *len) {
  buf_t b = {0};
  if (!read_file(path, &b) || buf_write(&b, "", 1) != 0) {
    free(b.data);
    return NULL;
  }
  *len = b.len - 1;
  return (char *)b.data;
}

/* Writes len bytes to path (created or truncated); false on any error. */
static inline bool spit(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  const bool ok = fwrite(data, 1, len, f) == len;
  return fclose(f) == 0 && ok;
}

#endif /* CTS_TEST_BUF_H */
