/* SPDX-License-Identifier: MIT */
/* Runs a command as a child subreaper (PR_SET_CHILD_SUBREAPER) and waits for every process
 * it leaves behind before exiting with the command's status. bench/run_alloc_bench.sh runs
 * each configuration under /usr/bin/time through it: the tracer's writer process is nobody's
 * child (tracer.h, "The writer process"), so time's whole-process CPU figures would leave
 * it out; reparented here and waited for, its CPU time and memory are counted. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: subreaper COMMAND [ARG...]\n");
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    fprintf(stderr, "subreaper: prctl: %s\n", strerror(errno));
    return 2;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "subreaper: fork: %s\n", strerror(errno));
    return 2;
  }
  if (pid == 0) {
    execvp(argv[1], argv + 1);
    fprintf(stderr, "subreaper: %s: %s\n", argv[1], strerror(errno));
    _exit(127);
  }
  int code = 0;
  for (;;) {
    int status;
    const pid_t done = waitpid(-1, &status, 0);
    if (done < 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: nothing left */
    }
    if (done == pid) code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return code;
}
