/* SPDX-License-Identifier: MIT */
/* Decimal digits of small integers without division instructions or tables, for the
 * formatters of per-event outputs (csv writes three to five numbers a line, tens of
 * millions of lines): a number of three or four digits costs here about a third of a call
 * to the general converter. Pure functions, thread-safe; freestanding (endian.h only). */
#ifndef CTS_DECIMAL_H
#define CTS_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

#include "endian.h"

/* The 3 or 4 digits of v (100 <= v < 10000) at d, which has room for 4 bytes: all four
 * are stored, the digits first. Returns the digit count. Each division is a multiply and
 * shift exact in its range: v / 100 as v * 5243 >> 19 (exact below 43 699), x / 10 as
 * x * 103 >> 10 (exact below 179); tests/os/test_decimal checks every v. */
static inline size_t cts_dec_3or4(char *d, uint32_t v) {
  const uint32_t hi = v * 5243u >> 19; /* the first two digits */
  const uint32_t lo = v - hi * 100u;   /* the last two */
  const uint32_t hi_t = hi * 103u >> 10, lo_t = lo * 103u >> 10;
  /* One digit per byte, the first in the lowest (stored first, little-endian). */
  const uint32_t w =
      (hi_t | (hi - hi_t * 10u) << 8 | lo_t << 16 | (lo - lo_t * 10u) << 24) + UINT32_C(0x30303030);
  const size_t n = v >= 1000u ? 4 : 3;
  cts_st_le32((uint8_t *)d, n == 4 ? w : w >> 8); /* (3 digits: drop the leading '0') */
  return n;
}

#endif /* CTS_DECIMAL_H */
