/* SPDX-License-Identifier: MIT */
/* The good/bad comparison (src/analysis/task_align.h) on hand-made models and trails: tasks
 * matched by creation path whatever their ids, the first divergence in order and where
 * each run's next event happens in the other, outcomes by path, and a parent cycle. */
#include "../test.h"
#include "analysis/task_align.h"

#define NONE CTS_TASKS_NONE

static char s_root[] = "root", s_req[] = "request", s_resp[] = "response", s_x[] = "x";
static char *strings[] = {s_root, s_req, s_resp, s_x};

static cts_task_t task(uint32_t parent, uint32_t label, uint64_t start, uint8_t flags) {
  return (cts_task_t){.start = start,
                      .end = start + 100,
                      .resolved_at = (flags & CTS_TASK_F_RESOLVED) ? start + 50 : 0,
                      .parent = parent,
                      .becomes = NONE,
                      .label = label,
                      .type = 1,
                      .flags = flags};
}

static cts_tasks_t model(cts_task_t *t, size_t n) {
  return (cts_tasks_t){.tasks = t,
                       .ntasks = n,
                       .strs = {.strs = strings, .n = 4, .cap = 4},
                       .first_ns = 0,
                       .last_ns = 1000};
}

static void link(cts_task_trail_t *tr, unsigned kind, uint32_t src, uint32_t dst, uint64_t t) {
  CTS_ASSERT_EQ_INT(cts_task_trail_on_link(tr, kind, src, t, dst, t), 0);
}

/* Run A: root(0) creates request(1) and response(2); request resolved, then response
 * signalled. Run B: the same tasks under other indices (2 is request, 1 is response) and
 * the signal first; the response is never resolved. */
CTS_TEST(divergence_is_the_first_reordered_event_and_paths_ignore_ids) {
  cts_task_t ta[] = {task(NONE, 0, 0, CTS_TASK_F_RESOLVED), task(0, 1, 10, CTS_TASK_F_RESOLVED),
                     task(0, 2, 20, CTS_TASK_F_RESOLVED)};
  cts_task_t tb[] = {task(NONE, 0, 0, CTS_TASK_F_RESOLVED), task(0, 2, 20, 0),
                     task(0, 1, 10, CTS_TASK_F_RESOLVED)};
  cts_tasks_t ma = model(ta, 3), mb = model(tb, 3);
  cts_task_trail_t ra = {0}, rb = {0};
  link(&ra, CTS_LINK_CREATE, 0, 1, 10);
  link(&ra, CTS_LINK_CREATE, 0, 2, 20);
  link(&ra, CTS_LINK_TRY_READ, 0, 1, 25); /* left out: scheduling */
  link(&ra, CTS_LINK_RESOLVE, 0, 1, 30);
  link(&ra, CTS_LINK_SIGNAL, 0, 2, 40);
  link(&rb, CTS_LINK_CREATE, 0, 2, 10);
  link(&rb, CTS_LINK_CREATE, 0, 1, 20);
  link(&rb, CTS_LINK_SIGNAL, 0, 1, 25);
  link(&rb, CTS_LINK_RESOLVE, 0, 2, 30);
  CTS_ASSERT_EQ_U64(ra.n, 4);
  const cts_tasks_t *const m[2] = {&ma, &mb};
  const cts_task_trail_t *const tr[2] = {&ra, &rb};
  cts_task_compare_t c;
  CTS_ASSERT_EQ_INT(cts_task_compare(m, tr, &c), 0);
  /* 5 events each: the root's creation (outside any task) and the four links. */
  CTS_ASSERT_EQ_U64(c.nseq[0], 5);
  CTS_ASSERT_EQ_U64(c.nseq[1], 5);
  CTS_ASSERT(c.diverged);
  /* The root's history (its creation, two creates, then a resolve and a signal in the
   * good run, the other way round in the bad one) diverges after 3 events. */
  CTS_ASSERT_EQ_U64(c.common, 3);
  CTS_ASSERT_EQ_U64(c.point[0].task, 0);
  CTS_ASSERT_EQ_U64(c.point[1].task, 0);
  CTS_ASSERT_EQ_U64(c.point[0].at, 3);
  CTS_ASSERT_EQ_U64(c.point[1].at, 3);
  CTS_ASSERT_EQ_U64(c.point[1].t, 25);
  CTS_ASSERT_EQ_U64(c.point[1].last, 2);
  CTS_ASSERT_EQ_INT(c.seq[0][3].kind, CTS_ALIGN_RESOLVE);
  CTS_ASSERT_EQ_INT(c.seq[1][3].kind, CTS_ALIGN_SIGNAL);
  CTS_ASSERT_EQ_U64(c.point[0].later, 4); /* the bad run's signal: one later in the good */
  CTS_ASSERT_EQ_U64(c.point[1].later, 4);
  CTS_ASSERT_EQ_U64(c.matched_tasks, 3);
  CTS_ASSERT_EQ_U64(c.paths_total, 3);
  CTS_ASSERT_EQ_U64(c.npaths, 1); /* response: resolved -> pending */
  CTS_ASSERT_EQ_U64(c.paths[0].outcomes[0][CTS_OUT_RESOLVED], 1);
  CTS_ASSERT_EQ_U64(c.paths[0].outcomes[1][CTS_OUT_PENDING], 1);
  char buf[128];
  CTS_ASSERT_STR_EQ(cts_task_path_name(&mb, c.paths[0].task[1], 6, buf, sizeof buf),
                    "root > response");
  cts_task_compare_fini(&c);

  /* A run compared with itself does not diverge and lists no path. */
  const cts_tasks_t *const same[2] = {&ma, &ma};
  const cts_task_trail_t *const same_tr[2] = {&ra, &ra};
  CTS_ASSERT_EQ_INT(cts_task_compare(same, same_tr, &c), 0);
  CTS_ASSERT(!c.diverged);
  CTS_ASSERT_EQ_U64(c.npaths, 0);
  cts_task_compare_fini(&c);
  cts_task_trail_fini(&ra);
  cts_task_trail_fini(&rb);
}

/* A run that stops early diverges where it ends; a task only in one run is listed. */
CTS_TEST(a_shorter_run_diverges_at_its_end) {
  cts_task_t ta[] = {task(NONE, 0, 0, CTS_TASK_F_RESOLVED), task(0, 3, 10, CTS_TASK_F_RESOLVED)};
  cts_tasks_t ma = model(ta, 2), mb = model(ta, 1);
  cts_task_trail_t ra = {0}, rb = {0};
  link(&ra, CTS_LINK_CREATE, 0, 1, 10);
  const cts_tasks_t *const m[2] = {&ma, &mb};
  const cts_task_trail_t *const tr[2] = {&ra, &rb};
  cts_task_compare_t c;
  CTS_ASSERT_EQ_INT(cts_task_compare(m, tr, &c), 0);
  CTS_ASSERT(c.diverged);
  CTS_ASSERT_EQ_U64(c.common, 1);
  CTS_ASSERT_EQ_U64(c.nseq[1], 1);
  CTS_ASSERT_EQ_U64(c.point[1].at, SIZE_MAX);
  CTS_ASSERT_EQ_U64(c.point[1].t, 1000); /* the trace's end */
  CTS_ASSERT_EQ_U64(c.point[1].later, SIZE_MAX);
  CTS_ASSERT_EQ_U64(c.npaths, 1);
  CTS_ASSERT_EQ_U64(c.paths[0].count[0], 1);
  CTS_ASSERT_EQ_U64(c.paths[0].count[1], 0);
  cts_task_compare_fini(&c);
  cts_task_trail_fini(&ra);
}

/* Two independent pairs of tasks whose events interleave the other way round: every task's
 * history is the same, so there is no divergence (a comparison of the whole sequence would
 * have found one). */
CTS_TEST(independent_interleavings_do_not_diverge) {
  cts_task_t ta[] = {task(NONE, 0, 0, 0), task(0, 1, 10, 0), task(0, 2, 20, 0), task(1, 3, 30, 0),
                     task(2, 3, 40, 0)};
  cts_tasks_t ma = model(ta, 5);
  cts_task_trail_t r[2] = {{0}, {0}};
  for (int s = 0; s < 2; s++) {
    link(&r[s], CTS_LINK_CREATE, 0, 1, 10);
    link(&r[s], CTS_LINK_CREATE, 0, 2, 20);
    link(&r[s], CTS_LINK_CREATE, 1, 3, 30);
    link(&r[s], CTS_LINK_CREATE, 2, 4, 40);
    link(&r[s], CTS_LINK_SIGNAL, s ? 2 : 1, s ? 4 : 3, 50);
    link(&r[s], CTS_LINK_SIGNAL, s ? 1 : 2, s ? 3 : 4, 60);
  }
  const cts_tasks_t *const m[2] = {&ma, &ma};
  const cts_task_trail_t *const tr[2] = {&r[0], &r[1]};
  cts_task_compare_t c;
  CTS_ASSERT_EQ_INT(cts_task_compare(m, tr, &c), 0);
  CTS_ASSERT(!c.diverged);
  cts_task_compare_fini(&c);
  cts_task_trail_fini(&r[0]);
  cts_task_trail_fini(&r[1]);
}

/* Runs of different programs: nothing matches, so nothing diverges; every path is listed. */
CTS_TEST(unrelated_runs_match_nothing) {
  cts_task_t ta[] = {task(NONE, 0, 0, 0)}, tb[] = {task(NONE, 3, 0, 0)};
  cts_tasks_t ma = model(ta, 1), mb = model(tb, 1);
  cts_task_trail_t r = {0};
  const cts_tasks_t *const m[2] = {&ma, &mb};
  const cts_task_trail_t *const tr[2] = {&r, &r};
  cts_task_compare_t c;
  CTS_ASSERT_EQ_INT(cts_task_compare(m, tr, &c), 0);
  CTS_ASSERT_EQ_U64(c.matched_tasks, 0);
  CTS_ASSERT(!c.diverged);
  CTS_ASSERT_EQ_U64(c.npaths, 2);
  cts_task_compare_fini(&c);
}

/* A hostile parent cycle: paths are cut at their depth limit, nothing loops. */
CTS_TEST(parent_cycles_end) {
  cts_task_t ta[] = {task(1, NONE, 0, 0), task(0, NONE, 5, 0)};
  cts_tasks_t ma = model(ta, 2);
  cts_task_trail_t ra = {0};
  const cts_tasks_t *const m[2] = {&ma, &ma};
  const cts_task_trail_t *const tr[2] = {&ra, &ra};
  cts_task_compare_t c;
  CTS_ASSERT_EQ_INT(cts_task_compare(m, tr, &c), 0);
  CTS_ASSERT(!c.diverged);
  char buf[64];
  CTS_ASSERT(strncmp(cts_task_path_name(&ma, 0, 6, buf, sizeof buf), "... > ", 6) == 0);
  cts_task_compare_fini(&c);
}

CTS_TEST_MAIN()
