/* SPDX-License-Identifier: MIT */
/* Allocates 55555-byte blocks, then execs itself with "after" through the function named
 * by argv[1] (execv by default; execve, execvp, execvpe, execl, execlp, execle): the new
 * image allocates 66666-byte blocks and exits with 7. Traced, the new image goes on
 * tracing into the next file (tracer.h, "Processes"). With "fork-exec", a forked child
 * execs itself instead (the child is not traced) and the parent exits with its status. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "victim.h"

extern char **environ;

static void exec_self(const char *how, char *argv0) {
  static const char self[] = "/proc/self/exe";
  char *args[] = {argv0, "after", NULL};
  if (strcmp(how, "execve") == 0)
    execve(self, args, environ);
  else if (strcmp(how, "execvp") == 0)
    execvp(self, args);
  else if (strcmp(how, "execvpe") == 0)
    execvpe(self, args, environ);
  else if (strcmp(how, "execl") == 0)
    execl(self, argv0, "after", (char *)NULL);
  else if (strcmp(how, "execlp") == 0)
    execlp(self, argv0, "after", (char *)NULL);
  else if (strcmp(how, "execle") == 0)
    execle(self, argv0, "after", (char *)NULL, environ);
  else
    execv(self, args);
}

int main(int argc, char **argv) {
  victim_quiet_stdio();
  if (argc > 1 && strcmp(argv[1], "after") == 0) {
    for (int i = 0; i < 10; i++) free(malloc(66666));
    printf("after exec\n");
    return 7;
  }
  for (int i = 0; i < 10; i++) free(malloc(55555));
  void *kept = malloc(55555);
  printf("before exec\n");
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "fork-exec") == 0) {
    const pid_t pid = fork();
    if (pid == 0) {
      exec_self("execv", argv[0]);
      _exit(2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    free(kept);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
  }
  exec_self(argc > 1 ? argv[1] : "execv", argv[0]);
  free(kept);
  return 2;
}
