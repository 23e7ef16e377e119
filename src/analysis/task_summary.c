/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* qsort_r */
#include "task_summary.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strtab.h"

#define NONE CTS_TASKS_NONE

unsigned cts_task_slot(const cts_task_t *t) {
  if (t->flags & CTS_TASK_F_PREEXISTING) return CTS_TASK_SLOT_PREEX;
  return t->type <= 17 ? t->type : CTS_TASK_SLOT_UNKNOWN;
}

const char *cts_task_slot_name(unsigned slot) {
  if (slot == CTS_TASK_SLOT_PREEX) return "preexisting";
  if (slot == CTS_TASK_SLOT_UNKNOWN) return "Unknown";
  return cts_task_type_name(slot);
}

bool cts_task_marked_should_resolve(const cts_task_t *t) {
  return (t->flags & (CTS_TASK_F_SHOULD | CTS_TASK_F_NEVER_RESOLVED)) != 0;
}

/* Counts a task by how it ended: resolved (failed ones too, and also in failed), merged into
 * another with `becomes`, or still pending. */
static void count_outcome(const cts_task_t *k, uint64_t *resolved, uint64_t *failed,
                          uint64_t *merged, uint64_t *pending) {
  if (k->flags & CTS_TASK_F_RESOLVED) {
    ++*resolved;
    if (k->flags & CTS_TASK_F_FAILED) ++*failed;
  } else if (k->flags & CTS_TASK_F_BECAME) {
    ++*merged;
  } else {
    ++*pending;
  }
}

void cts_task_totals(const cts_tasks_t *m, cts_task_totals_t *s) {
  memset(s, 0, sizeof *s);
  for (size_t i = 0; i < m->ntasks; i++) {
    const cts_task_t *k = &m->tasks[i];
    s->tasks++;
    if (k->flags & CTS_TASK_F_PREEXISTING)
      s->preexisting++;
    else
      s->created++;
    count_outcome(k, &s->resolved, &s->failed, &s->merged, &s->pending);
    if (cts_task_pending(k) && cts_task_marked_should_resolve(k)) s->should_pending++;
  }
  for (size_t i = 0; i < m->nlanes; i++) {
    s->running_ns += m->lanes[i].running_ns;
    s->idle_ns += m->lanes[i].idle_ns;
  }
}

void cts_task_stats(const cts_tasks_t *m, cts_task_stats_t *s) {
  for (unsigned i = 0; i < CTS_TASK_SLOTS; i++) {
    memset(&s->types[i], 0, sizeof s->types[i]);
    cts_hist_init(&s->types[i].dur);
  }
  cts_hist_init(&s->all);
  cts_task_totals(m, &s->tot);
  for (size_t i = 0; i < m->ntasks; i++) {
    const cts_task_t *k = &m->tasks[i];
    cts_task_type_stats_t *r = &s->types[cts_task_slot(k)];
    r->tasks++;
    count_outcome(k, &r->resolved, &r->failed, &r->merged, &r->pending);
    r->runs += k->runs;
    r->running_ns += k->running_ns;
    r->alive_ns += k->end - k->start;
    uint64_t d;
    if (cts_task_resolve_time(k, &d)) {
      cts_hist_add(&r->dur, d, d);
      cts_hist_add(&s->all, d, d);
    }
  }
}

/* ---- groups ------------------------------------------------------------------------------ */

static uint64_t group_key(const cts_task_t *k, cts_task_group_by_t by) {
  if (by == CTS_TASK_BY_LABEL && k->label != NONE) return 1000 + (uint64_t)k->label;
  return 1 + cts_task_slot(k);
}

const char *cts_task_group_name(const cts_tasks_t *m, const cts_task_group_t *g,
                                cts_task_group_by_t by, char *buf, size_t size) {
  if (g->key >= 1000) return cts_tasks_str(m, (uint32_t)(g->key - 1000));
  const char *name = cts_task_slot_name((unsigned)(g->key - 1));
  if (by == CTS_TASK_BY_TYPE) return name;
  snprintf(buf, size, "(%s)", name);
  for (char *c = buf; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  return buf;
}

int cts_task_groups(const cts_tasks_t *m, cts_task_group_by_t by, cts_task_groups_t *out) {
  memset(out, 0, sizeof *out);
  out->by = by;
  cts_u64map_init(&out->index);
  out->g = calloc(m->ntasks + 1, sizeof *out->g);
  if (!out->g) return -ENOMEM;
  for (size_t i = 0; i < m->ntasks; i++) {
    const cts_task_t *k = &m->tasks[i];
    const uint64_t key = group_key(k, by);
    bool added;
    uint64_t *slot = cts_u64map_insert(&out->index, key, out->n, &added);
    if (!slot) return -ENOMEM;
    if (added) out->g[out->n++].key = key;
    cts_task_group_t *g = &out->g[*slot];
    g->tasks++;
    g->runs += k->runs;
    g->running_ns += k->running_ns;
    g->alive_ns += k->end - k->start;
    count_outcome(k, &g->resolved, &g->failed, &g->merged, &g->pending);
  }
  return 0;
}

void cts_task_groups_fini(cts_task_groups_t *g) {
  free(g->g);
  cts_u64map_fini(&g->index);
  memset(g, 0, sizeof *g);
}

double cts_task_group_metric(const cts_task_group_t *g, cts_task_metric_t metric) {
  if (!g) return 0;
  return metric == CTS_TASK_COUNT   ? (double)g->tasks
         : metric == CTS_TASK_ALIVE ? (double)g->alive_ns
                                    : (double)g->running_ns;
}

typedef struct sort_ctx {
  const cts_tasks_t *m;
  cts_task_group_by_t by;
  cts_task_metric_t metric;
} sort_ctx_t;

static int cmp_groups(const void *a, const void *b, void *arg) {
  const sort_ctx_t *c = arg;
  const cts_task_group_t *x = a, *y = b;
  const double vx = cts_task_group_metric(x, c->metric), vy = cts_task_group_metric(y, c->metric);
  if (vx != vy) return vx > vy ? -1 : 1;
  if (x->tasks != y->tasks) return x->tasks > y->tasks ? -1 : 1;
  char bx[64], by[64];
  return strcmp(cts_task_group_name(c->m, x, c->by, bx, sizeof bx),
                cts_task_group_name(c->m, y, c->by, by, sizeof by));
}

void cts_task_groups_sort(cts_task_groups_t *g, const cts_tasks_t *m, cts_task_metric_t metric) {
  sort_ctx_t sc = {m, g->by, metric};
  if (g->n) qsort_r(g->g, g->n, sizeof *g->g, cmp_groups, &sc);
}

/* ---- pending ----------------------------------------------------------------------------- */

/* Should-resolve first, then the oldest (earliest start), then by id. */
static int cmp_pending(const void *a, const void *b, void *arg) {
  const cts_tasks_t *m = arg;
  const cts_task_t *x = &m->tasks[*(const uint32_t *)a], *y = &m->tasks[*(const uint32_t *)b];
  const bool sx = cts_task_marked_should_resolve(x), sy = cts_task_marked_should_resolve(y);
  if (sx != sy) return sx ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_pending_groups(const void *a, const void *b) {
  const cts_task_pending_group_t *x = a, *y = b;
  if ((x->should > 0) != (y->should > 0)) return x->should ? -1 : 1;
  if (x->tasks != y->tasks) return x->tasks > y->tasks ? -1 : 1;
  if (x->oldest_start != y->oldest_start) return x->oldest_start < y->oldest_start ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key;
}

int cts_task_pending_list(const cts_tasks_t *m, cts_task_pending_list_t *out) {
  memset(out, 0, sizeof *out);
  out->tasks = malloc((m->ntasks + 1) * sizeof *out->tasks);
  out->groups = calloc(m->ntasks + 1, sizeof *out->groups);
  cts_u64map_t index; /* label key → group */
  cts_u64map_init(&index);
  int e = out->tasks && out->groups ? 0 : -ENOMEM;
  for (size_t i = 0; i < m->ntasks && !e; i++) {
    const cts_task_t *k = &m->tasks[i];
    if (!cts_task_pending(k)) continue;
    out->tasks[out->n++] = (uint32_t)i;
    const uint64_t key = group_key(k, CTS_TASK_BY_LABEL);
    bool added;
    uint64_t *slot = cts_u64map_insert(&index, key, out->ngroups, &added);
    if (!slot) {
      e = -ENOMEM;
      break;
    }
    if (added)
      out->groups[out->ngroups++] =
          (cts_task_pending_group_t){.key = key, .oldest_start = k->start};
    cts_task_pending_group_t *g = &out->groups[*slot];
    g->tasks++;
    if (cts_task_marked_should_resolve(k)) g->should++, out->should++;
    if (k->start < g->oldest_start) g->oldest_start = k->start;
  }
  cts_u64map_fini(&index);
  if (e) {
    cts_task_pending_list_fini(out);
    return e;
  }
  if (out->n) qsort_r(out->tasks, out->n, sizeof *out->tasks, cmp_pending, (void *)m);
  if (out->ngroups) qsort(out->groups, out->ngroups, sizeof *out->groups, cmp_pending_groups);
  return 0;
}

void cts_task_pending_list_fini(cts_task_pending_list_t *p) {
  free(p->tasks);
  free(p->groups);
  memset(p, 0, sizeof *p);
}

/* ---- diff -------------------------------------------------------------------------------- */

static int cmp_change(const void *x, const void *y) {
  const cts_task_diff_row_t *a = x, *b = y;
  const double ca = fabs(a->change), cb = fabs(b->change);
  if (ca != cb) return ca > cb ? -1 : 1;
  return strcmp(a->name, b->name);
}

int cts_task_diff(const cts_tasks_t *const m[2], const cts_task_groups_t *const g[2],
                  cts_task_metric_t metric, const double scale[2], cts_task_diff_t *out) {
  memset(out, 0, sizeof *out);
  cts_task_diff_row_t *rows = calloc(g[0]->n + g[1]->n + 1, sizeof *rows);
  if (!rows) return -ENOMEM;
  cts_strtab_t names; /* group names; the id of a name is its row */
  cts_strtab_init(&names);
  size_t n = 0;
  for (int s = 0; s < 2; s++) {
    for (size_t i = 0; i < g[s]->n; i++) {
      char buf[64], name[sizeof rows->name];
      snprintf(name, sizeof name, "%s",
               cts_task_group_name(m[s], &g[s]->g[i], g[s]->by, buf, sizeof buf));
      size_t id;
      const int added = cts_strtab_add(&names, name, strlen(name), &id);
      if (added < 0) {
        cts_strtab_fini(&names);
        free(rows);
        return -ENOMEM;
      }
      cts_task_diff_row_t *r = &rows[id];
      if (added) {
        n++;
        snprintf(r->name, sizeof r->name, "%s", name);
      }
      if (s == 0)
        r->a = &g[0]->g[i];
      else
        r->b = &g[1]->g[i];
    }
  }
  cts_strtab_fini(&names);
  for (size_t i = 0; i < n; i++) {
    cts_task_diff_row_t *r = &rows[i];
    r->va = cts_task_group_metric(r->a, metric) * scale[0];
    r->vb = cts_task_group_metric(r->b, metric) * scale[1];
    r->change = r->vb - r->va;
    out->total_a += r->va;
    out->total_b += r->vb;
  }
  if (n) qsort(rows, n, sizeof *rows, cmp_change);
  out->rows = rows;
  out->n = n;
  return 0;
}

void cts_task_diff_fini(cts_task_diff_t *d) {
  free(d->rows);
  memset(d, 0, sizeof *d);
}
