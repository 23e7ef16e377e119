/* SPDX-License-Identifier: MIT */
/* Allocates 55555-byte blocks, then execs itself with "after": the new image allocates
 * 66666-byte blocks (untraced: the preload clears MEMTRACE) and exits with 7. */
#include <string.h>
#include <unistd.h>

#include "victim.h"

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
  char *args[] = {argv[0], "after", NULL};
  execv("/proc/self/exe", args);
  free(kept);
  return 2;
}
