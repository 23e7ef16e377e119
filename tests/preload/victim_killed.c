/* SPDX-License-Identifier: MIT */
/* Allocates 22222-byte blocks, then dies by SIGKILL: the trace must still hold those
 * blocks. Without an argument it first waits long enough for the writer's periodic flush
 * (what a writer thread needs); with "now" it dies at once, after 10 000 more blocks of
 * 33333 bytes, which only a writer process (it finishes the trace) keeps. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "victim.h"

int main(int argc, char **argv) {
  victim_quiet_stdio();
  const int now = argc > 1 && strcmp(argv[1], "now") == 0;
  void *keep[10];
  for (int i = 0; i < 10; i++) keep[i] = malloc(22222);
  if (now)
    for (int i = 0; i < 10000; i++) free(malloc(33333));
  printf("allocated\n");
  fflush(stdout);
  if (!now) sleep(3); /* the tracer flushes at least every second */
  raise(SIGKILL);
  free(keep[0]);
  return 0;
}
