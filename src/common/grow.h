/* SPDX-License-Identifier: MIT */
/* Growing a heap array by doubling, for the aggregations that append as they read. Not for
 * the freestanding core, which takes an injected allocator. */
#ifndef CTS_GROW_H
#define CTS_GROW_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/* Makes room for element n of *v (elements of size bytes, capacity *cap): 0, or -ENOMEM
 * with *v unchanged. The first allocation holds 1024 elements. */
static inline int cts_grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  const size_t c = *cap ? *cap * 2 : 1024;
  if (c > (size_t)-1 / size) return -ENOMEM;
  void *p = realloc(*v, c * size);
  if (!p) return -ENOMEM;
  *v = p;
  *cap = c;
  return 0;
}

#endif /* CTS_GROW_H */
