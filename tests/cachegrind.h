/* SPDX-License-Identifier: MIT */
/* Counts of a command under valgrind's cachegrind, for the deterministic guards (the same
 * instructions and simulated branch mispredictions every run). Include after test.h. */
#ifndef CTS_TEST_CACHEGRIND_H
#define CTS_TEST_CACHEGRIND_H

#include <inttypes.h>
#include <stdio.h>

#include "run_cmd.h"

/* Why this build cannot be counted under valgrind, or NULL. */
static inline const char *cachegrind_unusable(void) {
  if (access("/usr/bin/valgrind", X_OK) != 0) return "no /usr/bin/valgrind";
#if defined(__clang__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* Debian 12's valgrind (3.19) gives up on clang 14's DWARF 5; sanitizers' runtimes do not
   * run under valgrind. */
  return "valgrind cannot run this build";
#endif
  return NULL;
}

/* Runs argv (NULL-terminated, output discarded, at most 10 minutes) and fails the test unless
 * it exits 0. */
static inline void run_ok(char *const *argv) {
  run_result_t r;
  CTS_ASSERT_MSG(run_cmd(argv, "/dev/null", 600, &r), "%s cannot start", argv[0]);
  const int code = r.exit_code;
  const bool timed_out = r.timed_out;
  run_result_free(&r);
  CTS_ASSERT_MSG(!timed_out && code == 0, "%s: exit %d%s", argv[0], code,
                 timed_out ? " (timed out)" : "");
}

/* Runs argv under cachegrind, its cache simulation off and with `branches` its branch
 * simulation on, its output in out_file; counts[] gets the summary line's Ir, and with
 * branches also Bc, Bcm, Bi, Bim (counts[0..5)). */
static inline void cachegrind_counts(char *const *argv, bool branches, const char *out_file,
                                     uint64_t counts[5]) {
  char out_arg[512];
  snprintf(out_arg, sizeof out_arg, "--cachegrind-out-file=%s", out_file);
  char *vg[64] = {"/usr/bin/valgrind", "--tool=cachegrind", "--cache-sim=no", out_arg};
  size_t n = 4;
  if (branches) vg[n++] = "--branch-sim=yes";
  for (size_t i = 0; argv[i]; i++) {
    CTS_ASSERT(n < sizeof vg / sizeof *vg - 1);
    vg[n++] = argv[i];
  }
  vg[n] = NULL;
  for (size_t i = 0; i < 5; i++) counts[i] = 0;
  run_ok(vg);
  if (cts_test_state.failed) return;
  FILE *const f = fopen(out_file, "r");
  CTS_ASSERT_MSG(f != NULL, "no cachegrind output in %s", out_file);
  char line[256];
  int got = 0;
  while (fgets(line, sizeof line, f) && got == 0)
    got = sscanf(line, "summary: %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
                 &counts[0], &counts[1], &counts[2], &counts[3], &counts[4]);
  fclose(f);
  CTS_ASSERT_MSG(got >= (branches ? 3 : 1) && counts[0] > 0, "no summary in %s", out_file);
}

#endif /* CTS_TEST_CACHEGRIND_H */
