/* SPDX-License-Identifier: MIT */
/* common/decimal.h against printf: every value it takes, and no byte stored past the
 * four it may store. */
#include <stdio.h>
#include <string.h>

#include "../test.h"
#include "common/decimal.h"

CTS_TEST(three_or_four_digits_match_printf_for_every_value) {
  for (uint32_t v = 100; v < 10000; v++) {
    char want[16], got[8];
    snprintf(want, sizeof want, "%u", (unsigned)v);
    memset(got, '#', sizeof got);
    const size_t n = cts_dec_3or4(got, v);
    for (size_t i = 4; i < sizeof got; i++) CTS_ASSERT_EQ_INT(got[i], '#');
    CTS_ASSERT_EQ_INT((int)n, (int)strlen(want));
    got[n] = 0;
    CTS_ASSERT_STR_EQ(got, want);
  }
}

CTS_TEST_MAIN()
