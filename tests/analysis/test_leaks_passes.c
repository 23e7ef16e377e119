/* SPDX-License-Identifier: MIT */
/* `leaks` in two passes (analysis/leaks_load.h): the command prints the same bytes as in
 * one pass on the corpus and on generated traces of both shapes (text, JSON, CSV, every
 * --by, deep and shallow backtraces, ties between stacks of a row included); pass 2 interns
 * full stacks only for the blocks live at the end; one pass is kept for compressed files,
 * and chosen for a trace whose blocks mostly survive; progress covers both passes. */
#define _GNU_SOURCE
#include "../../src/analysis/leaks_load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/analysis/fold.h"
#include "../../src/common/hash.h"
#include "../mt_file_writer.h"
#include "../test.h"

static char tmpdir[] = "/tmp/cts_leaks_passes_XXXXXX";
static char churn[256], survivors[256], big[256], third[256];

/* Codes 1..24 are allocation points (a few names each, so that --by function and file
 * merge codes), 100.. the frames above them. */
static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static char names[64][32];
  static const char *const files[] = {"a.ml", "b.ml", "c.ml", "d.ml", "e.ml"};
  (void)ud;
  if (!max) return 1;
  snprintf(names[code % 64], sizeof names[0], "fn_%llu", (unsigned long long)(code % 37));
  out[0] = (cts_mt_location_t){.line = (uint32_t)(code % 7),
                               .start_char = 1,
                               .end_char = 9,
                               .filename = files[code % 5],
                               .defname = names[code % 64]};
  return 1;
}

/* n allocations of one sample each (so that many stacks of a row hold the same live bytes)
 * over stacks of 2-21 frames drawn from a few hundred codes; a block survives to the end
 * with probability keep_pct %, the others are collected up to 64 allocations later. */
static int make_trace(const char *path, uint64_t n, unsigned keep_pct) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, 0.01, resolve);
  if (e) return e;
  cts_mt_writer_t *w = fw.w;
  uint64_t bt[32], rng = 7, pending[64] = {0};
  for (uint64_t i = 0; !e && i < n; i++) {
    const uint64_t x = cts_splitmix64(&rng);
    const size_t depth = 2 + x % 20;
    for (size_t k = 0; k + 1 < depth; k++)
      bt[k] = 100 + k * 10 + (cts_splitmix64(&rng) >> 60) % (k < 4 ? 2 : 9);
    bt[depth - 1] = 1 + (x >> 8) % 24;
    uint64_t id;
    const uint64_t t = 1700000000000000ull + i * 10;
    e = cts_mt_writer_alloc(w, t, 1 + (x >> 20) % 40, 1, (cts_mt_source_t)((x >> 30) % 3), bt,
                            depth, &id);
    if (e || (x >> 40) % 100 < keep_pct) continue;
    const size_t slot = (x >> 48) % 64;
    if (pending[slot]) e = cts_mt_writer_collect(w, t + 5, pending[slot] - 1);
    pending[slot] = id + 1;
  }
  for (size_t s = 0; !e && s < 64; s++)
    if (pending[s]) e = cts_mt_writer_collect(w, 1700000000000000ull + n * 10 + s, pending[s] - 1);
  return mt_file_writer_close(&fw, e);
}

__attribute__((constructor)) static void setup(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    exit(1);
  }
  snprintf(churn, sizeof churn, "%s/churn.ctf", tmpdir);
  snprintf(survivors, sizeof survivors, "%s/survivors.ctf", tmpdir);
  snprintf(big, sizeof big, "%s/big.ctf", tmpdir);
  snprintf(third, sizeof third, "%s/third.ctf", tmpdir);
  if (make_trace(churn, 60000, 3) || make_trace(survivors, 30000, 90) ||
      make_trace(big, 700000, 3) || make_trace(third, 30000, 35)) {
    fprintf(stderr, "cannot write the traces in %s\n", tmpdir);
    exit(1);
  }
}

__attribute__((destructor)) static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
}

/* ---- the command's bytes, one pass against two ------------------------------------------ */

/* Runs `ctfscope leaks ARGS path` in one and in two passes: true when stdout, stderr and
 * the exit status are the same. */
static bool same_both_ways(const char *args, const char *path) {
  int status[2];
  for (int p = 1; p <= 2; p++) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' leaks --passes %d %s '%s' >'%s/out%d' 2>'%s/err%d'",
             CTS_TEST_CTFSCOPE, p, args, path, tmpdir, p, tmpdir, p);
    status[p - 1] = system(cmd);
  }
  char cmp[1024];
  snprintf(cmp, sizeof cmp, "cmp -s '%s/out1' '%s/out2' && cmp -s '%s/err1' '%s/err2'", tmpdir,
           tmpdir, tmpdir, tmpdir);
  return status[0] == status[1] && system(cmp) == 0;
}

static const char *const arg_sets[] = {
    "",
    "--json -n 0",
    "--csv -n 0",
    "-n 0 --depth 100",
    "--by function -n 0",
    "--by file --json -n 0 --depth 3",
    "-n 5 --depth 2",
    "--depth 0 -n 0",
};

static void check_all_args(const char *path) {
  for (size_t a = 0; a < CTS_ARRAY_SIZE(arg_sets); a++)
    CTS_ASSERT_MSG(same_both_ways(arg_sets[a], path), "leaks %s %s: one and two passes differ",
                   arg_sets[a], path);
}

CTS_TEST(two_passes_print_what_one_prints_on_generated_traces) {
  const char *const traces[] = {churn, survivors};
  for (size_t k = 0; k < CTS_ARRAY_SIZE(traces); k++) check_all_args(traces[k]);
}

CTS_TEST(two_passes_print_what_one_prints_on_the_corpus) {
  CTS_REQUIRE_CORPUS(corpus);
  static const char *const traces[] = {
      "memtrace/traces/p1_short_lived.r1.ctf",
      "memtrace/traces/p1_short_lived.r1.v3.ctf",
      "memtrace/traces/p1_short_lived.r1e-2.ctf",
      "memtrace/traces/p1_short_lived.r1e-2.trunc-body.ctf",
      "memtrace/traces/p1_short_lived.r1e-2.trunc-header.ctf",
      "memtrace/traces/p1_short_lived.r1e-4.ctf",
      "memtrace/traces/p2_leak.r1.ctf",
      "memtrace/traces/p2_leak.r1e-2.ctf",
      "memtrace/traces/p2_leak.r1e-4.ctf",
      "memtrace/traces/p3_large_arrays.r1.ctf",
      "memtrace/traces/p3_large_arrays.r1e-2.ctf",
      "memtrace/traces/p4_deep_recursion.r1.ctf",
      "memtrace/traces/p4_deep_recursion.r1e-2.ctf",
      "memtrace/traces/p5_mixed_promote.r1.ctf",
      "memtrace/traces/p5_mixed_promote.r1e-2.ctf",
      "memtrace/traces/p5_mixed_promote.r1e-4.ctf",
      "memtrace/traces/p5_mixed_promote.r1e-4.v3.ctf",
      "memtrace/public/memtrace-v0.2.3-examples-lists_and_sets.ctf",
  };
  for (size_t k = 0; k < CTS_ARRAY_SIZE(traces); k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", corpus, traces[k]);
    struct stat st;
    if (stat(path, &st) != 0) continue; /* a corpus of another version */
    check_all_args(path);
  }
}

/* ---- in-process: what each pass did ------------------------------------------------------ */

typedef struct progress {
  uint64_t calls, last_done, total, max_done;
} progress_t;

static void on_progress(void *ud, uint64_t done, uint64_t total) {
  progress_t *p = ud;
  p->calls++;
  p->last_done = done;
  p->total = total;
  if (done > p->max_done) p->max_done = done;
}

static int load(cts_mem_trace_t *t, const char *path, cts_leaks_passes_t passes,
                cts_leaks_load_stats_t *st, progress_t *pr) {
  static const cts_fold_config_t fold = {0};
  const cts_load_opts_t opts = {
      .fold = &fold, .progress = pr ? on_progress : NULL, .progress_user_data = pr};
  const cts_alloc_profile_config_t cfg = {.stacks = true, .history = true, .skip_histograms = true};
  return cts_leaks_trace_load(t, path, &cfg, &opts, passes, st);
}

CTS_TEST(pass_two_interns_full_stacks_only_for_blocks_live_at_the_end) {
  cts_mem_trace_t one, two;
  cts_leaks_load_stats_t s1, s2;
  CTS_ASSERT_EQ_INT(load(&one, churn, CTS_LEAKS_PASSES_ONE, &s1, NULL), 0);
  CTS_ASSERT_EQ_INT(load(&two, churn, CTS_LEAKS_PASSES_AUTO, &s2, NULL), 0);
  CTS_ASSERT_EQ_U64(s1.passes, 1);
  CTS_ASSERT_EQ_U64(s2.passes, 2);
  /* Exactly the blocks live at the end, each once: none of the collected ones. */
  CTS_ASSERT_EQ_U64(s2.marked, two.prof.live_blocks);
  CTS_ASSERT_EQ_U64(s2.full, two.prof.live_blocks);
  CTS_ASSERT_EQ_U64(s2.allocs, cts_alloc_profile_allocs(&one.prof));
  CTS_ASSERT(s2.full > 0 && s2.full * 10 < s2.allocs);
  /* The figures that do not depend on the trie's shape are the same. */
  CTS_ASSERT_EQ_U64(two.prof.live_blocks, one.prof.live_blocks);
  CTS_ASSERT_EQ_U64(two.prof.stacks.live_samples, one.prof.stacks.live_samples);
  CTS_ASSERT_EQ_U64(two.prof.stacks.peak_samples, one.prof.stacks.peak_samples);
  CTS_ASSERT_EQ_U64(two.prof.stacks.site_count, one.prof.stacks.site_count);
  /* And the trie holds a fraction of the nodes. */
  CTS_ASSERT_MSG(two.prof.stacks.count * 3 < one.prof.stacks.count, "%u nodes against %u",
                 two.prof.stacks.count, one.prof.stacks.count);
  cts_mem_trace_free(&one);
  cts_mem_trace_free(&two);
}

static int count_hook(void *ud, cts_mem_trace_t *t, const cts_mt_event_t *ev) {
  (void)t, (void)ev;
  ++*(uint64_t *)ud;
  return 0;
}

/* The loader's own test of the marks (cts_load_opts_t.full_stacks, which pass 2 uses rather
 * than a hook per event): full stacks for the marked ids only; ignored with a hook. */
CTS_TEST(the_loader_interns_full_stacks_of_marked_ids_only) {
  cts_mem_trace_t one, part, hooked;
  cts_leaks_load_stats_t s1;
  CTS_ASSERT_EQ_INT(load(&one, churn, CTS_LEAKS_PASSES_ONE, &s1, NULL), 0);
  cts_leaks_marks_t marks = {0};
  for (uint64_t id = 0; id < 1000; id++) CTS_ASSERT_EQ_INT(cts_leaks_mark_alloc(&marks, id), 0);
  static const cts_fold_config_t fold = {0};
  const cts_alloc_profile_config_t cfg = {.stacks = true, .history = true, .skip_histograms = true};
  const cts_load_opts_t opts = {.fold = &fold, .full_stacks = &marks};
  CTS_ASSERT_EQ_INT(cts_mem_trace_load(&part, churn, &cfg, &opts, NULL, NULL), 0);
  CTS_ASSERT_EQ_U64(part.full_allocs, 1000); /* ids 0..999, each allocated once */
  CTS_ASSERT_EQ_U64(part.prof.stacks.live_samples, one.prof.stacks.live_samples);
  CTS_ASSERT_EQ_U64(part.prof.stacks.site_count, one.prof.stacks.site_count);
  CTS_ASSERT_MSG(part.prof.stacks.count * 3 < one.prof.stacks.count, "%u nodes against %u",
                 part.prof.stacks.count, one.prof.stacks.count);
  uint64_t events = 0;
  CTS_ASSERT_EQ_INT(cts_mem_trace_load(&hooked, churn, &cfg, &opts, count_hook, &events), 0);
  CTS_ASSERT(events > 0);
  CTS_ASSERT_EQ_U64(hooked.full_allocs, 0);
  CTS_ASSERT_EQ_U64(hooked.prof.stacks.count, one.prof.stacks.count);
  cts_leaks_marks_fini(&marks);
  cts_mem_trace_free(&one);
  cts_mem_trace_free(&part);
  cts_mem_trace_free(&hooked);
}

/* Rows of t by `by`, sorted by live bytes, ties settled for all rows at depth 100. */
static void rows_of(cts_mem_trace_t *t, cts_group_t by, cts_leaks_load_stats_t *st, bool settle,
                    cts_rows_t *rows) {
  const cts_frames_t f = cts_mem_trace_frames(t);
  CTS_ASSERT_EQ_INT(cts_rows_build(rows, &t->prof.stacks, &f, by, CTS_SORT_LIVE,
                                   t->prof.start_time_us, t->prof.last_event_us),
                    0);
  cts_rows_sort(rows, CTS_SORT_LIVE);
  if (settle)
    CTS_ASSERT_EQ_INT(cts_leaks_settle_ties(t, rows, rows->n, by, 100, st, NULL, NULL), 0);
}

/* The frames of node's stack, innermost first. */
static bool same_stack(const cts_stacks_t *a, uint32_t na, const cts_stacks_t *b, uint32_t nb) {
  for (; na && nb; na = a->nodes[na].parent, nb = b->nodes[nb].parent)
    if (a->nodes[na].code != b->nodes[nb].code) return false;
  return na == 0 && nb == 0;
}

CTS_TEST(ties_between_stacks_are_settled_as_one_pass_settles_them) {
  cts_mem_trace_t one, two;
  cts_leaks_load_stats_t s1, s2;
  CTS_ASSERT_EQ_INT(load(&one, churn, CTS_LEAKS_PASSES_ONE, &s1, NULL), 0);
  CTS_ASSERT_EQ_INT(load(&two, churn, CTS_LEAKS_PASSES_TWO, &s2, NULL), 0);
  cts_rows_t r1, r2, unsettled;
  rows_of(&one, CTS_GROUP_LINE, &s1, true, &r1);
  rows_of(&two, CTS_GROUP_LINE, &s2, false, &unsettled);
  rows_of(&two, CTS_GROUP_LINE, &s2, true, &r2);
  CTS_ASSERT_EQ_U64(r1.n, r2.n);
  /* The trace has ties that the trie's numbering alone would decide otherwise. */
  size_t differ = 0;
  for (size_t i = 0; i < r1.n; i++)
    differ += !same_stack(&one.prof.stacks, r1.rows[i].first_node, &two.prof.stacks,
                          unsettled.rows[i].first_node);
  CTS_ASSERT_MSG(differ > 0, "no tie to settle: the test trace lost its point");
  CTS_ASSERT(s2.tie_rows > 0 && s2.ties_read > 0);
  for (size_t i = 0; i < r1.n; i++) {
    CTS_ASSERT_STR_EQ(r1.rows[i].key, r2.rows[i].key);
    CTS_ASSERT_MSG(same_stack(&one.prof.stacks, r1.rows[i].first_node, &two.prof.stacks,
                              r2.rows[i].first_node),
                   "row %zu (%s): another stack than one pass's", i, r1.rows[i].key);
  }
  cts_rows_fini(&r1);
  cts_rows_fini(&r2);
  cts_rows_fini(&unsettled);
  cts_mem_trace_free(&one);
  cts_mem_trace_free(&two);
}

/* Whether path loads in one pass for the reason why. */
static bool read_once_because(const char *path, cts_leaks_passes_t passes, const char *why) {
  cts_mem_trace_t t;
  cts_leaks_load_stats_t st;
  const int err = load(&t, path, passes, &st, NULL);
  const bool once = !err && st.passes == 1 && st.one_why && strcmp(st.one_why, why) == 0;
  if (!once) fprintf(stderr, "  %s: %d, %u passes (%s)\n", path, err, st.passes, st.one_why);
  cts_mem_trace_free(&t);
  return once;
}

#define GAVE_UP "over a quarter of the blocks live 1/8 into the trace"

CTS_TEST(a_trace_of_survivors_is_read_once) {
  CTS_ASSERT(read_once_because(survivors, CTS_LEAKS_PASSES_AUTO, GAVE_UP));
  cts_mem_trace_t t;
  cts_leaks_load_stats_t st;
  /* Forced, it reads twice and interns the survivors' stacks. */
  CTS_ASSERT_EQ_INT(load(&t, survivors, CTS_LEAKS_PASSES_TWO, &st, NULL), 0);
  CTS_ASSERT_EQ_U64(st.passes, 2);
  CTS_ASSERT_EQ_U64(st.full, t.prof.live_blocks);
  cts_mem_trace_free(&t);
}

CTS_TEST(a_compressed_trace_is_read_once) {
  char gz[300], cmd[800];
  snprintf(gz, sizeof gz, "%s/churn.ctf.gz", tmpdir);
  snprintf(cmd, sizeof cmd, "gzip -c '%s' >'%s'", churn, gz);
  if (system(cmd) != 0) CTS_SKIP("gzip is not available");
  CTS_ASSERT(read_once_because(gz, CTS_LEAKS_PASSES_TWO, "a compressed file"));
  CTS_ASSERT(same_both_ways("-n 0", gz));
}

CTS_TEST(a_fifo_is_read_once) {
  char fifo[300], cmd[1024];
  snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
  /* A writer in the background, blocked until the load opens the FIFO. */
  snprintf(cmd, sizeof cmd, "mkfifo '%s' && (cat '%s' >'%s' &)", fifo, churn, fifo);
  CTS_ASSERT(system(cmd) == 0);
  CTS_ASSERT(read_once_because(fifo, CTS_LEAKS_PASSES_TWO, "a pipe or standard input"));
}

/* A third of the blocks live 1/8 in (as python3's trace, half, whose blocks die later):
 * one pass, as cheaper than two there (churn, 3 % live, reads twice: above). */
CTS_TEST(a_third_live_early_is_read_once) {
  CTS_ASSERT(read_once_because(third, CTS_LEAKS_PASSES_AUTO, GAVE_UP));
}

CTS_TEST(marks_are_bounded_for_sparse_or_hostile_ids) {
  cts_leaks_marks_t m = {0};
  /* Nothing marked yet (no base): no id is live, whatever it is. */
  CTS_ASSERT(!cts_leaks_marked(&m, 0) && !cts_leaks_marked(&m, UINT64_MAX));
  /* Dense ids from any base (v3 domains start where their chunk does). */
  for (uint64_t id = 5000; id < 105000; id++) CTS_ASSERT_EQ_INT(cts_leaks_mark_alloc(&m, id), 0);
  cts_leaks_mark_collect(&m, 5001);
  cts_leaks_mark_collect(&m, 5001);                     /* twice: once counts */
  cts_leaks_mark_collect(&m, 4000);                     /* never allocated */
  cts_leaks_mark_collect(&m, 1u << 30);                 /* nor this */
  CTS_ASSERT_EQ_INT(cts_leaks_mark_alloc(&m, 5002), 0); /* again while live: one block */
  CTS_ASSERT_EQ_U64(m.live, 99999);
  CTS_ASSERT(cts_leaks_marked(&m, 5000) && !cts_leaks_marked(&m, 5001));
  CTS_ASSERT(!cts_leaks_marked(&m, 4999) && !cts_leaks_marked(&m, 105000));
  CTS_ASSERT(m.words * 64 <= 4 * 100000 + (2u << 20));
  /* An id below the first, or far past what the allocations so far allow: refused, with
   * nothing grown. */
  const size_t words = m.words;
  CTS_ASSERT_EQ_INT(cts_leaks_mark_alloc(&m, 4999), CTS_E_LIMIT);
  CTS_ASSERT_EQ_INT(cts_leaks_mark_alloc(&m, 5000 + 3 * 100002 + (1u << 20)), CTS_E_LIMIT);
  CTS_ASSERT_EQ_INT(cts_leaks_mark_alloc(&m, UINT64_MAX), CTS_E_LIMIT);
  CTS_ASSERT_EQ_U64(m.words, words);
  /* Ids a little sparse (every other one) stay within the bound. */
  for (uint64_t id = 105000; id < 305000; id += 2)
    CTS_ASSERT_EQ_INT(cts_leaks_mark_alloc(&m, id), 0);
  cts_leaks_marks_fini(&m);
}

CTS_TEST(progress_covers_both_passes) {
  struct stat sb;
  CTS_ASSERT(stat(big, &sb) == 0);
  CTS_ASSERT_MSG(sb.st_size > (8 << 20), "%lld bytes: too small for progress",
                 (long long)sb.st_size);
  cts_mem_trace_t t;
  cts_leaks_load_stats_t st;
  progress_t pr = {0};
  CTS_ASSERT_EQ_INT(load(&t, big, CTS_LEAKS_PASSES_AUTO, &st, &pr), 0);
  CTS_ASSERT_EQ_U64(st.passes, 2);
  /* One scale for both: twice the file, pass 1 the first half, pass 2 the second. */
  CTS_ASSERT_EQ_U64(pr.total, 2 * (uint64_t)sb.st_size);
  CTS_ASSERT(pr.calls >= 2);
  CTS_ASSERT(pr.max_done > (uint64_t)sb.st_size && pr.max_done <= pr.total);
  cts_mem_trace_free(&t);
}

CTS_TEST_MAIN()
