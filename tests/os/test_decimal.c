/* SPDX-License-Identifier: MIT */
/* common/decimal.h against printf: every value of cts_dec_3or4, every lane value of
 * cts_dec_5to8, and no byte stored past the four or eight they may store. */
#include <stdio.h>
#include <string.h>

#include "../test.h"
#include "common/decimal.h"

/* fmt(v) writes what printf's "%u" does and stores nothing past its first `room` bytes. */
static void as_printf(size_t (*fmt)(char *, uint32_t), size_t room, uint32_t v) {
  char want[16], got[16];
  snprintf(want, sizeof want, "%u", (unsigned)v);
  memset(got, '#', sizeof got);
  const size_t n = fmt(got, v);
  for (size_t i = room; i < sizeof got; i++) CTS_ASSERT_EQ_INT(got[i], '#');
  CTS_ASSERT_EQ_INT((int)n, (int)strlen(want));
  got[n] = 0;
  CTS_ASSERT_STR_EQ(got, want);
}

CTS_TEST(three_or_four_digits_match_printf_for_every_value) {
  for (uint32_t v = 100; v < 10000; v++) as_printf(cts_dec_3or4, 4, v);
}

/* Each 4-digit half (the SWAR lanes) over all its values, the other half at its edges and
 * equal to it; and each digit count's edges. */
CTS_TEST(five_to_eight_digits_match_printf_on_every_lane_value) {
  static const uint32_t highs[] = {1, 9, 10, 99, 100, 999, 1000, 5000, 9999};
  for (uint32_t lo = 0; lo < 10000; lo++)
    for (size_t i = 0; i < sizeof highs / sizeof *highs; i++)
      as_printf(cts_dec_5to8, 8, highs[i] * 10000u + lo);
  for (uint32_t hi = 1; hi < 10000; hi++) {
    as_printf(cts_dec_5to8, 8, hi * 10000u);
    as_printf(cts_dec_5to8, 8, hi * 10000u + 9999u);
    as_printf(cts_dec_5to8, 8, hi * 10000u + hi);
  }
  for (uint32_t p = 10000; p <= 10000000u; p *= 10) {
    as_printf(cts_dec_5to8, 8, p);
    as_printf(cts_dec_5to8, 8, p + 1);
    as_printf(cts_dec_5to8, 8, p * 10 - 1);
  }
}

CTS_TEST_MAIN()
