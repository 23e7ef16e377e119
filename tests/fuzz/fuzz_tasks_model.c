/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the task model (src/analysis/tasks.h) over whatever the mirage-profile
 * reader decodes from arbitrary bytes, with lanes (the analysis commands) and without (the
 * report). Besides memory errors (ASan/UBSan) it aborts when the model breaks a promise:
 *  - every hook names existing tasks, strings, counters and lanes, and a running period
 *    or gc pause does not end before it starts;
 *  - after finish every task ends at or after its start, its parent, successor and label
 *    exist, and the lanes' running time is the tasks' running time;
 *  - with small limits, tasks, lanes and counters stay within them. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/mprof.h>

#include "analysis/tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

#define MAX_TASKS 64u

static void *plain_alloc(void *ud, size_t n) {
  (void)ud;
  return malloc(n);
}
static void plain_free(void *ud, void *p, size_t n) {
  (void)ud, (void)n;
  free(p);
}

static int on_run(void *ud, uint32_t task, uint64_t t0, uint64_t t1, uint32_t lane) {
  const cts_tasks_t *m = ud;
  CHECK(task < m->ntasks && lane < m->nlanes && t1 > t0);
  return 0;
}
static int on_idle(void *ud, uint64_t t0, uint64_t t1, uint32_t lane) {
  const cts_tasks_t *m = ud;
  CHECK(lane < m->nlanes && t1 > t0);
  return 0;
}
static int on_link(void *ud, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst, uint64_t t1) {
  const cts_tasks_t *m = ud;
  (void)t0, (void)t1;
  CHECK(kind < CTS_LINK_KINDS && src < m->ntasks && dst < m->ntasks && src != dst);
  return 0;
}
static int on_label(void *ud, uint32_t task, uint64_t t, uint32_t str, bool failure) {
  const cts_tasks_t *m = ud;
  (void)t, (void)failure;
  CHECK(task < m->ntasks && str < m->strs.n);
  return 0;
}
static int on_counter(void *ud, uint32_t counter, uint64_t t, int64_t value) {
  const cts_tasks_t *m = ud;
  (void)t;
  CHECK(counter < m->ncounters && m->counters[counter].value == value);
  return 0;
}
static int on_gc(void *ud, uint64_t t0, uint64_t t1) {
  (void)ud;
  CHECK(t0 <= t1);
  return 0;
}

static int feed_packet(void *ud, const cts_mprof_packet_t *p) {
  return cts_tasks_packet(ud, p);
}
static int feed_event(void *ud, const cts_mprof_event_t *ev) {
  return cts_tasks_event(ud, ev);
}

static void run(const uint8_t *data, size_t size, bool lanes) {
  static cts_tasks_t m; /* the hooks get the model itself */
  const cts_tasks_config_t cfg = {.lanes = lanes,
                                  .max_tasks = MAX_TASKS,
                                  .max_lanes = 4,
                                  .max_counters = 4,
                                  .hooks = {.user_data = &m,
                                            .on_run = on_run,
                                            .on_idle = on_idle,
                                            .on_link = on_link,
                                            .on_label = on_label,
                                            .on_counter = on_counter,
                                            .on_gc = on_gc}};
  CHECK(cts_tasks_init(&m, &cfg) == 0);
  cts_mprof_reader_config_t rc;
  cts_mprof_reader_config_init(&rc);
  rc.allocator = (cts_allocator_t){plain_alloc, plain_free, NULL};
  rc.max_packets = 4096;
  rc.max_packet_size = 1u << 20;
  cts_mprof_memory_t mem = {data, size};
  const cts_mprof_handler_t h = {.user_data = &m, .on_packet = feed_packet, .on_event = feed_event};
  cts_mprof_summary_t sum;
  char msg[256];
  const int err =
      cts_mprof_read(&rc, cts_mprof_memory_read_at, &mem, size, &h, &sum, msg, sizeof msg);
  CHECK(err <= 0 && m.err == 0);
  CHECK(cts_tasks_finish(&m) == 0);
  if (!err) CHECK(m.events == sum.events);
  CHECK(m.ntasks <= 2 * MAX_TASKS && m.nlanes <= 4 && m.ncounters <= 4);
  uint64_t tasks_running = 0, lanes_running = 0;
  for (size_t i = 0; i < m.ntasks; i++) {
    const cts_task_t *k = &m.tasks[i];
    CHECK(k->end >= k->start);
    CHECK(k->parent == CTS_TASKS_NONE || k->parent < m.ntasks);
    CHECK(k->becomes == CTS_TASKS_NONE || k->becomes < m.ntasks);
    CHECK(k->label == CTS_TASKS_NONE || k->label < m.strs.n);
    tasks_running += k->running_ns;
  }
  for (size_t i = 0; i < m.nlanes; i++) lanes_running += m.lanes[i].running_ns;
  CHECK(tasks_running == lanes_running);
  cts_tasks_fini(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run(data, size, true);
  run(data, size, false);
  return 0;
}
