/* SPDX-License-Identifier: MIT */
/* The peak RSS of a ctfscope run, for the tests that bound a command's memory (issue 20).
 * Under ASan (redzones, the quarantine of freed memory) RSS says little: CTS_SKIP_UNDER_ASAN
 * skips the test there. */
#ifndef CTS_TEST_PEAK_RSS_H
#define CTS_TEST_PEAK_RSS_H

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "../test.h"
#include "common/compiler.h"

extern char **environ;

#if CTS_UNDER_ASAN
#define CTS_SKIP_UNDER_ASAN() CTS_SKIP("ASan's redzones and quarantine: RSS says little here")
#else
#define CTS_SKIP_UNDER_ASAN() ((void)0)
#endif

/* Peak RSS (KiB) of ctfscope args..., output to /dev/null; -1 if it failed. */
static inline long peak_kib(char *const *args) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int e = posix_spawn(&pid, CTS_TEST_CTFSCOPE, &fa, NULL, args, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e) return -1;
  int st;
  struct rusage ru;
  if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
  return ru.ru_maxrss;
}

#endif /* CTS_TEST_PEAK_RSS_H */
