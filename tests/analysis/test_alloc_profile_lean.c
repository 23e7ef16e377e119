/* SPDX-License-Identifier: MIT */
/* The allocation profile's lean configurations (alloc_profile.h: allocated_only, no_sites,
 * no_node_peaks), as `export -f folded|pprof` and `report` choose them: on generated traces
 * of both shapes (most blocks collected, most surviving; promotions, sampled lengths) and on
 * the corpus, each node of the lean profile has exactly the allocated figures (and, where
 * kept, the live ones) of the full profile, the trie is the same node for node, and what the
 * lean one leaves out is empty. The comparison itself is checked to see a dropped sample. */
#include "../../src/analysis/load.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/analysis/fold.h"
#include "../../src/common/hash.h"
#include "../cli/scratch_dir.h"
#include "../mt_file_writer.h"
#include "../test.h"

static char churn[256], survivors[256], exact[256];

/* Codes 1..30 are allocation points (the fold sees their names), 100.. the frames above. */
static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static char names[64][32];
  (void)ud;
  if (!max) return 1;
  snprintf(names[code % 64], sizeof names[0], "fn_%llu", (unsigned long long)(code % 41));
  out[0] = (cts_mt_location_t){.line = (uint32_t)(code % 9),
                               .start_char = 1,
                               .end_char = 9,
                               .filename = "a.ml",
                               .defname = names[code % 64]};
  return 1;
}

/* n allocations of 1-600 words (so that weights differ by length, some past the weight
 * table) over stacks of 1-24 frames; minor blocks are promoted one time in four; a block
 * survives with probability keep_pct %, the others are collected up to 32 allocations
 * later. */
static int make_trace(const char *path, uint64_t n, unsigned keep_pct, double rate) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, rate, resolve);
  if (e) return e;
  cts_mt_writer_t *w = fw.w;
  uint64_t bt[32], rng = 11 + keep_pct, pending[32] = {0};
  for (uint64_t i = 0; !e && i < n; i++) {
    const uint64_t x = cts_splitmix64(&rng);
    const size_t depth = 1 + x % 24;
    for (size_t k = 0; k + 1 < depth; k++)
      bt[k] = 100 + k * 10 + (cts_splitmix64(&rng) >> 60) % (k < 4 ? 2 : 7);
    bt[depth - 1] = 1 + (x >> 8) % 30;
    uint64_t id;
    const uint64_t t = MT_FILE_WRITER_START_US + i * 10;
    const cts_mt_source_t src = (cts_mt_source_t)((x >> 30) % 3);
    e = cts_mt_writer_alloc(w, t, 1 + (x >> 20) % 600, 1 + (x >> 36) % 3, src, bt, depth, &id);
    if (!e && src == CTS_MT_SOURCE_MINOR && (x >> 44) % 4 == 0)
      e = cts_mt_writer_promote(w, t + 1, id);
    if (e || (x >> 40) % 100 < keep_pct) continue;
    const size_t slot = (x >> 48) % 32;
    if (pending[slot]) e = cts_mt_writer_collect(w, t + 5, pending[slot] - 1);
    pending[slot] = id + 1;
  }
  return mt_file_writer_close(&fw, e);
}

__attribute__((constructor)) static void setup(void) {
  scratch_file("cts-profile-lean", "churn.ctf", churn, sizeof churn);
  scratch_file("cts-profile-lean", "survivors.ctf", survivors, sizeof survivors);
  scratch_file("cts-profile-lean", "exact.ctf", exact, sizeof exact);
  if (make_trace(churn, 80000, 2, 0.01) || make_trace(survivors, 40000, 92, 0.01) ||
      make_trace(exact, 20000, 30, 1.0)) {
    fprintf(stderr, "cannot write the traces in %s\n", scratch_path);
    exit(1);
  }
}

/* The profiles the commands keep: the full one (as before the lean configurations) and
 * the lean ones of folded --value bytes|count|samples, pprof (and folded --value live),
 * folded --value peak, and report. */
typedef enum lean { FOLDED_ALLOCATED, PPROF, FOLDED_PEAK, REPORT, LEANS } lean_t;

static cts_alloc_profile_config_t config(int lean) {
  /* (The full one keeps its histograms: report's are compared.) */
  cts_alloc_profile_config_t c = {.stacks = true, .skip_histograms = lean >= 0 && lean != REPORT};
  if (lean == FOLDED_ALLOCATED) c.allocated_only = true;
  if (lean >= 0) c.no_sites = true;
  if (lean == FOLDED_ALLOCATED || lean == PPROF) c.no_node_peaks = true;
  if (lean == REPORT) { /* (and its sites whatever no_sites says) */
    c.live_by_site = true;
    c.skip_life_samples = true; /* (the report prints no lifetime in samples) */
  }
  return c;
}

static int load(cts_mem_trace_t *t, const char *path, int lean) {
  static const cts_fold_config_t fold = {0};
  const cts_load_opts_t opts = {.fold = &fold, .quiet = true, .threads = 1};
  const cts_alloc_profile_config_t cfg = config(lean);
  return cts_mem_trace_load(t, path, &cfg, &opts, NULL, NULL);
}

static bool same_double(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

/* Whether the live and peak samples of each allocation point (a node's last frame) summed
 * over a's nodes are those summed over b's; the first difference is printed. */
static bool same_by_site(const cts_stacks_t *a, const cts_stacks_t *b, const char *path) {
  cts_u64map_t at;
  cts_u64map_init(&at);
  uint64_t(*sums)[4] = calloc((size_t)a->count + b->count, sizeof *sums);
  bool same = sums != NULL;
  for (int side = 0; same && side < 2; side++) {
    const cts_stacks_t *s = side ? b : a;
    for (uint32_t i = 0; same && i < s->count; i++) {
      bool added;
      uint64_t *k = cts_u64map_insert(&at, s->nodes[i].code, at.count, &added);
      if (!k) break;
      const cts_site_stats_t x = cts_stacks_self(s, i);
      sums[*k][2 * side] += x.live_samples;
      sums[*k][2 * side + 1] += x.peak_samples;
    }
  }
  for (size_t k = 0; same && k < at.count; k++)
    if (sums[k][0] != sums[k][2] || sums[k][1] != sums[k][3]) {
      fprintf(stderr, "%s: site %zu: live %llu/%llu peak %llu/%llu\n", path, k,
              (unsigned long long)sums[k][0], (unsigned long long)sums[k][2],
              (unsigned long long)sums[k][1], (unsigned long long)sums[k][3]);
      same = false;
    }
  free(sums);
  cts_u64map_fini(&at);
  return same;
}

/* Whether lean's figures are full's where lean keeps them (and 0 where it does not; the
 * report's live and peak samples by site); the first difference is printed. */
static bool same_figures(const cts_alloc_profile_t *full, const cts_alloc_profile_t *lean,
                         lean_t kind, const char *path) {
  const cts_stacks_t *a = &full->stacks, *b = &lean->stacks;
  if (a->count != b->count || a->overflowed != b->overflowed) {
    fprintf(stderr, "%s: %u nodes (%llu cut) against %u (%llu)\n", path, a->count,
            (unsigned long long)a->overflowed, b->count, (unsigned long long)b->overflowed);
    return false;
  }
  /* Figures of each node, or (report) of each site. */
  const bool live = kind == PPROF || kind == FOLDED_PEAK, peak = kind == FOLDED_PEAK;
  if (kind == REPORT && !same_by_site(a, b, path)) return false;
  for (uint32_t i = 0; i < a->count; i++) {
    const cts_site_stats_t x = cts_stacks_self(a, i), y = cts_stacks_self(b, i);
    const bool same = a->nodes[i].code == b->nodes[i].code &&
                      a->nodes[i].parent == b->nodes[i].parent &&
                      (a->nodes[i].stat != 0) == (b->nodes[i].stat != 0) && x.allocs == y.allocs &&
                      x.samples == y.samples && same_double(x.est_allocs, y.est_allocs) &&
                      (live ? x.live_allocs == y.live_allocs && x.live_samples == y.live_samples &&
                                  same_double(x.live_est_allocs, y.live_est_allocs)
                            : y.live_allocs == 0 && (kind == REPORT || y.live_samples == 0) &&
                                  y.live_est_allocs == 0) &&
                      (peak ? x.peak_allocs == y.peak_allocs && x.peak_samples == y.peak_samples &&
                                  same_double(x.peak_est_allocs, y.peak_est_allocs)
                            : y.peak_allocs == 0 && (kind == REPORT || y.peak_samples == 0) &&
                                  y.peak_est_allocs == 0);
    if (!same) {
      fprintf(stderr,
              "%s, lean %d: node %u: allocs %llu/%llu samples %llu/%llu est %.17g/%.17g live "
              "%llu/%llu peak %llu/%llu\n",
              path, (int)kind, i, (unsigned long long)x.allocs, (unsigned long long)y.allocs,
              (unsigned long long)x.samples, (unsigned long long)y.samples, x.est_allocs,
              y.est_allocs, (unsigned long long)x.live_samples, (unsigned long long)y.live_samples,
              (unsigned long long)x.peak_samples, (unsigned long long)y.peak_samples);
      return false;
    }
  }
  /* The profile's own allocated figures and time span, whatever the configuration. */
  bool same =
      memcmp(full->allocs_by_source, lean->allocs_by_source, sizeof full->allocs_by_source) == 0 &&
      memcmp(full->samples_by_source, lean->samples_by_source, sizeof full->samples_by_source) ==
          0 &&
      same_double(full->est_allocs_total, lean->est_allocs_total) &&
      full->first_event_us == lean->first_event_us && full->last_event_us == lean->last_event_us &&
      full->end_us == lean->end_us;
  if (kind != FOLDED_ALLOCATED)
    same = same && full->live_blocks == lean->live_blocks &&
           full->collected_allocs == lean->collected_allocs &&
           full->promoted_allocs == lean->promoted_allocs && a->live_samples == b->live_samples &&
           a->peak_samples == b->peak_samples && a->peak_time_us == b->peak_time_us;
  else
    same = same && lean->live_blocks == 0 && lean->live.count == 0 && b->live_samples == 0;
  if (kind == REPORT)
    same = same && memcmp(&full->size_words, &lean->size_words, sizeof full->size_words) == 0 &&
           memcmp(&full->life_us, &lean->life_us, sizeof full->life_us) == 0 &&
           lean->life_samples.total_blocks == 0;
  if (!same) fprintf(stderr, "%s, lean %d: the profile's totals differ\n", path, (int)kind);
  /* The report's sites are the full profile's. */
  return same && b->site_count == (kind == REPORT ? a->site_count : 0);
}

/* Loads path fully and in every lean configuration and compares them; *with_figures: the
 * number of nodes with figures (so that a caller can tell an empty trace). */
static void check_trace(const char *path, uint64_t *with_figures) {
  cts_mem_trace_t full;
  const int fe = load(&full, path, -1);
  *with_figures = 0;
  for (uint32_t i = 1; i < full.prof.stacks.count; i++)
    *with_figures += full.prof.stacks.nodes[i].stat != 0;
  for (int k = 0; k < LEANS; k++) {
    cts_mem_trace_t lean;
    const int le = load(&lean, path, k);
    CTS_ASSERT_EQ_INT(le, fe);
    CTS_ASSERT_MSG(same_figures(&full.prof, &lean.prof, (lean_t)k, path),
                   "%s: lean configuration %d differs from the full profile", path, k);
    /* The comparison sees a sample the lean path would drop. */
    if (k == FOLDED_ALLOCATED && lean.prof.stacks.stat_count > 2) {
      lean.prof.stacks.lean[lean.prof.stacks.stat_count - 1].samples--;
      CTS_ASSERT_MSG(!same_figures(&full.prof, &lean.prof, (lean_t)k, "(a sample dropped)"),
                     "%s: a dropped sample went unseen", path);
    }
    /* And a site's peak one sample off. */
    if (k == REPORT && lean.prof.stacks.site_count) {
      lean.prof.stacks.sites[0].peak_samples++;
      CTS_ASSERT_MSG(!same_figures(&full.prof, &lean.prof, (lean_t)k, "(a peak sample added)"),
                     "%s: a site's wrong peak went unseen", path);
    }
    cts_mem_trace_free(&lean);
  }
  cts_mem_trace_free(&full);
}

CTS_TEST(lean_profiles_keep_the_full_figures_on_generated_traces) {
  const char *const traces[] = {churn, survivors, exact};
  for (size_t k = 0; k < CTS_ARRAY_SIZE(traces); k++) {
    /* The inputs exercise what the lean paths skip: collects, survivors, promotions. */
    cts_mem_trace_t t;
    CTS_ASSERT_EQ_INT(load(&t, traces[k], -1), 0);
    CTS_ASSERT(t.prof.collected_allocs > 0 && t.prof.live_blocks > 0 && t.prof.promoted_allocs > 0);
    CTS_ASSERT(t.prof.stacks.site_count > 0);
    cts_mem_trace_free(&t);
    uint64_t with_figures;
    check_trace(traces[k], &with_figures);
    CTS_ASSERT(with_figures > 100);
  }
}

/* The allocated-only profile keeps 20-byte records (cts_stack_lean_t), not the full ones. */
CTS_TEST(allocated_only_keeps_the_small_records) {
  CTS_ASSERT_EQ_U64(sizeof(cts_stack_lean_t), 20);
  cts_mem_trace_t t;
  CTS_ASSERT_EQ_INT(load(&t, churn, FOLDED_ALLOCATED), 0);
  CTS_ASSERT(t.prof.stacks.lean != NULL && t.prof.stacks.stats == NULL);
  CTS_ASSERT(t.prof.stacks.stat_count > 100);
  cts_mem_trace_free(&t);
}

/* The report's profile keeps 20-byte records too, its live and peak samples by site: at
 * least one site's are not 0 on each shape, so the comparison above compares something. */
CTS_TEST(report_keeps_the_small_records_and_live_figures_by_site) {
  const char *const traces[] = {churn, survivors, exact};
  for (size_t k = 0; k < CTS_ARRAY_SIZE(traces); k++) {
    cts_mem_trace_t t;
    CTS_ASSERT_EQ_INT(load(&t, traces[k], REPORT), 0);
    const cts_stacks_t *s = &t.prof.stacks;
    CTS_ASSERT(s->lean != NULL && s->stats == NULL && s->live_by_site);
    CTS_ASSERT(s->stat_count > 100);
    uint64_t live = 0, peak = 0;
    for (uint32_t i = 0; i < s->site_count; i++) {
      live += s->sites[i].live_samples;
      peak += s->sites[i].peak_samples;
    }
    CTS_ASSERT_EQ_U64(live, s->live_samples);
    CTS_ASSERT_EQ_U64(peak, s->peak_samples);
    CTS_ASSERT(live > 0 && peak >= live);
    cts_mem_trace_free(&t);
  }
}

/* A lean record's count of allocations is 32-bit, as the full one's: one that passes 2^32
 * (set up by giving it its value just below) keeps its high half aside and reads whole. */
CTS_TEST(lean_counts_past_2_to_the_32_are_kept_whole) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_set_lean(&s), 0);
  const uint64_t bt[2] = {5, 6};
  uint32_t node, other;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 2, &node), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 1, &other), 0);
  const uint64_t base = UINT32_MAX - 1u;
  s.lean[s.nodes[node].stat].allocs = (uint32_t)base;
  CTS_ASSERT_EQ_INT(cts_stacks_reserve(&s, node), 0); /* (no high half needed yet) */
  for (unsigned i = 0; i < 3; i++)
    CTS_ASSERT_EQ_INT(cts_stacks_alloc_allocated(&s, node, 2, 1.5), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_alloc_allocated(&s, other, 1, 1.0), 0);
  CTS_ASSERT_EQ_U64(s.wide_count, 1);
  cts_stacks_finish(&s);
  const cts_site_stats_t self = cts_stacks_self(&s, node);
  CTS_ASSERT_EQ_U64(self.allocs, base + 3);
  CTS_ASSERT_EQ_U64(self.samples, 6);
  CTS_ASSERT(same_double(self.est_allocs, 4.5));
  CTS_ASSERT_EQ_U64(self.live_allocs, 0);
  CTS_ASSERT_EQ_U64(self.collected_allocs, base + 3);
  CTS_ASSERT_EQ_U64(cts_stacks_self(&s, other).allocs, 1);
  CTS_ASSERT_EQ_U64(cts_stacks_self(&s, 0).allocs, 0);
  cts_stacks_fini(&s);
}

/* Every memtrace trace of the corpus (*.ctf in its two folders), truncated ones included. */
CTS_TEST(lean_profiles_keep_the_full_figures_on_the_corpus) {
  CTS_REQUIRE_CORPUS(corpus);
  static const char *const dirs[] = {"memtrace/traces", "memtrace/public"};
  size_t read = 0;
  for (size_t d = 0; d < CTS_ARRAY_SIZE(dirs); d++) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", corpus, dirs[d]);
    DIR *dp = opendir(dir);
    if (!dp) continue; /* a corpus of another layout */
    for (struct dirent *de; (de = readdir(dp)) != NULL;) {
      const size_t n = strlen(de->d_name);
      if (n < 4 || strcmp(de->d_name + n - 4, ".ctf") != 0) continue;
      char path[2048];
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      uint64_t with_figures;
      check_trace(path, &with_figures);
      read++;
    }
    closedir(dp);
  }
  CTS_ASSERT(read >= 10);
}

CTS_TEST_MAIN()
