/* SPDX-License-Identifier: MIT */
/* What `report` and `serve` share: the options that shape the report's content, and loading
 * a memory trace and/or a task trace into the report's aggregations. */
#ifndef CTS_REPORT_INPUT_H
#define CTS_REPORT_INPUT_H

#include <stdbool.h>

#include "../report/report.h"

/* Options; zero-initialised = the defaults (the report's own record and site budgets). */
typedef struct cli_report_opts {
  const char *title; /* NULL: the trace file names */
  bool quiet, have_offset;
  long long task_offset; /* ns, with have_offset */
  long max_records, top; /* 0 = the report's defaults */
} cli_report_opts_t;

/* The long options of cli_report_opts_t, to put in a command's table. */
#define CLI_REPORT_LONGOPTS                                                               \
  {"title", required_argument, NULL, 'T'}, {"task-offset", required_argument, NULL, 'O'}, \
      {"max-records", required_argument, NULL, 'R'}, {                                    \
    "top", required_argument, NULL, 'N'                                                   \
  }

/* Handles -T, -O, -R, -N (and -q). Returns -1 when handled, an exit code after a usage error,
 * or -2 when `opt` is not one of them. */
int cli_report_option(cli_report_opts_t *o, int opt, const char *arg);

typedef struct cli_report_input {
  report_mem_t *mem;      /* NULL without a memory trace */
  report_tasks_t *tasks;  /* NULL without a task trace; the good run of a comparison */
  report_tasks_t *tasks2; /* the bad run of a comparison (two task traces), else NULL */
  char *compare_json;     /* owned: the comparison's "compare" member value, or NULL */
  bool aligned;           /* both from one process: offset from the task trace's anchor */
  long long task_offset;  /* ns, with aligned */
  char title[512];
} cli_report_input_t;

/* Sorts paths into at most one memory and one task trace, or two task traces (a good and
 * a bad run, compared: analysis/task_align.h), loads them and makes the title.
 * Returns true with *code the worst exit code of the loads (a corrupt trace is kept as far
 * as it was read), or false with *code the exit code and nothing loaded. */
bool cli_report_load(cli_report_input_t *in, const cli_report_opts_t *o, char **paths, int n,
                     int *code);
/* The document to write or serve (borrows from in). */
report_doc_t cli_report_doc(const cli_report_input_t *in, const cli_report_opts_t *o);
void cli_report_input_free(cli_report_input_t *in);

#endif /* CTS_REPORT_INPUT_H */
