/* SPDX-License-Identifier: MIT */
/* `export -f csv|chrome` keep no profile (issue 20): they format each event from the trace,
 * so on a trace whose blocks all survive, csv holds no record per live block and chrome
 * only the 8 bytes of samples its heap counter needs, where the profile (`stats`) holds 24. */
#include "../test.h"
#include "hostile_traces.h"
#include "peak_rss.h"
#include "scratch_dir.h"

CTS_TEST(csv_and_chrome_keep_no_profile) {
  CTS_SKIP_UNDER_ASAN();
  char path[128];
  scratch_file("cts-export-mem", "keep.ctf", path, sizeof path);
  /* 1.5 M blocks, none collected: 36 MB of the profile's live records. */
  const ht_spec_t s = {.rate = 1,
                       .function = "Keep.alloc",
                       .file = "keep.ml",
                       .nallocs = 1500000,
                       .length = 2,
                       .nsamples = 2};
  CTS_ASSERT_EQ_INT(ht_write(&s, path), 0);
  /* One thread each: a second one's batches would blur the comparison. */
  const long base = peak_kib((char *[]){"ctfscope", "info", "-q", path, NULL});
  const long prof = peak_kib((char *[]){"ctfscope", "stats", "-q", "--threads", "1", path, NULL});
  const long csv =
      peak_kib((char *[]){"ctfscope", "export", "-q", "--threads", "1", "-f", "csv", path, NULL});
  const long chrome = peak_kib((char *[]){"ctfscope", "export", "-q", "--threads", "1", "-f",
                                          "chrome", "--max-size", "0", path, NULL});
  CTS_ASSERT(base > 0 && prof > 0 && csv > 0 && chrome > 0);
  fprintf(stderr, "  peak RSS: info %ld KiB, stats %ld KiB, csv %ld KiB, chrome %ld KiB\n", base,
          prof, csv, chrome);
  /* Beyond reading the trace (info): the profile's live table for stats; for csv a text
   * cache and an output buffer (~1.3 MiB), no block; for chrome a third of the table. */
  CTS_ASSERT_MSG((csv - base) * 8 < prof - base, "csv holds %ld KiB, stats %ld KiB", csv - base,
                 prof - base);
  CTS_ASSERT_MSG((chrome - base) * 2 < prof - base, "chrome holds %ld KiB, stats %ld KiB",
                 chrome - base, prof - base);
}

CTS_TEST_MAIN()
