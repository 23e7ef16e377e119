/* SPDX-License-Identifier: MIT */
/* A program that starts another by posix_spawn (glibc execs the child by its own internal
 * execve, past the preload's exec hooks), with its own environment, waits for it and
 * prints "spawned: exit N". Usage: victim_spawn PROGRAM [ARG...]. Exits 0, or 2 when it
 * cannot spawn. */
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  pid_t child;
  if (posix_spawn(&child, argv[1], NULL, NULL, argv + 1, environ) != 0) return 2;
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 2;
  fflush(stdout);
  printf("spawned: exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
