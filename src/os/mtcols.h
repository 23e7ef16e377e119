/* SPDX-License-Identifier: MIT */
/* The column transform of compressed memtrace traces (docs/formats/memtrace-zstd.md): the
 * writer's zstd stage turns memtrace packets into groups of columns before compressing
 * them, and readers turn the groups back into the very same bytes. Lossless for any input:
 * what the encoder cannot split into columns (the trace-info packet, a packet in a form it
 * does not expect, bytes that are not memtrace at all) it passes on whole.
 *
 * Both sides work in memory their caller provides (the encoder runs in the tracer's writer,
 * which must not call malloc) and zeroed before init (mmap's pages, calloc); neither calls
 * malloc. One encoder or decoder per stream, used by one thread at a time. */
#ifndef CTS_OS_MTCOLS_H
#define CTS_OS_MTCOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The skippable zstd frame that opens a column-transformed file: magic, content size, then
 * the content's tag and version (memtrace-zstd.md §2). */
#define CTS_MTCOLS_SKIP_MAGIC 0x184D2A5Cu
#define CTS_MTCOLS_TAG        "CTSMTCOL"
#define CTS_MTCOLS_VERSION    1u
#define CTS_MTCOLS_HEAD_SIZE  20u /* 4 magic + 4 size + 8 tag + 2 version + 2 flags */

/* Columns of a group, in the order they are stored (memtrace-zstd.md §4). */
enum {
  CTS_MTCOLS_PKT,   /* per packet: mode, then event count or raw length */
  CTS_MTCOLS_HDR,   /* packet headers, verbatim */
  CTS_MTCOLS_KIND,  /* event ids, a byte each */
  CTS_MTCOLS_TIME,  /* time deltas (25-bit, modulo 2^25) */
  CTS_MTCOLS_LEN,   /* long allocs' lengths */
  CTS_MTCOLS_NSAMP, /* long allocs' sample counts (0: equal to the length) */
  CTS_MTCOLS_SRC,   /* long allocs' sources */
  CTS_MTCOLS_BTREF, /* backtrace: rank in the recent backtraces + 1, 0 for a literal */
  CTS_MTCOLS_BTCP,  /* literal backtraces: common prefix */
  CTS_MTCOLS_BTN,   /* literal backtraces: codeword count */
  CTS_MTCOLS_BTCW,  /* literal backtraces: codewords, u16 each */
  CTS_MTCOLS_BTX8,  /* literal backtraces: the counts after tag-2 codewords */
  CTS_MTCOLS_BTLIT, /* literal backtraces: the codes after tag-3 codewords, u64 each */
  CTS_MTCOLS_OBJ,   /* promote and collect object references */
  CTS_MTCOLS_LOC,   /* location events' payloads, verbatim */
  CTS_MTCOLS_RAW,   /* what was passed on whole */
  CTS_MTCOLS_NCOLS
};

/* A group: magic, flags, raw size, packet count, the columns' lengths, then the columns. */
#define CTS_MTCOLS_GROUP_MAGIC 0x4743544Du /* "MTCG" */
#define CTS_MTCOLS_GROUP_FRESH 1u          /* flag: the decoder's state starts afresh */
#define CTS_MTCOLS_GROUP_HEAD  (16u + 4u * CTS_MTCOLS_NCOLS)
/* Bounds every group keeps (the decoder refuses more): memory stays bounded on both sides. */
#define CTS_MTCOLS_GROUP_RAW_MAX (2u << 20)
#define CTS_MTCOLS_COL_MAX       (1u << 20)

/* Where the encoder's output goes: 0 or a negative error (then returned by the call). */
typedef int (*cts_mtcols_emit_cb)(void *user_data, const void *buf, size_t len);

typedef struct cts_mtcols_enc cts_mtcols_enc_t;
/* Bytes of (zeroed) memory an encoder needs, about 18 MiB, most of it never touched. */
size_t cts_mtcols_enc_size(void);
/* Sets up an encoder in `mem` (cts_mtcols_enc_size() zeroed bytes, 64-byte aligned). */
cts_mtcols_enc_t *cts_mtcols_enc_init(void *mem);
/* Takes `len` bytes of the memtrace stream; complete groups go to `emit`. */
int cts_mtcols_enc_write(cts_mtcols_enc_t *e, const void *buf, size_t len, cts_mtcols_emit_cb emit,
                         void *user_data);
/* Emits everything taken so far (a packet not yet complete is passed on raw). */
int cts_mtcols_enc_flush(cts_mtcols_enc_t *e, cts_mtcols_emit_cb emit, void *user_data);
/* Starts afresh (after a frame's end): the next group says so, and decodes alone. */
void cts_mtcols_enc_reset(cts_mtcols_enc_t *e);
/* Whether bytes were taken and not yet emitted. */
bool cts_mtcols_enc_pending(const cts_mtcols_enc_t *e);
/* Writes the opening skippable frame (CTS_MTCOLS_HEAD_SIZE bytes) into `out`. */
void cts_mtcols_head(uint8_t out[CTS_MTCOLS_HEAD_SIZE]);
/* Whether `p` (CTS_MTCOLS_HEAD_SIZE bytes) is an opening frame this decoder reads: 1 yes, 0
 * not one of ours at all, negative: ours but of a version or with flags it does not know. */
int cts_mtcols_head_check(const uint8_t *p);

typedef struct cts_mtcols_dec cts_mtcols_dec_t;
/* Bytes of (zeroed) memory a decoder needs (about 1.5 MiB). */
size_t cts_mtcols_dec_size(void);
cts_mtcols_dec_t *cts_mtcols_dec_init(void *mem);
/* From a group's first CTS_MTCOLS_GROUP_HEAD bytes: its total size and the size of the
 * memtrace bytes it rebuilds. 0, or an error with `*why` set (a static string). */
int cts_mtcols_group_size(const uint8_t *head, size_t *total, size_t *raw_size, const char **why);
/* Bytes past a group's raw size that the decoder may scribble on. */
#define CTS_MTCOLS_SLACK 32u
/* Rebuilds the memtrace bytes of the whole group `g` (`len` bytes, as sized above) into
 * `out` (its raw size plus CTS_MTCOLS_SLACK bytes). 0, or CTS_E_BAD_COMPRESSION with `*why` and
 * `*at` (the offset in the group where decoding failed); the decoder's state is then undefined. */
int cts_mtcols_dec_group(cts_mtcols_dec_t *d, const uint8_t *g, size_t len, uint8_t *out,
                         const char **why, size_t *at);

#endif /* CTS_OS_MTCOLS_H */
