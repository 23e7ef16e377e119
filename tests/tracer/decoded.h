/* SPDX-License-Identifier: MIT */
/* Test helper: decodes a whole memtrace trace (memory or file) with our reader into plain
 * arrays, for the tracer and preload tests. */
#ifndef CTS_TEST_DECODED_H
#define CTS_TEST_DECODED_H

#include <stdlib.h>
#include <string.h>

#include "../../src/os/os.h"

typedef struct decoded_alloc {
  uint64_t id, length, nsamples, time;
  size_t depth;
  uint64_t innermost; /* allocation-site code, 0 if no backtrace */
  uint64_t caller;    /* the code before it (its caller's call), 0 if none */
  uint64_t outermost;
  uint64_t backtrace_hash; /* FNV-1a of every code, to compare whole backtraces */
  /* The same over each code's first-use number in the trace (as `ctfscope dump`'s L<n>):
   * equal for the same backtraces in two processes whatever their address layouts. */
  uint64_t backtrace_shape;
} decoded_alloc_t;

typedef struct decoded {
  int error;
  char message[512];
  double rate;
  uint64_t pid;
  char context[256];
  char executable[512];
  decoded_alloc_t *allocs;
  size_t nallocs, cap_allocs;
  uint64_t *collects; /* object ids */
  size_t ncollects, cap_collects;
  uint64_t max_depth;
  uint64_t packets, truncated_packets, skipped_packets;
  uint64_t end_time;    /* the latest end time of a packet read (the trace's end) */
  uint64_t warnings;    /* the reader's (and the input's) warnings */
  char warning[256];    /* the last one */
  double sampled_words; /* Σ nsamples */
  bool collected_twice;
  bool time_backwards;
  uint64_t last_time;
  uint64_t *codes; /* open addressing: code, first-use number + 1 (for backtrace_shape) */
  size_t ncodes, cap_codes;
  cts_mt_reader_t *reader; /* kept to look locations up; freed by decoded_fini */
} decoded_t;

static inline int decoded_on_info(void *ud, const cts_mt_info_t *info) {
  decoded_t *d = ud;
  d->rate = info->sample_rate;
  d->pid = info->pid;
  snprintf(d->context, sizeof d->context, "%s", info->context ? info->context : "");
  snprintf(d->executable, sizeof d->executable, "%s", info->executable_name);
  d->last_time = info->start_time_us;
  return 0;
}

/* The first-use number of a location code in this trace. */
static inline uint64_t decoded_code_number(decoded_t *d, uint64_t code) {
  if ((d->ncodes + 1) * 2 > d->cap_codes) {
    const size_t cap = d->cap_codes ? d->cap_codes * 2 : 1024;
    uint64_t *const fresh = calloc(cap * 2, sizeof *fresh);
    if (!fresh) abort();
    for (size_t i = 0; i < d->cap_codes; i++) {
      if (!d->codes[2 * i + 1]) continue;
      size_t j = (size_t)(d->codes[2 * i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
      while (fresh[2 * j + 1]) j = (j + 1) & (cap - 1);
      fresh[2 * j] = d->codes[2 * i];
      fresh[2 * j + 1] = d->codes[2 * i + 1];
    }
    free(d->codes);
    d->codes = fresh;
    d->cap_codes = cap;
  }
  size_t j = (size_t)(code * 0x9E3779B97F4A7C15ull >> 20) & (d->cap_codes - 1);
  while (d->codes[2 * j + 1] && d->codes[2 * j] != code) j = (j + 1) & (d->cap_codes - 1);
  if (!d->codes[2 * j + 1]) {
    d->codes[2 * j] = code;
    d->codes[2 * j + 1] = ++d->ncodes;
  }
  return d->codes[2 * j + 1];
}

static inline int decoded_on_event(void *ud, const cts_mt_event_t *ev) {
  decoded_t *d = ud;
  if (ev->time_us < d->last_time) d->time_backwards = true;
  d->last_time = ev->time_us;
  if (ev->kind == CTS_MT_ALLOC) {
    if (d->nallocs == d->cap_allocs) {
      d->cap_allocs = d->cap_allocs ? d->cap_allocs * 2 : 1024;
      d->allocs = realloc(d->allocs, d->cap_allocs * sizeof *d->allocs);
    }
    decoded_alloc_t *a = &d->allocs[d->nallocs++];
    a->id = ev->obj_id;
    a->length = ev->length;
    a->nsamples = ev->nsamples;
    a->time = ev->time_us;
    a->depth = ev->backtrace_len;
    a->innermost = ev->backtrace_len ? ev->backtrace[ev->backtrace_len - 1] : 0;
    a->caller = ev->backtrace_len > 1 ? ev->backtrace[ev->backtrace_len - 2] : 0;
    a->outermost = ev->backtrace_len ? ev->backtrace[0] : 0;
    if (ev->backtrace_len > d->max_depth) d->max_depth = ev->backtrace_len;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < ev->backtrace_len; i++) h = (h ^ ev->backtrace[i]) * 0x100000001b3ull;
    a->backtrace_hash = h;
    uint64_t shape = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < ev->backtrace_len; i++)
      shape = (shape ^ decoded_code_number(d, ev->backtrace[i])) * 0x100000001b3ull;
    a->backtrace_shape = shape;

    d->sampled_words += (double)ev->nsamples;
  } else if (ev->kind == CTS_MT_COLLECT) {
    if (d->ncollects == d->cap_collects) {
      d->cap_collects = d->cap_collects ? d->cap_collects * 2 : 1024;
      d->collects = realloc(d->collects, d->cap_collects * sizeof *d->collects);
    }
    d->collects[d->ncollects++] = ev->obj_id;
  }
  return 0;
}

static inline int decoded_on_packet(void *ud, const cts_mt_packet_t *p) {
  decoded_t *d = ud;
  d->packets++;
  if (p->kind == CTS_MT_PACKET_TRUNCATED) d->truncated_packets++;
  if (p->kind == CTS_MT_PACKET_SKIPPED) d->skipped_packets++;
  if (p->kind != CTS_MT_PACKET_TRUNCATED && p->kind != CTS_MT_PACKET_SKIPPED &&
      p->time_end_us > d->end_time)
    d->end_time = p->time_end_us;
  return 0;
}

static inline void decoded_on_warning(void *ud, int code, uint64_t offset, const char *message) {
  decoded_t *d = ud;
  (void)code, (void)offset;
  d->warnings++;
  snprintf(d->warning, sizeof d->warning, "%s", message);
}

static inline void decoded_init(decoded_t *d) {
  memset(d, 0, sizeof *d);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = d,
                              .on_info = decoded_on_info,
                              .on_event = decoded_on_event,
                              .on_packet = decoded_on_packet,
                              .on_warning = decoded_on_warning};
  d->error = cts_mt_reader_create(&d->reader, &cfg, &h);
}

/* err: the result of feeding; finish_reader: whether the reader still needs finishing. */
static inline void decoded_finish(decoded_t *d, int err, bool finish_reader) {
  if (!err && finish_reader) err = cts_mt_reader_finish(d->reader);
  d->error = err;
  if (err) snprintf(d->message, sizeof d->message, "%s", cts_mt_reader_error_message(d->reader));
  /* Every collect must name an allocated object, once. */
  if (!err && d->ncollects) {
    uint8_t *seen = calloc(d->nallocs + 1, 1);
    for (size_t i = 0; i < d->ncollects; i++) {
      const uint64_t id = d->collects[i];
      if (id >= d->nallocs || seen[id])
        d->collected_twice = true;
      else
        seen[id] = 1;
    }
    free(seen);
  }
}

static inline void decoded_from_memory(decoded_t *d, const void *data, size_t len) {
  decoded_init(d);
  if (d->error) return;
  decoded_finish(d, cts_mt_reader_feed(d->reader, data, len), true);
}

static inline void decoded_from_file(decoded_t *d, const char *path) {
  decoded_init(d);
  if (d->error) return;
  bool input_error = false;
  const int e = cts_os_read_memtrace(path, d->reader, NULL, NULL, &input_error);
  d->error = e;
  if (e) {
    snprintf(d->message, sizeof d->message, "%s: %s", path,
             input_error ? cts_os_strerror(e) : cts_mt_reader_error_message(d->reader));
    return;
  }
  decoded_finish(d, 0, false);
}

/* The innermost function name of a location code, or NULL. */
static inline const char *decoded_function(const decoded_t *d, uint64_t code) {
  const cts_mt_location_t *locs;
  size_t n;
  if (cts_mt_reader_lookup_location(d->reader, code, &locs, &n) != 0 || n == 0) return NULL;
  return locs[n - 1].defname;
}

static inline void decoded_fini(decoded_t *d) {
  cts_mt_reader_destroy(d->reader);
  free(d->allocs);
  free(d->collects);
  free(d->codes);
  memset(d, 0, sizeof *d);
}

#endif /* CTS_TEST_DECODED_H */
