/* SPDX-License-Identifier: MIT */
/* Allocates 22222-byte blocks, waits long enough for the writer thread's periodic flush,
 * then dies by SIGKILL: the trace must still hold those blocks. */
#include <signal.h>
#include <unistd.h>

#include "victim.h"

int main(void) {
  victim_quiet_stdio();
  void *keep[10];
  for (int i = 0; i < 10; i++) keep[i] = malloc(22222);
  printf("allocated\n");
  fflush(stdout);
  sleep(3); /* the tracer flushes at least every second */
  raise(SIGKILL);
  free(keep[0]);
  return 0;
}
