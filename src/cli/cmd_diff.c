/* SPDX-License-Identifier: MIT */
/* ctfscope diff: which allocation sites changed between two memtrace traces, or how two
 * runs of a task trace differ. Sites are matched by name (function, file, line), since
 * frame codes differ between runs. Totals are compared by default: a user comparing two runs
 * of one job expects the allocated bytes of a run that was merely slower to compare equal;
 * --per-second divides flows (bytes and counts allocated) by each trace's duration. Levels
 * (live at the peak, at the end) are compared as they are; all are estimates, normalised for
 * each trace's sample rate. With sampling, a change is marked significant when it exceeds
 * 1.96 standard deviations of the two Poisson sample counts. Task traces: cmd_tasks.h. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/diff.h"
#include "../analysis/live_table.h"
#include "cli.h"
#include "cmd_tasks.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope diff [OPTIONS] BEFORE AFTER\n"
    "\n"
    "Compare the allocation sites of two memtrace traces, largest change first. Sites are\n"
    "matched by function, file and line. Totals are compared: bytes and counts allocated,\n"
    "live bytes at the peak and at the end (--per-second divides allocated bytes and counts\n"
    "by each trace's duration; the header says which). Bytes are estimates (samples / sample\n"
    "rate x word size) of each trace. With sampling, '*' marks a change larger than the noise\n"
    "of the two sample counts (beyond 1.96 standard deviations, Poisson).\n"
    "\n"
    "Two mirage-profile task traces, GOOD and BAD runs of one program, are compared as\n"
    "mirage-trace-viewer users do by eye: tasks are matched by creation path (the labels,\n"
    "or types, from the root task down); the first divergence is the first point where the\n"
    "two runs' creates, resolves, reads and signals come in a different order, with its time\n"
    "in each run; then the creation paths whose tasks ended differently (resolved, failed,\n"
    "pending, should-resolve violated) or exist in one run only. With --metric, --by, --csv\n"
    "or --per-second, task labels (or types) are compared instead by a metric, as totals.\n"
    "\n"
    "Options:\n"
    "  -m, --metric WHAT   'alloc' (bytes allocated, default), 'count' (allocations),\n"
    "                      'peak' (live at the peak) or 'live' (live at the end); for task\n"
    "                      traces 'running' (default), 'count' (tasks) or 'alive'\n"
    "      --by WHAT       match sites by 'line' (default), 'function' or 'file'; tasks by\n"
    "                      'label' (default) or 'type'\n"
    "      --per-second    compare allocations (or task metrics) per second of each trace\n"
    "      --no-normalize  compare totals (the default)\n"
    "  -n, --limit N       show the first N sites (default 20, 0 = all)\n"
    "      --json          print JSON\n"
    "      --csv           print CSV\n" CLI_FRAME_HELP CLI_WIDTH_HELP
    "  -q, --quiet         do not print warnings\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 when both traces were read completely, 1 when one is corrupt, a corrupt\n"
    "gzip stream included (its figures cover what was read before the error), 2 for a usage\n"
    "error, 3 when one cannot be read, 4 out of memory.\n";

typedef struct diff_opts {
  cli_out_opts_t out;
  cts_diff_metric_t metric;
  cts_group_t by;
  const char *metric_arg, *by_arg; /* checked once the traces' kind is known */
  bool per_second;
} diff_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  diff_opts_t *o = ctx;
  const int common = cli_output_option(opt, arg, &o->out, true);
  if (common != CLI_OPTION_OTHER) return common;
  switch (opt) {
    case 'm':
      o->metric_arg = arg;
      break;
    case 'B':
      o->by_arg = arg;
      break;
    case 'N':
      o->per_second = false;
      break;
    case 'P':
      o->per_second = true;
      break;
  }
  return -1;
}

typedef struct side {
  cli_trace_t t;
  cts_rows_t rows;
  double duration;
} side_t;

static const char *const metric_names[] = {"allocated bytes", "allocations",
                                           "live bytes at the peak", "live bytes at the end"};
static const char *const metric_keys[] = {"alloc", "count", "peak", "live"};

static const char *fmt_value(double v, cts_diff_metric_t m, bool rate, char *buf, size_t size) {
  char tmp[32];
  const bool neg = v < 0;
  if (m == CTS_DIFF_COUNT)
    snprintf(tmp, sizeof tmp, "%.4g", fabs(v));
  else
    cli_human_bytes(fabs(v), tmp, sizeof tmp);
  snprintf(buf, size, "%s%s%s", neg ? "-" : "", tmp, rate ? "/s" : "");
  return buf;
}

/* A change as a reader of a diff expects it: "+402 MB" up, "-43.7 MB" down, "0 B" none. */
static const char *fmt_change(double v, cts_diff_metric_t m, bool rate, char *buf, size_t size) {
  char tmp[32]; /* a value is a dozen characters; the sign and tmp fit every caller's 48 */
  fmt_value(v, m, rate, tmp, sizeof tmp);
  snprintf(buf, size, "%s%s", v > 0 ? "+" : "", tmp);
  return buf;
}

static void print_json(cts_json_t *w, const side_t sides[2], const cts_diff_t *d,
                       const diff_opts_t *opts, bool rate) {
  cts_json_object(w);
  cts_json_kv_str(w, "metric", metric_keys[opts->metric]);
  cts_json_kv_bool(w, "per_second", rate);
  cts_json_key(w, "traces");
  cts_json_array(w);
  for (int s = 0; s < 2; s++) {
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cli_jw_trace_header(w, &sides[s].t);
    cts_json_ws(w, "\n   ");
    cts_json_kv_u64(w, "sites_total", sides[s].rows.n);
    cts_json_end(w);
  }
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "total");
  cts_json_object(w);
  cts_json_kv_fixed(w, "before", d->total_a, 3);
  cts_json_kv_fixed(w, "after", d->total_b, 3);
  cts_json_kv_fixed(w, "change", d->total_b - d->total_a, 3);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "sites_total", d->n);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "sites");
  cts_json_array(w);
  const size_t shown = cli_rows_shown(&opts->out, d->n);
  for (size_t i = 0; i < shown; i++) {
    const cts_diff_row_t *row = &d->rows[i];
    const cts_row_t *r = cts_diff_row_site(row);
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cli_jw_site(w, &sides[row->a ? 0 : 1].t, r);
    cts_json_kv_fixed(w, "before", row->va, 3);
    cts_json_kv_fixed(w, "after", row->vb, 3);
    cts_json_kv_fixed(w, "change", row->change, 3);
    cts_json_kv_fixed(w, "change_sd", row->sd, 3);
    cts_json_kv_bool(w, "significant", cts_diff_significant(row));
    cts_json_kv_bool(w, "in_before", row->a);
    cts_json_kv_bool(w, "in_after", row->b);
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

static void print_csv(cts_out_t *o, const cts_diff_t *d, const diff_opts_t *opts) {
  cts_out_str(o, "function,file,line,before,after,change,change_sd,significant\n");
  const size_t shown = cli_rows_shown(&opts->out, d->n);
  for (size_t i = 0; i < shown; i++) {
    const cts_diff_row_t *row = &d->rows[i];
    const cts_row_t *r = cts_diff_row_site(row);
    cli_csv_str(o, r->code ? r->function : "(no backtrace)");
    cts_out_char(o, ',');
    cli_csv_str(o, r->file);
    cts_out_printf(o, ",%u,%.3f,%.3f,%.3f,%.3f,%s\n", r->line, row->va, row->vb, row->change,
                   row->sd, cts_diff_significant(row) ? "yes" : "no");
  }
}

static void print_text(cts_out_t *o, const side_t sides[2], const cts_diff_t *d,
                       const diff_opts_t *opts, bool rate) {
  const cts_diff_metric_t m = opts->metric;
  const size_t shown = cli_rows_shown(&opts->out, d->n);
  char a[48], b[48], c[48];
  for (int s = 0; s < 2; s++) {
    const cli_trace_t *t = &sides[s].t;
    cli_out_heading(o, "%s  %s: %s, %.3f s, sample rate %s\n", s ? "After " : "Before",
                    cli_basename(t->path), t->info ? t->info->executable_name : "?",
                    sides[s].duration, cli_shortest_double(t->prof.sample_rate, a, sizeof a));
  }
  cli_out_heading(o, "Total   %s -> %s (%s)\n", fmt_value(d->total_a, m, rate, a, sizeof a),
                  fmt_value(d->total_b, m, rate, b, sizeof b),
                  fmt_change(d->total_b - d->total_a, m, rate, c, sizeof c));
  cli_out_heading(o,
                  "\n%s %zu of %zu sites by change in %s, %s (estimates; * = beyond the "
                  "sampling noise):\n",
                  shown < d->n ? "Top" : "All", shown, d->n, metric_names[m],
                  rate ? "per second of each trace's duration" : "totals");
  cts_out_str(o, "       before         after        change  change%  site\n");
  for (size_t i = 0; i < shown; i++) {
    const cts_diff_row_t *row = &d->rows[i];
    char pct[16];
    const char *site = cli_site_name(cts_diff_row_site(row));
    cts_diff_change_pct(row->a != NULL, row->b != NULL, row->va, row->vb, pct, sizeof pct);
    char before[192];
    snprintf(before, sizeof before, "%13s %13s %13s%c %7s  ",
             fmt_value(row->va, m, rate, a, sizeof a), fmt_value(row->vb, m, rate, b, sizeof b),
             fmt_change(row->change, m, rate, c, sizeof c),
             cts_diff_significant(row) && row->change != 0 ? '*' : ' ', pct);
    cli_out_fitted_row(o, before, site, "\n");
  }
}

int cmd_diff(int argc, char **argv) {
  static const struct option longopts[] = {
      {"metric", required_argument, NULL, 'm'},
      {"by", required_argument, NULL, 'B'},
      {"no-normalize", no_argument, NULL, 'N'},
      {"per-second", no_argument, NULL, 'P'},
      CLI_LONGOPT_LIMIT,
      CLI_LONGOPT_JSON,
      CLI_LONGOPT_CSV,
      CLI_LONGOPT_QUIET,
      CLI_FRAME_OPTIONS,
      CLI_WIDTH_OPTIONS,
      {0},
  };
  diff_opts_t opts = {.out.limit = 20};
  int first;
  const int rc = cli_parse(argc, argv, "m:n:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (argc - first != 2) return cli_usage_error("give two traces: BEFORE AFTER");
  const int checked = cli_output_check(&opts.out);
  if (checked >= 0) return checked;
  cli_trace_kind_t kinds[2];
  for (int s = 0; s < 2; s++) {
    const int kc = cli_trace_detect(argv[first + s], &kinds[s]);
    if (kc >= 0) return kc;
  }
  if (kinds[0] != kinds[1])
    return cli_usage_error("'%s' is a %s trace and '%s' a %s trace: compare traces of one kind",
                           argv[first], kinds[0] == CLI_TRACE_TASKS ? "task" : "memtrace",
                           argv[first + 1], kinds[1] == CLI_TRACE_TASKS ? "task" : "memtrace");
  if (kinds[0] == CLI_TRACE_TASKS) {
    if (!opts.metric_arg && !opts.by_arg && !opts.out.csv && !opts.per_second)
      return cli_tasks_compare(argv[first], argv[first + 1], &opts.out);
    cli_tasks_diff_opts_t to = {.out = opts.out, .per_second = opts.per_second};
    int rc2 = cli_tasks_parse_by(opts.by_arg, &to.by);
    if (rc2 < 0) rc2 = cli_tasks_parse_metric("--metric", opts.metric_arg, &to.metric);
    return rc2 >= 0 ? rc2 : cli_tasks_diff(argv[first], argv[first + 1], &to);
  }
  if (opts.by_arg) {
    const int rc2 = cli_parse_group(opts.by_arg, &opts.by);
    if (rc2 >= 0) return rc2;
  }
  if (opts.metric_arg) {
    static const cli_keyword_t metrics[] = {{"alloc", CTS_DIFF_ALLOC},
                                            {"count", CTS_DIFF_COUNT},
                                            {"peak", CTS_DIFF_PEAK},
                                            {"live", CTS_DIFF_LIVE},
                                            {0}};
    int v;
    const int rc2 = cli_parse_keyword("--metric", opts.metric_arg, metrics, NULL, &v);
    if (rc2 >= 0) return rc2;
    opts.metric = (cts_diff_metric_t)v;
  }
  const bool rate = cts_diff_is_flow(opts.metric) && opts.per_second;

  side_t sides[2];
  memset(sides, 0, sizeof sides);
  cts_diff_side_t ds[2];
  int code = CLI_EXIT_OK, loaded = 0;
  /* Every metric compared is allocated figures or live and peak samples summed by
   * allocation point, which the sites keep (live_by_site: a free touches no node record). */
  const cts_alloc_profile_config_t cfg = {
      .stacks = true, .leaf_only = true, .skip_histograms = true, .live_by_site = true};
  for (int s = 0; s < 2; s++) {
    const int c = cli_trace_load(&sides[s].t, argv[first + s], &cfg, opts.out.quiet);
    loaded++;
    if (c > code) code = c;
    if (c != CLI_EXIT_OK && c != CLI_EXIT_DATA) goto end;
    const cts_frames_t frames = cli_trace_frames(&sides[s].t);
    if (cts_rows_build(&sides[s].rows, &sides[s].t.prof.stacks, &frames, opts.by, CTS_SORT_BYTES, 0,
                       0)) {
      cli_error("out of memory");
      code = CLI_EXIT_INTERNAL;
      goto end;
    }
    /* The rows hold every figure the diff compares: the trace's live blocks (most of its
     * memory on a trace whose blocks survive) go before the next trace is read, so the
     * peak is that of one trace, not of both. */
    cts_live_fini(&sides[s].t.prof.live);
    const cts_alloc_profile_t *p = &sides[s].t.prof;
    sides[s].duration = cts_alloc_profile_duration_s(p);
    if (rate && sides[s].duration <= 0) {
      cli_error("%s has no duration: compare totals (without --per-second)", argv[first + s]);
      code = CLI_EXIT_DATA;
      goto end;
    }
    ds[s] = (cts_diff_side_t){.rows = &sides[s].rows,
                              .scale = cts_diff_scale(p, opts.metric, rate, sides[s].duration),
                              .sampled = p->sample_rate < 1};
  }
  cts_diff_t d;
  cts_out_t *out = cli_stdout_for(&opts.out);
  if (cts_diff_sites(&d, &ds[0], &ds[1], opts.metric)) {
    cli_error("out of memory");
    code = CLI_EXIT_INTERNAL;
  } else if (opts.out.json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_json(&w, sides, &d, &opts, rate);
  } else if (opts.out.csv) {
    print_csv(out, &d, &opts);
  } else {
    print_text(out, sides, &d, &opts, rate);
  }
  code = cli_finish_output(out, code);
  cts_diff_fini(&d);
end:
  for (int s = 0; s < loaded; s++) {
    cts_rows_fini(&sides[s].rows);
    cli_trace_free(&sides[s].t);
  }
  return code;
}
