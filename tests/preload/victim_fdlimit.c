/* SPDX-License-Identifier: MIT */
/* A program that counts the descriptors its limit (RLIMIT_NOFILE) leaves it, as test suites
 * and servers under a small `ulimit -n` find it: allocates (so that a traced image samples
 * and its writer is made), then opens /dev/null until it fails, and prints the first number
 * it got, how many it got, why it stopped and the soft limit it sees, e.g.
 * "first 3, opened 29, Too many open files, limit 32". The tracer's descriptors must take
 * none of them: traced, the line is the untraced one. Exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void *volatile keep[64];

int main(void) {
  for (int i = 0; i < 64; i++) {
    keep[i] = malloc(1 << 20);
    if (!keep[i]) return 2;
    memset(keep[i], i, 1 << 20);
  }
  int first = -1, opened = 0, why = 0;
  for (; opened < 100000; opened++) {
    const int fd = open("/dev/null", O_RDONLY);
    if (fd < 0) {
      why = errno;
      break;
    }
    if (first < 0) first = fd;
  }
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 3;
  printf("first %d, opened %d, %s, limit %llu\n", first, opened, strerror(why),
         (unsigned long long)limit.rlim_cur);
  return 0;
}
