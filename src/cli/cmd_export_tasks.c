/* SPDX-License-Identifier: MIT */
/* ctfscope export of a mirage-profile task trace:
 *  - chrome: Chrome trace-event JSON (Perfetto, chrome://tracing, speedscope). Process 1,
 *    "threads": one lane per thread (analysis/tasks.h lanes) with the running periods of its
 *    tasks as B/E slices, gc pauses on their own lane, and the counters as "C" events. Process 2,
 *    "tasks": one lane per task holding its lifetime (created → resolved, merged or last
 *    seen), joined by flow arrows for created / read / try_read / resolve / signal.
 *    Everything per event is written as the model finds it; memory stays per task.
 *  - csv: one line per event, in reading order.
 * Times are µs (chrome) or ns (csv) from the first event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_tasks.h"
#include "load.h"

typedef struct chrome {
  cts_json_t w;         /* {"traceEvents": [ one event per line ... */
  const cts_tasks_t *m; /* set once reading starts */
  uint64_t flows;
} chrome_t;

static const char *const link_names[CTS_LINK_KINDS] = {"try_read", "read",   "read (failed)",
                                                       "resolve",  "signal", "created"};

static double us(const chrome_t *c, uint64_t t) {
  return t >= c->m->first_ns ? (double)(t - c->m->first_ns) / 1000.0
                             : -(double)(c->m->first_ns - t) / 1000.0;
}

/* Opens an event of the traceEvents array: its phase, process and thread (tid < 0: none). */
static cts_json_t *begin_event(chrome_t *c, const char *ph, unsigned pid, long long tid) {
  cts_json_t *w = &c->w;
  cts_json_ws(w, "\n");
  cts_json_object(w);
  cts_json_kv_str(w, "ph", ph);
  cts_json_kv_u64(w, "pid", pid);
  if (tid >= 0) cts_json_kv_i64(w, "tid", tid);
  return w;
}

/* "args": {key: value} with a string value. */
static void args_name(cts_json_t *w, const char *name) {
  cts_json_key(w, "args");
  cts_json_object(w);
  cts_json_kv_str(w, "name", name);
  cts_json_end(w);
}

static int on_run(void *ud, uint32_t task, uint64_t t0, uint64_t t1, uint32_t lane) {
  chrome_t *c = ud;
  char buf[32];
  const cts_task_t *k = &c->m->tasks[task];
  /* B and E rather than X: the end is then the same number as the next slice's start, so
   * readers that add ts + dur in floating point cannot see neighbours overlap. */
  const char *name = cts_tasks_name(c->m, task, buf, sizeof buf);
  cts_json_t *w = begin_event(c, "B", 1, lane + 1);
  cts_json_kv_fixed(w, "ts", us(c, t0), 3);
  cts_json_kv_str(w, "name", name);
  cts_json_key(w, "args");
  cts_json_object(w);
  cts_json_kv_i64(w, "task", k->id);
  cts_json_end(w);
  cts_json_end(w);
  begin_event(c, "E", 1, lane + 1);
  cts_json_kv_fixed(w, "ts", us(c, t1), 3);
  cts_json_kv_str(w, "name", name);
  cts_json_end(w);
  return w->o->err;
}

static int on_link(void *ud, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst, uint64_t t1) {
  chrome_t *c = ud;
  const uint64_t id = ++c->flows;
  cts_json_t *w = begin_event(c, "s", 2, src + 1);
  cts_json_kv_fixed(w, "ts", us(c, t0), 3);
  cts_json_kv_u64(w, "id", id);
  cts_json_kv_str(w, "cat", "task");
  cts_json_kv_str(w, "name", link_names[kind]);
  cts_json_end(w);
  cts_json_ws(w, "\n");
  cts_json_object(w);
  cts_json_kv_str(w, "ph", "f");
  cts_json_kv_str(w, "bp", "e");
  cts_json_kv_u64(w, "pid", 2);
  cts_json_kv_u64(w, "tid", dst + 1);
  cts_json_kv_fixed(w, "ts", us(c, t1), 3);
  cts_json_kv_u64(w, "id", id);
  cts_json_kv_str(w, "cat", "task");
  cts_json_kv_str(w, "name", link_names[kind]);
  cts_json_end(w);
  return w->o->err;
}

static int on_counter(void *ud, uint32_t counter, uint64_t t, int64_t value) {
  chrome_t *c = ud;
  cts_json_t *w = begin_event(c, "C", 1, -1);
  cts_json_kv_fixed(w, "ts", us(c, t), 3);
  cts_json_kv_str(w, "name", cts_tasks_str(c->m, c->m->counters[counter].name));
  cts_json_key(w, "args");
  cts_json_object(w);
  cts_json_kv_i64(w, "value", value);
  cts_json_end(w);
  cts_json_end(w);
  return w->o->err;
}

static int on_gc(void *ud, uint64_t t0, uint64_t t1) {
  chrome_t *c = ud;
  cts_json_t *w = begin_event(c, "X", 1, 0);
  cts_json_kv_fixed(w, "ts", us(c, t0), 3);
  cts_json_kv_fixed(w, "dur", (double)(t1 - t0) / 1000.0, 3);
  cts_json_kv_str(w, "name", "gc");
  cts_json_end(w);
  return w->o->err;
}

static int chrome_hook(void *ud, cli_tasks_t *t, const cts_mprof_event_t *ev) {
  (void)ud, (void)t, (void)ev;
  return 0;
}

static void chrome_finish(chrome_t *c, const cli_tasks_t *t) {
  const cts_tasks_t *m = &t->m;
  cts_json_t *w = &c->w;
  char buf[32];
  for (size_t i = 0; i < m->ntasks; i++) {
    const cts_task_t *k = &m->tasks[i];
    const char *status = (k->flags & CTS_TASK_F_NEVER_RESOLVED) ? "never resolved (should have)"
                         : (k->flags & CTS_TASK_F_FAILED)       ? "failed"
                         : (k->flags & CTS_TASK_F_RESOLVED)     ? "resolved"
                         : (k->flags & CTS_TASK_F_BECAME)       ? "merged"
                                                                : "pending";
    const char *name = cts_tasks_name(m, (uint32_t)i, buf, sizeof buf);
    begin_event(c, "X", 2, (long long)i + 1);
    cts_json_kv_fixed(w, "ts", us(c, k->start), 3);
    cts_json_kv_fixed(w, "dur", (double)(k->end - k->start) / 1000.0, 3);
    cts_json_kv_str(w, "name", name);
    cts_json_key(w, "args");
    cts_json_object(w);
    cts_json_kv_i64(w, "task", k->id);
    cts_json_kv_str(
        w, "type",
        (k->flags & CTS_TASK_F_PREEXISTING) ? "preexisting" : cts_task_type_name(k->type));
    cts_json_kv_str(w, "status", status);
    cts_json_kv_fixed(w, "running_us", (double)k->running_ns / 1000.0, 3);
    cts_json_kv_u64(w, "runs", k->runs);
    cts_json_end(w);
    cts_json_end(w);
    char label[300];
    snprintf(label, sizeof label, "%s (#%lld)", name, (long long)k->id);
    begin_event(c, "M", 2, (long long)i + 1);
    cts_json_kv_str(w, "name", "thread_name");
    args_name(w, label);
    cts_json_end(w);
  }
  for (size_t l = 0; l < m->nlanes; l++) {
    char lane[64];
    snprintf(lane, sizeof lane, "thread %zu (running tasks)", l + 1);
    begin_event(c, "M", 1, (long long)l + 1);
    cts_json_kv_str(w, "name", "thread_name");
    args_name(w, lane);
    cts_json_end(w);
  }
  begin_event(c, "M", 1, 0);
  cts_json_kv_str(w, "name", "thread_name");
  args_name(w, "gc");
  cts_json_end(w);
  begin_event(c, "M", 1, -1);
  cts_json_kv_str(w, "name", "process_name");
  args_name(w, "threads: running tasks");
  cts_json_end(w);
  begin_event(c, "M", 2, -1);
  cts_json_kv_str(w, "name", "process_name");
  args_name(w, "tasks: lifetimes and interactions");
  cts_json_end(w);
  cli_chrome_end_events(w);
  cts_json_kv_str(w, "trace", cli_basename(t->path));
  cts_json_kv_str(w, "format", "mirage-profile");
  cli_chrome_end(w);
}

static int csv_hook(void *ud, cli_tasks_t *t, const cts_mprof_event_t *ev) {
  cts_out_t *o = ud;
  const uint64_t first = t->m.first_ns;
  cts_out_u64(o, ev->time_ns >= first ? ev->time_ns - first : 0);
  /* (no printf: a line per event) */
  cts_out_char(o, ',');
  cts_out_str(o, cts_mprof_event_name(ev->id));
  cts_out_char(o, ',');
  if (ev->id != CTS_MPROF_GC) cts_out_i64(o, ev->thread);
  cts_out_char(o, ',');
  switch (ev->id) {
    case CTS_MPROF_CREATES:
      cts_out_i64(o, (int64_t)ev->arg);
      cts_out_char(o, ',');
      cts_out_str(o, cts_task_type_name(ev->thread_type));
      cts_out_str(o, ",,");
      break;
    case CTS_MPROF_LABEL:
    case CTS_MPROF_SWITCH:
      cts_out_str(o, ",,,");
      break;
    case CTS_MPROF_INCREASE:
    case CTS_MPROF_COUNTER:
      cts_out_str(o, ",,");
      cts_out_i64(o, ev->value);
      cts_out_char(o, ',');
      break;
    case CTS_MPROF_GC:
      cts_out_str(o, ",,");
      cts_out_u64(o, ev->arg);
      cts_out_char(o, ',');
      break;
    default:
      cts_out_i64(o, (int64_t)ev->arg);
      cts_out_str(o, ",,,");
  }
  if (ev->str) cli_csv_str(o, ev->str);
  cts_out_char(o, '\n');
  return o->err;
}

int cli_tasks_export(cts_out_t *o, const char *path, bool chrome, bool quiet) {
  chrome_t c = {0};
  cts_tasks_config_t cfg = {.lanes = true};
  if (chrome) {
    cli_chrome_begin(&c.w, o);
    cfg.hooks = (cts_tasks_hooks_t){.user_data = &c,
                                    .on_run = on_run,
                                    .on_link = on_link,
                                    .on_counter = on_counter,
                                    .on_gc = on_gc};
  } else {
    cts_out_str(o, "time_ns,event,task,other,type,value,text\n");
  }
  cli_tasks_t t;
  /* The hooks need the model (names, first time): it lives in t, set before any event. */
  memset(&t, 0, sizeof t);
  c.m = &t.m;
  int code = cli_tasks_load(&t, path, &cfg, quiet, false, chrome ? chrome_hook : csv_hook,
                            chrome ? (void *)&c : (void *)o);
  if (chrome && (code == CLI_EXIT_OK || code == CLI_EXIT_DATA)) chrome_finish(&c, &t);
  if (o->err && code < CLI_EXIT_IO) {
    cli_error("cannot write the output: %s", cts_os_strerror(o->err));
    code = CLI_EXIT_IO;
  }
  cli_tasks_free(&t);
  return code;
}
