/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the column transform of compressed traces (src/os/mtcols.h,
 * docs/formats/memtrace-zstd.md).
 *
 * Input layout: byte 0 picks the mode by its low bit.
 *  - 0, decode: the rest is a decompressed column stream (groups one after the other), as a
 *    reader gets it from zstd. Each group is sized and decoded until one fails. Promises:
 *    sizing refuses anything over the format's bounds (so memory stays bounded: at most
 *    CTS_MTCOLS_GROUP_RAW_MAX + slack of output); a group that decodes fills exactly its
 *    raw size; a failure names a reason and an offset inside the output; no read outside
 *    the group (ASan).
 *  - 1, round trip: the rest is a memtrace stream (or anything), fed to the encoder in
 *    pieces whose sizes come from byte 0's other bits, with a flush after every third
 *    piece and a frame end halfway; the groups it emits must decode to exactly the bytes
 *    it was given. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctfscope/errors.h"
#include "os/mtcols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)       \
  do {                 \
    if (!(c)) abort(); \
  } while (0)

typedef struct {
  uint8_t *p;
  size_t len, cap;
} buf_t;

static int collect(void *user_data, const void *p, size_t n) {
  buf_t *const b = user_data;
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2;
    b->p = realloc(b->p, b->cap);
    CHECK(b->p);
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}

/* Decodes the group stream `g`; the rebuilt bytes go to `out` (if not NULL). Returns
 * whether every group decoded. */
static bool decode_all(const uint8_t *g, size_t n, buf_t *out) {
  cts_mtcols_dec_t *const d = cts_mtcols_dec_init(calloc(1, cts_mtcols_dec_size()));
  uint8_t *const raw = malloc(CTS_MTCOLS_GROUP_RAW_MAX + CTS_MTCOLS_SLACK);
  CHECK(d && raw);
  bool ok = true;
  while (ok && n >= CTS_MTCOLS_GROUP_HEAD) {
    size_t total, raw_size;
    const char *why = NULL;
    if (cts_mtcols_group_size(g, &total, &raw_size, &why)) {
      CHECK(why);
      ok = false;
      break;
    }
    CHECK(raw_size > 0 && raw_size <= CTS_MTCOLS_GROUP_RAW_MAX);
    CHECK(total >= CTS_MTCOLS_GROUP_HEAD &&
          total <= CTS_MTCOLS_GROUP_HEAD + CTS_MTCOLS_NCOLS * (size_t)CTS_MTCOLS_COL_MAX);
    if (total > n) break; /* cut short: a reader keeps what came before */
    size_t at = SIZE_MAX;
    const int e = cts_mtcols_dec_group(d, g, total, raw, &why, &at);
    if (e) {
      CHECK(e == CTS_E_BAD_COMPRESSION && why && at <= raw_size + CTS_MTCOLS_SLACK);
      ok = false;
      break;
    }
    if (out) collect(out, raw, raw_size);
    g += total;
    n -= total;
  }
  free(raw);
  free(d);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const unsigned mode = data[0] & 1u;
  data++;
  size--;
  if (mode == 0) {
    decode_all(data, size, NULL);
    return 0;
  }
  /* Round trip. */
  cts_mtcols_enc_t *const e = cts_mtcols_enc_init(calloc(1, cts_mtcols_enc_size()));
  CHECK(e);
  buf_t groups = {0}, back = {0};
  const size_t piece = 1 + ((size_t)(data[-1] >> 1) * 977u) % 70000u;
  unsigned k = 0;
  for (size_t off = 0; off < size; off += piece, k++) {
    const size_t n = size - off < piece ? size - off : piece;
    CHECK(cts_mtcols_enc_write(e, data + off, n, collect, &groups) == 0);
    if (k % 3 == 2) CHECK(cts_mtcols_enc_flush(e, collect, &groups) == 0);
    if (off < size / 2 && off + n >= size / 2) {
      CHECK(cts_mtcols_enc_flush(e, collect, &groups) == 0);
      cts_mtcols_enc_reset(e);
    }
  }
  CHECK(cts_mtcols_enc_flush(e, collect, &groups) == 0);
  CHECK(!cts_mtcols_enc_pending(e));
  CHECK(decode_all(groups.p, groups.len, &back));
  CHECK(back.len == size && (size == 0 || memcmp(back.p, data, size) == 0));
  free(groups.p);
  free(back.p);
  free(e);
  return 0;
}
