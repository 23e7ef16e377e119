/* SPDX-License-Identifier: MIT */
/* ctfscope report: one self-contained HTML file (viewer and data inline, nothing fetched)
 * for a memtrace trace, a mirage-profile task trace, or one of each from the same run on a
 * shared time axis. The aggregation is in src/report/; the viewer in src/report/viewer.*. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../os/mprof_ring.h"
#include "../report/report.h"
#include "cli.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope report [OPTIONS] TRACE... -o REPORT.html\n"
    "\n"
    "Write one self-contained HTML report (no network access, opens in any browser) for a\n"
    "memtrace allocation trace, a mirage-profile task trace, or one of each from the same\n"
    "run, drawn on one time axis.\n"
    "\n"
    "Memory: trace header, estimated live heap over time with its peak, a flame graph\n"
    "(callers or callees) filtered by time range (allocated, live or collected in it), size,\n"
    "lifetime and function, the top allocation sites, size and lifetime histograms.\n"
    "Tasks: the task timeline (rows under their creators, running periods, interactions,\n"
    "labels, counters, GC and idle bands), with zoom, pan, search and highlighting.\n"
    "Both: allocations marked on the timeline and attributed to the running task.\n"
    "\n"
    "The report embeds pre-aggregated data (time buckets, an interned call tree, grouped\n"
    "allocation records), not every event, so it stays small for large traces.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE     where to write the report (default report.html; - for stdout)\n"
    "      --title TEXT      the report's title (default: the trace file names)\n"
    "      --task-offset NS  task-trace clock value (ns) at the memory trace's start; by\n"
    "                        default the first task event is aligned with that start\n"
    "      --max-records N   budget of allocation records for the filters (default 400000)\n"
    "      --top N           rows of the top-sites table (default 50)\n"
    "  -q, --quiet           do not print warnings\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 when the traces were read completely, 1 when one is corrupt (the report\n"
    "covers what was read before the error), 2 for a usage error, 3 when a file cannot be\n"
    "read or written, 4 out of memory.\n";

typedef struct report_opts {
  const char *output, *title;
  bool quiet, have_offset;
  long long task_offset;
  long max_records, top;
} report_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  report_opts_t *o = ctx;
  switch (opt) {
    case 'o':
      o->output = arg;
      break;
    case 'T':
      o->title = arg;
      break;
    case 'q':
      o->quiet = true;
      break;
    case 'O': {
      char *end;
      errno = 0;
      o->task_offset = strtoll(arg, &end, 10);
      if (*arg == '\0' || *end != '\0' || errno)
        return cli_usage_error("--task-offset takes an integer (ns), not '%s'", arg);
      o->have_offset = true;
      break;
    }
    case 'R':
      if (!cli_parse_long(arg, 1000, 100000000L, &o->max_records))
        return cli_usage_error("--max-records takes a number from 1000 to 100000000, not '%s'",
                               arg);
      break;
    case 'N':
      if (!cli_parse_long(arg, 1, 100000L, &o->top))
        return cli_usage_error("--top takes a number from 1 to 100000, not '%s'", arg);
      break;
  }
  return -1;
}

/* Writes the template with its three holes filled: the style, the data, the script. */
static void write_html(cts_out_t *o, const report_doc_t *doc) {
  const char *html = (const char *)cts_report_html;
  static const char *const holes[] = {"/*@CSS@*/", "@DATA@", "/*@JS@*/"};
  for (unsigned h = 0; h < 3; h++) {
    const char *at = strstr(html, holes[h]);
    if (!at) at = html + strlen(html);
    cts_out_write(o, html, (size_t)(at - html));
    html = *at ? at + strlen(holes[h]) : at;
    if (h == 0)
      cts_out_write(o, cts_report_css, cts_report_css_size);
    else if (h == 1)
      report_write_doc(o, doc);
    else
      cts_out_write(o, cts_report_js, cts_report_js_size);
  }
  cts_out_str(o, html);
}

int cmd_report(int argc, char **argv) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"title", required_argument, NULL, 'T'},
      {"task-offset", required_argument, NULL, 'O'},
      {"max-records", required_argument, NULL, 'R'},
      {"top", required_argument, NULL, 'N'},
      {"quiet", no_argument, NULL, 'q'},
      {0},
  };
  report_opts_t opts = {.output = "report.html"};
  int first;
  const int rc = cli_parse(argc, argv, "o:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (first >= argc) return cli_usage_error("no trace given");
  const char *mem_path = NULL, *task_path = NULL;
  for (int i = first; i < argc; i++) {
    if (strcmp(argv[i], "-") != 0 && cts_os_is_mprof_file(argv[i])) {
      if (task_path)
        return cli_usage_error("two task traces given: '%s' and '%s'", task_path, argv[i]);
      task_path = argv[i];
    } else {
      if (mem_path)
        return cli_usage_error("two memory traces given: '%s' and '%s'", mem_path, argv[i]);
      mem_path = argv[i];
    }
  }
  int worst = CLI_EXIT_OK;
  report_mem_t *mem = NULL;
  report_tasks_t *tasks = NULL;
  if (mem_path) {
    const report_mem_opts_t mo = {.path = mem_path,
                                  .quiet = opts.quiet,
                                  .max_records = (uint32_t)opts.max_records,
                                  .top_sites = (uint32_t)opts.top};
    const int code = report_mem_load(&mem, &mo);
    if (!mem) return code;
    worst = code;
  }
  if (task_path) {
    const report_tasks_opts_t to = {.path = task_path, .quiet = opts.quiet};
    const int code = report_tasks_load(&tasks, &to);
    if (!tasks) {
      report_mem_free(mem);
      return code;
    }
    if (code > worst) worst = code;
  }
  char title[512];
  if (opts.title)
    snprintf(title, sizeof title, "%s", opts.title);
  else
    snprintf(title, sizeof title, "%s%s%s", mem_path ? cli_basename(mem_path) : "",
             mem_path && task_path ? " + " : "", task_path ? cli_basename(task_path) : "");

  int fd = STDOUT_FILENO;
  if (strcmp(opts.output, "-") != 0) {
    fd = open(opts.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      cli_error("cannot create '%s': %s", opts.output, strerror(errno));
      report_mem_free(mem);
      report_tasks_free(tasks);
      return CLI_EXIT_IO;
    }
  }
  static cts_out_t out;
  cts_out_init(&out, fd);
  const report_doc_t doc = {.title = title,
                            .mem = mem,
                            .tasks = tasks,
                            .have_task_offset = opts.have_offset,
                            .task_offset_ns = (int64_t)opts.task_offset};
  write_html(&out, &doc);
  int code = cli_finish_output(&out, worst);
  if (fd != STDOUT_FILENO && close(fd) != 0 && code == CLI_EXIT_OK) {
    cli_error("cannot write '%s': %s", opts.output, strerror(errno));
    code = CLI_EXIT_IO;
  }
  report_mem_free(mem);
  report_tasks_free(tasks);
  return code;
}
