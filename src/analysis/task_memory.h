/* SPDX-License-Identifier: MIT */
/* Memory attributed to tasks: which task ran on the allocating thread when each sampled
 * allocation of a memtrace trace was made, from the ctfscope_alloc events of a task trace of
 * the same process (docs/formats/mprof.md §14.1), and the clock that aligns both traces
 * (§14.2). Per task: allocated, freed and live bytes and counts, and its lane; the same for
 * allocations made while no task ran on their thread ("outside tasks") and for those the
 * task trace says nothing of ("unattributed": its ring wrapped over them, or they were
 * sampled before task tracing started).
 *
 * Use: read the task trace into a cts_tasks_t whose hooks.on_alloc is cts_task_mem_on_alloc
 * (user data: the cts_task_mem_t); then cts_task_mem_align() with the memory trace's info;
 * then feed every memtrace event to cts_task_mem_event(); then cts_task_mem_finish(). When
 * the alignment is not CTS_TASK_MEM_ALIGNED, attribution is impossible: the caller says so
 * (cts_task_mem_status_text()) and must not show the per-task figures.
 *
 * Consumers: `ctfscope top --by task` (src/cli/cmd_top_tasks.c). The report's "memory by
 * running task" can call the same four functions on the traces it loads and show rows[]
 * (keyed by task index in its model) instead of its own time-based attribution.
 *
 * Memory: 32 bytes per sampled allocation of the task trace, plus a row per task that
 * allocated. Not thread-safe: one caller at a time. */
#ifndef CTS_ANALYSIS_TASK_MEMORY_H
#define CTS_ANALYSIS_TASK_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

#include "tasks.h"
#include "u64map.h"

/* Sampled blocks, their samples (bytes = samples × bytes per sample) and the estimated
 * number of allocations (each sampled block weighs 1 / its probability of being sampled). */
typedef struct cts_task_mem_figures {
  uint64_t blocks, samples;
  double count;
} cts_task_mem_figures_t;

typedef struct cts_task_mem_row {
  uint32_t task; /* index in the task model; CTS_TASKS_NONE for the outside-tasks row */
  uint32_t lane; /* the lane of its first ctfscope_alloc event */
  cts_task_mem_figures_t alloc, freed, live;
} cts_task_mem_row_t;

typedef enum cts_task_mem_status {
  CTS_TASK_MEM_ALIGNED,       /* same process, anchored clocks: attribution is exact */
  CTS_TASK_MEM_NO_ANCHOR,     /* the task trace has no clock anchor (another tool's) */
  CTS_TASK_MEM_OTHER_PROCESS, /* the anchor names another process than the memory trace */
  CTS_TASK_MEM_NO_INFO,       /* the memory trace has no trace-info record */
} cts_task_mem_status_t;

typedef struct cts_task_mem_obj {
  uint64_t t_ns;     /* task-trace time of its ctfscope_alloc event */
  uint32_t row;      /* index in rows[] */
  uint32_t state;    /* 0: only in the task trace; 1: allocated; 2: freed */
  uint64_t nsamples; /* once allocated */
  double count;      /* its weight in allocation counts */
} cts_task_mem_obj_t;

typedef struct cts_task_mem {
  cts_task_mem_row_t *rows; /* rows[0] is outside tasks; the others by first allocation */
  size_t nrows, cap_rows;
  cts_task_mem_figures_t unattr_alloc, unattr_freed, unattr_live; /* no ctfscope_alloc */
  cts_task_mem_obj_t *objs;
  size_t nobjs, cap_objs;
  cts_u64map_t by_obj;    /* object id → index in objs + 1 */
  cts_u64map_t by_task;   /* task index → row */
  uint64_t duplicate_ids; /* ctfscope_alloc events naming an id seen before (ignored) */
  /* Alignment (cts_task_mem_align) */
  cts_task_mem_status_t status;
  int64_t task_offset_ns; /* task-trace time at the memory trace's start */
  int64_t shift_ns; /* anchor time − its realtime: task time = memtrace µs × 1000 + shift */
  uint64_t anchor_pid, mem_pid;
  double sample_rate;
  /* The anchor checked on the allocations present in both traces: the lag of each
   * ctfscope_alloc event behind its aligned memtrace time. It is never negative and under
   * about 1 µs when the anchor is exact (memtrace times are whole µs, and the task event is
   * written right after the tracer read its clock); a thread preempted between the two
   * reads makes an outlier, and so does the memtrace writer, which never writes a time
   * below the previous one (a few events lag by −ms): the median says how good the
   * anchor is, the extremes say little. lag_hist: 1 µs bins over ±CTS_TASK_MEM_LAG_US. */
  uint64_t pairs;
  int64_t err_min_ns, err_max_ns;
  uint64_t *lag_hist;
} cts_task_mem_t;

#define CTS_TASK_MEM_LAG_US 2000

/* A task trace's clock anchor (ctfscope_anchor, §14.2): the writer's pid, and the trace
 * clock and CLOCK_REALTIME (ns) at one instant. */
typedef struct cts_task_anchor {
  bool present;
  int64_t pid;
  uint64_t task_ns, realtime_ns;
} cts_task_anchor_t;

/* The task-trace time at the memory trace's start (what `--task-offset` sets by hand), from
 * the anchor and the memory trace's info (NULL: none); *shift_ns (may be NULL) gets task
 * time − realtime. CTS_TASK_MEM_ALIGNED, or why the traces cannot be aligned. */
cts_task_mem_status_t cts_task_clock_align(const cts_task_anchor_t *a, const cts_mt_info_t *info,
                                           int64_t *task_offset_ns, int64_t *shift_ns);

/* 0 or -ENOMEM. */
int cts_task_mem_init(cts_task_mem_t *tm);
void cts_task_mem_fini(cts_task_mem_t *tm);
/* The task model's on_alloc hook (cts_tasks_hooks_t), user data: the cts_task_mem_t. */
int cts_task_mem_on_alloc(void *tm, uint32_t task, uint64_t obj, uint64_t t, uint32_t lane);
/* After the task trace was read (m finished) and before the memtrace events: the clocks'
 * alignment from m's anchor and the memory trace's info (NULL when it has none). */
cts_task_mem_status_t cts_task_mem_align(cts_task_mem_t *tm, const cts_tasks_t *m,
                                         const cts_mt_info_t *info);
/* Each memtrace event, in reading order. 0 or -ENOMEM. */
int cts_task_mem_event(cts_task_mem_t *tm, const cts_mt_event_t *ev);
/* After the last memtrace event: live figures. */
void cts_task_mem_finish(cts_task_mem_t *tm);
/* Why attribution is impossible, for people ("" when aligned). */
const char *cts_task_mem_status_text(cts_task_mem_status_t s);
/* The median lag (to 1 µs; 0 without pairs), ns. */
int64_t cts_task_mem_lag_median_ns(const cts_task_mem_t *tm);
/* The anchor's error as measured: |median lag| (0 without pairs), ns. */
uint64_t cts_task_mem_align_error_ns(const cts_task_mem_t *tm);
/* The share of pairs whose lag is within ±us µs (0 without pairs). */
double cts_task_mem_lag_within(const cts_task_mem_t *tm, uint64_t us);

#endif /* CTS_ANALYSIS_TASK_MEMORY_H */
