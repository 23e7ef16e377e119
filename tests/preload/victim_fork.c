/* SPDX-License-Identifier: MIT */
/* Forks: the child allocates 77777-byte blocks (it is not traced, so they must not appear
 * in the trace), frees blocks its parent allocated, and exits with 5; the parent waits
 * and goes on allocating 33333-byte blocks. With argv[1] "daemon": the child becomes a
 * daemon (a session of its own, its standard streams on /dev/null) that lives for 30 s,
 * and the parent prints its pid and exits at once, as a server's start command does. */
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "victim.h"

static int start_daemon(void) {
  free(malloc(33333));
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    setsid();
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++) dup2(null, fd);
    free(malloc(77777));
    sleep(30);
    _exit(0);
  }
  printf("daemon %d\n", (int)pid);
  return 0;
}

int main(int argc, char **argv) {
  victim_quiet_stdio();
  if (argc > 1 && strcmp(argv[1], "daemon") == 0) return start_daemon();
  void *before[10];
  for (int i = 0; i < 10; i++) before[i] = malloc(33333);
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    for (int i = 0; i < 10; i++) {
      free(before[i]);
      free(malloc(77777));
    }
    _exit(5);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  for (int i = 0; i < 10; i++) {
    free(before[i]);
    free(malloc(33333));
  }
  printf("child exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
