/* SPDX-License-Identifier: MIT */
/* realloc chains (growing, shrinking, from NULL, to 0) and reallocarray. Prints its counts:
 * allocs = calls that returned a new block, frees = blocks given back (free, or realloc of
 * a non-NULL block).
 *
 * With "grow": small blocks grown to 32 MiB each, which the allocator maps afresh; prints
 * whether the page faults of each realloc stayed far below the new size's 8192 pages (the
 * program has touched none of them yet; the untraced realloc copies the few old bytes) and
 * whether the old bytes survived. */
#include <string.h>
#include <sys/resource.h>

#include "victim.h"

static long minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

static int grow(void) {
  enum { BLOCKS = 4, OLD = 100, NEW = 32 << 20 };
  int few_faults = 1, kept = 1;
  for (int i = 0; i < BLOCKS; i++) {
    unsigned char *p = malloc(OLD);
    if (!p) return 3;
    for (int k = 0; k < OLD; k++) p[k] = (unsigned char)(k + i);
    const long before = minor_faults();
    unsigned char *const q = realloc(p, NEW);
    const long faults = minor_faults() - before;
    if (!q) return 3;
    /* A few for the allocator's and the sampler's own pages; 8192 if every page is touched. */
    if (faults > 256) few_faults = 0;
    for (int k = 0; k < OLD; k++) kept &= q[k] == (unsigned char)(k + i);
    free(q);
  }
  printf("grow: few faults %s, data kept %s\n", few_faults ? "yes" : "no", kept ? "yes" : "no");
  return 0;
}

int main(int argc, char **argv) {
  victim_quiet_stdio();
  if (argc > 1 && strcmp(argv[1], "grow") == 0) return grow();
  uint64_t allocs = 0, frees = 0, state = 99, checksum = 0;
  for (int chain = 0; chain < 200; chain++) {
    unsigned char *p = realloc(NULL, 16); /* = malloc */
    allocs++;
    p[0] = 1;
    for (int step = 0; step < 20; step++) {
      const size_t size = 16 + victim_next(&state) % 20000;
      p = realloc(p, size);
      allocs++, frees++;
      p[size - 1] = (unsigned char)step;
      checksum += p[0];
    }
    p = reallocarray(p, 100, 24);
    allocs++, frees++;
    checksum += p[0];
    if (chain % 2) {
      free(p);
      frees++;
    } else {
      p = realloc(p, 0); /* glibc: frees, returns NULL */
      frees++;
      if (p) return 3;
    }
  }
  printf("allocs=%llu frees=%llu checksum=%llu\n", (unsigned long long)allocs,
         (unsigned long long)frees, (unsigned long long)checksum);
  return 0;
}
