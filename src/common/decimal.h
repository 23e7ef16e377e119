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

/* The 8 decimal digits of v < 10^8, leading zeros included, as ASCII bytes in a word whose
 * lowest byte is the first digit: the halves, quarters and digits are split in parallel
 * (SWAR), each division by a multiply and shift that is exact in its range (x / 100 as
 * x * 10486 >> 20 for x < 10^4, x / 10 as x * 103 >> 10 for x < 100; checked by
 * tests/os/test_output_numbers over every 4-digit value) and no lane's product reaches the
 * next lane. About a third of the instructions of two digits per division, and no table. */
static inline uint64_t cts_dec_digits8(uint32_t v) {
  const uint64_t x = (uint64_t)(v / 10000u) | (uint64_t)(v % 10000u) << 32;
  const uint64_t h = (x * 10486u) >> 20 & UINT64_C(0x0000007F0000007F);
  const uint64_t y = h | (x - h * 100u) << 16;
  const uint64_t t = (y * 103u) >> 10 & UINT64_C(0x000F000F000F000F);
  const uint64_t z = t | (y - t * 10u) << 8;
  return z + UINT64_C(0x3030303030303030);
}

/* The 5 to 8 digits of v (10^4 <= v < 10^8) at d, which has room for 8 bytes: all eight
 * are stored, the digits first. Returns the digit count. Object ids and byte counts: inline
 * where the general converter's call and digit count cost twice as much. */
static inline size_t cts_dec_5to8(char *d, uint32_t v) {
  const size_t n = 5u + (v >= 100000u) + (v >= 1000000u) + (v >= 10000000u);
  cts_st_le64((uint8_t *)d, cts_dec_digits8(v) >> (8u * (8u - n)));
  return n;
}

#endif /* CTS_DECIMAL_H */
