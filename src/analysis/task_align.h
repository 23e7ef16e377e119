/* SPDX-License-Identifier: MIT */
/* Comparing a good and a bad run of one program (the mirage-trace-viewer method): which
 * tasks ended differently, which exist in one run only, and the first point where the two
 * runs did things in a different order.
 *
 * Tasks are matched across runs by creation path: the chain of labels (or, for an unlabelled
 * task, its type) from the root of its creation tree down to it, so ids and times do not
 * matter; the n-th task of a path (by creation time) in one run matches the n-th of that
 * path in the other.
 *
 * Order: each run becomes a sequence of events, in time order: creates, resolves (fulfils or
 * fails), reads (of a result or a failure) and signals, each keyed by its kind and the paths
 * of the two tasks involved. Each matched task has a history (the events it takes part in);
 * the first divergence is where a task's history first differs between the runs, the
 * earliest such point in the bad run: up to it, that task did the same things in the same
 * order in both. Waiting
 * (try_read) and switching are left out: they follow from scheduling, not from what the
 * program decided. Memory: one 24-byte record per such event, at most
 * CTS_ALIGN_MAX_EVENTS per run (beyond, the sequence is cut and `truncated` says so), and
 * two 4-byte indices per event for the histories; time: sorting each sequence, one pass over
 * the histories, and a scan of the diverging one.
 *
 * Usage: put cts_task_trail_on_link as the tasks model's on_link hook with a cts_task_trail_t
 * as user data, read the trace, then call cts_task_compare with both finished models and
 * trails. Pure computation, no I/O; results own their arrays (free with the _fini);
 * thread-compatible. Errors: -ENOMEM. */
#ifndef CTS_TASK_ALIGN_H
#define CTS_TASK_ALIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tasks.h"

#define CTS_ALIGN_MAX_EVENTS (4u << 20)

/* Event kinds of the comparison. */
typedef enum cts_align_kind {
  CTS_ALIGN_CREATE,      /* src created dst (src NONE: created outside any task) */
  CTS_ALIGN_RESOLVE,     /* src resolved dst */
  CTS_ALIGN_READ,        /* dst read src's result */
  CTS_ALIGN_FAILED_READ, /* dst read src's failure */
  CTS_ALIGN_SIGNAL,      /* src signalled dst */
} cts_align_kind_t;

typedef struct cts_align_event {
  uint64_t t;        /* ns on the trace clock */
  uint32_t src, dst; /* tasks (indices into the model), src may be CTS_TASKS_NONE */
  uint32_t seq;      /* reading order: keeps events of equal times in order */
  uint8_t kind;      /* cts_align_kind_t */
} cts_align_event_t;

/* The interactions of one run, collected while reading it. */
typedef struct cts_task_trail {
  cts_align_event_t *ev; /* owned */
  size_t n, cap;
  bool truncated; /* more than CTS_ALIGN_MAX_EVENTS */
  bool nomem;
} cts_task_trail_t;

/* An on_link hook (tasks.h) appending to the cts_task_trail_t ud; never fails (out of
 * memory is kept in trail->nomem and reported by cts_task_compare). */
int cts_task_trail_on_link(void *ud, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst,
                           uint64_t t1);
void cts_task_trail_fini(cts_task_trail_t *t);

/* How a task ended. */
typedef enum cts_align_outcome {
  CTS_OUT_RESOLVED,
  CTS_OUT_FAILED,
  CTS_OUT_MERGED,
  CTS_OUT_PENDING,       /* not resolved, not marked should-resolve */
  CTS_OUT_SHOULD_FAILED, /* marked should-resolve and never resolved */
  CTS_OUT_KINDS
} cts_align_outcome_t;

cts_align_outcome_t cts_align_outcome(const cts_task_t *t);
const char *cts_align_outcome_name(cts_align_outcome_t o);

/* One creation path whose tasks ended differently in the two runs, or exist in one only. */
typedef struct cts_align_path {
  uint64_t hash;
  uint32_t task[2]; /* an example task in each run (its first), CTS_TASKS_NONE if none */
  uint32_t count[2];
  uint32_t outcomes[2][CTS_OUT_KINDS]; /* tasks by outcome in each run */
  uint64_t running_ns[2];
} cts_align_path_t;

/* A side of the divergence, in run s (indices into seq[s]). */
typedef struct cts_align_point {
  uint32_t task; /* the task whose history diverges (model index) */
  size_t last;   /* the last event of that history both runs agree on; SIZE_MAX: none */
  size_t at;     /* this run's next event in that history; SIZE_MAX: the history ends */
  size_t later;  /* where the other run's next event comes later in this history; SIZE_MAX:
                    never */
  uint64_t t;    /* the divergence's time: at's, or the trace's end when the history ends */
} cts_align_point_t;

typedef struct cts_task_compare {
  /* Each run's keyed sequence, in time order (owned). */
  cts_align_event_t *seq[2];
  size_t nseq[2];
  uint64_t *path[2]; /* owned: each task's creation-path hash, by model index */
  bool truncated[2];
  /* Paths whose outcomes differ (or that exist in one run only): should-resolve failures
   * first, then the earliest created in either run. */
  cts_align_path_t *paths;
  size_t npaths, paths_total; /* listed; distinct paths in both runs */
  size_t matched_tasks;       /* tasks matched across runs */
  /* The first divergence: of the histories of matched tasks (the keyed events each task
   * takes part in, in time order), the one that differs earliest in the bad run (then in the
   * good run); `common` events of it agree. Comparing histories rather than the whole
   * sequence keeps independent tasks whose events merely interleave differently from
   * counting as a divergence. diverged is false when every matched task's history is the
   * same in both runs. */
  bool diverged;
  size_t common;
  cts_align_point_t point[2];
} cts_task_compare_t;

/* Compares run 0 (good) with run 1 (bad). 0 or -ENOMEM. */
int cts_task_compare(const cts_tasks_t *const m[2], const cts_task_trail_t *const trail[2],
                     cts_task_compare_t *out);
void cts_task_compare_fini(cts_task_compare_t *c);

/* The key of an event of run s: its kind and the creation paths of its tasks. */
uint64_t cts_task_compare_key(const cts_task_compare_t *c, int s, const cts_align_event_t *e);

/* A task's creation path for people: "unikernel > Wait for ARP response > ARP response",
 * unlabelled tasks as "(bind)" etc., at most `depth` levels (the nearest), "..." before
 * when cut. In buf. */
const char *cts_task_path_name(const cts_tasks_t *m, uint32_t task, unsigned depth, char *buf,
                               size_t size);
/* A task's own name: its label, else "(type)". In buf or the model's strings. */
const char *cts_task_short_name(const cts_tasks_t *m, uint32_t task, char *buf, size_t size);

/* An event for people, the actor first: "port-4 signalled ARP response". In buf. */
const char *cts_align_describe(const cts_tasks_t *m, const cts_align_event_t *e, char *buf,
                               size_t size);

/* A path's outcomes in run s for people: "resolved", "absent", "3: 2 resolved, 1 pending".
 * In buf. */
const char *cts_align_path_outcomes(const cts_align_path_t *p, int s, char *buf, size_t size);

#endif /* CTS_TASK_ALIGN_H */
