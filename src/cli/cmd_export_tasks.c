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
  cts_out_t *o;
  const cts_tasks_t *m; /* set once reading starts */
  uint64_t flows;
  bool first;
} chrome_t;

static const char *const link_names[CTS_LINK_KINDS] = {"try_read", "read",   "read (failed)",
                                                       "resolve",  "signal", "created"};

static double us(const chrome_t *c, uint64_t t) {
  return t >= c->m->first_ns ? (double)(t - c->m->first_ns) / 1000.0
                             : -(double)(c->m->first_ns - t) / 1000.0;
}

static void begin_event(chrome_t *c) {
  cts_out_str(c->o, c->first ? "\n" : ",\n");
  c->first = false;
}

static int on_run(void *ud, uint32_t task, uint64_t t0, uint64_t t1, uint32_t lane) {
  chrome_t *c = ud;
  char buf[32];
  const cts_task_t *k = &c->m->tasks[task];
  /* B and E rather than X: the end is then the same number as the next slice's start, so
   * readers that add ts + dur in floating point cannot see neighbours overlap. */
  const char *name = cts_tasks_name(c->m, task, buf, sizeof buf);
  begin_event(c);
  cts_out_printf(c->o,
                 "{\"ph\": \"B\", \"pid\": 1, \"tid\": %u, \"ts\": %.3f, \"name\": ", lane + 1,
                 us(c, t0));
  cts_out_json_str(c->o, name);
  cts_out_printf(c->o, ", \"args\": {\"task\": %lld}},\n", (long long)k->id);
  cts_out_printf(c->o,
                 "{\"ph\": \"E\", \"pid\": 1, \"tid\": %u, \"ts\": %.3f, \"name\": ", lane + 1,
                 us(c, t1));
  cts_out_json_str(c->o, name);
  cts_out_str(c->o, "}");
  return c->o->err;
}

static int on_link(void *ud, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst, uint64_t t1) {
  chrome_t *c = ud;
  const uint64_t id = ++c->flows;
  begin_event(c);
  cts_out_printf(c->o,
                 "{\"ph\": \"s\", \"pid\": 2, \"tid\": %u, \"ts\": %.3f, \"id\": %llu, \"cat\": "
                 "\"task\", \"name\": \"%s\"},\n",
                 src + 1, us(c, t0), (unsigned long long)id, link_names[kind]);
  cts_out_printf(c->o,
                 "{\"ph\": \"f\", \"bp\": \"e\", \"pid\": 2, \"tid\": %u, \"ts\": %.3f, \"id\": "
                 "%llu, \"cat\": \"task\", \"name\": \"%s\"}",
                 dst + 1, us(c, t1), (unsigned long long)id, link_names[kind]);
  return c->o->err;
}

static int on_counter(void *ud, uint32_t counter, uint64_t t, int64_t value) {
  chrome_t *c = ud;
  begin_event(c);
  cts_out_printf(c->o, "{\"ph\": \"C\", \"pid\": 1, \"ts\": %.3f, \"name\": ", us(c, t));
  cts_out_json_str(c->o, cts_tasks_str(c->m, c->m->counters[counter].name));
  cts_out_printf(c->o, ", \"args\": {\"value\": %lld}}", (long long)value);
  return c->o->err;
}

static int on_gc(void *ud, uint64_t t0, uint64_t t1) {
  chrome_t *c = ud;
  begin_event(c);
  cts_out_printf(c->o,
                 "{\"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, \"name\": "
                 "\"gc\"}",
                 us(c, t0), (double)(t1 - t0) / 1000.0);
  return c->o->err;
}

static int chrome_hook(void *ud, cli_tasks_t *t, const cts_mprof_event_t *ev) {
  (void)ud, (void)t, (void)ev;
  return 0;
}

static void chrome_finish(chrome_t *c, const cli_tasks_t *t) {
  const cts_tasks_t *m = &t->m;
  char buf[32];
  for (size_t i = 0; i < m->ntasks; i++) {
    const cts_task_t *k = &m->tasks[i];
    const char *status = (k->flags & CTS_TASK_F_NEVER_RESOLVED) ? "never resolved (should have)"
                         : (k->flags & CTS_TASK_F_FAILED)       ? "failed"
                         : (k->flags & CTS_TASK_F_RESOLVED)     ? "resolved"
                         : (k->flags & CTS_TASK_F_BECAME)       ? "merged"
                                                                : "pending";
    const char *name = cts_tasks_name(m, (uint32_t)i, buf, sizeof buf);
    begin_event(c);
    cts_out_printf(c->o,
                   "{\"ph\": \"X\", \"pid\": 2, \"tid\": %zu, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"name\": ",
                   i + 1, us(c, k->start), (double)(k->end - k->start) / 1000.0);
    cts_out_json_str(c->o, name);
    cts_out_printf(
        c->o,
        ", \"args\": {\"task\": %lld, \"type\": \"%s\", \"status\": \"%s\", "
        "\"running_us\": %.3f, \"runs\": %u}},\n",
        (long long)k->id,
        (k->flags & CTS_TASK_F_PREEXISTING) ? "preexisting" : cts_task_type_name(k->type), status,
        (double)k->running_ns / 1000.0, k->runs);
    cts_out_printf(c->o,
                   "{\"ph\": \"M\", \"pid\": 2, \"tid\": %zu, \"name\": \"thread_name\", \"args\": "
                   "{\"name\": ",
                   i + 1);
    char label[300];
    snprintf(label, sizeof label, "%s (#%lld)", name, (long long)k->id);
    cts_out_json_str(c->o, label);
    cts_out_str(c->o, "}}");
  }
  for (size_t l = 0; l < m->nlanes; l++) {
    begin_event(c);
    cts_out_printf(c->o,
                   "{\"ph\": \"M\", \"pid\": 1, \"tid\": %zu, \"name\": \"thread_name\", "
                   "\"args\": {\"name\": \"thread %zu (running tasks)\"}}",
                   l + 1, l + 1);
  }
  begin_event(c);
  cts_out_str(c->o,
              "{\"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"name\": \"thread_name\", \"args\": "
              "{\"name\": \"gc\"}},\n"
              "{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": "
              "\"threads: running tasks\"}},\n"
              "{\"ph\": \"M\", \"pid\": 2, \"name\": \"process_name\", \"args\": {\"name\": "
              "\"tasks: lifetimes and interactions\"}}\n],\n\"displayTimeUnit\": \"ms\",\n"
              "\"otherData\": {\"generator\": \"ctfscope export\", \"trace\": ");
  cts_out_json_str(c->o, cli_basename(t->path));
  cts_out_str(c->o, ", \"format\": \"mirage-profile\"}}\n");
}

static int csv_hook(void *ud, cli_tasks_t *t, const cts_mprof_event_t *ev) {
  cts_out_t *o = ud;
  const uint64_t first = t->m.first_ns;
  cts_out_u64(o, ev->time_ns >= first ? ev->time_ns - first : 0);
  cts_out_printf(o, ",%s,", cts_mprof_event_name(ev->id));
  if (ev->id != CTS_MPROF_GC) cts_out_i64(o, ev->thread);
  cts_out_char(o, ',');
  switch (ev->id) {
    case CTS_MPROF_CREATES:
      cts_out_i64(o, (int64_t)ev->arg);
      cts_out_printf(o, ",%s,,", cts_task_type_name(ev->thread_type));
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
  chrome_t c = {.o = o, .first = true};
  cts_tasks_config_t cfg = {.lanes = true};
  if (chrome) {
    cfg.hooks = (cts_tasks_hooks_t){.user_data = &c,
                                    .on_run = on_run,
                                    .on_link = on_link,
                                    .on_counter = on_counter,
                                    .on_gc = on_gc};
    cts_out_str(o, "{\"traceEvents\": [");
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
