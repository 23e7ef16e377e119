/* SPDX-License-Identifier: MIT */
/* The preload library's own frame between a thread and its start routine (thread_start in
 * preload_pthread.c, there when threads are traced as tasks) never shows in the program's
 * stacks: `record --tasks` of a threaded program, with each unwinder, then the folded
 * stacks of `export` have the start routine right under glibc's start_thread. */
#include <stdlib.h>
#include <unistd.h>

#include "../run_cmd.h"
#include "../test.h"

static void check_unwinder(const char *unwind) {
  char dir[] = "/tmp/cts-thread-stacks-XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  char trace[128], tasks[128];
  snprintf(trace, sizeof trace, "%s/t.ctf", dir);
  snprintf(tasks, sizeof tasks, "%s/t.tasks.ctf", dir);
  char *rec[] = {(char *)CTS_TEST_CTFSCOPE,
                 "record",
                 "-q",
                 "-r",
                 "1",
                 "--unwind",
                 (char *)unwind,
                 "--tasks",
                 "-o",
                 trace,
                 (char *)CTS_TEST_VICTIM,
                 NULL};
  setenv("CTFSCOPE_PRELOAD", CTS_TEST_PRELOAD, 1);
  run_result_t r;
  CTS_ASSERT(run_cmd(rec, NULL, 60, &r));
  unsetenv("CTFSCOPE_PRELOAD");
  CTS_ASSERT_MSG(r.exit_code == 0, "%s: exit %d: %s", unwind, r.exit_code, r.err);
  run_result_free(&r);
  char *exp[] = {(char *)CTS_TEST_CTFSCOPE, "export", "--format", "folded", trace, NULL};
  CTS_ASSERT(run_cmd(exp, NULL, 60, &r));
  CTS_ASSERT_MSG(r.exit_code == 0, "%s: %s", unwind, r.err);
  CTS_ASSERT_MSG(!strstr(r.out, "thread_start"), "%s:\n%s", unwind, r.out);
  /* 2048 bytes x 1000 and 64 x 1000, exactly: rate 1. */
  CTS_ASSERT_MSG(strstr(r.out, "start_thread;big_blocks_routine 2048000\n"), "%s:\n%s", unwind,
                 r.out);
  CTS_ASSERT_MSG(strstr(r.out, "start_thread;small_blocks_routine 64000\n"), "%s:\n%s", unwind,
                 r.out);
  run_result_free(&r);
  unlink(trace);
  unlink(tasks);
  rmdir(dir);
}

CTS_TEST(frame_pointers) {
  check_unwinder("fp");
}

#ifdef CTS_TEST_HAVE_LIBUNWIND
CTS_TEST(libunwind) {
  check_unwinder("libunwind");
}

CTS_TEST(mixed) {
  check_unwinder("mixed");
}
#endif

CTS_TEST_MAIN()
