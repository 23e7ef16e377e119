/* SPDX-License-Identifier: MIT */
/* The memtrace diff computation (src/analysis/diff.h) on hand-made site tables: matching
 * by key, scaling, totals, noise, significance and the order of the rows. */
#include <math.h>

#include "../test.h"
#include "analysis/diff.h"

static cts_row_t row(char *key, uint64_t samples, uint64_t allocs, double est_allocs,
                     uint64_t live) {
  return (cts_row_t){
      .function = key,
      .file = "f.ml",
      .key = key,
      .code = 1,
      .st = {.samples = samples, .allocs = allocs, .est_allocs = est_allocs, .live_samples = live}};
}

static bool near(double a, double b) {
  return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b) + 1);
}

CTS_TEST(sites_are_matched_by_key_and_sorted_by_change) {
  char ka[] = "a", kb[] = "b", kc[] = "c", kd[] = "d";
  cts_row_t before_rows[] = {row(ka, 100, 10, 10, 5), row(kb, 50, 5, 5, 0), row(kc, 10, 1, 1, 0)};
  cts_row_t after_rows[] = {row(kc, 10, 1, 1, 0), row(ka, 400, 40, 40, 5), row(kd, 20, 2, 2, 0)};
  const cts_rows_t before = {before_rows, 3, 3}, after = {after_rows, 3, 3};
  const cts_diff_side_t a = {&before, 2.0, false}, b = {&after, 1.0, false};
  cts_diff_t d;
  CTS_ASSERT(cts_diff_sites(&d, &a, &b, CTS_DIFF_ALLOC) == 0);
  CTS_ASSERT(d.n == 4);
  /* a: 200 -> 400 (+200); b: 100 -> gone (-100); d: new 20; c: 20 -> 10 (-10). */
  CTS_ASSERT_STR_EQ(d.rows[0].a->key, "a");
  CTS_ASSERT(d.rows[0].b == &after_rows[1]);
  CTS_ASSERT(near(d.rows[0].va, 200) && near(d.rows[0].vb, 400) && near(d.rows[0].change, 200));
  CTS_ASSERT_STR_EQ(cts_diff_row_site(&d.rows[1])->key, "b");
  CTS_ASSERT(d.rows[1].b == NULL && near(d.rows[1].change, -100));
  CTS_ASSERT(d.rows[2].a == NULL && d.rows[2].b == &after_rows[2] && near(d.rows[2].vb, 20));
  CTS_ASSERT_STR_EQ(cts_diff_row_site(&d.rows[3])->key, "c");
  CTS_ASSERT(near(d.rows[3].change, -10));
  CTS_ASSERT(near(d.total_a, 320) && near(d.total_b, 430));
  /* Unsampled traces: no noise, every change counts. */
  for (size_t i = 0; i < d.n; i++)
    CTS_ASSERT(d.rows[i].sd == 0 && cts_diff_significant(&d.rows[i]));
  cts_diff_fini(&d);
  CTS_ASSERT(d.rows == NULL && d.n == 0);
}

CTS_TEST(sampled_changes_carry_poisson_noise) {
  char ka[] = "a", kb[] = "b";
  cts_row_t before_rows[] = {row(ka, 100, 10, 1000, 0), row(kb, 100, 10, 1000, 0)};
  cts_row_t after_rows[] = {row(ka, 110, 11, 1100, 0), row(kb, 400, 40, 4000, 0)};
  const cts_rows_t before = {before_rows, 2, 2}, after = {after_rows, 2, 2};
  const cts_diff_side_t a = {&before, 8.0, true}, b = {&after, 8.0, true};
  cts_diff_t d;
  CTS_ASSERT(cts_diff_sites(&d, &a, &b, CTS_DIFF_ALLOC) == 0);
  CTS_ASSERT(d.n == 2);
  /* b: 800 -> 3200, sd = 8 sqrt(100 + 400) ≈ 179: significant. */
  CTS_ASSERT_STR_EQ(d.rows[0].a->key, "b");
  CTS_ASSERT(near(d.rows[0].sd, 8.0 * sqrt(500.0)) && cts_diff_significant(&d.rows[0]));
  /* a: 800 -> 880, sd = 8 sqrt(210) ≈ 116: within the noise. */
  CTS_ASSERT(near(d.rows[1].change, 80) && near(d.rows[1].sd, 8.0 * sqrt(210.0)));
  CTS_ASSERT(!cts_diff_significant(&d.rows[1]));
  cts_diff_fini(&d);
  /* Counts: the estimate, with the noise of the sampled allocations scaled like it. */
  CTS_ASSERT(cts_diff_sites(&d, &a, &b, CTS_DIFF_COUNT) == 0);
  CTS_ASSERT_STR_EQ(d.rows[0].a->key, "b");
  CTS_ASSERT(near(d.rows[0].va, 8000) && near(d.rows[0].vb, 32000));
  const double ka_ = 8000.0 / 10, kb_ = 32000.0 / 40;
  CTS_ASSERT(near(d.rows[0].sd, sqrt(10 * ka_ * ka_ + 40 * kb_ * kb_)));
  cts_diff_fini(&d);
}

CTS_TEST(scale_is_bytes_per_sample_per_second_for_flows) {
  cts_alloc_profile_t p = {.word_bytes = 8, .sample_rate = 0.5};
  CTS_ASSERT(near(cts_diff_scale(&p, CTS_DIFF_ALLOC, false, 0), 16));
  CTS_ASSERT(near(cts_diff_scale(&p, CTS_DIFF_ALLOC, true, 4), 4));
  CTS_ASSERT(near(cts_diff_scale(&p, CTS_DIFF_COUNT, true, 4), 0.25));
  CTS_ASSERT(near(cts_diff_scale(&p, CTS_DIFF_LIVE, false, 4), 16));
  CTS_ASSERT(cts_diff_is_flow(CTS_DIFF_ALLOC) && cts_diff_is_flow(CTS_DIFF_COUNT));
  CTS_ASSERT(!cts_diff_is_flow(CTS_DIFF_PEAK) && !cts_diff_is_flow(CTS_DIFF_LIVE));
}

CTS_TEST(empty_tables_make_an_empty_diff) {
  const cts_rows_t none = {0};
  const cts_diff_side_t a = {&none, 1, false}, b = {&none, 1, false};
  cts_diff_t d;
  CTS_ASSERT(cts_diff_sites(&d, &a, &b, CTS_DIFF_LIVE) == 0);
  CTS_ASSERT(d.n == 0 && d.total_a == 0 && d.total_b == 0);
  cts_diff_fini(&d);
}

CTS_TEST_MAIN()
