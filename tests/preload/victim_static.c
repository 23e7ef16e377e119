/* SPDX-License-Identifier: MIT */
/* A statically linked program: the dynamic loader never runs, so LD_PRELOAD is not loaded
 * and no trace is made.
 *
 *   victim_static exit       exits 0
 *   victim_static SIGNAL     kills itself with signal number SIGNAL
 *   victim_static env        prints "LD_PRELOAD=VALUE" or "LD_PRELOAD unset" (what the
 *                            loader of a dynamically linked program would have read) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  if (strcmp(argv[1], "exit") == 0) return 0;
  if (strcmp(argv[1], "env") == 0) {
    const char *const preload = getenv("LD_PRELOAD");
    if (preload)
      printf("LD_PRELOAD=%s\n", preload);
    else
      printf("LD_PRELOAD unset\n");
    return 0;
  }
  const int sig = atoi(argv[1]);
  if (sig <= 0) return 2;
  signal(sig, SIG_DFL);
  raise(sig);
  return 3;
}
