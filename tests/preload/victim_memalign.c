/* SPDX-License-Identifier: MIT */
/* Every aligned allocator, checking the alignment it gets. */
#include <malloc.h>
#include <stdint.h>

#include "victim.h"

int main(void) {
  victim_quiet_stdio();
  uint64_t allocs = 0, bad = 0;
  for (size_t align = 16; align <= 65536; align *= 2) {
    void *p = NULL;
    if (posix_memalign(&p, align, 1000) != 0) return 2;
    bad += ((uintptr_t)p & (align - 1)) != 0;
    free(p);
    void *q = aligned_alloc(align, align * 2);
    bad += ((uintptr_t)q & (align - 1)) != 0;
    free(q);
    void *r = memalign(align, 300);
    bad += ((uintptr_t)r & (align - 1)) != 0;
    free(r);
    allocs += 3;
  }
  void *v = valloc(5000);
  void *pv = pvalloc(5000);
  bad += ((uintptr_t)v & 4095) != 0 || ((uintptr_t)pv & 4095) != 0;
  free(v);
  free(pv);
  allocs += 2;
  printf("allocs=%llu frees=%llu misaligned=%llu\n", (unsigned long long)allocs,
         (unsigned long long)allocs, (unsigned long long)bad);
  return bad ? 1 : 0;
}
