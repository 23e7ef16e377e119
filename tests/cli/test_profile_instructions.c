/* SPDX-License-Identifier: MIT */
/* Guards for the allocation profile's cost per event (issue #20 point 2), on gen_trace's
 * survivors shape, where 90 % of blocks are never collected and 81 % of allocations repeat
 * the backtrace before them: nearly all the work of these commands past the reader is the
 * profile's allocation path (alloc_profile.c), one copy per configuration. Instructions per
 * event as cachegrind counts them (the same every run), the difference between a trace of
 * 20 000 and one of 100 000 events (survivors_cachegrind.h).
 *
 * Each guard bounds the command's count less `info`'s on the same traces (the reader's own
 * decoding), so that a change of the reader (wip/h36read's arithmetic decoding: +6.6 an
 * event) does not move the profile's bounds. Release build, main at 3fd02c2 against this
 * code, command - info:
 *  - `top` (live figures by site, the allocation point alone: alloc_by_site): 384.5 - 120.8
 *    = 263.7 -> 240.4;
 *  - `stats` (no stacks: alloc_heap): 294.0 - 120.8 = 173.2 -> 159.1;
 *  - `export -f folded` (allocated figures, whole stacks: cts_stacks_intern_repeat takes a
 *    repeated backtrace's node without the call): 306.6 - 120.8 = 185.8 -> 156.2.
 * Unoptimised builds are not checked: their copies cost alike (debug `stats` 894.7 ->
 * 898.0). */
#include <unistd.h>

#include "../test.h"
#include "../cachegrind.h"
#include "survivors_cachegrind.h"

typedef struct guard {
  const char *args[4];
  double bound; /* the command's instructions per event less info's */
} guard_t;

static const guard_t GUARDS[] = {
    {{"top", NULL}, 252.0},
    {{"stats", NULL}, 166.0},
    {{"export", "-f", "folded", NULL}, 171.0},
};

CTS_TEST(profile_instructions_per_event) {
  const char *const unusable = cachegrind_unusable();
  if (unusable) CTS_SKIP("%s", unusable);
#ifndef NDEBUG
  CTS_SKIP("the bounds are the release build's (an unoptimised build's copies cost alike)");
#endif
  double reader[5];
  survivors_per_event("cts-profile-instructions", (const char *[]){"info", NULL}, false, reader);
  if (cts_test_state.failed) return;
  fprintf(stderr, "  info: %.1f instructions per event\n", reader[0]);
  for (size_t i = 0; i < sizeof GUARDS / sizeof *GUARDS && !cts_test_state.failed; i++) {
    const guard_t *g = &GUARDS[i];
    double per_event[5];
    survivors_per_event("cts-profile-instructions", g->args, false, per_event);
    if (cts_test_state.failed) return;
    const double ir = per_event[0] - reader[0];
    fprintf(stderr, "  %s: %.1f instructions per event above info's (at most %.0f)\n", g->args[0],
            ir, g->bound);
    /* Not vacuous: the events were profiled. */
    CTS_ASSERT_MSG(ir > 50.0, "%s: %.1f instructions per event above info's", g->args[0], ir);
    CTS_ASSERT_MSG(ir <= g->bound, "%s: %.1f instructions per event above info's (at most %.0f)",
                   g->args[0], ir, g->bound);
  }
}

CTS_TEST_MAIN()
