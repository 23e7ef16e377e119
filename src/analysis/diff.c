/* SPDX-License-Identifier: MIT */
#include "diff.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strtab.h"

bool cts_diff_is_flow(cts_diff_metric_t m) {
  return m == CTS_DIFF_ALLOC || m == CTS_DIFF_COUNT;
}

double cts_diff_scale(const cts_alloc_profile_t *p, cts_diff_metric_t m, bool per_second,
                      double duration_s) {
  const double scale = m == CTS_DIFF_COUNT ? 1.0 : cts_alloc_profile_bytes_per_sample(p);
  return per_second ? scale / duration_s : scale;
}

/* The metric's raw count for a row: samples, or estimated allocations. */
static double raw(const cts_row_t *r, cts_diff_metric_t m) {
  if (!r) return 0;
  switch (m) {
    case CTS_DIFF_COUNT:
      return r->st.est_allocs;
    case CTS_DIFF_PEAK:
      return (double)r->st.peak_samples;
    case CTS_DIFF_LIVE:
      return (double)r->st.live_samples;
    case CTS_DIFF_ALLOC:
      break;
  }
  return (double)r->st.samples;
}

/* Sample count behind the metric (for the noise estimate). */
static double noise_samples(const cts_row_t *r, cts_diff_metric_t m) {
  if (!r) return 0;
  return m == CTS_DIFF_PEAK    ? (double)r->st.peak_samples
         : m == CTS_DIFF_LIVE  ? (double)r->st.live_samples
         : m == CTS_DIFF_COUNT ? (double)r->st.allocs
                               : (double)r->st.samples;
}

const cts_row_t *cts_diff_row_site(const cts_diff_row_t *r) {
  return r->a ? r->a : r->b;
}

const char *cts_diff_change_pct(bool in_a, bool in_b, double va, double vb, char *buf,
                                size_t size) {
  if (!in_a)
    snprintf(buf, size, "new");
  else if (!in_b)
    snprintf(buf, size, "gone");
  else if (va == vb)
    snprintf(buf, size, "+0%%");
  else if (va == 0)
    snprintf(buf, size, "from 0");
  else
    snprintf(buf, size, "%+.0f%%", 100.0 * (vb - va) / va);
  return buf;
}

bool cts_diff_significant(const cts_diff_row_t *r) {
  return r->sd == 0 || fabs(r->change) > 1.96 * r->sd;
}

static int cmp_change(const void *x, const void *y) {
  const cts_diff_row_t *a = x, *b = y;
  const double ca = fabs(a->change), cb = fabs(b->change);
  if (ca != cb) return ca > cb ? -1 : 1;
  return strcmp(cts_diff_row_site(a)->key, cts_diff_row_site(b)->key);
}

/* The value and noise of one side of a row. The noise of a count is that of its sampled
 * allocations, scaled like the estimate. */
static void side_value(const cts_diff_side_t *s, const cts_row_t *r, cts_diff_metric_t m, double *v,
                       double *var) {
  *v = raw(r, m) * s->scale;
  const double k = m == CTS_DIFF_COUNT && r && r->st.allocs ? *v / (double)r->st.allocs : s->scale;
  *var = s->sampled ? noise_samples(r, m) * k * k : 0;
}

int cts_diff_sites(cts_diff_t *out, const cts_diff_side_t *a, const cts_diff_side_t *b,
                   cts_diff_metric_t m) {
  memset(out, 0, sizeof *out);
  const size_t na = a->rows->n, nb = b->rows->n;
  cts_strtab_t keys; /* b's row keys; row_of[id]: the first of b's rows with that key */
  cts_strtab_init(&keys);
  cts_diff_row_t *rows = calloc(na + nb + 1, sizeof *rows);
  bool *matched = calloc(nb + 1, sizeof *matched);
  size_t *row_of = malloc((nb + 1) * sizeof *row_of);
  int e = rows && matched && row_of ? 0 : -ENOMEM;
  for (size_t i = 0; i < nb && !e; i++) {
    const char *key = b->rows->rows[i].key;
    size_t id;
    const int added = cts_strtab_add(&keys, key, strlen(key), &id);
    if (added < 0)
      e = -ENOMEM;
    else if (added)
      row_of[id] = i;
  }
  size_t n = 0;
  for (size_t i = 0; i < na && !e; i++) {
    const cts_row_t *ra = &a->rows->rows[i], *rb = NULL;
    const size_t id = cts_strtab_find(&keys, ra->key, strlen(ra->key));
    if (id != SIZE_MAX) {
      rb = &b->rows->rows[row_of[id]];
      matched[row_of[id]] = true;
    }
    rows[n++] = (cts_diff_row_t){.a = ra, .b = rb};
  }
  for (size_t i = 0; i < nb && !e; i++)
    if (!matched[i]) rows[n++] = (cts_diff_row_t){.b = &b->rows->rows[i]};
  free(matched);
  free(row_of);
  cts_strtab_fini(&keys);
  if (e) {
    free(rows);
    return e;
  }
  for (size_t i = 0; i < n; i++) {
    cts_diff_row_t *d = &rows[i];
    double var_a, var_b;
    side_value(a, d->a, m, &d->va, &var_a);
    side_value(b, d->b, m, &d->vb, &var_b);
    d->change = d->vb - d->va;
    d->sd = sqrt(var_a + var_b);
    out->total_a += d->va;
    out->total_b += d->vb;
  }
  if (n) qsort(rows, n, sizeof *rows, cmp_change);
  out->rows = rows;
  out->n = n;
  return 0;
}

void cts_diff_fini(cts_diff_t *d) {
  free(d->rows);
  memset(d, 0, sizeof *d);
}
