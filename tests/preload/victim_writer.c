/* SPDX-License-Identifier: MIT */
/* Checks what a program could notice of its writer process, then kills it. It must not be
 * this program's child (wait() says ECHILD, as untraced) nor in its session. Traced, the
 * victim finds it (a process named ctfscope-writer whose environment holds this program's
 * original MEMTRACE setting and whose parent is not this program: not the intermediate
 * process that makes it, which the program does not wait for), says on stderr what it
 * found and kills it, then allocates on far past what the rings hold: the program must end
 * as it does untraced. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "victim.h"

/* The "MEMTRACE=..." entry of /proc/PID/environ (the environment the process started
 * with: the preload library's unsetenv does not change it), or "". */
static void memtrace_entry(const char *pid, char *out, size_t size) {
  static char env[1 << 16];
  char path[300];
  snprintf(path, sizeof path, "/proc/%s/environ", pid);
  out[0] = '\0';
  FILE *const f = fopen(path, "r");
  if (!f) return;
  const size_t n = fread(env, 1, sizeof env - 1, f);
  fclose(f);
  env[n] = '\0';
  for (size_t i = 0; i < n; i += strlen(env + i) + 1)
    if (strncmp(env + i, "MEMTRACE=", 9) == 0) {
      snprintf(out, size, "%s", env + i);
      return;
    }
}

static pid_t find_writer(void) {
  char mine[4096], theirs[4096];
  memtrace_entry("self", mine, sizeof mine);
  if (!mine[0]) return 0;
  DIR *const d = opendir("/proc");
  if (!d) return 0;
  pid_t found = 0;
  for (struct dirent *e; !found && (e = readdir(d));) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
    FILE *const f = fopen(path, "r");
    if (!f) continue;
    const int got = fgets(comm, sizeof comm, f) != NULL;
    fclose(f);
    if (!got || strcmp(comm, "ctfscope-writer\n") != 0) continue;
    memtrace_entry(e->d_name, theirs, sizeof theirs);
    if (strcmp(mine, theirs) != 0) continue;
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *const st = fopen(path, "r");
    int ppid = 0;
    if (st) {
      if (fscanf(st, "%*d (ctfscope-writer) %*c %d", &ppid) != 1) ppid = 0;
      fclose(st);
    }
    if (ppid > 0 && ppid != getpid()) found = (pid_t)atoi(e->d_name);
  }
  closedir(d);
  return found;
}

/* The writer process is made while the program runs: looked for up to 10 s. */
static pid_t wait_for_writer(void) {
  char mine[4096];
  memtrace_entry("self", mine, sizeof mine);
  if (!mine[0]) return 0;
  pid_t found = 0;
  for (int i = 0; i < 10000 && !(found = find_writer()); i++) usleep(1000);
  return found;
}

int main(void) {
  victim_quiet_stdio();
  errno = 0;
  const pid_t child = wait(NULL);
  printf("wait: %s\n", child < 0 && errno == ECHILD ? "no child" : "a child");
  const pid_t writer = wait_for_writer();
  if (writer > 0) {
    const pid_t sid = getsid(writer);
    fprintf(stderr, "writer process %d: %s session\n", (int)writer,
            sid == getsid(0) ? "the program's" : "its own");
    if (kill(writer, SIGKILL) == 0) fprintf(stderr, "killed the writer process\n");
  }
  uint64_t state = 7, sum = 0;
  for (int i = 0; i < 300000; i++) {
    char *const p = malloc(16 + victim_next(&state) % 2000);
    p[0] = (char)i;
    sum += (unsigned char)p[0];
    free(p);
  }
  printf("done %llu\n", (unsigned long long)sum);
  return 0;
}
