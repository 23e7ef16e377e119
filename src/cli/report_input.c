/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* memfd_create */
#include "report_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../os/mprof_ring.h"
#include "../analysis/task_align.h"
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
  /* A file's span from its packet headers: the pass then never remaps the records for time
   * alone (13 of the 19 remaps on gen_trace --shape survivors --mb 160). Not for a pipe or
   * standard input, nor for a memory-by-task join (report_mem_opts_t.time_floor_us). */
  uint64_t start_us, floor_us = 0;
  if (!c->attribute && !cts_os_memtrace_span(c->path, &start_us, &floor_us)) floor_us = 0;
  const report_mem_opts_t mo = {.path = c->path,
                                .quiet = c->o->quiet,
                                .log = opts->log,
                                .progress = opts->progress,
                                .progress_user_data = opts->progress_user_data,
                                .max_records = (uint32_t)c->o->max_records,
                                .top_sites = (uint32_t)c->o->top,
                                .attribute = c->attribute,
                                .no_marks = !c->attribute, /* drawn on the task timeline only */
                                .fold = &cli_fold_settings,
                                .time_floor_us = floor_us};
  return report_mem_load(c->mem, &mo);
}

static int run_tasks(void *ctx, const cts_load_opts_t *opts) {
  const report_call_t *c = ctx;
  const report_tasks_opts_t to = {.path = c->path, .quiet = c->o->quiet, .log = opts->log};
  return report_tasks_load(c->tasks, &to);
}

/* One side of the divergence for the viewer: the time (ns from the run's first event, as its
 * timeline), the event's text and its tasks' ids. */
static void write_point(cts_out_t *o, const cts_tasks_t *m, const cts_task_compare_t *c, int s,
                        size_t at, uint64_t t, int64_t first_ns) {
  char text[256];
  cts_out_printf(o, "{\"t\":%lld,\"text\":", (long long)((int64_t)t - first_ns));
  if (at == SIZE_MAX) {
    cts_out_str(o, "\"nothing more\",\"src\":null,\"dst\":null}");
    return;
  }
  const cts_align_event_t *e = &c->seq[s][at];
  report_json_str(o, cts_align_describe(m, e, text, sizeof text));
  if (e->src == CTS_TASKS_NONE)
    cts_out_str(o, ",\"src\":null");
  else
    cts_out_printf(o, ",\"src\":%lld", (long long)m->tasks[e->src].id);
  cts_out_printf(o, ",\"dst\":%lld}", (long long)m->tasks[e->dst].id);
}

/* The "compare" member: {"runs":[good, bad], "diverged", "common", "matched" (tasks),
 * "good"/"bad": {"task" (the creation path whose history diverges), "last", "next"
 * (points)}, "paths": [{"path","good","bad"}] (the first 20)}. Written through a memory file
 * so that report_json_str escapes the labels. NULL when out of memory or I/O fails. */
static char *compare_json(const cli_report_input_t *in, const char *good, const char *bad) {
  cli_tasks_t t[2];
  cts_task_trail_t trail[2];
  memset(t, 0, sizeof t);
  memset(trail, 0, sizeof trail);
  const char *paths[2] = {good, bad};
  report_tasks_t *const rt[2] = {in->tasks, in->tasks2};
  char *json = NULL;
  int nloaded = 0;
  cts_task_compare_t c = {0};
  const int fd = memfd_create("ctfscope-compare", MFD_CLOEXEC);
  for (int s = 0; s < 2 && fd >= 0; s++) {
    cts_tasks_config_t cfg = {.lanes = true};
    cfg.hooks.on_link = cts_task_trail_on_link;
    cfg.hooks.user_data = &trail[s];
    const int rc = cli_tasks_load(&t[s], paths[s], &cfg, true, false, NULL, NULL);
    nloaded++;
    if (rc != CLI_EXIT_OK && rc != CLI_EXIT_DATA) goto end;
  }
  const cts_tasks_t *const models[2] = {&t[0].m, &t[1].m};
  const cts_task_trail_t *const trails[2] = {&trail[0], &trail[1]};
  if (fd < 0 || cts_task_compare(models, trails, &c)) goto end;
  cts_out_t o;
  cts_out_init(&o, fd);
  cts_out_str(&o, "{\"runs\":[");
  report_json_str(&o, cli_basename(good));
  cts_out_char(&o, ',');
  report_json_str(&o, cli_basename(bad));
  cts_out_printf(&o, "],\"diverged\":%s,\"common\":%zu,\"matched\":%zu",
                 c.diverged ? "true" : "false", c.common, c.matched_tasks);
  static const char *const names[2] = {"good", "bad"};
  for (int s = 0; s < 2; s++) {
    uint64_t first_ns, last_ns;
    report_tasks_span(rt[s], &first_ns, &last_ns);
    const cts_align_point_t *p = &c.point[s];
    cts_out_printf(&o, ",\"%s\":{\"task\":", names[s]);
    char path[512];
    report_json_str(&o,
                    c.diverged ? cts_task_path_name(&t[s].m, p->task, 6, path, sizeof path) : "");
    cts_out_str(&o, ",\"last\":");
    if (c.diverged && p->last != SIZE_MAX)
      write_point(&o, &t[s].m, &c, s, p->last, c.seq[s][p->last].t, (int64_t)first_ns);
    else
      cts_out_str(&o, "null");
    cts_out_str(&o, ",\"next\":");
    if (c.diverged)
      write_point(&o, &t[s].m, &c, s, p->at, p->t, (int64_t)first_ns);
    else
      cts_out_str(&o, "null");
    cts_out_char(&o, '}');
  }
  cts_out_str(&o, ",\"paths\":[");
  for (size_t i = 0; i < c.npaths && i < 20; i++) {
    const cts_align_path_t *p = &c.paths[i];
    const int s0 = p->task[0] != CTS_TASKS_NONE ? 0 : 1;
    char buf[512];
    cts_out_str(&o, i ? ",{\"path\":" : "{\"path\":");
    report_json_str(&o, cts_task_path_name(&t[s0].m, p->task[s0], 6, buf, sizeof buf));
    for (int s = 0; s < 2; s++) {
      cts_out_printf(&o, ",\"%s\":", names[s]);
      report_json_str(&o, cts_align_path_outcomes(p, s, buf, sizeof buf));
    }
    cts_out_char(&o, '}');
  }
  cts_out_printf(&o, "],\"paths_total\":%zu}", c.npaths);
  if (cts_out_flush(&o)) goto end;
  const off_t size = lseek(fd, 0, SEEK_END);
  json = size >= 0 ? malloc((size_t)size + 1) : NULL;
  if (json && pread(fd, json, (size_t)size, 0) != (ssize_t)size) {
    free(json);
    json = NULL;
  }
  if (json) json[size] = '\0';
end:
  if (fd >= 0) close(fd);
  cts_task_compare_fini(&c);
  for (int s = 0; s < nloaded; s++) {
    cts_task_trail_fini(&trail[s]);
    cli_tasks_free(&t[s]);
  }
  return json;
}

bool cli_report_load(cli_report_input_t *in, const cli_report_opts_t *o, char **paths, int n,
                     int *code) {
  memset(in, 0, sizeof *in);
  const char *mem_path = NULL, *task_path = NULL, *task2_path = NULL;
  for (int i = 0; i < n; i++) {
    cli_trace_kind_t kind;
    const int kc = cli_trace_detect(paths[i], &kind);
    if (kc >= 0) {
      *code = kc;
      return false;
    }
    if (kind == CLI_TRACE_TASKS) {
      if (task2_path) {
        *code = cli_usage_error(
            "three task traces given: '%s', '%s' and '%s' (compare two: "
            "GOOD BAD)",
            task_path, task2_path, paths[i]);
        return false;
      }
      if (task_path)
        task2_path = paths[i];
      else
        task_path = paths[i];
    } else {
      if (mem_path) {
        *code = cli_usage_error("two memory traces given: '%s' and '%s'", mem_path, paths[i]);
        return false;
      }
      mem_path = paths[i];
    }
  }
  if (task2_path && mem_path) {
    *code = cli_usage_error(
        "'%s': a comparison of two task traces ('%s', '%s') takes no "
        "memory trace",
        mem_path, task_path, task2_path);
    return false;
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
  if (task2_path) {
    report_call_t call = {.tasks = &in->tasks2, .path = task2_path, .o = o};
    const int err = cli_load_run(NULL, o->quiet, run_tasks, &call);
    const int c = cli_load_exit(err, in->tasks2 != NULL, false, false);
    if (c > worst) worst = c;
    if (in->tasks2) in->compare_json = compare_json(in, task_path, task2_path);
    if (!in->tasks2 || !in->compare_json) {
      *code = c;
      if (in->tasks2) {
        cli_error("%s and %s: cannot compare them (out of memory)", task_path, task2_path);
        *code = CLI_EXIT_INTERNAL;
      }
      cli_report_input_free(in);
      return false;
    }
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
  else if (task2_path)
    snprintf(in->title, sizeof in->title, "%s (good) vs %s (bad)", cli_basename(task_path),
             cli_basename(task2_path));
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
      .tasks2 = in->tasks2,
      .compare_json = in->compare_json,
      .have_task_offset = o->have_offset || in->aligned,
      .task_offset_ns = (int64_t)(o->have_offset ? o->task_offset : in->task_offset)};
}

void cli_report_input_free(cli_report_input_t *in) {
  report_mem_free(in->mem);
  report_tasks_free(in->tasks);
  report_tasks_free(in->tasks2);
  free(in->compare_json);
  in->mem = NULL;
  in->tasks = NULL;
  in->tasks2 = NULL;
  in->compare_json = NULL;
}
