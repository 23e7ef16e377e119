/* SPDX-License-Identifier: MIT */
/* The guards' counts of a `ctfscope` command per event on gen_trace's survivors shape (or
 * another of its shapes), under
 * cachegrind (tests/cachegrind.h): the command runs on a trace of FEW and of MANY events
 * made in the test's scratch directory, and the difference of the two counts over MANY - FEW
 * takes out the process's start and end. Include after test.h and cachegrind.h; needs
 * CTS_TEST_GEN_TRACE. Not thread-safe (scratch files). */
#ifndef CTS_TEST_SURVIVORS_CACHEGRIND_H
#define CTS_TEST_SURVIVORS_CACHEGRIND_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "scratch_dir.h"

enum { SURVIVORS_FEW = 20000, SURVIVORS_MANY = 100000 };

/* cachegrind's summary counts (cachegrind_counts) of `ctfscope ARGS... TRACE` (args: at most
 * 8, NULL-terminated) on a trace of gen_trace's `shape` ("default" or "survivors") of
 * `events` events. */
static inline void shape_counts(const char *prefix, const char *shape, unsigned events,
                                const char *const *args, bool branches, uint64_t counts[5]) {
  char trace[160], out[160], events_arg[32], name[64];
  snprintf(events_arg, sizeof events_arg, "%u", events);
  snprintf(name, sizeof name, "%s.ctf", shape);
  scratch_file(prefix, name, trace, sizeof trace);
  scratch_file(prefix, "cachegrind.out", out, sizeof out);
  for (size_t i = 0; i < 5; i++) counts[i] = 0;
  run_ok((char *[]){CTS_TEST_GEN_TRACE, "-o", trace, "--shape", (char *)shape, "--events",
                    events_arg, NULL});
  if (cts_test_state.failed) return;
  char *argv[11] = {CTS_TEST_CTFSCOPE};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    CTS_ASSERT(n < 9);
    argv[n] = (char *)args[n - 1];
  }
  argv[n++] = trace;
  argv[n] = NULL;
  cachegrind_counts(argv, branches, out, counts);
}

/* shape_counts on the survivors shape. */
static inline void survivors_counts(const char *prefix, unsigned events, const char *const *args,
                                    bool branches, uint64_t counts[5]) {
  shape_counts(prefix, "survivors", events, args, branches, counts);
}

/* The counts per event on `shape` (SURVIVORS_FEW and SURVIVORS_MANY events), into
 * per_event[0..5). */
static inline void shape_per_event(const char *prefix, const char *shape, const char *const *args,
                                   bool branches, double per_event[5]) {
  uint64_t few[5], many[5];
  for (size_t i = 0; i < 5; i++) per_event[i] = 0;
  shape_counts(prefix, shape, SURVIVORS_FEW, args, branches, few);
  if (cts_test_state.failed) return;
  shape_counts(prefix, shape, SURVIVORS_MANY, args, branches, many);
  if (cts_test_state.failed) return;
  for (size_t i = 0; i < 5; i++)
    per_event[i] = ((double)many[i] - (double)few[i]) / (SURVIVORS_MANY - SURVIVORS_FEW);
}

/* shape_per_event on the survivors shape. */
static inline void survivors_per_event(const char *prefix, const char *const *args, bool branches,
                                       double per_event[5]) {
  shape_per_event(prefix, "survivors", args, branches, per_event);
}

#endif /* CTS_TEST_SURVIVORS_CACHEGRIND_H */
