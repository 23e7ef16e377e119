/* SPDX-License-Identifier: MIT */
/* The task figures (src/analysis/task_summary.h) on a hand-made task model: totals, per-type
 * stats, groups and their order, the pending list and the diff of two models. */
#include "../test.h"
#include "analysis/task_summary.h"

#define NONE CTS_TASKS_NONE

static char s_fetch[] = "fetch", s_parse[] = "parse";
static char *strings[] = {s_fetch, s_parse};

/* Times in ns. Types: 1 Task, 2 Bind, 15 Promise, 99 unknown. */
static cts_task_t tasks[] = {
    /* 0: fetch, resolved after 100, ran 40 in 2 periods */
    {.id = 1,
     .start = 0,
     .end = 100,
     .last = 100,
     .resolved_at = 100,
     .running_ns = 40,
     .parent = NONE,
     .becomes = NONE,
     .label = 0,
     .runs = 2,
     .type = 1,
     .flags = CTS_TASK_F_RESOLVED},
    /* 1: fetch, failed after 300 */
    {.id = 2,
     .start = 100,
     .end = 400,
     .last = 400,
     .resolved_at = 400,
     .running_ns = 10,
     .parent = 0,
     .becomes = NONE,
     .label = 0,
     .runs = 1,
     .type = 1,
     .flags = CTS_TASK_F_RESOLVED | CTS_TASK_F_FAILED},
    /* 2: parse, pending, should resolve, created by task 0 */
    {.id = 3,
     .start = 50,
     .end = 1000,
     .last = 900,
     .running_ns = 500,
     .parent = 0,
     .becomes = NONE,
     .label = 1,
     .runs = 5,
     .type = 15,
     .flags = CTS_TASK_F_SHOULD},
    /* 3: unlabelled Bind, merged into another */
    {.id = 4,
     .start = 200,
     .end = 300,
     .last = 300,
     .running_ns = 0,
     .parent = NONE,
     .becomes = 0,
     .label = NONE,
     .runs = 0,
     .type = 2,
     .flags = CTS_TASK_F_BECAME},
    /* 4: unlabelled, created before the trace, pending */
    {.id = 5,
     .start = 0,
     .end = 1000,
     .last = 1000,
     .running_ns = 100,
     .parent = NONE,
     .becomes = NONE,
     .label = NONE,
     .runs = 3,
     .type = 0,
     .flags = CTS_TASK_F_PREEXISTING},
    /* 5: unknown type, unlabelled, pending, the youngest */
    {.id = 6,
     .start = 600,
     .end = 1000,
     .last = 700,
     .running_ns = 0,
     .parent = NONE,
     .becomes = NONE,
     .label = NONE,
     .runs = 0,
     .type = 99,
     .flags = 0},
};

static cts_tasks_lane_t lanes[] = {{.running_ns = 600, .idle_ns = 350},
                                   {.running_ns = 50, .idle_ns = 900}};

static cts_tasks_t model(size_t ntasks) {
  return (cts_tasks_t){.tasks = tasks,
                       .ntasks = ntasks,
                       .strs = {.strs = strings, .n = 2, .cap = 2},
                       .lanes = lanes,
                       .nlanes = 2,
                       .have_time = true,
                       .first_ns = 0,
                       .last_ns = 1000};
}

CTS_TEST(slots_name_known_unknown_and_preexisting_types) {
  CTS_ASSERT(cts_task_slot(&tasks[0]) == 1 && cts_task_slot(&tasks[2]) == 15);
  CTS_ASSERT(cts_task_slot(&tasks[4]) == CTS_TASK_SLOT_PREEX);
  CTS_ASSERT(cts_task_slot(&tasks[5]) == CTS_TASK_SLOT_UNKNOWN);
  CTS_ASSERT_STR_EQ(cts_task_slot_name(2), "Bind");
  CTS_ASSERT_STR_EQ(cts_task_slot_name(CTS_TASK_SLOT_UNKNOWN), "Unknown");
  CTS_ASSERT_STR_EQ(cts_task_slot_name(CTS_TASK_SLOT_PREEX), "preexisting");
}

CTS_TEST(totals_count_origins_outcomes_and_lane_time) {
  const cts_tasks_t m = model(6);
  cts_task_totals_t t;
  cts_task_totals(&m, &t);
  CTS_ASSERT(t.tasks == 6 && t.created == 5 && t.preexisting == 1);
  CTS_ASSERT(t.resolved == 2 && t.failed == 1 && t.merged == 1 && t.pending == 3);
  CTS_ASSERT(t.should_pending == 1);
  CTS_ASSERT(t.running_ns == 650 && t.idle_ns == 1250);
}

CTS_TEST(stats_split_by_type_with_durations) {
  const cts_tasks_t m = model(6);
  static cts_task_stats_t s;
  cts_task_stats(&m, &s);
  const cts_task_type_stats_t *task = &s.types[1];
  CTS_ASSERT(task->tasks == 2 && task->resolved == 2 && task->failed == 1);
  CTS_ASSERT(task->runs == 3 && task->running_ns == 50 && task->alive_ns == 400);
  CTS_ASSERT(task->dur.total_blocks == 2 && task->dur.total_samples == 400);
  CTS_ASSERT(task->dur.min == 100 && task->dur.max == 300);
  CTS_ASSERT(s.types[15].pending == 1 && s.types[15].dur.total_blocks == 0);
  CTS_ASSERT(s.types[2].merged == 1);
  CTS_ASSERT(s.types[CTS_TASK_SLOT_PREEX].tasks == 1 && s.types[CTS_TASK_SLOT_UNKNOWN].tasks == 1);
  CTS_ASSERT(s.all.total_blocks == 2 && s.tot.tasks == 6);
}

CTS_TEST(groups_by_label_sort_by_metric_then_count_then_name) {
  const cts_tasks_t m = model(6);
  cts_task_groups_t g;
  CTS_ASSERT(cts_task_groups(&m, CTS_TASK_BY_LABEL, &g) == 0);
  /* fetch, parse, (bind), (preexisting), (unknown) */
  CTS_ASSERT(g.n == 5);
  cts_task_groups_sort(&g, &m, CTS_TASK_RUNNING);
  char buf[64];
  CTS_ASSERT_STR_EQ(cts_task_group_name(&m, &g.g[0], g.by, buf, sizeof buf), "parse");
  CTS_ASSERT_STR_EQ(cts_task_group_name(&m, &g.g[1], g.by, buf, sizeof buf), "(preexisting)");
  CTS_ASSERT_STR_EQ(cts_task_group_name(&m, &g.g[2], g.by, buf, sizeof buf), "fetch");
  CTS_ASSERT(g.g[2].tasks == 2 && g.g[2].running_ns == 50 && g.g[2].alive_ns == 400);
  /* Two groups at 0 running and 1 task: by name. */
  CTS_ASSERT_STR_EQ(cts_task_group_name(&m, &g.g[3], g.by, buf, sizeof buf), "(bind)");
  CTS_ASSERT_STR_EQ(cts_task_group_name(&m, &g.g[4], g.by, buf, sizeof buf), "(unknown)");
  cts_task_groups_sort(&g, &m, CTS_TASK_COUNT);
  CTS_ASSERT_STR_EQ(cts_task_group_name(&m, &g.g[0], g.by, buf, sizeof buf), "fetch");
  CTS_ASSERT(cts_task_group_metric(&g.g[0], CTS_TASK_ALIVE) == 400);
  CTS_ASSERT(cts_task_group_metric(NULL, CTS_TASK_ALIVE) == 0);
  cts_task_groups_fini(&g);
  CTS_ASSERT(cts_task_groups(&m, CTS_TASK_BY_TYPE, &g) == 0);
  CTS_ASSERT(g.n == 5); /* Task, Promise, Bind, preexisting, Unknown */
  CTS_ASSERT_STR_EQ(cts_task_group_name(&m, &g.g[0], g.by, buf, sizeof buf), "Task");
  cts_task_groups_fini(&g);
}

CTS_TEST(pending_puts_should_resolve_first_then_the_oldest) {
  const cts_tasks_t m = model(6);
  cts_task_pending_list_t p;
  CTS_ASSERT(cts_task_pending_list(&m, &p) == 0);
  CTS_ASSERT(p.n == 3 && p.should == 1);
  CTS_ASSERT(p.tasks[0] == 2 && p.tasks[1] == 4 && p.tasks[2] == 5);
  /* Groups: parse (should) first, then the two unlabelled ones, oldest first. */
  CTS_ASSERT(p.ngroups == 3);
  CTS_ASSERT(p.groups[0].key == 1000 + 1 && p.groups[0].should == 1);
  CTS_ASSERT(p.groups[1].oldest_start == 0 && p.groups[2].oldest_start == 600);
  cts_task_pending_list_fini(&p);
  CTS_ASSERT(p.tasks == NULL && p.n == 0);
}

CTS_TEST(diff_matches_groups_by_name_and_scales_them) {
  /* Before: the first three tasks; after: all six, over twice the time. */
  const cts_tasks_t before = model(3), after = model(6);
  cts_task_groups_t ga, gb;
  CTS_ASSERT(cts_task_groups(&before, CTS_TASK_BY_LABEL, &ga) == 0);
  CTS_ASSERT(cts_task_groups(&after, CTS_TASK_BY_LABEL, &gb) == 0);
  const cts_tasks_t *const m[2] = {&before, &after};
  const cts_task_groups_t *const g[2] = {&ga, &gb};
  const double scale[2] = {1.0, 0.5};
  cts_task_diff_t d;
  CTS_ASSERT(cts_task_diff(m, g, CTS_TASK_COUNT, scale, &d) == 0);
  CTS_ASSERT(d.n == 5);
  /* fetch 2 -> 1 and parse 1 -> 0.5; three new groups of 0.5 each. */
  CTS_ASSERT_STR_EQ(d.rows[0].name, "fetch");
  CTS_ASSERT(d.rows[0].va == 2 && d.rows[0].vb == 1 && d.rows[0].change == -1);
  CTS_ASSERT(d.rows[0].a && d.rows[0].b);
  CTS_ASSERT_STR_EQ(d.rows[1].name, "(bind)"); /* |0.5| ties: by name */
  CTS_ASSERT(d.rows[1].a == NULL && d.rows[1].vb == 0.5);
  CTS_ASSERT(d.total_a == 3 && d.total_b == 3);
  cts_task_diff_fini(&d);
  cts_task_groups_fini(&ga);
  cts_task_groups_fini(&gb);
}

CTS_TEST_MAIN()
