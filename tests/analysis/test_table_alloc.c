/* SPDX-License-Identifier: MIT */
/* cts_table_alloc (sites.h): zeroed whatever its size (small ones from calloc, large ones on
 * 2 MiB pages, rounded up to them), NULL when n x size overflows. */
#include <stdint.h>

#include "../../src/analysis/sites.h"
#include "../test.h"

static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return false;
  return true;
}

CTS_TEST(small_and_large_tables_are_zeroed) {
  /* 12-byte slots as export -f folded's, below and above the 8 MiB where pages change. */
  static const size_t counts[] = {1, 1000, (8u << 20) / 12 - 1, (8u << 20) / 12 + 7, 3u << 20};
  for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
    unsigned char *t = cts_table_alloc(counts[k], 12);
    CTS_ASSERT(t);
    CTS_ASSERT(all_zero(t, counts[k] * 12));
    t[counts[k] * 12 - 1] = 1; /* the whole size is usable */
    free(t);
  }
}

CTS_TEST(an_overflowing_size_is_refused) {
  CTS_ASSERT(cts_table_alloc(SIZE_MAX / 8 + 2, 8) == NULL);
  CTS_ASSERT(cts_table_alloc(SIZE_MAX, 2) == NULL);
}

CTS_TEST_MAIN()
