/* SPDX-License-Identifier: MIT */
/* Writing a task trace event by event for the report tests (gen_report_traces.c,
 * test_report_builders.c): one explicit writer over a ring, a clock that advances 1 µs per
 * event, and the first error kept (later events are not written). */
#ifndef CTS_TEST_MPROF_GEN_H
#define CTS_TEST_MPROF_GEN_H

#include <stdint.h>
#include <string.h>

#include <ctfscope/tasks.h>

typedef struct gen {
  cts_mprof_writer_t w;
  uint64_t now; /* ns: the last event's time */
  int err;
} gen_t;

static inline void gen_ev(gen_t *g, unsigned id, int64_t thread, uint64_t arg, int64_t value,
                          const char *str, uint8_t type) {
  g->now += 1000;
  const cts_mprof_event_t e = {.time_ns = g->now,
                               .id = (uint8_t)id,
                               .thread_type = type,
                               .thread = thread,
                               .arg = arg,
                               .value = value,
                               .str = str,
                               .str_len = str ? strlen(str) : 0};
  if (!g->err) g->err = cts_mprof_writer_write(&g->w, &e);
}

/* The ring's clock, never read: every event has its time. */
static inline uint64_t gen_no_clock(void *ud) {
  (void)ud;
  return 0;
}

#endif /* CTS_TEST_MPROF_GEN_H */
