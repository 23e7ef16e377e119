/* SPDX-License-Identifier: MIT */
/* Forks: the child allocates 77777-byte blocks (it is not traced, so they must not appear
 * in the trace), frees blocks its parent allocated, and exits with 5; the parent waits
 * and goes on allocating 33333-byte blocks. */
#include <sys/wait.h>
#include <unistd.h>

#include "victim.h"

int main(void) {
  victim_quiet_stdio();
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
