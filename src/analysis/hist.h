/* SPDX-License-Identifier: MIT */
/* Log-linear histograms of non-negative integers (sizes, lifetimes) with two weights per
 * bucket: sampled blocks and samples, so the same histogram answers "how many blocks" and
 * "how many (estimated) bytes". Values below 32 have exact buckets; above, each power of two
 * is split into 16 buckets, so a bucket's lower edge is within 1/16 (6.25 %) of any value in
 * it. Fixed size (about 16 KiB), whatever the input.
 *
 * Also the estimation helpers every report shares: Poisson confidence intervals for a
 * sample count, and the sampling probability of a block. */
#ifndef CTS_HIST_H
#define CTS_HIST_H

#include <stdbool.h>
#include <stdint.h>

#define CTS_HIST_EXACT   32u /* values below this have a bucket of their own */
#define CTS_HIST_SUB     16u /* buckets per power of two above CTS_HIST_EXACT */
#define CTS_HIST_BUCKETS (CTS_HIST_EXACT + (64u - 5u) * CTS_HIST_SUB)

typedef struct cts_hist {
  uint64_t blocks[CTS_HIST_BUCKETS];
  uint64_t samples[CTS_HIST_BUCKETS];
  uint64_t total_blocks, total_samples;
  uint64_t min, max;    /* exact, over the blocks added; min is UINT64_MAX while empty */
  double sum_by_blocks; /* Σ value, for the mean per block */
} cts_hist_t;

/* Required before the first cts_hist_add (an all-zero histogram would keep min at 0). */
void cts_hist_init(cts_hist_t *h);
/* Inline: called two or three times per event of a trace. */
static inline unsigned cts_hist_bucket(uint64_t value) {
  if (value < CTS_HIST_EXACT) return (unsigned)value;
  const unsigned e = 63u - (unsigned)__builtin_clzll(value); /* ≥ 5 */
  const unsigned mantissa = (unsigned)(value >> (e - 4u)) & (CTS_HIST_SUB - 1u);
  return CTS_HIST_EXACT + (e - 5u) * CTS_HIST_SUB + mantissa;
}

static inline void cts_hist_add(cts_hist_t *h, uint64_t value, uint64_t samples) {
  const unsigned b = cts_hist_bucket(value);
  h->blocks[b]++;
  h->samples[b] += samples;
  /* min starts at UINT64_MAX (cts_hist_init): one compare, not two, per value. */
  if (value < h->min) h->min = value;
  if (value > h->max) h->max = value;
  h->total_blocks++;
  h->total_samples += samples;
  h->sum_by_blocks += (double)value;
}
/* cts_hist_add for a histogram whose buckets alone are read (blocks[] and samples[]): its
 * totals, min, max and sum stay as cts_hist_init left them, and nothing else of it may be
 * read (no quantile, mean or extreme). The rest of cts_hist_add, ~18 instructions of its
 * ~25 (the sum's conversion to double the most), is what a view that prints the buckets
 * alone does not need. */
static inline void cts_hist_add_to_bucket(cts_hist_t *h, uint64_t value, uint64_t samples) {
  const unsigned b = cts_hist_bucket(value);
  h->blocks[b]++;
  h->samples[b] += samples;
}
/* Smallest value that falls in bucket b. */
uint64_t cts_hist_bucket_low(unsigned b);

/* The p-quantile (0 ≤ p ≤ 1) weighted by blocks (by_samples false) or by samples: the lower
 * edge of the first bucket whose cumulative weight reaches p × total (exact below 32, within
 * 1/16 above). 0 for an empty histogram; p = 1 gives the exact maximum. */
uint64_t cts_hist_quantile(const cts_hist_t *h, double p, bool by_samples);

/* Exact 95 % confidence interval (Garwood) for the mean of a Poisson variable observed as
 * n: [*lo, *hi]. For n above 1000 the Wilson-Hilferty approximation is used (relative error
 * below 1e-3 there). */
void cts_poisson_ci95(uint64_t n, double *lo, double *hi);

/* Sample counts below this get their confidence interval printed next to the estimate (the
 * interval is then wider than about ±10 %). */
#define CTS_CI_SHOW_BELOW 400u

/* Probability that Memprof samples a block of length words (plus its header word) at rate
 * λ: 1 - (1 - λ)^(length + 1). Its inverse is the Horvitz-Thompson weight that turns
 * sampled blocks into an unbiased estimate of the number of allocations. */
double cts_block_sample_probability(uint64_t length_words, double rate);

/* A histogram regrouped into power-of-two bins, for display (bars, CSV, images): bin 0
 * holds the value 0, bin k >= 1 holds [2^(k-1), 2^k). lo > hi when the histogram is empty. */
#define CTS_HIST_POW2_BINS 66

typedef struct cts_hist_pow2 {
  uint64_t blocks[CTS_HIST_POW2_BINS], samples[CTS_HIST_POW2_BINS];
  int lo, hi; /* first and last non-empty bins */
} cts_hist_pow2_t;

void cts_hist_pow2(const cts_hist_t *h, cts_hist_pow2_t *out);
/* The lowest value of a bin (UINT64_MAX past the last one). */
uint64_t cts_hist_pow2_low(int bin);

#endif /* CTS_HIST_H */
