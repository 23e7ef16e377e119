/* SPDX-License-Identifier: MIT */
/* A small deterministic mirage-profile task trace with known truth, for the analysis
 * commands on task traces: written with ctfscope's own ring writer (explicit timestamps,
 * one writer, so the bytes are those mirage-profile would write). The figures the commands
 * must find are worked out by hand in the comments and checked in test_tasks_analysis.c;
 * tests/data/tasks/known.ctf is this trace (the test checks the bytes still agree).
 *
 *   t (ns)  event                          state
 *       0   switch(0)                      main (task 0, preexisting) runs
 *    1000   creates 0->1 Task, label 1 rx
 *    2000   creates 0->2 Bind
 *    3000   creates 0->3 Wait, label 3 timer, label 3 __should_resolve
 *    4000   try_read(0 waits for 1)
 *    5000   switch(-1)                     idle            (0 ran 0-5000)
 *   10000   switch(1)                      1 runs
 *   11000   counter queue = 5
 *   12000   fulfills 1->2                  2 resolved: 10000 ns after its creation
 *   13000   read(0 reads 2)                0 runs          (1 ran 10000-13000)
 *   14000   fulfills 0->1                  1 resolved: 13000 ns
 *   15000   creates 0->4 Task, label 4 rx
 *   16000   counter queue = 2
 *   17000   gc 500 ns
 *   18000   switch(4)                      4 runs          (0 ran 13000-18000)
 *   20000   fails 4->4 "boom"              4 failed: 5000 ns
 *   21000   creates 4->5 Bind
 *   21500   creates 4->6 Bind
 *   22000   becomes 5->6                   5 merged into 6
 *   23000   switch(-1)                     idle            (4 ran 18000-23000)
 *   30000   switch(0)
 *   31000   counter queue = 7
 *   32000   switch(-1)                                     (0 ran 30000-32000)
 *
 * Truth: 7 tasks (6 created, 1 preexisting); resolved 1, 2, 4 (4 failed); 5 merged;
 * pending 0, 3 (should-resolve, never resolved), 6. Running: 0 12000 ns in 3 periods, 1 3000,
 * 4 5000; idle 5000 + 7000; span 32000 ns; gc 500 ns; counter queue: 3 updates, min 2,
 * max 7, last 7. The times are offset by TT_BASE_NS, and multiplied by `scale` (the diff
 * test compares the trace with itself slowed down). */
#ifndef CTS_TASKS_TRACE_H
#define CTS_TASKS_TRACE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#define TT_BASE_NS   1000000000ull
#define TT_PACKETS   4u
#define TT_RING_SIZE 4096u

typedef struct tt_event {
  uint64_t t;
  uint8_t id, type;
  int64_t thread;
  uint64_t arg;
  int64_t value;
  const char *str;
} tt_event_t;

static const tt_event_t tt_events[] = {
    {0, CTS_MPROF_SWITCH, 0, 0, 0, 0, NULL},
    {1000, CTS_MPROF_CREATES, CTS_TASK_TASK, 0, 1, 0, NULL},
    {1000, CTS_MPROF_LABEL, 0, 1, 0, 0, "rx"},
    {2000, CTS_MPROF_CREATES, CTS_TASK_BIND, 0, 2, 0, NULL},
    {3000, CTS_MPROF_CREATES, CTS_TASK_WAIT, 0, 3, 0, NULL},
    {3000, CTS_MPROF_LABEL, 0, 3, 0, 0, "timer"},
    {3000, CTS_MPROF_LABEL, 0, 3, 0, 0, "__should_resolve"},
    {4000, CTS_MPROF_TRY_READ, 0, 0, 1, 0, NULL},
    {5000, CTS_MPROF_SWITCH, 0, -1, 0, 0, NULL},
    {10000, CTS_MPROF_SWITCH, 0, 1, 0, 0, NULL},
    {11000, CTS_MPROF_COUNTER, 0, 1, 0, 5, "queue"},
    {12000, CTS_MPROF_FULFILLS, 0, 1, 2, 0, NULL},
    {13000, CTS_MPROF_READ, 0, 0, 2, 0, NULL},
    {14000, CTS_MPROF_FULFILLS, 0, 0, 1, 0, NULL},
    {15000, CTS_MPROF_CREATES, CTS_TASK_TASK, 0, 4, 0, NULL},
    {15000, CTS_MPROF_LABEL, 0, 4, 0, 0, "rx"},
    {16000, CTS_MPROF_COUNTER, 0, 0, 0, 2, "queue"},
    {17000, CTS_MPROF_GC, 0, -1, 500, 0, NULL},
    {18000, CTS_MPROF_SWITCH, 0, 4, 0, 0, NULL},
    {20000, CTS_MPROF_FAILS, 0, 4, 4, 0, "boom"},
    {21000, CTS_MPROF_CREATES, CTS_TASK_BIND, 4, 5, 0, NULL},
    {21500, CTS_MPROF_CREATES, CTS_TASK_BIND, 4, 6, 0, NULL},
    {22000, CTS_MPROF_BECOMES, 0, 5, 6, 0, NULL},
    {23000, CTS_MPROF_SWITCH, 0, -1, 0, 0, NULL},
    {30000, CTS_MPROF_SWITCH, 0, 0, 0, 0, NULL},
    {31000, CTS_MPROF_COUNTER, 0, 0, 0, 7, "queue"},
    {32000, CTS_MPROF_SWITCH, 0, -1, 0, 0, NULL},
};
#define TT_NEVENTS (sizeof tt_events / sizeof tt_events[0])

static uint64_t tt_no_clock(void *ud) {
  (void)ud;
  return 0;
}

/* Writes events[0..n) (times × scale) as a trace into buf (TT_RING_SIZE bytes). 0 or an
 * error. */
static inline int tt_build_events(uint8_t *buf, uint64_t scale, const tt_event_t *events,
                                  size_t n) {
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(TT_PACKETS) / 8];
  memset(buf, 0, TT_RING_SIZE);
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buf;
  cfg.buffer_size = TT_RING_SIZE;
  cfg.packets = TT_PACKETS;
  cfg.clock = tt_no_clock;
  cts_mprof_ring_t *ring;
  int e = cts_mprof_ring_init(&ring, state, sizeof state, &cfg);
  if (e) return e;
  cts_mprof_writer_t w;
  cts_mprof_writer_init(&w, ring);
  for (size_t i = 0; i < n && !e; i++) {
    const tt_event_t *x = &events[i];
    const cts_mprof_event_t ev = {.time_ns = TT_BASE_NS + x->t * scale,
                                  .id = x->id,
                                  .thread_type = x->type,
                                  .thread = x->thread,
                                  .arg = x->id == CTS_MPROF_GC ? x->arg * scale : x->arg,
                                  .value = x->value,
                                  .str = x->str,
                                  .str_len = x->str ? strlen(x->str) : 0};
    e = cts_mprof_writer_write(&w, &ev);
  }
  cts_mprof_writer_fini(&w);
  return e;
}

/* The known trace (times × scale) into buf (TT_RING_SIZE bytes). 0 or an error. */
static inline int tt_build(uint8_t *buf, uint64_t scale) {
  return tt_build_events(buf, scale, tt_events, TT_NEVENTS);
}

/* events[0..n) as a trace file at path. 0 or an error. */
static inline int tt_write_events(const char *path, uint64_t scale, const tt_event_t *events,
                                  size_t n) {
  static uint8_t buf[TT_RING_SIZE];
  int e = tt_build_events(buf, scale, events, n);
  if (e) return e;
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  const bool ok = fwrite(buf, 1, sizeof buf, f) == sizeof buf;
  return fclose(f) == 0 && ok ? 0 : -1;
}

static inline int tt_write(const char *path, uint64_t scale) {
  return tt_write_events(path, scale, tt_events, TT_NEVENTS);
}

#endif /* CTS_TASKS_TRACE_H */
