/* SPDX-License-Identifier: MIT */
/* Guard for the allocation profile's cost per event (issue #20 point 2): `ctfscope top` on
 * gen_trace's survivors shape keeps live figures by site (cts_alloc_profile_config_t
 * .live_by_site, as the report and diff do), so nearly all its work past the reader is the
 * profile's allocation path (alloc_profile.c, alloc_by_site) on 90 % of blocks that are
 * never collected. Instructions per event as cachegrind counts them (the same every run),
 * the difference between two traces, which takes out the process's start and the page.
 * main at 3fd02c2: 384.5 an event in the release build, 1 185 in the debug build; with the
 * node's record loaded once and the by-site copy of the allocation path 361.4 and 1 154. */
#include <inttypes.h>
#include <unistd.h>

#include "../test.h"
#include "../cachegrind.h"
#include "scratch_dir.h"

#ifdef NDEBUG
#define IR_BOUND 372.0
#else
#define IR_BOUND 1170.0
#endif

/* Instructions of `ctfscope top` on a survivors trace of `events` events. */
static uint64_t top_instructions(unsigned events) {
  char trace[160], out[160], events_arg[32];
  snprintf(events_arg, sizeof events_arg, "%u", events);
  scratch_file("cts-profile-instructions", "survivors.ctf", trace, sizeof trace);
  scratch_file("cts-profile-instructions", "cachegrind.out", out, sizeof out);
  run_ok((char *[]){CTS_TEST_GEN_TRACE, "-o", trace, "--shape", "survivors", "--events", events_arg,
                    NULL});
  if (cts_test_state.failed) return 0;
  uint64_t counts[5];
  cachegrind_counts((char *[]){CTS_TEST_CTFSCOPE, "top", trace, NULL}, false, out, counts);
  return counts[0];
}

CTS_TEST(top_by_site_instructions_per_event) {
  const char *const unusable = cachegrind_unusable();
  if (unusable) CTS_SKIP("%s", unusable);
  enum { FEW = 20000, MANY = 100000 };
  const uint64_t few = top_instructions(FEW);
  if (cts_test_state.failed) return;
  const uint64_t many = top_instructions(MANY);
  if (cts_test_state.failed) return;
  const double ir = ((double)many - (double)few) / (MANY - FEW);
  fprintf(stderr, "  per event: %.1f instructions\n", ir);
  /* Not vacuous: the events were decoded and interned. */
  CTS_ASSERT_MSG(ir > 100.0, "%.1f instructions per event", ir);
  CTS_ASSERT_MSG(ir <= IR_BOUND, "%.1f instructions per event (at most %.0f)", ir,
                 (double)IR_BOUND);
}

CTS_TEST_MAIN()
