/* SPDX-License-Identifier: MIT */
/* A program that reaps every child before it ends, as an init does: run as pid 1 of a pid
 * namespace (`unshare -p --fork`), it takes every orphan of the namespace, the tracer's
 * writer process too if it has one. Allocates (so that a traced image samples and its
 * writer is made), forks a child that exits 3, then waits until no child is left, and
 * prints its pid, what it reaped and how many others, e.g. "pid 1, child 3, others 0".
 * Traced, the line must be the untraced one, and the program must end. Exits 0. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile keep[64];

int main(void) {
  for (int i = 0; i < 64; i++) {
    keep[i] = malloc(1 << 16);
    if (!keep[i]) return 2;
    memset(keep[i], i, 1 << 16);
  }
  const pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) _exit(3);
  int status = 0, child_status = -1, others = 0;
  pid_t reaped;
  while ((reaped = wait(&status)) > 0) {
    if (reaped == child && WIFEXITED(status))
      child_status = WEXITSTATUS(status);
    else
      others++;
  }
  if (errno != ECHILD) return 2;
  printf("pid %d, child %d, others %d\n", (int)getpid(), child_status, others);
  for (int i = 0; i < 64; i++) free(keep[i]);
  return 0;
}
