/* SPDX-License-Identifier: MIT */
/* memtrace writer (docs/formats/memtrace.md §8.5, §10). By default it makes the same
 * choices as the OCaml writer — bucket selection, prediction runs, MTF tables, flush
 * policy, verifier sequence — so that re-writing a trace reproduces memtrace's bytes. The
 * compact encoding (CTS_MT_ENCODING_COMPACT) picks buckets differently; readers replay
 * either the same way. Everything lives in caller-provided memory; nothing here allocates. */
#include <ctfscope/memtrace.h>

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "../common/compiler.h"
#include "loctable.h"
#include "memtrace_wire.h"
#include "memtrace_writer.h"

#define PACKET_SIZE        CTS_MT_MAX_WRITTEN_PACKET
#define EVENT_MAX          4196u /* §10.2: flush when fewer bytes than this are left */
#define LOCATION_ROOM      4096u /* location packets are filled while more remains */
#define MAX_PENDING_BEFORE 128u  /* §10.2: flush when more codes than this wait */
#define BACKTRACE_BYTES    4096u /* §8.5: codewords of one backtrace */
#define CODEWORD_MAX       10u
/* 128 waiting + at most (4096 / 10 + 1) misses in one event. */
#define PENDING_CAP     1024u
#define INFO_STRING_MAX 8000u /* keeps the trace-info packet within 32 KiB */
#define WRITER_MAGIC    0x4d54575255u

/* Compact encoding (see resolve_chain and use_chain). */
#define CHAIN_LEAF        0xFFFFu /* the successor of the innermost frame in a chain key */
#define CHAIN_MAX_MISSING 64u     /* a backtrace's chain is built only this many frames at once */
#define HOT_SIZE          4096u   /* backtraces whose uses are counted (direct-mapped) */
#define CHAIN_USE_BYTES   3u      /* what a use of a built chain costs, at most */
#define CHAIN_MIN_USES    2u      /* no chain for a backtrace seen less often before */
#define SENT_SIZE         4096u   /* codes whose location was sent (direct-mapped) */
/* Literals written per allocation, averaged over about the last 64 (fixed point, 1 = 1024):
 * above 1/8, the cache is under pressure and a chain built now would likely be evicted
 * before it is used again. */
#define LITERALS_AVG_SHIFT 6u
#define LITERALS_ONE       1024u
#define CHAIN_MAX_PRESSURE (LITERALS_ONE / 8u)

/* Names in the MTF tables are kept as two independent 64-bit hashes: the writer must not
 * allocate, and the odds of two names colliding on 128 bits are negligible. */
typedef struct name_key {
  uint64_t a, b;
} name_key_t;

typedef struct wfile {
  name_key_t name;
  uint8_t ndefs;
  name_key_t defs[MT_MTF_SIZE];
} wfile_t;

struct cts_mt_writer {
  uint64_t magic;
  uint16_t version, domain;
  uint32_t header_size;
  uint64_t pid;
  cts_write_cb write;
  void *write_user_data;
  cts_clock_us_cb clock;
  void *clock_user_data;
  cts_mt_resolve_cb resolve;
  void *resolve_user_data;
  int err;
  bool closed;
  /* begin_event's fast path runs while w->pos <= fast_pos and the event's time <= fast_time;
   * fast_pos is 0 (never) once the writer is closed, for v3 (id chunks), and while more
   * codes wait than a packet may hold back; fast_time is the latest time the packet's span
   * allows (§10.2), and below CTS_TIME_NOW. See set_fast_path. */
  size_t fast_pos;
  uint64_t fast_time;
  bool first_event_packet; /* the current packet is the first event packet (dummy verifier) */
  uint64_t bytes_written;
  uint64_t next_id, chunk_end;
  uint64_t packet_start, packet_last, last_time;
  uint64_t packet_first_id;
  uint16_t verify_ix, verify_pred, next_verify_ix;
  uint64_t verify_val;
  size_t pos;
  size_t npending;
  size_t prev_len, prev_cap;
  uint64_t *prev; /* the previous backtrace as the reader will have decoded it */
  uint8_t nfiles;
  bool compact;
  uint16_t *chain;       /* compact: the bucket chosen for each frame of the suffix being written */
  uint32_t literals_avg; /* compact: see LITERALS_AVG_SHIFT */
  uint32_t event_literals; /* literals written by the current allocation */
  /* The fields above, then the packet: a writer's start (its fields, the trace-info packet,
   * the first packet's header) touches one page of fresh memory, the tables below wait for
   * the events that use them (tests/core/test_writer_pages.c). */
  uint8_t packet[PACKET_SIZE];
  wfile_t files[MT_MTF_SIZE];
  uint64_t pending[PENDING_CAP];
  cts_mt_location_t resolved[CTS_MT_MAX_LOCATIONS];
  uint64_t cache[MT_CACHE_SIZE];
  uint64_t date[MT_CACHE_SIZE];
  uint16_t next[MT_CACHE_SIZE];
  /* code_tag(cache[b]) for every bucket b, kept with each write of cache[]: 16 KiB that
   * stay in the CPU's cache, where reading cache[] itself is a miss. resolve_chain tells
   * from it that neither of a frame's chain buckets holds the frame without reading them. */
  uint8_t code_tags[MT_CACHE_SIZE];
  uint32_t hot[HOT_SIZE];   /* compact: 24-bit backtrace hash << 8 | uses (saturating) */
  uint64_t sent[SENT_SIZE]; /* compact: codes whose location is already in the trace */
  uint8_t locpacket[PACKET_SIZE];
};

_Static_assert(sizeof(struct cts_mt_writer) <= CTS_MT_WRITER_MIN_SIZE,
               "CTS_MT_WRITER_MIN_SIZE must cover the writer");

void cts_mt_writer_config_init(cts_mt_writer_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->version = 2;
  cfg->sample_rate = 1e-6;
  cfg->word_size = 64;
  cfg->start_time_us = CTS_TIME_NOW;
  cfg->max_backtrace_frames = 4096;
}

size_t cts_mt_writer_size(const cts_mt_writer_config_t *cfg) {
  return sizeof(struct cts_mt_writer) +
         (size_t)cfg->max_backtrace_frames * (sizeof(uint64_t) + sizeof(uint16_t));
}

uint64_t cts_mt_writer_next_id(const cts_mt_writer_t *w) {
  return w->next_id;
}
uint64_t cts_mt_writer_bytes_written(const cts_mt_writer_t *w) {
  return w->bytes_written;
}

/* ---- bytes -------------------------------------------------------------------------- */

static size_t put_vint(uint8_t *p, uint64_t v) {
  if (v < 253) {
    p[0] = (uint8_t)v;
    return 1;
  }
  if (v <= 0xFFFF) {
    p[0] = 253;
    cts_st_le16(p + 1, (uint16_t)v);
    return 3;
  }
  if (v <= 0x7FFFFFFF) {
    p[0] = 254;
    cts_st_le32(p + 1, (uint32_t)v);
    return 5;
  }
  p[0] = 255;
  cts_st_le64(p + 1, v);
  return 9;
}

static size_t put_string(uint8_t *p, const char *s, size_t max) {
  size_t n = s ? strlen(s) : 0;
  if (n > max) n = max;
  if (n) memcpy(p, s, n);
  p[n] = 0;
  return n + 1;
}

static uint32_t event_header(uint64_t t, unsigned id) {
  return (uint32_t)(t & MT_TIME_MASK) | ((uint32_t)id << MT_TIME_BITS);
}

typedef struct header_fields {
  uint32_t size;
  uint64_t time_begin, time_end;
  uint16_t verify_ix, verify_pred;
  uint64_t verify_val;
  uint64_t id_begin, id_end;
} header_fields_t;

static void put_header(const cts_mt_writer_t *w, uint8_t *p, const header_fields_t *f) {
  cts_st_le32(p, MT_MAGIC);
  cts_st_le32(p + 4, f->size * 8u);
  cts_st_le64(p + 8, f->time_begin);
  cts_st_le64(p + 16, f->time_end);
  cts_st_le32(p + 24, 0);
  cts_st_le16(p + 28, w->version);
  cts_st_le64(p + 30, w->pid);
  uint8_t *q = p + 38;
  if (w->version >= 3) cts_st_le16(q, w->domain), q += 2;
  cts_st_le16(q, f->verify_ix);
  cts_st_le16(q + 2, f->verify_pred);
  cts_st_le64(q + 4, f->verify_val);
  cts_st_le64(q + 12, f->id_begin);
  cts_st_le64(q + 20, f->id_end);
}

static int emit(cts_mt_writer_t *w, const uint8_t *buf, size_t len) {
  const int e = w->write(w->write_user_data, buf, len);
  if (e) {
    w->err = e;
    w->closed = true;
    w->fast_pos = 0;
    return e;
  }
  w->bytes_written += len;
  return 0;
}

/* ---- locations (§7) ------------------------------------------------------------------ */

static name_key_t name_key(const char *s) {
  if (!s) s = "";
  const size_t n = strlen(s);
  return (name_key_t){cts__hash_bytes(s, n, 1), cts__hash_bytes(s, n, 2)};
}

static bool same_key(name_key_t x, name_key_t y) {
  return x.a == y.a && x.b == y.b;
}

/* Move-to-front coding of a file name: returns the code (index or MT_MTF_NEW) and leaves
 * the entry at the front. */
static unsigned mtf_file(cts_mt_writer_t *w, name_key_t key) {
  unsigned i = 0;
  for (; i < w->nfiles; i++)
    if (same_key(w->files[i].name, key)) break;
  if (i < w->nfiles) {
    const wfile_t f = w->files[i];
    memmove(&w->files[1], &w->files[0], i * sizeof f);
    w->files[0] = f;
    return i;
  }
  const unsigned keep = w->nfiles < MT_MTF_SIZE ? w->nfiles : MT_MTF_SIZE - 1;
  memmove(&w->files[1], &w->files[0], keep * sizeof w->files[0]);
  if (w->nfiles < MT_MTF_SIZE) w->nfiles++;
  w->files[0].name = key;
  w->files[0].ndefs = 0;
  return MT_MTF_NEW;
}

static unsigned mtf_def(wfile_t *f, name_key_t key) {
  unsigned i = 0;
  for (; i < f->ndefs; i++)
    if (same_key(f->defs[i], key)) break;
  if (i < f->ndefs) {
    memmove(&f->defs[1], &f->defs[0], i * sizeof key);
    f->defs[0] = key;
    return i;
  }
  const unsigned keep = f->ndefs < MT_MTF_SIZE ? f->ndefs : MT_MTF_SIZE - 1;
  memmove(&f->defs[1], &f->defs[0], keep * sizeof key);
  if (f->ndefs < MT_MTF_SIZE) f->ndefs++;
  f->defs[0] = key;
  return MT_MTF_NEW;
}

static uint32_t clamp(uint32_t v, uint32_t max) {
  return v > max ? max : v;
}

/* Resolves `code` and picks what to send: its locations, or memtrace's sentinel when they
 * do not fit (§7.1). Returns the worst-case payload size (≤ 4096, event header excluded).
 * *locs stays valid until the resolver is called again. */
static size_t select_locations(cts_mt_writer_t *w, uint64_t code, const cts_mt_location_t **locs,
                               size_t *count) {
  static const cts_mt_location_t unknown = {1, 1, 1, "<unknown>", "??"};
  size_t n =
      w->resolve ? w->resolve(w->resolve_user_data, code, w->resolved, CTS_MT_MAX_LOCATIONS) : 0;
  bool oversize = n > CTS_MT_MAX_LOCATIONS;
  size_t worst = 9;
  for (size_t i = 0; i < n && !oversize; i++) {
    const char *f = w->resolved[i].filename ? w->resolved[i].filename : "";
    const char *d = w->resolved[i].defname ? w->resolved[i].defname : "";
    worst += 6 + strlen(f) + 1 + strlen(d) + 1;
    if (worst > BACKTRACE_BYTES) oversize = true;
  }
  if (oversize) {
    *locs = &unknown;
    *count = 1;
    return 9 + 6 + sizeof "<unknown>" + sizeof "??";
  }
  *locs = w->resolved;
  *count = n;
  return worst;
}

/* Encodes the location event for `code` at p; returns its size (≤ 4 + worst-case size). */
static size_t put_location(cts_mt_writer_t *w, uint8_t *p, uint64_t code,
                           const cts_mt_location_t *locs, size_t n) {
  uint8_t *q = p;
  cts_st_le32(q, event_header(w->packet_start, MT_EV_LOCATION));
  cts_st_le64(q + 4, code);
  q[12] = (uint8_t)n;
  q += 13;
  for (size_t i = 0; i < n; i++) {
    const cts_mt_location_t *l = &locs[i];
    const char *f = l->filename ? l->filename : "";
    const char *d = l->defname ? l->defname : "";
    const unsigned fc = mtf_file(w, name_key(f));
    const unsigned dc = mtf_def(&w->files[0], name_key(d));
    const uint64_t bits = (uint64_t)clamp(l->line, MT_LOC_LINE_MAX) |
                          (uint64_t)clamp(l->start_char, MT_LOC_START_MAX) << 20 |
                          (uint64_t)clamp(l->end_char, MT_LOC_END_MAX) << 28 | (uint64_t)fc << 38 |
                          (uint64_t)dc << 43;
    cts_st_le32(q, (uint32_t)bits);
    cts_st_le16(q + 4, (uint16_t)(bits >> 32));
    q += 6;
    if (fc == MT_MTF_NEW) q += put_string(q, f, BACKTRACE_BYTES);
    if (dc == MT_MTF_NEW) q += put_string(q, d, BACKTRACE_BYTES);
  }
  return (size_t)(q - p);
}

static int finish_location_packet(cts_mt_writer_t *w, size_t len) {
  const header_fields_t f = {
      (uint32_t)len,      w->packet_start,   w->packet_start, MT_VERIFY_NONE, 0, 0,
      w->packet_first_id, w->packet_first_id};
  put_header(w, w->locpacket, &f);
  return emit(w, w->locpacket, len);
}

/* §10.2 step 2: the waiting codes, in the order they were missed, as location packets. */
static int write_locations(cts_mt_writer_t *w) {
  if (!w->npending) return 0;
  size_t pos = w->header_size;
  for (size_t i = 0; i < w->npending; i++) {
    const cts_mt_location_t *locs;
    size_t n;
    const size_t worst = select_locations(w, w->pending[i], &locs, &n);
    /* memtrace's rule is the first test. Alone it lets a definition of up to 4 + 4096
     * bytes start with 4097 to 4099 bytes left and end the packet past 32 KiB (and past
     * locpacket); the second test starts a new packet then. Reproducer:
     * tests/fuzz/corpus/fuzz_memtrace_roundtrip/regress-location-packet-overflow. */
    if (PACKET_SIZE - pos <= LOCATION_ROOM || PACKET_SIZE - pos < 4 + worst) {
      const int e = finish_location_packet(w, pos);
      if (e) return e;
      pos = w->header_size;
    }
    pos += put_location(w, w->locpacket + pos, w->pending[i], locs, n);
  }
  w->npending = 0;
  return finish_location_packet(w, pos);
}

/* ---- packets (§10.2) ----------------------------------------------------------------- */

/* Recomputes what begin_event's fast path may skip; called where a packet starts (npending
 * is 0 then). Every condition it folds in is tested again by begin_event_slow. */
static void set_fast_path(cts_mt_writer_t *w) {
  w->fast_pos = w->closed || w->version >= 3 || w->npending > MAX_PENDING_BEFORE
                    ? 0
                    : PACKET_SIZE - EVENT_MAX;
  /* t - packet_start > span is the flush test; times below CTS_TIME_NOW only. */
  w->fast_time = w->packet_start <= CTS_TIME_NOW - 1 - MT_MAX_PACKET_SPAN_US
                     ? w->packet_start + MT_MAX_PACKET_SPAN_US
                     : CTS_TIME_NOW - 1;
}

static void start_packet(cts_mt_writer_t *w, uint64_t start) {
  w->packet_start = w->packet_last = start;
  w->packet_first_id = w->next_id;
  w->pos = w->header_size;
  if (w->first_event_packet) {
    w->verify_ix = MT_VERIFY_NONE;
    w->verify_pred = 0;
    w->verify_val = 0;
  } else {
    /* §8.6: a sample of the cache as it is when the packet starts. */
    w->verify_ix = w->next_verify_ix;
    w->verify_pred = w->next[w->verify_ix];
    w->verify_val = w->cache[w->verify_ix];
    w->next_verify_ix = (uint16_t)((w->next_verify_ix + MT_VERIFY_STEP) % MT_CACHE_SIZE);
  }
  set_fast_path(w);
}

/* Writes the packet being filled, after the locations its events wait for. */
static int finish_packet(cts_mt_writer_t *w) {
  int e = write_locations(w);
  if (e) return e;
  const header_fields_t f = {(uint32_t)w->pos, w->packet_start, w->packet_last,     w->verify_ix,
                             w->verify_pred,   w->verify_val,   w->packet_first_id, w->next_id};
  put_header(w, w->packet, &f);
  if ((e = emit(w, w->packet, w->pos)) != 0) return e;
  w->first_event_packet = false;
  return 0;
}

static int flush_at(cts_mt_writer_t *w, uint64_t new_start) {
  const int e = finish_packet(w);
  if (e) return e;
  start_packet(w, new_start);
  return 0;
}

/* begin_event's rare path: the writer is closed, the time comes from the clock, or a flush
 * is due. Kept out of line so that the common path inlined into each event is a few
 * compares and stores, not a call with the flush's register saves (about 40 instructions
 * of each event went there). */
static CTS_NOINLINE int begin_event_slow(cts_mt_writer_t *w, uint64_t time, uint64_t *t_out) {
  if (w->closed) return w->err ? w->err : CTS_E_CLOSED;
  uint64_t t = time == CTS_TIME_NOW ? w->clock(w->clock_user_data) : time;
  if (t < w->last_time) t = w->last_time; /* a clock step backwards must not break §5 */
  /* v3 (§12): once the chunk of ids is used up, the next event of any kind starts a new
   * packet, which takes the next chunk. */
  const bool chunk_used_up = w->version >= 3 && w->next_id == w->chunk_end;
  if (PACKET_SIZE - w->pos < EVENT_MAX || w->npending > MAX_PENDING_BEFORE ||
      t - w->packet_start > MT_MAX_PACKET_SPAN_US || chunk_used_up) {
    const int e = flush_at(w, t);
    if (e) return e;
  }
  if (chunk_used_up) w->chunk_end += MT_ID_CHUNK;
  w->last_time = w->packet_last = t;
  *t_out = t;
  return 0;
}

/* Runs the flush policy before an event and returns the event's time. The common case
 * (open v2 writer, explicit time within the packet's span, room in the packet, few codes
 * waiting) is two compares against bounds set_fast_path keeps; every other case goes to
 * begin_event_slow, which decides it all again. time <= fast_time also bounds t below: the
 * packet's earlier events were all within its span. */
static CTS_FORCE_INLINE int begin_event(cts_mt_writer_t *w, uint64_t time, uint64_t *t_out) {
  if (CTS_UNLIKELY((w->pos > w->fast_pos) | (time > w->fast_time)))
    return begin_event_slow(w, time, t_out);
  const uint64_t t = time < w->last_time ? w->last_time : time;
  w->last_time = w->packet_last = t;
  *t_out = t;
  return 0;
}

/* ---- backtraces (§8.5) ----------------------------------------------------------------- */

static size_t put_hit(uint8_t *p, uint32_t bucket, unsigned k) {
  if (k == 0) {
    cts_st_le16(p, (uint16_t)(bucket << 2));
    return 2;
  }
  if (k == 1) {
    cts_st_le16(p, (uint16_t)((bucket << 2) | 1));
    return 2;
  }
  cts_st_le16(p, (uint16_t)((bucket << 2) | 2));
  p[2] = (uint8_t)k;
  return 3;
}

/* A literal was written for `code`: its location event must precede the packet. Memtrace
 * sends it again each time; the compact encoding skips codes it knows were sent (a code
 * pushed out of the small table is only sent twice, which readers accept). */
static void note_missed(cts_mt_writer_t *w, uint64_t code) {
  w->event_literals++;
  if (w->compact) {
    uint64_t *const slot = &w->sent[(code * 0x9E3779B97F4A7C15ull) >> 52];
    if (*slot == code) return;
    *slot = code;
  }
  w->pending[w->npending++] = code;
}

/* A code's 8-bit tag in code_tags; 0 for code 0, what the zeroed cache holds. */
static uint8_t code_tag(uint64_t code) {
  return (uint8_t)((code * 0x9E3779B97F4A7C15ull) >> 56);
}

/* Memtrace's bucket for code c (§8.5): the one of its two that holds it, else the older. */
static uint32_t memtrace_bucket(const uint64_t *cache, const uint64_t *date, uint64_t c) {
  const uint32_t h1 = cts__mt_hash1(c), h2 = cts__mt_hash2(c);
  if (cache[h1] == c) return h1;
  if (cache[h2] == c) return h2;
  return date[h1] < date[h2] ? h1 : h2;
}

/* Encodes bt[from..depth) at w->pos with memtrace's buckets, or (chain != NULL) with the
 * bucket chain[i - from] for frame i: a hit when the bucket holds the frame's code, else a
 * literal into it; then predictions while next[] guesses right (and, on a chain, leads
 * along it). The reader replays either whatever the cache holds. Returns the number of
 * codewords; *encoded receives how many frames were written before the 4 KiB bound
 * truncated the rest. Inlined at each call, so that each encoding gets a loop of its own. */
static CTS_FORCE_INLINE uint32_t put_backtrace(cts_mt_writer_t *w, const uint64_t *bt, size_t from,
                                               size_t depth, uint64_t id, const uint16_t *chain,
                                               size_t *encoded) {
  uint8_t *const buf = w->packet;
  size_t pos = w->pos;
  const size_t limit = pos + BACKTRACE_BYTES - CODEWORD_MAX;
  uint64_t *const cache = w->cache, *const date = w->date;
  uint16_t *const next = w->next;
  uint32_t predictor = 0, ncodes = 0;
  size_t i = from;
  while (i < depth && pos <= limit) {
    /* NO-PREDICTION */
    const uint64_t c = bt[i];
    const uint32_t b = chain ? chain[i - from] : memtrace_bucket(cache, date, c);
    date[b] = id;
    next[predictor] = (uint16_t)b;
    ncodes++;
    predictor = b;
    i++;
    if (cache[b] != c) {
      cache[b] = c;
      w->code_tags[b] = code_tag(c);
      cts_st_le16(buf + pos, (uint16_t)((b << 2) | 3));
      cts_st_le64(buf + pos + 2, c);
      pos += 10;
      note_missed(w, c);
      continue;
    }
    /* PREDICTING. pos does not move until the hit is written, so the room for it is
     * checked once: without room no prediction is made, and the hit written then leaves
     * pos past limit, which ends the outer loop as the 4 KiB bound requires. */
    const size_t first = i;
    if (pos + 2 <= limit) {
      /* At most 255 predictions a codeword: one bound instead of a count and a bound. */
      const size_t stop = depth - i > 255 ? i + 255 : depth;
      while (i < stop) {
        const uint32_t p = next[predictor];
        if (cache[p] != bt[i] || (chain && p != chain[i - from])) break;
        if (chain) date[p] = id; /* chain links are used through predictions: not stale */
        predictor = p;
        i++;
      }
    }
    pos += put_hit(buf + pos, b, (unsigned)(i - first));
  }
  w->pos = pos;
  *encoded = i - from;
  return ncodes;
}

/* ---- compact encoding ------------------------------------------------------------------ */

/* Memtrace keys a bucket by its code alone, so a frame reached from several places has one
 * bucket whose prediction (next[]) names whichever callee came last: where backtraces part
 * ways, predictions fail and each parting costs another codeword. The compact encoding
 * keys a bucket by the code *and the bucket of the frame below it* (CHAIN_LEAF for the
 * allocation point), so a bucket's next[] always names its own successor: a backtrace
 * whose chain is in the cache is written as one hit on the first frame after the common
 * prefix plus predictions (up to 255 a codeword), 2 or 3 bytes. Building a chain costs one
 * 10-byte literal per frame, so it is done for backtraces seen a few times; others, and
 * deep recursion (one bucket predicting itself in memtrace's scheme), keep memtrace's
 * choices. The reader's state rules are unchanged: only which bucket is chosen differs. */

static uint32_t chain_bucket(uint64_t code, uint32_t succ, uint64_t mul) {
  const uint32_t b = (uint32_t)(((code ^ ((uint64_t)succ << 47)) * mul) >> 50);
  return b ? b : 1; /* bucket 0 is every suffix's first predictor: never a chain link */
}

/* Whether bucket g is the chain link of code c (whose code_tag is tag) followed by bucket
 * succ. The tag first: most buckets asked about hold another code, and it is in cache. */
static bool holds_link(const cts_mt_writer_t *w, uint32_t g, uint64_t c, uint8_t tag,
                       uint32_t succ) {
  return w->code_tags[g] == tag && w->cache[g] == c && (succ == CHAIN_LEAF || w->next[g] == succ);
}

/* Bytes of the codewords for a run of `frames` hits joined by predictions: one codeword
 * per 256 frames (a hit and up to 255 predictions), 3 bytes with 2 or more predictions,
 * else 2. */
static size_t run_bytes(size_t frames) {
  const size_t rest = frames % 256u;
  return frames / 256u * 3u + (rest == 0 ? 0 : rest <= 2 ? 2 : 3);
}

/* resolve_chain's progress through a suffix bt[from..depth), innermost frame first. */
typedef struct chain_plan {
  size_t left;    /* the frames bt[from..left) are not resolved yet */
  uint32_t succ;  /* the bucket of frame `left` (CHAIN_LEAF before the innermost) */
  size_t run;     /* frames of the run frame `left` belongs to (0: a literal) */
  size_t missing; /* frames resolved whose bucket does not hold their chain link yet */
  size_t bytes;   /* codewords of the frames resolved, the open run excepted */
} chain_plan_t;

static chain_plan_t chain_plan_start(size_t depth) {
  return (chain_plan_t){depth, CHAIN_LEAF, 0, 0, 0};
}

/* Codewords of the frames resolved (all of them: what put_backtrace writes along the
 * chain). Never decreases as frames are resolved: run_bytes grows with the run. */
static size_t chain_plan_bytes(const chain_plan_t *plan) {
  return plan->bytes + run_bytes(plan->run);
}

/* Chooses, innermost frame first, the bucket of each frame of bt[from..plan->left) into
 * w->chain, counts the frames that do not hold their chain link yet, and prices the chain
 * in the same pass (the cache as it is: writing along a chain leaves every bucket it reads
 * unchanged before the read). Reads only.
 *
 * The price without a second walk: put_backtrace writes a literal for a frame whose bucket
 * does not hold its code; the other frames form runs, and frame i continues frame i+1's run
 * (outermost first: i+1 is predicted from i) when both hold their codes and next[] of i's
 * bucket is i+1's bucket, which is what holding the chain link means for i. A frame that
 * holds its code but not its link starts a run of its own.
 *
 * Returns true once every frame is resolved. Returns false, the plan resumable, when a
 * frame misses its link and the chain costs at least `lose_at` bytes with it whatever the
 * frames left add (resolved or not, that frame is missing: the chain is incomplete). */
static CTS_FORCE_INLINE bool resolve_chain(const cts_mt_writer_t *w, const uint64_t *bt,
                                           size_t from, chain_plan_t *plan, size_t lose_at) {
  const uint64_t *const cache = w->cache;
  while (plan->left > from) {
    const size_t i = plan->left - 1;
    const uint64_t c = bt[i];
    const uint8_t tag = code_tag(c);
    const uint32_t succ = plan->succ;
    const uint32_t g1 = chain_bucket(c, succ, 0x9E3779B97F4A7C15ull);
    uint32_t b = g1;
    bool stop = false;
    if (holds_link(w, g1, c, tag, succ)) {
      plan->run++;
    } else {
      const uint32_t g2 = chain_bucket(c, succ, 0xC2B2AE3D27D4EB4Full);
      b = g2;
      if (holds_link(w, g2, c, tag, succ)) {
        plan->run++;
      } else {
        /* Neither bucket holds c (their tags say so): a literal whichever is chosen, and
         * whether the chain has lost is known before reading their dates. */
        const size_t closed = chain_plan_bytes(plan);
        if (w->code_tags[g1] != tag && w->code_tags[g2] != tag && closed + 10 >= lose_at)
          return false;
        b = w->date[g1] < w->date[g2] ? g1 : g2;
        plan->missing++;
        plan->bytes = closed;
        if (cache[b] == c) {
          plan->run = 1;
        } else {
          plan->run = 0;
          plan->bytes += 10;
        }
        stop = chain_plan_bytes(plan) >= lose_at;
      }
    }
    w->chain[i - from] = (uint16_t)b;
    plan->succ = b;
    plan->left = i;
    if (stop) return false;
  }
  return true;
}

/* Counts a use of the whole backtrace; returns how many uses it had before (a different
 * backtrace with the same hash shares the count: it can only make a chain built early). */
static uint32_t count_use(cts_mt_writer_t *w, const uint64_t *bt, size_t depth) {
  /* Not common/hash.h's mixer, on purpose: which backtraces share a slot decides when a
   * chain is built, so this hash is part of the encoding; another one would change the
   * bytes written (and the goldens). */
  uint64_t h = depth;
  for (size_t i = 0; i < depth; i++) h = (h ^ bt[i]) * 0xff51afd7ed558ccdull;
  h ^= h >> 29;
  uint32_t *const slot = &w->hot[h & (HOT_SIZE - 1)];
  const uint32_t tag = (uint32_t)(h >> 40) << 8;
  if ((*slot & ~0xFFu) != tag) {
    *slot = tag | 1u;
    return 0;
  }
  const uint32_t uses = *slot & 0xFFu;
  if (uses < 0xFF) (*slot)++;
  return uses;
}

/* Bytes of codewords put_backtrace would write for bt[from..depth) with memtrace's buckets,
 * estimated from the cache as it is (the updates the suffix itself makes are not
 * simulated). */
static size_t memtrace_cost(const cts_mt_writer_t *w, const uint64_t *bt, size_t from,
                            size_t depth) {
  const uint64_t *const cache = w->cache;
  const uint16_t *const next = w->next;
  size_t bytes = 0, i = from;
  while (i < depth) {
    const uint64_t c = bt[i];
    uint32_t b = memtrace_bucket(cache, w->date, c);
    i++;
    if (cache[b] != c) {
      bytes += 10;
      continue;
    }
    unsigned k = 0;
    while (i < depth && k < 255 && cache[next[b]] == bt[i]) b = next[b], i++, k++;
    bytes += k >= 2 ? 3 : 2;
  }
  return bytes;
}

/* The compact encoding's choice for one suffix. The chain when it is all in the cache (one
 * codeword per 256 frames: nothing is cheaper) or costs less than memtrace's choices now.
 * Building a chain costs bytes now (literals where memtrace would hit) and saves bytes at
 * each later use (one codeword where memtrace's take several); it is built when the
 * backtrace was seen at least twice before and as many more uses as it has had so far would
 * repay it, little of it is missing, and the cache is not under pressure. Memtrace's choices
 * otherwise: their buckets serve every backtrace through a code, a chain's only one. */
static bool use_chain(cts_mt_writer_t *w, const uint64_t *bt, size_t from, size_t depth) {
  if (!w->compact || depth - from > w->prev_cap) return false;
  /* The chain first, until it costs CHAIN_USE_BYTES: a chain all in the cache needs nothing
   * else. Then memtrace's price: most suffixes are one hit and its predictions there (3
   * bytes at most), and then, or under pressure, the chain only matters while it may cost
   * less, so its resolution stops once it cannot. */
  chain_plan_t plan = chain_plan_start(depth);
  const bool resolved = resolve_chain(w, bt, from, &plan, CHAIN_USE_BYTES);
  if (resolved && plan.missing == 0) return true;
  const size_t memtrace_bytes = memtrace_cost(w, bt, from, depth);
  const bool build_ruled_out =
      memtrace_bytes <= CHAIN_USE_BYTES || w->literals_avg > CHAIN_MAX_PRESSURE;
  if (!resolved &&
      (memtrace_bytes <= CHAIN_USE_BYTES ||
       !resolve_chain(w, bt, from, &plan, build_ruled_out ? memtrace_bytes : SIZE_MAX)))
    return false; /* the chain costs at least memtrace's bytes, and no chain is built */
  const size_t chain_bytes = chain_plan_bytes(&plan);
  if (chain_bytes < memtrace_bytes) return true;
  if (build_ruled_out || plan.missing > CHAIN_MAX_MISSING) return false;
  const uint64_t uses = count_use(w, bt, depth);
  return uses >= CHAIN_MIN_USES &&
         chain_bytes - memtrace_bytes <= uses * (memtrace_bytes - CHAIN_USE_BYTES);
}

/* ---- the common prefix -------------------------------------------------------------- */

/* The number of leading frames a[] and b[] share, at most n. Most of a deep program's stack
 * is shared with the previous allocation's: frame by frame, this loop was a fifth of an
 * allocation's instructions (about 6 a frame). With SSE2 (every x86-64) four frames are
 * compared per test. */
static size_t common_prefix(const uint64_t *a, const uint64_t *b, size_t n) {
  size_t i = 0;
#ifdef __SSE2__
  for (; i + 4 <= n; i += 4) {
    const __m128i e0 = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(a + i)),
                                      _mm_loadu_si128((const __m128i *)(b + i)));
    const __m128i e1 = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(a + i + 2)),
                                      _mm_loadu_si128((const __m128i *)(b + i + 2)));
    const unsigned ne = ~((unsigned)_mm_movemask_epi8(e0) | (unsigned)_mm_movemask_epi8(e1) << 16);
    if (ne) return i + (size_t)(__builtin_ctz(ne) >> 3); /* its first differing byte's frame */
  }
#endif
  while (i < n && a[i] == b[i]) i++;
  return i;
}

/* common_prefix against frames stored innermost first: the leading frames a[k] equal to
 * f[depth - 1 - k], at most n <= depth. */
static size_t common_prefix_rev(const uint64_t *a, const uint64_t *f, size_t depth, size_t n) {
  size_t i = 0;
#ifdef __SSE2__
  for (; i + 4 <= n; i += 4) {
    /* f[depth-4-i .. depth-1-i] holds a[i+3 .. i] in that order: swap each pair's halves. */
    const __m128i hi =
        _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(f + depth - 2 - i)), 0x4E);
    const __m128i lo =
        _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(f + depth - 4 - i)), 0x4E);
    const __m128i e0 = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(a + i)), hi);
    const __m128i e1 = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(a + i + 2)), lo);
    const unsigned ne = ~((unsigned)_mm_movemask_epi8(e0) | (unsigned)_mm_movemask_epi8(e1) << 16);
    if (ne) return i + (size_t)(__builtin_ctz(ne) >> 3);
  }
#endif
  while (i < n && a[i] == f[depth - 1 - i]) i++;
  return i;
}

/* ---- public API -------------------------------------------------------------------------- */

static int writer_init(cts_mt_writer_t **out, void *mem, size_t mem_size,
                       const cts_mt_writer_config_t *cfg, bool zeroed) {
  if (!out || !mem || !cfg || cfg->struct_size < sizeof *cfg || !cfg->write ||
      ((uintptr_t)mem & 7u) != 0 || mem_size < cts_mt_writer_size(cfg) ||
      (cfg->version != 2 && cfg->version != 3) ||
      !(cfg->sample_rate > 0.0 && cfg->sample_rate <= 1.0) || cfg->word_size == 0 ||
      (cfg->start_time_us == CTS_TIME_NOW && !cfg->clock) ||
      (cfg->encoding != CTS_MT_ENCODING_MEMTRACE && cfg->encoding != CTS_MT_ENCODING_COMPACT))
    return CTS_E_INVAL;
  cts_mt_writer_t *w = mem;
  if (!zeroed) memset(w, 0, sizeof *w);
  w->magic = WRITER_MAGIC;
  w->version = cfg->version;
  w->domain = cfg->version >= 3 ? cfg->domain : 0;
  w->header_size = cts__mt_header_size(cfg->version);
  w->pid = cfg->pid;
  w->write = cfg->write;
  w->write_user_data = cfg->write_user_data;
  w->clock = cfg->clock;
  w->clock_user_data = cfg->clock_user_data;
  w->resolve = cfg->resolve;
  w->resolve_user_data = cfg->resolve_user_data;
  w->prev = (uint64_t *)(w + 1);
  w->prev_cap = cfg->max_backtrace_frames;
  w->compact = cfg->encoding == CTS_MT_ENCODING_COMPACT;
  w->chain = (uint16_t *)(w->prev + w->prev_cap);
  w->chunk_end = MT_ID_CHUNK;
  w->next_verify_ix = MT_VERIFY_FIRST;
  const uint64_t start =
      cfg->start_time_us == CTS_TIME_NOW ? cfg->clock(cfg->clock_user_data) : cfg->start_time_us;
  w->last_time = start;

  /* §6: the trace-info packet. */
  uint8_t *p = w->packet, *q = p + w->header_size;
  cts_st_le32(q, event_header(start, MT_EV_TRACE_INFO));
  uint64_t rate_bits;
  memcpy(&rate_bits, &cfg->sample_rate, sizeof rate_bits);
  cts_st_le64(q + 4, rate_bits);
  q[12] = cfg->word_size;
  q += 13;
  q += put_string(q, cfg->executable_name, INFO_STRING_MAX);
  q += put_string(q, cfg->host_name, INFO_STRING_MAX);
  q += put_string(q, cfg->runtime_params, INFO_STRING_MAX);
  cts_st_le64(q, cfg->pid);
  q += 8;
  q += put_string(q, cfg->context, INFO_STRING_MAX);
  const header_fields_t f = {(uint32_t)(q - p), start, start, MT_VERIFY_NONE, 0, 0, 0, 0};
  put_header(w, p, &f);
  const int e = emit(w, p, (size_t)(q - p));
  if (e) return e;
  w->first_event_packet = true;
  start_packet(w, start);
  *out = w;
  return 0;
}

int cts_mt_writer_init(cts_mt_writer_t **out, void *mem, size_t mem_size,
                       const cts_mt_writer_config_t *cfg) {
  return writer_init(out, mem, mem_size, cfg, false);
}

/* memtrace_writer.h. */
int cts__mt_writer_init_zeroed(cts_mt_writer_t **out, void *mem, size_t mem_size,
                               const cts_mt_writer_config_t *cfg) {
  return writer_init(out, mem, mem_size, cfg, true);
}

void *cts__mt_writer_event_memory(cts_mt_writer_t *w, size_t *size) {
  uint8_t *const start = (uint8_t *)w->files;
  const uint8_t *const end = (const uint8_t *)(w->chain + w->prev_cap);
  *size = (size_t)(end - start);
  return start;
}

/* cts_mt_writer_alloc with `frames` outermost first (innermost = false) or innermost first
 * (then depth <= prev_cap: the suffix is reversed straight into prev, which is then the
 * backtrace encoded, and whatever the reader keeps of it is already in place). */
static CTS_FORCE_INLINE int alloc_event(cts_mt_writer_t *w, uint64_t time_us, uint64_t length,
                                        uint64_t nsamples, cts_mt_source_t source,
                                        const uint64_t *frames, size_t depth, bool innermost,
                                        uint64_t *obj_id) {
  /* One test for both values above INT64_MAX. */
  if ((unsigned)source > CTS_MT_SOURCE_EXTERNAL || (depth && !frames) ||
      ((length | nsamples) >> 63) != 0 || (innermost && depth > w->prev_cap))
    return CTS_E_INVAL;
  uint64_t t;
  int e = begin_event(w, time_us, &t);
  if (e) return e;
  const size_t common_max = depth < w->prev_len ? depth : w->prev_len;
  const uint64_t *backtrace = frames;
  size_t cp;
  if (innermost) {
    cp = common_prefix_rev(w->prev, frames, depth, common_max);
    for (size_t k = cp; k < depth; k++) w->prev[k] = frames[depth - 1 - k];
    backtrace = w->prev;
  } else {
    cp = common_prefix(w->prev, frames, common_max);
  }
  const uint64_t id = w->next_id++;
  const bool short_form = length >= 1 && length <= 16 && source == CTS_MT_SOURCE_MINOR &&
                          nsamples == 1 && depth - cp < 256;
  uint8_t *const buf = w->packet;
  size_t pos = w->pos, count_pos;
  cts_st_le32(buf + pos, event_header(t, short_form ? MT_EV_SHORT_ALLOC_BASE + (unsigned)length
                                                    : MT_EV_ALLOC));
  pos += 4;
  if (short_form) {
    pos += put_vint(buf + pos, cp);
    count_pos = pos++;
  } else {
    pos += put_vint(buf + pos, length);
    pos += put_vint(buf + pos, nsamples);
    buf[pos++] = (uint8_t)source;
    pos += put_vint(buf + pos, cp);
    count_pos = pos;
    pos += 2;
  }
  w->pos = pos;
  size_t encoded;
  w->event_literals = 0;
  /* The compact test here: use_chain is not always inlined, and a call per allocation of
   * the memtrace encoding only to return false cost ~20 instructions. */
  const uint32_t ncodes = w->compact && use_chain(w, backtrace, cp, depth)
                              ? put_backtrace(w, backtrace, cp, depth, id, w->chain, &encoded)
                              : put_backtrace(w, backtrace, cp, depth, id, NULL, &encoded);
  /* The next event flushes (begin_event's fast path must not run). */
  if (w->npending > MAX_PENDING_BEFORE) w->fast_pos = 0;
  if (w->compact) /* only the compact encoding reads it */
    w->literals_avg += (w->event_literals * LITERALS_ONE >> LITERALS_AVG_SHIFT) -
                       (w->literals_avg >> LITERALS_AVG_SHIFT);
  if (short_form) {
    buf[count_pos] = (uint8_t)ncodes;
  } else {
    cts_st_le16(buf + count_pos, (uint16_t)ncodes);
  }
  /* Remember what the reader will hold: the prefix plus the frames actually encoded, so
   * the next prefix never claims frames the reader lost to truncation. */
  size_t keep = cp + encoded;
  if (keep > w->prev_cap) keep = w->prev_cap;
  if (!innermost && keep > cp)
    memcpy(w->prev + cp, backtrace + cp, (keep - cp) * sizeof *backtrace);
  w->prev_len = keep;
  if (obj_id) *obj_id = id;
  return 0;
}

int cts_mt_writer_alloc(cts_mt_writer_t *w, uint64_t time_us, uint64_t length, uint64_t nsamples,
                        cts_mt_source_t source, const uint64_t *backtrace, size_t depth,
                        uint64_t *obj_id) {
  return alloc_event(w, time_us, length, nsamples, source, backtrace, depth, false, obj_id);
}

/* memtrace_writer.h. */
int cts__mt_writer_alloc_innermost_first(cts_mt_writer_t *w, uint64_t time_us, uint64_t length,
                                         uint64_t nsamples, cts_mt_source_t source,
                                         const uint64_t *frames, size_t depth, uint64_t *obj_id) {
  return alloc_event(w, time_us, length, nsamples, source, frames, depth, true, obj_id);
}

static CTS_FORCE_INLINE int put_ref(cts_mt_writer_t *w, uint64_t time_us, uint64_t obj_id,
                                    unsigned ev) {
  if (obj_id >= w->next_id) return w->closed ? (w->err ? w->err : CTS_E_CLOSED) : CTS_E_INVAL;
  uint64_t t;
  const int e = begin_event(w, time_us, &t);
  if (e) return e;
  cts_st_le32(w->packet + w->pos, event_header(t, ev));
  w->pos += 4;
  w->pos += put_vint(w->packet + w->pos, w->next_id - 1 - obj_id);
  return 0;
}

int cts_mt_writer_promote(cts_mt_writer_t *w, uint64_t time_us, uint64_t obj_id) {
  return put_ref(w, time_us, obj_id, MT_EV_PROMOTE);
}

int cts_mt_writer_collect(cts_mt_writer_t *w, uint64_t time_us, uint64_t obj_id) {
  return put_ref(w, time_us, obj_id, MT_EV_COLLECT);
}

int cts_mt_writer_flush(cts_mt_writer_t *w) {
  if (w->closed) return w->err ? w->err : CTS_E_CLOSED;
  return flush_at(w, w->last_time);
}

int cts_mt_writer_close(cts_mt_writer_t *w) {
  if (!w || w->magic != WRITER_MAGIC) return CTS_E_INVAL;
  if (w->closed) return w->err ? w->err : CTS_E_CLOSED;
  /* No packet after the last: starting one would read the cache's verifier sample, two
   * pages a writer that wrote no event never touched (test_writer_pages). */
  const int e = finish_packet(w);
  w->closed = true;
  w->fast_pos = 0;
  return e;
}

int cts_mt_writer_close_at(cts_mt_writer_t *w, uint64_t end_us) {
  if (!w || w->magic != WRITER_MAGIC) return CTS_E_INVAL;
  if (w->closed) return w->err ? w->err : CTS_E_CLOSED;
  /* §4: the last packet's timestamp_end may lie past its last event (readers only require
   * begin <= every event <= end); an empty packet is legal too. */
  if (end_us > w->packet_last) w->packet_last = end_us;
  return cts_mt_writer_close(w);
}
