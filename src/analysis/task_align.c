/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* qsort_r */
#include "task_align.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "../common/hash.h"
#include "task_summary.h"
#include "u64map.h"

#define NONE CTS_TASKS_NONE
/* Creation paths deeper than this are told apart by their nearest levels only: it bounds the
 * work per task on a hostile trace (a chain of a million tasks, or a parent cycle). */
#define PATH_DEPTH 64

int cts_task_trail_on_link(void *ud, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst,
                           uint64_t t1) {
  cts_task_trail_t *tr = ud;
  cts_align_kind_t k;
  uint64_t t = t0;
  switch (kind) {
    case CTS_LINK_CREATE:
      k = CTS_ALIGN_CREATE;
      break;
    case CTS_LINK_RESOLVE:
      k = CTS_ALIGN_RESOLVE;
      break;
    case CTS_LINK_READ:
      k = CTS_ALIGN_READ;
      t = t1;
      break;
    case CTS_LINK_FAILED_READ:
      k = CTS_ALIGN_FAILED_READ;
      t = t1;
      break;
    case CTS_LINK_SIGNAL:
      k = CTS_ALIGN_SIGNAL;
      break;
    default: /* try_read: scheduling, not a decision of the program */
      return 0;
  }
  if (tr->n >= CTS_ALIGN_MAX_EVENTS) {
    tr->truncated = true;
    return 0;
  }
  if (tr->n == tr->cap && cts_grow((void **)&tr->ev, &tr->cap, tr->n, sizeof *tr->ev)) {
    tr->nomem = true;
    return 0;
  }
  tr->ev[tr->n] = (cts_align_event_t){
      .t = t, .src = src, .dst = dst, .seq = (uint32_t)tr->n, .kind = (uint8_t)k};
  tr->n++;
  return 0;
}

void cts_task_trail_fini(cts_task_trail_t *t) {
  free(t->ev);
  memset(t, 0, sizeof *t);
}

cts_align_outcome_t cts_align_outcome(const cts_task_t *t) {
  if ((t->flags & CTS_TASK_F_RESOLVED) && !(t->flags & CTS_TASK_F_NEVER_RESOLVED))
    return (t->flags & CTS_TASK_F_FAILED) ? CTS_OUT_FAILED : CTS_OUT_RESOLVED;
  if (t->flags & CTS_TASK_F_BECAME) return CTS_OUT_MERGED;
  return cts_task_marked_should_resolve(t) ? CTS_OUT_SHOULD_FAILED : CTS_OUT_PENDING;
}

const char *cts_align_outcome_name(cts_align_outcome_t o) {
  static const char *const names[CTS_OUT_KINDS] = {"resolved", "failed", "merged", "pending",
                                                   "should-resolve violated"};
  return o < CTS_OUT_KINDS ? names[o] : "?";
}

const char *cts_task_short_name(const cts_tasks_t *m, uint32_t task, char *buf, size_t size) {
  if (task == NONE || task >= m->ntasks) return "(none)";
  const cts_task_t *k = &m->tasks[task];
  if (k->label != NONE) return cts_tasks_str(m, k->label);
  snprintf(buf, size, "(%s)", cts_task_slot_name(cts_task_slot(k)));
  for (char *c = buf; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  return buf;
}

const char *cts_task_path_name(const cts_tasks_t *m, uint32_t task, unsigned depth, char *buf,
                               size_t size) {
  uint32_t chain[PATH_DEPTH];
  unsigned n = 0;
  if (depth > PATH_DEPTH) depth = PATH_DEPTH;
  for (uint32_t i = task; i != NONE && i < m->ntasks && n < depth; i = m->tasks[i].parent)
    chain[n++] = i;
  const bool cut = n == depth && m->tasks[chain[n - 1]].parent != NONE;
  size_t len = 0;
  buf[0] = '\0';
  if (cut) len += (size_t)snprintf(buf, size, "... > ");
  for (unsigned j = n; j-- > 0 && len < size;) {
    char name[64];
    len += (size_t)snprintf(buf + len, size - len, "%s%s",
                            cts_task_short_name(m, chain[j], name, sizeof name), j ? " > " : "");
  }
  return buf;
}

const char *cts_align_describe(const cts_tasks_t *m, const cts_align_event_t *e, char *buf,
                               size_t size) {
  static const char *const verbs[] = {"created", "resolved", "read", "read the failure of",
                                      "signalled"};
  char a[64], b[64];
  uint32_t actor = e->src, object = e->dst;
  if (e->kind == CTS_ALIGN_READ || e->kind == CTS_ALIGN_FAILED_READ)
    actor = e->dst, object = e->src;
  const char *who =
      actor == NONE ? "(outside any task)" : cts_task_short_name(m, actor, a, sizeof a);
  snprintf(buf, size, "%s %s %s", who, verbs[e->kind < 5 ? e->kind : 0],
           cts_task_short_name(m, object, b, sizeof b));
  return buf;
}

/* "resolved", "absent", or "3: 2 resolved, 1 pending". */
const char *cts_align_path_outcomes(const cts_align_path_t *p, int s, char *buf, size_t size) {
  if (!p->count[s]) return "absent";
  size_t len = 0;
  buf[0] = '\0';
  if (p->count[s] > 1) len += (size_t)snprintf(buf, size, "%u: ", p->count[s]);
  bool first = true;
  for (unsigned o = 0; o < CTS_OUT_KINDS && len < size; o++) {
    if (!p->outcomes[s][o]) continue;
    if (p->count[s] > 1)
      len += (size_t)snprintf(buf + len, size - len, "%s%u %s", first ? "" : ", ",
                              p->outcomes[s][o], cts_align_outcome_name(o));
    else
      len += (size_t)snprintf(buf + len, size - len, "%s", cts_align_outcome_name(o));
    first = false;
  }
  return buf;
}

/* The hash of a task's own name: its label's text (so that runs agree), else its type. */
static uint64_t name_hash(const cts_tasks_t *m, uint32_t i) {
  const cts_task_t *k = &m->tasks[i];
  if (k->label != NONE) return cts_u64map_str_key(cts_tasks_str(m, k->label));
  return 0x100 + cts_task_slot(k);
}

static uint64_t path_hash(const cts_tasks_t *m, uint32_t task) {
  uint64_t h = 0x7061746800000000ull;
  unsigned depth = 0;
  for (uint32_t i = task; i != NONE && i < m->ntasks && depth < PATH_DEPTH; i = m->tasks[i].parent)
    h = cts_hash_combine(h, name_hash(m, i)), depth++;
  return h;
}

uint64_t cts_task_compare_key(const cts_task_compare_t *c, int s, const cts_align_event_t *e) {
  uint64_t h = cts_mix64(0x6b6579ull + e->kind);
  h = cts_hash_combine(h, e->src == NONE ? 0 : c->path[s][e->src]);
  return cts_hash_combine(h, c->path[s][e->dst]);
}

static int cmp_events(const void *a, const void *b) {
  const cts_align_event_t *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Run s's sequence: the trail, plus the creations outside any task (no on_link for them). */
static int build_sequence(const cts_tasks_t *m, const cts_task_trail_t *tr, cts_task_compare_t *c,
                          int s) {
  size_t roots = 0;
  for (size_t i = 0; i < m->ntasks; i++)
    roots += m->tasks[i].parent == NONE && !(m->tasks[i].flags & CTS_TASK_F_PREEXISTING);
  cts_align_event_t *seq = malloc((tr->n + roots + 1) * sizeof *seq);
  if (!seq) return -ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < tr->n; i++)
    if (tr->ev[i].dst < m->ntasks && (tr->ev[i].src == NONE || tr->ev[i].src < m->ntasks))
      seq[n++] = tr->ev[i];
  for (size_t i = 0; i < m->ntasks; i++) {
    const cts_task_t *k = &m->tasks[i];
    if (k->parent != NONE || (k->flags & CTS_TASK_F_PREEXISTING)) continue;
    seq[n] = (cts_align_event_t){.t = k->start,
                                 .src = NONE,
                                 .dst = (uint32_t)i,
                                 .seq = (uint32_t)(tr->n + i),
                                 .kind = CTS_ALIGN_CREATE};
    n++;
  }
  if (n) qsort(seq, n, sizeof *seq, cmp_events);
  c->seq[s] = seq;
  c->nseq[s] = n;
  c->truncated[s] = tr->truncated;
  return 0;
}

typedef struct order_ctx {
  const cts_tasks_t *m;
  const uint64_t *path;
} order_ctx_t;

/* By path, then creation time, then index: the n-th task of a path matches the n-th. */
static int cmp_by_path(const void *a, const void *b, void *arg) {
  const order_ctx_t *o = arg;
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  if (o->path[x] != o->path[y]) return o->path[x] < o->path[y] ? -1 : 1;
  const uint64_t sx = o->m->tasks[x].start, sy = o->m->tasks[y].start;
  if (sx != sy) return sx < sy ? -1 : 1;
  return x < y ? -1 : x > y;
}

static bool path_differs(const cts_align_path_t *p) {
  if (p->count[0] != p->count[1]) return true;
  return memcmp(p->outcomes[0], p->outcomes[1], sizeof p->outcomes[0]) != 0;
}

typedef struct path_sort_ctx {
  const cts_tasks_t *const *m;
} path_sort_ctx_t;

/* Offset of a path's first task from its trace's start (the earlier of the two runs). */
static uint64_t path_first(const cts_align_path_t *p, const cts_tasks_t *const *m) {
  uint64_t best = UINT64_MAX;
  for (int s = 0; s < 2; s++) {
    if (p->task[s] == NONE) continue;
    const uint64_t t = m[s]->tasks[p->task[s]].start, base = m[s]->first_ns;
    const uint64_t off = t > base ? t - base : 0;
    if (off < best) best = off;
  }
  return best;
}

static int cmp_paths(const void *a, const void *b, void *arg) {
  const path_sort_ctx_t *o = arg;
  const cts_align_path_t *x = a, *y = b;
  const bool sx = x->outcomes[0][CTS_OUT_SHOULD_FAILED] != x->outcomes[1][CTS_OUT_SHOULD_FAILED];
  const bool sy = y->outcomes[0][CTS_OUT_SHOULD_FAILED] != y->outcomes[1][CTS_OUT_SHOULD_FAILED];
  if (sx != sy) return sx ? -1 : 1;
  const uint64_t fx = path_first(x, o->m), fy = path_first(y, o->m);
  if (fx != fy) return fx < fy ? -1 : 1;
  return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* Groups both runs' tasks by creation path and keeps the paths whose outcomes differ; sets
 * peer[task of run 0] to its match in run 1 (the n-th of a path, by creation time, with the
 * n-th), NONE when it has none. */
static int match_tasks(const cts_tasks_t *const m[2], cts_task_compare_t *c, uint32_t *peer) {
  uint32_t *order[2] = {NULL, NULL};
  int e = 0;
  for (int s = 0; s < 2 && !e; s++) {
    order[s] = malloc((m[s]->ntasks + 1) * sizeof *order[s]);
    if (!order[s]) {
      e = -ENOMEM;
      break;
    }
    for (size_t i = 0; i < m[s]->ntasks; i++) order[s][i] = (uint32_t)i;
    order_ctx_t o = {m[s], c->path[s]};
    if (m[s]->ntasks) qsort_r(order[s], m[s]->ntasks, sizeof *order[s], cmp_by_path, &o);
  }
  if (!e) {
    c->paths = calloc(m[0]->ntasks + m[1]->ntasks + 1, sizeof *c->paths);
    if (!c->paths) e = -ENOMEM;
  }
  size_t i[2] = {0, 0};
  while (!e && (i[0] < m[0]->ntasks || i[1] < m[1]->ntasks)) {
    uint64_t h = UINT64_MAX;
    bool have = false;
    for (int s = 0; s < 2; s++)
      if (i[s] < m[s]->ntasks && (!have || c->path[s][order[s][i[s]]] < h))
        h = c->path[s][order[s][i[s]]], have = true;
    cts_align_path_t p = {.hash = h, .task = {NONE, NONE}};
    const size_t first[2] = {i[0], i[1]};
    for (int s = 0; s < 2; s++) {
      for (; i[s] < m[s]->ntasks && c->path[s][order[s][i[s]]] == h; i[s]++) {
        const uint32_t k = order[s][i[s]];
        if (p.task[s] == NONE) p.task[s] = k;
        p.count[s]++;
        p.outcomes[s][cts_align_outcome(&m[s]->tasks[k])]++;
        p.running_ns[s] += m[s]->tasks[k].running_ns;
      }
    }
    for (size_t k = first[0]; k < i[0]; k++)
      peer[order[0][k]] =
          first[1] + (k - first[0]) < i[1] ? order[1][first[1] + (k - first[0])] : NONE;
    c->paths_total++;
    c->matched_tasks += p.count[0] < p.count[1] ? p.count[0] : p.count[1];
    if (path_differs(&p)) c->paths[c->npaths++] = p;
  }
  free(order[0]);
  free(order[1]);
  if (e) return e;
  path_sort_ctx_t ps = {m};
  if (c->npaths) qsort_r(c->paths, c->npaths, sizeof *c->paths, cmp_paths, &ps);
  return 0;
}

/* Each task's history in run s: the indices into seq[s] of the events it takes part in, in
 * time order, as offsets (off[task] .. off[task + 1]) into idx. */
typedef struct history {
  uint32_t *off, *idx;
} history_t;

static int build_history(const cts_task_compare_t *c, int s, size_t ntasks, history_t *h) {
  h->off = calloc(ntasks + 2, sizeof *h->off);
  h->idx = malloc((2 * c->nseq[s] + 1) * sizeof *h->idx);
  if (!h->off || !h->idx) return -ENOMEM;
  const cts_align_event_t *e = c->seq[s];
  for (size_t i = 0; i < c->nseq[s]; i++) {
    if (e[i].src != NONE) h->off[e[i].src + 2]++;
    h->off[e[i].dst + 2]++;
  }
  for (size_t k = 2; k < ntasks + 2; k++) h->off[k] += h->off[k - 1];
  for (size_t i = 0; i < c->nseq[s]; i++) { /* off[task + 1] is the fill cursor */
    if (e[i].src != NONE) h->idx[h->off[e[i].src + 1]++] = (uint32_t)i;
    h->idx[h->off[e[i].dst + 1]++] = (uint32_t)i;
  }
  return 0;
}

static void history_fini(history_t *h) {
  free(h->off);
  free(h->idx);
}

/* Where key occurs in a history from position from on (an index into seq[s]), SIZE_MAX if
 * never. */
static size_t find_in_history(const cts_task_compare_t *c, int s, const history_t *h, uint32_t task,
                              size_t from, uint64_t key) {
  for (size_t k = h->off[task] + from; k < h->off[task + 1]; k++)
    if (cts_task_compare_key(c, s, &c->seq[s][h->idx[k]]) == key) return h->idx[k];
  return SIZE_MAX;
}

/* Compares the history of every matched task and keeps the earliest divergence. */
static int find_divergence(const cts_tasks_t *const m[2], cts_task_compare_t *c,
                           const uint32_t *peer) {
  history_t h[2] = {{0}, {0}};
  int e = 0;
  for (int s = 0; s < 2 && !e; s++) e = build_history(c, s, m[s]->ntasks, &h[s]);
  uint64_t best_t[2] = {UINT64_MAX, UINT64_MAX};
  for (uint32_t g = 0; !e && g < m[0]->ntasks; g++) {
    const uint32_t b = peer[g];
    if (b == NONE) continue;
    const uint32_t task[2] = {g, b};
    const size_t len[2] = {h[0].off[g + 1] - h[0].off[g], h[1].off[b + 1] - h[1].off[b]};
    size_t i = 0;
    while (i < len[0] && i < len[1] &&
           cts_task_compare_key(c, 0, &c->seq[0][h[0].idx[h[0].off[g] + i]]) ==
               cts_task_compare_key(c, 1, &c->seq[1][h[1].idx[h[1].off[b] + i]]))
      i++;
    if (i == len[0] && i == len[1]) continue;
    uint64_t t[2];
    size_t at[2];
    for (int s = 0; s < 2; s++) {
      at[s] = i < len[s] ? h[s].idx[h[s].off[task[s]] + i] : SIZE_MAX;
      t[s] = at[s] != SIZE_MAX ? c->seq[s][at[s]].t : m[s]->last_ns;
    }
    if (t[1] > best_t[1] || (t[1] == best_t[1] && t[0] >= best_t[0])) continue;
    best_t[0] = t[0], best_t[1] = t[1];
    c->diverged = true;
    c->common = i;
    for (int s = 0; s < 2; s++)
      c->point[s] = (cts_align_point_t){.task = task[s],
                                        .last = i ? h[s].idx[h[s].off[task[s]] + i - 1] : SIZE_MAX,
                                        .at = at[s],
                                        .later = SIZE_MAX,
                                        .t = t[s]};
  }
  if (!e && c->diverged)
    for (int s = 0; s < 2; s++) {
      const cts_align_point_t *o = &c->point[1 - s];
      if (o->at != SIZE_MAX)
        c->point[s].later = find_in_history(c, s, &h[s], c->point[s].task, c->common,
                                            cts_task_compare_key(c, 1 - s, &c->seq[1 - s][o->at]));
    }
  history_fini(&h[0]);
  history_fini(&h[1]);
  return e;
}

int cts_task_compare(const cts_tasks_t *const m[2], const cts_task_trail_t *const trail[2],
                     cts_task_compare_t *out) {
  memset(out, 0, sizeof *out);
  for (int s = 0; s < 2; s++) {
    if (trail[s]->nomem) return -ENOMEM;
    out->path[s] = malloc((m[s]->ntasks + 1) * sizeof *out->path[s]);
    if (!out->path[s]) return -ENOMEM;
    for (size_t i = 0; i < m[s]->ntasks; i++) out->path[s][i] = path_hash(m[s], (uint32_t)i);
    const int e = build_sequence(m[s], trail[s], out, s);
    if (e) return e;
  }
  uint32_t *peer = malloc((m[0]->ntasks + 1) * sizeof *peer);
  int e = peer ? match_tasks(m, out, peer) : -ENOMEM;
  if (!e) e = find_divergence(m, out, peer);
  free(peer);
  return e;
}

void cts_task_compare_fini(cts_task_compare_t *c) {
  for (int s = 0; s < 2; s++) {
    free(c->seq[s]);
    free(c->path[s]);
  }
  free(c->paths);
  memset(c, 0, sizeof *c);
}
