/* SPDX-License-Identifier: MIT */
/* Memory attributed to tasks (task_memory.h). */
#include "task_memory.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "hist.h"
#include "alloc_profile.h"

#define NONE CTS_TASKS_NONE

int cts_task_mem_init(cts_task_mem_t *tm) {
  memset(tm, 0, sizeof *tm);
  cts_u64map_init(&tm->by_obj);
  cts_u64map_init(&tm->by_task);
  tm->status = CTS_TASK_MEM_NO_ANCHOR;
  tm->sample_rate = 1.0;
  /* rows[0]: allocations made while no task ran on their thread */
  if (cts_grow((void **)&tm->rows, &tm->cap_rows, 0, sizeof *tm->rows)) return -ENOMEM;
  tm->rows[0] = (cts_task_mem_row_t){.task = NONE, .lane = NONE};
  tm->nrows = 1;
  tm->lag_hist = calloc(2 * CTS_TASK_MEM_LAG_US, sizeof *tm->lag_hist);
  return tm->lag_hist ? 0 : -ENOMEM;
}

void cts_task_mem_fini(cts_task_mem_t *tm) {
  free(tm->rows);
  free(tm->objs);
  free(tm->lag_hist);
  cts_u64map_fini(&tm->by_obj);
  cts_u64map_fini(&tm->by_task);
  memset(tm, 0, sizeof *tm);
}

/* The row of task index `task`, created on its first allocation; UINT32_MAX on no memory. */
static uint32_t row_of(cts_task_mem_t *tm, uint32_t task, uint32_t lane) {
  if (task == NONE) return 0;
  bool added;
  uint64_t *v = cts_u64map_insert(&tm->by_task, task, tm->nrows, &added);
  if (!v) return UINT32_MAX;
  if (!added) return (uint32_t)*v;
  if (cts_grow((void **)&tm->rows, &tm->cap_rows, tm->nrows, sizeof *tm->rows)) {
    cts_u64map_remove(&tm->by_task, task);
    return UINT32_MAX;
  }
  tm->rows[tm->nrows] = (cts_task_mem_row_t){.task = task, .lane = lane};
  return (uint32_t)tm->nrows++;
}

int cts_task_mem_on_alloc(void *user_data, uint32_t task, uint64_t obj, uint64_t t, uint32_t lane) {
  cts_task_mem_t *tm = user_data;
  const uint32_t row = row_of(tm, task, lane);
  if (row == UINT32_MAX) return -ENOMEM;
  if (cts_grow((void **)&tm->objs, &tm->cap_objs, tm->nobjs, sizeof *tm->objs)) return -ENOMEM;
  bool added;
  uint64_t *v = cts_u64map_insert(&tm->by_obj, obj, tm->nobjs + 1, &added);
  if (!v) return -ENOMEM;
  if (!added) { /* a hostile or concatenated trace: the first one stands */
    tm->duplicate_ids++;
    return 0;
  }
  tm->objs[tm->nobjs++] = (cts_task_mem_obj_t){.t_ns = t, .row = row};
  return 0;
}

cts_task_mem_status_t cts_task_clock_align(const cts_task_anchor_t *a, const cts_mt_info_t *info,
                                           int64_t *task_offset_ns, int64_t *shift_ns) {
  if (!info) return CTS_TASK_MEM_NO_INFO;
  if (!a->present) return CTS_TASK_MEM_NO_ANCHOR;
  if (a->pid < 0 || (uint64_t)a->pid != info->pid) return CTS_TASK_MEM_OTHER_PROCESS;
  /* Two's complement differences: both clocks are far below 2^63 ns. */
  const int64_t shift = (int64_t)(a->task_ns - a->realtime_ns);
  if (shift_ns) *shift_ns = shift;
  *task_offset_ns = (int64_t)(info->start_time_us * 1000u) + shift;
  return CTS_TASK_MEM_ALIGNED;
}

cts_task_mem_status_t cts_task_mem_align(cts_task_mem_t *tm, const cts_tasks_t *m,
                                         const cts_mt_info_t *info) {
  if (info) {
    tm->mem_pid = info->pid;
    tm->sample_rate = info->sample_rate > 0 && info->sample_rate <= 1 ? info->sample_rate : 1.0;
  }
  tm->anchor_pid = (uint64_t)m->anchor_pid;
  const cts_task_anchor_t a = {m->have_anchor, m->anchor_pid, m->anchor_ns, m->anchor_other_ns};
  return tm->status = cts_task_clock_align(&a, info, &tm->task_offset_ns, &tm->shift_ns);
}

static void add(cts_task_mem_figures_t *f, uint64_t samples, double count) {
  f->blocks++;
  f->samples += samples;
  f->count += count;
}

int cts_task_mem_event(cts_task_mem_t *tm, const cts_mt_event_t *ev) {
  if (tm->status != CTS_TASK_MEM_ALIGNED) return 0;
  if (ev->kind == CTS_MT_ALLOC) {
    const double count =
        cts_est_clamp(1.0 / cts_block_sample_probability(ev->length, tm->sample_rate));
    const uint64_t *v = cts_u64map_find(&tm->by_obj, ev->obj_id);
    cts_task_mem_obj_t *o = v ? &tm->objs[*v - 1] : NULL;
    if (o && o->state != 0) o = NULL; /* the id allocated twice: a corrupt trace */
    if (!o) {
      /* No ctfscope_alloc: kept for its free, in a row of its own. */
      if (cts_grow((void **)&tm->objs, &tm->cap_objs, tm->nobjs, sizeof *tm->objs)) return -ENOMEM;
      bool added;
      uint64_t *slot = cts_u64map_insert(&tm->by_obj, ev->obj_id, tm->nobjs + 1, &added);
      if (!slot) return -ENOMEM;
      if (!added) return 0; /* allocated twice: the second is ignored */
      tm->objs[tm->nobjs] = (cts_task_mem_obj_t){.row = NONE};
      o = &tm->objs[tm->nobjs++];
    } else {
      const int64_t err = (int64_t)o->t_ns - ((int64_t)(ev->time_us * 1000u) + tm->shift_ns);
      if (!tm->pairs || err < tm->err_min_ns) tm->err_min_ns = err;
      if (!tm->pairs || err > tm->err_max_ns) tm->err_max_ns = err;
      tm->pairs++;
      const int64_t us = err / 1000 + (err % 1000 < 0 ? -1 : 0); /* floor */
      const int64_t b = us < -CTS_TASK_MEM_LAG_US   ? 0
                        : us >= CTS_TASK_MEM_LAG_US ? 2 * CTS_TASK_MEM_LAG_US - 1
                                                    : us + CTS_TASK_MEM_LAG_US;
      tm->lag_hist[b]++;
    }
    o->state = 1;
    o->nsamples = ev->nsamples;
    o->count = count;
    add(o->row == NONE ? &tm->unattr_alloc : &tm->rows[o->row].alloc, ev->nsamples, count);
  } else if (ev->kind == CTS_MT_COLLECT) {
    const uint64_t *v = cts_u64map_find(&tm->by_obj, ev->obj_id);
    if (!v) return 0; /* never allocated in this trace */
    cts_task_mem_obj_t *o = &tm->objs[*v - 1];
    if (o->state != 1) return 0;
    o->state = 2;
    add(o->row == NONE ? &tm->unattr_freed : &tm->rows[o->row].freed, o->nsamples, o->count);
  }
  return 0;
}

static void live(cts_task_mem_figures_t *l, const cts_task_mem_figures_t *a,
                 const cts_task_mem_figures_t *f) {
  l->blocks = a->blocks - f->blocks;
  l->samples = a->samples - f->samples;
  l->count = a->count > f->count ? a->count - f->count : 0;
}

void cts_task_mem_finish(cts_task_mem_t *tm) {
  for (size_t i = 0; i < tm->nrows; i++) {
    cts_task_mem_row_t *r = &tm->rows[i];
    live(&r->live, &r->alloc, &r->freed);
  }
  live(&tm->unattr_live, &tm->unattr_alloc, &tm->unattr_freed);
}

const char *cts_task_mem_status_text(cts_task_mem_status_t s) {
  switch (s) {
    case CTS_TASK_MEM_ALIGNED:
      return "";
    case CTS_TASK_MEM_NO_ANCHOR:
      return "the task trace has no clock anchor (it was not written by ctfscope's task "
             "tracer together with the allocation tracer), so the traces cannot be aligned "
             "and no allocation can be attributed to a task";
    case CTS_TASK_MEM_OTHER_PROCESS:
      return "the task trace and the memory trace come from different processes, so no "
             "allocation can be attributed to a task";
    case CTS_TASK_MEM_NO_INFO:
      return "the memory trace has no trace-info record (no process id, no start time), so "
             "no allocation can be attributed to a task";
  }
  return "attribution is impossible";
}

int64_t cts_task_mem_lag_median_ns(const cts_task_mem_t *tm) {
  if (!tm->pairs || !tm->lag_hist) return 0;
  uint64_t seen = 0;
  for (int64_t b = 0; b < 2 * CTS_TASK_MEM_LAG_US; b++) {
    seen += tm->lag_hist[b];
    if (seen * 2 >= tm->pairs) return (b - CTS_TASK_MEM_LAG_US) * 1000 + 500;
  }
  return CTS_TASK_MEM_LAG_US * 1000;
}

double cts_task_mem_lag_within(const cts_task_mem_t *tm, uint64_t us) {
  if (!tm->pairs || !tm->lag_hist) return 0;
  uint64_t n = 0;
  const int64_t w = us < CTS_TASK_MEM_LAG_US ? (int64_t)us : CTS_TASK_MEM_LAG_US - 1;
  for (int64_t b = CTS_TASK_MEM_LAG_US - w; b < CTS_TASK_MEM_LAG_US + w; b++) n += tm->lag_hist[b];
  return (double)n / (double)tm->pairs;
}

uint64_t cts_task_mem_align_error_ns(const cts_task_mem_t *tm) {
  const int64_t m = cts_task_mem_lag_median_ns(tm);
  return m < 0 ? (uint64_t)-m : (uint64_t)m;
}
