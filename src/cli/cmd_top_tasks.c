/* SPDX-License-Identifier: MIT */
/* ctfscope top --by task MEMORY_TRACE TASK_TRACE: allocated, freed and live bytes per task,
 * from the task that ran on the allocating thread (analysis/task_memory.h). */
#define _GNU_SOURCE /* qsort_r */
#include "cmd_top_tasks.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/task_memory.h"
#include "../os/mprof_ring.h"
#include "../os/os.h"
#include "cli.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope top --by task [OPTIONS] MEMORY_TRACE TASK_TRACE\n"
    "\n"
    "List the memory allocated, freed and still live per task: each sampled allocation of\n"
    "the memtrace trace counts for the task that was running on the thread that made it.\n"
    "Both traces must come from one process, recorded together (`ctfscope record --tasks`,\n"
    "or the linked tracer and task APIs with cts_task_clock_anchor()): the task trace then\n"
    "names the task of every sampled allocation and carries what aligns the two clocks.\n"
    "Allocations made while no task ran on their thread are shown as 'outside tasks';\n"
    "those the task trace does not name (its ring wrapped over them, or they came before\n"
    "task tracing started) as 'unattributed'. Bytes and counts are estimates as in 'top'\n"
    "(exact at rate 1); figures from few samples show a 95% confidence interval.\n"
    "\n"
    "Options:\n"
    "      --by task       this view (required)\n"
    "  -s, --sort KEY      order by 'bytes' (allocated, default), 'count' or 'live'\n"
    "  -n, --limit N       show the first N tasks (default 20, 0 = all)\n"
    "      --json          print JSON: {\"tasks\": [{\"id\", \"label\", \"lane\", "
    "\"alloc_bytes\",\n"
    "                      \"alloc_count\", \"freed_bytes\", \"freed_count\", \"live_bytes\",\n"
    "                      \"live_count\", ...}], \"outside_tasks\": {...}, \"unattributed\": "
    "{...}}\n"
    "  -q, --quiet         do not print warnings\n" CLI_WIDTH_HELP
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 when both traces were read completely and attributed; 1 when one is\n"
    "corrupt (the figures cover what was read), or when attribution is impossible (traces\n"
    "of different processes, or a task trace without ctfscope's clock anchor: the message\n"
    "says which, and the totals are still printed); 2 for a usage error, 3 when a trace\n"
    "cannot be read, 4 out of memory.\n";

/* ---- the command ------------------------------------------------------------------------ */

typedef enum { SORT_BYTES, SORT_COUNT, SORT_LIVE } sort_t;

typedef struct opts {
  cli_out_opts_t out; /* --json, --csv, -q, --limit */
  const char *by;
  sort_t sort;
} opts_t;

static const cli_keyword_t sort_keys[] = {
    {"bytes", SORT_BYTES}, {"count", SORT_COUNT}, {"live", SORT_LIVE}, {NULL, 0}};

bool cmd_top_by_task(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return false;
    if (strcmp(argv[i], "--by=task") == 0) return true;
    if (strcmp(argv[i], "--by") == 0 && i + 1 < argc && strcmp(argv[i + 1], "task") == 0)
      return true;
  }
  return false;
}

static int on_option(void *ctx, int opt, const char *arg) {
  opts_t *o = ctx;
  const int common = cli_output_option(opt, arg, &o->out, true);
  if (common != CLI_OPTION_OTHER) return common;
  switch (opt) {
    case 'B':
      o->by = arg;
      return -1;
    case 's': {
      int v;
      const int rc = cli_parse_keyword("--sort", arg, sort_keys, NULL, &v);
      if (rc >= 0) return rc;
      o->sort = (sort_t)v;
      return -1;
    }
    default:
      return CLI_EXIT_USAGE;
  }
}

typedef struct state {
  cts_task_mem_t tm;
  bool aligned; /* cts_task_mem_align was called */
  const cts_tasks_t *model;
} state_t;

static int on_mem_event(void *ud, cli_trace_t *t, const cts_mt_event_t *ev) {
  state_t *s = ud;
  if (!s->aligned) {
    cts_task_mem_align(&s->tm, s->model, cts_mt_reader_borrow_info(t->reader));
    s->aligned = true;
  }
  return cts_task_mem_event(&s->tm, ev);
}

static uint64_t sort_key(const cts_task_mem_row_t *r, sort_t sort) {
  switch (sort) {
    case SORT_COUNT:
      return (uint64_t)r->alloc.count;
    case SORT_LIVE:
      return r->live.samples;
    case SORT_BYTES:
      break;
  }
  return r->alloc.samples;
}

static int cmp_rows(const void *a, const void *b, void *arg) {
  const cts_task_mem_row_t *x = a, *y = b;
  const sort_t sort = *(const sort_t *)arg;
  const uint64_t kx = sort_key(x, sort), ky = sort_key(y, sort);
  if (kx != ky) return kx > ky ? -1 : 1;
  return x->task < y->task ? -1 : x->task > y->task;
}

static void json_figures(cts_json_t *w, const cts_alloc_profile_t *p,
                         const cts_task_mem_figures_t *alloc, const cts_task_mem_figures_t *freed,
                         const cts_task_mem_figures_t *live) {
  cli_jw_estimate(w, p, "alloc", alloc->samples);
  cts_json_kv_u64(w, "alloc_count", cts_est_round(alloc->count));
  cts_json_kv_u64(w, "alloc_blocks", alloc->blocks);
  cli_jw_estimate(w, p, "freed", freed->samples);
  cts_json_kv_u64(w, "freed_count", cts_est_round(freed->count));
  cli_jw_estimate(w, p, "live", live->samples);
  cts_json_kv_u64(w, "live_count", cts_est_round(live->count));
}

static void print_json(cts_json_t *w, const cli_trace_t *mem, const cli_tasks_t *tasks,
                       const state_t *s, const cts_task_mem_row_t *rows, size_t n) {
  const cts_task_mem_t *tm = &s->tm;
  const cts_tasks_t *m = &tasks->m;
  cts_json_object(w);
  cli_jw_trace_header(w, mem);
  cts_json_kv_str(w, "task_trace", tasks->path);
  cts_json_ws(w, "\n ");
  const bool ok = tm->status == CTS_TASK_MEM_ALIGNED;
  cts_json_kv_str(w, "attribution", ok ? "exact" : "impossible");
  if (!ok) {
    cts_json_kv_str(w, "reason", cts_task_mem_status_text(tm->status));
    cts_json_end(w);
    cts_json_finish(w);
    cts_out_char(w->o, '\n');
    return;
  }
  cts_json_ws(w, "\n ");
  cts_json_key(w, "alignment");
  cts_json_object(w);
  cts_json_kv_u64(w, "pid", tm->mem_pid);
  cts_json_kv_i64(w, "task_offset_ns", tm->task_offset_ns);
  cts_json_kv_u64(w, "pairs", tm->pairs);
  cts_json_kv_u64(w, "error_ns", cts_task_mem_align_error_ns(tm));
  cts_json_kv_i64(w, "lag_min_ns", tm->err_min_ns);
  cts_json_kv_i64(w, "lag_median_ns", cts_task_mem_lag_median_ns(tm));
  cts_json_kv_i64(w, "lag_max_ns", tm->err_max_ns);
  cts_json_kv_fixed(w, "within_100us", cts_task_mem_lag_within(tm, 100), 6);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "tasks_events_lost", m->lost);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "tasks");
  cts_json_array(w);
  char name[64];
  for (size_t i = 0; i < n; i++) {
    const cts_task_mem_row_t *r = &rows[i];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_i64(w, "id", m->tasks[r->task].id);
    cts_json_kv_str(w, "label", cts_tasks_name(m, r->task, name, sizeof name));
    cts_json_kv_u64(w, "lane", r->lane);
    json_figures(w, &mem->prof, &r->alloc, &r->freed, &r->live);
    cts_json_end(w);
  }
  cts_json_ws(w, "\n ");
  cts_json_end(w);
  const cts_task_mem_row_t *out = &tm->rows[0];
  cts_json_ws(w, "\n ");
  cts_json_key(w, "outside_tasks");
  cts_json_object(w);
  json_figures(w, &mem->prof, &out->alloc, &out->freed, &out->live);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "unattributed");
  cts_json_object(w);
  json_figures(w, &mem->prof, &tm->unattr_alloc, &tm->unattr_freed, &tm->unattr_live);
  cts_json_end(w);
  cts_json_ws(w, "\n");
  cts_json_end(w);
  cts_json_finish(w);
  cts_out_char(w->o, '\n');
}

static void text_row(cts_out_t *o, const cts_alloc_profile_t *p,
                     const cts_task_mem_figures_t *alloc, const cts_task_mem_figures_t *freed,
                     const cts_task_mem_figures_t *live, const char *lane, const char *name) {
  char a[96], f[96], l[96], c[32], figures[400];
  snprintf(figures, sizeof figures, "%-28s %12s %-28s %-28s %5s  ",
           cli_est_bytes(p, alloc->samples, true, a, sizeof a),
           cli_grouped(cts_est_round(alloc->count), c, sizeof c),
           cli_est_bytes(p, freed->samples, true, f, sizeof f),
           cli_est_bytes(p, live->samples, true, l, sizeof l), lane);
  cli_out_fitted_row(o, figures, name, "\n");
}

static void print_text(cts_out_t *o, const cli_trace_t *mem, const cli_tasks_t *tasks,
                       const state_t *s, const cts_task_mem_row_t *rows, size_t n, size_t shown) {
  const cts_task_mem_t *tm = &s->tm;
  const cts_tasks_t *m = &tasks->m;
  cli_text_trace_header(o, mem);
  char a[32], b[32];
  cli_out_heading(o,
                  "Tasks    %s: the same process (pid %llu); clocks aligned by the trace's anchor, "
                  "error at most %s (median lag over %s allocations)\n\n",
                  cli_basename(tasks->path), (unsigned long long)tm->mem_pid,
                  cli_human_ns((double)cts_task_mem_align_error_ns(tm), a, sizeof a),
                  cli_grouped(tm->pairs, b, sizeof b));
  cts_out_printf(o, "%-28s %12s %-28s %-28s %5s  %s\n", "allocated", "allocations", "freed",
                 "live at end", "lane", "task");
  char name[64], lane[16], label[96];
  for (size_t i = 0; i < n && i < shown; i++) {
    const cts_task_mem_row_t *r = &rows[i];
    snprintf(lane, sizeof lane, "%u", r->lane);
    snprintf(label, sizeof label, "%s (#%lld)", cts_tasks_name(m, r->task, name, sizeof name),
             (long long)m->tasks[r->task].id);
    text_row(o, &mem->prof, &r->alloc, &r->freed, &r->live, lane, label);
  }
  if (n > shown) cts_out_printf(o, "... %zu more tasks (-n 0 shows all)\n", n - shown);
  const cts_task_mem_row_t *out = &tm->rows[0];
  text_row(o, &mem->prof, &out->alloc, &out->freed, &out->live, "-", "(outside tasks)");
  if (tm->unattr_alloc.blocks)
    text_row(o, &mem->prof, &tm->unattr_alloc, &tm->unattr_freed, &tm->unattr_live, "-",
             "(unattributed: not named by the task trace)");
}

int cmd_top_tasks(int argc, char **argv) {
  static const struct option longopts[] = {
      {"by", required_argument, NULL, 'B'},
      {"sort", required_argument, NULL, 's'},
      {"limit", required_argument, NULL, 'n'},
      CLI_LONGOPT_JSON,
      CLI_LONGOPT_CSV,
      CLI_LONGOPT_QUIET,
      CLI_WIDTH_OPTIONS,
      {0},
  };
  opts_t opts = {.out.limit = 20};
  int first;
  const int rc = cli_parse(argc, argv, "s:n:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (!opts.by || strcmp(opts.by, "task") != 0)
    return cli_usage_error("this view is 'top --by task'");
  if (opts.out.csv) return cli_usage_error("--csv is not available with --by task");
  if (argc - first != 2)
    return cli_usage_error("--by task takes a memory trace and a task trace, in that order");
  const char *mem_path = argv[first], *task_path = argv[first + 1];
  cli_trace_kind_t kind;
  int kc = cli_trace_detect(mem_path, &kind);
  if (kc >= 0) return kc;
  if (kind != CLI_TRACE_MEMTRACE)
    return cli_usage_error("'%s' is a task trace: give the memory trace first", mem_path);
  kc = cli_trace_detect(task_path, &kind);
  if (kc >= 0) return kc;
  if (kind != CLI_TRACE_TASKS)
    return cli_usage_error("'%s' is not a task trace (mirage-profile CTF)", task_path);

  state_t s;
  if (cts_task_mem_init(&s.tm)) {
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  s.aligned = false;
  cts_tasks_config_t tc = {.lanes = true};
  tc.hooks.user_data = &s.tm;
  tc.hooks.on_alloc = cts_task_mem_on_alloc;
  cli_tasks_t tasks;
  int code = cli_tasks_load(&tasks, task_path, &tc, opts.out.quiet, false, NULL, NULL);
  s.model = &tasks.m;
  cli_trace_t mem;
  memset(&mem, 0, sizeof mem);
  if (code == CLI_EXIT_OK || code == CLI_EXIT_DATA) {
    const cts_alloc_profile_config_t mc = {.skip_histograms = true};
    const int mcode = cli_trace_load_hooked(&mem, mem_path, &mc, opts.out.quiet, on_mem_event, &s);
    if (mem.hook_err) {
      cli_error("out of memory");
      code = CLI_EXIT_INTERNAL;
    } else if (mcode > code) {
      code = mcode;
    }
  }
  if (code != CLI_EXIT_OK && code != CLI_EXIT_DATA) {
    cli_trace_free(&mem);
    cli_tasks_free(&tasks);
    cts_task_mem_fini(&s.tm);
    return code;
  }
  if (!s.aligned) cts_task_mem_align(&s.tm, &tasks.m, mem.info);
  cts_task_mem_finish(&s.tm);
  if (s.tm.status != CTS_TASK_MEM_ALIGNED) {
    cli_error("%s and %s: %s", cli_basename(mem_path), cli_basename(task_path),
              cts_task_mem_status_text(s.tm.status));
    code = CLI_EXIT_DATA;
  } else if (tasks.m.lost && !opts.out.quiet) {
    cli_warn(
        "%s: the task tracer lost %llu events; allocations it did not name are "
        "'unattributed'",
        cli_basename(task_path), (unsigned long long)tasks.m.lost);
  }
  /* Rows by task, biggest first (rows[0], outside tasks, is shown apart). */
  const size_t n = s.tm.nrows - 1;
  cts_task_mem_row_t *rows = s.tm.rows + 1;
  qsort_r(rows, n, sizeof *rows, cmp_rows, &opts.sort);
  cts_out_t *out = cli_stdout_for(&opts.out);
  const size_t shown = cli_rows_shown(&opts.out, n);
  if (opts.out.json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_json(&w, &mem, &tasks, &s, rows, shown);
  } else if (s.tm.status == CTS_TASK_MEM_ALIGNED) {
    print_text(out, &mem, &tasks, &s, rows, n, shown);
  } else { /* what can still be said: the memory trace itself */
    cli_text_trace_header(out, &mem);
  }
  code = cli_finish_output(out, code);
  cli_trace_free(&mem);
  cli_tasks_free(&tasks);
  cts_task_mem_fini(&s.tm);
  return code;
}
