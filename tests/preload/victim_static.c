/* SPDX-License-Identifier: MIT */
/* A statically linked program: the dynamic loader never runs, so LD_PRELOAD is not loaded
 * and no trace is made.
 *
 *   victim_static exit       exits 0
 *   victim_static SIGNAL     kills itself with signal number SIGNAL */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  if (strcmp(argv[1], "exit") == 0) return 0;
  const int sig = atoi(argv[1]);
  if (sig <= 0) return 2;
  signal(sig, SIG_DFL);
  raise(sig);
  return 3;
}
