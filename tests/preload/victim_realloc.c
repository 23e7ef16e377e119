/* SPDX-License-Identifier: MIT */
/* realloc chains (growing, shrinking, from NULL, to 0) and reallocarray. Prints its counts:
 * allocs = calls that returned a new block, frees = blocks given back (free, or realloc of
 * a non-NULL block). */
#include <string.h>

#include "victim.h"

int main(void) {
  victim_quiet_stdio();
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
