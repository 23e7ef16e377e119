/* SPDX-License-Identifier: MIT */
/* For check_install.cmake: a traced program whose first allocation is sampled (1 GiB, at
 * any rate of the lazy writer), then names the writer executables running now: each
 * process whose /proc/PID/exe ends in "/ctfscope-writer", one path a line. A lazy session
 * spawns its writer synchronously at that sample, so an exec'd writer is there by then; a
 * writer forked at the start (no writer executable found) runs the program's executable and
 * is not listed. Exits 0, 2 if the allocation failed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
  void *volatile block = malloc((size_t)1 << 30); /* never touched: address space only */
  if (!block) return 2;
  DIR *proc = opendir("/proc");
  if (!proc) return 3;
  for (struct dirent *e; (e = readdir(proc)) != NULL;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char link[300], exe[4096];
    snprintf(link, sizeof link, "/proc/%s/exe", e->d_name);
    const ssize_t n = readlink(link, exe, sizeof exe - 1);
    if (n <= 0) continue;
    exe[n] = '\0';
    const char *const slash = strrchr(exe, '/');
    if (slash && strcmp(slash, "/ctfscope-writer") == 0) printf("%s\n", exe);
  }
  closedir(proc);
  free(block);
  return 0;
}
