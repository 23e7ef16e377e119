/* SPDX-License-Identifier: MIT */
/* Re-writes a memtrace trace event by event with the project's writer: any readable
 * version in, v2 or v3 out. Used by round-trip tests, the fuzzers and `convert`. */
#ifndef CTS_TRANSCODE_H
#define CTS_TRANSCODE_H

#include <stdint.h>

#include <ctfscope/memtrace.h>

typedef struct cts_transcode {
  cts_mt_reader_t *reader;
  cts_mt_writer_t *writer;
  void *writer_mem;
  uint16_t version;
  cts_mt_encoding_t encoding;
  cts_write_cb write;
  void *write_user_data;
  int err; /* first writer error (the reader's are returned by feed/finish) */
  uint64_t events;
  uint64_t id_mismatches; /* object ids that differ from the source's (v3 multi-domain) */
  /* Optional, set after cts_transcode_init and before the first feed: where the codes'
   * locations come from (NULL: the source's own, cts_transcode_resolve), and who hears the
   * reader's warnings (NULL: nobody). */
  cts_mt_resolve_cb resolve;
  void *resolve_user_data;
  void (*on_warning)(void *user_data, int code, uint64_t offset, const char *message);
  void *warning_user_data;
} cts_transcode_t;

/* cts_mt_resolve_cb that looks codes up in the cts_mt_reader_t given as user_data: a trace
 * being re-written sends each location exactly as it was read. */
size_t cts_transcode_resolve(void *reader, uint64_t code, cts_mt_location_t *out, size_t max);

/* A writer configuration that re-creates the trace described by `in` (same info, pid,
 * start time; version 2 for v1 sources unless out_version says otherwise) with the given
 * backtrace encoding and resolves its locations through `reader`. The caller sets
 * write/write_user_data. */
void cts_transcode_config(cts_mt_writer_config_t *cfg, const cts_mt_info_t *in,
                          uint16_t out_version, cts_mt_encoding_t encoding,
                          cts_mt_reader_t *reader);

/* out_version 0 keeps the source's version (v1 sources are written as v2). With
 * CTS_MT_ENCODING_MEMTRACE, a memtrace trace is re-written byte for byte. */
int cts_transcode_init(cts_transcode_t *t, uint16_t out_version, cts_mt_encoding_t encoding,
                       cts_write_cb write, void *write_user_data);
int cts_transcode_feed(cts_transcode_t *t, const void *data, size_t len);
/* Ends the input and closes the output trace. */
int cts_transcode_finish(cts_transcode_t *t);
void cts_transcode_fini(cts_transcode_t *t);

#endif /* CTS_TRANSCODE_H */
