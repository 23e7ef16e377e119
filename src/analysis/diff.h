/* SPDX-License-Identifier: MIT */
/* The comparison behind `ctfscope diff` of two memtrace traces: the sites of two flat tables
 * (siterows.h) matched by key, each side's metric scaled to comparable units, the change
 * and its sampling noise, largest change first. Pure computation over borrowed tables: no
 * I/O, no global state; thread-compatible (one diff per thread). */
#ifndef CTS_DIFF_H
#define CTS_DIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "mtprof.h"
#include "siterows.h"

typedef enum cts_diff_metric {
  CTS_DIFF_ALLOC = 0, /* bytes allocated (a flow) */
  CTS_DIFF_COUNT,     /* allocations (a flow) */
  CTS_DIFF_PEAK,      /* bytes live at the peak (a level) */
  CTS_DIFF_LIVE,      /* bytes live at the end (a level) */
} cts_diff_metric_t;

/* Flows can be compared per second; levels are compared as they are. */
bool cts_diff_is_flow(cts_diff_metric_t m);

/* One side of the comparison: its sites and how to turn a row's raw count (samples, or
 * estimated allocations for counts) into the compared unit. */
typedef struct cts_diff_side {
  const cts_rows_t *rows;
  double scale; /* compared units per raw count: cts_diff_scale */
  bool sampled; /* the sample rate is below 1: the counts carry Poisson noise */
} cts_diff_side_t;

/* Units per raw count for a trace: bytes per sample (1 for counts), per second of
 * `duration_s` when per_second (which must then be > 0). */
double cts_diff_scale(const cts_mtprof_t *p, cts_diff_metric_t m, bool per_second,
                      double duration_s);

typedef struct cts_diff_row {
  const cts_row_t *a, *b; /* the site in each side; either may be NULL, not both */
  double va, vb, change;  /* the metric before, after, and after - before */
  double sd;              /* standard deviation of the change from sampling (0 unsampled) */
} cts_diff_row_t;

typedef struct cts_diff {
  cts_diff_row_t *rows; /* owned; every site of either side, largest |change| first, ties by key */
  size_t n;
  double total_a, total_b;
} cts_diff_t;

/* Matches the rows of b to those of a by key and computes every row. Returns 0 or -ENOMEM
 * (out is then empty). */
int cts_diff_sites(cts_diff_t *out, const cts_diff_side_t *a, const cts_diff_side_t *b,
                   cts_diff_metric_t m);
void cts_diff_fini(cts_diff_t *d);

/* The row's site (its before side when it has one). */
const cts_row_t *cts_diff_row_site(const cts_diff_row_t *r);
/* The relative change for people, in buf: "new" (only in the after side), "gone" (only in
 * the before side), "from 0" (present in both, zero before), else "+12%". Shared by the
 * memtrace and task diffs. */
const char *cts_diff_change_pct(bool in_a, bool in_b, double va, double vb, char *buf, size_t size);
/* Whether the change is beyond the sampling noise (1.96 standard deviations), or exact. */
bool cts_diff_significant(const cts_diff_row_t *r);

#endif /* CTS_DIFF_H */
