/* SPDX-License-Identifier: MIT */
/* `diff` holds one trace's live blocks at a time (issue 20): on traces whose blocks all
 * survive, its peak RSS is about that of reading one of them (`stats`), not of two. */
#include "../test.h"
#include "hostile_traces.h"
#include "peak_rss.h"
#include "scratch_dir.h"

CTS_TEST(diff_peak_is_one_traces_live_blocks) {
  CTS_SKIP_UNDER_ASAN();
  char a[128], b[128];
  scratch_file("cts-diff-mem", "a.ctf", a, sizeof a);
  scratch_file("cts-diff-mem", "b.ctf", b, sizeof b);
  /* 1.5 M blocks, none collected: tens of MB of live records per trace. */
  ht_spec_t s = {.rate = 1,
                 .function = "Keep.alloc",
                 .file = "keep.ml",
                 .nallocs = 1500000,
                 .length = 2,
                 .nsamples = 2};
  CTS_ASSERT_EQ_INT(ht_write(&s, a), 0);
  s.nallocs = 1400000;
  CTS_ASSERT_EQ_INT(ht_write(&s, b), 0);
  const long one = peak_kib((char *[]){"ctfscope", "stats", "-q", a, NULL});
  const long base = peak_kib((char *[]){"ctfscope", "info", "-q", a, NULL});
  const long both = peak_kib((char *[]){"ctfscope", "diff", "-q", a, b, NULL});
  CTS_ASSERT(one > 0 && base > 0 && both > 0);
  fprintf(stderr, "  peak RSS: info %ld KiB, stats %ld KiB, diff %ld KiB\n", base, one, both);
  /* What diff holds beyond reading one trace, against what stats holds: the second
   * trace's live blocks (before) would double it. */
  CTS_ASSERT_MSG((both - base) * 10 < (one - base) * 13, "diff holds %ld KiB, stats %ld KiB",
                 both - base, one - base);
}

CTS_TEST_MAIN()
