/* SPDX-License-Identifier: MIT */
/* The task part of a report: the task model of analysis/tasks.h (mirage-trace-viewer's,
 * docs/formats/mprof-viewer.md §B.5, shared with the analysis commands), read in one pass
 * over a mirage-profile trace with its hooks collecting the running periods, interactions,
 * labels and counter values, then laid out in rows and written as columnar arrays the
 * viewer indexes per row (so drawing touches only visible rows and binary searches inside
 * them). The model has lanes (tasks.h): each OS thread of a multi-threaded trace keeps its
 * own current task, so running periods, running times and the memory attributed to tasks
 * are per lane, as in `ctfscope top`; the rows are tasks under their creators, whatever the
 * lane. Memory by task is analysis/task_memory.h's (the ctfscope_alloc events of the task
 * trace name the task of each sampled allocation), fed with the memory trace's events by
 * report_mem_load (report_mem_opts_t.attribute).
 * Not done: bind simplification and read/try_read merging (every interaction is drawn). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/load.h"
#include "../analysis/task_memory.h"
#include "../analysis/tasks.h"
#include "../analysis/units.h"
#include "../analysis/u64map.h"
#include "../common/grow.h"
#include "../os/mprof_ring.h"
#include "report.h"

#include <ctfscope/mprof.h>

/* Task flags and arrow kinds are the model's (CTS_TASK_F_*, CTS_LINK_*): the viewer reads
 * their values. */

#define NONE               UINT32_MAX
#define MAX_ROW_SCAN       4096u
#define MAX_TIMELINE_MARKS 100000u
/* Level-of-detail budgets: beyond them, arrows and activations are thinned evenly (every
 * k-th kept, order preserved) and the report says how many were left out. */
#define MAX_ARROWS 400000u
#define MAX_ACTS   400000u
/* Rows of the memory-by-task table (the biggest; rows_total says how many there are). */
#define MAX_MEM_ROWS 1000u

typedef struct task {
  int64_t id;
  uint64_t start, end, last; /* ns, trace clock */
  uint64_t running_ns;       /* the model's: the sum of its running periods on every lane */
  uint32_t parent, becomes, first_child, next_sibling, last_child, label, row, order, runs;
  uint8_t type, flags;
} task_t;

typedef struct arrow {
  uint64_t t0, t1;
  uint32_t src, dst;
  uint8_t kind;
} arrow_t;

typedef struct act {
  uint64_t t0, t1;
  uint32_t task, lane;
} act_t;

typedef struct label {
  uint64_t t;
  uint32_t task, str;
} label_t;

typedef struct sample {
  uint64_t t;
  int64_t v;
} sample_t;

typedef struct counter {
  uint32_t name;
  int64_t value;
  sample_t *s;
  size_t n, cap;
} counter_t;

#define VEC(T)     \
  struct {         \
    T *v;          \
    size_t n, cap; \
  }

struct report_tasks {
  report_tasks_opts_t opts;
  VEC(task_t) tasks;
  VEC(arrow_t) arrows;
  VEC(act_t) acts;
  VEC(label_t) labels;
  VEC(uint64_t) idle;      /* pairs: each lane's as read, then the process's (idle_bands) */
  VEC(uint64_t) gc;        /* pairs */
  VEC(counter_t) counters; /* by the model's counter index */
  VEC(char *) strings;     /* the model's, taken over once it is read */
  cts_tasks_t model;
  uint64_t first_ns, last_ns;
  cts_mprof_summary_t summary;
  uint32_t nrows, nlanes;
  uint64_t *lane_run; /* per lane: the time it ran a task (ns) */
  /* Kept from the model: events the tracer lost (ctfscope_lost) and the clock anchor. */
  uint64_t lost;
  cts_task_anchor_t anchor;
  /* Memory by task: ctfscope_alloc events while the trace is read, then the memory trace's
   * events (report_tasks_mem_event); mem_state 0 before them, 1 aligned, 2 finished. */
  cts_task_mem_t tm;
  bool tm_ok;
  int mem_state;
  int err;
};

#define PUSH(vec, val)                                               \
  (cts_grow((void **)&(vec).v, &(vec).cap, (vec).n, sizeof *(vec).v) \
       ? -ENOMEM                                                     \
       : ((vec).v[(vec).n++] = (val), 0))

/* The model's hooks: what the timeline draws, collected as the model finds it. */
static int on_run(void *ud, uint32_t task, uint64_t t0, uint64_t t1, uint32_t lane) {
  report_tasks_t *r = ud;
  return PUSH(r->acts, ((act_t){t0, t1, task, lane}));
}

static int on_idle(void *ud, uint64_t t0, uint64_t t1, uint32_t lane) {
  report_tasks_t *r = ud;
  (void)lane;
  return PUSH(r->idle, t0) || PUSH(r->idle, t1) ? -ENOMEM : 0;
}

static int on_link(void *ud, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst, uint64_t t1) {
  report_tasks_t *r = ud;
  if (kind == CTS_LINK_CREATE) return 0; /* the tree shows creation */
  return PUSH(r->arrows, ((arrow_t){t0, t1, src, dst, (uint8_t)kind}));
}

static int on_label(void *ud, uint32_t task, uint64_t t, uint32_t str, bool failure) {
  report_tasks_t *r = ud;
  (void)failure;
  return PUSH(r->labels, ((label_t){t, task, str}));
}

static int on_counter(void *ud, uint32_t counter, uint64_t t, int64_t value) {
  report_tasks_t *r = ud;
  while (r->counters.n <= counter) {
    const uint32_t name = r->model.counters[r->counters.n].name;
    if (PUSH(r->counters, ((counter_t){.name = name}))) return -ENOMEM;
  }
  counter_t *c = &r->counters.v[counter];
  c->value = value;
  if (cts_grow((void **)&c->s, &c->cap, c->n, sizeof *c->s)) return -ENOMEM;
  c->s[c->n++] = (sample_t){t, value};
  return 0;
}

static int on_alloc(void *ud, uint32_t task, uint64_t obj, uint64_t t, uint32_t lane) {
  report_tasks_t *r = ud;
  return cts_task_mem_on_alloc(&r->tm, task, obj, t, lane);
}

static int on_gc(void *ud, uint64_t t0, uint64_t t1) {
  report_tasks_t *r = ud;
  return PUSH(r->gc, t0) || PUSH(r->gc, t1) ? -ENOMEM : 0;
}

static int on_event(void *ud, const cts_mprof_event_t *ev) {
  report_tasks_t *r = ud;
  return cts_tasks_event(&r->model, ev);
}

/* A new packet: the model puts it on a lane (tasks.h). */
static int on_packet(void *ud, const cts_mprof_packet_t *p) {
  report_tasks_t *r = ud;
  return cts_tasks_packet(&r->model, p);
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const report_tasks_t *r = ud;
  (void)code;
  if (!r->opts.quiet)
    cts_logf(&r->opts.log, CTS_LOG_WARNING, "%s: at offset %llu: %s", r->opts.path,
             (unsigned long long)offset, message);
}

/* The model's tasks, ends and should_resolve settled, copied into the rows' tasks; then the
 * tree. The model's strings are taken over; the rest of it is freed. */
static int settle(report_tasks_t *r) {
  cts_tasks_finish(&r->model);
  const cts_tasks_t *m = &r->model;
  r->first_ns = m->first_ns;
  r->last_ns = m->last_ns;
  r->nlanes = (uint32_t)m->nlanes;
  r->lane_run = malloc((m->nlanes + 1) * sizeof *r->lane_run);
  if (!r->lane_run) return -ENOMEM;
  for (size_t i = 0; i < m->nlanes; i++) r->lane_run[i] = m->lanes[i].running_ns;
  r->lost = m->lost;
  r->anchor = (cts_task_anchor_t){m->have_anchor, m->anchor_pid, m->anchor_ns, m->anchor_other_ns};
  r->strings.v = cts_strtab_release(&r->model.strs, &r->strings.n);
  r->strings.cap = r->strings.n;
  /* The model's indexes are no longer needed: free them before the copy (peak memory). */
  cts_u64map_fini(&r->model.by_id);
  r->tasks.v = malloc((m->ntasks + 1) * sizeof *r->tasks.v);
  if (!r->tasks.v) return -ENOMEM;
  r->tasks.n = r->tasks.cap = m->ntasks;
  for (size_t i = 0; i < m->ntasks; i++) {
    const cts_task_t *k = &m->tasks[i];
    r->tasks.v[i] = (task_t){.id = k->id,
                             .start = k->start,
                             .end = k->end,
                             .last = k->last,
                             .running_ns = k->running_ns,
                             .parent = k->parent,
                             .becomes = k->becomes,
                             .first_child = NONE,
                             .next_sibling = NONE,
                             .last_child = NONE,
                             .label = k->label,
                             .row = NONE,
                             .runs = k->runs,
                             .type = k->type,
                             .flags = k->flags};
  }
  cts_tasks_fini(&r->model);
  task_t *v = r->tasks.v;
  const size_t n = r->tasks.n;
  /* Children lists in creation order (tasks are stored in the order they appeared). */
  for (size_t i = 0; i < n; i++) {
    const uint32_t p = v[i].parent;
    if (p == NONE) continue;
    if (v[p].last_child == NONE)
      v[p].first_child = (uint32_t)i;
    else
      v[v[p].last_child].next_sibling = (uint32_t)i;
    v[p].last_child = (uint32_t)i;
  }
  return 0;
}

/* Greedy rows (§B.6, simplified): depth-first from the roots, each task on the first row at
 * or below its parent's next row whose last task ended before it starts; a task its parent
 * `becomes` may continue on the parent's row. */
static int layout(report_tasks_t *r) {
  task_t *v = r->tasks.v;
  const size_t n = r->tasks.n;
  VEC(uint64_t) row_end = {0};
  VEC(uint32_t) stack = {0};
  int e = 0;
  /* Roots: preexisting tasks by id, then the others in order. */
  for (size_t pass = 0; pass < 1 && !e; pass++) {
    for (size_t i = n; i-- > 0 && !e;)
      if (v[i].parent == NONE) e = PUSH(stack, (uint32_t)i);
  }
  while (!e && stack.n) {
    const uint32_t i = stack.v[--stack.n];
    task_t *tk = &v[i];
    uint32_t cand = 0;
    if (tk->parent != NONE) {
      const task_t *p = &v[tk->parent];
      cand = p->row + 1;
      if (p->becomes == i && p->end <= tk->start) cand = p->row;
    }
    uint32_t row = cand, scanned = 0;
    while (row < row_end.n && row_end.v[row] >= tk->start && scanned < MAX_ROW_SCAN)
      row++, scanned++;
    if (scanned == MAX_ROW_SCAN) row = (uint32_t)row_end.n;
    while (!e && row_end.n <= row) e = PUSH(row_end, 0);
    if (e) break;
    if (row_end.v[row] >= tk->start && row_end.v[row] > 0) { /* only possible at the scan cap */
      row = (uint32_t)row_end.n;
      e = PUSH(row_end, 0);
    }
    row_end.v[row] = tk->end > tk->start ? tk->end : tk->start + 1;
    tk->row = row;
    /* Children, pushed in reverse so the first created is laid out first. */
    size_t before = stack.n;
    for (uint32_t c = tk->first_child; c != NONE && !e; c = v[c].next_sibling) e = PUSH(stack, c);
    for (size_t a = before, b = stack.n; b > a + 1; a++, b--) {
      const uint32_t t = stack.v[a];
      stack.v[a] = stack.v[b - 1];
      stack.v[b - 1] = t;
    }
  }
  r->nrows = (uint32_t)row_end.n;
  free(row_end.v);
  free(stack.v);
  return e;
}

int report_tasks_load(report_tasks_t **out, const report_tasks_opts_t *opts) {
  *out = NULL;
  report_tasks_t *r = calloc(1, sizeof *r);
  if (!r) {
    cts_logf(&opts->log, CTS_LOG_ERROR, "out of memory");
    return CTS_E_NOMEM;
  }
  r->opts = *opts;
  if (!r->opts.max_tasks) r->opts.max_tasks = 1u << 21;
  const cts_tasks_config_t cfg = {.lanes = true,
                                  .max_tasks = r->opts.max_tasks,
                                  .hooks = {.user_data = r,
                                            .on_run = on_run,
                                            .on_idle = on_idle,
                                            .on_link = on_link,
                                            .on_label = on_label,
                                            .on_counter = on_counter,
                                            .on_gc = on_gc,
                                            .on_alloc = on_alloc}};
  r->tm_ok = cts_task_mem_init(&r->tm) == 0;
  if (!r->tm_ok || cts_tasks_init(&r->model, &cfg)) {
    cts_logf(&opts->log, CTS_LOG_ERROR, "out of memory");
    report_tasks_free(r);
    return CTS_E_NOMEM;
  }
  const cts_mprof_handler_t h = {
      .user_data = r, .on_packet = on_packet, .on_event = on_event, .on_warning = on_warning};
  char msg[512];
  bool input_error = false;
  const int err =
      cts_os_mprof_read_file(opts->path, &h, false, &r->summary, msg, sizeof msg, &input_error);
  if (err) {
    if (input_error) {
      cts_logf(&opts->log, CTS_LOG_ERROR, "%s", msg);
      report_tasks_free(r);
      return err;
    }
    if (err == -ENOMEM || err == CTS_E_NOMEM || r->model.err) {
      cts_logf(&opts->log, CTS_LOG_ERROR, "%s: out of memory", opts->path);
      report_tasks_free(r);
      return CTS_E_NOMEM;
    }
    cts_logf(&opts->log, CTS_LOG_ERROR, "%s: %s (%s); the report covers what was read before it",
             opts->path, msg, cts_err_name(err));
  }
  if (settle(r) || layout(r)) {
    cts_logf(&opts->log, CTS_LOG_ERROR, "%s: out of memory", opts->path);
    report_tasks_free(r);
    return CTS_E_NOMEM;
  }
  r->opts.log = (cts_log_t){0}; /* the caller's, for this call only */
  *out = r;
  return err;
}

void report_tasks_span(const report_tasks_t *t, uint64_t *first_ns, uint64_t *last_ns) {
  *first_ns = t->first_ns;
  *last_ns = t->last_ns;
}

void report_tasks_free(report_tasks_t *r) {
  if (!r) return;
  for (size_t i = 0; i < r->strings.n; i++) free(r->strings.v[i]);
  for (size_t i = 0; i < r->counters.n; i++) free(r->counters.v[i].s);
  free(r->strings.v);
  free(r->counters.v);
  free(r->tasks.v);
  free(r->arrows.v);
  free(r->acts.v);
  free(r->labels.v);
  free(r->idle.v);
  free(r->gc.v);
  free(r->lane_run);
  cts_tasks_fini(&r->model);
  cts_task_mem_fini(&r->tm); /* also after a failed init, which may have allocated */
  free(r);
}

/* The alignment, once: from the anchor kept from the model and the memory trace's info. */
static void mem_align(report_tasks_t *r, const cts_mt_info_t *info) {
  if (r->mem_state) return;
  cts_tasks_t anchor = {.have_anchor = r->anchor.present,
                        .anchor_pid = r->anchor.pid,
                        .anchor_ns = r->anchor.task_ns,
                        .anchor_other_ns = r->anchor.realtime_ns};
  cts_task_mem_align(&r->tm, &anchor, info);
  r->mem_state = 1;
}

int report_tasks_mem_event(report_tasks_t *r, const cts_mt_info_t *info, const cts_mt_event_t *ev) {
  if (!r->tm_ok || r->mem_state == 2) return 0;
  mem_align(r, info);
  return cts_task_mem_event(&r->tm, ev);
}

int report_tasks_mem_finish(report_tasks_t *r, const cts_mt_info_t *info, int64_t *task_offset_ns) {
  if (!r->tm_ok) return CTS_TASK_MEM_NO_INFO;
  if (r->mem_state != 2) {
    mem_align(r, info);
    cts_task_mem_finish(&r->tm);
    r->mem_state = 2;
  }
  *task_offset_ns = r->tm.task_offset_ns;
  return (int)r->tm.status;
}

/* ----------------------------------------------------------------------------------- */

static const task_t *sort_tasks;
static int by_row_start(const void *a, const void *b) {
  const task_t *x = &sort_tasks[*(const uint32_t *)a], *y = &sort_tasks[*(const uint32_t *)b];
  if (x->row != y->row) return x->row < y->row ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}
static int act_by_row_t0(const void *a, const void *b) {
  const act_t *x = a, *y = b;
  const uint32_t rx = sort_tasks[x->task].row, ry = sort_tasks[y->task].row;
  if (rx != ry) return rx < ry ? -1 : 1;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}
static int label_by_task_t(const void *a, const void *b) {
  const label_t *x = a, *y = b;
  const uint32_t ox = sort_tasks[x->task].order, oy = sort_tasks[y->task].order;
  if (ox != oy) return ox < oy ? -1 : 1;
  return x->t < y->t ? -1 : x->t > y->t;
}
static int arrow_by_tmin(const void *a, const void *b) {
  const arrow_t *x = a, *y = b;
  const uint64_t tx = x->t0 < x->t1 ? x->t0 : x->t1, ty = y->t0 < y->t1 ? y->t0 : y->t1;
  return tx < ty ? -1 : tx > ty;
}

/* Keeps every k-th of n items (k = ceil(n / budget)), in order. */
static void thin(void *items, size_t *n, size_t size, size_t budget) {
  if (*n <= budget) return;
  const size_t k = (*n + budget - 1) / budget;
  char *p = items;
  size_t out = 0;
  for (size_t i = 0; i < *n; i += k, out++) memmove(p + out * size, p + i * size, size);
  *n = out;
}

/* a - b, held at the int64 range: times come from untrusted traces (any uint64). */
static int64_t sat_sub(int64_t a, int64_t b) {
  int64_t d;
  if (!__builtin_sub_overflow(a, b, &d)) return d;
  return b < 0 ? INT64_MAX : INT64_MIN;
}

/* An allocation mark's time (µs) on the task clock (ns), held at the int64 range. */
static int64_t mark_ns(uint64_t time_us, int64_t offset_ns) {
  int64_t ns, sum;
  if (time_us > (uint64_t)INT64_MAX / 1000u) return INT64_MAX;
  ns = (int64_t)time_us * 1000;
  if (__builtin_add_overflow(ns, offset_ns, &sum)) return offset_ns < 0 ? INT64_MIN : INT64_MAX;
  return sum;
}

/* The idle bands the timeline draws: the times when some lane was idle (its thread had
 * switched to no task) and no lane ran a task; with one lane, its idle periods as they are.
 * r->idle becomes disjoint pairs in time order (the viewer's band index needs that); out of
 * memory, there are no bands. */
static int pair_by_start(const void *a, const void *b) {
  const uint64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Merges the [t0, t1) pairs p[0..2n) (sorted by t0) into disjoint ones, in place; returns
 * how many are left. */
static size_t merge_pairs(uint64_t *p, size_t n) {
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    if (out && p[2 * i] <= p[2 * out - 1]) {
      if (p[2 * i + 1] > p[2 * out - 1]) p[2 * out - 1] = p[2 * i + 1];
    } else {
      p[2 * out] = p[2 * i], p[2 * out + 1] = p[2 * i + 1];
      out++;
    }
  }
  return out;
}

static void idle_bands(report_tasks_t *r) {
  if (r->nlanes <= 1 || !r->idle.n) return;
  const size_t na = r->acts.n;
  size_t ni = r->idle.n / 2;
  uint64_t *run = malloc((2 * na + 1) * sizeof *run);
  uint64_t *out = malloc((2 * (ni + na) + 1) * sizeof *out);
  size_t nout = 0;
  if (run && out) {
    for (size_t i = 0; i < na; i++) run[2 * i] = r->acts.v[i].t0, run[2 * i + 1] = r->acts.v[i].t1;
    qsort(run, na, 2 * sizeof *run, pair_by_start);
    const size_t nr = merge_pairs(run, na);
    qsort(r->idle.v, ni, 2 * sizeof *r->idle.v, pair_by_start);
    ni = merge_pairs(r->idle.v, ni);
    /* Each idle stretch minus the running stretches that overlap it. */
    size_t k = 0;
    for (size_t i = 0; i < ni; i++) {
      uint64_t cur = r->idle.v[2 * i];
      const uint64_t end = r->idle.v[2 * i + 1];
      while (k < nr && run[2 * k + 1] <= cur) k++;
      for (size_t j = k; j < nr && run[2 * j] < end && cur < end; j++) {
        if (run[2 * j] > cur) out[2 * nout] = cur, out[2 * nout + 1] = run[2 * j], nout++;
        if (run[2 * j + 1] > cur) cur = run[2 * j + 1];
      }
      if (cur < end) out[2 * nout] = cur, out[2 * nout + 1] = end, nout++;
    }
    free(r->idle.v);
    r->idle.v = out;
    r->idle.cap = 2 * (ni + na) + 1;
    out = NULL;
  }
  r->idle.n = 2 * nout;
  free(run);
  free(out);
}

/* The figures of a memory-by-task row, as `ctfscope top --by task --json` has them, and
 * "text": allocated, allocations, freed and live at end as its text output prints them. */
static void mem_figures(cts_out_t *o, const cts_mtprof_t *p, const cts_task_mem_figures_t *a,
                        const cts_task_mem_figures_t *f, const cts_task_mem_figures_t *l) {
  const double bps = cts_mtprof_bytes_per_sample(p);
  cts_out_printf(o,
                 "\"alloc_samples\":%llu,\"alloc_bytes\":%.0f,\"alloc_count\":%llu,"
                 "\"freed_bytes\":%.0f,\"freed_count\":%llu,\"live_samples\":%llu,"
                 "\"live_bytes\":%.0f,\"live_count\":%llu,\"text\":[",
                 (unsigned long long)a->samples, (double)a->samples * bps,
                 (unsigned long long)cts_est_round(a->count), (double)f->samples * bps,
                 (unsigned long long)cts_est_round(f->count), (unsigned long long)l->samples,
                 (double)l->samples * bps, (unsigned long long)cts_est_round(l->count));
  char buf[96];
  report_json_str(o, cts_est_bytes(p, a->samples, true, buf, sizeof buf));
  cts_out_char(o, ',');
  report_json_str(o, cts_grouped(cts_est_round(a->count), buf, sizeof buf));
  cts_out_char(o, ',');
  report_json_str(o, cts_est_bytes(p, f->samples, true, buf, sizeof buf));
  cts_out_char(o, ',');
  report_json_str(o, cts_est_bytes(p, l->samples, true, buf, sizeof buf));
  cts_out_char(o, ']');
}

/* Rows by allocated samples, then task index: the order of `top --by task`. */
static int mem_row_order(const void *a, const void *b) {
  const cts_task_mem_row_t *x = a, *y = b;
  if (x->alloc.samples != y->alloc.samples) return x->alloc.samples > y->alloc.samples ? -1 : 1;
  return x->task < y->task ? -1 : x->task > y->task;
}

/* "mem": memory by task (analysis/task_memory.h) when attribution is possible, else why
 * not. Rows name their task by its position in the written order ("task"). */
static void write_task_mem(cts_out_t *o, report_tasks_t *r, const cts_mtprof_t *p) {
  cts_task_mem_t *tm = &r->tm;
  const bool ok = tm->status == CTS_TASK_MEM_ALIGNED;
  cts_out_printf(o, ",\n\"mem\":{\"attribution\":\"%s\",\"reason\":", ok ? "exact" : "impossible");
  report_json_str(o, cts_task_mem_status_text(tm->status));
  if (!ok) {
    cts_out_char(o, '}');
    return;
  }
  const size_t n = tm->nrows - 1;
  qsort(tm->rows + 1, n, sizeof *tm->rows, mem_row_order); /* tm->by_task is stale now */
  const size_t shown = n < MAX_MEM_ROWS ? n : MAX_MEM_ROWS;
  cts_out_printf(o, ",\"pairs\":%llu,\"error_ns\":%llu,\"rows_total\":%zu,\"rows\":[",
                 (unsigned long long)tm->pairs, (unsigned long long)cts_task_mem_align_error_ns(tm),
                 n);
  for (size_t i = 0; i < shown; i++) {
    const cts_task_mem_row_t *row = &tm->rows[1 + i];
    const task_t *k = &r->tasks.v[row->task];
    cts_out_printf(o, "%s{\"task\":%u,\"id\":%lld,\"lane\":%u,", i ? ",\n" : "\n", k->order,
                   (long long)k->id, row->lane);
    mem_figures(o, p, &row->alloc, &row->freed, &row->live);
    cts_out_char(o, '}');
  }
  cts_out_str(o, "],\n\"outside\":{");
  mem_figures(o, p, &tm->rows[0].alloc, &tm->rows[0].freed, &tm->rows[0].live);
  cts_out_str(o, "},\n\"unattributed\":{");
  mem_figures(o, p, &tm->unattr_alloc, &tm->unattr_freed, &tm->unattr_live);
  cts_out_str(o, "}}");
}

/* Time relative to the origin (may be negative when the two traces are offset). */
static int64_t rel(uint64_t t, int64_t origin) {
  return sat_sub(t > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)t, origin);
}

void report_tasks_write(cts_out_t *o, report_tasks_t *r, int64_t origin_ns,
                        const report_alloc_mark_t *marks, size_t nmarks, int64_t marks_offset_ns,
                        const cts_mtprof_t *prof) {
  idle_bands(r); /* before the activations are thinned */
  const size_t n = r->tasks.n;
  task_t *v = r->tasks.v;
  uint32_t *order = malloc((n + 1) * sizeof *order);
  if (!order) {
    cts_out_str(o, "null");
    return;
  }
  for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
  sort_tasks = v;
  qsort(order, n, sizeof *order, by_row_start);
  for (size_t i = 0; i < n; i++) v[order[i]].order = (uint32_t)i;
#define POS(idx) ((idx) == NONE ? -1 : (int64_t)v[idx].order)

  cts_out_str(o, "{\"file\":");
  report_json_str(o, cts_basename(r->opts.path));
  cts_out_printf(o, ",\"events\":%llu,\"packets\":%llu,\"wrapped\":%s,\"warnings\":%llu",
                 (unsigned long long)r->summary.events, (unsigned long long)r->summary.packets,
                 r->summary.wrapped ? "true" : "false", (unsigned long long)r->summary.warnings);
  cts_out_printf(o, ",\"lost\":%llu,\"lanes\":%u,\"lane_run\":[", (unsigned long long)r->lost,
                 r->nlanes);
  for (uint32_t l = 0; l < r->nlanes; l++)
    cts_out_printf(o, "%s%llu", l ? "," : "", (unsigned long long)r->lane_run[l]);
  cts_out_char(o, ']');
  cts_out_printf(o, ",\"origin_ns\":%lld,\"first\":%lld,\"end\":%lld,\"n\":%zu,\"rows\":%u",
                 (long long)origin_ns, (long long)rel(r->first_ns, origin_ns),
                 (long long)rel(r->last_ns, origin_ns), n, r->nrows);
  /* Tasks in (row, start) order; per-row counts. Large arrays are compact columns
   * (report_col_t); the viewer decodes them before drawing. */
  report_col_t col;
#define COL(name, delta, count, expr)                                           \
  do {                                                                          \
    report_col_init(&col, delta);                                               \
    for (size_t i = 0; i < (count); i++) report_col_put(&col, (int64_t)(expr)); \
    cts_out_str(o, ",\n");                                                      \
    report_col_write(o, name, &col);                                            \
  } while (0)
  cts_out_str(o, ",\n\"row_n\":[");
  {
    size_t i = 0;
    for (uint32_t row = 0; row < r->nrows; row++) {
      size_t c = 0;
      while (i < n && v[order[i]].row == row) i++, c++;
      cts_out_printf(o, "%s%zu", row ? "," : "", c);
    }
  }
  cts_out_char(o, ']');
  COL("start", true, n, rel(v[order[i]].start, origin_ns));
  COL("dur", false, n, v[order[i]].end - v[order[i]].start);
  COL("id", true, n, v[order[i]].id);
  COL("parent", true, n, POS(v[order[i]].parent));
  /* Relative to the task; 0 (a task never becomes itself) means none. */
  COL("becomes", false, n,
      POS(v[order[i]].becomes) < 0 ? 0 : POS(v[order[i]].becomes) - (int64_t)i);
  COL("type", false, n, v[order[i]].type);
  COL("flags", false, n, v[order[i]].flags);
  COL("label", false, n, v[order[i]].label == NONE ? -1 : (int64_t)v[order[i]].label);
  /* Running time (the sum over every lane, as `top` has it) and periods, per task. */
  COL("run", false, n, v[order[i]].running_ns);
  COL("runs", false, n, v[order[i]].runs);
  cts_out_str(o, ",\n");
  report_strs_write(o, "strings", (const char *const *)r->strings.v, r->strings.n);
  /* Labels by task position then time (the viewer packs them per task). */
  if (r->labels.n) qsort(r->labels.v, r->labels.n, sizeof *r->labels.v, label_by_task_t);
  const label_t *lab = r->labels.v;
  cts_out_printf(o, ",\n\"labels\":{\"n\":%zu", r->labels.n);
  COL("task", true, r->labels.n, v[lab[i].task].order);
  COL("t", true, r->labels.n, rel(lab[i].t, origin_ns));
  COL("s", false, r->labels.n, lab[i].str);
  cts_out_char(o, '}');
  /* Arrows by their earlier end. */
  if (r->arrows.n) qsort(r->arrows.v, r->arrows.n, sizeof *r->arrows.v, arrow_by_tmin);
  const size_t all_arrows = r->arrows.n;
  thin(r->arrows.v, &r->arrows.n, sizeof *r->arrows.v, MAX_ARROWS);
  const size_t na = r->arrows.n;
  const arrow_t *ar = r->arrows.v;
  cts_out_printf(o, ",\n\"arrows\":{\"n\":%zu", na);
  COL("kind", false, na, ar[i].kind);
  COL("src", false, na, v[ar[i].src].order);
  COL("dst", false, na, v[ar[i].dst].order);
  COL("t0", true, na, rel(ar[i].t0, origin_ns));
  COL("dt", false, na, (int64_t)ar[i].t1 - (int64_t)ar[i].t0);
  cts_out_char(o, '}');
  /* Activations grouped by row, by start time inside a row. */
  if (r->acts.n) qsort(r->acts.v, r->acts.n, sizeof *r->acts.v, act_by_row_t0);
  const size_t all_acts = r->acts.n;
  thin(r->acts.v, &r->acts.n, sizeof *r->acts.v, MAX_ACTS);
  cts_out_printf(o, ",\n\"arrows_total\":%zu,\"acts_total\":%zu", all_arrows, all_acts);
  const size_t nact = r->acts.n;
  const act_t *ac = r->acts.v;
  cts_out_printf(o, ",\n\"acts\":{\"n\":%zu", nact);
  COL("task", false, nact, v[ac[i].task].order);
  COL("t0", true, nact, rel(ac[i].t0, origin_ns));
  COL("dur", false, nact, ac[i].t1 - ac[i].t0);
  COL("lane", false, nact, ac[i].lane);
  cts_out_char(o, '}');
  /* Bands: [start, end] pairs. */
  COL("idle", true, r->idle.n, rel(r->idle.v[i], origin_ns));
  COL("gc", true, r->gc.n, rel(r->gc.v[i], origin_ns));
  cts_out_str(o, ",\n\"counters\":[");
  for (size_t c = 0; c < r->counters.n; c++) {
    const counter_t *k = &r->counters.v[c];
    cts_out_str(o, c ? ",{\"name\":" : "{\"name\":");
    report_json_str(o, r->strings.v[k->name]);
    COL("t", true, k->n, rel(k->s[i].t, origin_ns));
    COL("v", true, k->n, k->s[i].v);
    cts_out_str(o, "}");
  }
  cts_out_char(o, ']');
  if (marks && nmarks) {
    /* Allocation marks for the timeline, at most MAX_TIMELINE_MARKS (neighbours merged). */
    const size_t group = (nmarks + MAX_TIMELINE_MARKS - 1) / MAX_TIMELINE_MARKS;
    const size_t ngroups = (nmarks + group - 1) / group;
    cts_out_printf(o, ",\n\"marks\":{\"n\":%zu", ngroups);
    COL("t", true, ngroups, sat_sub(mark_ns(marks[i * group].time_us, marks_offset_ns), origin_ns));
    report_col_init(&col, false);
    for (size_t i = 0; i < nmarks; i += group) {
      uint64_t sum = 0;
      for (size_t j = i; j < i + group && j < nmarks; j++) sum += marks[j].samples;
      report_col_put(&col, (int64_t)sum);
    }
    cts_out_str(o, ",\n");
    report_col_write(o, "s", &col);
    cts_out_str(o, "}");
  }
  if (prof && r->mem_state == 2) write_task_mem(o, r, prof);
#undef COL
  cts_out_char(o, '}');
  free(order);
#undef POS
}
