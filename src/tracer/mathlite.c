/* SPDX-License-Identifier: MIT */
/* Elementary functions without libm: see mathlite.h. Compiled with -fno-math-errno
 * (src/tracer/CMakeLists.txt) so that the square root is the processor's instruction with
 * no call to libm's sqrt for errno's sake. */
#include "mathlite.h"

#include <stdint.h>
#include <string.h>

static uint64_t bits_of(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static double double_of(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* ln 2 in two parts: the high one has its low 32 bits zero, so k * LN2_HI is exact for any
 * binary exponent k. */
static const double LN2_HI = 6.93147180369123816490e-01;
static const double LN2_LO = 1.90821492927058770002e-10;
static const double SQRT_HALF = 0.70710678118654752440;

/* ln(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]. With s = f / (2 + f),
 * ln(1 + f) = 2 atanh(s) = 2s + s R, R = sum over k >= 1 of 2 s^(2k) / (2k + 1); |s| <= 0.1716,
 * so s^2 <= 0.0295 and twelve terms leave less than 2^-56 of R. Written as
 * f - (f^2/2 - s (f^2/2 + R)) (2s = f - s f), which keeps the leading term f exact. */
static double ln1p_kernel(double f) {
  const double s = f / (2.0 + f), z = s * s;
  double r = 2.0 / 25.0;
  for (int k = 11; k >= 1; k--) r = r * z + 2.0 / (2 * k + 1);
  r *= z;
  const double hfsq = 0.5 * f * f;
  return f - (hfsq - s * (hfsq + r));
}

/* Splits finite x > 0 into m * 2^k with m in [sqrt(1/2), sqrt(2)). */
static double split(double x, int *k) {
  int adjust = 0;
  uint64_t u = bits_of(x);
  if ((u >> 52) == 0) { /* subnormal: scale into the normal range first */
    x *= 0x1.0p54;
    u = bits_of(x);
    adjust = -54;
  }
  int e = (int)(u >> 52) - 1023;
  double m = double_of((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 2.0 * SQRT_HALF) {
    m *= 0.5;
    e++;
  }
  *k = e + adjust;
  return m;
}

double cts__ln(double x) {
  if (x != x) return x;
  if (x < 0.0) return (x - x) / (x - x); /* NaN */
  if (x == 0.0) return -1.0 / (x * x);   /* -inf */
  if (x > 0x1.fffffffffffffp1023) return x;
  int k;
  const double m = split(x, &k);
  return (double)k * LN2_HI + (ln1p_kernel(m - 1.0) + (double)k * LN2_LO);
}

double cts__ln1p(double x) {
  if (x != x) return x;
  if (x < -1.0) return (x - x) / (x - x);
  if (x == -1.0) return -1.0 / ((x + 1.0) * (x + 1.0));
  if (x > 0x1.fffffffffffffp1023) return x;
  /* Within the kernel's interval f = x is exact: no rounding of 1 + x. */
  if (x >= SQRT_HALF - 1.0 && x <= 2.0 * SQRT_HALF - 1.0) return ln1p_kernel(x);
  /* Else ln(u) for u = 1 + x rounded, plus the first-order term of what the rounding
   * dropped: ln(1 + x) = ln(u) + (x - (u - 1)) / u. */
  const double u = 1.0 + x;
  const double c = (x - (u - 1.0)) / u;
  int k;
  const double m = split(u, &k);
  return (double)k * LN2_HI + (ln1p_kernel(m - 1.0) + ((double)k * LN2_LO + c));
}

/* Taylor series on |r| <= pi/4 (the next terms are below 2^-60). */
static double sin_kernel(double r) {
  const double z = r * r;
  double p = 1.0 / 355687428096000.0; /* 1/17! */
  static const double coef[] = {
      -1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
      -1.0 / 5040.0,          1.0 / 120.0,        -1.0 / 6.0};
  for (unsigned i = 0; i < sizeof coef / sizeof *coef; i++) p = p * z + coef[i];
  return r + r * z * p;
}

static double cos_kernel(double r) {
  const double z = r * r;
  double p = -1.0 / 6402373705728000.0; /* -1/18! */
  static const double coef[] = {
      1.0 / 20922789888000.0, -1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0,
      1.0 / 40320.0,          -1.0 / 720.0,         1.0 / 24.0};
  for (unsigned i = 0; i < sizeof coef / sizeof *coef; i++) p = p * z + coef[i];
  /* 1 - z/2 + z^2 p, with 1 - z/2 split so that its rounding error is kept. */
  const double hz = 0.5 * z, w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + z * z * p);
}

double cts__cos(double x) {
  if (x != x) return x;
  if (x > 0x1.fffffffffffffp1023 || x < -0x1.fffffffffffffp1023) return (x - x) / (x - x);
  /* x = n pi/2 + r, |r| <= pi/4 (a little more where n is rounded), pi/2 in three parts
   * (Cody and Waite) so that n * each part is exact while |n| < 2^20. */
  static const double INV_PIO2 = 6.36619772367581382433e-01;
  static const double PIO2_1 = 1.57079632673412561417e+00;  /* first 33 bits of pi/2 */
  static const double PIO2_2 = 6.07710050630396597660e-11;  /* next 33 bits */
  static const double PIO2_2T = 2.02226624879595063154e-21; /* pi/2 - (PIO2_1 + PIO2_2) */
  const double nd = cts__floor(x * INV_PIO2 + 0.5);
  const double r = ((x - nd * PIO2_1) - nd * PIO2_2) - nd * PIO2_2T;
  const int64_t n = (int64_t)nd;
  switch (n & 3) {
    case 0:
      return cos_kernel(r);
    case 1:
      return -sin_kernel(r);
    case 2:
      return -cos_kernel(r);
    default:
      return sin_kernel(r);
  }
}

double cts__floor(double x) {
  /* NaN, infinities, zeros and every |x| >= 2^52 are integers already (or themselves). */
  if (!(x > -0x1.0p52 && x < 0x1.0p52) || x == 0.0) return x;
  double t = (double)(int64_t)x; /* toward zero: exact in this range */
  return t > x ? t - 1.0 : t;
}

double cts__sqrt(double x) {
  return __builtin_sqrt(x);
}
