/* SPDX-License-Identifier: MIT */
/* Never harm the traced program: one that calls pthread_getattr_np (victim_getattr.c)
 * runs to the same output under `record` at rate 1 with every unwinder. Each run has a
 * time limit: the fault this guards against was a deadlock. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../run_cmd.h"
#include "../test.h"

CTS_TEST(program_asking_for_its_stack_runs_under_every_unwinder) {
  static const char *const unwinders[] = {"mixed", "fp", "libunwind"};
  char trace[64];
  snprintf(trace, sizeof trace, "/tmp/cts-getattr-%d.ctf", (int)getpid());
  for (size_t i = 0; i < sizeof unwinders / sizeof *unwinders; i++) {
    char *record[] = {CTS_TEST_CTFSCOPE,
                      "record",
                      "-q",
                      "-r",
                      "1",
                      "--unwind",
                      (char *)unwinders[i],
                      "-o",
                      trace,
                      "--",
                      CTS_TEST_VICTIM,
                      NULL};
    run_result_t r;
    const bool ran = run_cmd(record, NULL, 30, &r);
    CTS_ASSERT_MSG(ran && !r.timed_out, "%s: record timed out (a deadlock)", unwinders[i]);
    CTS_ASSERT_MSG(r.exit_code == 0 && r.out && strcmp(r.out, "50 50\n") == 0,
                   "%s: exit %d, output '%s', stderr '%s'", unwinders[i], r.exit_code,
                   r.out ? r.out : "", r.err ? r.err : "");
    run_result_free(&r);
    unlink(trace);
  }
}

CTS_TEST_MAIN()
