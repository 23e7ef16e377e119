/* SPDX-License-Identifier: MIT */
/* The allocation profile's live records (alloc_profile.c writes them, the only writer), and
 * a walk over the blocks live now that its caller compiles inline: the visit reads each
 * record's fields where they lie and computes only the figures it uses. The report's end
 * reads the 10 M blocks never collected of gen_trace --shape survivors twice; a copy of
 * each block's figures out of the profile (cts_alloc_profile_next_lives: 32 bytes written,
 * then read back, ~34 instructions a block) was half of that end.
 *
 * For src/analysis and the views above it (src/report): the layout changes with
 * alloc_profile.c. Nothing here allocates or fails; not thread-safe (as the profile: no
 * event may be added during a walk). */
#ifndef CTS_ALLOC_PROFILE_LIVE_H
#define CTS_ALLOC_PROFILE_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "alloc_profile.h"
#include "common/compiler.h"
#include "live_table.h"
#include "u64map.h"

/* A live block as the table of live blocks keeps it: 16 bytes where no view reads its
 * alloc_clock (cfg.skip_life_samples or skip_histograms: report, diff, top, leaks, export),
 * 24 with it (stats' lifetimes in samples), so that a trace whose blocks mostly survive
 * costs little more than that per block (survivors160's report: 10 M live records). The
 * 24-byte record is the 16-byte one followed by alloc_clock (live_rec_clock_t): one reading
 * path serves both. A block whose figures do not fit (a time 2^40 µs after the first
 * allocation or before it, 2^24 words, samples or node or more) keeps its full record in
 * the pool instead, and time_len is its index there. */
typedef struct live_rec {
  uint64_t time_len; /* time_us - live_base_us (bits 0-39), length in words (40-63) */
  /* samples (bits 0-23), node (24-47), source (48-49), promoted (50), pooled (51), and with
   * stacks.live_by_site the block's site + 1 when below 2^12 (52-63; 0: ask its node). */
  uint64_t meta;
} live_rec_t;

/* The record of a profile that keeps lifetimes in samples (cts_alloc_profile_t.rec_clock). */
typedef struct live_rec_clock {
  live_rec_t rec;
  uint64_t alloc_clock; /* alloc_clock before this block */
} live_rec_clock_t;

#define REC_TIME_BITS  40
#define REC_FIELD_BITS 24 /* length, samples and node */
#define REC_FIELD_MASK ((1ull << REC_FIELD_BITS) - 1)
#define REC_NODE       24
#define REC_SOURCE     48
#define REC_PROMOTED   (1ull << 50)
#define REC_POOLED     (1ull << 51)
#define REC_SITE       52

static inline uint32_t rec_samples(const live_rec_t *r) {
  return (uint32_t)(r->meta & REC_FIELD_MASK);
}

static inline uint32_t rec_node(const live_rec_t *r) {
  return (uint32_t)(r->meta >> REC_NODE & REC_FIELD_MASK);
}

/* A pooled record's index in the pool. */
static inline uint32_t rec_pooled(const live_rec_t *r) {
  return (uint32_t)r->time_len;
}

/* The figures of a pooled record r (REC_POOLED), from the pool: out of line, the rare case. */
cts_alloc_profile_live_t cts_alloc_profile_pooled_live(const cts_alloc_profile_t *p,
                                                       const live_rec_t *r);

/* A live record's figures as cts_alloc_profile_next_live gives them: unpack's, without its
 * whole block (through it, a batch took ~39 instructions a block, ~30 this way). Inlined
 * into a caller that reads only some fields, the others are not computed. */
static CTS_FORCE_INLINE cts_alloc_profile_live_t
cts_alloc_profile_live_of(const cts_alloc_profile_t *p, const live_rec_t *r) {
  if (CTS_UNLIKELY(r->meta & REC_POOLED)) return cts_alloc_profile_pooled_live(p, r);
  return (cts_alloc_profile_live_t){
      .time_us = p->live_base_us + (r->time_len & ((1ull << REC_TIME_BITS) - 1)),
      .length = r->time_len >> REC_TIME_BITS,
      .samples = rec_samples(r),
      .node = rec_node(r),
      .source = (uint8_t)(r->meta >> REC_SOURCE & 3u)};
}

/* The visit of one live block (its figures: valid during the call); nonzero stops the walk,
 * which returns it. */
typedef int (*cts_alloc_profile_live_cb)(void *user_data, const cts_alloc_profile_live_t *b);

/* Calls visit for every block live in chunk c of the profile's table, in the order
 * cts_live_next gives them; stops at the first nonzero return and returns it, else 0.
 * Inline with a constant visit, the visit is inlined too. */
static CTS_FORCE_INLINE int cts_alloc_profile_each_live_in(const cts_alloc_profile_t *p,
                                                           const cts_live_chunk_t *c,
                                                           cts_alloc_profile_live_cb visit,
                                                           void *user_data) {
  const size_t size = p->live.rec_size;
  if (c->dense) {
    for (uint32_t w = 0; w < CTS_LIVE_CHUNK / 64u; w++)
      for (uint64_t bits = c->present[w]; bits; bits &= bits - 1u) {
        const size_t off = w * 64u + (uint32_t)__builtin_ctzll(bits);
        const cts_alloc_profile_live_t b =
            cts_alloc_profile_live_of(p, (const live_rec_t *)(const void *)(c->recs + off * size));
        const int e = visit(user_data, &b);
        if (e) return e;
      }
    return 0;
  }
  for (uint32_t i = 0; i < c->n; i++) {
    if (c->offs[i] & CTS_LIVE_DEAD) continue;
    const cts_alloc_profile_live_t b =
        cts_alloc_profile_live_of(p, (const live_rec_t *)(const void *)(c->recs + i * size));
    const int e = visit(user_data, &b);
    if (e) return e;
  }
  return 0;
}

/* cts_alloc_profile_each_live_in for every chunk, in the order of a cursor started zeroed
 * (cts_alloc_profile_next_live's: the same blocks in the same order). */
static CTS_FORCE_INLINE int cts_alloc_profile_each_live(const cts_alloc_profile_t *p,
                                                        cts_alloc_profile_live_cb visit,
                                                        void *user_data) {
  uint64_t number, val;
  for (size_t pos = 0; cts_u64map_next(&p->live.chunks, &pos, &number, &val);) {
    const int e = cts_alloc_profile_each_live_in(p, (const cts_live_chunk_t *)(uintptr_t)val, visit,
                                                 user_data);
    if (e) return e;
  }
  return 0;
}

#endif /* CTS_ALLOC_PROFILE_LIVE_H */
