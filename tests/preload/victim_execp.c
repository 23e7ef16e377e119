/* SPDX-License-Identifier: MIT */
/* A program that runs another by a bare name, found by PATH, as `env PROG` and programs
 * that spawn helpers do:
 *
 *   victim_execp execvp NAME        execvp(NAME)
 *   victim_execp execlp NAME        execlp(NAME)
 *   victim_execp posix_spawnp NAME  posix_spawnp(NAME), waits, prints "spawned: exit N"
 *
 * The exec'd program's output is its own. Exits 2 when it cannot run NAME. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  const char *const name = argv[2];
  if (strcmp(argv[1], "execvp") == 0) {
    char *const args[] = {(char *)name, NULL};
    execvp(name, args);
  } else if (strcmp(argv[1], "execlp") == 0) {
    execlp(name, name, (char *)NULL);
  } else if (strcmp(argv[1], "posix_spawnp") == 0) {
    char *const args[] = {(char *)name, NULL};
    pid_t child;
    if (posix_spawnp(&child, name, NULL, NULL, args, environ) != 0) return 2;
    int status = 0;
    if (waitpid(child, &status, 0) != child) return 2;
    fflush(stdout);
    printf("spawned: exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
  }
  return 2;
}
