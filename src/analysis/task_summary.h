/* SPDX-License-Identifier: MIT */
/* The figures behind the task commands (info, stats, top, leaks, diff on mirage-profile
 * traces), computed from a finished task model (tasks.h):
 *  - totals: tasks by origin and outcome, running and idle time;
 *  - per type: counts, outcomes, running and alive time, created → resolved durations;
 *  - groups: tasks by label (unlabelled ones by "(type)") or by type, sorted by a metric;
 *  - pending: the tasks never resolved nor merged, should-resolve first, and their labels;
 *  - diff: the groups of two traces matched by name, with their change.
 * Times are ns on the trace's monotonic clock; "alive" is from creation (or the trace start,
 * for a task created before it) to resolution, merge (`becomes`) or last sight.
 * Pure computation over a borrowed model: no I/O, no global state; results own their
 * arrays (free them with the matching _fini); thread-compatible. Errors: -ENOMEM. */
#ifndef CTS_TASK_SUMMARY_H
#define CTS_TASK_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"
#include "tasks.h"
#include "u64map.h"

/* Type slots: the 18 known types, "Unknown" (99 and anything else), and tasks created
 * before the trace (whose type the trace does not say). */
#define CTS_TASK_SLOTS        20
#define CTS_TASK_SLOT_UNKNOWN 18
#define CTS_TASK_SLOT_PREEX   19

unsigned cts_task_slot(const cts_task_t *t);
/* "Bind", ..., "Unknown", "preexisting". */
const char *cts_task_slot_name(unsigned slot);
/* Marked should-resolve (or never-resolved) by the trace. */
bool cts_task_marked_should_resolve(const cts_task_t *t);

typedef struct cts_task_totals {
  uint64_t tasks, created, preexisting, resolved, failed, merged, pending, should_pending;
  uint64_t running_ns, idle_ns; /* over the lanes */
} cts_task_totals_t;

void cts_task_totals(const cts_tasks_t *m, cts_task_totals_t *out);

typedef struct cts_task_type_stats {
  uint64_t tasks, resolved, failed, merged, pending, runs, running_ns, alive_ns;
  cts_hist_t dur; /* created → resolved, ns; weight 1 (tasks) and ns (time) */
} cts_task_type_stats_t;

typedef struct cts_task_stats {
  cts_task_type_stats_t types[CTS_TASK_SLOTS];
  cts_hist_t all; /* every type's durations */
  cts_task_totals_t tot;
} cts_task_stats_t;

/* Fills s (large: about 330 KiB: allocate it). */
void cts_task_stats(const cts_tasks_t *m, cts_task_stats_t *s);

/* How tasks are grouped, and the metrics groups are sorted or compared by. */
typedef enum cts_task_group_by { CTS_TASK_BY_LABEL, CTS_TASK_BY_TYPE } cts_task_group_by_t;
typedef enum cts_task_metric {
  CTS_TASK_RUNNING, /* running time */
  CTS_TASK_COUNT,   /* tasks */
  CTS_TASK_ALIVE,   /* time alive */
} cts_task_metric_t;

typedef struct cts_task_group {
  uint64_t key; /* label: 1000 + string id; type: 1 + slot */
  uint64_t tasks, runs, running_ns, alive_ns, resolved, failed, merged, pending;
} cts_task_group_t;

typedef struct cts_task_groups {
  cts_task_group_t *g; /* owned; first seen first until sorted */
  size_t n;
  cts_task_group_by_t by;
  cts_u64map_t index; /* key → position before sorting */
} cts_task_groups_t;

/* Groups every task of m. 0 or -ENOMEM (out is then still to be finished). */
int cts_task_groups(const cts_tasks_t *m, cts_task_group_by_t by, cts_task_groups_t *out);
void cts_task_groups_fini(cts_task_groups_t *g);
/* Largest metric first, then most tasks, then by name. */
void cts_task_groups_sort(cts_task_groups_t *g, const cts_tasks_t *m, cts_task_metric_t metric);
/* The group's name: its label; "(bind)" for unlabelled tasks grouped by label; the type's
 * name when grouped by type. In buf or in the model's strings. */
const char *cts_task_group_name(const cts_tasks_t *m, const cts_task_group_t *g,
                                cts_task_group_by_t by, char *buf, size_t size);
/* The metric of a group (0 for NULL, a group the other trace lacks). */
double cts_task_group_metric(const cts_task_group_t *g, cts_task_metric_t metric);

typedef struct cts_task_pending_group {
  uint64_t key; /* as cts_task_group_t.key, by label */
  uint64_t tasks, should;
  uint64_t oldest_start;
} cts_task_pending_group_t;

typedef struct cts_task_pending_list {
  uint32_t *tasks; /* owned: indices into m->tasks, should-resolve first, then the oldest */
  size_t n;
  cts_task_pending_group_t *groups; /* owned: should-resolve first, then by count, age, key */
  size_t ngroups;
  uint64_t should; /* pending tasks marked should-resolve */
} cts_task_pending_list_t;

int cts_task_pending_list(const cts_tasks_t *m, cts_task_pending_list_t *out);
void cts_task_pending_list_fini(cts_task_pending_list_t *p);

typedef struct cts_task_diff_row {
  const cts_task_group_t *a, *b; /* either may be NULL, not both */
  double va, vb, change;
  char name[128];
} cts_task_diff_row_t;

typedef struct cts_task_diff {
  cts_task_diff_row_t *rows; /* owned; largest |change| first, ties by name */
  size_t n;
  double total_a, total_b;
} cts_task_diff_t;

/* Matches the groups of two traces (models m[0], m[1], grouped alike) by name and scales
 * each side's metric by scale[s] (1, or 1 / duration for rates). 0 or -ENOMEM. */
int cts_task_diff(const cts_tasks_t *const m[2], const cts_task_groups_t *const g[2],
                  cts_task_metric_t metric, const double scale[2], cts_task_diff_t *out);
void cts_task_diff_fini(cts_task_diff_t *d);

#endif /* CTS_TASK_SUMMARY_H */
