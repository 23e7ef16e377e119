/* SPDX-License-Identifier: MIT */
/* Private to the memtrace reader: what its two halves share. memtrace_reader.c does the
 * framing (public API, feeding bytes, the carry buffer for packets split across feeds,
 * packet headers, domains); memtrace_events.c decodes the events inside one whole packet
 * (the trace-info event, locations, allocations with their backtraces, promotions and
 * collections). The framing hands the events one packet at a time through
 * cts__mt_decode_events(), so the per-event hot loop stays inside one file.
 * Not thread-safe: a reader belongs to one thread at a time. */
#ifndef CTS_MEMTRACE_READER_IMPL_H
#define CTS_MEMTRACE_READER_IMPL_H

#include <ctfscope/memtrace.h>

#include "../common/compiler.h"
#include "loctable.h"
#include "memtrace_wire.h"

typedef struct mtf_file {
  const char *name;
  const char *defs[MT_MTF_SIZE];
  uint8_t ndefs;
} mtf_file_t;

/* Decoder state of one domain (§11.6): one for v1/v2, one per domain in v3. */
typedef struct domain {
  uint16_t id;
  uint64_t last_time;
  uint64_t *bt; /* previous backtrace, then scratch space after bt_len */
  size_t bt_len, bt_cap;
  uint8_t nfiles;
  mtf_file_t files[MT_MTF_SIZE];
  uint64_t cache_loc[MT_CACHE_SIZE];
  uint16_t cache_pred[MT_CACHE_SIZE];
  /* How the fast loop decodes this domain's allocations (memtrace_events.c, "Decoding
   * styles"): with branches where the lengths' sizes and the codewords' tags follow a
   * pattern that a predictor learns, by arithmetic where both look random. The counts are
   * those of the last sampled packet (one in PROBE_INTERVAL, the first included). */
  bool random_mix;                  /* decode by arithmetic */
  uint8_t packets_unprobed;         /* packets since the last sampled one */
  uint8_t last_wide, last_run;      /* the previous length's size (>= 253) and tag (2) */
  uint32_t long_allocs, size_flips; /* long-form allocations; size changes between two */
  uint32_t codewords, tag_flips;    /* codewords; changes of "tag 2" between two */
} domain_t;

/* Promotions and collections counted instead of delivered (cts_mt_reader_count_frees()):
 * cts_mt_free_counts_t in the fewest instructions per event. */
typedef struct free_tally {
  uint64_t frees, collect;
  uint64_t first_time, first_offset, last_time, last_offset;
} free_tally_t;

struct cts_mt_reader {
  cts_mt_reader_config_t cfg;
  cts_mt_handler_t h;
  int err;
  uint64_t err_offset;
  char errmsg[384];
  uint64_t offset; /* stream offset of the first byte not yet consumed (or carried) */
  uint8_t *carry;
  size_t carry_len, carry_cap;
  bool have_info;
  cts_mt_info_t info;
  uint64_t next_alloc_id; /* v1/v2 running object-id counter */
  cts__loctable_t locs;
  domain_t **domains;
  size_t ndomains;
  domain_t *cur;
  cts_mt_location_t scratch[CTS_MT_MAX_LOCATIONS];
#define DEFINED_CACHE_SIZE 256u
  /* Codes recently found defined, direct-mapped: a definition is never removed, so a hit
   * here spares the location table lookup for each literal in a backtrace. 0 = empty. */
  uint64_t defined_recently[DEFINED_CACHE_SIZE];
  cts_mt_literal_cb on_literal; /* cts_mt_reader_set_literal_hook(); NULL: none */
  void *literal_user_data;
  bool count_frees; /* cts_mt_reader_count_frees() */
  free_tally_t freed;
  bool count_allocs; /* cts_mt_reader_count_allocs() */
  /* Set by every literal codeword stored (the hook's call), and decoding by arithmetic by a
   * long-form allocation that the short form would take but for its backtrace: the
   * allocation being decoded is delivered, not counted. Cleared when the counting loop delivers
   * one; left set elsewhere, which at worst delivers one allocation more. */
  bool deliver_alloc;
  cts_mt_alloc_counts_t allocs; /* times and offsets set at a packet's end */
};

static inline void *cts__mt_alloc(const cts_mt_reader_t *r, size_t size) {
  return r->cfg.allocator.alloc(r->cfg.allocator.user_data, size);
}
static inline void cts__mt_free(const cts_mt_reader_t *r, void *p, size_t size) {
  if (p) r->cfg.allocator.free(r->cfg.allocator.user_data, p, size);
}

/* Records error code at stream offset (message from fmt) and returns code; every later
 * call of the reader returns it too. */
CTS_NOINLINE CTS_PRINTF(4, 5) int cts__mt_fail(cts_mt_reader_t *r, int code, uint64_t offset,
                                               const char *fmt, ...);

/* A callback returned rc != 0 for the item at offset: records it as the reader's error
 * (CTS_E_STOPPED for a positive rc) and returns it. */
int cts__mt_stopped(cts_mt_reader_t *r, int rc, uint64_t offset);

/* Where the event loops of one packet are, and what they need. */
typedef struct event_cursor {
  const uint8_t *p;   /* next event */
  const uint8_t *end; /* end of the packet */
  uint64_t base;      /* stream offset of p is base + (uintptr_t)p */
  const uint8_t *pkt;
  uint64_t off; /* stream offset of pkt */
  uint64_t time_begin, time_end;
  uint64_t last_time; /* the domain's, written back after the packet */
  uint64_t next_id;
  uint32_t nevents, nlocations;
  bool decode, v3;
  free_tally_t *freed; /* promotions and collections counted here; NULL: delivered */
  /* Counting (freed not NULL), the packet's promotions and collections: how many, the sum
   * of their event codes (3 or 4: the collections are free_codes - 3 * nfrees), and the
   * first and the last of them (added to *freed at the packet's end, or at an error). */
  uint32_t nfrees, free_codes;
  const uint8_t *first_free, *last_free;
  /* Counting allocations too, the packet's first and last counted one (NULL: none yet). */
  const uint8_t *first_alloc, *last_alloc;
  int (*on_event)(void *user_data, const cts_mt_event_t *ev);
  void *user_data;
  cts_mt_event_t ev; /* handed to on_event; fields not set for a kind keep old values */
} event_cursor_t;

/* §6: decodes the trace-info event that fills the first packet (pkt, header h, at stream
 * offset off) into r->info. 0 or an error code (recorded with cts__mt_fail). */
int cts__mt_decode_info(cts_mt_reader_t *r, const uint8_t *pkt, const cts__mt_header_t *h,
                        uint64_t off);

/* Decodes the events from c->p to c->end, all in one packet of domain d, calling the
 * handler's on_location and on_event. On return c->p, last_time, next_id, nevents and
 * nlocations tell how far it got. 0 or an error code. */
int cts__mt_decode_events(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c);

#endif /* CTS_MEMTRACE_READER_IMPL_H */
