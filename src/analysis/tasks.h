/* SPDX-License-Identifier: MIT */
/* The task model of a mirage-profile trace, built in one streaming pass: what
 * mirage-trace-viewer derives from the events (docs/formats/mprof-viewer.md §B.5), shared by
 * the analysis commands (info, stats, top, leaks, diff, export) and the report.
 *
 * A task starts at its `creates` (or, when it is only referenced, at the first event: a
 * "preexisting" task of a wrapped ring), ends when it is resolved or `becomes` another,
 * and otherwise 1 µs after its last event. Running periods come from switch, read and
 * signal; a should_resolve task whose becomes-chain ends unresolved is marked failed and
 * stretched to the end of the trace.
 *
 * Memory grows with tasks, distinct strings and counters, never with events: what is
 * per event (running periods, interactions, labels, counter values) is handed to hooks as
 * it is found, for the consumers that want it (the report, the Chrome export).
 *
 * Lanes. In a trace of ctfscope's multi-threaded tracer every OS thread writes its own
 * packets, and each thread has its own current task; packets do not say which thread wrote
 * them. With `lanes`, packets are put on lanes (threads as far as the trace tells): a packet
 * continues a lane whose last event is not after the packet's first event (preferring, when
 * that event names the writer's current task, a lane running that task; then the lane that
 * ended latest), else it opens a new lane. One thread's packets never overlap in time, so the
 * number of lanes is the number of threads that wrote at the same time. mirage-profile's rings have
 * one writer, hence one lane. Without `lanes` there is one current task for the whole
 * trace (what the report's timeline does). Threads beyond a ring's packets write into one
 * shared packet, which switches to the writing thread's task before its events
 * (docs/formats/mprof.md §14.4): its lane runs whichever of them wrote last.
 *
 * ctfscope's extension events (§14) do not change the model: ctfscope_alloc goes to
 * hooks.on_alloc (analysis/task_memory.h), the first ctfscope_anchor and the largest
 * ctfscope_lost are kept in the model. */
#ifndef CTS_ANALYSIS_TASKS_H
#define CTS_ANALYSIS_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ctfscope/mprof.h>

#include "strtab.h"
#include "u64map.h"

#define CTS_TASKS_NONE UINT32_MAX /* no task / string / lane */

/* Task flags (the report's viewer reads these values). */
enum {
  CTS_TASK_F_RESOLVED = 1,        /* fulfilled or failed */
  CTS_TASK_F_FAILED = 2,          /* failed, or should_resolve and never resolved */
  CTS_TASK_F_SHOULD = 4,          /* labelled __should_resolve */
  CTS_TASK_F_PREEXISTING = 8,     /* referenced but not created in the trace */
  CTS_TASK_F_BECAME = 16,         /* merged into another task (`becomes`) */
  CTS_TASK_F_NEVER_RESOLVED = 32, /* end of a should_resolve chain that never resolved */
};

/* Interaction kinds handed to on_link (0-4 are the report's arrow kinds). */
enum {
  CTS_LINK_TRY_READ = 0, /* src waits for dst */
  CTS_LINK_READ,         /* dst read src's result */
  CTS_LINK_FAILED_READ,  /* dst read src's failure */
  CTS_LINK_RESOLVE,      /* src resolved dst */
  CTS_LINK_SIGNAL,       /* src signalled dst */
  CTS_LINK_CREATE,       /* src created dst */
  CTS_LINK_KINDS
};

typedef struct cts_task {
  int64_t id;
  uint64_t start, end, last; /* ns on the trace clock; end is 0 until known (finish sets it) */
  uint64_t resolved_at;      /* first fulfills/fails, 0 if none */
  uint64_t running_ns;       /* total of its running periods */
  uint32_t parent, becomes, label; /* task, task, string (first label); CTS_TASKS_NONE */
  uint32_t runs;                   /* running periods */
  uint8_t type, flags;
} cts_task_t;

typedef struct cts_tasks_counter {
  uint32_t name;          /* string */
  int64_t value;          /* current (in reading order; `increase` adds to it from 0) */
  int64_t min, max, last; /* last: the value at the latest time */
  uint64_t updates, last_t;
  bool relative; /* set by `increase` events */
} cts_tasks_counter_t;

typedef struct cts_tasks_lane {
  int64_t current;
  uint64_t since, last_t;
  uint64_t running_ns, idle_ns, packets;
} cts_tasks_lane_t;

typedef struct cts_tasks_hooks {
  void *user_data;
  /* Each hook may be NULL; a non-zero return stops reading with that error. */
  int (*on_run)(void *ud, uint32_t task, uint64_t t0, uint64_t t1, uint32_t lane);
  int (*on_idle)(void *ud, uint64_t t0, uint64_t t1, uint32_t lane);
  int (*on_link)(void *ud, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst, uint64_t t1);
  /* A label (str) or a failure text attached to task at t. */
  int (*on_label)(void *ud, uint32_t task, uint64_t t, uint32_t str, bool failure);
  int (*on_counter)(void *ud, uint32_t counter, uint64_t t, int64_t value);
  int (*on_gc)(void *ud, uint64_t t0, uint64_t t1);
  /* A ctfscope_alloc event (docs/formats/mprof.md §14.1): memtrace object obj was sampled at
   * t while task (CTS_TASKS_NONE: none) ran on the allocating thread, written on lane. */
  int (*on_alloc)(void *ud, uint32_t task, uint64_t obj, uint64_t t, uint32_t lane);
} cts_tasks_hooks_t;

typedef struct cts_tasks_config {
  bool lanes; /* one current task per lane (see above); else one for the trace */
  /* `creates` beyond this many tasks are ignored (0: 2 Mi); tasks only referenced, beyond
   * twice as many (a hostile trace naming a new id in every event). */
  uint32_t max_tasks;
  uint32_t max_lanes;    /* 0: 256; beyond, packets continue the lane that ended first */
  uint32_t max_counters; /* 0: 256; further counters are ignored */
  cts_tasks_hooks_t hooks;
} cts_tasks_config_t;

typedef struct cts_tasks {
  cts_tasks_config_t cfg;
  cts_task_t *tasks;
  size_t ntasks, cap_tasks;
  cts_strtab_t strs; /* labels, failure texts and counter names, by id */
  cts_tasks_counter_t *counters;
  size_t ncounters, cap_counters;
  cts_tasks_lane_t *lanes;
  size_t nlanes;
  cts_u64map_t by_id; /* task id + 2 → index */
  uint32_t lane;      /* the lane of the packet being read */
  bool new_packet;
  bool have_time;
  uint64_t first_ns, last_ns; /* first event read, latest event time */
  uint64_t events, ignored_creates, ignored_refs;
  uint64_t gc_events, gc_ns;
  /* ctfscope's extensions (§14): allocation events, the largest count of dropped events
   * recorded (ctfscope_lost), and the first clock anchor (the writer's process id, the
   * trace clock and CLOCK_REALTIME ns at one instant). */
  uint64_t allocs, lost;
  bool have_anchor;
  int64_t anchor_pid;
  uint64_t anchor_ns, anchor_other_ns;
  bool finished;
  int err;
} cts_tasks_t;

int cts_tasks_init(cts_tasks_t *m, const cts_tasks_config_t *cfg);
void cts_tasks_fini(cts_tasks_t *m);
/* Feed packets (before their events) and events in reading order. 0 or an error. */
int cts_tasks_packet(cts_tasks_t *m, const cts_mprof_packet_t *p);
int cts_tasks_event(cts_tasks_t *m, const cts_mprof_event_t *ev);
/* After the last event: closes the running periods, sets every end, applies should_resolve.
 * Returns 0 or a hook's error. */
int cts_tasks_finish(cts_tasks_t *m);
/* A string by id ("" for CTS_TASKS_NONE). */
const char *cts_tasks_str(const cts_tasks_t *m, uint32_t id);
/* A task's name for people: its first label, else "#id" ("#-1" never occurs). */
const char *cts_tasks_name(const cts_tasks_t *m, uint32_t task, char *buf, size_t size);

/* Durations of a task: lifetime (start → end) and, for a task created in the trace and
 * resolved, created → resolved (false otherwise). */
static inline bool cts_task_resolve_time(const cts_task_t *t, uint64_t *ns) {
  if (!(t->flags & CTS_TASK_F_RESOLVED) || (t->flags & CTS_TASK_F_PREEXISTING)) return false;
  *ns = t->resolved_at > t->start ? t->resolved_at - t->start : 0;
  return true;
}

/* Whether the task is still pending at the end: neither resolved nor merged away. */
static inline bool cts_task_pending(const cts_task_t *t) {
  return !(t->flags & (CTS_TASK_F_RESOLVED | CTS_TASK_F_BECAME));
}

#endif /* CTS_ANALYSIS_TASKS_H */
