/* SPDX-License-Identifier: MIT */
/* Knows its own totals: makes COUNT allocations of pseudo-random sizes (malloc and calloc),
 * frees every other one at once and the rest at the end, then prints
 * "allocs=A frees=F words=W" where W is the sum of the sizes rounded up to 8-byte words. */
#include <string.h>

#include "victim.h"

int main(int argc, char **argv) {
  victim_quiet_stdio();
  const long count = argc > 1 ? atol(argv[1]) : 20000;
  const size_t max_size = argc > 2 ? (size_t)atol(argv[2]) : 2048;
  uint64_t state = 12345, words = 0, allocs = 0, frees = 0, checksum = 0;
  void **keep = malloc((size_t)count * sizeof *keep);
  allocs++;
  words += ((size_t)count * sizeof *keep + 7) / 8;
  for (long i = 0; i < count; i++) {
    const size_t size = 1 + victim_next(&state) % max_size;
    unsigned char *p = (i % 3 == 0) ? calloc(1, size) : malloc(size);
    if (!p) return 2;
    p[0] = (unsigned char)i;
    checksum += p[0];
    allocs++;
    words += (size + 7) / 8;
    if (i % 2) {
      free(p);
      frees++;
      keep[i] = NULL;
    } else {
      keep[i] = p;
    }
  }
  for (long i = 0; i < count; i++)
    if (keep[i]) {
      free(keep[i]);
      frees++;
    }
  free(keep);
  frees++;
  printf("allocs=%llu frees=%llu words=%llu checksum=%llu\n", (unsigned long long)allocs,
         (unsigned long long)frees, (unsigned long long)words, (unsigned long long)checksum);
  return 0;
}
