/* SPDX-License-Identifier: MIT */
/* The allocation profile's table of live blocks: at most 32 bytes per live block on a
 * trace whose blocks survive (19 without alloc_clock), and the same figures whether a block's
 * record is compact or (huge, far in time, many samples) kept in full. */
#include "../../src/analysis/alloc_profile.h"

#include <string.h>

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

/* 2 M blocks, one in ten dying young, under cfg: the table's records are rec_size bytes,
 * and with the pool's it holds at most max_each bytes a live block. */
static void check_survivors(const cts_alloc_profile_config_t *cfg, size_t rec_size,
                            size_t max_each) {
  cts_alloc_profile_t p;
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, cfg), 0);
  const uint64_t n = 2000000;
  for (uint64_t id = 0; id < n; id++) {
    CTS_ASSERT_EQ_INT(alloc(&p, id, 1000 + id, 1 + id % 300, 2 + id % 300, id % 3), 0);
    /* One block in ten dies young. */
    if (id % 10 == 9) CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, id - 3, 1000 + id), 0);
  }
  CTS_ASSERT_EQ_U64(p.live_blocks, n - n / 10);
  const size_t bytes = p.live.bytes + (size_t)p.block_cap * 40u;
  CTS_ASSERT_MSG(bytes <= p.live_blocks * max_each, "%zu bytes for %" PRIu64 " live blocks", bytes,
                 p.live_blocks);
  CTS_ASSERT_EQ_U64(p.live.rec_size, rec_size);
  cts_alloc_profile_fini(&p);
}

/* stats' configuration keeps each block's alloc_clock (lifetimes in samples): 24 bytes. */
CTS_TEST(survivors_cost_at_most_32_bytes_each) {
  check_survivors(&(cts_alloc_profile_config_t){0}, 24, 32);
}

/* The records without alloc_clock (16 bytes, for views that never print lifetimes in
 * samples: report, diff, top, leaks, export): at most 16 * 8/7 bytes a block in dense
 * chunks, plus headers (with 24-byte records, 26.9 a block here). */
CTS_TEST(survivors_cost_at_most_19_bytes_each_without_lifetimes_in_samples) {
  check_survivors(&(cts_alloc_profile_config_t){.skip_life_samples = true}, 16, 19);
  check_survivors(&(cts_alloc_profile_config_t){.skip_histograms = true}, 16, 19);
}

/* Runs the same events with the block of id 5 ordinary or one of the kinds kept in full;
 * every figure but that block's own must agree. clock: records with alloc_clock (24 bytes,
 * lifetimes in samples kept) or without (16). */
static void run(cts_alloc_profile_t *p, uint64_t t5, uint64_t len5, uint64_t samples5, bool clock) {
  const cts_alloc_profile_config_t cfg = {.skip_life_samples = !clock};
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
             {105, 4, (1ull << 24) - 1, false},
             {105, 4, 1ull << 24, true},
             {105, 4, UINT32_MAX, true},
             {105, 4, 1ull << 32, true}};
  for (size_t k = 0; k < 2 * sizeof odd / sizeof odd[0]; k++) {
    const bool clock = k % 2;
    cts_alloc_profile_t p;
    run(&p, odd[k / 2].t, odd[k / 2].len, odd[k / 2].samples, clock);
    CTS_ASSERT_EQ_U64(p.live_blocks, 9);
    CTS_ASSERT_EQ_U64(p.promoted_allocs, 1);
    CTS_ASSERT_EQ_U64(p.promoted_samples, odd[k / 2].samples);
    CTS_ASSERT_EQ_U64(p.unknown_promotes, 1);
    CTS_ASSERT_EQ_U64(p.unknown_collects, 1);
    CTS_ASSERT_EQ_U64(p.collected_major_samples, odd[k / 2].samples);
    CTS_ASSERT_EQ_U64(p.collected_allocs, 1);
    CTS_ASSERT_EQ_U64(p.life_us.total_blocks, 1);
    /* Lifetime in samples: the other blocks' 4 samples allocated after it (ids 6-9). */
    CTS_ASSERT_EQ_U64(p.life_samples.total_blocks, clock ? 1 : 0);
    if (clock) CTS_ASSERT(p.life_samples.min == 4 && p.life_samples.max == 4);
    CTS_ASSERT_EQ_U64(p.free_block == UINT32_MAX ? 0 : 1, odd[k / 2].pooled ? 1 : 0);
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

/* While live_at_end defers the nodes' live figures, no ended block is kept (its copy on every
 * collection served no view that defers); once the deferral ends (a rate below 1), it is
 * kept again. */
CTS_TEST(ended_blocks_while_deferred) {
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {
      .stacks = true, .skip_histograms = true, .no_node_peaks = true, .live_at_end = true};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  const cts_mt_info_t one = {.sample_rate = 1.0, .word_size = 64};
  cts_alloc_profile_set_info(&p, &one);
  CTS_ASSERT(p.live_at_end);
  cts_alloc_profile_live_t b;
  CTS_ASSERT_EQ_INT(alloc(&p, 1, 100, 7, 8, 1), 0);
  CTS_ASSERT_EQ_INT(alloc(&p, 2, 110, 3, 4, 1), 0);
  CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, 1, 130), 0);
  CTS_ASSERT(!cts_alloc_profile_ended(&p, &b));
  CTS_ASSERT_EQ_INT(alloc(&p, 2, 140, 5, 6, 0), 0); /* the id again */
  CTS_ASSERT(!cts_alloc_profile_ended(&p, &b));
  CTS_ASSERT_EQ_U64(p.collected_allocs, 1);
  CTS_ASSERT_EQ_U64(p.live_blocks, 1);
  const cts_mt_info_t low = {.sample_rate = 0.5, .word_size = 64};
  cts_alloc_profile_set_info(&p, &low);
  CTS_ASSERT(!p.live_at_end);
  CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, 2, 150), 0);
  CTS_ASSERT(cts_alloc_profile_ended(&p, &b));
  CTS_ASSERT_EQ_U64(b.time_us, 140);
  CTS_ASSERT_EQ_U64(b.length, 5);
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

/* cfg.live_at_end: the nodes' live figures are made by cts_alloc_profile_finish from the
 * blocks still live, and must equal those kept on every event, bit for bit (at rate 1). A
 * mix of stacks, blocks that die and survive, one pooled, one id allocated twice. */
static void run_stacks(cts_alloc_profile_t *p, bool at_end, double rate, double rate2,
                       bool finish) {
  const cts_alloc_profile_config_t cfg = {.stacks = true,
                                          .history = true,
                                          .skip_histograms = true,
                                          .no_node_peaks = true,
                                          .live_at_end = at_end};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(p, &cfg), 0);
  const cts_mt_info_t info = {.sample_rate = rate, .word_size = 64, .start_time_us = 10};
  cts_alloc_profile_set_info(p, &info);
  uint64_t x = 42;
  for (uint64_t id = 0; id < 5000; id++) {
    if (id == 2500 && rate2 > 0) { /* a trace that changes its rate (a second info) */
      const cts_mt_info_t again = {.sample_rate = rate2, .word_size = 64, .start_time_us = 10};
      cts_alloc_profile_set_info(p, &again);
    }
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t bt[3] = {1, 2 + (x >> 60) % 3, 10 + (x >> 50) % 7};
    const cts_mt_event_t ev = {.kind = CTS_MT_ALLOC,
                               .source = CTS_MT_SOURCE_MAJOR,
                               .time_us = 100 + id,
                               .obj_id = id == 4000 ? 17 : id, /* 17 twice, while live */
                               .length = id == 7 ? 1ull << 30 : 1 + (x >> 40) % 40,
                               .nsamples = 1 + (x >> 30) % 9,
                               .backtrace_len = 3,
                               .backtrace = bt};
    CTS_ASSERT_EQ_INT(cts_alloc_profile_add_event(p, &ev), 0);
    if ((x >> 20) % 3) /* two blocks in three die, some long after */
      CTS_ASSERT_EQ_INT(event(p, CTS_MT_COLLECT, (x >> 8) % (id + 1), 100 + id), 0);
  }
  if (finish) cts_alloc_profile_finish(p);
}

CTS_TEST(live_at_end_gives_the_running_figures) {
  /* Rate 1; 0.01; 1 then 0.01 from halfway, where the deferral ends (the figures settled
   * then, and running from there). */
  static const double rates[] = {1.0, 0.01, 1.0}, rates2[] = {0, 0, 0.01};
  for (size_t k = 0; k < 3; k++) {
    cts_alloc_profile_t a, b;
    run_stacks(&a, false, rates[k], rates2[k], true);
    run_stacks(&b, true, rates[k], rates2[k], false);
    const cts_stacks_t *sa = &a.stacks, *sb = &b.stacks;
    CTS_ASSERT_EQ_U64(sa->count, sb->count);
    /* Deferred only at rate 1: before finishing, no node holds a live figure. */
    const bool deferred = rates[k] >= 1.0 && !rates2[k];
    CTS_ASSERT(b.live_at_end == deferred);
    uint64_t live_before = 0;
    for (uint32_t i = 0; i < sb->count; i++) live_before += cts_stacks_self(sb, i).live_allocs;
    if (deferred)
      CTS_ASSERT_EQ_U64(live_before, 0);
    else
      CTS_ASSERT_EQ_U64(live_before, b.live_blocks);
    cts_alloc_profile_finish(&b);
    CTS_ASSERT(!b.live_at_end);
    CTS_ASSERT(b.live_blocks > 100 && b.live_blocks < 4000);
    CTS_ASSERT_EQ_U64(sa->live_samples, sb->live_samples);
    CTS_ASSERT_EQ_U64(sa->peak_samples, sb->peak_samples);
    CTS_ASSERT_EQ_U64(sa->peak_time_us, sb->peak_time_us);
    for (uint32_t i = 0; i < sa->count; i++) {
      const cts_site_stats_t fa = cts_stacks_self(sa, i), fb = cts_stacks_self(sb, i);
      CTS_ASSERT_MSG(memcmp(&fa, &fb, sizeof fa) == 0, "node %u, rate %g", i, rates[k]);
    }
    CTS_ASSERT_EQ_U64(sa->site_count, sb->site_count);
    for (uint32_t i = 0; i < sa->site_count; i++) {
      CTS_ASSERT_EQ_U64(sa->sites[i].live_samples, sb->sites[i].live_samples);
      CTS_ASSERT_EQ_U64(sa->sites[i].checkpoints_done, sb->sites[i].checkpoints_done);
      for (uint32_t c = 0; c < sa->sites[i].checkpoints_done; c++)
        CTS_ASSERT_EQ_U64(sa->sites[i].history[c], sb->sites[i].history[c]);
    }
    cts_alloc_profile_fini(&a);
    cts_alloc_profile_fini(&b);
  }
}

CTS_TEST_MAIN()

/* The blocks live now a batch at a time give what one at a time gives, in the same order,
 * with batches of any size and the two calls mixed: over dense chunks (ids in a row), sparse
 * ones (most of their blocks collected, with tombstones), and pooled blocks. */
CTS_TEST(live_blocks_by_batch_are_those_one_at_a_time) {
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {.skip_histograms = true};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  const uint64_t n = 6u * CTS_LIVE_CHUNK + 123u;
  for (uint64_t id = 0; id < n; id++) {
    /* Every 1000th block pooled (too large for a compact record). */
    const uint64_t length = id % 1000 == 7 ? 1ull << 30 : 1 + id % 57;
    CTS_ASSERT_EQ_INT(alloc(&p, id, 1000 + id, length, 1 + id % 5, id % 3), 0);
  }
  /* The first two chunks mostly collected (sparse), a few blocks of a dense one. */
  for (uint64_t id = 0; id < 2u * CTS_LIVE_CHUNK; id++)
    if (id % 9 != 0) CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, id, 90000 + id), 0);
  for (uint64_t id = 3u * CTS_LIVE_CHUNK; id < 3u * CTS_LIVE_CHUNK + 200u; id += 3)
    CTS_ASSERT_EQ_INT(event(&p, CTS_MT_COLLECT, id, 99000 + id), 0);
  CTS_ASSERT(p.live.sparse_chunks > 0 && p.live.dense_chunks > 0);
  static cts_alloc_profile_live_t one[7u * CTS_LIVE_CHUNK], got[7u * CTS_LIVE_CHUNK];
  size_t count = 0;
  for (cts_live_cursor_t c = {0}; cts_alloc_profile_next_live(&p, &c, &one[count]);) count++;
  CTS_ASSERT_EQ_U64(count, p.live_blocks);
  static const size_t sizes[] = {1, 2, 63, 64, 65, 1000, 4096, 100000};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t at = 0, step = 0, got_n;
    cts_live_cursor_t c = {0};
    for (;; step++) {
      /* Every third step one block alone, through the one-at-a-time call. */
      if (step % 3 == 2) {
        if (!cts_alloc_profile_next_live(&p, &c, &got[at])) break;
        at++;
        continue;
      }
      got_n = cts_alloc_profile_next_lives(&p, &c, &got[at], sizes[k]);
      if (!got_n) break;
      CTS_ASSERT(got_n <= sizes[k]);
      at += got_n;
    }
    CTS_ASSERT_EQ_U64(at, count);
    for (size_t i = 0; i < count; i++)
      CTS_ASSERT_MSG(one[i].time_us == got[i].time_us && one[i].length == got[i].length &&
                         one[i].samples == got[i].samples && one[i].node == got[i].node &&
                         one[i].source == got[i].source,
                     "batches of %zu: block %zu differs", sizes[k], i);
    CTS_ASSERT_EQ_U64(cts_alloc_profile_next_lives(&p, &c, got, 8), 0);
  }
  cts_alloc_profile_fini(&p);
}
