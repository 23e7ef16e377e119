/* SPDX-License-Identifier: MIT */
#include "transcode.h"

#include <stdlib.h>
#include <string.h>

#include "../os/os.h"

/* Remembering long previous backtraces keeps their common prefixes, as memtrace does. */
#define TRANSCODE_MAX_FRAMES (1u << 16)

size_t cts_transcode_resolve(void *reader, uint64_t code, cts_mt_location_t *out, size_t max) {
  const cts_mt_location_t *locs;
  size_t n;
  if (cts_mt_reader_lookup_location(reader, code, &locs, &n) != 0) return 0;
  if (n) memcpy(out, locs, (n < max ? n : max) * sizeof *out);
  return n;
}

void cts_transcode_config(cts_mt_writer_config_t *cfg, const cts_mt_info_t *in,
                          uint16_t out_version, cts_mt_encoding_t encoding,
                          cts_mt_reader_t *reader) {
  cts_mt_writer_config_init(cfg);
  cfg->encoding = encoding;
  cfg->version = out_version ? out_version : (in->version >= 2 ? in->version : 2);
  cfg->sample_rate = in->sample_rate;
  cfg->word_size = in->word_size;
  cfg->executable_name = in->executable_name;
  cfg->host_name = in->host_name;
  cfg->runtime_params = in->runtime_params;
  cfg->context = in->context;
  cfg->pid = in->pid;
  cfg->start_time_us = in->start_time_us;
  cfg->max_backtrace_frames = TRANSCODE_MAX_FRAMES;
  cfg->resolve = cts_transcode_resolve;
  cfg->resolve_user_data = reader;
}

static int on_info(void *ud, const cts_mt_info_t *in) {
  cts_transcode_t *t = ud;
  cts_mt_writer_config_t cfg;
  cts_transcode_config(&cfg, in, t->version, t->encoding, t->reader);
  cfg.write = t->write;
  cfg.write_user_data = t->write_user_data;
  if (t->resolve) {
    cfg.resolve = t->resolve;
    cfg.resolve_user_data = t->resolve_user_data;
  }
  const size_t size = cts_mt_writer_size(&cfg);
  t->writer_mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  if (!t->writer_mem) return CTS_E_NOMEM;
  return t->err = cts_mt_writer_init(&t->writer, t->writer_mem, size, &cfg);
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  cts_transcode_t *t = ud;
  int e;
  t->events++;
  if (ev->kind == CTS_MT_ALLOC) {
    uint64_t id;
    e = cts_mt_writer_alloc(t->writer, ev->time_us, ev->length, ev->nsamples,
                            (cts_mt_source_t)ev->source, ev->backtrace, ev->backtrace_len, &id);
    if (!e && id != ev->obj_id) t->id_mismatches++;
  } else if (ev->kind == CTS_MT_PROMOTE) {
    e = cts_mt_writer_promote(t->writer, ev->time_us, ev->obj_id);
  } else {
    e = cts_mt_writer_collect(t->writer, ev->time_us, ev->obj_id);
  }
  if (e) t->err = e;
  return e;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const cts_transcode_t *t = ud;
  if (t->on_warning) t->on_warning(t->warning_user_data, code, offset, message);
}

int cts_transcode_init(cts_transcode_t *t, uint16_t out_version, cts_mt_encoding_t encoding,
                       cts_write_cb write, void *write_user_data) {
  memset(t, 0, sizeof *t);
  if (out_version != 0 && out_version != 2 && out_version != 3) return CTS_E_INVAL;
  t->version = out_version;
  t->encoding = encoding;
  t->write = write;
  t->write_user_data = write_user_data;
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {
      .user_data = t, .on_info = on_info, .on_event = on_event, .on_warning = on_warning};
  return cts_mt_reader_create(&t->reader, &cfg, &h);
}

int cts_transcode_feed(cts_transcode_t *t, const void *data, size_t len) {
  return cts_mt_reader_feed(t->reader, data, len);
}

int cts_transcode_finish(cts_transcode_t *t) {
  const int e = cts_mt_reader_finish(t->reader);
  if (e) return e;
  return t->writer ? cts_mt_writer_close(t->writer) : CTS_E_EMPTY;
}

void cts_transcode_fini(cts_transcode_t *t) {
  cts_mt_reader_destroy(t->reader);
  free(t->writer_mem);
  memset(t, 0, sizeof *t);
}
