/* SPDX-License-Identifier: MIT */
#include "alloc_profile.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/compiler.h"
#include "common/grow.h"
#include "alloc_profile_live.h"
#include "fold.h"

struct cts_alloc_profile_block {
  uint64_t time_us;
  uint64_t alloc_clock; /* alloc_clock before this block */
  uint64_t samples;
  uint64_t length; /* words */
  double est;      /* 1 / sampling probability */
  uint32_t node;   /* stack node, or the next free block while on the free list */
  uint8_t source;  /* as in the trace (any value: the figures clamp it to external) */
  bool promoted;
};

/* An allocation's figures for its node's lean record, held back (cts_alloc_profile_t.held). */
struct cts_alloc_profile_held {
  uint64_t samples;
  double est;
  uint32_t stat; /* the record's index in stacks.lean: records move when the array grows */
};

/* Allocations held back at most: 24 KiB, and past the ~10 line fills a core has in flight. */
#define HELD_MAX 1024u
/* Lean records (20 bytes each) from which figures are held back: below, the records fit a
 * core's L2 (2 MiB here) and their loads seldom miss, while holding costs ~10 cycles an
 * allocation (CPU 1.03-1.06 x main's on gen_trace's survivors shape, 99 records). */
#define HELD_FROM_RECORDS (1u << 16)

/* Stacks beyond it keep only their allocation point (see cts_stacks_t.max_nodes). */
#define DEFAULT_MAX_NODES CTS_STACKS_DEFAULT_MAX_NODES

/* Whether cfg.live_at_end can be honoured: node peaks are made from the live figures as
 * they go, and only weights of exactly 1 sum to the same bits in any order (a NaN rate
 * fails the test). */
static bool live_at_end_applies(const cts_alloc_profile_t *p) {
  const cts_alloc_profile_config_t *c = &p->cfg;
  return c->live_at_end && c->stacks && c->no_node_peaks && !c->allocated_only &&
         !c->live_by_site && p->sample_rate >= 1.0;
}

/* cts_alloc_profile_t.collect_mode: the running case is 0, so that it costs one test of a
 * byte as the test of cfg.allocated_only did alone (a second test, of live_at_end, was ~3
 * instructions a collection on top and stats, which never defer). */
enum {
  COLLECT_RUNNING = 0, /* records of 16 bytes (no alloc_clock: rec_clock false) */
  COLLECT_AT_END,
  COLLECT_RUNNING_CLOCK, /* records of 24 bytes (rec_clock: stats' lifetimes in samples) */
  COLLECT_NONE
};

/* cts_alloc_profile_t.alloc_mode: how an allocation keeps the figures, a constant in each
 * copy of alloc_as below, so that none carries the others' tests and code (on_alloc picks
 * the copy). */
enum {
  ALLOC_RUNNING, /* the nodes' live figures as they come, or allocated_only */
  ALLOC_AT_END,  /* left for cts_alloc_profile_finish (p->live_at_end) */
  /* by site (stacks.live_by_site: the report, diff, flat top): the node's lean record loaded
   * once for the reserve and the count, the site's field packed with the record */
  ALLOC_BY_SITE,
  /* by site, the node's record's figures held back (start_holding; add_held adds them): a
   * copy of its own, so that ALLOC_BY_SITE's code stays as it was for small tries */
  ALLOC_BY_SITE_HELD,
  /* no stacks, live blocks kept (stats): no interning, the heap's live total and peak alone */
  ALLOC_HEAP
};

/* Whether the stacks keep live figures by site (cts_stacks_set_live_by_site, at init). */
static bool live_by_site_applies(const cts_alloc_profile_config_t *c) {
  return c->live_by_site && c->stacks && !c->allocated_only;
}

/* Sets live_at_end (when it applies), collect_mode and alloc_mode to match. */
static void set_live_at_end(cts_alloc_profile_t *p, bool at_end) {
  const bool held = p->alloc_mode == ALLOC_BY_SITE_HELD;
  p->live_at_end = at_end;
  p->collect_mode = p->cfg.allocated_only ? COLLECT_NONE
                    : at_end              ? COLLECT_AT_END
                    : p->rec_clock        ? COLLECT_RUNNING_CLOCK
                                          : COLLECT_RUNNING;
  /* (By site never defers: live_at_end_applies.) */
  p->alloc_mode = at_end                                     ? ALLOC_AT_END
                  : live_by_site_applies(&p->cfg)            ? ALLOC_BY_SITE
                  : !p->cfg.stacks && !p->cfg.allocated_only ? ALLOC_HEAP
                                                             : ALLOC_RUNNING;
  /* (A rate set between events keeps figures held back in order: by site never defers.) */
  if (held && p->alloc_mode == ALLOC_BY_SITE) p->alloc_mode = ALLOC_BY_SITE_HELD;
}

int cts_alloc_profile_init(cts_alloc_profile_t *p, const cts_alloc_profile_config_t *cfg) {
  memset(p, 0, sizeof *p);
  p->cfg = *cfg;
  p->sample_rate = 1.0;
  p->log_keep = log1p(-1.0); /* (unused at rate 1) */
  p->word_bytes = 8;
  p->free_block = UINT32_MAX;
  p->rec_clock = !cfg->skip_histograms && !cfg->skip_life_samples;
  if (cts_live_init(&p->live, p->rec_clock ? sizeof(live_rec_clock_t) : sizeof(live_rec_t)) != 0)
    return -EINVAL;
  cts_hist_init(&p->size_words);
  cts_hist_init(&p->life_us);
  cts_hist_init(&p->life_samples);
  const int e = cts_stacks_init(&p->stacks, cfg->history, 0);
  if (e) return e;
  p->stacks.max_nodes = cfg->max_nodes ? cfg->max_nodes : DEFAULT_MAX_NODES;
  /* Interned a backtrace at a time: its frames' slots can be fetched ahead. */
  cts_stacks_key_by_path(&p->stacks);
  /* Leaks' history is per site, and so are the live figures by site. */
  const bool by_site = live_by_site_applies(cfg);
  p->stacks.no_sites = cfg->no_sites && !cfg->history && !by_site;
  p->stacks.no_node_peaks = cfg->no_node_peaks;
  set_live_at_end(p, live_at_end_applies(p));
  /* Allocated figures alone fit records of 20 bytes instead of 64: each allocation's load
   * of its node's record then hits a smaller array (bench/JOURNAL.md, "A 24-byte record");
   * by site, the live and peak samples go to the sites. */
  if ((cfg->allocated_only ? cts_stacks_set_lean(&p->stacks)
       : by_site           ? cts_stacks_set_live_by_site(&p->stacks)
                           : 0) != 0) {
    cts_alloc_profile_fini(p);
    return -ENOMEM;
  }
  p->hold_off = !by_site || cfg->add_at_once;
  if (!p->cfg.held_from_records) p->cfg.held_from_records = HELD_FROM_RECORDS;
  return 0;
}

void cts_alloc_profile_fini(cts_alloc_profile_t *p) {
  cts_stacks_fini(&p->stacks);
  cts_live_fini(&p->live);
  free(p->blocks);
  free(p->held);
  memset(p, 0, sizeof *p);
}

/* A block live now into its node's live figures (live_at_end). A packed block weighs 1:
 * every block was allocated at a rate of 1 or more (set_info); a pooled one keeps its own. */
static inline void add_live(void *ud, void *rec) {
  cts_alloc_profile_t *p = ud;
  const live_rec_t *r = rec;
  if (CTS_UNLIKELY(r->meta & REC_POOLED)) {
    const cts_alloc_profile_block_t *b = &p->blocks[rec_pooled(r)];
    cts_stacks_add_live(&p->stacks, b->node, b->samples, b->est);
  } else {
    cts_stacks_add_live(&p->stacks, rec_node(r), rec_samples(r), 1.0);
  }
}

/* Ends the deferral: the blocks live now into their nodes' live figures, which from here on
 * run as events come (cts_alloc_profile_finish, or a rate falling below 1). */
static void settle_live(cts_alloc_profile_t *p) {
  cts_live_each(&p->live, add_live, p);
  set_live_at_end(p, false);
}

void cts_alloc_profile_set_info(cts_alloc_profile_t *p, const cts_mt_info_t *info) {
  p->have_info = true;
  p->sample_rate = info->sample_rate;
  p->log_keep = log1p(-info->sample_rate);
  /* They depend on the rate. */
  memset(p->weights, 0, sizeof p->weights);
  memset(p->long_weights, 0, sizeof p->long_weights);
  p->word_bytes = info->word_size / 8u ? info->word_size / 8u : 8u;
  p->start_time_us = info->start_time_us;
  p->stacks.history_origin_us = info->start_time_us;
  p->stacks.history_next_us = 0; /* from the new origin */
  /* Once events are in, a rate below 1 (a trace that changes its rate) ends the deferral
   * here: the blocks to come would not weigh 1 each. */
  if (!p->have_events)
    set_live_at_end(p, live_at_end_applies(p));
  else if (p->live_at_end && !live_at_end_applies(p))
    settle_live(p);
}

static int new_block(cts_alloc_profile_t *p, uint32_t *out) {
  if (p->free_block != UINT32_MAX) {
    *out = p->free_block;
    p->free_block = p->blocks[*out].node;
    return 0;
  }
  /* Block numbers are u32 (UINT32_MAX is the end of the free list). */
  if (p->block_count == p->block_cap && p->block_cap >= UINT32_MAX / 2) return CTS_E_LIMIT;
  if (cts_grow((void **)&p->blocks, &p->block_cap, p->block_count, sizeof *p->blocks))
    return -ENOMEM;
  *out = p->block_count++;
  return 0;
}

/* 1 / the probability that a block of length words was sampled, by the formula. */
static CTS_NOINLINE double weight_formula(const cts_alloc_profile_t *p, uint64_t length) {
  /* cts_block_sample_probability(length, p->sample_rate), its log1p taken once: the same
   * operations on the same values, so the same bits (tests/analysis/test_profile_weights). */
  const double prob = p->sample_rate >= 1.0 ? 1.0 : -expm1((double)(length + 1) * p->log_keep);
  return cts_est_clamp(1.0 / prob);
}

/* The same for a length of CTS_ALLOC_PROFILE_WEIGHTS words or more: memoised by length. */
static CTS_NOINLINE double long_weight(cts_alloc_profile_t *p, uint64_t length) {
  cts_alloc_profile_weight_t *m =
      &p->long_weights[(length ^ length >> 8) & (CTS_ALLOC_PROFILE_LONG_WEIGHTS - 1u)];
  if (m->length != length)
    *m = (cts_alloc_profile_weight_t){.length = length, .weight = weight_formula(p, length)};
  return m->weight;
}

/* 1 / the probability that a block of length words was sampled: a table for the common
 * short lengths (the rate is fixed per trace), a memo for the others. Inline: it is asked
 * on every allocation and every collect. */
static CTS_FORCE_INLINE double sampling_weight(cts_alloc_profile_t *p, uint64_t length) {
  /* At rate 1 every block is sampled (cts_block_sample_probability is 1): rate-1 traces of
   * large blocks would otherwise pay the formula on every event. */
  if (p->sample_rate >= 1.0) return 1.0;
  if (CTS_UNLIKELY(length >= CTS_ALLOC_PROFILE_WEIGHTS)) return long_weight(p, length);
  double *w = &p->weights[length];
  if (CTS_UNLIKELY(*w == 0)) *w = weight_formula(p, length);
  return *w;
}

static void release_block(cts_alloc_profile_t *p, uint32_t bi) {
  p->blocks[bi].node = p->free_block;
  p->free_block = bi;
}

/* The full figures of a live record (its pooled copy, or its fields unpacked; alloc_clock
 * 0 there: rec_alloc_clock reads it, for the one caller that does). Inline:
 * a call returned the 48-byte block through memory on every collect (~35 instructions). */
static CTS_FORCE_INLINE cts_alloc_profile_block_t unpack(const cts_alloc_profile_t *p,
                                                         const live_rec_t *r) {
  if (r->meta & REC_POOLED) return p->blocks[rec_pooled(r)];
  return (cts_alloc_profile_block_t){
      .time_us = p->live_base_us + (r->time_len & ((1ull << REC_TIME_BITS) - 1)),
      .samples = rec_samples(r),
      .length = r->time_len >> REC_TIME_BITS,
      .node = rec_node(r),
      .source = (uint8_t)(r->meta >> REC_SOURCE & 3u),
      .promoted = (r->meta & REC_PROMOTED) != 0,
  };
}

/* Stores b (est left out: it is a function of the length) in r when its figures fit a
 * record, with site_bits (the site's field, REC_SITE, or 0) in its flags, and alloc_clock
 * after it when the records keep it (p->rec_clock). Inline, from the event's own fields:
 * building the 48-byte block first cost its stores and loads on every allocation. */
static CTS_FORCE_INLINE bool pack_fits(const cts_alloc_profile_t *p, live_rec_t *r,
                                       uint64_t time_us, uint64_t alloc_clock, uint64_t samples,
                                       uint64_t length, uint8_t source, uint32_t node,
                                       uint64_t site_bits) {
  /* A time before the base wraps dt to 2^40 or more (the block is pooled), except when it
   * is more than 2^64 - 2^40 before it: base + dt gives it back all the same, modulo 2^64. */
  const uint64_t dt = time_us - p->live_base_us;
  /* One test of the fields' high bits rather than a compare each (every allocation). */
  const uint64_t high =
      dt >> REC_TIME_BITS | (length | samples | node) >> REC_FIELD_BITS | (uint64_t)(source >> 2);
  if (CTS_UNLIKELY(high != 0)) return false;
  *r = (live_rec_t){
      .time_len = dt | length << REC_TIME_BITS,
      .meta = samples | (uint64_t)node << REC_NODE | (uint64_t)source << REC_SOURCE | site_bits};
  /* (The table's records are 24 bytes then: cts_alloc_profile_init.) */
  if (p->rec_clock) ((live_rec_clock_t *)(void *)r)->alloc_clock = alloc_clock;
  return true;
}

/* Stores b, whose figures do not fit a record, in the pool and r refers to it. Returns 0,
 * -ENOMEM or CTS_E_LIMIT. */
static CTS_NOINLINE int pool(cts_alloc_profile_t *p, live_rec_t *r,
                             const cts_alloc_profile_block_t *b) {
  uint32_t bi;
  const int e = new_block(p, &bi);
  if (e) return e;
  p->blocks[bi] = *b;
  *r = (live_rec_t){.time_len = bi, .meta = REC_POOLED};
  return 0;
}

/* The block's est: kept in the pool, recomputed from the length otherwise. */
static CTS_FORCE_INLINE double rec_est(cts_alloc_profile_t *p, const live_rec_t *r) {
  if (r->meta & REC_POOLED) return p->blocks[rec_pooled(r)].est;
  return sampling_weight(p, r->time_len >> REC_TIME_BITS);
}

/* Out of the stacks' figures kept as they come: the live block r (allocated at node with
 * samples) is gone. Before r is released. Out of line, as gcc had made this case of the
 * former heap_free: the largest of the three, and the one the others need not carry. */
static void stacks_free(cts_alloc_profile_t *p, uint32_t node, uint64_t samples,
                        const live_rec_t *r) {
  cts_stacks_free(&p->stacks, node, samples, rec_est(p, r));
}

/* The live block r (allocated at node with samples) is gone: out of the stacks' figures,
 * or without stacks out of the heap's live total (see on_alloc); at_end as for alloc_as
 * (below). Before r is released. */
static CTS_FORCE_INLINE void heap_free(cts_alloc_profile_t *p, uint32_t node, uint64_t samples,
                                       const live_rec_t *r, const bool at_end) {
  if (!p->cfg.stacks)
    p->stacks.live_samples -= samples;
  else if (at_end || p->stacks.live_by_site) { /* (by site: no node record to change) */
    /* The site kept in the record spares a load of the node, a cache miss in a large trie
     * (most frees on gen_trace's default shape). */
    const uint32_t site = (uint32_t)(r->meta >> REC_SITE);
    if (site)
      cts_stacks_free_site(&p->stacks, site - 1u, samples);
    else
      cts_stacks_free_at_end(&p->stacks, node, samples);
  } else
    stacks_free(p, node, samples, r);
}

/* Keeps what a consumer of cts_alloc_profile_ended() needs of a block that has just ended. */
static void ended(cts_alloc_profile_t *p, const cts_alloc_profile_block_t *b) {
  p->have_ended = true;
  p->ended = (cts_alloc_profile_live_t){.time_us = b->time_us,
                                        .length = b->length,
                                        .samples = b->samples,
                                        .node = b->node,
                                        .source = b->source};
}

bool cts_alloc_profile_ended(const cts_alloc_profile_t *p, cts_alloc_profile_live_t *out) {
  if (p->have_ended) *out = p->ended;
  return p->have_ended;
}

cts_alloc_profile_live_t cts_alloc_profile_pooled_live(const cts_alloc_profile_t *p,
                                                       const live_rec_t *r) {
  const cts_alloc_profile_block_t *b = &p->blocks[rec_pooled(r)];
  return (cts_alloc_profile_live_t){.time_us = b->time_us,
                                    .length = b->length,
                                    .samples = b->samples,
                                    .node = b->node,
                                    .source = b->source};
}

bool cts_alloc_profile_next_live(cts_alloc_profile_t *p, cts_live_cursor_t *cur,
                                 cts_alloc_profile_live_t *out) {
  uint64_t id;
  void *rec;
  if (!cts_live_next(&p->live, cur, &id, &rec)) return false;
  *out = cts_alloc_profile_live_of(p, rec);
  return true;
}

size_t cts_alloc_profile_next_lives(cts_alloc_profile_t *p, cts_live_cursor_t *cur,
                                    cts_alloc_profile_live_t *out, size_t max) {
  size_t n = 0;
  while (n < max) {
    const cts_live_chunk_t *c = cur->chunk;
    if (c && c->dense && cur->i < CTS_LIVE_CHUNK) {
      /* A dense chunk's blocks from cur->i on, a word of its bitmap at a time, inline:
       * through cts_live_next, ~80 instructions a block (10 M survivors walked twice by
       * the report: 12 % of its instructions). */
      const live_rec_t *recs = (const live_rec_t *)(const void *)c->recs;
      uint32_t w = cur->i / 64u;
      uint64_t bits = c->present[w] >> (cur->i % 64u) << (cur->i % 64u);
      for (;;) {
        uint32_t off = 0;
        for (; bits && n < max; bits &= bits - 1u) {
          off = w * 64u + (uint32_t)__builtin_ctzll(bits);
          out[n++] = cts_alloc_profile_live_of(p, &recs[off]);
        }
        if (n == max) {
          cur->i = off + 1u;
          return n;
        }
        if (++w == CTS_LIVE_CHUNK / 64u) break;
        bits = c->present[w];
      }
      cur->i = CTS_LIVE_CHUNK; /* the chunk is done: cts_live_next goes to the next one */
    }
    uint64_t id;
    void *rec;
    if (!cts_live_next(&p->live, cur, &id, &rec)) break;
    out[n++] = cts_alloc_profile_live_of(p, rec);
  }
  return n;
}

/* The allocation's figures that do not depend on the block's life (every configuration). */
static CTS_FORCE_INLINE void count_totals(cts_alloc_profile_t *p, const cts_mt_event_t *ev,
                                          unsigned src, double est, const bool by_site) {
  p->allocs_by_source[src]++;
  p->samples_by_source[src] += ev->nsamples;
  p->est_allocs_total += est;
  p->alloc_clock += ev->nsamples;
  /* Buckets alone only in the copy by site (the report's): tested there, so that the other
   * copies (stats' among them) pay no test for it. */
  if (!p->cfg.skip_histograms) {
    if (by_site && p->cfg.histogram_buckets_only)
      cts_hist_add_to_bucket(&p->size_words, ev->length, ev->nsamples);
    else
      cts_hist_add(&p->size_words, ev->length, ev->nsamples);
  }
}

/* The rest of an allocation when only allocated figures are kept (cfg.allocated_only): no
 * live block is entered, node's allocated figures only (reserve and count in one). */
static CTS_FORCE_INLINE int count_allocated(cts_alloc_profile_t *p, const cts_mt_event_t *ev,
                                            unsigned src, double est, uint32_t node) {
  if (p->cfg.stacks) {
    const int e = cts_stacks_alloc_allocated(&p->stacks, node, ev->nsamples, est);
    if (e) return e; /* (nothing counted) */
  }
  count_totals(p, ev, src, est, false);
  p->last_node = node;
  return 0;
}

/* The block of the id an allocation has just been entered under (r), which was live: in a
 * corrupt v3 trace, an id allocated twice. The old block counts as freed now, without a
 * lifetime; at_end as for alloc_as. Out of line, as the pooled case below: inline, the rare
 * cases' registers and frame were every allocation's. */
static CTS_NOINLINE void free_replaced(cts_alloc_profile_t *p, live_rec_t *r, bool at_end) {
  const cts_alloc_profile_block_t old = unpack(p, r);
  heap_free(p, old.node, old.samples, r, at_end);
  if (!at_end) ended(p, &old); /* (see cfg.live_at_end) */
  if (r->meta & REC_POOLED) release_block(p, rec_pooled(r));
  p->live_blocks--;
}

/* The allocation ev (weight est, at node) in the pool, its record r referring to it, when
 * its figures do not fit a record. Returns 0, or -ENOMEM or CTS_E_LIMIT with the block taken
 * out of the table again. */
static CTS_NOINLINE int pool_event(cts_alloc_profile_t *p, live_rec_t *r, const cts_mt_event_t *ev,
                                   double est, uint32_t node) {
  const cts_alloc_profile_block_t b = {.time_us = ev->time_us,
                                       .alloc_clock = p->alloc_clock,
                                       .samples = ev->nsamples,
                                       .length = ev->length,
                                       .est = est,
                                       .node = node,
                                       .source = ev->source};
  const int e = pool(p, r, &b);
  if (e) {
    live_rec_clock_t gone; /* (the table's records are 16 or 24 bytes) */
    cts_live_take(&p->live, ev->obj_id, &gone);
  }
  return e;
}

/* Whether up to HELD_MAX more allocations may be held back: a lean record's count of
 * allocations is at most the profile's, so while that stays below UINT32_MAX - 1 -
 * HELD_MAX no held allocation can carry into the high halves' record (whose making may fail:
 * cts_stacks_reserve_lean), and none needs a reserve. */
static bool room_to_hold(const cts_alloc_profile_t *p) {
  return cts_alloc_profile_allocs(p) < UINT32_MAX - 1u - HELD_MAX;
}

/* The lean records have outgrown the cache (HELD_FROM_RECORDS): from the next allocation
 * on, their figures are held back, when there is room (room_to_hold) and memory. */
static CTS_NOINLINE void start_holding(cts_alloc_profile_t *p) {
  p->hold_off = true; /* (for good, unless holding starts) */
  if (!room_to_hold(p) || !(p->held = malloc(HELD_MAX * sizeof *p->held))) return;
  p->alloc_mode = ALLOC_BY_SITE_HELD;
}

/* Adds the held figures to their lean records: all the records prefetched, then each added
 * in the order held, so that a record's sums are the same operations in the same order as
 * when each allocation added its own (the same bits). No carry: room_to_hold. */
static CTS_NOINLINE void add_held(cts_alloc_profile_t *p) {
  cts_stack_lean_t *lean = p->stacks.lean;
  const struct cts_alloc_profile_held *h = p->held;
  const uint32_t n = p->held_count;
  /* A 20-byte record may straddle two lines. */
  for (uint32_t i = 0; i < n; i++) {
    const char *rec = (const char *)&lean[h[i].stat];
    __builtin_prefetch(rec, 1);
    __builtin_prefetch(rec + sizeof *lean - 1u, 1);
  }
  /* A run of one record's figures is summed in registers, in the same order (the same
   * bits): through memory, each sum waited on the last one's store (few stacks, as on
   * gen_trace's survivors shape, make long runs: CPU 1.03-1.06 x main's there). */
  for (uint32_t i = 0; i < n;) {
    const uint32_t stat = h[i].stat;
    cts_stack_lean_t *fig = &lean[stat];
    uint32_t allocs = fig->allocs;
    uint64_t samples = fig->samples;
    double est = fig->est_allocs;
    do {
      allocs++;
      samples += h[i].samples;
      est += h[i].est;
    } while (++i < n && h[i].stat == stat);
    fig->allocs = allocs;
    fig->samples = samples;
    fig->est_allocs = est;
  }
  p->held_count = 0;
  /* (Nothing held now: the next allocations may add theirs at once.) */
  if (CTS_UNLIKELY(!room_to_hold(p))) p->alloc_mode = ALLOC_BY_SITE;
}

void cts_alloc_profile_settle(cts_alloc_profile_t *p) {
  if (p->held_count) add_held(p);
}

/* An allocation in the given mode (a constant). */
static CTS_FORCE_INLINE int alloc_as(cts_alloc_profile_t *p, const cts_mt_event_t *ev,
                                     bool leaf_only, const int mode) {
  const bool at_end = mode == ALLOC_AT_END;
  const bool by_site = mode == ALLOC_BY_SITE || mode == ALLOC_BY_SITE_HELD;
  const bool hold = mode == ALLOC_BY_SITE_HELD;
  /* By site implies stacks and not allocated_only (cts_alloc_profile_init). */
  const bool stacks = by_site || (mode != ALLOC_HEAP && p->cfg.stacks);
  const unsigned src = ev->source < 3 ? ev->source : 2;
  const double est = sampling_weight(p, ev->length);
  uint32_t node = 0;
  if (stacks) {
    size_t n = ev->backtrace_len;
    /* The reader's common prefix is with the previous allocation of the same domain; the
     * stacks' previous backtrace is that one only when the domain did not change. */
    const uint32_t domain_key = (uint32_t)ev->domain + 1u;
    size_t shared = p->last_domain_key == domain_key ? (size_t)ev->common_prefix : 0;
    if (p->cfg.fold) {
      /* Folded frames are a suffix: what stays shared is within both kept prefixes. */
      const size_t kept = cts_fold_cut(p->cfg.fold, ev->backtrace, n);
      if (shared > kept) shared = kept;
      if (shared > p->last_kept) shared = p->last_kept;
      p->last_kept = n = kept;
    }
    /* Only a whole backtrace interned is one the next allocation's prefix can share. */
    const bool leaf = leaf_only && n;
    p->last_domain_key = leaf ? 0 : domain_key;
    const int e = leaf ? cts_stacks_intern_leaf(&p->stacks, ev->backtrace[n - 1], &node)
                       : cts_stacks_intern_repeat(&p->stacks, ev->backtrace, n, shared, &node);
    if (e) return e;
  }
  /* (Never with at_end: live_at_end_applies; nor by site.) Inline in the running copy: as a
   * call, export -f folded took 2 % more instructions on gen_trace's default shape. */
  if (mode == ALLOC_RUNNING && p->cfg.allocated_only) return count_allocated(p, ev, src, est, node);
  /* Before the block is entered: what fails must leave the profile as it was. */
  cts_stack_lean_t *lean_fig = NULL;
  uint32_t lean_stat = 0;
  /* By site, the node's record is not loaded here when its figures are held back. */
  if (hold) {
    lean_stat = p->stacks.nodes[node].stat;
  } else if (by_site) {
    /* (Nothing is held in this copy: add_held and cts_alloc_profile_finish leave none.) */
    lean_fig = cts_stacks_reserve_lean(&p->stacks, node, &lean_stat);
    if (!lean_fig) return -ENOMEM;
  } else if (stacks) {
    const int reserved = cts_stacks_reserve(&p->stacks, node);
    if (reserved) return reserved;
  }
  /* No record refers to the base while the table is empty: it follows the trace. */
  if (p->live.count == 0) p->live_base_us = ev->time_us;
  bool added;
  /* Every byte of the record that is read is written below (packed or pooled). */
  live_rec_t *r = cts_live_insert_unset(&p->live, ev->obj_id, &added);
  if (!r) return -ENOMEM;
  if (CTS_UNLIKELY(!added)) free_replaced(p, r, at_end);
  /* By site: the node's site, asked once for the figures and the free (kept in the record
   * when it fits the field; 0 there: ask the node). */
  const uint32_t site = by_site ? cts_stacks_site_memo(&p->stacks, node) : UINT32_MAX;
  const uint64_t site_bits =
      by_site && site < (1u << (64 - REC_SITE)) - 1u ? (uint64_t)(site + 1u) << REC_SITE : 0;
  if (CTS_UNLIKELY(!pack_fits(p, r, ev->time_us, p->alloc_clock, ev->nsamples, ev->length,
                              ev->source, node, site_bits))) {
    const int e = pool_event(p, r, ev, est, node);
    if (e) return e;
  }
  p->live_blocks++;

  count_totals(p, ev, src, est, by_site);
  if (hold) {
    p->held[p->held_count++] =
        (struct cts_alloc_profile_held){.samples = ev->nsamples, .est = est, .stat = lean_stat};
    if (CTS_UNLIKELY(p->held_count == HELD_MAX)) add_held(p);
    cts_stacks_alloc_site(&p->stacks, site, ev->nsamples, ev->time_us);
  } else if (by_site) {
    /* Cannot fail: reserved above, before the block was entered. */
    cts_stacks_alloc_lean_record(&p->stacks, lean_fig, lean_stat, site, ev->nsamples, est,
                                 ev->time_us);
    if (CTS_UNLIKELY(p->stacks.stat_count >= p->cfg.held_from_records) && !p->hold_off)
      start_holding(p);
  } else if (stacks) {
    if (at_end)
      cts_stacks_alloc_at_end(&p->stacks, node, ev->nsamples, est, ev->time_us);
    else
      (void)cts_stacks_alloc(&p->stacks, node, ev->nsamples, est, ev->time_us);
  } else {
    /* Without stacks only the heap's live total and its peak are wanted (the stacks' own
     * figures, as cts_stacks_alloc keeps them): node 0's figures would cost ~12 % of stats. */
    cts_stacks_t *s = &p->stacks;
    s->live_samples += ev->nsamples;
    if (s->live_samples > s->peak_samples) {
      s->peak_samples = s->live_samples;
      s->peak_time_us = ev->time_us;
    }
  }
  p->last_node = node;
  return 0;
}

/* The copies of alloc_as, one out of line per mode (on_alloc picks one). */
#define ALLOC_COPY(name, mode)                                                                     \
  static CTS_NOINLINE int name(cts_alloc_profile_t *p, const cts_mt_event_t *ev, bool leaf_only) { \
    return alloc_as(p, ev, leaf_only, mode);                                                       \
  }
ALLOC_COPY(alloc_running, ALLOC_RUNNING)
ALLOC_COPY(alloc_at_end, ALLOC_AT_END)
ALLOC_COPY(alloc_by_site, ALLOC_BY_SITE)
ALLOC_COPY(alloc_by_site_held, ALLOC_BY_SITE_HELD)
ALLOC_COPY(alloc_heap, ALLOC_HEAP)
#undef ALLOC_COPY

/* The copy of the allocation path for alloc_mode, by compares: the running copy first
 * (export -f folded: one test, as main's test of live_at_end was), then by site (report,
 * diff, flat top). A table of the copies and one indirect jump took fewer instructions, but
 * leaks on /tmp/rt's python3 trace ran 1.5-2.5 % slower than main with it (11 and 21
 * interleaved pairs), 0.8-1.3 % with these compares. A relabel of the stacks, which clears
 * live_by_site, comes after the last event (siterows.c). */
static inline int on_alloc(cts_alloc_profile_t *p, const cts_mt_event_t *ev, bool leaf_only) {
  const uint8_t mode = p->alloc_mode;
  if (mode == ALLOC_RUNNING) return alloc_running(p, ev, leaf_only);
  if (mode == ALLOC_BY_SITE) return alloc_by_site(p, ev, leaf_only);
  if (mode == ALLOC_BY_SITE_HELD) return alloc_by_site_held(p, ev, leaf_only);
  return mode == ALLOC_AT_END ? alloc_at_end(p, ev, leaf_only) : alloc_heap(p, ev, leaf_only);
}

static CTS_NOINLINE void on_promote(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  live_rec_t *r = cts_live_find(&p->live, ev->obj_id);
  const cts_alloc_profile_block_t b = r ? unpack(p, r) : (cts_alloc_profile_block_t){0};
  if (!r || b.promoted || b.source != CTS_MT_SOURCE_MINOR) { /* (external when clamped) */
    p->unknown_promotes++;
    return;
  }
  if (r->meta & REC_POOLED)
    p->blocks[rec_pooled(r)].promoted = true;
  else
    r->meta |= REC_PROMOTED;
  p->promoted_allocs++;
  p->promoted_samples += b.samples;
}

/* A collection; at_end as for alloc_as; clock: p->rec_clock (a constant in the running
 * copies, so that each copies its own record size without a test). */
static CTS_FORCE_INLINE void collect_as(cts_alloc_profile_t *p, const cts_mt_event_t *ev,
                                        const bool at_end, const bool clock) {
  /* The copy out of the table is of a constant size in each branch (16 or 24 bytes): a few
   * moves inline, not a libc call of a size known at run time. */
  live_rec_clock_t rc;
  const bool taken = clock ? cts_live_take_n(&p->live, ev->obj_id, &rc, sizeof rc)
                           : cts_live_take_n(&p->live, ev->obj_id, &rc.rec, sizeof rc.rec);
  if (!taken) {
    p->unknown_collects++;
    return;
  }
  const live_rec_t *r = &rc.rec;
  const cts_alloc_profile_block_t full = unpack(p, r);
  const cts_alloc_profile_block_t *b = &full;
  heap_free(p, b->node, b->samples, r, at_end);
  if (r->meta & REC_POOLED) release_block(p, rec_pooled(r));
  if (!at_end) ended(p, b); /* (see cfg.live_at_end) */
  if (b->source >= CTS_MT_SOURCE_EXTERNAL)
    p->collected_external_samples += b->samples;
  else if (b->source == CTS_MT_SOURCE_MINOR && !b->promoted)
    p->collected_minor_samples += b->samples;
  else
    p->collected_major_samples += b->samples;
  p->collected_allocs++;
  if (!p->cfg.skip_histograms) {
    const uint64_t lifetime = ev->time_us > b->time_us ? ev->time_us - b->time_us : 0;
    /* (Buckets alone: the report's profile, whose copy keeps no clock; stats', which keeps
     * it, is not tested.) */
    if (!clock && p->cfg.histogram_buckets_only)
      cts_hist_add_to_bucket(&p->life_us, lifetime, b->samples);
    else
      cts_hist_add(&p->life_us, lifetime, b->samples);
    if (clock) { /* (!skip_life_samples here) */
      /* A pooled block's is in its full figures (unpack). */
      const uint64_t before = r->meta & REC_POOLED ? b->alloc_clock : rc.alloc_clock;
      cts_hist_add(&p->life_samples, p->alloc_clock - before - b->samples, b->samples);
    }
  }
  p->live_blocks--;
}

/* The collection paths, out of line: inline in cts_alloc_profile_add_event, they made
 * it save and restore six registers and a frame on every event, allocations included (~17
 * instructions an event, 2.4 % of pprof's on python3's trace); here only a collection pays its
 * own, and an allocation is a tail call. */
static CTS_NOINLINE int collect_running(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  collect_as(p, ev, false, false);
  return 0;
}

static CTS_NOINLINE int collect_running_clock(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  collect_as(p, ev, false, true);
  return 0;
}

/* (The views that defer keep no lifetimes in samples: 16-byte records, tested all the same.) */
static CTS_NOINLINE int collect_at_end(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  collect_as(p, ev, true, p->rec_clock);
  return 0;
}

/* What every event does first: the trace's time span, and nothing ended yet. Whether a
 * checkpoint of the sites' history passed is the caller's (see cts_alloc_profile_add_event). */
static inline void event_seen(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  if (!p->have_events) p->have_events = true, p->first_event_us = ev->time_us;
  /* end_us is at least last_event_us: an event no later than the last one moves neither. */
  if (ev->time_us > p->last_event_us) {
    p->last_event_us = ev->time_us;
    if (ev->time_us > p->end_us) p->end_us = ev->time_us;
  }
  p->have_ended = false;
}

/* (leaks only) Whether ev passed a checkpoint of the sites' history: a call then, ~20
 * instructions an event otherwise. */
static inline bool checkpoint_passed(const cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  return p->stacks.history && ev->time_us > p->stacks.history_next_us;
}

/* An event past event_seen and the checkpoints. Every path is a tail call, so that
 * cts_alloc_profile_add_event keeps no frame of its own. */
static CTS_FORCE_INLINE int dispatch(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  /* Tested in the order of their frequency, allocations first: gcc's switch tested
   * promotions, then collections, so that an allocation paid three compares (4 instructions
   * an allocation more than here on gen_trace's survivors shape). */
  if (CTS_LIKELY(ev->kind == CTS_MT_ALLOC)) return on_alloc(p, ev, p->cfg.leaf_only);
  /* Without live blocks (allocated_only) there is nothing a collect or promotion changes. */
  if (ev->kind == CTS_MT_COLLECT) {
    if (CTS_LIKELY(p->collect_mode == COLLECT_RUNNING)) return collect_running(p, ev);
    if (p->collect_mode == COLLECT_AT_END) return collect_at_end(p, ev);
    if (p->collect_mode == COLLECT_RUNNING_CLOCK) return collect_running_clock(p, ev);
    return 0;
  }
  if (ev->kind == CTS_MT_PROMOTE && !p->cfg.allocated_only) on_promote(p, ev);
  return 0;
}

/* An event that passed a checkpoint: the history first, as every event did before it. */
static CTS_NOINLINE int add_at_checkpoint(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  cts_stacks_advance_time(&p->stacks, ev->time_us);
  return dispatch(p, ev);
}

int cts_alloc_profile_add_event(cts_alloc_profile_t *p, const cts_mt_event_t *ev) {
  event_seen(p, ev);
  if (CTS_UNLIKELY(checkpoint_passed(p, ev))) return add_at_checkpoint(p, ev);
  return dispatch(p, ev);
}

int cts_alloc_profile_add_alloc(cts_alloc_profile_t *p, const cts_mt_event_t *ev, bool leaf_only) {
  CTS_ASSERT(ev->kind == CTS_MT_ALLOC);
  event_seen(p, ev);
  if (checkpoint_passed(p, ev)) cts_stacks_advance_time(&p->stacks, ev->time_us);
  return on_alloc(p, ev, leaf_only);
}

void cts_alloc_profile_add_packet(cts_alloc_profile_t *p, const cts_mt_packet_t *pk) {
  if (pk->kind != CTS_MT_PACKET_TRUNCATED && pk->kind != CTS_MT_PACKET_SKIPPED &&
      pk->kind != CTS_MT_PACKET_TRACE_INFO && pk->time_end_us > p->end_us)
    p->end_us = pk->time_end_us;
}

void cts_alloc_profile_finish(cts_alloc_profile_t *p) {
  /* Events added afterwards add their figures at once (see the header). */
  cts_alloc_profile_settle(p);
  if (p->alloc_mode == ALLOC_BY_SITE_HELD) p->alloc_mode = ALLOC_BY_SITE;
  p->hold_off = true;
  free(p->held);
  p->held = NULL;
  if (p->live_at_end) settle_live(p);
  cts_stacks_finish(&p->stacks);
  /* The stacks are all in: their look-up table (16 bytes a node, 128 MiB for gen_trace's
   * default shape) serves no view, while report and export -f folded build second tries. */
  cts_stacks_drop_table(&p->stacks);
}

double cts_alloc_profile_bytes_per_sample(const cts_alloc_profile_t *p) {
  return cts_est_clamp((double)p->word_bytes / p->sample_rate);
}

uint64_t cts_alloc_profile_samples(const cts_alloc_profile_t *p) {
  return p->samples_by_source[0] + p->samples_by_source[1] + p->samples_by_source[2];
}

uint64_t cts_alloc_profile_allocs(const cts_alloc_profile_t *p) {
  return p->allocs_by_source[0] + p->allocs_by_source[1] + p->allocs_by_source[2];
}

double cts_alloc_profile_duration_s(const cts_alloc_profile_t *p) {
  if (p->end_us <= p->start_time_us) return 0.0;
  return (double)(p->end_us - p->start_time_us) * 1e-6;
}
