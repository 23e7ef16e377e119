/* SPDX-License-Identifier: MIT */
/* The profile's sampling weights (alloc_profile.c: a table, a memo and the formula with
 * log1p(-rate) taken once per trace) are 1 / cts_block_sample_probability to the bit: the
 * estimated allocations summed by the profile are those summed here from the formula, in the
 * same order, for lengths in and past the table, at rates from 1 down to where the estimates
 * clamp, and at rates a corrupt trace may declare. */
#include <math.h>
#include <string.h>

#include "../../src/analysis/alloc_profile.h"
#include "../test.h"

/* The estimate of allocations the profile sums for n blocks of lengths 1, 1 + step, …, at
 * rate, against the formula's; both returned through *got and *want. */
static void sums_at(double rate, uint64_t n, uint64_t step, double *got, double *want) {
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {.skip_histograms = true};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  cts_alloc_profile_set_info(&p,
                             &(cts_mt_info_t){.version = 2, .sample_rate = rate, .word_size = 64});
  *want = 0;
  for (uint64_t i = 0; i < n; i++) {
    /* Every length twice, the second from the table or memo. */
    const uint64_t length = 1 + (i / 2) * step;
    const cts_mt_event_t ev = {
        .kind = CTS_MT_ALLOC, .time_us = 1000 + i, .obj_id = i, .length = length, .nsamples = 1};
    CTS_ASSERT_EQ_INT(cts_alloc_profile_add_event(&p, &ev), 0);
    *want += cts_est_clamp(1.0 / cts_block_sample_probability(length, rate));
  }
  *got = p.est_allocs_total;
  cts_alloc_profile_fini(&p);
}

static bool same_bits(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

CTS_TEST(weights_are_the_formulas_to_the_bit) {
  static const double rates[] = {1.0, 0.5, 0.01, 1e-4, 3.3e-6, 1e-12, 1e-300, 5e-324};
  for (size_t k = 0; k < CTS_ARRAY_SIZE(rates); k++)
    for (uint64_t step = 1; step <= 997; step += 996) { /* in the table, then past it */
      double got, want;
      sums_at(rates[k], 4000, step, &got, &want);
      CTS_ASSERT_MSG(same_bits(got, want), "rate %g, step %llu: %.17g, formula %.17g", rates[k],
                     (unsigned long long)step, got, want);
      CTS_ASSERT(got > 0);
    }
}

/* Rates no writer of ours declares (a corrupt or hostile trace): the same as the formula,
 * whatever it gives, NaN and infinities clamped alike. */
CTS_TEST(weights_at_hostile_rates_are_the_formulas) {
  static const double rates[] = {0.0, -0.5, 2.0, NAN, INFINITY, -INFINITY};
  for (size_t k = 0; k < CTS_ARRAY_SIZE(rates); k++) {
    double got, want;
    sums_at(rates[k], 1000, 331, &got, &want);
    CTS_ASSERT_MSG(same_bits(got, want), "rate %g: %.17g, formula %.17g", rates[k], got, want);
  }
}

CTS_TEST_MAIN()
