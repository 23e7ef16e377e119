/* SPDX-License-Identifier: MIT */
/* ctfscope report: one self-contained HTML file (viewer and data inline, nothing fetched)
 * for a memtrace trace, a mirage-profile task trace, one of each from the same run on a
 * shared time axis, or two task traces (a good and a bad run) compared. The aggregation is in
 * src/report/; the viewer in src/report/viewer.*. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "../os/mprof_ring.h"
#include "../report/report.h"
#include "cli.h"
#include "load.h"
#include "report_input.h"

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
    "labels, counters, GC and idle bands), with zoom, pan, search and highlighting; in a\n"
    "multi-threaded trace each thread runs its own task (a lane per thread, as in 'top').\n"
    "Both: allocations marked on the timeline, and 'Memory by running task': what each\n"
    "task allocated, freed and kept, with its lane, the figures of 'top --by task' (each\n"
    "sampled allocation counts for the task that ran on the thread that made it). That\n"
    "needs both traces of one process, recorded together ('record --tasks'); for others\n"
    "the report says attribution is impossible.\n"
    "Two task traces, GOOD BAD (runs of one program): both timelines one above the other,\n"
    "aligned at their starts, zoomed and panned together, the first divergence (as\n"
    "`ctfscope diff GOOD BAD` finds it) marked in both, and the tasks that ended differently;\n"
    "the Tasks tab shows the good run in full.\n"
    "\n"
    "The report embeds pre-aggregated data (time buckets, an interned call tree, grouped\n"
    "allocation records), not every event, so it stays small for large traces.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE     where to write the report (default report.html; - for stdout)\n"
    "      --title TEXT      the report's title (default: the trace file names)\n"
    "      --task-offset NS  task-trace clock value (ns) at the memory trace's start; by\n"
    "                        default the task trace's clock anchor aligns the traces of\n"
    "                        one process, else the first task event is put at that start\n"
    "      --max-records N   budget of allocation records for the filters (default 400000)\n"
    "      --top N           rows of the top-sites table (default 50)\n" CLI_FRAME_HELP
    "  -q, --quiet           do not print warnings\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 when the traces were read completely, 1 when one is corrupt, a corrupt\n"
    "gzip stream included (the report covers what was read before the error), or when the\n"
    "two traces cannot be aligned (the report is written all the same), 2 for a usage\n"
    "error, 3 when a file cannot be read or written, 4 out of memory. An output that is one\n"
    "of the traces is refused (2); the report is written aside and replaces an existing\n"
    "file only when the run ends with 0 or 1.\n";

typedef struct report_opts {
  const char *output;
  cli_report_opts_t content;
} report_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  report_opts_t *o = ctx;
  if (opt == 'o') {
    o->output = arg;
    return -1;
  }
  const int rc = cli_report_option(&o->content, opt, arg);
  if (rc != -2) return rc;
  const int frame = cli_frame_option(opt, arg);
  return frame == CLI_OPTION_OTHER ? -1 : frame;
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
      CLI_REPORT_LONGOPTS,
      CLI_FRAME_OPTIONS,
      {"quiet", no_argument, NULL, 'q'},
      {0},
  };
  report_opts_t opts = {.output = "report.html"};
  int first;
  const int rc = cli_parse(argc, argv, "o:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (first >= argc) return cli_usage_error("no trace given");
#ifdef __GLIBC__
  /* Blocks from 128 KiB on mapped apart, as glibc starts. Once such a block is freed, glibc
   * raises its threshold to that size (up to 32 MiB), and the report's arrays that follow
   * (records remapped, the coarser tree's map, the page's) come from the heap, whose freed
   * pages stay resident: peak RSS on gen_trace --mb 160 608 -> 596 MB, with fewer page
   * faults (156.5 k against 159.1 k for main's build). Only for inputs of 64 MiB and more:
   * below, the arrays are small and mapping them apart cost 1.5 % of CPU time on a 20 MB
   * rate-1 trace of sqlite3. */
  uint64_t input = 0;
  for (int i = first; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && st.st_size > 0) input += (uint64_t)st.st_size;
  }
  if (input >= (UINT64_C(64) << 20)) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
  cli_report_input_t in;
  int worst;
  if (!cli_report_load(&in, &opts.content, argv + first, argc - first, &worst)) return worst;

  cts_outfile_t file;
  const int oc = cli_output_open(&file, opts.output, (const char *const *)argv + first,
                                 (size_t)(argc - first));
  if (oc >= 0) {
    cli_report_input_free(&in);
    return oc;
  }
  static cts_out_t out;
  cts_out_init(&out, file.fd);
  const report_doc_t doc = cli_report_doc(&in, &opts.content);
  write_html(&out, &doc);
  const int code = cli_output_close(&file, cli_finish_output(&out, worst));
  cli_report_input_free(&in);
  return code;
}
