/* SPDX-License-Identifier: MIT */
/* Guards for the allocation profile's cost per event (issue #20 point 2), on gen_trace's
 * survivors shape, where 90 % of blocks are never collected and 81 % of allocations repeat
 * the backtrace before them: nearly all the work of these commands past the reader is the
 * profile's allocation path (alloc_profile.c), one copy per configuration. Instructions per
 * event as cachegrind counts them (the same every run), the difference between a trace of
 * 20 000 and one of 100 000 events (survivors_cachegrind.h).
 *
 * main at 3fd02c2 against this code, release (debug):
 *  - `top` (live figures by site, the allocation point alone: alloc_by_site): 384.5 -> 358.0
 *    (1 185.3 -> 1 152.0);
 *  - `stats` (no stacks: alloc_heap): 294.0 -> 276.7 (894.7 -> 898.0: unoptimised, the
 *    copies cost alike);
 *  - `export -f folded` (allocated figures, whole stacks: cts_stacks_intern_repeat takes a
 *    repeated backtrace's node without the call): 306.6 -> 273.8 (889.5 -> 873.1).
 * The debug bounds are checked where they stand clear of main's figure.
 *
 * `report` on gen_trace's default shape (0.46 collections an event), which never prints the
 * lifetimes in samples (cfg.skip_life_samples): main at 7271c5f 2 832.2 -> 2 822.3 release
 * (~22 instructions a collection). */
#include <unistd.h>

#include "../test.h"
#include "../cachegrind.h"
#include "survivors_cachegrind.h"

typedef struct guard {
  const char *shape; /* gen_trace's */
  const char *args[8];
  double release_bound, debug_bound; /* instructions per event; debug 0: not checked */
} guard_t;

static const guard_t GUARDS[] = {
    {"survivors", {"top", NULL}, 370.0, 1170.0},
    {"survivors", {"stats", NULL}, 285.0, 0},
    {"survivors", {"export", "-f", "folded", NULL}, 292.0, 0},
};

/* The report never prints lifetimes in samples: its collections skip that histogram. */
static const guard_t REPORT_GUARD = {
    "default", {"report", "-q", "--threads", "1", "-o", "/dev/null", NULL}, 2827.0, 0};

/* Checks g's bound in this build (a bound of 0: not checked). */
static void check_guard(const guard_t *g) {
#ifdef NDEBUG
  const double bound = g->release_bound;
#else
  const double bound = g->debug_bound;
#endif
  if (bound == 0) return;
  double per_event[5];
  shape_per_event("cts-profile-instructions", g->shape, g->args, false, per_event);
  if (cts_test_state.failed) return;
  const double ir = per_event[0];
  fprintf(stderr, "  %s: %.1f instructions per event (at most %.0f)\n", g->args[0], ir, bound);
  /* Not vacuous: the events were decoded and profiled. */
  CTS_ASSERT_MSG(ir > 100.0, "%s: %.1f instructions per event", g->args[0], ir);
  CTS_ASSERT_MSG(ir <= bound, "%s: %.1f instructions per event (at most %.0f)", g->args[0], ir,
                 bound);
}

CTS_TEST(profile_instructions_per_event) {
  const char *const unusable = cachegrind_unusable();
  if (unusable) CTS_SKIP("%s", unusable);
  for (size_t i = 0; i < sizeof GUARDS / sizeof *GUARDS && !cts_test_state.failed; i++)
    check_guard(&GUARDS[i]);
}

CTS_TEST(report_instructions_per_event_without_lifetimes_in_samples) {
  const char *const unusable = cachegrind_unusable();
  if (unusable) CTS_SKIP("%s", unusable);
  check_guard(&REPORT_GUARD);
}

CTS_TEST_MAIN()
