/* SPDX-License-Identifier: MIT */
/* ctfscope diff: which allocation sites changed between two memtrace traces. Sites are
 * matched by name (function, file, line), since frame codes differ between runs. Flows
 * (bytes and counts allocated) are compared per second of each trace, levels (live at the
 * peak, at the end) as they are; both are estimates, normalised for each trace's sample
 * rate. With sampling, a change is marked significant when it exceeds 1.96 standard
 * deviations of the two Poisson sample counts. */
#define _GNU_SOURCE /* qsort_r */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/u64map.h"
#include "cli.h"
#include "cmd_tasks.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope diff [OPTIONS] BEFORE AFTER\n"
    "\n"
    "Compare the allocation sites of two memtrace traces, largest change first. Sites are\n"
    "matched by function, file and line. Allocated bytes and counts are compared per second\n"
    "of each trace's duration (--no-normalize compares totals); live bytes at the peak and\n"
    "at the end are compared as they are. Bytes are estimates (samples / sample rate x word\n"
    "size) of each trace. With sampling, '*' marks a change larger than the noise of the\n"
    "two sample counts (beyond 1.96 standard deviations, Poisson).\n"
    "\n"
    "Two mirage-profile task traces are compared by task label (or type): the number of\n"
    "tasks, their running time or their time alive, per second of each trace's span.\n"
    "\n"
    "Options:\n"
    "  -m, --metric WHAT   'alloc' (bytes allocated, default), 'count' (allocations),\n"
    "                      'peak' (live at the peak) or 'live' (live at the end); for task\n"
    "                      traces 'running' (default), 'count' (tasks) or 'alive'\n"
    "      --by WHAT       match sites by 'line' (default), 'function' or 'file'; tasks by\n"
    "                      'label' (default) or 'type'\n"
    "      --no-normalize  compare totals, not rates per second\n"
    "  -n, --limit N       show the first N sites (default 20, 0 = all)\n"
    "      --json          print JSON\n"
    "      --csv           print CSV\n" CLI_FRAME_HELP
    "  -q, --quiet         do not print warnings\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 when both traces were read completely, 1 when one is corrupt, a corrupt\n"
    "gzip stream included (its figures cover what was read before the error), 2 for a usage\n"
    "error, 3 when one cannot be read, 4 out of memory.\n";

typedef enum { M_ALLOC, M_COUNT, M_PEAK, M_LIVE } metric_t;

typedef struct diff_opts {
  metric_t metric;
  cts_group_t by;
  const char *metric_arg, *by_arg; /* checked once the traces' kind is known */
  bool no_normalize, json, csv, quiet;
  long limit;
} diff_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  diff_opts_t *o = ctx;
  const int common = cli_output_option(opt, arg, &o->json, &o->csv, &o->quiet, &o->limit);
  if (common != CLI_OPTION_OTHER) return common;
  switch (opt) {
    case 'm':
      o->metric_arg = arg;
      break;
    case 'B':
      o->by_arg = arg;
      break;
    case 'N':
      o->no_normalize = true;
      break;
  }
  return -1;
}

typedef struct side {
  cli_trace_t t;
  cts_rows_t rows;
  double scale; /* metric units per sample (or per allocation for counts), per second if flows */
  double duration;
} side_t;

typedef struct diff_row {
  const cts_row_t *a, *b; /* either may be NULL */
  double va, vb, change, sd;
} diff_row_t;

static bool is_flow(metric_t m) {
  return m == M_ALLOC || m == M_COUNT;
}

/* The metric's raw count for a row: samples, or estimated allocations. */
static double raw(const cts_row_t *r, metric_t m) {
  if (!r) return 0;
  switch (m) {
    case M_COUNT:
      return r->st.est_allocs;
    case M_PEAK:
      return (double)r->st.peak_samples;
    case M_LIVE:
      return (double)r->st.live_samples;
    case M_ALLOC:
      break;
  }
  return (double)r->st.samples;
}

/* Sample count behind the metric (for the noise estimate). */
static double noise_samples(const cts_row_t *r, metric_t m) {
  if (!r) return 0;
  return m == M_PEAK    ? (double)r->st.peak_samples
         : m == M_LIVE  ? (double)r->st.live_samples
         : m == M_COUNT ? (double)r->st.allocs
                        : (double)r->st.samples;
}

static int cmp_change(const void *x, const void *y) {
  const diff_row_t *a = x, *b = y;
  const double ca = fabs(a->change), cb = fabs(b->change);
  if (ca != cb) return ca > cb ? -1 : 1;
  const char *ka = a->a ? a->a->key : a->b->key, *kb = b->a ? b->a->key : b->b->key;
  return strcmp(ka, kb);
}

static const char *fmt_value(double v, metric_t m, bool rate, char *buf, size_t size) {
  char tmp[32];
  const bool neg = v < 0;
  if (m == M_COUNT)
    snprintf(tmp, sizeof tmp, "%.4g", fabs(v));
  else
    cli_human_bytes(fabs(v), tmp, sizeof tmp);
  snprintf(buf, size, "%s%s%s", neg ? "-" : "", tmp, rate ? "/s" : "");
  return buf;
}

int cmd_diff(int argc, char **argv) {
  static const struct option longopts[] = {
      {"metric", required_argument, NULL, 'm'},
      {"by", required_argument, NULL, 'B'},
      {"no-normalize", no_argument, NULL, 'N'},
      {"limit", required_argument, NULL, 'n'},
      {"json", no_argument, NULL, 'J'},
      {"csv", no_argument, NULL, 'C'},
      {"quiet", no_argument, NULL, 'q'},
      CLI_FRAME_OPTIONS,
      {0},
  };
  diff_opts_t opts = {.limit = 20};
  int first;
  const int rc = cli_parse(argc, argv, "m:n:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (argc - first != 2) return cli_usage_error("give two traces: BEFORE AFTER");
  const int checked = cli_output_check(opts.json, opts.csv);
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
    cli_tasks_diff_opts_t to = {.limit = opts.limit,
                                .no_normalize = opts.no_normalize,
                                .json = opts.json,
                                .csv = opts.csv,
                                .quiet = opts.quiet};
    int rc2 = cli_tasks_parse_by(opts.by_arg, &to.by);
    if (rc2 < 0) rc2 = cli_tasks_parse_metric("--metric", opts.metric_arg, &to.metric);
    return rc2 >= 0 ? rc2 : cli_tasks_diff(argv[first], argv[first + 1], &to);
  }
  if (opts.by_arg) {
    const int rc2 = cli_parse_group(opts.by_arg, &opts.by);
    if (rc2 >= 0) return rc2;
  }
  if (opts.metric_arg) {
    const char *arg = opts.metric_arg;
    if (strcmp(arg, "alloc") == 0)
      opts.metric = M_ALLOC;
    else if (strcmp(arg, "count") == 0)
      opts.metric = M_COUNT;
    else if (strcmp(arg, "peak") == 0)
      opts.metric = M_PEAK;
    else if (strcmp(arg, "live") == 0)
      opts.metric = M_LIVE;
    else
      return cli_usage_error("--metric takes alloc, count, peak or live, not '%s'", arg);
  }
  const bool rate = is_flow(opts.metric) && !opts.no_normalize;

  side_t sides[2];
  memset(sides, 0, sizeof sides);
  int code = CLI_EXIT_OK, loaded = 0;
  const cts_mtprof_config_t cfg = {.stacks = true, .leaf_only = true, .skip_histograms = true};
  for (int s = 0; s < 2; s++) {
    const int c = cli_trace_load(&sides[s].t, argv[first + s], &cfg, opts.quiet);
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
    const cts_mtprof_t *p = &sides[s].t.prof;
    sides[s].duration = cts_mtprof_duration_s(p);
    sides[s].scale = opts.metric == M_COUNT ? 1.0 : cts_mtprof_bytes_per_sample(p);
    if (rate) {
      if (sides[s].duration <= 0) {
        cli_error("%s has no duration: use --no-normalize", argv[first + s]);
        code = CLI_EXIT_DATA;
        goto end;
      }
      sides[s].scale /= sides[s].duration;
    }
  }
  {
    /* Match B's rows to A's by key. */
    cts_u64map_t index;
    cts_u64map_init(&index);
    const size_t na = sides[0].rows.n, nb = sides[1].rows.n;
    diff_row_t *rows = calloc(na + nb + 1, sizeof *rows);
    bool *matched = calloc(nb + 1, sizeof *matched);
    bool nomem = !rows || !matched;
    for (size_t i = 0; i < nb && !nomem; i++) {
      bool added;
      uint64_t h = cts_u64map_str_key(sides[1].rows.rows[i].key);
      while (cts_u64map_find(&index, h)) h++;
      if (!cts_u64map_insert(&index, h, i, &added)) nomem = true;
    }
    size_t n = 0;
    for (size_t i = 0; i < na && !nomem; i++) {
      const cts_row_t *a = &sides[0].rows.rows[i];
      const cts_row_t *b = NULL;
      for (uint64_t h = cts_u64map_str_key(a->key);; h++) {
        const uint64_t *v = cts_u64map_find(&index, h);
        if (!v) break;
        if (strcmp(sides[1].rows.rows[*v].key, a->key) == 0) {
          b = &sides[1].rows.rows[*v];
          matched[*v] = true;
          break;
        }
      }
      rows[n++] = (diff_row_t){.a = a, .b = b};
    }
    for (size_t i = 0; i < nb && !nomem; i++)
      if (!matched[i]) rows[n++] = (diff_row_t){.b = &sides[1].rows.rows[i]};
    double total_a = 0, total_b = 0;
    for (size_t i = 0; i < n; i++) {
      diff_row_t *d = &rows[i];
      d->va = raw(d->a, opts.metric) * sides[0].scale;
      d->vb = raw(d->b, opts.metric) * sides[1].scale;
      d->change = d->vb - d->va;
      /* Poisson noise of each side's sample count, scaled like the values. */
      const double ka = opts.metric == M_COUNT && d->a && d->a->st.allocs
                            ? d->va / (double)d->a->st.allocs
                            : sides[0].scale;
      const double kb = opts.metric == M_COUNT && d->b && d->b->st.allocs
                            ? d->vb / (double)d->b->st.allocs
                            : sides[1].scale;
      d->sd =
          sqrt((sides[0].t.prof.sample_rate < 1 ? noise_samples(d->a, opts.metric) * ka * ka : 0) +
               (sides[1].t.prof.sample_rate < 1 ? noise_samples(d->b, opts.metric) * kb * kb : 0));
      total_a += d->va;
      total_b += d->vb;
    }
    if (n) qsort(rows, n, sizeof *rows, cmp_change);
    static cts_out_t out;
    cts_out_init(&out, STDOUT_FILENO);
    /* Names from the traces: escaped for people, and in CSV on a terminal. */
    out.term = !opts.json && (!opts.csv || isatty(STDOUT_FILENO));
    static const char *const metric_names[] = {"allocated bytes", "allocations",
                                               "live bytes at the peak", "live bytes at the end"};
    static const char *const metric_keys[] = {"alloc", "count", "peak", "live"};
    const size_t shown = opts.limit && (size_t)opts.limit < n ? (size_t)opts.limit : n;
    if (!nomem && opts.json) {
      cts_out_printf(&out, "{\"metric\": \"%s\", \"per_second\": %s, \"traces\": [",
                     metric_keys[opts.metric], rate ? "true" : "false");
      for (int s = 0; s < 2; s++) {
        cts_out_str(&out, s ? ",\n  {" : "\n  {");
        cli_json_trace_header(&out, &sides[s].t);
        cts_out_str(&out, "   \"sites_total\": ");
        cts_out_u64(&out, sides[s].rows.n);
        cts_out_str(&out, "}");
      }
      cts_out_printf(&out,
                     "],\n \"total\": {\"before\": %.3f, \"after\": %.3f, \"change\": %.3f},"
                     "\n \"sites_total\": %zu,\n \"sites\": [",
                     total_a, total_b, total_b - total_a, n);
      for (size_t i = 0; i < shown; i++) {
        const diff_row_t *d = &rows[i];
        const cts_row_t *r = d->a ? d->a : d->b;
        cts_out_str(&out, i ? ",\n  {\"function\": " : "\n  {\"function\": ");
        cts_out_json_str(&out, r->code ? r->function : "(no backtrace)");
        cli_json_mangled(&out, &sides[d->a ? 0 : 1].t, r->function);
        cts_out_str(&out, ", \"file\": ");
        cts_out_json_str(&out, r->file);
        cts_out_printf(&out,
                       ", \"line\": %u, \"before\": %.3f, \"after\": %.3f, \"change\": %.3f, "
                       "\"change_sd\": %.3f, \"significant\": %s, \"in_before\": %s, "
                       "\"in_after\": %s}",
                       r->line, d->va, d->vb, d->change, d->sd,
                       d->sd == 0 || fabs(d->change) > 1.96 * d->sd ? "true" : "false",
                       d->a ? "true" : "false", d->b ? "true" : "false");
      }
      cts_out_str(&out, "\n ]\n}\n");
    } else if (!nomem && opts.csv) {
      cts_out_str(&out, "function,file,line,before,after,change,change_sd,significant\n");
      for (size_t i = 0; i < shown; i++) {
        const diff_row_t *d = &rows[i];
        const cts_row_t *r = d->a ? d->a : d->b;
        cli_csv_str(&out, r->code ? r->function : "(no backtrace)");
        cts_out_char(&out, ',');
        cli_csv_str(&out, r->file);
        cts_out_printf(&out, ",%u,%.3f,%.3f,%.3f,%.3f,%s\n", r->line, d->va, d->vb, d->change,
                       d->sd, d->sd == 0 || fabs(d->change) > 1.96 * d->sd ? "yes" : "no");
      }
    } else if (!nomem) {
      char a[48], b[48], c[48];
      for (int s = 0; s < 2; s++) {
        const cli_trace_t *t = &sides[s].t;
        cts_out_printf(&out, "%s  %s: %s, %.3f s, sample rate %s\n", s ? "After " : "Before",
                       cli_basename(t->path), t->info ? t->info->executable_name : "?",
                       sides[s].duration, cli_shortest_double(t->prof.sample_rate, a, sizeof a));
      }
      cts_out_printf(&out, "Total   %s -> %s (%s)\n",
                     fmt_value(total_a, opts.metric, rate, a, sizeof a),
                     fmt_value(total_b, opts.metric, rate, b, sizeof b),
                     fmt_value(total_b - total_a, opts.metric, rate, c, sizeof c));
      cts_out_printf(&out,
                     "\n%s %zu of %zu sites by change in %s%s (estimates; * = beyond the "
                     "sampling noise):\n",
                     shown < n ? "Top" : "All", shown, n, metric_names[opts.metric],
                     rate ? " per second" : "");
      cts_out_str(&out, "       before         after        change  change%  site\n");
      for (size_t i = 0; i < shown; i++) {
        const diff_row_t *d = &rows[i];
        char site[512], pct[16];
        cts_row_name(d->a ? d->a : d->b, site, sizeof site);
        if (!d->a || d->va == 0)
          snprintf(pct, sizeof pct, "new");
        else if (!d->b)
          snprintf(pct, sizeof pct, "gone");
        else
          snprintf(pct, sizeof pct, "%+.0f%%", 100.0 * d->change / d->va);
        const bool significant = d->sd == 0 || fabs(d->change) > 1.96 * d->sd;
        cts_out_printf(&out, "%13s %13s %13s%c %7s  %s\n",
                       fmt_value(d->va, opts.metric, rate, a, sizeof a),
                       fmt_value(d->vb, opts.metric, rate, b, sizeof b),
                       fmt_value(d->change, opts.metric, rate, c, sizeof c),
                       significant && d->change != 0 ? '*' : ' ', pct, site);
      }
    }
    if (nomem) {
      cli_error("out of memory");
      code = CLI_EXIT_INTERNAL;
    }
    code = cli_finish_output(&out, code);
    free(rows);
    free(matched);
    cts_u64map_fini(&index);
  }
end:
  for (int s = 0; s < loaded; s++) {
    cts_rows_fini(&sides[s].rows);
    cli_trace_free(&sides[s].t);
  }
  return code;
}
