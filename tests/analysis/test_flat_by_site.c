/* SPDX-License-Identifier: MIT */
/* The flat table of allocation points (siterows.h) as `top` (text and CSV) and `diff` build
 * it, from a profile that keeps live and peak samples by site (alloc_profile.h,
 * live_by_site) rather than in each node's full record: every row of every grouping and
 * order is the full profile's, to the bit, in the figures those views print (allocated
 * samples, sampled and estimated allocations, live samples at the peak and at the end), and
 * so are the heap's totals. On generated traces (most blocks collected or most surviving,
 * rates 0.01 and 1, lengths past the weight table, promotions) and on the corpus. The
 * comparison is checked to see one sample off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/analysis/fold.h"
#include "../../src/analysis/load.h"
#include "../../src/common/hash.h"
#include "../cli/corpus_files.h"
#include "../cli/scratch_dir.h"
#include "../mt_file_writer.h"
#include "../test.h"

static char churn[256], kept[256], whole[256];

/* Allocation points 1..48 under few function names and files (so that grouping by
 * function or file merges points), callers from 500 up. */
static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static char names[64][32];
  static const char *const files[] = {"x.ml", "y.ml", "z.ml"};
  (void)ud;
  if (!max) return 1;
  snprintf(names[code % 64], sizeof names[0], "f%llu", (unsigned long long)(code % 13));
  out[0] = (cts_mt_location_t){.line = (uint32_t)(code % 5),
                               .start_char = 2,
                               .end_char = 7,
                               .filename = files[code % 3],
                               .defname = names[code % 64]};
  return 1;
}

/* n allocations of 1-1000 words and 1-4 samples at one of 48 points, under 0-5 callers; a
 * block survives with probability keep_pct %, else it is collected up to 16 allocations
 * later; a minor block is promoted one time in three. */
static int write_trace(const char *path, uint64_t n, unsigned keep_pct, double rate) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, rate, resolve);
  if (e) return e;
  uint64_t rng = 3 + keep_pct, bt[8], waiting[16] = {0};
  for (uint64_t i = 0; !e && i < n; i++) {
    const uint64_t x = cts_splitmix64(&rng);
    const size_t callers = x % 6;
    for (size_t k = 0; k < callers; k++) bt[k] = 500 + 7 * k + (x >> (8 + k)) % 3;
    bt[callers] = 1 + (x >> 16) % 48;
    const uint64_t t = MT_FILE_WRITER_START_US + 4 * i;
    const cts_mt_source_t src = (cts_mt_source_t)((x >> 24) % 3);
    uint64_t id;
    e = cts_mt_writer_alloc(fw.w, t, 1 + (x >> 28) % 1000, 1 + (x >> 40) % 4, src, bt, callers + 1,
                            &id);
    if (!e && src == CTS_MT_SOURCE_MINOR && (x >> 44) % 3 == 0)
      e = cts_mt_writer_promote(fw.w, t + 1, id);
    if (e || (x >> 48) % 100 < keep_pct) continue;
    uint64_t *slot = &waiting[(x >> 56) % 16];
    if (*slot) e = cts_mt_writer_collect(fw.w, t + 2, *slot - 1);
    *slot = id + 1;
  }
  return mt_file_writer_close(&fw, e);
}

__attribute__((constructor)) static void setup(void) {
  scratch_file("cts-flat-by-site", "churn.ctf", churn, sizeof churn);
  scratch_file("cts-flat-by-site", "kept.ctf", kept, sizeof kept);
  scratch_file("cts-flat-by-site", "whole.ctf", whole, sizeof whole);
  if (write_trace(churn, 60000, 3, 0.01) || write_trace(kept, 30000, 90, 0.01) ||
      write_trace(whole, 20000, 40, 1.0)) {
    fprintf(stderr, "cannot write the traces in %s\n", scratch_path);
    exit(1);
  }
}

/* The flat views' profile: allocation points only, without histograms; by_site as top's
 * text and CSV and diff keep it. */
static int load(cts_mem_trace_t *t, const char *path, bool by_site) {
  static const cts_fold_config_t fold = {0};
  const cts_load_opts_t opts = {.fold = &fold, .quiet = true, .threads = 1};
  const cts_alloc_profile_config_t cfg = {
      .stacks = true, .leaf_only = true, .skip_histograms = true, .live_by_site = by_site};
  return cts_mem_trace_load(t, path, &cfg, &opts, NULL, NULL);
}

static bool same_double(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

/* Whether b's rows are a's, in order, in every figure the flat views print; the first
 * difference is printed. */
static bool same_rows(const cts_rows_t *a, const cts_rows_t *b, const char *what) {
  if (a->n != b->n) {
    fprintf(stderr, "%s: %zu rows against %zu\n", what, a->n, b->n);
    return false;
  }
  for (size_t i = 0; i < a->n; i++) {
    const cts_row_t *x = &a->rows[i], *y = &b->rows[i];
    const cts_site_stats_t *p = &x->st, *q = &y->st;
    if (strcmp(x->key, y->key) != 0 || x->code != y->code || p->allocs != q->allocs ||
        p->samples != q->samples || !same_double(p->est_allocs, q->est_allocs) ||
        p->peak_samples != q->peak_samples || p->live_samples != q->live_samples) {
      fprintf(stderr,
              "%s: row %zu: %s/%s allocs %llu/%llu samples %llu/%llu est %.17g/%.17g peak "
              "%llu/%llu live %llu/%llu\n",
              what, i, x->key, y->key, (unsigned long long)p->allocs, (unsigned long long)q->allocs,
              (unsigned long long)p->samples, (unsigned long long)q->samples, p->est_allocs,
              q->est_allocs, (unsigned long long)p->peak_samples,
              (unsigned long long)q->peak_samples, (unsigned long long)p->live_samples,
              (unsigned long long)q->live_samples);
      return false;
    }
  }
  return true;
}

static bool rows_of(cts_mem_trace_t *t, cts_group_t by, cts_sort_t sort, cts_rows_t *rows) {
  const cts_frames_t f = cts_mem_trace_frames(t);
  if (cts_rows_build(rows, &t->prof.stacks, &f, by, sort, 0, 0)) return false;
  cts_rows_sort(rows, sort);
  return true;
}

/* Loads path both ways and compares every grouping and order; adds the rows compared to
 * *compared. */
static void check_trace(const char *path, size_t *compared) {
  cts_mem_trace_t full, site;
  const int fe = load(&full, path, false);
  CTS_ASSERT_EQ_INT(load(&site, path, true), fe);
  const cts_alloc_profile_t *a = &full.prof, *b = &site.prof;
  /* The heap's totals, as the flat views' headers print them. */
  CTS_ASSERT_EQ_U64(a->stacks.live_samples, b->stacks.live_samples);
  CTS_ASSERT_EQ_U64(a->stacks.peak_samples, b->stacks.peak_samples);
  CTS_ASSERT_EQ_U64(a->stacks.peak_time_us, b->stacks.peak_time_us);
  CTS_ASSERT(same_double(a->est_allocs_total, b->est_allocs_total));
  CTS_ASSERT_EQ_U64(cts_alloc_profile_samples(a), cts_alloc_profile_samples(b));
  for (int by = CTS_GROUP_LINE; by <= CTS_GROUP_FILE; by++)
    for (int sort = CTS_SORT_BYTES; sort <= CTS_SORT_LIVE; sort++) {
      cts_rows_t ra, rb;
      CTS_ASSERT(rows_of(&full, (cts_group_t)by, (cts_sort_t)sort, &ra));
      CTS_ASSERT(rows_of(&site, (cts_group_t)by, (cts_sort_t)sort, &rb));
      char what[2300];
      snprintf(what, sizeof what, "%s, by %d, sort %d", path, by, sort);
      CTS_ASSERT_MSG(same_rows(&ra, &rb, what), "%s: the rows by site differ", what);
      /* The comparison sees a site's peak one sample off. */
      if (rb.n) {
        rb.rows[rb.n - 1].st.peak_samples++;
        CTS_ASSERT_MSG(!same_rows(&ra, &rb, "(a peak sample added)"), "%s: unseen", what);
      }
      *compared += ra.n;
      cts_rows_fini(&ra);
      cts_rows_fini(&rb);
    }
  cts_mem_trace_free(&full);
  cts_mem_trace_free(&site);
}

CTS_TEST(flat_rows_by_site_are_the_full_profiles_on_generated_traces) {
  const char *const traces[] = {churn, kept, whole};
  for (size_t k = 0; k < CTS_ARRAY_SIZE(traces); k++) {
    /* What the figures by site must get right is there: collects, survivors, peaks. */
    cts_mem_trace_t t;
    CTS_ASSERT_EQ_INT(load(&t, traces[k], true), 0);
    const cts_stacks_t *s = &t.prof.stacks;
    CTS_ASSERT(s->live_by_site && s->lean != NULL && s->stats == NULL);
    CTS_ASSERT(t.prof.collected_allocs > 0 && t.prof.live_blocks > 0 && t.prof.promoted_allocs > 0);
    CTS_ASSERT(s->site_count == 48 && s->peak_samples >= s->live_samples && s->live_samples > 0);
    cts_mem_trace_free(&t);
    size_t rows = 0;
    check_trace(traces[k], &rows);
    CTS_ASSERT(rows > 100);
  }
}

/* Every memtrace trace of the corpus, truncated ones included. */
CTS_TEST(flat_rows_by_site_are_the_full_profiles_on_the_corpus) {
  CTS_REQUIRE_CORPUS(corpus);
  corpus_list_t l;
  corpus_list_memtrace(corpus, &l);
  size_t rows = 0;
  for (size_t i = 0; i < l.n; i++) check_trace(l.paths[i], &rows);
  CTS_ASSERT(l.n >= 10 && rows > 0);
  corpus_list_free(&l);
}

CTS_TEST_MAIN()
