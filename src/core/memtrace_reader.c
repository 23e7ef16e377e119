/* SPDX-License-Identifier: MIT */
/* Streaming memtrace reader (docs/formats/memtrace.md), framing half: the public API,
 * packet framing and headers (§4), domains and the carry buffer. Bytes are fed in pieces
 * of any size; whole packets found in the caller's buffer are decoded in place and only a
 * packet split across two feeds is copied into the carry buffer. Memory is bounded by the
 * configured limits, never by the trace's length. The events inside a packet are decoded
 * by memtrace_events.c. */
#include <stdarg.h>
#include <string.h>

#include "fmt.h"
#include "memtrace_reader_impl.h"

CTS_NOINLINE CTS_PRINTF(4, 5) int cts__mt_fail(cts_mt_reader_t *r, int code, uint64_t offset,
                                               const char *fmt, ...) {
  size_t n = cts__fmt(r->errmsg, sizeof r->errmsg, "at offset %llu: ", (unsigned long long)offset);
  va_list ap;
  va_start(ap, fmt);
  cts__vfmt(r->errmsg + n, sizeof r->errmsg - n, fmt, ap);
  va_end(ap);
  r->err = code;
  r->err_offset = offset;
  return code;
}

CTS_PRINTF(4, 5)
static void warn(cts_mt_reader_t *r, int code, uint64_t offset, const char *fmt, ...) {
  if (!r->h.on_warning) return;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  cts__vfmt(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->h.on_warning(r->h.user_data, code, offset, msg);
}

/* A callback asked to stop: remember its value so later calls return it too. */
int cts__mt_stopped(cts_mt_reader_t *r, int rc, uint64_t offset) {
  if (rc > 0) rc = CTS_E_STOPPED;
  r->err = rc;
  r->err_offset = offset;
  cts__fmt(r->errmsg, sizeof r->errmsg, "at offset %llu: stopped by the caller (%d)",
           (unsigned long long)offset, rc);
  return rc;
}

void cts_mt_reader_config_init(cts_mt_reader_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->decode_backtraces = true;
  cfg->max_packet_size = 16u << 20;
  cfg->max_backtrace_frames = 1u << 20;
  cfg->max_domains = 64;
  cfg->max_location_bytes = 512ull << 20;
}

int cts_mt_reader_create(cts_mt_reader_t **out, const cts_mt_reader_config_t *cfg,
                         const cts_mt_handler_t *handler) {
  if (!out || !cfg || !cfg->allocator.alloc || !cfg->allocator.free ||
      cfg->struct_size < sizeof *cfg || cfg->max_packet_size < CTS_MT_HEADER_SIZE_V3 ||
      cfg->max_backtrace_frames < 256 || cfg->max_domains < 1)
    return CTS_E_INVAL;
  cts_mt_reader_t *r = cfg->allocator.alloc(cfg->allocator.user_data, sizeof *r);
  if (!r) return CTS_E_NOMEM;
  memset(r, 0, sizeof *r);
  r->cfg = *cfg;
  if (handler) r->h = *handler;
  cts__loctable_init(&r->locs, cfg->allocator, cfg->max_location_bytes);
  *out = r;
  return 0;
}

void cts_mt_reader_destroy(cts_mt_reader_t *r) {
  if (!r) return;
  for (size_t i = 0; i < r->ndomains; i++) {
    domain_t *d = r->domains[i];
    cts__mt_free(r, d->bt, d->bt_cap * sizeof *d->bt);
    cts__mt_free(r, d, sizeof *d);
  }
  cts__mt_free(r, r->domains, r->cfg.max_domains * sizeof *r->domains);
  cts__mt_free(r, r->carry, r->carry_cap);
  cts__loctable_fini(&r->locs);
  cts__mt_free(r, r, sizeof *r);
}

const cts_mt_info_t *cts_mt_reader_borrow_info(const cts_mt_reader_t *r) {
  return r->have_info ? &r->info : NULL;
}

int cts_mt_reader_lookup_location(const cts_mt_reader_t *r, uint64_t code,
                                  const cts_mt_location_t **locs, size_t *n) {
  const cts__loc_entry_t *e = cts__loctable_find(&r->locs, code);
  if (!e) return CTS_E_LOCATION_UNDEFINED;
  *locs = e->locs;
  *n = e->n;
  return 0;
}

void cts_mt_reader_set_literal_hook(cts_mt_reader_t *r, cts_mt_literal_cb cb, void *user_data) {
  r->on_literal = cb;
  r->literal_user_data = user_data;
}

void cts_mt_reader_count_frees(cts_mt_reader_t *r, bool count) {
  r->count_frees = count;
}

void cts_mt_reader_count_allocs(cts_mt_reader_t *r, bool count) {
  r->count_allocs = count;
  r->deliver_alloc = false;
}

void cts_mt_reader_alloc_counts(const cts_mt_reader_t *r, cts_mt_alloc_counts_t *out) {
  *out = r->allocs;
}

void cts_mt_reader_free_counts(const cts_mt_reader_t *r, cts_mt_free_counts_t *out) {
  const free_tally_t *f = &r->freed;
  *out = (cts_mt_free_counts_t){.promote = f->frees - f->collect,
                                .collect = f->collect,
                                .first_time_us = f->first_time,
                                .first_offset = f->first_offset,
                                .last_time_us = f->last_time,
                                .last_offset = f->last_offset};
}

void cts_mt_reader_warn(cts_mt_reader_t *r, int code, const char *message) {
  if (r->h.on_warning) r->h.on_warning(r->h.user_data, code, r->offset + r->carry_len, message);
}

uint64_t cts_mt_reader_offset(const cts_mt_reader_t *r) {
  return r->offset + r->carry_len;
}
int cts_mt_reader_error(const cts_mt_reader_t *r) {
  return r->err;
}
uint64_t cts_mt_reader_error_offset(const cts_mt_reader_t *r) {
  return r->err_offset;
}
const char *cts_mt_reader_error_message(const cts_mt_reader_t *r) {
  return r->err ? r->errmsg : "";
}

/* ---- domains ------------------------------------------------------------------------ */

static int get_domain(cts_mt_reader_t *r, uint16_t id, uint64_t start_time, uint64_t off,
                      domain_t **out) {
  if (CTS_LIKELY(r->cur && r->cur->id == id)) {
    *out = r->cur;
    return 0;
  }
  for (size_t i = 0; i < r->ndomains; i++) {
    if (r->domains[i]->id == id) {
      *out = r->cur = r->domains[i];
      return 0;
    }
  }
  if (r->ndomains >= r->cfg.max_domains)
    return cts__mt_fail(r, CTS_E_TOO_MANY_DOMAINS, off,
                        "domain %u would exceed the limit of %u domains", id, r->cfg.max_domains);
  if (!r->domains) {
    r->domains = cts__mt_alloc(r, r->cfg.max_domains * sizeof *r->domains);
    if (!r->domains) return cts__mt_fail(r, CTS_E_NOMEM, off, "out of memory for domain table");
  }
  domain_t *d = cts__mt_alloc(r, sizeof *d);
  if (!d) return cts__mt_fail(r, CTS_E_NOMEM, off, "out of memory for domain %u", id);
  memset(d, 0, sizeof *d);
  d->id = id;
  d->last_time = start_time;
  r->domains[r->ndomains++] = d;
  *out = r->cur = d;
  return 0;
}

/* ---- packets -------------------------------------------------------------------------- */

static void fill_packet(cts_mt_packet_t *pk, const cts__mt_header_t *h, uint64_t off,
                        cts_mt_packet_kind_t kind) {
  pk->kind = kind;
  pk->offset = off;
  pk->size = h->size_bits / 8;
  pk->version = h->version;
  pk->domain = h->domain;
  pk->pid = h->pid;
  pk->time_begin_us = h->time_begin;
  pk->time_end_us = h->time_end;
  pk->alloc_id_begin = h->alloc_id_begin;
  pk->alloc_id_end = h->alloc_id_end;
  pk->verify_ix = h->verify_ix;
  pk->verify_pred = h->verify_pred;
  pk->verify_val = h->verify_val;
  pk->nevents = 0;
}

static int emit_packet(cts_mt_reader_t *r, const cts_mt_packet_t *pk) {
  if (!r->h.on_packet) return 0;
  const int rc = r->h.on_packet(r->h.user_data, pk);
  return rc ? cts__mt_stopped(r, rc, pk->offset) : 0;
}

/* §6: the first packet holds exactly one trace_info event. */
static int decode_info(cts_mt_reader_t *r, const uint8_t *pkt, const cts__mt_header_t *h,
                       uint64_t off) {
  int e = cts__mt_decode_info(r, pkt, h, off);
  if (e) return e;
  r->have_info = true;
  domain_t *d;
  if ((e = get_domain(r, h->domain, h->time_begin, off, &d)) != 0) return e;
  if (r->h.on_info) {
    const int rc = r->h.on_info(r->h.user_data, &r->info);
    if (rc) return cts__mt_stopped(r, rc, off);
  }
  cts_mt_packet_t pk;
  fill_packet(&pk, h, off, CTS_MT_PACKET_TRACE_INFO);
  pk.nevents = 1;
  return emit_packet(r, &pk);
}

/* §4: the header's time and id ranges. Checked for every packet, a truncated one too (as
 * memtrace's reader does, which validates a header before reading its content). */
static int check_header_ranges(cts_mt_reader_t *r, const cts__mt_header_t *h, uint64_t off) {
  if (h->time_begin > h->time_end)
    return cts__mt_fail(r, CTS_E_PACKET_TIMES, off,
                        "packet ends (%llu us) before it begins (%llu us)",
                        (unsigned long long)h->time_end, (unsigned long long)h->time_begin);
  if (h->alloc_id_begin > h->alloc_id_end)
    return cts__mt_fail(r, CTS_E_PACKET_IDS, off,
                        "packet's object ids run backwards (%llu to %llu)",
                        (unsigned long long)h->alloc_id_begin, (unsigned long long)h->alloc_id_end);
  return 0;
}

static int decode_packet(cts_mt_reader_t *r, const uint8_t *pkt, uint64_t off) {
  cts__mt_header_t h;
  cts__mt_parse_header(pkt, &h);
  const int e_header = check_header_ranges(r, &h, off);
  if (e_header) return e_header;
  if (!r->have_info) return decode_info(r, pkt, &h, off);

  cts_mt_packet_t pk;
  if (h.pid != r->info.pid) {
    warn(r, CTS_E_WRONG_PID, off, "skipping packet of pid %llu (the trace's pid is %llu)",
         (unsigned long long)h.pid, (unsigned long long)r->info.pid);
    fill_packet(&pk, &h, off, CTS_MT_PACKET_SKIPPED);
    return emit_packet(r, &pk);
  }
  int e;
  domain_t *d;
  if ((e = get_domain(r, h.domain, r->info.start_time_us, off, &d)) != 0) return e;
  if (h.version < 3 && (h.time_begin < d->last_time || h.alloc_id_begin != r->next_alloc_id)) {
    /* The v1/v2 reader drops packets that are out of sequence (§11.5). */
    warn(r, CTS_E_SKIPPED_PACKET, off,
         "skipping packet out of sequence (starts at %llu us and id %llu; expected >= %llu us "
         "and id %llu)",
         (unsigned long long)h.time_begin, (unsigned long long)h.alloc_id_begin,
         (unsigned long long)d->last_time, (unsigned long long)r->next_alloc_id);
    fill_packet(&pk, &h, off, CTS_MT_PACKET_SKIPPED);
    return emit_packet(r, &pk);
  }
  if (h.verify_ix != MT_VERIFY_NONE && r->cfg.decode_backtraces) {
    if (h.verify_ix >= MT_CACHE_SIZE)
      return cts__mt_fail(r, CTS_E_CACHE_INDEX, off,
                          "cache verifier index %u is out of range (< %u)", h.verify_ix,
                          MT_CACHE_SIZE);
    if (d->cache_pred[h.verify_ix] != h.verify_pred || d->cache_loc[h.verify_ix] != h.verify_val)
      return cts__mt_fail(r, CTS_E_CACHE_VERIFY, off,
                          "backtrace cache bucket %u holds (%u, %llu), the packet says (%u, %llu)",
                          h.verify_ix, d->cache_pred[h.verify_ix],
                          (unsigned long long)d->cache_loc[h.verify_ix], h.verify_pred,
                          (unsigned long long)h.verify_val);
  }

  const uint8_t *const end = pkt + h.size_bits / 8;
  event_cursor_t c = {
      .p = pkt + cts__mt_header_size(h.version),
      .end = end,
      .base = off - (uint64_t)(uintptr_t)pkt,
      .pkt = pkt,
      .off = off,
      .time_begin = h.time_begin,
      .time_end = h.time_end,
      .last_time = d->last_time,
      .next_id = h.alloc_id_begin,
      .decode = r->cfg.decode_backtraces,
      .v3 = h.version >= 3,
      .freed = r->count_frees ? &r->freed : NULL,
      .on_event = r->h.on_event,
      .user_data = r->h.user_data,
  };
  c.ev.domain = h.domain;
  if ((e = cts__mt_decode_events(r, d, &c)) != 0) return e;
  d->last_time = c.last_time;
  const uint64_t next_id = c.next_id;
  const uint32_t nevents = c.nevents, nlocations = c.nlocations;
  if (next_id != h.alloc_id_end)
    return cts__mt_fail(r, CTS_E_ALLOC_ID_SYNC, off,
                        "packet header says object ids %llu to %llu but it holds %llu allocations",
                        (unsigned long long)h.alloc_id_begin, (unsigned long long)h.alloc_id_end,
                        (unsigned long long)(next_id - h.alloc_id_begin));
  if (h.version < 3) r->next_alloc_id = next_id;
  fill_packet(&pk, &h, off,
              nevents == 0            ? CTS_MT_PACKET_EMPTY
              : nevents == nlocations ? CTS_MT_PACKET_LOCATIONS
                                      : CTS_MT_PACKET_EVENTS);
  pk.nevents = nevents;
  return emit_packet(r, &pk);
}

/* How many bytes the packet starting at p needs. *known says whether *need is the whole
 * packet (true) or only what is needed to learn more (false). Validates the header's
 * framing fields as soon as they are present. */
static int packet_extent(cts_mt_reader_t *r, const uint8_t *p, size_t avail, uint64_t off,
                         uint32_t *need, bool *known) {
  *known = false;
  if (avail >= 4 && cts_ld_le32(p) != MT_MAGIC)
    return cts__mt_fail(r, CTS_E_BAD_MAGIC, off, "bad packet magic 0x%08x (expected 0x%08x)",
                        cts_ld_le32(p), MT_MAGIC);
  if (avail < MT_MIN_PREFIX) {
    *need = MT_MIN_PREFIX;
    return 0;
  }
  const uint16_t version = cts_ld_le16(p + MT_VERSION_OFFSET);
  if (version < 1 || version > 3)
    return cts__mt_fail(r, CTS_E_BAD_VERSION, off,
                        "trace format v%03u is not supported (v001 to v003 are)", version);
  if (r->have_info && version != r->info.version)
    return cts__mt_fail(r, CTS_E_VERSION_MISMATCH, off, "packet says format v%03u in a v%03u trace",
                        version, r->info.version);
  const uint32_t hs = cts__mt_header_size(version);
  if (avail < hs) {
    *need = hs;
    return 0;
  }
  const uint32_t bits = cts_ld_le32(p + 4);
  if (bits % 8 != 0 || bits / 8 < hs)
    return cts__mt_fail(
        r, CTS_E_PACKET_SIZE, off,
        "packet size of %u bits is not a whole number of bytes of at least the %u-byte "
        "header",
        bits, hs);
  if (bits / 8 > r->cfg.max_packet_size)
    return cts__mt_fail(r, CTS_E_PACKET_TOO_LARGE, off,
                        "packet of %u bytes exceeds the reader's limit of %u bytes", bits / 8,
                        r->cfg.max_packet_size);
  *need = bits / 8;
  *known = true;
  return 0;
}

static int ensure_carry(cts_mt_reader_t *r, size_t need) {
  if (need <= r->carry_cap) return 0;
  size_t cap = r->carry_cap ? r->carry_cap : 65536;
  while (cap < need) cap *= 2;
  uint8_t *c = cts__mt_alloc(r, cap);
  if (!c)
    return cts__mt_fail(r, CTS_E_NOMEM, r->offset, "out of memory for a %zu-byte packet", need);
  if (r->carry_len) memcpy(c, r->carry, r->carry_len);
  cts__mt_free(r, r->carry, r->carry_cap);
  r->carry = c;
  r->carry_cap = cap;
  return 0;
}

int cts_mt_reader_feed(cts_mt_reader_t *r, const void *data, size_t len) {
  if (r->err) return r->err;
  const uint8_t *p = data;
  uint32_t need;
  bool known;
  int e;
  while (len > 0) {
    if (r->carry_len == 0) {
      /* Fast path: whole packets straight from the caller's buffer. */
      for (;;) {
        if ((e = packet_extent(r, p, len, r->offset, &need, &known)) != 0) return e;
        if (!known || need > len) break;
        if ((e = decode_packet(r, p, r->offset)) != 0) return e;
        p += need;
        len -= need;
        r->offset += need;
        if (!len) return 0;
      }
      if ((e = ensure_carry(r, len > MT_MIN_PREFIX ? len : MT_MIN_PREFIX)) != 0) return e;
      memcpy(r->carry, p, len);
      r->carry_len = len;
      return 0;
    }
    if ((e = packet_extent(r, r->carry, r->carry_len, r->offset, &need, &known)) != 0) return e;
    if (r->carry_len < need) {
      if ((e = ensure_carry(r, need)) != 0) return e;
      const size_t take = need - r->carry_len < len ? need - r->carry_len : len;
      memcpy(r->carry + r->carry_len, p, take);
      r->carry_len += take;
      p += take;
      len -= take;
    }
    /* The bytes just taken may complete the header of a header-only (empty) packet: learn
     * its size now, or a feed ending right there would leave a whole packet in the carry
     * and finish() would call it truncated. */
    if (!known && r->carry_len == need &&
        (e = packet_extent(r, r->carry, r->carry_len, r->offset, &need, &known)) != 0)
      return e;
    if (known && r->carry_len == need) {
      if ((e = decode_packet(r, r->carry, r->offset)) != 0) return e;
      r->offset += need;
      r->carry_len = 0;
    }
  }
  /* The carry may now hold enough to learn the packet's size; make that visible early so
   * errors in a header are reported without waiting for more bytes. */
  if (r->carry_len && (e = packet_extent(r, r->carry, r->carry_len, r->offset, &need, &known)))
    return e;
  return 0;
}

int cts_mt_reader_finish(cts_mt_reader_t *r) {
  if (r->err) return r->err;
  if (r->carry_len) {
    uint32_t need;
    bool known;
    int e = packet_extent(r, r->carry, r->carry_len, r->offset, &need, &known);
    if (e) return e;
    if (!known) {
      return cts__mt_fail(r, CTS_E_TRUNCATED_HEADER, r->offset,
                          "trace ends inside a packet header (%zu of %u bytes present)",
                          r->carry_len,
                          r->carry_len < MT_MIN_PREFIX ? CTS_MT_HEADER_SIZE_V2 : need);
    }
    if (!r->have_info)
      return cts__mt_fail(
          r, CTS_E_EMPTY, r->offset,
          "trace ends inside its first (trace-info) packet (%zu of %u bytes present)", r->carry_len,
          need);
    cts__mt_header_t h;
    cts__mt_parse_header(r->carry, &h);
    if ((e = check_header_ranges(r, &h, r->offset)) != 0) return e;
    warn(r, CTS_E_TRUNCATED_PACKET, r->offset,
         "skipping truncated packet: the trace ends after %zu of its %u bytes", r->carry_len, need);
    cts_mt_packet_t pk;
    fill_packet(&pk, &h, r->offset, CTS_MT_PACKET_TRUNCATED);
    r->offset += r->carry_len;
    r->carry_len = 0;
    if ((e = emit_packet(r, &pk)) != 0) return e;
  }
  if (!r->have_info)
    return cts__mt_fail(r, CTS_E_EMPTY, r->offset, "no trace-info packet: the trace is empty");
  return 0;
}
