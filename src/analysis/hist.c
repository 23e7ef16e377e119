/* SPDX-License-Identifier: MIT */
#include "hist.h"

#include <math.h>
#include <string.h>

void cts_hist_init(cts_hist_t *h) {
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

uint64_t cts_hist_bucket_low(unsigned b) {
  if (b < CTS_HIST_EXACT) return b;
  const unsigned e = (b - CTS_HIST_EXACT) / CTS_HIST_SUB + 5u;
  const uint64_t mantissa = (b - CTS_HIST_EXACT) % CTS_HIST_SUB;
  return (CTS_HIST_SUB + mantissa) << (e - 4u);
}

uint64_t cts_hist_quantile(const cts_hist_t *h, double p, bool by_samples) {
  const uint64_t *w = by_samples ? h->samples : h->blocks;
  const uint64_t total = by_samples ? h->total_samples : h->total_blocks;
  if (!total) return 0;
  if (p >= 1.0) return h->max;
  if (p <= 0.0) return h->min;
  /* The rank is a whole number of units so that, e.g., the median of {1, 2} is 1. */
  double target = ceil(p * (double)total);
  if (target < 1) target = 1;
  uint64_t cum = 0;
  for (unsigned b = 0; b < CTS_HIST_BUCKETS; b++) {
    cum += w[b];
    if ((double)cum >= target) {
      const uint64_t low = cts_hist_bucket_low(b);
      return low < h->min ? h->min : low;
    }
  }
  return h->max;
}

/* P(X ≤ n) for X ~ Poisson(mu), summed in log space (n ≤ 1000 here). */
static double poisson_cdf(uint64_t n, double mu) {
  if (mu <= 0) return 1.0;
  const double log_mu = log(mu);
  double sum = 0;
  for (uint64_t k = 0; k <= n; k++) sum += exp(-mu + (double)k * log_mu - lgamma((double)k + 1));
  return sum > 1.0 ? 1.0 : sum;
}

/* Solves poisson_cdf(n, mu) = target for mu by bisection (the CDF falls as mu grows). */
static double solve_mu(uint64_t n, double target) {
  double lo = 0, hi = (double)n + 20.0 + 10.0 * sqrt((double)n + 1);
  for (int i = 0; i < 200 && hi - lo > 1e-12 * (hi + 1); i++) {
    const double mid = 0.5 * (lo + hi);
    if (poisson_cdf(n, mid) > target)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

void cts_poisson_ci95(uint64_t n, double *lo, double *hi) {
  const double z = 1.959963984540054;
  if (n > 1000) {
    const double x = (double)n, y = x + 1;
    *lo = x * pow(1 - 1 / (9 * x) - z / (3 * sqrt(x)), 3);
    *hi = y * pow(1 - 1 / (9 * y) + z / (3 * sqrt(y)), 3);
    return;
  }
  /* Garwood: lo solves P(X ≥ n | lo) = 0.025, hi solves P(X ≤ n | hi) = 0.025. */
  *lo = n == 0 ? 0.0 : solve_mu(n - 1, 0.975);
  *hi = solve_mu(n, 0.025);
}

double cts_block_sample_probability(uint64_t length_words, double rate) {
  if (rate >= 1.0) return 1.0;
  return -expm1((double)(length_words + 1) * log1p(-rate));
}

void cts_hist_pow2(const cts_hist_t *h, cts_hist_pow2_t *b) {
  memset(b, 0, sizeof *b);
  for (unsigned i = 0; i < CTS_HIST_BUCKETS; i++) {
    if (!h->blocks[i]) continue;
    const uint64_t low = cts_hist_bucket_low(i);
    const int bin = low ? 64 - __builtin_clzll(low) : 0;
    b->blocks[bin] += h->blocks[i];
    b->samples[bin] += h->samples[i];
  }
  b->lo = CTS_HIST_POW2_BINS;
  b->hi = -1;
  for (int i = 0; i < CTS_HIST_POW2_BINS; i++)
    if (b->blocks[i]) {
      if (i < b->lo) b->lo = i;
      b->hi = i;
    }
}

uint64_t cts_hist_pow2_low(int bin) {
  return bin > 64 ? UINT64_MAX : bin ? 1ull << (bin - 1) : 0; /* 2^64 is beyond the type */
}
