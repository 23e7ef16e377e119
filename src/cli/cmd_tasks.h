/* SPDX-License-Identifier: MIT */
/* The analysis commands on mirage-profile task traces (cmd_tasks.c, cmd_export_tasks.c):
 * each command detects the trace kind (cli_trace_detect) and, for a task trace, calls its
 * function here with its parsed options. Every function returns an exit code. */
#ifndef CTS_CLI_CMD_TASKS_H
#define CTS_CLI_CMD_TASKS_H

#include <stdbool.h>

#include "../analysis/task_summary.h"
#include "cli.h"

/* `info`: appends the trace's description to o as text, or as one JSON value to w when w is
 * not NULL (w writes to o). */
int cli_tasks_info(cts_out_t *o, cts_json_t *w, const char *path, bool packets, bool quiet);

typedef struct cli_tasks_stats_opts {
  cli_out_opts_t out;
  bool bars;
  const char *svg, *png; /* --svg, --png: NULL = none */
} cli_tasks_stats_opts_t;
int cli_tasks_stats(const char *path, const cli_tasks_stats_opts_t *opts);

/* Parse --by (label, type) / --sort / --metric (running, count, alive) values for task
 * traces (analysis/task_summary.h); -1 when valid, else prints the usage error and returns
 * its exit code. A NULL arg gives the default (label; running). */
int cli_tasks_parse_by(const char *arg, cts_task_group_by_t *out);
int cli_tasks_parse_metric(const char *option, const char *arg, cts_task_metric_t *out);

typedef struct cli_tasks_top_opts {
  cli_out_opts_t out;
  cts_task_group_by_t by;
  cts_task_metric_t sort;
} cli_tasks_top_opts_t;
int cli_tasks_top(const char *path, const cli_tasks_top_opts_t *opts);

int cli_tasks_leaks(const char *path, const cli_out_opts_t *opts);

typedef struct cli_tasks_diff_opts {
  cli_out_opts_t out;
  cts_task_group_by_t by;
  cts_task_metric_t metric;
  bool per_second; /* divide each side by its trace's span */
} cli_tasks_diff_opts_t;
/* `diff --metric`: the groups of both traces compared by a metric. */
int cli_tasks_diff(const char *before, const char *after, const cli_tasks_diff_opts_t *opts);
/* `diff` (cmd_tasks_compare.c): outcomes by creation path and the first divergence in order. */
int cli_tasks_compare(const char *good, const char *bad, const cli_out_opts_t *opts);

/* Chrome trace-event JSON, shared by the memtrace and task exports (cmd_export.c):
 * cli_chrome_begin starts the document on o and opens its "traceEvents" array, each event
 * then on its own line; cli_chrome_end_events closes the array, writes "displayTimeUnit"
 * and opens "otherData" with its "generator", for the caller's own members, and
 * cli_chrome_end closes the document. */
void cli_chrome_begin(cts_json_t *w, cts_out_t *o);
void cli_chrome_end_events(cts_json_t *w);
void cli_chrome_end(cts_json_t *w);

/* `export --format chrome|csv` of a task trace to o. */
int cli_tasks_export(cts_out_t *o, const char *path, bool chrome, bool quiet);

#endif /* CTS_CLI_CMD_TASKS_H */
