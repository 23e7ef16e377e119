/* SPDX-License-Identifier: MIT */
/* Runs a command and writes one line to FILE (-o FILE; stdout without it):
 * "WALL_S USER_S SYS_S STATUS", with microsecond resolution. bench/real/run.sh times every
 * run with it: /usr/bin/time -f prints centiseconds, too coarse to tell a 5 % overhead on
 * a 0.1 s program. CPU is getrusage(RUSAGE_CHILDREN) after the command is reaped, which
 * holds every descendant that was waited for; run the command through bench/subreaper.c
 * so that orphans (the tracer's writer process, a daemon) are waited for and counted.
 * STATUS is the command's exit code, or 128 + N if signal N ended it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds_of(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  const char *out_path = NULL;
  int first = 1;
  if (argc > 2 && strcmp(argv[1], "-o") == 0) {
    out_path = argv[2];
    first = 3;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: measure [-o FILE] COMMAND [ARG...]\n");
    return 2;
  }
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  const pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "measure: fork: %s\n", strerror(errno));
    return 2;
  }
  if (pid == 0) {
    execvp(argv[first], argv + first);
    fprintf(stderr, "measure: %s: %s\n", argv[first], strerror(errno));
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "measure: waitpid: %s\n", strerror(errno));
      return 2;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const double wall =
      (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
  /* The figures go to their own file so that the command's stdout and stderr stay its own. */
  FILE *out = out_path ? fopen(out_path, "w") : stdout;
  if (!out) {
    fprintf(stderr, "measure: %s: %s\n", out_path, strerror(errno));
    return 2;
  }
  fprintf(out, "%.6f %.6f %.6f %d\n", wall, seconds_of(ru.ru_utime), seconds_of(ru.ru_stime), code);
  if (out != stdout && fclose(out) != 0) return 2;
  return 0;
}
