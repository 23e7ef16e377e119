/* SPDX-License-Identifier: MIT */
/* The histograms' running figures (src/analysis/hist.h): exact minimum, maximum, totals and
 * sum whatever order the values come in, including the extremes of the type, and an empty
 * histogram whose quantiles are 0. */
#include "../../src/analysis/hist.h"

#include "../test.h"

CTS_TEST(empty_histogram_has_no_quantile) {
  cts_hist_t h;
  cts_hist_init(&h);
  CTS_ASSERT_EQ_U64(h.total_blocks, 0);
  for (int s = 0; s < 2; s++) {
    CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 0.0, s), 0);
    CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 0.5, s), 0);
    CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 1.0, s), 0);
  }
}

/* A histogram filled by bucket alone (the report's: cts_hist_add_to_bucket) has the buckets
 * of one filled by cts_hist_add, values across the type's range, and its running figures as
 * cts_hist_init left them. */
CTS_TEST(bucket_only_histogram_has_the_same_buckets) {
  cts_hist_t full, buckets, empty;
  cts_hist_init(&full);
  cts_hist_init(&buckets);
  cts_hist_init(&empty);
  for (uint64_t v = 0, k = 0; k < 2000; k++, v = v * 3 + k % 7) {
    cts_hist_add(&full, v, 1 + k % 5);
    cts_hist_add_to_bucket(&buckets, v, 1 + k % 5);
  }
  cts_hist_add(&full, UINT64_MAX, 2);
  cts_hist_add_to_bucket(&buckets, UINT64_MAX, 2);
  for (unsigned b = 0; b < CTS_HIST_BUCKETS; b++) {
    CTS_ASSERT_EQ_U64(buckets.blocks[b], full.blocks[b]);
    CTS_ASSERT_EQ_U64(buckets.samples[b], full.samples[b]);
  }
  CTS_ASSERT_EQ_U64(buckets.total_blocks, empty.total_blocks);
  CTS_ASSERT_EQ_U64(buckets.total_samples, empty.total_samples);
  CTS_ASSERT_EQ_U64(buckets.min, empty.min);
  CTS_ASSERT_EQ_U64(buckets.max, empty.max);
  CTS_ASSERT(buckets.sum_by_blocks == empty.sum_by_blocks);
}

/* The minimum is exact for any first value: the largest one, a zero after others. */
CTS_TEST(min_and_max_are_exact_in_any_order) {
  static const uint64_t seqs[][5] = {
      {UINT64_MAX, 7, 3, 9, 0},
      {0, UINT64_MAX, 5, 5, 5},
      {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX},
      {40, 33, 1000, 32, 31},
      {5, 4, 3, 2, 1},
  };
  for (size_t k = 0; k < sizeof seqs / sizeof *seqs; k++) {
    cts_hist_t h;
    cts_hist_init(&h);
    uint64_t lo = UINT64_MAX, hi = 0;
    double sum = 0;
    for (size_t i = 0; i < 5; i++) {
      const uint64_t v = seqs[k][i];
      cts_hist_add(&h, v, i + 1);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
      sum += (double)v;
      CTS_ASSERT_MSG(h.min == lo && h.max == hi, "sequence %zu after %zu values", k, i + 1);
    }
    CTS_ASSERT_EQ_U64(h.total_blocks, 5);
    CTS_ASSERT_EQ_U64(h.total_samples, 15);
    CTS_ASSERT(h.sum_by_blocks == sum);
    /* p = 0 and p = 1 answer the exact extremes. */
    CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 0.0, false), lo);
    CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 1.0, true), hi);
  }
}

CTS_TEST_MAIN()
