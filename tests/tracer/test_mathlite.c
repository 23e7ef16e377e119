/* SPDX-License-Identifier: MIT */
/* The sampler's elementary functions (src/tracer/mathlite.h) against libm: ln and ln1p
 * within 2 ulp, cos within 2e-16 on the sampler's range and beyond, floor and sqrt exact,
 * and C's special values. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../test.h"
#include "tracer/mathlite.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

/* A double with uniformly random bits: every exponent equally likely. */
static double random_double(void) {
  const uint64_t u = next_u64();
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* The distance between a and b in units in the last place of b. */
static double ulps(double a, double b) {
  if (a == b) return 0.0;
  const double unit = nextafter(fabs(b), INFINITY) - fabs(b);
  return fabs(a - b) / unit;
}

CTS_TEST(ln_is_within_two_ulp_over_all_positive_doubles) {
  double worst = 0.0, at = 0.0;
  for (int i = 0; i < 2000000; i++) {
    double x = fabs(random_double());
    if (!isfinite(x) || x == 0.0) continue;
    const double e = ulps(cts__ln(x), log(x));
    if (e > worst) worst = e, at = x;
  }
  /* The sampler's own arguments: uniform in (0, 1], and rates. */
  for (int i = 1; i <= 1000000; i++) {
    const double x = ((double)(next_u64() >> 11) + 1.0) * 0x1.0p-53;
    const double e = ulps(cts__ln(x), log(x));
    if (e > worst) worst = e, at = x;
  }
  CTS_ASSERT_MSG(worst <= 2.0, "ln(%a): %.2f ulp", at, worst);
}

CTS_TEST(ln1p_is_within_two_ulp_above_minus_one) {
  double worst = 0.0, at = 0.0;
  for (int i = 0; i < 2000000; i++) {
    double x = random_double();
    if (!isfinite(x) || x <= -1.0) continue;
    const double e = ulps(cts__ln1p(x), log1p(x));
    if (e > worst) worst = e, at = x;
  }
  /* -rate for rates from 1e-300 to 1, the sampler's argument, and (-1, 1) uniformly. */
  for (int i = 0; i < 1000000; i++) {
    const double rate = pow(10.0, -300.0 * (double)(next_u64() >> 11) * 0x1.0p-53);
    const double u = (double)(next_u64() >> 11) * 0x1.0p-52 - 1.0;
    double e = ulps(cts__ln1p(-rate), log1p(-rate));
    if (e > worst) worst = e, at = -rate;
    e = ulps(cts__ln1p(u), log1p(u));
    if (e > worst) worst = e, at = u;
  }
  CTS_ASSERT_MSG(worst <= 2.0, "ln1p(%a): %.2f ulp", at, worst);
}

CTS_TEST(cos_is_within_2e_16_up_to_2_to_the_20) {
  double worst = 0.0, at = 0.0;
  for (int i = 0; i < 2000000; i++) {
    const double unit = (double)(next_u64() >> 11) * 0x1.0p-53;
    /* Half on [0, 2 pi] (the sampler's), half on [-2^20, 2^20]. */
    const double x = i & 1 ? 6.283185307179586 * unit : (unit - 0.5) * 0x1.0p21;
    const double e = fabs(cts__cos(x) - cos(x));
    if (e > worst) worst = e, at = x;
  }
  CTS_ASSERT_MSG(worst <= 2e-16, "cos(%a): off by %g", at, worst);
  CTS_ASSERT(cts__cos(0.0) == 1.0);
  CTS_ASSERT(cts__cos(-0.0) == 1.0);
}

CTS_TEST(floor_and_sqrt_are_exact) {
  for (int i = 0; i < 2000000; i++) {
    double x = random_double();
    /* Half of them where fractions live: exponents 0 to 59. */
    if ((i & 1) && isfinite(x) && x != 0.0) x = ldexp(x, -ilogb(x) + (int)(next_u64() % 60));
    const double f = cts__floor(x), g = floor(x);
    CTS_ASSERT_MSG(memcmp(&f, &g, sizeof f) == 0 || (isnan(f) && isnan(g)),
                   "floor(%a) = %a, not %a", x, f, g);
    const double y = fabs(x), s = cts__sqrt(y), t = sqrt(y);
    CTS_ASSERT_MSG(memcmp(&s, &t, sizeof s) == 0 || (isnan(s) && isnan(t)), "sqrt(%a) = %a, not %a",
                   y, s, t);
  }
  CTS_ASSERT(cts__floor(-0.5) == -1.0);
  CTS_ASSERT(cts__floor(0.5) == 0.0 && !signbit(cts__floor(0.5)));
  CTS_ASSERT(signbit(cts__floor(-0.0)));
  CTS_ASSERT(cts__floor(-3.0) == -3.0);
}

CTS_TEST(special_values_are_cs) {
  CTS_ASSERT(cts__ln(0.0) == -INFINITY);
  CTS_ASSERT(cts__ln(-0.0) == -INFINITY);
  CTS_ASSERT(isnan(cts__ln(-1.0)));
  CTS_ASSERT(isnan(cts__ln(NAN)));
  CTS_ASSERT(cts__ln(INFINITY) == INFINITY);
  CTS_ASSERT(cts__ln(1.0) == 0.0);
  CTS_ASSERT(cts__ln1p(-1.0) == -INFINITY);
  CTS_ASSERT(isnan(cts__ln1p(-2.0)));
  CTS_ASSERT(cts__ln1p(INFINITY) == INFINITY);
  CTS_ASSERT(cts__ln1p(0.0) == 0.0);
  CTS_ASSERT(isnan(cts__cos(INFINITY)));
  CTS_ASSERT(isnan(cts__cos(NAN)));
  CTS_ASSERT(cts__floor(INFINITY) == INFINITY);
  /* The sampler at rate 1: 1 / ln1p(-1) is -0.0, which it tests as 0.0. */
  CTS_ASSERT(1.0 / cts__ln1p(-1.0) == 0.0);
}

CTS_TEST_MAIN()
