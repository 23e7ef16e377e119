/* SPDX-License-Identifier: MIT */
/* `diff GOOD BAD` on two task traces: the comparison of analysis/task_align.h (the first
 * divergence in order, the creation paths whose tasks ended differently), as text or JSON. */
#include <stdio.h>
#include <string.h>

#include "../analysis/task_align.h"
#include "cmd_tasks.h"
#include "load.h"

#define NONE CTS_TASKS_NONE

typedef struct run {
  cli_tasks_t t;
  cts_task_trail_t trail;
} run_t;

static const char *const run_names[2] = {"good", "bad"};

/* Time of an event from its trace's first event, "+1.5 us". */
static const char *rel_time(const cts_tasks_t *m, uint64_t t, char *buf, size_t size) {
  char tmp[32];
  cli_human_ns((double)(t > m->first_ns ? t - m->first_ns : 0), tmp, sizeof tmp);
  snprintf(buf, size, "+%s", tmp);
  return buf;
}

static const cts_tasks_t *model(const run_t r[2], int s) {
  return &r[s].t.m;
}

static void print_text(cts_out_t *o, const run_t r[2], const cts_task_compare_t *c,
                       const cli_out_opts_t *opts) {
  char a[64], b[64], d[256];
  for (int s = 0; s < 2; s++) {
    const cts_tasks_t *m = model(r, s);
    cli_human_ns((double)(m->last_ns - m->first_ns), b, sizeof b);
    cli_out_heading(o, "%-4s  %s: task trace, %s events, %s, %zu tasks\n", s ? "Bad" : "Good",
                    cli_basename(r[s].t.path), cli_grouped(m->events, a, sizeof a), b, m->ntasks);
  }
  cli_out_heading(o,
                  "Matched by creation path: %zu tasks; compared in order: %zu and %zu events "
                  "(creates, resolves, reads, signals)%s\n",
                  c->matched_tasks, c->nseq[0], c->nseq[1],
                  c->truncated[0] || c->truncated[1] ? ", cut at the limit" : "");
  if (!c->matched_tasks) {
    cli_out_heading(o,
                    "\nNo order to compare: no task of %s matches a task of %s by creation path "
                    "(runs of different programs?).\n",
                    cli_basename(r[0].t.path), cli_basename(r[1].t.path));
  } else if (!c->diverged) {
    cli_out_heading(o,
                    "\nNo divergence: every matched task's history has the same events in the "
                    "same order in both runs.\n");
  } else {
    char path[512];
    cts_task_path_name(model(r, 1), c->point[1].task, 6, path, sizeof path);
    cli_out_heading(
        o, "\nFirst divergence, in the history of %s, after %zu event%s in the same order:\n", path,
        c->common, c->common == 1 ? "" : "s");
    if (c->point[0].last != SIZE_MAX) {
      const cts_align_event_t *g = &c->seq[0][c->point[0].last], *x = &c->seq[1][c->point[1].last];
      cts_out_printf(o, "  last in both   good %-10s bad %-10s %s\n",
                     rel_time(model(r, 0), g->t, a, sizeof a),
                     rel_time(model(r, 1), x->t, b, sizeof b),
                     cts_align_describe(model(r, 0), g, d, sizeof d));
    }
    for (int s = 0; s < 2; s++) {
      const cts_tasks_t *m = model(r, s);
      const size_t at = c->point[s].at;
      const char *when = rel_time(m, c->point[s].t, a, sizeof a);
      if (s == 0)
        cts_out_printf(o, "  then in good   good %-10s %15s", when, "");
      else
        cts_out_printf(o, "  then in bad    %16sbad %-10s ", "", when);
      if (at == SIZE_MAX)
        cts_out_str(o, "nothing more (the trace ends)\n");
      else
        cts_out_printf(o, "%s\n", cts_align_describe(m, &c->seq[s][at], d, sizeof d));
    }
    for (int s = 0; s < 2; s++) {
      const int other = 1 - s;
      if (c->point[other].at == SIZE_MAX) continue;
      const size_t later = c->point[s].later;
      if (later == SIZE_MAX)
        cts_out_printf(o, "  the %s run's next event never happens there in the %s run\n",
                       run_names[other], run_names[s]);
      else
        cts_out_printf(o, "  the %s run's next event happens later in the %s run, at %s\n",
                       run_names[other], run_names[s],
                       rel_time(model(r, s), c->seq[s][later].t, a, sizeof a));
    }
  }
  const size_t shown = cli_rows_shown(opts, c->npaths);
  if (!c->npaths) {
    cli_out_heading(o, "\nEvery one of the %zu creation paths has the same tasks and outcomes.\n",
                    c->paths_total);
    return;
  }
  cli_out_heading(o,
                  "\n%s %zu of %zu creation paths whose tasks ended differently (of %zu paths), "
                  "good -> bad:\n",
                  shown < c->npaths ? "First" : "All", shown, c->npaths, c->paths_total);
  for (size_t i = 0; i < shown; i++) {
    const cts_align_path_t *p = &c->paths[i];
    const int s = p->task[0] != NONE ? 0 : 1;
    char path[512], oa[128], ob[128];
    cts_task_path_name(model(r, s), p->task[s], 6, path, sizeof path);
    cts_out_printf(o, "  %s\n      %s -> %s\n", path, cts_align_path_outcomes(p, 0, oa, sizeof oa),
                   cts_align_path_outcomes(p, 1, ob, sizeof ob));
  }
}

static void json_event(cts_json_t *w, const cts_tasks_t *m, const cts_align_event_t *e) {
  static const char *const kinds[] = {"create", "resolve", "read", "failed_read", "signal"};
  char buf[512];
  cts_json_object(w);
  cts_json_kv_str(w, "kind", kinds[e->kind < 5 ? e->kind : 0]);
  cts_json_kv_u64(w, "time_ns", e->t > m->first_ns ? e->t - m->first_ns : 0);
  cts_json_kv_str(w, "src",
                  e->src == NONE ? "" : cts_task_path_name(m, e->src, 6, buf, sizeof buf));
  cts_json_kv_str(w, "dst", cts_task_path_name(m, e->dst, 6, buf, sizeof buf));
  cts_json_kv_str(w, "text", cts_align_describe(m, e, buf, sizeof buf));
  cts_json_end(w);
}

static const char *const json_outcomes[CTS_OUT_KINDS] = {"resolved", "failed", "merged", "pending",
                                                         "should_resolve_violated"};

static void print_json(cts_json_t *w, const run_t r[2], const cts_task_compare_t *c,
                       const cli_out_opts_t *opts) {
  cts_json_object(w);
  cts_json_kv_str(w, "kind", "tasks");
  cts_json_kv_str(w, "comparison", "order");
  cts_json_key(w, "traces");
  cts_json_array(w);
  for (int s = 0; s < 2; s++) {
    const cts_tasks_t *m = model(r, s);
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_str(w, "run", run_names[s]);
    cts_json_kv_str(w, "trace", r[s].t.path);
    cts_json_kv_u64(w, "events", m->events);
    cts_json_kv_u64(w, "tasks", m->ntasks);
    cts_json_kv_u64(w, "duration_ns", m->last_ns - m->first_ns);
    cts_json_kv_u64(w, "compared_events", c->nseq[s]);
    cts_json_kv_bool(w, "compared_events_cut", c->truncated[s]);
    cts_json_end(w);
  }
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "matched_tasks", c->matched_tasks);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "divergence");
  if (!c->diverged) {
    cts_json_null(w);
  } else {
    cts_json_object(w);
    cts_json_kv_u64(w, "common_events", c->common);
    for (int s = 0; s < 2; s++) {
      const cts_tasks_t *m = model(r, s);
      const cts_align_point_t *p = &c->point[s];
      char path[512];
      cts_json_ws(w, "\n  ");
      cts_json_key(w, run_names[s]);
      cts_json_object(w);
      cts_json_kv_str(w, "task", cts_task_path_name(m, p->task, 6, path, sizeof path));
      cts_json_kv_u64(w, "time_ns", p->t > m->first_ns ? p->t - m->first_ns : 0);
      cts_json_key(w, "last_common");
      if (p->last != SIZE_MAX)
        json_event(w, m, &c->seq[s][p->last]);
      else
        cts_json_null(w);
      cts_json_key(w, "next");
      if (p->at != SIZE_MAX)
        json_event(w, m, &c->seq[s][p->at]);
      else
        cts_json_null(w);
      cts_json_key(w, "other_next_here");
      if (p->later != SIZE_MAX)
        json_event(w, m, &c->seq[s][p->later]);
      else
        cts_json_null(w);
      cts_json_end(w);
    }
    cts_json_end(w);
  }
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "paths_total", c->paths_total);
  cts_json_kv_u64(w, "rows_total", c->npaths);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "rows");
  cts_json_array(w);
  const size_t shown = cli_rows_shown(opts, c->npaths);
  for (size_t i = 0; i < shown; i++) {
    const cts_align_path_t *p = &c->paths[i];
    const int s0 = p->task[0] != NONE ? 0 : 1;
    char path[512];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_str(w, "path", cts_task_path_name(model(r, s0), p->task[s0], 6, path, sizeof path));
    for (int s = 0; s < 2; s++) {
      cts_json_key(w, run_names[s]);
      cts_json_object(w);
      cts_json_kv_u64(w, "tasks", p->count[s]);
      for (unsigned o = 0; o < CTS_OUT_KINDS; o++)
        if (p->outcomes[s][o]) cts_json_kv_u64(w, json_outcomes[o], p->outcomes[s][o]);
      cts_json_kv_u64(w, "running_ns", p->running_ns[s]);
      cts_json_end(w);
    }
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

int cli_tasks_compare(const char *good, const char *bad, const cli_out_opts_t *opts) {
  run_t r[2];
  memset(r, 0, sizeof r);
  const char *paths[2] = {good, bad};
  int code = CLI_EXIT_OK, nloaded = 0;
  cts_task_compare_t c = {0};
  for (int s = 0; s < 2; s++) {
    cts_tasks_config_t cfg = {.lanes = true};
    cfg.hooks.on_link = cts_task_trail_on_link;
    cfg.hooks.user_data = &r[s].trail;
    const int rc = cli_tasks_load(&r[s].t, paths[s], &cfg, opts->quiet, false, NULL, NULL);
    nloaded++;
    if (rc > code) code = rc;
    if (rc != CLI_EXIT_OK && rc != CLI_EXIT_DATA) goto end;
  }
  const cts_tasks_t *const models[2] = {&r[0].t.m, &r[1].t.m};
  const cts_task_trail_t *const trails[2] = {&r[0].trail, &r[1].trail};
  if (cts_task_compare(models, trails, &c)) {
    cli_error("out of memory");
    code = CLI_EXIT_INTERNAL;
    goto end;
  }
  cts_out_t *out = cli_stdout_for(opts);
  if (opts->json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_json(&w, r, &c, opts);
  } else {
    print_text(out, r, &c, opts);
  }
  code = cli_finish_output(out, code);
end:
  cts_task_compare_fini(&c);
  for (int s = 0; s < nloaded; s++) {
    cts_task_trail_fini(&r[s].trail);
    cli_tasks_free(&r[s].t);
  }
  return code;
}
