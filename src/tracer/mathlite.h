/* SPDX-License-Identifier: MIT */
/* The few elementary functions the sampler needs (sample.c: the geometric gaps and the
 * binomial's normal approximation), written here so that the preload library does not
 * link libm: loading libm cost every traced image, and every untraced child of a traced
 * program, ~0.08 ms of CPU (bench/JOURNAL.md, "Issue 16: exec chain start-up (wip/h21exec)"),
 * for five functions called a few times per sample.
 *
 * Accuracy (tests/tracer/test_mathlite.c, against libm): cts__ln and cts__ln1p within
 * 2 ulp over all positive doubles; cts__cos within 2e-16 absolute for |x| <= 2^20 (the
 * sampler calls it on [0, 2 pi]); cts__floor and cts__sqrt exact. Special values as C's:
 * ln(0) = -inf, ln(x < 0) = NaN, ln1p(-1) = -inf, ln(+inf) = +inf, NaN in, NaN out. No
 * errno, no floating-point exceptions relied upon. Pure functions: any thread, any
 * context (no allocation, no lock, no system call). */
#ifndef CTS_TRACER_MATHLITE_H
#define CTS_TRACER_MATHLITE_H

double cts__ln(double x);
double cts__ln1p(double x);
double cts__cos(double x);
double cts__floor(double x);
double cts__sqrt(double x);

#endif /* CTS_TRACER_MATHLITE_H */
