/* SPDX-License-Identifier: MIT */
/* The buffered writer's number formatting (src/os/output.h) against printf, whose bytes the
 * exports wrote before: cts_out_fixed must give "%.*f" exactly (rounding half to even on
 * the exact binary value, signs, carries into the integer part, the values it hands back
 * to printf) and cts_out_u64 "%llu", for chosen and for random values. */
#include <inttypes.h>
#include <math.h>

#include "../test.h"
#include "common/hash.h"
#include "os/output.h"

static cts_out_t out;

/* Whether cts_out_fixed(v, d) writes what snprintf("%.*f") does; says which if not. */
static bool fixed_as_printf(double v, int d) {
  char want[400], got[400];
  snprintf(want, sizeof want, "%.*f", d, v);
  cts_out_init(&out, -1); /* never flushed: the buffer is read */
  cts_out_fixed(&out, v, d);
  const size_t n = out.len < sizeof got - 1 ? out.len : sizeof got - 1;
  memcpy(got, out.buf, n);
  got[n] = 0;
  if (strcmp(want, got) == 0) return true;
  fprintf(stderr, "  %%.%df of %a: printf '%s', cts_out_fixed '%s'\n", d, v, want, got);
  return false;
}

CTS_TEST(fixed_matches_printf_on_chosen_values) {
  static const double values[] = {0,
                                  -0.0,
                                  1,
                                  2,
                                  0.5,
                                  1.5,
                                  2.5,
                                  3.5,
                                  0.25,
                                  0.125,
                                  0.0625,
                                  1.0625,
                                  2.0625,
                                  1.9995,
                                  1.0005,
                                  9.9995,
                                  99.9996,
                                  999.5,
                                  1000.5,
                                  123.4565,
                                  8.000000000000002,
                                  1e-300,
                                  -1e-300,
                                  0.9999999,
                                  4503599627370495.5,
                                  4503599627370496.5,
                                  9007199254740993.0,
                                  1e15 + 0.3,
                                  18446744073709549568.0,
                                  18446744073709551616.0,
                                  1e19,
                                  1e300,
                                  -2.5,
                                  -1.0005,
                                  -123.25,
                                  1.0 / 3,
                                  2.0 / 3,
                                  800.0000000000001,
                                  26.666666666666668,
                                  INFINITY,
                                  -INFINITY,
                                  NAN};
  for (size_t i = 0; i < sizeof values / sizeof *values; i++)
    for (int d = 0; d <= 9; d++) CTS_ASSERT(fixed_as_printf(values[i], d));
  CTS_ASSERT(fixed_as_printf(1.5, 12)); /* beyond 9 decimals: printf's */
}

CTS_TEST(fixed_matches_printf_on_random_values) {
  uint64_t state = 42;
  for (int i = 0; i < 300000; i++) {
    const uint64_t r = cts_splitmix64(&state);
    double v;
    switch (i % 4) {
      case 0: /* any bit pattern: every exponent, NaNs and infinities */
        memcpy(&v, &r, sizeof v);
        break;
      case 1: /* times in ms and us: integers over 1000 */
        v = (double)(r >> 20) / 1000.0;
        break;
      case 2: /* sums of a non-integer step, as the byte clock of an export */
        v = (double)(r >> 40) * (8 / 0.3);
        break;
      default: /* halves, quarters, ... : exact ties */
        v = (double)(r >> 30) / (double)(UINT64_C(1) << (r & 15));
    }
    CTS_ASSERT(fixed_as_printf(v, (int)(r >> 60) % 10));
  }
}

CTS_TEST(u64_matches_printf) {
  uint64_t state = 7;
  for (int i = 0; i < 200000; i++) {
    const uint64_t r = cts_splitmix64(&state);
    const uint64_t v = i < 64 ? (UINT64_C(1) << i) - 1 : r >> (r & 63);
    char want[32], got[32];
    snprintf(want, sizeof want, "%" PRIu64, v);
    cts_out_init(&out, -1);
    cts_out_u64(&out, v);
    memcpy(got, out.buf, out.len);
    got[out.len] = 0;
    CTS_ASSERT_STR_EQ(got, want);
  }
}

/* cts_fmt_u64 against printf where its word-at-a-time split could go wrong: every value
 * of each 4-digit lane (below 10^4, and 10^4 times it), each digit count's edges (10^k - 1,
 * 10^k, 10^k + 1), 2^64 - 1; and it stores nothing beyond CTS_U64_DIGITS bytes. */
static void fmt_as_printf(uint64_t v) {
  char want[32], got[CTS_U64_DIGITS + 8];
  snprintf(want, sizeof want, "%" PRIu64, v);
  memset(got, '#', sizeof got);
  const size_t n = cts_fmt_u64(got, v);
  for (size_t i = CTS_U64_DIGITS; i < sizeof got; i++) CTS_ASSERT_EQ_INT(got[i], '#');
  got[n] = 0;
  CTS_ASSERT_STR_EQ(got, want);
}

CTS_TEST(u64_lanes_and_edges_match_printf) {
  for (uint64_t v = 0; v < 10000; v++) {
    fmt_as_printf(v);
    fmt_as_printf(v * 10000u);
    fmt_as_printf(v * 10000u + 9999u);
    fmt_as_printf(v * 100000000u + 12345678u);
    fmt_as_printf(v * UINT64_C(1000000000000) + 999999999999u);
  }
  uint64_t p = 1;
  for (int k = 0; k < 20; k++, p *= 10) {
    fmt_as_printf(p - 1);
    fmt_as_printf(p);
    fmt_as_printf(p + 1);
    fmt_as_printf(p * 9 + (p - 1));
  }
  fmt_as_printf(UINT64_MAX);
  fmt_as_printf(UINT64_MAX - 1);
}

/* cts_fmt_u64_memo against printf along columns that step by 0-12 (steps of 10 and more,
 * and backwards ones, convert again), across every carry into a new digit and up to
 * 2^64 - 1. */
CTS_TEST(u64_memo_matches_printf_along_columns) {
  static const uint64_t starts[] = {
      0, 5, 95, 990, 99985, 999999990, UINT64_C(9999999999999999990), UINT64_MAX - 40};
  uint64_t state = 11;
  for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
    cts_fmt_memo_t m = {0};
    uint64_t v = starts[k];
    for (int i = 0; i < 3000; i++) {
      char want[32], got[CTS_U64_DIGITS + 8];
      snprintf(want, sizeof want, "%" PRIu64, v);
      memset(got, '#', sizeof got);
      const size_t n = cts_fmt_u64_memo(&m, got, v);
      for (size_t j = CTS_U64_DIGITS; j < sizeof got; j++) CTS_ASSERT_EQ_INT(got[j], '#');
      got[n] = 0;
      CTS_ASSERT_STR_EQ(got, want);
      const uint64_t r = cts_splitmix64(&state), step = r % 13;
      if (r >> 60 == 0) {
        v -= v > 3 ? 3 : v; /* now and then a step back */
      } else if (v <= UINT64_MAX - step) {
        v += step;
      } else {
        break;
      }
    }
  }
}

CTS_TEST_MAIN()
