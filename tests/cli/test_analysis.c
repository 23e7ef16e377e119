/* SPDX-License-Identifier: MIT */
/* The analysis commands (top, leaks, stats, export) against a deterministic trace whose
 * truth is known (analysis_trace.h, computed by brute force here), the estimation helpers
 * against published values, the lazy live-at-peak bookkeeping against a brute-force replay,
 * and the text outputs against golden files (tests/cli/golden/analysis; regenerate with
 * CTS_UPDATE_GOLDEN=1 after checking the differences by hand). */
#include <math.h>
#include <sys/stat.h>

#include "../../src/analysis/hist.h"
#include "../../src/common/compiler.h"
#include "../../src/analysis/sites.h"
#include "../../src/analysis/u64map.h"
#include "../run_json.h"
#include "../test.h"
#include "analysis_trace.h"
#include "corpus_files.h"

#ifndef CTS_GOLDEN_DIR
#define CTS_GOLDEN_DIR "tests/cli/golden/analysis"
#endif

static char tmpdir[256];
static char trace1[320], trace_low[320]; /* rate 1, rate 0.01 */
static at_trace_t tr1, tr_low;

static bool setup(void) {
  if (tmpdir[0]) return true;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cts-analysis-XXXXXX");
  if (!mkdtemp(tmpdir)) return false;
  snprintf(trace1, sizeof trace1, "%s/analysis.ctf", tmpdir);
  snprintf(trace_low, sizeof trace_low, "%s/analysis-low.ctf", tmpdir);
  at_build(&tr1, 1.0);
  at_build(&tr_low, 0.01);
  return at_write(&tr1, trace1) == 0 && at_write(&tr_low, trace_low) == 0;
}

/* ---- estimation helpers --------------------------------------------------------------- */

CTS_TEST(poisson_ci_matches_published_garwood_values) {
  /* Exact 95 % limits for a Poisson count (Garwood 1936), as tabulated (e.g. Ulm 1990) and
   * recomputed independently by summing the Poisson distribution in Python. */
  static const struct {
    uint64_t n;
    double lo, hi;
  } known[] = {{0, 0.0, 3.6889},     {1, 0.0253, 5.5716},   {2, 0.2422, 7.2247},
               {5, 1.6235, 11.6683}, {10, 4.7954, 18.3904}, {100, 81.3640, 121.6268}};
  for (size_t i = 0; i < CTS_ARRAY_SIZE(known); i++) {
    double lo, hi;
    cts_poisson_ci95(known[i].n, &lo, &hi);
    CTS_ASSERT_MSG(fabs(lo - known[i].lo) < 1e-3 && fabs(hi - known[i].hi) < 1e-3,
                   "n=%llu: [%.4f, %.4f], want [%.4f, %.4f]", (unsigned long long)known[i].n, lo,
                   hi, known[i].lo, known[i].hi);
  }
  /* The large-count approximation joins the exact values smoothly. */
  double lo1, hi1, lo2, hi2;
  cts_poisson_ci95(1000, &lo1, &hi1);
  cts_poisson_ci95(1001, &lo2, &hi2);
  CTS_ASSERT(lo2 > lo1 && hi2 > hi1 && lo2 - lo1 < 1.1 && hi2 - hi1 < 1.1);
  CTS_ASSERT(fabs(lo1 - 938.97) < 0.01 && fabs(hi1 - 1063.95) < 0.01);
}

CTS_TEST(histogram_buckets_and_quantiles) {
  for (uint64_t v = 0; v < 100000; v = v < 64 ? v + 1 : v * 3 / 2 + 7) {
    const unsigned b = cts_hist_bucket(v);
    const uint64_t low = cts_hist_bucket_low(b);
    CTS_ASSERT_MSG(low <= v && (v < 32 ? low == v : (double)(v - low) < (double)v / 16.0 + 1e-9),
                   "value %llu in bucket %u with low %llu", (unsigned long long)v, b,
                   (unsigned long long)low);
    CTS_ASSERT(b + 1 >= CTS_HIST_BUCKETS || cts_hist_bucket_low(b + 1) > v);
  }
  CTS_ASSERT_EQ_U64(cts_hist_bucket_low(cts_hist_bucket(UINT64_MAX)) >> 59, 31);
  cts_hist_t h;
  cts_hist_init(&h);
  for (uint64_t v = 1; v <= 10; v++) cts_hist_add(&h, v, v); /* weights 1..10 */
  CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 0.5, false), 5);
  CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 0.9, false), 9);
  CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 1.0, false), 10);
  /* by weight: total 55, half is 27.5 → 28th unit → value 7 (1+..+7 = 28) */
  CTS_ASSERT_EQ_U64(cts_hist_quantile(&h, 0.5, true), 7);
  CTS_ASSERT_EQ_U64(h.min, 1);
  CTS_ASSERT(fabs(cts_block_sample_probability(0, 0.5) - 0.5) < 1e-12);
  CTS_ASSERT(fabs(cts_block_sample_probability(1, 0.5) - 0.75) < 1e-12);
  CTS_ASSERT(cts_block_sample_probability(1000, 1.0) == 1.0);
}

/* stats --svg and --png, on a memory trace and on a task trace: the SVG is a well-formed
 * image with every panel, and the PNG is that image rendered (same size, per its IHDR). */
static bool check_png(const char *png_path, unsigned long want_h);

static bool check_images(const char *svg_path, const char *png_path, const char *panel,
                         unsigned long *height) {
  FILE *f = fopen(svg_path, "rb");
  if (!f) return false;
  static char svg[1 << 20];
  const size_t n = fread(svg, 1, sizeof svg - 1, f);
  fclose(f);
  svg[n] = '\0';
  const char *h = strstr(svg, "height=\"");
  if (strncmp(svg, "<?xml", 5) != 0 || !strstr(svg, "</svg>") || !strstr(svg, panel) || !h) {
    fprintf(stderr, "  %s: not the expected SVG image\n", svg_path);
    return false;
  }
  *height = strtoul(h + 8, NULL, 10);
  return check_png(png_path, *height);
}

static bool check_png(const char *png_path, unsigned long want_h) {
  uint8_t png[33];
  FILE *f;
  f = fopen(png_path, "rb");
  const bool got = f && fread(png, 1, sizeof png, f) == sizeof png;
  if (f) fclose(f);
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (!got || memcmp(png, sig, 8) != 0 || memcmp(png + 12, "IHDR", 4) != 0) {
    fprintf(stderr, "  %s: not a PNG image\n", png_path);
    return false;
  }
  const unsigned long w = (unsigned long)png[16] << 24 | png[17] << 16 | png[18] << 8 | png[19];
  const unsigned long ht = (unsigned long)png[20] << 24 | png[21] << 16 | png[22] << 8 | png[23];
  if (w != 900 || ht != want_h) {
    fprintf(stderr, "  %s: %lux%lu, the SVG image is 900x%lu\n", png_path, w, ht, want_h);
    return false;
  }
  return true;
}

CTS_TEST(stats_writes_svg_and_png_images) {
  CTS_ASSERT(setup());
  char svg[300], png[300], tasks[4096];
  snprintf(svg, sizeof svg, "%s/stats.svg", tmpdir);
  snprintf(png, sizeof png, "%s/stats.png", tmpdir);
  char *argv[] = {CTS_TEST_CTFSCOPE, "stats", "--svg", svg, "--png", png, trace1, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
  CTS_ASSERT_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  unsigned long height, task_height;
  CTS_ASSERT(check_images(svg, png, "Block sizes", &height));
  run_result_free(&r);
  snprintf(tasks, sizeof tasks, "%s/tasks/known.ctf", cts_test_data_dir());
  remove(png);
  char *targv[] = {CTS_TEST_CTFSCOPE, "stats", "--svg", svg, "--png", png, tasks, NULL};
  CTS_ASSERT(run_cmd(targv, NULL, 60, &r));
  CTS_ASSERT_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  CTS_ASSERT(check_images(svg, png, "created -&gt; resolved", &task_height));
  run_result_free(&r);
  /* A PNG alone (the SVG goes through a temporary file), and a PNG that cannot be written. */
  remove(png);
  char *pargv[] = {CTS_TEST_CTFSCOPE, "stats", "--png", png, trace1, NULL};
  CTS_ASSERT(run_cmd(pargv, NULL, 60, &r));
  CTS_ASSERT_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  CTS_ASSERT(check_png(png, height));
  run_result_free(&r);
  char *bargv[] = {CTS_TEST_CTFSCOPE, "stats", "--png", "/nonexistent-dir/x.png", trace1, NULL};
  CTS_ASSERT(run_cmd(bargv, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 3);
  CTS_ASSERT_MSG(strstr(r.err, "cannot create '/nonexistent-dir/x.png'"), "%s", r.err);
  run_result_free(&r);
}

/* The live-block id map (a ring for young ids, a hash map for survivors) behaves exactly like
 * a plain map, whatever the ids: monotone with young deaths and survivors (the usual trace),
 * duplicates, ids that go backwards, far apart, 0 and UINT64_MAX. */
CTS_TEST(idmap_matches_a_plain_map) {
  cts_idmap_t m;
  cts_u64map_t model;
  CTS_ASSERT_EQ_INT(cts_idmap_init(&m), 0);
  cts_u64map_init(&model);
  uint64_t rng = 12345, next_id = 0;
  uint64_t live[4096];
  size_t nlive = 0;
  for (unsigned step = 0; step < 400000; step++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned r = (unsigned)(rng >> 33) % 100;
    uint64_t id;
    if (r < 55) {
      id = next_id++; /* a new allocation */
    } else if (r < 57) {
      id = (rng >> 7) % (next_id + 1); /* an old or duplicate id */
    } else if (r < 58) {
      static const uint64_t odd[] = {
          0, 1, UINT64_MAX, UINT64_MAX - 1, CTS_IDMAP_RING, (uint64_t)CTS_IDMAP_RING << 20};
      id = odd[(rng >> 13) % 6];
    } else if (nlive > 0) {
      /* Free a live one: mostly young, sometimes an old survivor. */
      const size_t k = r < 95 ? nlive - 1 - (size_t)((rng >> 17) % (nlive < 8 ? nlive : 8))
                              : (size_t)((rng >> 17) % nlive);
      id = live[k];
      live[k] = live[--nlive];
      uint64_t got = 0, want = 0;
      const bool in_model = cts_u64map_take(&model, id, &want);
      const bool in_map = cts_idmap_take(&m, id, &got);
      CTS_ASSERT_MSG(in_model == in_map && got == want, "take %llu at step %u",
                     (unsigned long long)id, step);
      continue;
    } else {
      continue;
    }
    bool added_model, added_map;
    uint64_t *a = cts_u64map_insert(&model, id, step, &added_model);
    uint64_t *b = cts_idmap_insert(&m, id, step, &added_map);
    CTS_ASSERT(a && b);
    CTS_ASSERT_MSG(added_model == added_map && *a == *b, "insert %llu at step %u",
                   (unsigned long long)id, step);
    if (added_model && nlive < CTS_ARRAY_SIZE(live)) live[nlive++] = id;
    const uint64_t *f = cts_idmap_find(&m, id);
    CTS_ASSERT(f && *f == *a);
  }
  CTS_ASSERT_EQ_U64(m.count, model.count + (model.has_zero ? 1 : 0));
  /* Everything the model holds is found, with its value. */
  uint64_t key, val;
  size_t found = 0;
  for (size_t pos = 0; cts_u64map_next(&model, &pos, &key, &val); found++) {
    const uint64_t *f = cts_idmap_find(&m, key);
    CTS_ASSERT_MSG(f && *f == val, "id %llu lost", (unsigned long long)key);
  }
  CTS_ASSERT_EQ_U64(found, m.count);
  CTS_ASSERT(m.old.count > 0); /* survivors did move out of the ring */
  cts_idmap_fini(&m);
  cts_u64map_fini(&model);
}

/* The lazy live-at-peak snapshot equals a brute-force copy of every node at each new peak. */
CTS_TEST(live_at_peak_matches_brute_force) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, true, 0), 0);
  enum { NODES_MAX = 128, LIVE_MAX = 4096 }; /* 1 + 3 + 12 + 60 stacks */
  uint64_t state = 12345;
  uint32_t live_node[LIVE_MAX];
  uint64_t live_samples[LIVE_MAX];
  size_t nlive = 0;
  uint64_t brute_live[NODES_MAX] = {0}, brute_peak[NODES_MAX] = {0}, total = 0, peak = 0;
  for (int step = 0; step < 20000; step++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned r = (unsigned)(state >> 33);
    if (nlive < LIVE_MAX && (nlive == 0 || r % 100 < 52)) {
      const uint64_t bt[3] = {1 + r % 3, 10 + (r >> 4) % 4, 100 + (r >> 8) % 5};
      uint32_t node;
      CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 1 + (r >> 12) % 3, &node), 0);
      CTS_ASSERT(node < NODES_MAX);
      const uint64_t samples = 1 + (r >> 16) % 7;
      cts_stacks_advance_time(&s, (uint64_t)step * 10);
      cts_stacks_alloc(&s, node, samples, 1.0, (uint64_t)step * 10);
      live_node[nlive] = node;
      live_samples[nlive++] = samples;
      brute_live[node] += samples;
      total += samples;
      if (total > peak) {
        peak = total;
        memcpy(brute_peak, brute_live, sizeof brute_peak);
      }
    } else {
      const size_t k = (r >> 3) % nlive;
      cts_stacks_advance_time(&s, (uint64_t)step * 10);
      cts_stacks_free(&s, live_node[k], live_samples[k], 1.0);
      brute_live[live_node[k]] -= live_samples[k];
      total -= live_samples[k];
      live_node[k] = live_node[nlive - 1];
      live_samples[k] = live_samples[--nlive];
    }
  }
  cts_stacks_finish(&s);
  CTS_ASSERT_EQ_U64(s.peak_samples, peak);
  CTS_ASSERT_EQ_U64(s.live_samples, total);
  for (uint32_t i = 0; i < s.count; i++) {
    CTS_ASSERT_EQ_U64(cts_stacks_self(&s, i).peak_samples, brute_peak[i]);
    CTS_ASSERT_EQ_U64(cts_stacks_self(&s, i).live_samples, brute_live[i]);
  }
  /* Inclusive figures sum the subtree: the root holds everything. */
  cts_site_stats_t *incl = malloc(s.count * sizeof *incl);
  cts_stacks_inclusive(&s, incl);
  CTS_ASSERT_EQ_U64(incl[0].live_samples, total);
  CTS_ASSERT_EQ_U64(incl[0].peak_samples, peak);
  free(incl);
  cts_stacks_fini(&s);
}

/* Site history: a site growing by one sample per 1000 µs reads back at any time within the
 * checkpoint spacing. */
CTS_TEST(site_history_tracks_growth) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, true, 1000000), 0);
  const uint64_t bt[2] = {7, 8};
  uint32_t node = 0;
  const uint64_t n = 5000, step = 1000;
  for (uint64_t i = 1; i <= n; i++) {
    cts_stacks_advance_time(&s, 1000000 + i * step);
    CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 2, &node), 0);
    cts_stacks_alloc(&s, node, 1, 1.0, 1000000 + i * step);
  }
  cts_stacks_finish(&s);
  const uint64_t end = 1000000 + n * step;
  CTS_ASSERT_EQ_U64(cts_site_live_at(&s, cts_stacks_site(&s, node), end, end), n);
  for (uint64_t q = 1; q <= 3; q++) {
    const uint64_t t = 1000000 + n * step * q / 4;
    const uint64_t v = cts_site_live_at(&s, cts_stacks_site(&s, node), t, end);
    const uint64_t truth = n * q / 4;  /* live samples at t */
    const uint64_t slack = n / 32 + 1; /* resolution: 1/32 of the duration */
    CTS_ASSERT_MSG(v <= truth && v + slack >= truth, "quarter %llu: %llu, truth %llu",
                   (unsigned long long)q, (unsigned long long)v, (unsigned long long)truth);
  }
  cts_stacks_fini(&s);
}

/* ---- commands against the known truth ------------------------------------------------- */

CTS_TEST(top_json_matches_truth) {
  CTS_ASSERT(setup());
  at_truth_t truth;
  at_truth(&tr1, &truth);
  char *argv[] = {CTS_TEST_CTFSCOPE, "top", "--json", "-n", "0", trace1, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json(argv, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "total.alloc_bytes"), truth.total_samples * 8);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "total.peak_bytes"), truth.peak_total * 8);
  CTS_ASSERT(fabs(json_flat_num(&j, "total.peak_time_s") - (double)truth.peak_t * 1e-6) < 1e-9);
  CTS_ASSERT(fabs(json_flat_num(&j, "duration_s") - (double)truth.end_t * 1e-6) < 1e-9);
  CTS_ASSERT(json_flat_get(&j, "total.alloc_bytes_ci95") == NULL); /* rate 1: exact */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sites_total"), NSITES);
  for (int s = 0; s < NSITES; s++) {
    const int i = json_flat_find(&j, "sites", "function", at_site_function[s], 100);
    CTS_ASSERT_MSG(i >= 0, "site %s missing", at_site_function[s]);
    char p[128];
#define SITE_NUM(field) (snprintf(p, sizeof p, "sites[%d]." field, i), json_flat_num(&j, p))
    CTS_ASSERT_EQ_U64(SITE_NUM("alloc_bytes"), truth.samples[s] * 8);
    CTS_ASSERT_EQ_U64(SITE_NUM("allocs_sampled"), truth.allocs[s]);
    CTS_ASSERT(fabs(SITE_NUM("allocs_est") - (double)truth.allocs[s]) < 1e-6);
    CTS_ASSERT_EQ_U64(SITE_NUM("live_end_bytes"), truth.live_end[s] * 8);
    CTS_ASSERT_EQ_U64(SITE_NUM("peak_bytes"), truth.peak_live[s] * 8);
    CTS_ASSERT_EQ_U64(SITE_NUM("line"), at_site_line[s]);
    snprintf(p, sizeof p, "sites[%d].file", i);
    CTS_ASSERT_STR_EQ(json_flat_str(&j, p), at_site_file[s]);
#undef SITE_NUM
  }
  /* Sorted by allocated bytes: BIG (2050 samples) first. */
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[0].function"), "Big.alloc");
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(top_views_sum_to_the_total) {
  CTS_ASSERT(setup());
  at_truth_t truth;
  at_truth(&tr1, &truth);
  static const char *const views[][2] = {{"--tree", "tree"}, {"--inverted", "inverted"}};
  for (size_t v = 0; v < 2; v++) {
    char *argv[] = {CTS_TEST_CTFSCOPE, "top", "--json", (char *)views[v][0],
                    "--min-percent",   "0",   trace1,   NULL};
    run_result_t r;
    json_flat_t j;
    CTS_ASSERT(run_json(argv, &j, &r));
    CTS_ASSERT_STR_EQ(json_flat_str(&j, "view"), views[v][1]);
    CTS_ASSERT_STR_EQ(json_flat_str(&j, "nodes[0].frame"), "(all)");
    CTS_ASSERT_EQ_U64(json_flat_num(&j, "nodes[0].alloc_bytes"), truth.total_samples * 8);
    /* The root's children partition it. */
    double sum = 0;
    for (int i = 1; i < 200; i++) {
      char p[64];
      snprintf(p, sizeof p, "nodes[%d].depth", i);
      if (!json_flat_get(&j, p)) break;
      if (json_flat_num(&j, p) != 1) continue;
      snprintf(p, sizeof p, "nodes[%d].alloc_bytes", i);
      sum += json_flat_num(&j, p);
    }
    CTS_ASSERT_EQ_U64(sum, truth.total_samples * 8);
    json_flat_free(&j);
    run_result_free(&r);
  }
}

CTS_TEST(top_low_rate_shows_poisson_intervals) {
  CTS_ASSERT(setup());
  at_truth_t truth;
  at_truth(&tr_low, &truth);
  char *argv[] = {CTS_TEST_CTFSCOPE, "top", "--json", "-n", "0", trace_low, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json(argv, &j, &r));
  const double bps = 8 / 0.01;
  CTS_ASSERT(fabs(json_flat_num(&j, "bytes_per_sample") - bps) < 1e-9);
  for (int s = 0; s < NSITES; s++) {
    const int i = json_flat_find(&j, "sites", "function", at_site_function[s], 100);
    CTS_ASSERT(i >= 0);
    char p[128];
    snprintf(p, sizeof p, "sites[%d].alloc_bytes", i);
    CTS_ASSERT(fabs(json_flat_num(&j, p) - (double)truth.samples[s] * bps) < 0.5);
    double lo, hi;
    cts_poisson_ci95(truth.samples[s], &lo, &hi);
    snprintf(p, sizeof p, "sites[%d].alloc_bytes_ci95[0]", i);
    CTS_ASSERT(fabs(json_flat_num(&j, p) - lo * bps) < 0.5 + 1e-6 * lo * bps);
    snprintf(p, sizeof p, "sites[%d].alloc_bytes_ci95[1]", i);
    CTS_ASSERT(fabs(json_flat_num(&j, p) - hi * bps) < 0.5 + 1e-6 * hi * bps);
    /* Estimated allocations: Σ 1 / (1 - (1 - λ)^(len + 1)) */
    const uint64_t len = s == SITE_TEMP   ? 3
                         : s == SITE_LEAK ? 7
                         : s == SITE_BIG  ? 1024
                         : s == SITE_PROM ? 5
                                          : 99;
    snprintf(p, sizeof p, "sites[%d].allocs_est", i);
    const double want = (double)truth.allocs[s] / (1 - pow(0.99, (double)(len + 1)));
    CTS_ASSERT_MSG(fabs(json_flat_num(&j, p) - want) < 0.06, "%s: allocs_est %f, want %f",
                   at_site_function[s], json_flat_num(&j, p), want);
  }
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(leaks_json_matches_truth) {
  CTS_ASSERT(setup());
  at_truth_t truth;
  at_truth(&tr1, &truth);
  char *argv[] = {CTS_TEST_CTFSCOPE, "leaks", "--json", "-n", "0", trace1, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json(argv, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sites_total"),
                    2); /* only LEAK and BIG are live at the end */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "live_end.live_bytes"),
                    (truth.live_end[SITE_LEAK] + truth.live_end[SITE_BIG]) * 8);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[0].function"), "Big.alloc");
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[1].function"), "Leak.add");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sites[1].live_end_bytes"), truth.live_end[SITE_LEAK] * 8);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sites[1].live_end_allocs_sampled"), 40);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[1].growth"), "grows");
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[1].backtrace[0]"), "Leak.add (leak.ml:10)");
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[1].backtrace[1]"), "Main.run (main.ml:1)");
  /* Quarters: at most one checkpoint spacing (≤ 1/32 of the duration) behind the truth. */
  for (int q = 0; q < 4; q++) {
    const uint64_t t = truth.end_t * (uint64_t)(q + 1) / 4;
    const uint64_t want = at_live_at(&tr1, SITE_LEAK, t) * 8;
    const uint64_t floor_ = at_live_at(&tr1, SITE_LEAK, t - truth.end_t / 16) * 8;
    char p[64];
    snprintf(p, sizeof p, "sites[1].live_bytes_at_quarters[%d]", q);
    const double got = json_flat_num(&j, p);
    CTS_ASSERT_MSG(got <= (double)want && got >= (double)floor_,
                   "quarter %d: %.0f not in [%llu, %llu]", q, got, (unsigned long long)floor_,
                   (unsigned long long)want);
  }
  /* BIG: one block live from 9000 µs on, the other freed: the quarters show it come and go. */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sites[0].live_end_bytes"), 1025 * 8);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[0].growth"), "varies");
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(stats_json_matches_truth) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "stats", "--json", trace1, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json(argv, &j, &r));
  /* Blocks: 100 x 3 words, 40 x 7, 2 x 1024, 10 x 5, 1 x 99 (153 blocks). */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sizes.blocks"), 153);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sizes.percentiles_by_blocks.p50"), 24); /* 77th: 3 words */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sizes.percentiles_by_blocks.p90"), 56); /* 138th: 7 words */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sizes.percentiles_by_blocks.max"), 8192);
  /* By samples: 400 + 320 + 2050 + 60 + 100 = 2930; the median sample is in a 1024-word block */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sizes.samples"), 2930);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sizes.percentiles_by_bytes.p50"), 8192);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sizes.percentiles_by_bytes.p90"), 8192);
  /* Lifetimes: 100 x 50 µs, 10 x 1000 µs, 1 x 500 µs, 1 x 4096 µs = 112 blocks */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lifetime_time.blocks"), 112);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lifetime_time.percentiles_by_blocks.p50"), 50);
  /* 101st block: the external one, 500 µs, in the bucket [496, 512) */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lifetime_time.percentiles_by_blocks.p90"), 496);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lifetime_time.percentiles_by_blocks.p99"),
                    992); /* 1000 → bucket 992 */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lifetime_time.percentiles_by_blocks.max"), 4096);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lifetime_time.min"), 50);
  /* by bytes: 400 samples at 50 µs, 60 at 1000, 100 at 500, 1025 at 4096 (1585) */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lifetime_time.percentiles_by_bytes.p50"), 4096);
  /* Heaps, promotion, collection (identify's figures) */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "heaps.minor.samples"), 460);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "heaps.major.samples"), 2370);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "heaps.external.samples"), 100);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "promoted.samples"), 60);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "collected.minor_samples"), 400);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "collected.major_samples"), 60 + 1025);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "collected.external_samples"), 100);
  CTS_ASSERT(fabs(json_flat_num(&j, "rates.promoted_percent") - 100.0 * 60 / 460) < 1e-3);
  const double dur = 10950e-6;
  CTS_ASSERT(fabs(json_flat_num(&j, "rates.minor_alloc_bytes_per_s") - 460 * 8 / dur) < 0.1);
  CTS_ASSERT(fabs(json_flat_num(&j, "rates.major_alloc_bytes_per_s") - (2370 + 60) * 8 / dur) <
             0.1);
  CTS_ASSERT(fabs(json_flat_num(&j, "rates.major_collect_bytes_per_s") - 1085 * 8 / dur) < 0.1);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "live_end.blocks"), 41);
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(stats_lifetime_in_bytes_matches_brute_force) {
  CTS_ASSERT(setup());
  /* Samples allocated by others while each collected block lived, by brute force. */
  cts_hist_t want;
  cts_hist_init(&want);
  size_t *order = at_order(&tr1);
  for (size_t k = 0; k < tr1.n; k++) {
    const at_event_t *c = &tr1.ev[order[k]];
    if (c->kind != EV_COLLECT) continue;
    size_t ka = 0;
    while (order[ka] != (size_t)c->ref) ka++;
    uint64_t between = 0;
    for (size_t m = ka + 1; m < k; m++)
      if (tr1.ev[order[m]].kind == EV_ALLOC) between += tr1.ev[order[m]].ns;
    cts_hist_add(&want, between, tr1.ev[c->ref].ns);
  }
  free(order);
  char *argv[] = {CTS_TEST_CTFSCOPE, "stats", "--json", trace1, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json(argv, &j, &r));
  static const char *const q[] = {"p50", "p90", "p99", "max"};
  static const double qv[] = {0.5, 0.9, 0.99, 1.0};
  for (int i = 0; i < 4; i++)
    for (int by = 0; by < 2; by++) {
      char p[96];
      snprintf(p, sizeof p, "lifetime_allocated.percentiles_by_%s.%s", by ? "bytes" : "blocks",
               q[i]);
      CTS_ASSERT_EQ_U64(json_flat_num(&j, p), cts_hist_quantile(&want, qv[i], by) * 8);
    }
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(export_folded_and_csv_match_truth) {
  CTS_ASSERT(setup());
  at_truth_t truth;
  at_truth(&tr1, &truth);
  char *argv[] = {CTS_TEST_CTFSCOPE, "export", "-f", "folded", trace1, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r) && r.exit_code == 0);
  /* Frames are function names, inlined frames shown by their innermost function. */
  CTS_ASSERT(strstr(r.out, "Main.run;Main.loop;Inl.inner;Prom.keep 480\n"));
  CTS_ASSERT(strstr(r.out, "Main.run;Leak.add 2560\n"));
  uint64_t sum = 0;
  for (const char *line = r.out; *line;) {
    const char *nl = strchr(line, '\n');
    const char *sp = line;
    for (const char *c = line; c < nl; c++)
      if (*c == ' ') sp = c;
    sum += strtoull(sp + 1, NULL, 10);
    line = nl + 1;
  }
  CTS_ASSERT_EQ_U64(sum, truth.total_samples * 8);
  run_result_free(&r);
  char *argv2[] = {CTS_TEST_CTFSCOPE, "export", "-f", "csv", trace1, NULL};
  CTS_ASSERT(run_cmd(argv2, NULL, 60, &r) && r.exit_code == 0);
  size_t lines = 0;
  for (const char *c = r.out; *c; c++) lines += *c == '\n';
  CTS_ASSERT_EQ_U64(lines, tr1.n + 1);
  CTS_ASSERT(strstr(r.out, "\n1007,alloc,1,major,7,8,64,Leak.add,leak.ml,10,2\n"));
  run_result_free(&r);
}

CTS_TEST(diff_matches_truth) {
  CTS_ASSERT(setup());
  at_truth_t t1, tl;
  at_truth(&tr1, &t1);
  at_truth(&tr_low, &tl);
  /* A trace against itself: nothing changed. */
  char *same[] = {CTS_TEST_CTFSCOPE, "diff", "--json", "-n", "0", trace1, trace1, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json(same, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "sites_total"), NSITES);
  CTS_ASSERT(json_flat_num(&j, "total.change") == 0);
  for (int i = 0; i < NSITES; i++) {
    char p[64];
    snprintf(p, sizeof p, "sites[%d].change", i);
    CTS_ASSERT(json_flat_num(&j, p) == 0);
  }
  json_flat_free(&j);
  run_result_free(&r);
  /* Totals by default (two runs of one job compare as totals, however long each ran): each
   * side in its own estimate (rate 1: 8 bytes a sample; 0.01: 800). */
  char *two[] = {CTS_TEST_CTFSCOPE, "diff", "--json", "-n", "0", trace1, trace_low, NULL};
  CTS_ASSERT(run_json(two, &j, &r));
  CTS_ASSERT(fabs(json_flat_num(&j, "total.before") - (double)t1.total_samples * 8) < 1e-6);
  CTS_ASSERT(fabs(json_flat_num(&j, "total.after") - (double)tl.total_samples * 800) < 1e-6);
  for (int s = 0; s < NSITES; s++) {
    const int i = json_flat_find(&j, "sites", "function", at_site_function[s], 100);
    CTS_ASSERT(i >= 0);
    char p[64];
    snprintf(p, sizeof p, "sites[%d].before", i);
    CTS_ASSERT(fabs(json_flat_num(&j, p) - (double)t1.samples[s] * 8) < 1e-6);
    snprintf(p, sizeof p, "sites[%d].after", i);
    CTS_ASSERT(fabs(json_flat_num(&j, p) - (double)tl.samples[s] * 800) < 1e-6);
  }
  /* Sorted by the size of the change: Temp.make (3 200 → 80 000 bytes) first. */
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "sites[0].function"), "Temp.make");
  json_flat_free(&j);
  run_result_free(&r);
  /* Per second on request: both traces last 10 950 µs. */
  char *rate[] = {CTS_TEST_CTFSCOPE, "diff", "--json", "--per-second", "-n", "0", trace1,
                  trace_low,         NULL};
  CTS_ASSERT(run_json(rate, &j, &r));
  CTS_ASSERT(fabs(json_flat_num(&j, "total.before") - (double)t1.total_samples * 8 / 10950e-6) <
             1e-3);
  json_flat_free(&j);
  run_result_free(&r);
}

static bool files_equal(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  while (same) {
    const int ca = fgetc(fa), cb = fgetc(fb);
    if (ca != cb) same = false;
    if (ca == EOF || cb == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

CTS_TEST(subsample_writes_valid_unbiased_traces) {
  CTS_ASSERT(setup());
  char out[400];
  snprintf(out, sizeof out, "%s/sub1.ctf", tmpdir);
  /* Factor 1 keeps everything: with memtrace's encoding, the writer re-creates the trace
   * byte for byte; with the compact one (the default), the same events in fewer bytes. */
  char *one[] = {CTS_TEST_CTFSCOPE, "subsample", "-q", "--factor", "1", "--encoding",
                 "memtrace",        "-o",        out,  trace1,     NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(one, NULL, 60, &r) && r.exit_code == 0);
  run_result_free(&r);
  CTS_ASSERT(files_equal(out, trace1));
  char compact[400];
  snprintf(compact, sizeof compact, "%s/sub1-compact.ctf", tmpdir);
  char *one_compact[] = {CTS_TEST_CTFSCOPE, "subsample", "-q", "--factor", "1", "-o",
                         compact,           trace1,      NULL};
  CTS_ASSERT(run_cmd(one_compact, NULL, 60, &r) && r.exit_code == 0);
  run_result_free(&r);
  char *dump_orig[] = {CTS_TEST_CTFSCOPE, "dump", trace1, NULL};
  char *dump_compact[] = {CTS_TEST_CTFSCOPE, "dump", compact, NULL};
  run_result_t ro, rc;
  CTS_ASSERT(run_cmd(dump_orig, NULL, 60, &ro) && ro.exit_code == 0);
  CTS_ASSERT(run_cmd(dump_compact, NULL, 60, &rc) && rc.exit_code == 0);
  /* Event lines start with a digit (the time); location and comment lines may differ. */
  size_t events = 0;
  const char *a = ro.out, *b = rc.out;
  for (;;) {
    while (*a && !(*a >= '0' && *a <= '9')) a = strchr(a, '\n') ? strchr(a, '\n') + 1 : "";
    while (*b && !(*b >= '0' && *b <= '9')) b = strchr(b, '\n') ? strchr(b, '\n') + 1 : "";
    if (!*a || !*b) break;
    const size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
    CTS_ASSERT_MSG(la == lb && memcmp(a, b, la) == 0, "event %zu differs: %.*s / %.*s", events,
                   (int)la, a, (int)lb, b);
    events++;
    a += la + (a[la] == '\n');
    b += lb + (b[lb] == '\n');
  }
  CTS_ASSERT(!*a && !*b);
  CTS_ASSERT_MSG(events > 200, "%zu events", events); /* the whole trace was compared */
  run_result_free(&ro);
  run_result_free(&rc);
  struct stat st_orig, st_compact;
  CTS_ASSERT(stat(trace1, &st_orig) == 0 && stat(compact, &st_compact) == 0);
  CTS_ASSERT_MSG(st_compact.st_size <= st_orig.st_size, "compact copy: %lld bytes, original %lld",
                 (long long)st_compact.st_size, (long long)st_orig.st_size);
  snprintf(out, sizeof out, "%s/sub4.ctf", tmpdir);
  char *four[] = {CTS_TEST_CTFSCOPE,
                  "subsample",
                  "-q",
                  "--factor",
                  "4",
                  "--seed",
                  "7",
                  "-o",
                  out,
                  trace1,
                  NULL};
  CTS_ASSERT(run_cmd(four, NULL, 60, &r) && r.exit_code == 0);
  run_result_free(&r);
  char *top[] = {CTS_TEST_CTFSCOPE, "top", "--json", out, NULL};
  json_flat_t j;
  CTS_ASSERT(run_json(top, &j, &r)); /* reads back cleanly: every id refers to a kept block */
  CTS_ASSERT(fabs(json_flat_num(&j, "sample_rate") - 0.25) < 1e-12);
  const double kept = json_flat_num(&j, "total.alloc_samples");
  CTS_ASSERT(kept > 0 && kept < 2930);
  /* Unbiased: the estimate stays within 5 standard deviations of the truth (23 440 bytes). */
  const double est = json_flat_num(&j, "total.alloc_bytes"), sd = sqrt(2930 * 0.25 * 0.75) * 32;
  CTS_ASSERT_MSG(fabs(est - 23440) < 5 * sd, "estimate %.0f, truth 23440, sd %.0f", est, sd);
  json_flat_free(&j);
  run_result_free(&r);
  /* Deterministic for a seed. */
  char again[400];
  snprintf(again, sizeof again, "%s/sub4b.ctf", tmpdir);
  four[8] = again;
  CTS_ASSERT(run_cmd(four, NULL, 60, &r) && r.exit_code == 0);
  run_result_free(&r);
  CTS_ASSERT(files_equal(out, again));
}

CTS_TEST(filter_keeps_the_window) {
  CTS_ASSERT(setup());
  char out[400];
  snprintf(out, sizeof out, "%s/window.ctf", tmpdir);
  char *argv[] = {CTS_TEST_CTFSCOPE, "filter", "-q", "--from", "0.002", "--to",
                  "0.005",           "-o",     out,  trace1,   NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r) && r.exit_code == 0);
  run_result_free(&r);
  uint64_t allocs = 0, samples = 0;
  for (size_t i = 0; i < tr1.n; i++)
    if (tr1.ev[i].kind == EV_ALLOC && tr1.ev[i].t >= 2000 && tr1.ev[i].t <= 5000)
      allocs++, samples += tr1.ev[i].ns;
  char *top[] = {CTS_TEST_CTFSCOPE, "top", "--json", out, NULL};
  json_flat_t j;
  CTS_ASSERT(run_json(top, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "total.allocs_sampled"), allocs);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "total.alloc_samples"), samples);
  CTS_ASSERT(fabs(json_flat_num(&j, "sample_rate") - 1.0) < 1e-12);
  json_flat_free(&j);
  run_result_free(&r);
}

/* Smoke test over the real traces: every command runs, exits as info does (1 for the trace
 * cut inside a header), and the byte totals agree with info's estimate. */
CTS_TEST(corpus_totals_agree_with_info) {
  CTS_REQUIRE_CORPUS(corpus);
  corpus_list_t l;
  corpus_list_memtrace(corpus, &l);
  size_t failures = 0;
  for (size_t i = 0; i < l.n; i++) {
    const char *path = l.paths[i];
    char *info[] = {CTS_TEST_CTFSCOPE, "info", "--json", "-q", (char *)path, NULL};
    char *top[] = {CTS_TEST_CTFSCOPE, "top", "--json", "-q", (char *)path, NULL};
    char *leaks[] = {CTS_TEST_CTFSCOPE, "leaks", "--json", "-q", (char *)path, NULL};
    char *stats[] = {CTS_TEST_CTFSCOPE, "stats", "--json", "-q", (char *)path, NULL};
    run_result_t ri, rt, rl, rs;
    if (!run_cmd(info, NULL, 60, &ri) || !run_cmd(top, NULL, 60, &rt) ||
        !run_cmd(leaks, NULL, 60, &rl) || !run_cmd(stats, NULL, 60, &rs)) {
      failures++;
      continue;
    }
    json_flat_t ji = {0}, jt = {0}, jl = {0}, js = {0};
    const bool parsed =
        json_flat_parse(&ji, ri.out, ri.out_len) && json_flat_parse(&jt, rt.out, rt.out_len) &&
        json_flat_parse(&jl, rl.out, rl.out_len) && json_flat_parse(&js, rs.out, rs.out_len);
    const double want = json_flat_num(&ji, "estimated_allocated_bytes");
    const bool ok =
        parsed && rt.exit_code == ri.exit_code && rl.exit_code == ri.exit_code &&
        rs.exit_code == ri.exit_code &&
        fabs(json_flat_num(&jt, "total.alloc_bytes") - want) <= 0.5 &&
        fabs(json_flat_num(&js, "allocated.alloc_bytes") - want) <= 0.5 &&
        json_flat_num(&jt, "total.allocs_sampled") == json_flat_num(&ji, "allocs_total") &&
        json_flat_num(&jl, "live_end.live_bytes") == json_flat_num(&jt, "total.live_end_bytes") &&
        json_flat_num(&jt, "total.peak_bytes") >= json_flat_num(&jt, "total.live_end_bytes");
    if (!ok) {
      fprintf(stderr, "  %s: exits %d/%d/%d/%d, bytes info %.0f top %.0f stats %.0f\n", path,
              ri.exit_code, rt.exit_code, rl.exit_code, rs.exit_code, want,
              json_flat_num(&jt, "total.alloc_bytes"), json_flat_num(&js, "allocated.alloc_bytes"));
      failures++;
    }
    json_flat_free(&ji);
    json_flat_free(&jt);
    json_flat_free(&jl);
    json_flat_free(&js);
    run_result_free(&ri);
    run_result_free(&rt);
    run_result_free(&rl);
    run_result_free(&rs);
  }
  fprintf(stderr, "  %zu corpus traces\n", l.n);
  CTS_ASSERT(l.n >= 10);
  corpus_list_free(&l);
  CTS_ASSERT_MSG(failures == 0, "%zu traces disagree", failures);
}

/* ---- golden text outputs -------------------------------------------------------------- */

static bool compare_golden(const char *name, const char *out) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", CTS_GOLDEN_DIR, name);
  const char *update = getenv("CTS_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs(out, f);
    fclose(f);
    fprintf(stderr, "  wrote %s\n", path);
    return true;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "  %s: missing (CTS_UPDATE_GOLDEN=1 writes it)\n", path);
    return false;
  }
  char *want = calloc(1, 1 << 20);
  const size_t n = fread(want, 1, (1 << 20) - 1, f);
  fclose(f);
  want[n] = '\0';
  const bool same = strcmp(want, out) == 0;
  if (!same) {
    size_t i = 0, line = 1;
    while (want[i] && want[i] == out[i]) line += want[i++] == '\n';
    fprintf(stderr, "  %s differs at line %zu:\n  golden: %.80s\n  ours:   %.80s\n", name, line,
            want + i, out + i);
  }
  free(want);
  return same;
}

CTS_TEST(text_outputs_match_golden_files) {
  CTS_ASSERT(setup());
  static const struct {
    const char *golden;
    const char *args[8];
    bool low_rate;
  } cases[] = {
      {"top.txt", {"top"}, false},
      {"top-function-count.txt", {"top", "--by", "function", "--sort", "count"}, false},
      {"top-tree.txt", {"top", "--tree", "--min-percent", "0"}, false},
      {"top-inverted.txt", {"top", "--inverted", "--by", "function"}, false},
      {"top-low-rate.txt", {"top"}, true},
      {"top.csv", {"top", "--csv"}, true},
      {"leaks.txt", {"leaks"}, false},
      {"stats.txt", {"stats", "--bars"}, false},
      {"stats.csv", {"stats", "--csv"}, false},
      {"export.folded", {"export", "-f", "folded"}, false},
      {"export-live.folded", {"export", "-f", "folded", "--value", "live"}, false},
      {"diff.txt", {"diff", "-n", "0", "--no-normalize"}, false},
  };
  size_t failures = 0;
  for (size_t c = 0; c < CTS_ARRAY_SIZE(cases); c++) {
    char *argv[16] = {CTS_TEST_CTFSCOPE};
    int n = 1;
    for (int k = 0; cases[c].args[k]; k++) argv[n++] = (char *)cases[c].args[k];
    argv[n++] = cases[c].low_rate ? trace_low : trace1;
    if (strcmp(cases[c].args[0], "diff") == 0) argv[n++] = trace_low;
    argv[n] = NULL;
    run_result_t r;
    CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
    if (r.exit_code != 0 || r.err_len != 0) {
      fprintf(stderr, "  %s: exit %d, stderr: %s\n", cases[c].golden, r.exit_code, r.err);
      failures++;
    } else if (!compare_golden(cases[c].golden, r.out)) {
      failures++;
    }
    run_result_free(&r);
  }
  CTS_ASSERT_MSG(failures == 0, "%zu outputs differ from their golden files", failures);
}

CTS_TEST(commands_reject_bad_usage) {
  CTS_ASSERT(setup());
  static const char *const cases[][8] = {
      {"top", "--by", "module", NULL},
      {"top", "--sort", "size", NULL},
      {"top", "-n", "-1", NULL},
      {"top", "--json", "--csv", NULL},
      {"leaks", "--depth", "x", NULL},
      {"stats", "--frobnicate", NULL},
      {"export", NULL},
      {"export", "-f", "svg", NULL},
      {"top", NULL},
      {"top", "--tree", "--csv", NULL},
      {"diff", "--metric", "size", NULL},
      {"subsample", "--factor", "0.5", NULL},
      {"subsample", "--factor", "2", "-o", "/dev/null", "--encoding", "zip", NULL},
      {"filter", "--from", "2", "--to", "1", NULL},
      {"filter", "--encoding", "", "-o", "/dev/null", NULL},
  };
  for (size_t c = 0; c < CTS_ARRAY_SIZE(cases); c++) {
    char *argv[10] = {CTS_TEST_CTFSCOPE};
    int n = 1;
    for (int k = 0; cases[c][k]; k++) argv[n++] = (char *)cases[c][k];
    if (strcmp(cases[c][0], "top") != 0 || cases[c][1]) argv[n++] = trace1;
    argv[n] = NULL;
    run_result_t r;
    CTS_ASSERT(run_cmd(argv, NULL, 30, &r));
    CTS_ASSERT_MSG(r.exit_code == 2 && strstr(r.err, "error"), "%s %s: exit %d, stderr %s",
                   cases[c][0], cases[c][1] ? cases[c][1] : "", r.exit_code, r.err);
    run_result_free(&r);
  }
  char *argv[] = {CTS_TEST_CTFSCOPE, "top", "/nonexistent/trace.ctf", NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 30, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 3);
  run_result_free(&r);
}

/* A corrupt trace: the commands report what they read and exit 1, never crash. */
CTS_TEST(commands_survive_a_truncated_trace) {
  CTS_ASSERT(setup());
  char cut[400];
  snprintf(cut, sizeof cut, "%s/cut.ctf", tmpdir);
  FILE *in = fopen(trace1, "rb"), *out = fopen(cut, "wb");
  CTS_ASSERT(in && out);
  char buf[1 << 16];
  const size_t n = fread(buf, 1, sizeof buf, in);
  fwrite(buf, 1, n > 300 ? 300 : n, out); /* inside the first event packet's header */
  fclose(in);
  fclose(out);
  static const char *const cmds[][4] = {
      {"top"},          {"leaks"}, {"stats"}, {"export", "-f", "pprof"}, {"export", "-f", "chrome"},
      {"top", "--tree"}};
  for (size_t c = 0; c < CTS_ARRAY_SIZE(cmds); c++) {
    char *argv[8] = {CTS_TEST_CTFSCOPE};
    int k = 1;
    for (int a = 0; cmds[c][a]; a++) argv[k++] = (char *)cmds[c][a];
    argv[k++] = cut;
    argv[k] = NULL;
    run_result_t r;
    char devnull[] = "/dev/null";
    CTS_ASSERT(run_cmd(argv, devnull, 30, &r));
    CTS_ASSERT_MSG(r.signal == 0 && (r.exit_code == 0 || r.exit_code == 1), "%s: exit %d signal %d",
                   cmds[c][0], r.exit_code, r.signal);
    run_result_free(&r);
  }
}

int main(int argc, char **argv) {
  const int rc = cts_test_main(argc, argv);
  if (tmpdir[0]) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  }
  return rc;
}
