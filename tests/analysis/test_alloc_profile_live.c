/* SPDX-License-Identifier: MIT */
/* The allocation profile's table of live blocks: at most 32 bytes per live block on a
 * trace whose blocks survive, and the same figures whether a block's record is compact
 * or (huge, far in time, many samples) kept in full. */
#include "../../src/analysis/alloc_profile.h"

#include "../test.h"

static int alloc(cts_alloc_profile_t *p, uint64_t id, uint64_t t, uint64_t length, uint64_t samples,
                 unsigned source) {
  const cts_mt_event_t ev = {.kind = CTS_MT_ALLOC,
                             .source = (uint8_t)source,
                             .time_us = t,
                             .obj_id = id,
                             .length = length,
                             .nsamples = samples};
  return cts_alloc_profile_add_event(p, &ev);
}

static int event(cts_alloc_profile_t *p, cts_mt_event_kind_t kind, uint64_t id, uint64_t t) {
  const cts_mt_event_t ev = {.kind = kind, .time_us = t, .obj_id = id};
  return cts_alloc_profile_add_event(p, &ev);
}

CTS_TEST(survivors_cost_at_most_32_bytes_each) {
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {.skip_histograms = true};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  const uint64_t n = 2000000;
  for (uint64_t id = 0; id < n; id++) {
    CTS_ASSERT_EQ_INT(alloc(&p, id, 1000 + id, 1 + id % 300, 2 + id % 300, id % 3), 0);
    /* One block in ten dies young. */
    if (id % 10 == 9) CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, id - 3, 1000 + id), 0);
  }
  CTS_ASSERT_EQ_U64(p.live_blocks, n - n / 10);
  const size_t bytes = p.live.bytes + (size_t)p.block_cap * 40u;
  CTS_ASSERT_MSG(bytes <= p.live_blocks * 32u, "%zu bytes for %" PRIu64 " live blocks", bytes,
                 p.live_blocks);
  cts_alloc_profile_fini(&p);
}

/* Runs the same events with the block of id 5 ordinary or one of the kinds kept in full;
 * every figure but that block's own must agree. */
static void run(cts_alloc_profile_t *p, uint64_t t5, uint64_t len5, uint64_t samples5) {
  const cts_alloc_profile_config_t cfg = {0};
  cts_alloc_profile_init(p, &cfg);
  for (uint64_t id = 0; id < 10; id++) {
    const bool odd = id == 5;
    alloc(p, id, odd ? t5 : 100 + id, odd ? len5 : 4, odd ? samples5 : 1, CTS_MT_SOURCE_MINOR);
  }
  event(p, CTS_MT_PROMOTE, 5, 200);
  event(p, CTS_MT_PROMOTE, 5, 201); /* twice: unknown */
  event(p, CTS_MT_COLLECT, 5, 300);
  event(p, CTS_MT_COLLECT, 5, 301);            /* twice: unknown */
  alloc(p, 3, 400, 4, 1, CTS_MT_SOURCE_MINOR); /* an id allocated twice */
  cts_alloc_profile_finish(p);
}

CTS_TEST(pooled_blocks_keep_their_figures) {
  /* pooled: the block's figures do not fit a compact record (each field at its bound). */
  const struct {
    uint64_t t, len, samples;
    bool pooled;
  } odd[] = {{105, 4, 1, false},
             {105 + (1ull << 41), 4, 1, true},
             {50, 4, 1, true},
             {105, 1ull << 30, 1, true},
             {105, 4, 1ull << 33, true},
             {100 + (1ull << 40) - 1, 4, 1, false},
             {100 + (1ull << 40), 4, 1, true},
             {105, (1ull << 24) - 1, 1, false},
             {105, 1ull << 24, 1, true},
             {105, 4, UINT32_MAX, false},
             {105, 4, 1ull << 32, true}};
  for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++) {
    cts_alloc_profile_t p;
    run(&p, odd[k].t, odd[k].len, odd[k].samples);
    CTS_ASSERT_EQ_U64(p.live_blocks, 9);
    CTS_ASSERT_EQ_U64(p.promoted_allocs, 1);
    CTS_ASSERT_EQ_U64(p.promoted_samples, odd[k].samples);
    CTS_ASSERT_EQ_U64(p.unknown_promotes, 1);
    CTS_ASSERT_EQ_U64(p.unknown_collects, 1);
    CTS_ASSERT_EQ_U64(p.collected_major_samples, odd[k].samples);
    CTS_ASSERT_EQ_U64(p.collected_allocs, 1);
    CTS_ASSERT_EQ_U64(p.life_us.total_blocks, 1);
    CTS_ASSERT_EQ_U64(p.free_block == UINT32_MAX ? 0 : 1, odd[k].pooled ? 1 : 0);
    cts_alloc_profile_fini(&p);
  }
}

/* What the report reads instead of keeping its own table: the block an event ended, and
 * the blocks live at the end, with their figures as allocated (compact or pooled). */
CTS_TEST(ended_and_live_blocks_keep_their_figures) {
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {0};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  cts_alloc_profile_live_t b;
  CTS_ASSERT_EQ_INT(alloc(&p, 1, 100, 7, 8, 1), 0);
  CTS_ASSERT(!cts_alloc_profile_ended(&p, &b));
  CTS_ASSERT_EQ_INT(alloc(&p, 2, 50, 1ull << 30, 9, 7), 0); /* pooled: early, huge */
  CTS_ASSERT_EQ_INT(alloc(&p, 3, 120, 3, 4, 0), 0);
  CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, 1, 130), 0);
  CTS_ASSERT(cts_alloc_profile_ended(&p, &b));
  CTS_ASSERT_EQ_U64(b.time_us, 100);
  CTS_ASSERT_EQ_U64(b.length, 7);
  CTS_ASSERT_EQ_U64(b.samples, 8);
  CTS_ASSERT_EQ_INT(b.source, 1);
  CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, 1, 131), 0); /* unknown: nothing ended */
  CTS_ASSERT(!cts_alloc_profile_ended(&p, &b));
  CTS_ASSERT_EQ_INT(alloc(&p, 3, 140, 5, 6, 0), 0); /* the id again: the old block ends */
  CTS_ASSERT(cts_alloc_profile_ended(&p, &b));
  CTS_ASSERT_EQ_U64(b.time_us, 120);
  CTS_ASSERT_EQ_U64(b.length, 3);
  uint64_t n = 0, lengths = 0;
  for (cts_live_cursor_t c = {0}; cts_alloc_profile_next_live(&p, &c, &b); n++) {
    lengths += b.length;
    if (b.time_us == 50) CTS_ASSERT(b.source == 7 && b.samples == 9);
  }
  CTS_ASSERT_EQ_U64(n, 2);
  CTS_ASSERT_EQ_U64(lengths, (1ull << 30) + 5);
  cts_alloc_profile_fini(&p);
}

/* A record holds its time as an offset from the first allocation's, 40 bits: a time before
 * that base wraps around, and must come back whole whether the block is packed (the wrap
 * lands within 2^40) or pooled. */
CTS_TEST(times_before_the_base_come_back_whole) {
  static const uint64_t bases[] = {UINT64_MAX - 10, 1000};
  for (size_t k = 0; k < 2; k++) {
    cts_alloc_profile_t p;
    const cts_alloc_profile_config_t cfg = {0};
    CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
    CTS_ASSERT_EQ_INT(alloc(&p, 1, bases[k], 2, 1, 0), 0); /* the base */
    CTS_ASSERT_EQ_INT(alloc(&p, 2, 5, 3, 4, 1), 0);
    CTS_ASSERT_EQ_U64(p.free_block == UINT32_MAX && p.block_count == 0 ? 0 : 1, k);
    cts_alloc_profile_live_t b;
    uint64_t seen = 0;
    for (cts_live_cursor_t c = {0}; cts_alloc_profile_next_live(&p, &c, &b);) {
      if (b.length != 3) continue;
      seen++;
      CTS_ASSERT(b.time_us == 5 && b.samples == 4 && b.source == 1);
    }
    CTS_ASSERT_EQ_U64(seen, 1);
    CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, 2, 20), 0);
    CTS_ASSERT(cts_alloc_profile_ended(&p, &b));
    CTS_ASSERT_EQ_U64(b.time_us, 5);
    CTS_ASSERT_EQ_U64(p.life_us.max, 15);
    cts_alloc_profile_fini(&p);
  }
}

/* Without stacks the profile keeps the heap's live total and its peak itself, the figures
 * stacks give (node 0 then holds none: that work is what stats and export -f csv skip). */
CTS_TEST(heap_figures_without_stacks) {
  cts_alloc_profile_t with, without;
  const cts_alloc_profile_config_t stacks = {.stacks = true}, none = {0};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&with, &stacks), 0);
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&without, &none), 0);
  uint64_t rng = 7;
  for (uint64_t i = 0; i < 20000; i++) {
    cts_alloc_profile_t *const ps[] = {&with, &without};
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t id = rng >> 52, t = 1000 + i, r = rng >> 33;
    for (int k = 0; k < 2; k++) {
      /* Ids repeat (an id allocated twice ends its block), collects may be unknown, and
       * some blocks are too large or too late for a compact record. */
      if (r % 3 == 0)
        CTS_ASSERT_EQ_INT(event(ps[k], CTS_MT_COLLECT, id, t), 0);
      else
        CTS_ASSERT_EQ_INT(alloc(ps[k], id, i % 1000 == 999 ? t + (1ull << 41) : t,
                                r % 97 == 0 ? 1ull << 30 : 1 + r % 300, 1 + r % 17, r % 4),
                          0);
    }
    CTS_ASSERT_EQ_U64(without.stacks.live_samples, with.stacks.live_samples);
  }
  cts_alloc_profile_finish(&with);
  cts_alloc_profile_finish(&without);
  CTS_ASSERT(with.stacks.peak_samples > with.stacks.live_samples);
  CTS_ASSERT_EQ_U64(without.stacks.live_samples, with.stacks.live_samples);
  CTS_ASSERT_EQ_U64(without.stacks.peak_samples, with.stacks.peak_samples);
  CTS_ASSERT_EQ_U64(without.stacks.peak_time_us, with.stacks.peak_time_us);
  CTS_ASSERT_EQ_U64(without.live_blocks, with.live_blocks);
  CTS_ASSERT_EQ_U64(cts_stacks_self(&with.stacks, 0).allocs, cts_alloc_profile_allocs(&with));
  CTS_ASSERT_EQ_U64(cts_stacks_self(&without.stacks, 0).allocs, 0);
  cts_alloc_profile_fini(&with);
  cts_alloc_profile_fini(&without);
}

/* Long blocks' weights come from a memo by length: through its collisions, the same sums
 * as the formula gives, and a rate set anew (trace info) clears it. */
CTS_TEST(long_blocks_weights) {
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {0};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  for (int k = 0; k < 2; k++) {
    const double rate = k ? 1e-3 : 1e-5;
    const cts_mt_info_t info = {.sample_rate = rate, .word_size = 64};
    cts_alloc_profile_set_info(&p, &info);
    const double before = p.est_allocs_total;
    double want = before;
    uint64_t id = (uint64_t)k << 32, last = 0;
    for (int round = 0; round < 3; round++)
      for (uint64_t len = 200; len < 200 + 3 * CTS_ALLOC_PROFILE_LONG_WEIGHTS; len += 7) {
        const uint64_t l = last = len * (1 + (uint64_t)round * 1000);
        CTS_ASSERT_EQ_INT(alloc(&p, id++, 100, l, 1, 0), 0);
        want += cts_est_clamp(1.0 / cts_block_sample_probability(l, rate));
        CTS_ASSERT(p.est_allocs_total == want);
      }
    CTS_ASSERT_EQ_U64(
        p.long_weights[(last ^ last >> 8) & (CTS_ALLOC_PROFILE_LONG_WEIGHTS - 1u)].length, last);
  }
  cts_alloc_profile_fini(&p);
}

CTS_TEST_MAIN()
