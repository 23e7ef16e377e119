/* SPDX-License-Identifier: MIT */
/* The memtrace reader's event decoding (docs/formats/memtrace.md §5-§9): everything inside
 * one whole packet, which memtrace_reader.c has framed and checked. A fast loop decodes
 * the common events without bounds checks and hands anything else to a careful decoder
 * that reports every error; both share the backtrace decoder and its cache. */
#include <string.h>

#include "memtrace_reader_impl.h"

#if defined(__GNUC__) && !defined(__clang__)
/* gcc's straight-line vectoriser pairs the two frames a codeword stores into one vector
 * store: four instructions (two moves to vector registers, a shuffle, the store) for two
 * plain stores, in the loop that runs for every codeword. */
#pragma GCC optimize("no-tree-slp-vectorize")
#endif

/* Hides from the compiler what it knows of x's value, at no cost: see its one use. */
#if defined(__GNUC__)
#define OPAQUE(x) __asm__("" : "+r"(x))
#else
#define OPAQUE(x) ((void)0)
#endif

/* Makes room for need (<= max_backtrace_frames) frames in d->bt. False if out of memory. */
static bool reserve_backtrace(cts_mt_reader_t *r, domain_t *d, size_t need) {
  size_t cap = d->bt_cap ? d->bt_cap : 1024;
  while (cap < need) cap *= 2;
  if (cap > r->cfg.max_backtrace_frames) cap = r->cfg.max_backtrace_frames;
  uint64_t *bt = cts__mt_alloc(r, cap * sizeof *bt);
  if (!bt) return false;
  if (d->bt_cap) memcpy(bt, d->bt, d->bt_cap * sizeof *bt);
  cts__mt_free(r, d->bt, d->bt_cap * sizeof *bt);
  d->bt = bt;
  d->bt_cap = cap;
  return true;
}

/* Makes room for `need` frames in d->bt, within max_backtrace_frames. */
CTS_NOINLINE static int grow_backtrace(cts_mt_reader_t *r, domain_t *d, size_t need, uint64_t off) {
  if (need > r->cfg.max_backtrace_frames)
    return cts__mt_fail(r, CTS_E_BACKTRACE_TOO_LONG, off,
                        "backtrace longer than the limit of %u frames (raise it with the reader's "
                        "max_backtrace_frames)",
                        r->cfg.max_backtrace_frames);
  if (!reserve_backtrace(r, d, need))
    return cts__mt_fail(r, CTS_E_NOMEM, off, "out of memory for a %zu-frame backtrace", need);
  return 0;
}

/* ---- primitive decoding --------------------------------------------------------------- */

/* §2: vint. Returns false if the packet ends inside it. With careful false (a constant at
 * each call) the caller guarantees 9 bytes are left and the bounds checks go. */
static CTS_FORCE_INLINE bool rd_vint(const uint8_t **pp, const uint8_t *end, int64_t *v,
                                     const bool careful) {
  const uint8_t *p = *pp;
  if (careful && CTS_UNLIKELY(p >= end)) return false;
  const uint8_t c = *p++;
  if (CTS_LIKELY(c < 253)) {
    *v = c;
  } else if (c == 253) {
    if (careful && end - p < 2) return false;
    *v = cts_ld_le16(p);
    p += 2;
  } else if (c == 254) {
    if (careful && end - p < 4) return false;
    *v = (int32_t)cts_ld_le32(p);
    p += 4;
  } else {
    if (careful && end - p < 8) return false;
    *v = (int64_t)cts_ld_le64(p);
    p += 8;
  }
  *pp = p;
  return true;
}

/* Longest fixed part of an event after its header: a long-form allocation's three vints,
 * source byte and u16 codeword count. */
#define EVENT_FIXED_MAX (3u * 9u + 1u + 2u)

/* The fixed fields of a long-form allocation (§8.1). False if the packet ends inside them. */
static CTS_FORCE_INLINE bool read_long_alloc(const uint8_t **pp, const uint8_t *end,
                                             int64_t *length, int64_t *nsamples, unsigned *source,
                                             int64_t *cp, uint32_t *nencoded, const bool careful) {
  if (!rd_vint(pp, end, length, careful) || !rd_vint(pp, end, nsamples, careful)) return false;
  if (careful && *pp >= end) return false;
  *source = *(*pp)++;
  if (!rd_vint(pp, end, cp, careful)) return false;
  if (careful && end - *pp < 2) return false;
  *nencoded = cts_ld_le16(*pp);
  *pp += 2;
  return true;
}

/* A NUL-terminated string inside the packet; interned so it outlives the packet. */
static int rd_string(cts_mt_reader_t *r, const uint8_t **pp, const uint8_t *end, uint64_t base,
                     const uint8_t *pkt, const char *what, const char **out) {
  const uint8_t *p = *pp;
  const uint8_t *nul = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
  if (!nul)
    return cts__mt_fail(r, CTS_E_UNTERMINATED_STRING, base + (uint64_t)(p - pkt),
                        "%s: string runs to the end of the packet without a NUL", what);
  int err = 0;
  *out = cts__loctable_intern(&r->locs, (const char *)p, (size_t)(nul - p), &err);
  if (!*out)
    return cts__mt_fail(r, err, base + (uint64_t)(p - pkt), "%s: no memory left for names (%s)",
                        what, cts_strerror(err));
  *pp = nul + 1;
  return 0;
}

/* ---- location events (§7) -------------------------------------------------------------- */

static int mtf_lookup(cts_mt_reader_t *r, const char **table, uint8_t *count, unsigned code,
                      const char *name_if_new, const char **out, uint64_t off, const char *what) {
  if (code == MT_MTF_NEW) {
    const unsigned keep = *count < MT_MTF_SIZE ? *count : MT_MTF_SIZE - 1;
    memmove(table + 1, table, keep * sizeof *table);
    table[0] = name_if_new;
    if (*count < MT_MTF_SIZE) (*count)++;
    *out = name_if_new;
    return 0;
  }
  if (code >= *count)
    return cts__mt_fail(r, CTS_E_MTF_INDEX, off,
                        "%s name index %u but the table holds only %u names", what, code, *count);
  const char *name = table[code];
  memmove(table + 1, table, code * sizeof *table);
  table[0] = name;
  *out = name;
  return 0;
}

static int decode_location(cts_mt_reader_t *r, domain_t *d, const uint8_t **pp, const uint8_t *end,
                           const uint8_t *pkt, uint64_t base, uint64_t evoff) {
  const uint8_t *p = *pp;
  if (end - p < 9)
    return cts__mt_fail(r, CTS_E_EVENT_OVERRUN, evoff,
                        "location event cut off by the end of its packet");
  const uint64_t code = cts_ld_le64(p);
  const unsigned nlocs = p[8];
  p += 9;
  if (code == 0)
    return cts__mt_fail(r, CTS_E_LOCATION_CODE_ZERO, evoff, "location event defines code 0");
  for (unsigned i = 0; i < nlocs; i++) {
    if (end - p < 6)
      return cts__mt_fail(r, CTS_E_EVENT_OVERRUN, evoff,
                          "location %u of code %llu cut off by the end of its packet", i,
                          (unsigned long long)code);
    const uint64_t bits = (uint64_t)cts_ld_le32(p) | ((uint64_t)cts_ld_le16(p + 4) << 32);
    p += 6;
    cts_mt_location_t *loc = &r->scratch[i];
    loc->line = (uint32_t)(bits & MT_LOC_LINE_MAX);
    loc->start_char = (uint32_t)((bits >> 20) & MT_LOC_START_MAX);
    loc->end_char = (uint32_t)((bits >> 28) & MT_LOC_END_MAX);
    const unsigned fcode = (unsigned)((bits >> 38) & 31);
    const unsigned dcode = (unsigned)((bits >> 43) & 31);
    const char *fname = NULL, *dname = NULL;
    int e;
    if (fcode == MT_MTF_NEW &&
        (e = rd_string(r, &p, end, base, pkt, "location filename", &fname)) != 0)
      return e;
    if (dcode == MT_MTF_NEW &&
        (e = rd_string(r, &p, end, base, pkt, "location function name", &dname)) != 0)
      return e;
    /* File table: a new file goes to the front with a fresh defname table, except in v1,
     * whose pre-release writer reused the evicted entry's table (§7.2). */
    if (fcode == MT_MTF_NEW) {
      mtf_file_t evicted = d->files[MT_MTF_SIZE - 1];
      const unsigned keep = d->nfiles < MT_MTF_SIZE ? d->nfiles : MT_MTF_SIZE - 1;
      const bool reuse = d->nfiles == MT_MTF_SIZE && r->info.version == 1;
      memmove(&d->files[1], &d->files[0], keep * sizeof d->files[0]);
      if (d->nfiles < MT_MTF_SIZE) d->nfiles++;
      if (reuse) {
        d->files[0] = evicted;
      } else {
        d->files[0].ndefs = 0;
      }
      d->files[0].name = fname;
    } else {
      if (fcode >= d->nfiles)
        return cts__mt_fail(r, CTS_E_MTF_INDEX, evoff,
                            "filename index %u but the file table holds only %u names", fcode,
                            d->nfiles);
      const mtf_file_t f = d->files[fcode];
      memmove(&d->files[1], &d->files[0], fcode * sizeof d->files[0]);
      d->files[0] = f;
    }
    loc->filename = d->files[0].name;
    e = mtf_lookup(r, d->files[0].defs, &d->files[0].ndefs, dcode, dname, &loc->defname, evoff,
                   "function");
    if (e) return e;
  }
  const cts__loc_entry_t *entry;
  const int e = cts__loctable_define(&r->locs, code, r->scratch, nlocs, &entry);
  if (e == CTS_E_LOCATION_CONFLICT)
    return cts__mt_fail(r, e, evoff, "location code %llu redefined with different locations",
                        (unsigned long long)code);
  if (e) return cts__mt_fail(r, e, evoff, "cannot store locations: %s", cts_strerror(e));
  *pp = p;
  if (r->h.on_location) {
    const int rc = r->h.on_location(r->h.user_data, code, entry->locs, entry->n);
    if (rc) return cts__mt_stopped(r, rc, evoff);
  }
  return 0;
}

/* ---- backtraces (§8.3, §8.4) ----------------------------------------------------------- */

/* Longest codeword (u16 and a u64 literal), and most frames one codeword yields (a hit and
 * up to 255 predicted codes). A backtrace whose codewords all fit in the rest of the packet
 * and whose frames all fit in the buffer at these worst cases needs no bounds checks per
 * codeword, which is the common case by far: decode_codewords_fast() handles it. */
#define CODEWORD_MAX_BYTES  10u
#define CODEWORD_MAX_FRAMES 256u

/* Predicted codes of a run that the fast decoder loads without a branch on the run's
 * length when a domain's tags are mixed (at most CODEWORD_MAX_FRAMES - 1). */
#define RUN_UNROLLED 3u

/* Whether a location event has defined code (non-zero). */
static CTS_FORCE_INLINE bool location_defined(cts_mt_reader_t *r, uint64_t code) {
  /* Fibonacci hashing (one multiply, the top byte) rather than cts_mix64: this runs for
   * every literal codeword, and the full mixer cost about 2% of decoding throughput in
   * read_bench, for a cache that needs no better spread. */
  uint64_t *const slot =
      &r->defined_recently[((code * 0x9e3779b97f4a7c15ull) >> 56) & (DEFINED_CACHE_SIZE - 1)];
  if (CTS_LIKELY(*slot == code)) return true;
  if (!cts__loctable_find(&r->locs, code)) return false;
  *slot = code;
  return true;
}

/* A literal codeword's code (tag 3): checked, then stored in its bucket and reported to the
 * literal hook; kept: the backtrace being decoded is the one its event will carry. */
CTS_NOINLINE static int store_literal(cts_mt_reader_t *r, domain_t *d, uint32_t bucket,
                                      uint64_t code, bool kept, uint64_t evoff) {
  if (CTS_UNLIKELY(code == 0))
    return cts__mt_fail(r, CTS_E_LOCATION_CODE_ZERO, evoff, "backtrace stores location code 0");
  if (CTS_UNLIKELY(!location_defined(r, code)))
    return cts__mt_fail(r, CTS_E_LOCATION_UNDEFINED, evoff,
                        "backtrace uses location code %llu before any location event defines it",
                        (unsigned long long)code);
  d->cache_loc[bucket] = code;
  r->deliver_alloc = true; /* counting allocations, this one is delivered */
  if (r->on_literal) r->on_literal(r->literal_user_data, code, kept);
  return 0;
}

CTS_NOINLINE static int empty_bucket(cts_mt_reader_t *r, uint64_t evoff) {
  return cts__mt_fail(r, CTS_E_LOCATION_CODE_ZERO, evoff,
                      "backtrace refers to an empty cache bucket (location code 0)");
}

CTS_NOINLINE static int backtrace_overrun(cts_mt_reader_t *r, uint64_t evoff) {
  return cts__mt_fail(r, CTS_E_EVENT_OVERRUN, evoff, "backtrace cut off by the end of its packet");
}

/* Codeword length by tag, the tag being the low bits of the little-endian u16. */
static const uint8_t codeword_bytes[4] = {2, 2, 3, 10};

/* Skips the codewords without maintaining the cache (memtrace's "no backtraces" mode). */
static CTS_FORCE_INLINE int skip_backtrace(cts_mt_reader_t *r, const uint8_t **pp,
                                           const uint8_t *end, uint32_t nencoded, uint64_t evoff) {
  const uint8_t *p = *pp;
  if (CTS_LIKELY((uint64_t)nencoded * CODEWORD_MAX_BYTES <= (uint64_t)(end - p))) {
    for (uint32_t i = 0; i < nencoded; i++) p += codeword_bytes[p[0] & 3u];
    *pp = p;
    return 0;
  }
  for (uint32_t i = 0; i < nencoded; i++) {
    if (end - p < 2) return backtrace_overrun(r, evoff);
    const unsigned tag = cts_ld_le16(p) & 3u;
    p += 2 + (tag == 2 ? 1 : tag == 3 ? 8 : 0);
  }
  if (p > end) return backtrace_overrun(r, evoff);
  *pp = p;
  return 0;
}

/* Decodes nencoded codewords into d->bt from *pos_io on (§8.4), checking everything: the
 * reference for decode_codewords_fast(), and what runs near the end of a packet or of the
 * backtrace buffer. */
static int decode_codewords_careful(cts_mt_reader_t *r, domain_t *d, const uint8_t **pp,
                                    const uint8_t *end, size_t *pos_io, uint32_t nencoded,
                                    bool kept, uint64_t evoff) {
  const uint8_t *p = *pp;
  size_t pos = *pos_io;
  uint64_t *const cache_loc = d->cache_loc;
  uint16_t *const cache_pred = d->cache_pred;
  uint32_t pred = 0;
  int e;
  for (uint32_t i = 0; i < nencoded; i++) {
    if (CTS_UNLIKELY(end - p < 2)) return backtrace_overrun(r, evoff);
    const unsigned w = cts_ld_le16(p);
    p += 2;
    const uint32_t bucket = w >> 2;
    const unsigned tag = w & 3u;
    cache_pred[pred] = (uint16_t)bucket;
    unsigned n = 0;
    if (tag == 3) {
      if (CTS_UNLIKELY(end - p < 8)) return backtrace_overrun(r, evoff);
      if ((e = store_literal(r, d, bucket, cts_ld_le64(p), kept, evoff)) != 0) return e;
      p += 8;
    } else if (tag == 1) {
      n = 1;
    } else if (tag == 2) {
      if (CTS_UNLIKELY(p >= end)) return backtrace_overrun(r, evoff);
      n = *p++;
    }
    if (CTS_UNLIKELY(pos + 1 + n > d->bt_cap) &&
        (e = grow_backtrace(r, d, pos + 1 + n, evoff)) != 0)
      return e;
    uint64_t *const bt = d->bt;
    uint64_t code = cache_loc[bucket];
    if (CTS_UNLIKELY(code == 0)) return empty_bucket(r, evoff);
    bt[pos++] = code;
    pred = bucket;
    for (unsigned k = 0; k < n; k++) {
      pred = cache_pred[pred];
      code = cache_loc[pred];
      if (CTS_UNLIKELY(code == 0)) return empty_bucket(r, evoff);
      bt[pos++] = code;
    }
  }
  *pp = p;
  *pos_io = pos;
  return 0;
}

/* The same as decode_codewords_careful() when the caller guarantees that the codewords lie
 * inside the packet (end - p >= CODEWORD_MAX_BYTES * nencoded) and the frames inside the
 * buffer (*pos_io + CODEWORD_MAX_FRAMES * nencoded <= bt_cap): no bounds checks, and a
 * hit with 0 or 1 predicted codes -- nearly all of them -- costs no branch on the count.
 * Every check on the content stays, with the same errors. */
static CTS_FORCE_INLINE int decode_codewords_fast(cts_mt_reader_t *r, domain_t *d,
                                                  const uint8_t **pp, size_t *pos_io,
                                                  uint32_t nencoded, bool kept,
                                                  const uint64_t *evoff_at, const uint8_t *ev_at,
                                                  const uint64_t *evoff_base, const bool random_mix,
                                                  const bool sample) {
  /* The event's offset, for the errors (read only on an error: no register for it):
   * *evoff_at; or with evoff_at NULL, the event's address ev_at (which the caller keeps
   * in a register anyway) plus *evoff_base. */
#define EVOFF (evoff_at ? *evoff_at : (uint64_t)(uintptr_t)ev_at + *evoff_base)
  /* No codewords: nothing to do, and bt may be NULL still (the event loop never gets here
   * without codewords, so this costs it nothing). */
  if (nencoded == 0) return 0;
  const uint8_t *p = *pp;
  /* The cache's arrays through d, not local copies of their addresses: gcc then reaches
   * both from d's register by displacement, two registers fewer for the codeword loop and
   * fewer moves around it (-4 % instructions in `ctfscope info`). */
#define cache_loc  d->cache_loc
#define cache_pred d->cache_pred
  /* The next frame's slot rather than an index into bt: one register less for the loop, and
   * no index scaling in each store. */
  uint64_t *out = d->bt + *pos_io;
  /* (Indices in full words: no zero-extension before each use as an address.) */
  size_t pred = 0;
  for (; nencoded; nencoded--) {
    const size_t w = cts_ld_le16(p);
    const size_t bucket = w >> 2;
    p += 2;
    cache_pred[pred] = (uint16_t)bucket;
    if (random_mix && CTS_LIKELY((w & 3u) != 3u)) {
      /* Tags 0, 1 and 2 of a domain whose tags look random (the survivors shape: a third
       * each): a hit followed by n predicted codes, n being 0, 1 or the byte after a tag 2.
       * The hit and the first RUN_UNROLLED predicted codes are loaded and stored whatever n
       * is (bt has room for them, frames stored past the backtrace's end are scratch, and a
       * bucket's prediction is always a bucket), and checked by arithmetic on n: the
       * branches on the tag and on the run's end were a third of the mispredictions
       * there. Where one tag dominates (most traces), the branches below cost less. */
      const size_t run = (w >> 1) & 1u;
      const size_t n = (w & 1u) | ((size_t)p[0] & (0 - run));
      if (sample) {
        d->tag_flips += (uint32_t)(run ^ d->last_run);
        d->last_run = (uint8_t)run;
      }
      p += run;
      size_t chain[RUN_UNROLLED + 1];
      chain[0] = bucket;
      uint64_t c = cache_loc[bucket];
      out[0] = c;
      bool empty = c == 0;
      /* (gcc left this loop rolled in the counting instance by arithmetic: a loop branch
       * and a counter for three steps, and cachegrind's simulated predictor, which knows no
       * loop, missing its end at every codeword.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 4
#endif
      for (size_t k = 1; k <= RUN_UNROLLED; k++) {
        chain[k] = cache_pred[chain[k - 1]];
        c = cache_loc[chain[k]];
        out[k] = c;
        empty |= c < (uint64_t)(n >= k); /* (empty and one of the n predicted) */
      }
      if (CTS_UNLIKELY(empty)) return empty_bucket(r, EVOFF);
      if (CTS_LIKELY(n <= RUN_UNROLLED)) {
        pred = chain[n];
      } else {
        pred = chain[RUN_UNROLLED];
        for (size_t k = RUN_UNROLLED + 1; k <= n; k++) {
          pred = cache_pred[pred];
          c = cache_loc[pred];
          if (CTS_UNLIKELY(c == 0)) return empty_bucket(r, EVOFF);
          out[k] = c;
        }
      }
      out += 1 + n;
      continue;
    }
    if (CTS_UNLIKELY(w & 2u)) {
      /* A literal (3), stored in the bucket and then a hit on it; or a hit followed by a
       * run of n predicted codes (2). */
      unsigned n = 0;
      if (w & 1u) {
        const int e = store_literal(r, d, bucket, cts_ld_le64(p), kept, EVOFF);
        if (e) return e;
        p += 8;
      } else {
        n = *p++;
        if (sample) {
          d->tag_flips += 1u ^ d->last_run;
          d->last_run = 1;
        }
      }
      uint64_t c = cache_loc[bucket];
      if (CTS_UNLIKELY(c == 0)) return empty_bucket(r, EVOFF);
      *out++ = c;
      pred = bucket;
      for (unsigned k = 0; k < n; k++) {
        pred = cache_pred[pred];
        c = cache_loc[pred];
        if (CTS_UNLIKELY(c == 0)) return empty_bucket(r, EVOFF);
        *out++ = c;
      }
      continue;
    }
    /* Tags 0 and 1: a hit, and for 1 the code predicted after it. Both are loaded and
     * stored whatever the tag (bt has room for them, and a frame stored past the end of
     * the backtrace is scratch), and checked without a branch on the tag, which no
     * predictor can guess: the tags of real backtraces look random. */
    if (sample) {
      d->tag_flips += d->last_run;
      d->last_run = 0;
    }
    const size_t tag = w & 1u;
    const size_t next = cache_pred[bucket];
    const uint64_t code = cache_loc[bucket], predicted = cache_loc[next];
    out[0] = code;
    out[1] = predicted;
    /* (Arithmetic on the tag, as compilers turn `tag ? a : b` back into a branch: with tag 0
     * or 1, predicted < tag says "predicted and empty".) */
    if (CTS_UNLIKELY((code == 0) | (predicted < tag))) return empty_bucket(r, EVOFF);
    out += 1 + tag;
    pred = bucket + (next - bucket) * tag;
  }
  *pp = p;
  *pos_io = (size_t)(out - d->bt);
  return 0;
#undef EVOFF
#undef cache_loc
#undef cache_pred
}

/* Decodes (or skips) the backtrace of an allocation event whose codewords start at *pp. */
static CTS_FORCE_INLINE int decode_backtrace(cts_mt_reader_t *r, domain_t *d, const uint8_t **pp,
                                             const uint8_t *end, uint64_t cp, uint32_t nencoded,
                                             bool decode, uint64_t evoff) {
  const uint64_t left = (uint64_t)(end - *pp);
  if (CTS_UNLIKELY((uint64_t)nencoded * 2 > left))
    return cts__mt_fail(r, CTS_E_BACKTRACE_TOO_LONG, evoff,
                        "backtrace of %u codewords cannot fit in the %zu bytes left in the packet",
                        nencoded, (size_t)left);
  if (!decode) return skip_backtrace(r, pp, end, nencoded, evoff);
  /* If the prefix is longer than the previous backtrace (the writer truncated that one),
   * the suffix is decoded to keep the cache in step but the previous backtrace stays
   * (§8.4); decode it into the scratch space past bt_len. */
  const size_t bt_len = d->bt_len;
  const bool keep = cp <= bt_len;
  size_t pos = keep ? (size_t)cp : bt_len;
  /* The fast decoder needs room for the worst case; the buffer is grown for it (within
   * the limit; failing that, the careful decoder grows it only as far as needed). */
  const uint64_t worst = pos + (uint64_t)nencoded * CODEWORD_MAX_FRAMES;
  int e;
  if (CTS_LIKELY((uint64_t)nencoded * CODEWORD_MAX_BYTES <= left) &&
      (CTS_LIKELY(worst <= d->bt_cap) ||
       (worst <= r->cfg.max_backtrace_frames && reserve_backtrace(r, d, (size_t)worst)))) {
    e = decode_codewords_fast(r, d, pp, &pos, nencoded, keep, &evoff, NULL, NULL, false, false);
  } else {
    e = decode_codewords_careful(r, d, pp, end, &pos, nencoded, keep, evoff);
  }
  if (CTS_UNLIKELY(e)) return e;
  if (keep) d->bt_len = pos;
  return 0;
}

/* ---- trace info (§6) ------------------------------------------------------------------ */

/* The first packet holds exactly one trace_info event. */
int cts__mt_decode_info(cts_mt_reader_t *r, const uint8_t *pkt, const cts__mt_header_t *h,
                        uint64_t off) {
  const uint8_t *p = pkt + cts__mt_header_size(h->version), *end = pkt + h->size_bits / 8;
  if (end - p < 13)
    return cts__mt_fail(r, CTS_E_BAD_TRACE_INFO, off,
                        "trace-info packet too small (%zu bytes of content) to hold the trace info",
                        (size_t)(end - p));
  const uint32_t eh = cts_ld_le32(p);
  if ((eh >> MT_TIME_BITS) != MT_EV_TRACE_INFO)
    return cts__mt_fail(r, CTS_E_BAD_TRACE_INFO, off,
                        "first packet starts with event code %u, not the trace info (0)",
                        eh >> MT_TIME_BITS);
  if ((eh & MT_TIME_MASK) != (h->time_begin & MT_TIME_MASK))
    return cts__mt_fail(r, CTS_E_BAD_TRACE_INFO, off,
                        "trace-info time differs from its packet's time");
  p += 4;
  cts_mt_info_t *in = &r->info;
  uint64_t bits = cts_ld_le64(p);
  memcpy(&in->sample_rate, &bits, sizeof bits);
  in->word_size = p[8];
  p += 9;
  const uint64_t base = off;
  int e;
  if ((e = rd_string(r, &p, end, base, pkt, "trace info executable name", &in->executable_name)) ||
      (e = rd_string(r, &p, end, base, pkt, "trace info host name", &in->host_name)) ||
      (e = rd_string(r, &p, end, base, pkt, "trace info runtime parameters", &in->runtime_params)))
    return e;
  if (end - p < 8)
    return cts__mt_fail(r, CTS_E_BAD_TRACE_INFO, off + (uint64_t)(p - pkt),
                        "trace info cut off before its pid");
  in->pid = cts_ld_le64(p);
  p += 8;
  in->context = NULL;
  if (h->version >= 2 &&
      (e = rd_string(r, &p, end, base, pkt, "trace info context", &in->context)) != 0)
    return e;
  if (in->context && !in->context[0]) in->context = NULL; /* memtrace writes None as "" */
  if (p != end)
    return cts__mt_fail(r, CTS_E_BAD_TRACE_INFO, off + (uint64_t)(p - pkt),
                        "%zu unexpected bytes after the trace info", (size_t)(end - p));
  if (!(in->sample_rate > 0.0 && in->sample_rate <= 1.0))
    return cts__mt_fail(r, CTS_E_BAD_SAMPLE_RATE, off, "sample rate is not in (0, 1]");
  in->version = h->version;
  in->start_time_us = h->time_begin;
  return 0;
}

/* ---- events (§5, §8, §9) ----------------------------------------------------------------- */

/* Decoding styles. A branch on data that a predictor cannot guess costs 15-20 cycles
 * when it is wrong; arithmetic instead costs instructions, and latency on the chain from
 * one event's address to the next, whatever the data. Where the sizes of long-form
 * lengths (1 or 3 bytes) and the codewords' tags (a run or not) look random -- both at
 * once, as in gen_trace's survivors shape, a random mix of small and large blocks with
 * few distinct stacks -- the fast loop decodes them by arithmetic (STYLE_RANDOM): a
 * long-form allocation's fields with every byte loaded from each place it can be before
 * the sizes are known (long_alloc_mixed()), and a codeword's hit and first predictions
 * whatever its tag; elsewhere (every real trace measured) by branches (STYLE_BRANCHES).
 * One packet of a domain in PROBE_INTERVAL, the first included, is decoded while counting
 * how often the two change between consecutive instances (STYLE_SAMPLED, by branches, or
 * STYLE_SAMPLED_RANDOM, by arithmetic, in the domain's current style), which picks the
 * style of the packets after it (a trace's first packets often hold only locations; its
 * first events are then decoded by branches until the next sample). All four decode the
 * same events with the same checks, errors and results; only the time differs. */
#define STYLE_BRANCHES       0
#define STYLE_SAMPLED        1
#define STYLE_RANDOM         2
#define STYLE_SAMPLED_RANDOM 3
#define PROBE_INTERVAL       16u

/* Decoding by arithmetic, the loop asks for the trace's bytes this far ahead of each event
 * (a prefetch never faults, past the mapping's end either): the hardware's prefetchers stop
 * at each 4 KiB page, and the first event on a page waited for memory. On survivors160
 * read_bench ran 4.5 % faster, `info` 0.9 %; 512 and 8192 bytes gave less. By branches
 * (the other traces) it was not kept: default 3 % faster but sqlite3 6 % slower. */
#define PREFETCH_AHEAD 2048

/* Room the fast loop wants before an event: its header and the longest fixed part. */
#define FAST_EVENT_ROOM (4u + EVENT_FIXED_MAX)

/* An allocation's fixed fields (§8.1) into the event handed to on_event. */
static CTS_FORCE_INLINE void set_alloc_fields(cts_mt_event_t *ev, unsigned id, unsigned source,
                                              int64_t length, int64_t nsamples, int64_t cp,
                                              uint64_t obj_id) {
  ev->kind = CTS_MT_ALLOC;
  ev->source = (uint8_t)source;
  ev->short_form = id != MT_EV_ALLOC;
  ev->length = (uint64_t)length;
  ev->nsamples = (uint64_t)nsamples;
  ev->common_prefix = (uint64_t)cp;
  ev->obj_id = obj_id;
}

/* A promotion (code 3) or collection (4) at p counted instead of delivered: the least
 * work per event (the times and offsets wait for the packet's end: count_frees_done()). */
static CTS_FORCE_INLINE void count_free(event_cursor_t *c, unsigned id, const uint8_t *p) {
  c->nfrees++;
  c->free_codes += id; /* (one addition to memory: count_frees_done() takes the 3s out) */
  if (!c->first_free) c->first_free = p;
  c->last_free = p;
}

/* The time of the event at p (§5: the packet's start time, and the low 25 bits). */
static uint64_t event_time(const event_cursor_t *c, const uint8_t *p) {
  const uint64_t tb = c->time_begin;
  return tb + ((cts_ld_le32(p) - (uint32_t)tb) & MT_TIME_MASK);
}

/* An allocation's figures that do not depend on its backtrace, counted (or, with sign -1,
 * uncounted) before its backtrace is decoded, so that its length, sample count and source
 * need no register across the codeword loop (gcc spilled them, ~8 instructions an
 * allocation). The source is 0-2 (checked). An allocation that is then delivered, or whose
 * backtrace fails, is taken back out (uncount_alloc_at()): the counts stay exact. */
static CTS_FORCE_INLINE void count_alloc_fixed(cts_mt_alloc_counts_t *a, unsigned source,
                                               uint64_t length, uint64_t nsamples, uint64_t sign) {
  a->allocs[source] += sign;
  a->samples[source] += sign * nsamples;
  a->sum_length_words += sign * length;
  a->sum_length_x_nsamples += sign * (length * nsamples);
}

/* The rest of a counted allocation's figures, once its backtrace is decoded (cts_mt_reader_
 * count_allocs()), with frames the length of the backtrace its event would carry. lim is
 * the common prefix + 256 if the allocation meets the short form's conditions but the
 * backtrace's (1-16 words, minor heap, one sample: always for a short-form event; a
 * long-form one decoded by arithmetic is delivered instead), else 0:
 * "fewer than 256 frames after the prefix" is frames - min(cp, frames) < 256, which is
 * frames < cp + 256 (cp < 2^63, checked), without a branch: whether an allocation
 * qualifies follows the trace's mix of forms, which no predictor guesses. */
static CTS_FORCE_INLINE void count_alloc_rest(cts_mt_alloc_counts_t *a, uint64_t length,
                                              uint64_t lim, uint64_t frames) {
  if (length > a->max_length_words) a->max_length_words = length;
  a->short_form_eligible += (uint64_t)(frames < lim);
  a->frames_total += frames;
  if (frames > a->frames_max) a->frames_max = frames;
}

/* The fixed fields of the allocation at p, which the fast loop has read and checked. */
static void parse_alloc(const uint8_t *p, unsigned *id_out, int64_t *length, int64_t *nsamples,
                        unsigned *source, int64_t *cp) {
  const unsigned id = cts_ld_le32(p) >> MT_TIME_BITS;
  *id_out = id;
  *nsamples = 1;
  *source = CTS_MT_SOURCE_MINOR;
  if (id != MT_EV_ALLOC) {
    *length = id - MT_EV_SHORT_ALLOC_BASE;
    rd_vint(&(const uint8_t *){p + 4}, NULL, cp, false);
  } else {
    const uint8_t *q = p + 4;
    rd_vint(&q, NULL, length, false);
    rd_vint(&q, NULL, nsamples, false);
    *source = *q++;
    rd_vint(&q, NULL, cp, false);
  }
}

/* Takes the allocation at p, counted by count_alloc_fixed(), back out: it is delivered, or
 * its backtrace failed (rare: out of line). */
CTS_NOINLINE static void uncount_alloc_at(cts_mt_alloc_counts_t *a, const uint8_t *p) {
  unsigned id, source;
  int64_t length, nsamples, cp;
  parse_alloc(p, &id, &length, &nsamples, &source, &cp);
  count_alloc_fixed(a, source, (uint64_t)length, (uint64_t)nsamples, (uint64_t)-1);
}

/* Counting allocations, the loop stores none of an allocation's fields but its offset:
 * this fills them in for one it delivers, from its bytes at p, which the loop has read and
 * checked already (rare: out of line). */
CTS_NOINLINE static void fill_alloc_event(event_cursor_t *c, const domain_t *d, const uint8_t *p,
                                          uint64_t obj_id) {
  unsigned id, source;
  int64_t length, nsamples, cp;
  parse_alloc(p, &id, &length, &nsamples, &source, &cp);
  cts_mt_event_t *const ev = &c->ev;
  set_alloc_fields(ev, id, source, length, nsamples, cp, obj_id);
  ev->time_us = event_time(c, p);
  ev->offset = c->base + (uint64_t)(uintptr_t)p;
  ev->backtrace = d->bt;
  ev->backtrace_len = d->bt_len;
}

/* Adds the packet's counted promotions and collections to the reader's tally. */
static void count_frees_done(event_cursor_t *c) {
  if (!c->nfrees) return;
  free_tally_t *f = c->freed;
  if (!f->frees) {
    f->first_time = event_time(c, c->first_free);
    f->first_offset = c->base + (uint64_t)(uintptr_t)c->first_free;
  }
  f->frees += c->nfrees;
  f->collect += c->free_codes - MT_EV_PROMOTE * c->nfrees; /* a collection's code is one more */
  f->last_time = event_time(c, c->last_free);
  f->last_offset = c->base + (uint64_t)(uintptr_t)c->last_free;
}

/* Decodes one event with every check (the reference path: the fast loop hands over to it
 * whatever it does not handle itself, so this is where errors are reported). */
CTS_NOINLINE static int decode_event_careful(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  const uint8_t *p = c->p, *const end = c->end;
  const uint64_t evoff = c->base + (uint64_t)(uintptr_t)p;
  int e;
  if (CTS_UNLIKELY(end - p < 4))
    return cts__mt_fail(r, CTS_E_EVENT_OVERRUN, evoff,
                        "event header cut off by the end of its packet");
  const uint32_t eh = cts_ld_le32(p);
  p += 4;
  const unsigned id = eh >> MT_TIME_BITS;
  uint64_t low = eh & MT_TIME_MASK;
  if (low < (c->time_begin & MT_TIME_MASK)) low += (uint64_t)1 << MT_TIME_BITS;
  const uint64_t t = (c->time_begin & ~(uint64_t)MT_TIME_MASK) + low;
  if (CTS_UNLIKELY(t > c->time_end))
    return cts__mt_fail(r, CTS_E_EVENT_TIME, evoff,
                        "event time %llu us is after its packet's end (%llu us)",
                        (unsigned long long)t, (unsigned long long)c->time_end);
  if (CTS_UNLIKELY(t < c->last_time))
    return cts__mt_fail(r, CTS_E_TIME_NOT_MONOTONE, evoff,
                        "event time %llu us is before the previous event's (%llu us)",
                        (unsigned long long)t, (unsigned long long)c->last_time);
  c->last_time = t;
  c->nevents++;
  cts_mt_event_t *const ev = &c->ev;
  if (id > MT_EV_SHORT_ALLOC_BASE || id == MT_EV_ALLOC) {
    int64_t length, nsamples = 1, cp;
    unsigned source = CTS_MT_SOURCE_MINOR;
    uint32_t nencoded;
    if (id == MT_EV_ALLOC) {
      if (CTS_UNLIKELY(
              !read_long_alloc(&p, end, &length, &nsamples, &source, &cp, &nencoded, true)))
        goto overrun;
      if (CTS_UNLIKELY(source > CTS_MT_SOURCE_EXTERNAL))
        return cts__mt_fail(r, CTS_E_BAD_SOURCE, evoff, "allocation source %u is not 0, 1 or 2",
                            source);
      if (CTS_UNLIKELY(length < 0 || nsamples < 0))
        return cts__mt_fail(r, CTS_E_BAD_LENGTH, evoff,
                            "negative length (%lld) or sample count (%lld)", (long long)length,
                            (long long)nsamples);
    } else {
      if (CTS_UNLIKELY(id > MT_EV_SHORT_ALLOC_BASE + 16)) goto unknown;
      length = id - MT_EV_SHORT_ALLOC_BASE;
      if (CTS_UNLIKELY(!rd_vint(&p, end, &cp, true) || p >= end)) goto overrun;
      nencoded = *p++;
    }
    if (CTS_UNLIKELY(cp < 0))
      return cts__mt_fail(r, CTS_E_BAD_LENGTH, evoff, "negative backtrace prefix length %lld",
                          (long long)cp);
    if ((e = decode_backtrace(r, d, &p, end, (uint64_t)cp, nencoded, c->decode, evoff)) != 0)
      return e;
    set_alloc_fields(ev, id, source, length, nsamples, cp, c->next_id++);
    ev->backtrace = d->bt;         /* NULL when backtraces are skipped */
    ev->backtrace_len = d->bt_len; /* and this 0 */
  } else if (id == MT_EV_PROMOTE || id == MT_EV_COLLECT) {
    int64_t delta;
    if (CTS_UNLIKELY(!rd_vint(&p, end, &delta, true))) goto overrun;
    const bool collect = id == MT_EV_COLLECT;
    const bool negative_ok = collect && c->v3; /* §9 */
    if (CTS_UNLIKELY(delta < 0 ? !negative_ok : (uint64_t)delta >= c->next_id))
      return cts__mt_fail(r, CTS_E_BAD_OBJECT, evoff,
                          "%s of object %lld before the next id %llu: no such allocation",
                          collect ? "collect" : "promote",
                          (long long)((int64_t)c->next_id - 1 - delta),
                          (unsigned long long)c->next_id);
    if (c->freed) {
      count_free(c, id, c->p);
      c->p = p;
      return 0;
    }
    ev->kind = collect ? CTS_MT_COLLECT : CTS_MT_PROMOTE;
    ev->obj_id = c->next_id - 1 - (uint64_t)delta;
    ev->backtrace = NULL;
    ev->backtrace_len = 0;
  } else if (id == MT_EV_LOCATION) {
    if ((e = decode_location(r, d, &p, end, c->pkt, c->off, evoff)) != 0) return e;
    c->nlocations++;
    c->p = p;
    return 0;
  } else if (id == MT_EV_TRACE_INFO) {
    return cts__mt_fail(r, CTS_E_DUPLICATE_TRACE_INFO, evoff, "a second trace-info event");
  } else {
    goto unknown;
  }
  c->p = p;
  if (c->on_event) {
    ev->time_us = t;
    ev->offset = evoff;
    const int rc = c->on_event(c->user_data, ev);
    if (CTS_UNLIKELY(rc)) return cts__mt_stopped(r, rc, evoff);
  }
  return 0;
overrun:
  return cts__mt_fail(r, CTS_E_EVENT_OVERRUN, evoff,
                      "event (code %u) cut off by the end of its packet", id);
unknown:
  return cts__mt_fail(r, CTS_E_UNKNOWN_EVENT, evoff, "unknown event code %u", id);
}

/* The backtrace of an allocation in the fast loop, out of line so that the loop keeps its
 * few values in registers. Returns the end of the codewords, or NULL after an error. */
CTS_NOINLINE static const uint8_t *fast_backtrace(cts_mt_reader_t *r, domain_t *d, const uint8_t *p,
                                                  const uint8_t *end, uint64_t cp,
                                                  uint32_t nencoded, bool decode, uint64_t evoff) {
  return decode_backtrace(r, d, &p, end, cp, nencoded, decode, evoff) ? NULL : p;
}

/* The common backtrace, decoded inline by the event loop (a call per backtrace cost more
 * than its codewords): the codewords lie within the packet, the frames within the buffer,
 * and the prefix is no longer than the previous backtrace, which is what decode_backtrace()
 * checks before it calls decode_codewords_fast(). Returns the end of the codewords, or NULL
 * after an error. */
static CTS_FORCE_INLINE const uint8_t *common_backtrace(cts_mt_reader_t *r, domain_t *d,
                                                        const uint8_t *p, size_t pos,
                                                        uint32_t nencoded, const uint64_t *evoff_at,
                                                        const uint8_t *ev_at,
                                                        const uint64_t *evoff_base,
                                                        const bool random_mix, const bool sample) {
  if (CTS_UNLIKELY(decode_codewords_fast(r, d, &p, &pos, nencoded, true, evoff_at, ev_at,
                                         evoff_base, random_mix, sample) != 0))
    return NULL;
  d->bt_len = pos;
  return p;
}

/* A vint (§2) with 9 bytes known to be there. */
static CTS_FORCE_INLINE const uint8_t *vint_unchecked(const uint8_t *p, int64_t *v) {
  rd_vint(&p, NULL, v, false);
  return p;
}

/* A long-form allocation's fixed fields (§8.1) from p, just past the event header, for a
 * domain whose lengths are mixed: as read_long_alloc() but with every byte whose place
 * depends on the sizes of the length and the sample count (1 or 3 bytes each: a coin toss
 * on the survivors shape) loaded before those sizes are known, from every place it can be,
 * and the right one chosen by a mask or a shift. The chain from one event's address to the
 * next then waits for one byte load (the length's first) instead of four; the rare fields
 * (a vint of 5 or 9 bytes, a prefix of 253 frames or more) take the plain path. */
static CTS_FORCE_INLINE const uint8_t *long_alloc_mixed(const uint8_t *p, int64_t *length,
                                                        int64_t *nsamples, unsigned *source,
                                                        int64_t *cp, uint32_t *nencoded) {
  const uint64_t c0 = p[0], narrow1 = p[1], wide1 = p[3];
  /* Source, prefix and codeword count: 4 bytes at p + 2, p + 4 or p + 6. */
  const uint64_t tail = cts_ld_le64(p + 2);
  if (CTS_UNLIKELY(c0 > 253)) goto plain;
  /* (Selections on the way to the next event's address by masks: gcc makes branches of
   * `w0 ? a : b` there, which the data make a coin toss.) */
  const uint64_t w0 = c0 == 253, m0 = 0 - w0;
  const uint64_t c1 = narrow1 ^ ((narrow1 ^ wide1) & m0);
  if (CTS_UNLIKELY(c1 > 253)) goto plain;
  /* How many of the two are wide, for either size of the first, known before it. */
  const uint64_t wides_if_narrow = narrow1 == 253, wide_if_wide = wide1 == 253;
  const uint64_t wides_if_wide = 1 + wide_if_wide; /* (a branch at -O0 in one expression) */
  const uint64_t wides = wides_if_narrow ^ ((wides_if_narrow ^ wides_if_wide) & m0);
  const uint64_t fields = tail >> (16 * wides);
  const uint64_t cp0 = (fields >> 8) & 0xff;
  if (CTS_UNLIKELY(cp0 >= 253)) goto plain;
  const uint64_t m1 = w0 - wides; /* (all ones if the second is wide) */
  *length = (int64_t)(c0 ^ ((c0 ^ cts_ld_le16(p + 1)) & m0));
  *nsamples = (int64_t)(c1 ^ ((c1 ^ cts_ld_le16(p + 2 + 2 * w0)) & m1));
  *source = (unsigned)(fields & 0xff);
  *cp = (int64_t)cp0;
  *nencoded = (uint32_t)((fields >> 16) & 0xffff);
  return p + 6 + 2 * wides;
plain:;
  const uint8_t *q = p;
  read_long_alloc(&q, NULL, length, nsamples, source, cp, nencoded, false);
  /* A negative value as a bad source: the caller tests only that (the values above are
   * below 2^16), and hands either to the careful path, which tells which it is. */
  if ((*length | *nsamples | *cp) < 0) *source = 0xff;
  return q;
}

static int ignore_event(void *user_data, const cts_mt_event_t *ev) {
  (void)user_data;
  (void)ev;
  return 0;
}

/* The common case, fast: allocations, promotions and collections at least FAST_EVENT_ROOM
 * bytes from the end of the packet, whose fixed fields can then be read without bounds
 * checks. Anything else -- another kind of event, the packet's tail, and any event that
 * fails a check -- is left, untouched, to decode_event_careful(), so every error is
 * reported by the careful path with the same code, offset and message. The exception is
 * the backtrace, which changes the cache as it goes and so reports its own errors (with
 * the same code as the careful path uses: both run decode_backtrace(), or in the common
 * case its decode_codewords_fast()). Instantiated with and without backtrace decoding. */
static CTS_FORCE_INLINE int events_fast(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c,
                                        const bool decode, const bool count, const bool tally,
                                        const int style) {
  const bool random_mix = style == STYLE_RANDOM || style == STYLE_SAMPLED_RANDOM,
             sample = style == STYLE_SAMPLED || style == STYLE_SAMPLED_RANDOM;
  const uint8_t *p = c->p;
  const uint8_t *const end = c->end;
  const uint8_t *const last = end - FAST_EVENT_ROOM; /* the caller made sure p <= last */
  /* Event times as offsets from the packet's start time tb, which the low 25 bits of an
   * event header give directly (§5): t = tb + ((header - tb) mod 2^25). The event must
   * not be after the packet's end (offset <= span) nor before the previous event. */
  const uint64_t tb = c->time_begin;
  const uint64_t span = c->time_end - tb;
  const uint64_t base = c->base;
  const bool v3 = c->v3;
  int (*const on_event)(void *, const cts_mt_event_t *) = c->on_event ? c->on_event : ignore_event;
  void *const user_data = c->user_data;
  cts_mt_event_t *const ev = &c->ev;
  /* The previous event's offset; one before tb is as good as tb itself. */
  uint64_t last_rel = c->last_time > tb ? c->last_time - tb : 0;
  /* The next object id. Counting allocations, it stays in the cursor: gcc kept a local
   * copy in two stack slots there, copied between them at every allocation (five
   * instructions for one addition to memory). Otherwise a local (a register). */
  uint64_t next_id_local = c->next_id;
  uint64_t *const next_id_at = tally ? &c->next_id : &next_id_local;
#define NEXT_ID (*next_id_at)
  /* Counting, the events are the allocations (the object id's steps) and the counted
   * promotions and collections (c->nfrees): one register less for the loop. */
  const uint64_t first_id = NEXT_ID;
  const uint32_t nfrees_before = c->nfrees;
  uint32_t nevents = 0;
  int e = 0;
  while (CTS_LIKELY(p <= last)) {
    if (random_mix) __builtin_prefetch(p + PREFETCH_AHEAD);
    const uint32_t eh = cts_ld_le32(p);
    const unsigned id = eh >> MT_TIME_BITS;
    uint64_t rel = (eh - (uint32_t)tb) & MT_TIME_MASK;
    if (CTS_UNLIKELY(rel > span)) break;
    /* Two branches, never taken, rather than gcc's two flags combined for one branch (five
     * instructions for two): OPAQUE hides that the two tests read the same value. */
    OPAQUE(rel);
    if (CTS_UNLIKELY(rel < last_rel)) break;
    const uint64_t t = tb + rel;
    const uint8_t *q;
    if (id == MT_EV_COLLECT || id == MT_EV_PROMOTE) {
      int64_t delta;
      q = vint_unchecked(p + 4, &delta);
      const bool collect = id == MT_EV_COLLECT;
      if (CTS_UNLIKELY(delta < 0 ? !(collect && v3) : (uint64_t)delta >= NEXT_ID)) break;
      if (count) {
        count_free(c, id, p);
        last_rel = rel;
        p = q;
        continue;
      }
      /* Promote (3) and collect (4) are kinds 2 and 3: no branch on which it is. */
      _Static_assert(CTS_MT_PROMOTE == MT_EV_PROMOTE - 1 && CTS_MT_COLLECT == MT_EV_COLLECT - 1,
                     "event kinds follow the event codes");
      ev->kind = (cts_mt_event_kind_t)(id - 1);
      ev->obj_id = NEXT_ID - 1 - (uint64_t)delta;
      ev->backtrace = NULL;
      ev->backtrace_len = 0;
      ev->time_us = t;
      ev->offset = base + (uint64_t)(uintptr_t)p;
    } else {
      int64_t length, nsamples = 1, cp;
      unsigned source = CTS_MT_SOURCE_MINOR;
      uint32_t nencoded;
      uint64_t lim = 0; /* counting allocations: see count_alloc_rest() */
      if (id - (MT_EV_SHORT_ALLOC_BASE + 1) < 16) {
        length = id - MT_EV_SHORT_ALLOC_BASE;
        q = vint_unchecked(p + 4, &cp);
        nencoded = *q++;
        /* Counting, the short form's figures with its constants (minor, one sample) rather
         * than the long form's code: gcc merges the two otherwise. (Delivering, the check
         * of cp stays after the two forms: the delivering loops ran slower with it here.) */
        if (tally) {
          if (CTS_UNLIKELY(cp < 0)) break;
          count_alloc_fixed(&r->allocs, CTS_MT_SOURCE_MINOR, (uint64_t)length, 1, 1);
          lim = (uint64_t)cp + 256;
        }
      } else if (id == MT_EV_ALLOC) {
        if (sample) {
          const uint8_t wide = p[4] >= 253;
          d->long_allocs++;
          d->size_flips += wide ^ d->last_wide;
          d->last_wide = wide;
        }
        if (random_mix) {
          q = long_alloc_mixed(p + 4, &length, &nsamples, &source, &cp, &nencoded);
        } else {
          q = vint_unchecked(p + 4, &length);
          q = vint_unchecked(q, &nsamples);
          source = *q++;
          q = vint_unchecked(q, &cp);
          nencoded = cts_ld_le16(q);
          q += 2;
        }
        /* (The three signs in one test; long_alloc_mixed() folds them into the source.) */
        if (CTS_UNLIKELY(source > CTS_MT_SOURCE_EXTERNAL ||
                         (!random_mix && (length | nsamples | cp) < 0)))
          break;
        if (tally) {
          count_alloc_fixed(&r->allocs, source, (uint64_t)length, (uint64_t)nsamples, 1);
          /* (1-16 words, minor, one sample: the three tests as one, length and nsamples
           * being >= 0 here. A branch: a long-form allocation that meets them is rare, as
           * the writer uses the short form for those but with 256 codewords or more.) */
          const bool short_form_but_backtrace =
              ((((uint64_t)length - 1) >> 4) | source | ((uint64_t)nsamples - 1)) == 0;
          /* Decoding by arithmetic, such an allocation is delivered and the consumer
           * decides on its backtrace: the counted long form then needs no limit (lim
           * stays 0), where gcc chose it by a conditional move, four instructions an
           * allocation and a register across the backtrace. (Decoding by branches, gcc
           * laid out the prediction run's loop differently with this, and sqlite3's trace,
           * made of such runs, read 4 % slower.) */
          if (CTS_UNLIKELY(short_form_but_backtrace)) {
            if (random_mix)
              r->deliver_alloc = true;
            else
              lim = (uint64_t)cp + 256;
          }
        }
      } else {
        break;
      }
      /* From here on the event is decoded for good: the backtrace changes the cache. Its
       * fields go to ev now, so that none of them needs a register across the backtrace
       * loop (they were spilled and reloaded around it). */
      if (!tally) {
        if (CTS_UNLIKELY(cp < 0)) break;
        set_alloc_fields(ev, id, source, length, nsamples, cp, NEXT_ID++);
        ev->time_us = t;
      } else {
        NEXT_ID++;
      }
      /* (For the backtrace's errors too. Counting, not stored: the backtrace's errors add
       * c->base to the event's address, and fill_alloc_event() sets the offset of a
       * delivered one.) */
      if (!tally) ev->offset = base + (uint64_t)(uintptr_t)p;
      if (nencoded != 0) {
        if (sample) d->codewords += nencoded;
        const uint64_t left = (uint64_t)(end - q);
        if (decode &&
            CTS_LIKELY((uint64_t)nencoded * CODEWORD_MAX_BYTES <= left &&
                       (uint64_t)cp <= d->bt_len &&
                       (uint64_t)cp + (uint64_t)nencoded * CODEWORD_MAX_FRAMES <= d->bt_cap)) {
          q = common_backtrace(r, d, q, (size_t)cp, nencoded, tally ? NULL : &ev->offset, p,
                               &c->base, random_mix, sample);
        } else if (!decode && (uint64_t)nencoded * CODEWORD_MAX_BYTES <= left) {
          for (uint32_t i = 0; i < nencoded; i++) q += codeword_bytes[q[0] & 3u];
        } else {
          q = fast_backtrace(r, d, q, end, (uint64_t)cp, nencoded, decode,
                             base + (uint64_t)(uintptr_t)p);
        }
        /* An error ends the packet's decoding: the cursor is not written back. */
        if (CTS_UNLIKELY(!q)) {
          if (tally) uncount_alloc_at(&r->allocs, p);
          return r->err;
        }
      } else if ((uint64_t)cp <= d->bt_len) {
        /* The whole backtrace is a prefix of the previous one (§8.4; when the prefix claims
         * more than that, the previous one stays). Skipping, bt_len stays 0 and cp is 0. */
        d->bt_len = (size_t)cp;
      }
      if (!tally) {
        ev->backtrace = d->bt;
        ev->backtrace_len = d->bt_len;
      } else {
        /* Counted, unless the consumer must see it (cts_mt_reader_count_allocs()). */
        const uint64_t frames = d->bt_len;
        if (CTS_LIKELY((frames != 1) & !r->deliver_alloc)) {
          count_alloc_rest(&r->allocs, (uint64_t)length, lim, frames);
          if (!c->first_alloc) c->first_alloc = p;
          c->last_alloc = p;
          last_rel = rel;
          p = q;
          continue;
        }
        r->deliver_alloc = false;
        uncount_alloc_at(&r->allocs, p);
        fill_alloc_event(c, d, p, NEXT_ID - 1);
      }
    }
    last_rel = rel;
    if (!count) nevents++;
    p = q;
    const int rc = on_event(user_data, ev);
    if (CTS_UNLIKELY(rc)) {
      e = cts__mt_stopped(r, rc, ev->offset);
      break;
    }
    /* on_event may have stopped the counting: decode_events() picks the loop again. */
    if (tally && CTS_UNLIKELY(!r->count_allocs)) break;
  }
  if (count) nevents = (uint32_t)(NEXT_ID - first_id) + (c->nfrees - nfrees_before);
  if (nevents) c->last_time = tb + last_rel;
  c->p = p;
  c->next_id = NEXT_ID;
#undef NEXT_ID
  c->nevents += nevents;
  return e;
}

/* The loop's instances: backtraces decoded or skipped, promotions and collections
 * delivered or counted; and for the two that decode backtraces for a command (delivering
 * every event, or counting allocations as `info` does), the four decoding styles. The
 * instances by branches come first and in one function for delivering, those by arithmetic
 * last: gcc lays out the branches' loop over a prediction run by where the function starts,
 * and sqlite3's trace, whose backtraces are mostly such runs, read 4-13 % slower when that
 * moved (the same instructions). */
/* Allocations counted too (cts_mt_reader_count_allocs()); only with backtraces decoded,
 * which their figures need. */
CTS_NOINLINE static int decode_tally_fast(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  return events_fast(r, d, c, true, true, true, STYLE_BRANCHES);
}
CTS_NOINLINE static int decode_tally_sampled(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  return events_fast(r, d, c, true, true, true, STYLE_SAMPLED);
}
/* (The delivering instances by branches in one function: with each in a function of its
 * own, gcc placed the branches' instance's loop over a prediction run across a 64-byte
 * line, and read_bench ran 13 % slower on sqlite3's trace.) */
CTS_NOINLINE static int decode_events_fast(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c,
                                           int style) {
  switch (style) {
    case STYLE_SAMPLED:
      return events_fast(r, d, c, true, false, false, STYLE_SAMPLED);
    default:
      return events_fast(r, d, c, true, false, false, STYLE_BRANCHES);
  }
}
CTS_NOINLINE static int skip_events_fast(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  return events_fast(r, d, c, false, false, false, STYLE_BRANCHES);
}
CTS_NOINLINE static int decode_count_fast(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  return events_fast(r, d, c, true, true, false, STYLE_BRANCHES);
}
CTS_NOINLINE static int skip_count_fast(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  return events_fast(r, d, c, false, true, false, STYLE_BRANCHES);
}
CTS_NOINLINE static int decode_tally_random(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  return events_fast(r, d, c, true, true, true, STYLE_RANDOM);
}
CTS_NOINLINE static int decode_tally_sampled_random(cts_mt_reader_t *r, domain_t *d,
                                                    event_cursor_t *c) {
  return events_fast(r, d, c, true, true, true, STYLE_SAMPLED_RANDOM);
}

/* The delivering instances by arithmetic (style STYLE_RANDOM or STYLE_SAMPLED_RANDOM). */
CTS_NOINLINE static int decode_events_random(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c,
                                             int style) {
  if (style == STYLE_SAMPLED_RANDOM)
    return events_fast(r, d, c, true, false, false, STYLE_SAMPLED_RANDOM);
  return events_fast(r, d, c, true, false, false, STYLE_RANDOM);
}

/* The counting instances, by style. */
typedef int (*events_loop_fn)(cts_mt_reader_t *, domain_t *, event_cursor_t *);
static const events_loop_fn decode_tally_by_style[] = {
    [STYLE_BRANCHES] = decode_tally_fast,
    [STYLE_SAMPLED] = decode_tally_sampled,
    [STYLE_RANDOM] = decode_tally_random,
    [STYLE_SAMPLED_RANDOM] = decode_tally_sampled_random,
};

static int decode_events(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  const uint8_t *const end = c->end;
  const int style = d->packets_unprobed == 0
                        ? (d->random_mix ? STYLE_SAMPLED_RANDOM : STYLE_SAMPLED)
                    : d->random_mix ? STYLE_RANDOM
                                    : STYLE_BRANCHES;
  int e;
  while (c->p < end) {
    if (end - c->p >= (ptrdiff_t)FAST_EVENT_ROOM) {
      if (!c->freed)
        e = !c->decode      ? skip_events_fast(r, d, c)
            : d->random_mix ? decode_events_random(r, d, c, style)
                            : decode_events_fast(r, d, c, style);
      else if (!c->decode)
        e = skip_count_fast(r, d, c);
      else
        e = r->count_allocs ? decode_tally_by_style[style](r, d, c) : decode_count_fast(r, d, c);
      if (e) return e;
      if (c->p >= end) break;
    }
    if ((e = decode_event_careful(r, d, c)) != 0) return e;
  }
  return 0;
}

/* Adds the times and offsets of the packet's first and last counted allocations. */
static void count_allocs_done(cts_mt_reader_t *r, const event_cursor_t *c) {
  if (!c->first_alloc) return;
  cts_mt_alloc_counts_t *a = &r->allocs;
  if (a->last_offset == 0) { /* none before: no event lies at offset 0 */
    a->first_time_us = event_time(c, c->first_alloc);
    a->first_offset = c->base + (uint64_t)(uintptr_t)c->first_alloc;
  }
  a->last_time_us = event_time(c, c->last_alloc);
  a->last_offset = c->base + (uint64_t)(uintptr_t)c->last_alloc;
}

/* Whether a branch on something that changed `flips` times in `all` instances (at least
 * 256 of them, to tell) would mispredict often: a change in a quarter of them or more
 * (random halves change every other time). */
static bool unpredictable(uint32_t flips, uint32_t all) {
  return all >= 256 && flips >= all / 4;
}

/* Picks the style of the domain's next packets from what a sampled packet held. */
static void choose_style(domain_t *d) {
  const bool sampled = d->packets_unprobed == 0;
  d->packets_unprobed = (uint8_t)((d->packets_unprobed + 1) % PROBE_INTERVAL);
  if (!sampled) return;
  d->random_mix =
      unpredictable(d->size_flips, d->long_allocs) && unpredictable(d->tag_flips, d->codewords);
  d->long_allocs = d->size_flips = d->codewords = d->tag_flips = 0;
}

int cts__mt_decode_events(cts_mt_reader_t *r, domain_t *d, event_cursor_t *c) {
  const int e = decode_events(r, d, c);
  choose_style(d);
  if (c->freed) count_frees_done(c);
  count_allocs_done(r, c);
  return e;
}
