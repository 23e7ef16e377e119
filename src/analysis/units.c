/* SPDX-License-Identifier: MIT */
#include "units.h"

#include <stdio.h>
#include <stdlib.h>

#include "hist.h"

const char *cts_human_bytes(double bytes, char *buf, size_t size) {
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  unsigned u = 0;
  bytes = cts_est_clamp(bytes); /* never "inf PB" or "-nan B" */
  while (bytes >= 1000.0 && u + 1 < sizeof units / sizeof *units) bytes /= 1000.0, u++;
  if (u == 0)
    snprintf(buf, size, "%.0f %s", bytes, units[u]);
  else
    snprintf(buf, size, "%.*f %s", bytes < 10 ? 2 : bytes < 100 ? 1 : 0, bytes, units[u]);
  return buf;
}

const char *cts_human_ns(double ns, char *buf, size_t size) {
  if (ns < 1000)
    snprintf(buf, size, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf(buf, size, "%.3g us", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, size, "%.3g ms", ns / 1e6);
  else
    snprintf(buf, size, "%.3g s", ns / 1e9);
  return buf;
}

const char *cts_grouped(uint64_t v, char *buf, size_t size) {
  char digits[32];
  const int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
  size_t o = 0;
  for (int i = 0; i < n && o + 2 < size; i++) {
    if (i > 0 && (n - i) % 3 == 0) buf[o++] = ' ';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

const char *cts_shortest_double(double v, char *buf, size_t size) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  return buf;
}

bool cts_show_ci(const cts_alloc_profile_t *p, uint64_t samples) {
  return p->sample_rate < 1.0 && samples < CTS_CI_SHOW_BELOW;
}

const char *cts_est_bytes(const cts_alloc_profile_t *p, uint64_t samples, bool with_ci, char *buf,
                          size_t size) {
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  char a[32], b[32], c[32];
  cts_human_bytes((double)samples * bps, a, sizeof a);
  if (with_ci && cts_show_ci(p, samples)) {
    double lo, hi;
    cts_poisson_ci95(samples, &lo, &hi);
    snprintf(buf, size, "%s (95%% CI %s-%s)", a, cts_human_bytes(lo * bps, b, sizeof b),
             cts_human_bytes(hi * bps, c, sizeof c));
  } else {
    snprintf(buf, size, "%s", a);
  }
  return buf;
}
