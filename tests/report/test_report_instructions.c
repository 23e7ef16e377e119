/* SPDX-License-Identifier: MIT */
/* Guard for `ctfscope report`'s cost per event past the reader (issue #20 point 2):
 *  - its event callback's fast path (report_mem.c, on_event) tests one compare against a
 *    bound made when the origin or the buckets change (fast_bound_set), where five tests of
 *    the origin, the event's time and both buckets' ranges took ~17 instructions an event;
 *  - the profile keeps only the buckets of the size and lifetime histograms, all the page
 *    prints of them (cfg.histogram_buckets_only: no totals, extremes or sum, ~18
 *    instructions an allocation or collection).
 * Instructions per event as cachegrind counts them on gen_trace's default shape (the
 * difference between 20 000 and 100 000 events, survivors_cachegrind.h), less `info`'s on
 * the same traces, release build, malloc's mmap threshold fixed as in
 * tests/cli/test_profile_instructions.c (whose bound of the same count, 2 678, holds any
 * report change there): main at 0c80975 2 674.8, with the one compare 2 665.3, with the
 * histograms' buckets alone too 2 654.8. */
#include <stdlib.h>
#include <unistd.h>

#include "../test.h"
#include "../cachegrind.h"
#include "../cli/survivors_cachegrind.h"

#define REPORT_BOUND 2658.0

CTS_TEST(report_instructions_per_event_past_the_reader) {
#ifndef NDEBUG
  CTS_SKIP("the bound is the release build's");
#endif
  const char *const unusable = cachegrind_unusable();
  if (unusable) CTS_SKIP("%s", unusable);
  CTS_ASSERT(setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072", 1) == 0);
  double info[5], report[5];
  shape_per_event("cts-report-instructions", "default", (const char *[]){"info", NULL}, false,
                  info);
  if (!cts_test_state.failed)
    shape_per_event("cts-report-instructions", "default",
                    (const char *[]){"report", "-q", "--threads", "1", "-o", "/dev/null", NULL},
                    false, report);
  unsetenv("GLIBC_TUNABLES");
  if (cts_test_state.failed) return;
  const double ir = report[0] - info[0];
  fprintf(stderr, "  report: %.1f instructions per event above info's (at most %.0f)\n", ir,
          REPORT_BOUND);
  CTS_ASSERT_MSG(ir > 1000.0, "%.1f instructions per event: the events were not reported", ir);
  CTS_ASSERT_MSG(ir <= REPORT_BOUND, "%.1f instructions per event above info's (at most %.0f)", ir,
                 REPORT_BOUND);
}

CTS_TEST_MAIN()
