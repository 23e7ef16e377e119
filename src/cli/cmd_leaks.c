/* SPDX-License-Identifier: MIT */
/* ctfscope leaks: the blocks still live at the end of a trace, grouped by allocation site,
 * with how each site's live bytes evolved (at 1/4, 1/2, 3/4 of the trace and at its end) and
 * the backtrace that holds most of them. Growth that never falls back is the signature of a
 * leak; a site whose live bytes come and go is a cache or a working set. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/leaks_load.h"
#include "cli.h"
#include "cmd_tasks.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope leaks [OPTIONS] TRACE\n"
    "\n"
    "List the allocation sites whose blocks are still live at the end of a memtrace trace,\n"
    "largest first, with their live bytes at 25 %, 50 % and 75 % of the trace's duration and\n"
    "at its end (to within 1/32 of the duration), a verdict on their growth and the backtrace\n"
    "holding most of their live bytes. Bytes are estimates (samples / sample rate x word\n"
    "size); figures from few samples show a 95% confidence interval.\n"
    "\n"
    "Growth verdicts: 'grows' when the live bytes never fall from one quarter to the next and\n"
    "end above where they were at 25 %; 'flat' when they do not change after 25 %; 'varies'\n"
    "otherwise.\n"
    "\n"
    "On a mirage-profile task trace, list the tasks that never resolved (nor were merged\n"
    "into another with 'becomes') by the end of the trace: should-resolve ones first, grouped\n"
    "by label, then one by one, oldest first, with their type, age and creator.\n"
    "\n"
    "Options:\n"
    "      --by WHAT     group by 'line' (default), 'function' or 'file'\n"
    "  -n, --limit N     show the first N sites (default 10, 0 = all)\n"
    "      --depth N     frames of backtrace shown per site (default 12, 0 = none)\n"
    "      --json        print JSON\n"
    "      --csv         print CSV (no backtraces)\n"
    "      --passes N    read the trace once (1) or twice (2: backtraces skipped the first\n"
    "                    time, to keep only those of blocks live at the end); by default\n"
    "                    twice when it is a regular uncompressed file whose blocks mostly\n"
    "                    die young. The output is the same\n" CLI_FRAME_HELP CLI_WIDTH_HELP
    "  -q, --quiet       do not print warnings\n"
    "  -h, --help        show this help\n"
    "\n"
    "Exit status: 0 when the trace was read completely, 1 when it is corrupt, a corrupt\n"
    "gzip stream included (the figures cover what was read before the error), 2 for a usage\n"
    "error, 3 when it cannot be read, 4 out of memory.\n";

typedef struct leaks_opts {
  cli_out_opts_t out;
  cts_group_t by;
  long depth;
  cts_leaks_passes_t passes;
} leaks_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  leaks_opts_t *o = ctx;
  const int common = cli_output_option(opt, arg, &o->out, true);
  if (common != CLI_OPTION_OTHER) return common;
  switch (opt) {
    case 'B': {
      const int rc = cli_parse_group(arg, &o->by);
      if (rc >= 0) return rc;
      break;
    }
    case 'D':
      if (!cli_parse_long(arg, 0, 100000, &o->depth))
        return cli_usage_error("--depth takes a number from 0 to 100000, not '%s'", arg);
      break;
    case 'P':
      if (strcmp(arg, "1") == 0)
        o->passes = CTS_LEAKS_PASSES_ONE;
      else if (strcmp(arg, "2") == 0)
        o->passes = CTS_LEAKS_PASSES_TWO;
      else
        return cli_usage_error("--passes takes 1 or 2, not '%s'", arg);
      break;
  }
  return -1;
}

typedef struct leaks_call {
  cli_trace_t *t;
  const char *path;
  const cts_alloc_profile_config_t *cfg;
  cts_leaks_passes_t passes;
  cts_leaks_load_stats_t *st;
} leaks_call_t;

static int run_load(void *ctx, const cts_load_opts_t *opts) {
  const leaks_call_t *c = ctx;
  cts_load_opts_t o = *opts;
  o.fold = &cli_fold_settings; /* names as people read them (the frame options) */
  return cts_leaks_trace_load(c->t, c->path, c->cfg, &o, c->passes, c->st);
}

static const char *growth_verdict(const uint64_t q[4]) {
  if (q[1] == q[0] && q[2] == q[0] && q[3] == q[0]) return "flat";
  if (q[1] >= q[0] && q[2] >= q[1] && q[3] >= q[2] && q[3] > q[0]) return "grows";
  return "varies";
}

/* Live bytes per second between 25 % and the end of the trace. */
static double growth_rate(const cts_alloc_profile_t *p, const uint64_t q[4]) {
  const double span = cts_alloc_profile_duration_s(p) * 0.75;
  if (span <= 0) return 0;
  return ((double)q[3] - (double)q[0]) * cts_alloc_profile_bytes_per_sample(p) / span;
}

static void print_backtrace_text(cts_out_t *o, const cts_stacks_t *s, const cts_frames_t *f,
                                 uint32_t node, long depth) {
  long shown = 0;
  for (uint32_t n = node; n != 0; n = s->nodes[n].parent) {
    if (shown == depth) {
      cts_out_printf(o, "          ... %u more frames\n", cts_stacks_depth(s, n));
      break;
    }
    cli_out_fitted_row(o, shown ? "          called from " : "          allocated in ",
                       cli_frame_name(f, s->nodes[n].code), "\n");
    shown++;
  }
}

static void print_text(cts_out_t *o, cli_trace_t *t, const cts_rows_t *rows, size_t nlive,
                       const leaks_opts_t *opts) {
  const cts_alloc_profile_t *p = &t->prof;
  const cts_frames_t frames = cli_trace_frames(t);
  char a[96], b[96], c[32], d[32], e[32];
  cli_text_trace_header(o, t);
  const double peak_at = p->stacks.peak_time_us > p->start_time_us
                             ? (double)(p->stacks.peak_time_us - p->start_time_us) * 1e-6
                             : 0.0;
  uint64_t live_allocs = 0;
  double live_est = 0;
  for (size_t i = 0; i < nlive; i++)
    live_allocs += rows->rows[i].st.live_allocs, live_est += rows->rows[i].st.live_est_allocs;
  cts_out_printf(o, "Live     %s at the end in %s sampled blocks (~%s blocks) from %zu sites\n",
                 cli_est_bytes(p, p->stacks.live_samples, true, a, sizeof a),
                 cli_grouped(live_allocs, c, sizeof c),
                 cli_grouped(cts_est_round(live_est), d, sizeof d), nlive);
  cts_out_printf(o, "Peak     %s at +%.3f s\n",
                 cli_est_bytes(p, p->stacks.peak_samples, true, b, sizeof b), peak_at);
  const size_t shown = cli_rows_shown(&opts->out, nlive);
  if (!nlive) {
    cts_out_str(o, "\nNothing is live at the end of the trace.\n");
    return;
  }
  cli_out_heading(o, "\n%s %zu of %zu sites with live blocks at the end (grouped by %s):\n",
                  shown < nlive ? "Top" : "All", shown, nlive,
                  opts->by == CTS_GROUP_LINE       ? "function, file and line"
                  : opts->by == CTS_GROUP_FUNCTION ? "function"
                                                   : "file");
  cts_out_str(o, "  live at end    blocks   at 25%   at 50%   at 75%  growth    growth/s  site\n");
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows->rows[i];
    char q[3][32];
    for (unsigned k = 0; k < 3; k++) cli_est_bytes(p, r->live_at[k], false, q[k], sizeof q[k]);
    const char *site = cli_site_name(r);
    const double rate = growth_rate(p, r->live_at);
    char before[192], after[96] = "";
    snprintf(before, sizeof before, "%13s  %8s  %7s  %7s  %7s  %-6s  %8s/s  ",
             cli_est_bytes(p, r->st.live_samples, false, c, sizeof c),
             cli_grouped(r->st.live_allocs, d, sizeof d), q[0], q[1], q[2],
             growth_verdict(r->live_at),
             rate >= 0 ? cli_human_bytes(rate, e, sizeof e)
                       : (snprintf(e, sizeof e, "-%s", cli_human_bytes(-rate, a, sizeof a)), e));
    if (cli_show_ci(p, r->st.live_samples)) {
      cli_est_bytes(p, r->st.live_samples, true, a, sizeof a);
      const char *paren = strchr(a, '(');
      if (paren) snprintf(after, sizeof after, "  [%.*s]", (int)strlen(paren) - 2, paren + 1);
    }
    cli_out_fitted_row(o, before, site, after);
    cts_out_char(o, '\n');
    if (opts->depth > 0 && r->first_node != UINT32_MAX && r->first_node != 0)
      print_backtrace_text(o, &p->stacks, &frames, r->first_node, opts->depth);
  }
}

static void print_json(cts_json_t *w, cli_trace_t *t, const cts_rows_t *rows, size_t nlive,
                       const leaks_opts_t *opts) {
  const cts_alloc_profile_t *p = &t->prof;
  const cts_frames_t frames = cli_trace_frames(t);
  const size_t shown = cli_rows_shown(&opts->out, nlive);
  cts_json_object(w);
  cli_jw_trace_header(w, t);
  cts_json_key(w, "live_end");
  cts_json_object(w);
  cli_jw_estimate(w, p, "live", p->stacks.live_samples);
  cts_json_end(w);
  cts_json_key(w, "peak");
  cts_json_object(w);
  cli_jw_estimate(w, p, "live", p->stacks.peak_samples);
  cts_json_kv_fixed(w, "time_s",
                    p->stacks.peak_time_us > p->start_time_us
                        ? (double)(p->stacks.peak_time_us - p->start_time_us) * 1e-6
                        : 0.0,
                    6);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "sites_total", nlive);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "sites");
  cts_json_array(w);
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows->rows[i];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cli_jw_site(w, t, r);
    cli_jw_estimate(w, p, "live_end", r->st.live_samples);
    cts_json_kv_u64(w, "live_end_allocs_sampled", r->st.live_allocs);
    cts_json_kv_fixed(w, "live_end_allocs_est", r->st.live_est_allocs, 1);
    cts_json_key(w, "live_bytes_at_quarters");
    cts_json_array(w);
    for (unsigned q = 0; q < 4; q++) cts_json_fixed(w, (double)r->live_at[q] * bps, 0);
    cts_json_end(w);
    cts_json_kv_str(w, "growth", growth_verdict(r->live_at));
    cts_json_kv_fixed(w, "growth_bytes_per_s", growth_rate(p, r->live_at), 1);
    cli_jw_estimate(w, p, "alloc", r->st.samples);
    cts_json_key(w, "backtrace");
    cts_json_array(w);
    long shown_frames = 0;
    for (uint32_t n = r->first_node; n != 0 && n != UINT32_MAX && shown_frames < opts->depth;
         n = p->stacks.nodes[n].parent, shown_frames++) {
      cts_json_str(w, cli_frame_name(&frames, p->stacks.nodes[n].code));
    }
    cts_json_end(w);
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

static void print_csv(cts_out_t *o, const cli_trace_t *t, const cts_rows_t *rows, size_t nlive,
                      const leaks_opts_t *opts) {
  const cts_alloc_profile_t *p = &t->prof;
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  const size_t shown = cli_rows_shown(&opts->out, nlive);
  cts_out_str(o,
              "function,file,line,live_end_samples,live_end_bytes,live_end_allocs_sampled,"
              "live_bytes_25,live_bytes_50,live_bytes_75,live_bytes_100,growth,"
              "growth_bytes_per_s\n");
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows->rows[i];
    cli_csv_str(o, r->code ? r->function : "(no backtrace)");
    cts_out_char(o, ',');
    cli_csv_str(o, r->file);
    cts_out_printf(o, ",%u,%llu,%.0f,%llu,%.0f,%.0f,%.0f,%.0f,%s,%.1f\n", r->line,
                   (unsigned long long)r->st.live_samples, (double)r->st.live_samples * bps,
                   (unsigned long long)r->st.live_allocs, (double)r->live_at[0] * bps,
                   (double)r->live_at[1] * bps, (double)r->live_at[2] * bps,
                   (double)r->live_at[3] * bps, growth_verdict(r->live_at),
                   growth_rate(p, r->live_at));
  }
}

int cmd_leaks(int argc, char **argv) {
  static const struct option longopts[] = {
      {"by", required_argument, NULL, 'B'},
      CLI_LONGOPT_LIMIT,
      {"depth", required_argument, NULL, 'D'},
      {"passes", required_argument, NULL, 'P'},
      CLI_LONGOPT_JSON,
      CLI_LONGOPT_CSV,
      CLI_LONGOPT_QUIET,
      CLI_FRAME_OPTIONS,
      CLI_WIDTH_OPTIONS,
      {0},
  };
  leaks_opts_t opts = {.out.limit = 10, .depth = 12};
  int first;
  const int rc = cli_parse(argc, argv, "n:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  cli_trace_kind_t kind;
  const int kc = cli_one_trace(argc, argv, first, &opts.out, "one trace at a time", NULL, &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS) return cli_tasks_leaks(argv[first], &opts.out);

  /* No node's figures at the heap's peak: leaks prints the heap's own peak only, and sorts
   * and picks backtraces by live figures. On a heap that keeps growing (gen_trace --shape
   * survivors) every allocation is a new peak, and each node's record saved its figures at
   * each of them. */
  const cts_alloc_profile_config_t cfg = {.stacks = true,
                                          .history = true,
                                          .skip_histograms = true,
                                          .no_node_peaks = true,
                                          .live_at_end = true};
  cli_trace_t t;
  cts_leaks_load_stats_t st;
  leaks_call_t call = {&t, argv[first], &cfg, opts.passes, &st};
  const int err = cli_load_run(argv[first], opts.out.quiet, run_load, &call);
  int code = cli_load_exit(err, t.kept, t.input_error, false);
  if (code != CLI_EXIT_OK && code != CLI_EXIT_DATA) {
    cli_trace_free(&t);
    return code;
  }
  cts_rows_t rows;
  const cts_frames_t frames = cli_trace_frames(&t);
  if (cts_rows_build(&rows, &t.prof.stacks, &frames, opts.by, CTS_SORT_LIVE, t.prof.start_time_us,
                     t.prof.have_events ? t.prof.last_event_us : t.prof.start_time_us)) {
    cli_error("out of memory");
    cli_trace_free(&t);
    return CLI_EXIT_INTERNAL;
  }
  cts_rows_sort(&rows, CTS_SORT_LIVE);
  size_t nlive = 0;
  while (nlive < rows.n && rows.rows[nlive].st.live_samples) nlive++;
  /* Backtraces are shown in text and JSON only. */
  const long depth = opts.out.csv ? 0 : opts.depth;
  cli_progress_t progress;
  cli_progress_init(&progress, "reading again", argv[first]);
  const int tie_err = cts_leaks_settle_ties(&t, &rows, cli_rows_shown(&opts.out, nlive), opts.by,
                                            depth, &st, cli_progress_cb, &progress);
  cli_progress_done(&progress);
  if (tie_err == -ENOMEM) {
    cli_error("out of memory");
    cts_rows_fini(&rows);
    cli_trace_free(&t);
    return CLI_EXIT_INTERNAL;
  }
  /* The file changed since it was read: every figure stands, only the choice between
   * equally heavy stacks of a row may differ from what one pass shows. */
  if (tie_err && !opts.out.quiet)
    cli_warn("%s: cannot read it again to choose between equally heavy stacks: %s", argv[first],
             cts_os_strerror(tie_err));
  cts_out_t *out = cli_stdout_for(&opts.out);
  if (opts.out.json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_json(&w, &t, &rows, nlive, &opts);
  } else if (opts.out.csv) {
    print_csv(out, &t, &rows, nlive, &opts);
  } else {
    print_text(out, &t, &rows, nlive, &opts);
  }
  code = cli_finish_output(out, code);
  cts_rows_fini(&rows);
  cli_trace_free(&t);
  return code;
}
