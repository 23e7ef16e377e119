/* SPDX-License-Identifier: MIT */
#include "report_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../os/mprof_ring.h"
#include "../analysis/task_memory.h"
#include "cli.h"
#include "load.h"

int cli_report_option(cli_report_opts_t *o, int opt, const char *arg) {
  switch (opt) {
    case 'T':
      o->title = arg;
      return -1;
    case 'q':
      o->quiet = true;
      return -1;
    case 'O': {
      char *end;
      errno = 0;
      o->task_offset = strtoll(arg, &end, 10);
      if (*arg == '\0' || *end != '\0' || errno)
        return cli_usage_error("--task-offset takes an integer (ns), not '%s'", arg);
      o->have_offset = true;
      return -1;
    }
    case 'R':
      if (!cli_parse_long(arg, 1000, 100000000L, &o->max_records))
        return cli_usage_error("--max-records takes a number from 1000 to 100000000, not '%s'",
                               arg);
      return -1;
    case 'N':
      if (!cli_parse_long(arg, 1, 100000L, &o->top))
        return cli_usage_error("--top takes a number from 1 to 100000, not '%s'", arg);
      return -1;
  }
  return -2;
}

/* report_mem_load and report_tasks_load with the CLI's ends (cli_load_run). */
typedef struct report_call {
  report_mem_t **mem;
  report_tasks_t **tasks;
  report_tasks_t *attribute; /* memory by task: the task trace, loaded first */
  const char *path;
  const cli_report_opts_t *o;
} report_call_t;

static int run_mem(void *ctx, const cts_load_opts_t *opts) {
  const report_call_t *c = ctx;
  const report_mem_opts_t mo = {.path = c->path,
                                .quiet = c->o->quiet,
                                .log = opts->log,
                                .progress = opts->progress,
                                .progress_user_data = opts->progress_user_data,
                                .max_records = (uint32_t)c->o->max_records,
                                .top_sites = (uint32_t)c->o->top,
                                .attribute = c->attribute,
                                .fold = &cli_fold_settings};
  return report_mem_load(c->mem, &mo);
}

static int run_tasks(void *ctx, const cts_load_opts_t *opts) {
  const report_call_t *c = ctx;
  const report_tasks_opts_t to = {.path = c->path, .quiet = c->o->quiet, .log = opts->log};
  return report_tasks_load(c->tasks, &to);
}

bool cli_report_load(cli_report_input_t *in, const cli_report_opts_t *o, char **paths, int n,
                     int *code) {
  memset(in, 0, sizeof *in);
  const char *mem_path = NULL, *task_path = NULL;
  for (int i = 0; i < n; i++) {
    cli_trace_kind_t kind;
    const int kc = cli_trace_detect(paths[i], &kind);
    if (kc >= 0) {
      *code = kc;
      return false;
    }
    if (kind == CLI_TRACE_TASKS) {
      if (task_path) {
        *code = cli_usage_error("two task traces given: '%s' and '%s'", task_path, paths[i]);
        return false;
      }
      task_path = paths[i];
    } else {
      if (mem_path) {
        *code = cli_usage_error("two memory traces given: '%s' and '%s'", mem_path, paths[i]);
        return false;
      }
      mem_path = paths[i];
    }
  }
  /* The task trace first: the memory trace's events are then attributed to its tasks as
   * they are read (report_mem_opts_t.attribute). */
  int worst = CLI_EXIT_OK;
  if (task_path) {
    report_call_t call = {.tasks = &in->tasks, .path = task_path, .o = o};
    const int err = cli_load_run(NULL, o->quiet, run_tasks, &call);
    worst = cli_load_exit(err, in->tasks != NULL, false, false);
    if (!in->tasks) {
      *code = worst;
      return false;
    }
  }
  if (mem_path) {
    report_call_t call = {.mem = &in->mem, .path = mem_path, .o = o, .attribute = in->tasks};
    const int err = cli_load_run(mem_path, o->quiet, run_mem, &call);
    const int c = cli_load_exit(err, in->mem != NULL, false, false);
    if (!in->mem) {
      cli_report_input_free(in);
      *code = c;
      return false;
    }
    if (c > worst) worst = c;
  }
  if (mem_path && task_path) {
    /* One clock when both come from one process (docs/formats/mprof.md §14.2), and memory by
     * task from the task trace's ctfscope_alloc events; else the report says attribution is
     * impossible, and the first task event is put at the memory trace's start unless
     * --task-offset says where. */
    int64_t offset = 0;
    const int a = report_tasks_mem_finish(in->tasks, report_mem_info(in->mem), &offset);
    in->aligned = a == CTS_TASK_MEM_ALIGNED;
    in->task_offset = offset;
    if (!in->aligned) {
      cli_error("%s and %s: %s%s", cli_basename(mem_path), cli_basename(task_path),
                cts_task_mem_status_text(a),
                o->have_offset ? "; the timeline uses --task-offset"
                               : "; the timeline puts the first task event at the memory trace's "
                                 "start (--task-offset sets the alignment)");
      if (worst < CLI_EXIT_DATA) worst = CLI_EXIT_DATA;
    }
  }
  if (o->title)
    snprintf(in->title, sizeof in->title, "%s", o->title);
  else
    snprintf(in->title, sizeof in->title, "%s%s%s", mem_path ? cli_basename(mem_path) : "",
             mem_path && task_path ? " + " : "", task_path ? cli_basename(task_path) : "");
  *code = worst;
  return true;
}

report_doc_t cli_report_doc(const cli_report_input_t *in, const cli_report_opts_t *o) {
  return (report_doc_t){
      .title = in->title,
      .mem = in->mem,
      .tasks = in->tasks,
      .have_task_offset = o->have_offset || in->aligned,
      .task_offset_ns = (int64_t)(o->have_offset ? o->task_offset : in->task_offset)};
}

void cli_report_input_free(cli_report_input_t *in) {
  report_mem_free(in->mem);
  report_tasks_free(in->tasks);
  in->mem = NULL;
  in->tasks = NULL;
}
