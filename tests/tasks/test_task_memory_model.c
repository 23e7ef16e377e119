/* SPDX-License-Identifier: MIT */
/* analysis/task_memory.c on hand-made events: attribution by ctfscope_alloc, the clock
 * alignment from the anchor (and why it is refused), outside-tasks and unattributed
 * allocations, frees, duplicates. */
#include <math.h>
#include <string.h>

#include "../../src/analysis/task_memory.h"
#include "../test.h"

typedef struct fixture {
  cts_tasks_t m;
  cts_task_mem_t tm;
  uint32_t packet;
} fixture_t;

static void start(fixture_t *f) {
  memset(f, 0, sizeof *f);
  CTS_ASSERT_EQ_INT(cts_task_mem_init(&f->tm), 0);
  cts_tasks_config_t cfg = {.lanes = true};
  cfg.hooks.user_data = &f->tm;
  cfg.hooks.on_alloc = cts_task_mem_on_alloc;
  CTS_ASSERT_EQ_INT(cts_tasks_init(&f->m, &cfg), 0);
}

static void packet(fixture_t *f) {
  const cts_mprof_packet_t p = {.count = (uint16_t)f->packet, .file_index = f->packet};
  f->packet++;
  CTS_ASSERT_EQ_INT(cts_tasks_packet(&f->m, &p), 0);
}

static void task_event(fixture_t *f, unsigned id, uint64_t t, int64_t thread, uint64_t arg) {
  const cts_mprof_event_t ev = {.time_ns = t, .id = (uint8_t)id, .thread = thread, .arg = arg};
  CTS_ASSERT_EQ_INT(cts_tasks_event(&f->m, &ev), 0);
}

static void mem_event(fixture_t *f, cts_mt_event_kind_t kind, uint64_t obj, uint64_t words,
                      uint64_t time_us) {
  const cts_mt_event_t ev = {
      .kind = kind, .obj_id = obj, .length = words, .nsamples = words, .time_us = time_us};
  CTS_ASSERT_EQ_INT(cts_task_mem_event(&f->tm, &ev), 0);
}

static void finish(fixture_t *f) {
  cts_tasks_fini(&f->m);
  cts_task_mem_fini(&f->tm);
}

/* Two threads (lanes), task 1 on one and task 2 then none on the other; the anchor says
 * realtime 5 s is trace time 1 µs. */
static void two_threads(fixture_t *f, bool anchor) {
  packet(f);
  if (anchor) task_event(f, CTS_MPROF_ANCHOR, 1000, 77, 5000000000u);
  task_event(f, CTS_MPROF_SWITCH, 2000, 1, 0);
  task_event(f, CTS_MPROF_ALLOC, 3000, 1, 0);
  task_event(f, CTS_MPROF_ALLOC, 4000, 1, 1);
  packet(f);
  task_event(f, CTS_MPROF_SWITCH, 2500, 2, 0);
  task_event(f, CTS_MPROF_ALLOC, 3500, 2, 2);
  task_event(f, CTS_MPROF_SWITCH, 3550, -1, 0);
  task_event(f, CTS_MPROF_ALLOC, 3600, -1, 3);
  task_event(f, CTS_MPROF_ALLOC, 3700, 2, 0); /* names object 0 again: ignored */
  CTS_ASSERT_EQ_INT(cts_tasks_finish(&f->m), 0);
}

static const cts_task_mem_row_t *row_of_task(const fixture_t *f, int64_t id) {
  for (size_t i = 1; i < f->tm.nrows; i++)
    if (f->m.tasks[f->tm.rows[i].task].id == id) return &f->tm.rows[i];
  return NULL;
}

CTS_TEST(allocations_go_to_the_task_their_event_names) {
  fixture_t f;
  start(&f);
  two_threads(&f, true);
  CTS_ASSERT_EQ_U64(f.m.allocs, 5);
  CTS_ASSERT_EQ_U64(f.tm.duplicate_ids, 1);
  const cts_mt_info_t info = {.pid = 77, .start_time_us = 5000000, .sample_rate = 1.0};
  CTS_ASSERT_EQ_INT(cts_task_mem_align(&f.tm, &f.m, &info), CTS_TASK_MEM_ALIGNED);
  /* task time at the memory trace's start: 5 s realtime = 1 µs */
  CTS_ASSERT_EQ_INT(f.tm.task_offset_ns, 1000);
  mem_event(&f, CTS_MT_ALLOC, 0, 4, 5000002); /* trace time 3 µs: lag 0 */
  mem_event(&f, CTS_MT_ALLOC, 1, 2, 5000003);
  mem_event(&f, CTS_MT_ALLOC, 2, 8, 5000002);
  mem_event(&f, CTS_MT_ALLOC, 3, 1, 5000002);
  mem_event(&f, CTS_MT_ALLOC, 4, 5, 5000004); /* no ctfscope_alloc: unattributed */
  mem_event(&f, CTS_MT_COLLECT, 0, 0, 5000005);
  mem_event(&f, CTS_MT_COLLECT, 4, 0, 5000005);
  mem_event(&f, CTS_MT_COLLECT, 99, 0, 5000005); /* never allocated: ignored */
  mem_event(&f, CTS_MT_COLLECT, 0, 0, 5000006);  /* freed twice: ignored */
  cts_task_mem_finish(&f.tm);
  const cts_task_mem_row_t *t1 = row_of_task(&f, 1), *t2 = row_of_task(&f, 2);
  CTS_ASSERT(t1 && t2);
  CTS_ASSERT_EQ_U64(t1->alloc.samples, 6);
  CTS_ASSERT_EQ_U64(t1->alloc.blocks, 2);
  CTS_ASSERT(t1->alloc.count == 2.0); /* rate 1: every block weighs 1 */
  CTS_ASSERT_EQ_U64(t1->freed.samples, 4);
  CTS_ASSERT_EQ_U64(t1->live.samples, 2);
  CTS_ASSERT_EQ_U64(t1->live.blocks, 1);
  CTS_ASSERT_EQ_U64(t2->alloc.samples, 8);
  CTS_ASSERT_EQ_U64(t2->live.samples, 8);
  CTS_ASSERT(t1->lane != t2->lane);
  CTS_ASSERT_EQ_U64(f.tm.rows[0].alloc.samples, 1); /* outside tasks */
  CTS_ASSERT_EQ_U64(f.tm.unattr_alloc.samples, 5);
  CTS_ASSERT_EQ_U64(f.tm.unattr_live.samples, 0);
  /* lags: 0, 0, 0.5 µs, 0.6 µs → median bin [0, 1 µs) */
  CTS_ASSERT_EQ_U64(f.tm.pairs, 4);
  CTS_ASSERT_EQ_INT(f.tm.err_min_ns, 0);
  CTS_ASSERT_EQ_INT(f.tm.err_max_ns, 600);
  CTS_ASSERT_EQ_INT(cts_task_mem_lag_median_ns(&f.tm), 500);
  CTS_ASSERT(cts_task_mem_lag_within(&f.tm, 100) == 1.0);
  finish(&f);
}

CTS_TEST(foreign_traces_are_refused) {
  fixture_t f;
  start(&f);
  two_threads(&f, true);
  const cts_mt_info_t other = {.pid = 78, .start_time_us = 5000000, .sample_rate = 1.0};
  CTS_ASSERT_EQ_INT(cts_task_mem_align(&f.tm, &f.m, &other), CTS_TASK_MEM_OTHER_PROCESS);
  mem_event(&f, CTS_MT_ALLOC, 0, 4, 5000002);
  cts_task_mem_finish(&f.tm);
  CTS_ASSERT_EQ_U64(row_of_task(&f, 1)->alloc.samples, 0); /* nothing attributed */
  CTS_ASSERT(strstr(cts_task_mem_status_text(f.tm.status), "different processes"));
  CTS_ASSERT_EQ_INT(cts_task_mem_align(&f.tm, &f.m, NULL), CTS_TASK_MEM_NO_INFO);
  finish(&f);
  start(&f);
  two_threads(&f, false);
  const cts_mt_info_t same = {.pid = 77, .start_time_us = 5000000, .sample_rate = 1.0};
  CTS_ASSERT_EQ_INT(cts_task_mem_align(&f.tm, &f.m, &same), CTS_TASK_MEM_NO_ANCHOR);
  CTS_ASSERT(strstr(cts_task_mem_status_text(f.tm.status), "no clock anchor"));
  finish(&f);
}

CTS_TEST(estimated_counts_weigh_blocks_by_their_probability) {
  fixture_t f;
  start(&f);
  two_threads(&f, true);
  const cts_mt_info_t info = {.pid = 77, .start_time_us = 5000000, .sample_rate = 0.5};
  CTS_ASSERT_EQ_INT(cts_task_mem_align(&f.tm, &f.m, &info), CTS_TASK_MEM_ALIGNED);
  const cts_mt_event_t ev = {
      .kind = CTS_MT_ALLOC, .obj_id = 2, .length = 1, .nsamples = 1, .time_us = 5000002};
  CTS_ASSERT_EQ_INT(cts_task_mem_event(&f.tm, &ev), 0);
  cts_task_mem_finish(&f.tm);
  /* a 1-word block (2 with its header, as memtrace counts) is sampled with probability
   * 1 - 0.5^2: it stands for 4/3 allocations */
  CTS_ASSERT(fabs(row_of_task(&f, 2)->alloc.count - 4.0 / 3.0) < 1e-9);
  finish(&f);
}

CTS_TEST_MAIN()
