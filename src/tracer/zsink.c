/* SPDX-License-Identifier: MIT */
/* The writer's zstd stage: see zsink.h. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_initStaticCCtx, ZSTD_estimateCStreamSize_... */
#include "zsink.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <zstd.h>

#include "lazylib.h"
#include "os/mtcols.h"

/* libzstd is bound when a session first compresses (lazylib.h): not loaded into every
 * traced image. The calls below go through `zs`. */
#define ZSTD_FUNCTIONS(X)                  \
  X(ZSTD_CCtx_setParameter)                \
  X(ZSTD_CStreamOutSize)                   \
  X(ZSTD_compressStream2)                  \
  X(ZSTD_estimateCStreamSize_usingCParams) \
  X(ZSTD_getCParams)                       \
  X(ZSTD_initStaticCCtx)                   \
  X(ZSTD_isError)
CTS__LAZYLIB_DEFINE(zs, zs_lib, "libzstd.so.1", ZSTD_FUNCTIONS);
#define ZSTD_CCtx_setParameter                (zs.ZSTD_CCtx_setParameter)
#define ZSTD_CStreamOutSize                   (zs.ZSTD_CStreamOutSize)
#define ZSTD_compressStream2                  (zs.ZSTD_compressStream2)
#define ZSTD_estimateCStreamSize_usingCParams (zs.ZSTD_estimateCStreamSize_usingCParams)
#define ZSTD_getCParams                       (zs.ZSTD_getCParams)
#define ZSTD_initStaticCCtx                   (zs.ZSTD_initStaticCCtx)
#define ZSTD_isError                          (zs.ZSTD_isError)

struct cts__zsink {
  ZSTD_CCtx *cctx; /* in the same mapping, after this struct */
  cts__zsink_write_cb write;
  void *user_data;
  unsigned char *out; /* the output buffer, out_size bytes */
  size_t out_size;
  size_t map_size;
  bool pending;           /* bytes taken since the last flush or end */
  bool in_frame;          /* bytes taken since the last end: a frame is open */
  bool started;           /* the opening frame is written */
  int err;                /* first error: the stage is failed */
  cts_mtcols_enc_t *cols; /* the column transform, in the same mapping */
};

/* memtrace events are short records (a 4-byte header, a few varints, 2-byte cache hits):
 * matches of 3 bytes pay. At level 3, against zstd's default of 5 for it, bytes per event of
 * rate-1 traces: git log -p 2.32 -> 1.97, sqlite3 1.59 -> 1.43, python3 1.46 -> 1.30, at the
 * same speed (zstd 1.5.4; docs/tracing.md). */
#define MIN_MATCH 3

static size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

cts__zsink_t *cts__zsink_open(int level, cts__zsink_write_cb write, void *user_data) {
  if (!cts__lazylib_bind(&zs_lib)) return NULL;
  if (level < CTS__ZSINK_LEVEL_MIN) level = CTS__ZSINK_LEVEL_MIN;
  if (level > CTS__ZSINK_LEVEL_MAX) level = CTS__ZSINK_LEVEL_MAX;
  const size_t head = round_up(sizeof(cts__zsink_t), 64);
  ZSTD_compressionParameters cp = ZSTD_getCParams(level, 0, 0);
  cp.minMatch = MIN_MATCH;
  const size_t ctx_size = round_up(ZSTD_estimateCStreamSize_usingCParams(cp), 64);
  const size_t out_size = ZSTD_CStreamOutSize();
  const size_t cols_at = round_up(head + ctx_size + out_size, 64); /* the encoder's alignment */
  const size_t map_size = round_up(cols_at + cts_mtcols_enc_size(), 4096);
  /* Untouched pages cost nothing: the context is sized for the worst input. */
  void *const mem = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return NULL;
  cts__zsink_t *const z = mem;
  z->cctx = ZSTD_initStaticCCtx((unsigned char *)mem + head, ctx_size);
  z->out = (unsigned char *)mem + head + ctx_size;
  z->out_size = out_size;
  z->cols = cts_mtcols_enc_init((unsigned char *)mem + cols_at);
  z->started = false;
  z->map_size = map_size;
  z->write = write;
  z->user_data = user_data;
  z->pending = z->in_frame = false;
  z->err = 0;
  if (!z->cctx || ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_minMatch, MIN_MATCH)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1))) {
    munmap(mem, map_size);
    return NULL;
  }
  return z;
}

/* Runs the compressor over `in` with `mode` until it has taken everything and, for a flush
 * or an end, until it has nothing left to give. */
static int run(cts__zsink_t *z, ZSTD_inBuffer *in, ZSTD_EndDirective mode) {
  if (z->err) return z->err;
  for (;;) {
    ZSTD_outBuffer out = {z->out, z->out_size, 0};
    const size_t left = ZSTD_compressStream2(z->cctx, &out, in, mode);
    if (ZSTD_isError(left)) return z->err = -EIO;
    if (out.pos) {
      const int e = z->write(z->user_data, z->out, out.pos);
      if (e) return z->err = e;
    }
    const bool done = mode == ZSTD_e_continue ? in->pos == in->size : left == 0;
    if (done) return 0;
  }
}

/* The transform's groups go to zstd. */
static int compress(void *user_data, const void *buf, size_t len) {
  cts__zsink_t *const z = user_data;
  ZSTD_inBuffer in = {buf, len, 0};
  return run(z, &in, ZSTD_e_continue);
}

int cts__zsink_write(cts__zsink_t *z, const void *buf, size_t len) {
  if (z->err) return z->err;
  if (!z->started) {
    /* The file opens with the frame that names the transform, before any zstd frame
     * (docs/formats/memtrace-zstd.md). */
    unsigned char head[CTS_MTCOLS_HEAD_SIZE];
    cts_mtcols_head(head);
    const int e = z->write(z->user_data, head, sizeof head);
    if (e) return z->err = e;
    z->started = true;
  }
  if (len) z->pending = z->in_frame = true;
  const int e = cts_mtcols_enc_write(z->cols, buf, len, compress, z);
  return e ? z->err = e : 0;
}

bool cts__zsink_pending(const cts__zsink_t *z) {
  return z->pending;
}

int cts__zsink_flush(cts__zsink_t *z) {
  ZSTD_inBuffer in = {NULL, 0, 0};
  z->pending = false;
  const int e = cts_mtcols_enc_flush(z->cols, compress, z);
  return e ? z->err = e : run(z, &in, ZSTD_e_flush);
}

int cts__zsink_end(cts__zsink_t *z) {
  ZSTD_inBuffer in = {NULL, 0, 0};
  if (!z->in_frame) return z->err; /* no empty frame after the last one */
  z->pending = z->in_frame = false;
  const int e = cts_mtcols_enc_flush(z->cols, compress, z);
  if (e) return z->err = e;
  /* Each frame decodes on its own: the transform's state starts afresh with the next. */
  cts_mtcols_enc_reset(z->cols);
  return run(z, &in, ZSTD_e_end);
}

void cts__zsink_close(cts__zsink_t *z) {
  if (z) munmap(z, z->map_size);
}
