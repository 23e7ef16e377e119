/* SPDX-License-Identifier: MIT */
/* Figures formatted for people, the same in every command and in the report: sizes,
 * durations, grouped digits, the shortest exact double, and byte estimates with their
 * confidence interval. Each writes into the caller's buffer (cut to size) and returns it;
 * pure and thread-safe. */
#ifndef CTS_ANALYSIS_UNITS_H
#define CTS_ANALYSIS_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_profile.h"

/* "12.3 MB" style sizes (decimal units, like memtrace's tools). */
const char *cts_human_bytes(double bytes, char *buf, size_t size);
/* "850 ns", "12.3 us", "4.56 ms", "1.23 s". */
const char *cts_human_ns(double ns, char *buf, size_t size);
/* "1 234 567": digits grouped for people. */
const char *cts_grouped(uint64_t v, char *buf, size_t size);
/* Shortest %g form that reads back as the same double. */
const char *cts_shortest_double(double v, char *buf, size_t size);

/* Whether samples is few enough for its confidence interval to be worth showing. */
bool cts_show_ci(const cts_alloc_profile_t *p, uint64_t samples);
/* "12.3 MB" for samples × bytes per sample, and with few samples at a rate below 1
 * " (95% CI 8.10 MB-17.9 MB)" appended when with_ci. */
const char *cts_est_bytes(const cts_alloc_profile_t *p, uint64_t samples, bool with_ci, char *buf,
                          size_t size);

#endif /* CTS_ANALYSIS_UNITS_H */
