/* SPDX-License-Identifier: MIT */
/* ctfscope stats: how a program allocates, from a memtrace trace. The allocation,
 * promotion and collection rates of memtrace's identify, then histograms with percentiles
 * of block sizes and of lifetimes (in time, and in bytes allocated meanwhile), each counted
 * in blocks and in estimated bytes. Bar charts on a terminal, an SVG image with --svg. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_tasks.h"
#include "hist_views.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope stats [OPTIONS] TRACE\n"
    "\n"
    "Show how a memtrace trace's program allocates: allocation, promotion and collection\n"
    "rates (as memtrace_identify reports them), and histograms with percentiles of block\n"
    "sizes and of block lifetimes, both in time and in bytes allocated meanwhile. Histograms\n"
    "count sampled blocks and estimated bytes (samples / sample rate x word size).\n"
    "Lifetimes cover the blocks collected before the end of the trace. Percentiles are\n"
    "exact below 32 units and within 1/16 (6.25 %) above (the lower edge of their bucket).\n"
    "\n"
    "On a mirage-profile task trace: tasks by type (resolved, failed, merged, pending), the\n"
    "time from creation to resolution with percentiles (by tasks and by time) and a\n"
    "histogram, time running vs alive per type, idle and gc time, and each counter's\n"
    "updates, minimum, maximum and last value. --csv then prints the duration histograms.\n"
    "\n"
    "Options:\n"
    "      --bars        draw bar charts (default: when standard output is a terminal)\n"
    "      --no-bars     do not draw bar charts\n"
    "      --svg FILE    also write the histograms as an SVG image to FILE\n"
    "      --png FILE    also write them as a PNG image to FILE (the SVG image, rendered)\n"
    "      --json        print JSON\n"
    "      --csv         print the histograms as CSV\n"
    "  -q, --quiet       do not print warnings\n" CLI_THREADS_HELP
    "  -h, --help        show this help\n"
    "\n"
    "Exit status: 0 when the trace was read completely, 1 when it is corrupt, backtraces and\n"
    "a corrupt gzip stream included (the figures cover what was read before the error), 2\n"
    "for a usage error, 3 when a file cannot be read or written, 4 out of memory. An image\n"
    "that is the trace itself is refused (2); images are written aside and replace existing\n"
    "files only when the run ends with 0 or 1.\n";

typedef struct stats_opts {
  int bars; /* -1 = when a terminal */
  const char *svg, *png;
  cli_out_opts_t out;
} stats_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  stats_opts_t *o = ctx;
  const int common = cli_output_option(opt, arg, &o->out, false);
  if (common != CLI_OPTION_OTHER) return common;
  switch (opt) {
    case 'b':
      o->bars = 1;
      break;
    case 'N':
      o->bars = 0;
      break;
    case 'S':
      o->svg = arg;
      break;
    case 'P':
      o->png = arg;
      break;
  }
  return -1;
}

/* A histogram as people see it: power-of-two bins, in display units. */
typedef enum { UNIT_BYTES, UNIT_US } unit_t;

typedef struct view {
  const char *name, *title, *key;
  const cts_hist_t *h;
  double scale; /* display units per histogram unit */
  unit_t unit;
} view_t;

static const char *human_us(double us, char *buf, size_t size) {
  if (us < 1000)
    snprintf(buf, size, "%.0f us", us);
  else if (us < 1e6)
    snprintf(buf, size, "%.3g ms", us / 1e3);
  else if (us < 60e6)
    snprintf(buf, size, "%.3g s", us / 1e6);
  else
    snprintf(buf, size, "%.3g min", us / 60e6);
  return buf;
}

static const char *human_unit(double v, unit_t u, char *buf, size_t size) {
  return u == UNIT_US ? human_us(v, buf, size) : cli_human_bytes(v, buf, size);
}

/* human_unit for cli_print_quantile_lines: ctx is the unit_t. */
static const char *format_in_unit(double v, const void *ctx, char *buf, size_t size) {
  return human_unit(v, *(const unit_t *)ctx, buf, size);
}

static void print_view_text(cts_out_t *o, const cts_alloc_profile_t *p, const view_t *v,
                            bool bars) {
  char a[32], b[32], c[32], d[32];
  cts_out_printf(o, "\n%s\n", v->title);
  if (!v->h->total_blocks) {
    cts_out_str(o, "  (no blocks)\n");
    return;
  }
  cli_print_quantile_lines(o, v->h, "by blocks", "by bytes", v->scale, format_in_unit, &v->unit);
  cts_hist_pow2_t bins;
  cts_hist_pow2(v->h, &bins);
  uint64_t max_blocks = 0, max_samples = 0;
  for (int i = bins.lo; i <= bins.hi; i++) {
    if (bins.blocks[i] > max_blocks) max_blocks = bins.blocks[i];
    if (bins.samples[i] > max_samples) max_samples = bins.samples[i];
  }
  cts_out_printf(o, "  %21s  %11s  %6s  %10s  %6s\n", "range", "blocks", "%", "est. bytes", "%");
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  for (int i = bins.lo; i <= bins.hi; i++) {
    const double low = (double)cts_hist_pow2_low(i) * v->scale;
    const double high = i ? (double)cts_hist_pow2_low(i + 1) * v->scale : 0;
    char range[48];
    if (i == 0)
      snprintf(range, sizeof range, "%s", human_unit(0, v->unit, a, sizeof a));
    else
      snprintf(range, sizeof range, "%s - <%s", human_unit(low, v->unit, a, sizeof a),
               human_unit(high, v->unit, b, sizeof b));
    cts_out_printf(
        o, "  %21s  %11s  %5.1f%%  %10s  %5.1f%%", range, cli_grouped(bins.blocks[i], c, sizeof c),
        100.0 * (double)bins.blocks[i] / (double)v->h->total_blocks,
        cli_human_bytes((double)bins.samples[i] * bps, d, sizeof d),
        v->h->total_samples ? 100.0 * (double)bins.samples[i] / (double)v->h->total_samples : 0.0);
    if (bars) {
      /* Two bars: blocks ('#') and bytes ('='), each scaled to its largest bin. */
      const int wb =
          max_blocks ? (int)(20.0 * (double)bins.blocks[i] / (double)max_blocks + 0.5) : 0;
      const int ws =
          max_samples ? (int)(20.0 * (double)bins.samples[i] / (double)max_samples + 0.5) : 0;
      if (ws)
        cts_out_printf(o, "  %-20.*s %.*s", wb, "####################", ws, "====================");
      else if (wb)
        cts_out_printf(o, "  %.*s", wb, "####################");
    }
    cts_out_char(o, '\n');
  }
}

static void print_rates_text(cts_out_t *o, const cli_trace_t *t) {
  const cts_alloc_profile_t *p = &t->prof;
  const double bps = cts_alloc_profile_bytes_per_sample(p), dur = cts_alloc_profile_duration_s(p);
  char a[96], b[64], c[64], d[64];
  cli_out_heading(o, "Allocated %s in %s sampled blocks (~%s allocations, %s samples)\n",
                  cli_est_bytes(p, cts_alloc_profile_samples(p), true, a, sizeof a),
                  cli_grouped(cts_alloc_profile_allocs(p), b, sizeof b),
                  cli_grouped(cts_est_round(p->est_allocs_total), c, sizeof c),
                  cli_grouped(cts_alloc_profile_samples(p), d, sizeof d));
  if (dur <= 0) {
    cts_out_str(o, "Rates     none: the trace has no duration\n");
    return;
  }
  const double minor = (double)p->samples_by_source[0] * bps;
  const double major_direct = (double)p->samples_by_source[1] * bps;
  const double promoted = (double)p->promoted_samples * bps;
  cts_out_printf(o, "Minor     %s/s allocations, %.1f%% promoted\n",
                 cli_human_bytes(minor / dur, a, sizeof a),
                 minor > 0 ? 100.0 * promoted / minor : 0.0);
  cts_out_printf(o, "Major     %s/s allocations (%s/s direct), %s/s collections\n",
                 cli_human_bytes((major_direct + promoted) / dur, a, sizeof a),
                 cli_human_bytes(major_direct / dur, b, sizeof b),
                 cli_human_bytes((double)p->collected_major_samples * bps / dur, c, sizeof c));
  if (p->samples_by_source[2])
    cts_out_printf(o, "External  %s/s allocations, %s/s freed\n",
                   cli_human_bytes((double)p->samples_by_source[2] * bps / dur, a, sizeof a),
                   cli_human_bytes((double)p->collected_external_samples * bps / dur, b, sizeof b));
  cts_out_printf(o, "Runtime   %.3f s\n", dur);
}

/* A top-level member, one per line. */
static void member(cts_json_t *w, const char *key) {
  cts_json_ws(w, "\n ");
  cts_json_key(w, key);
}

static void json_view(cts_json_t *w, const cts_alloc_profile_t *p, const view_t *v) {
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  member(w, v->key);
  cts_json_object(w);
  cts_json_kv_str(w, "unit", v->unit == UNIT_US ? "us" : "bytes");
  cts_json_kv_u64(w, "blocks", v->h->total_blocks);
  cts_json_kv_u64(w, "samples", v->h->total_samples);
  if (v->h->total_blocks) {
    cts_json_kv_fixed(w, "min", (double)v->h->min * v->scale, 0);
    cts_json_kv_fixed(w, "mean_by_blocks",
                      v->h->sum_by_blocks / (double)v->h->total_blocks * v->scale, 3);
  }
  for (int by_samples = 0; by_samples < 2; by_samples++) {
    cts_json_key(w, by_samples ? "percentiles_by_bytes" : "percentiles_by_blocks");
    cts_json_object(w);
    for (unsigned q = 0; q < 4; q++)
      cts_json_kv_fixed(w, cli_quantile_names[q],
                        (double)cts_hist_quantile(v->h, cli_quantiles[q], by_samples) * v->scale,
                        0);
    cts_json_end(w);
  }
  cts_hist_pow2_t bins;
  cts_hist_pow2(v->h, &bins);
  cts_json_key(w, "bins");
  cts_json_array(w);
  for (int i = bins.lo; i <= bins.hi; i++) {
    cts_json_ws(w, "\n   ");
    cts_json_object(w);
    cts_json_kv_fixed(w, "low", (double)cts_hist_pow2_low(i) * v->scale, 0);
    cts_json_kv_fixed(w, "high", i ? (double)cts_hist_pow2_low(i + 1) * v->scale : 1.0 * v->scale,
                      0);
    cts_json_kv_u64(w, "blocks", bins.blocks[i]);
    cts_json_kv_u64(w, "samples", bins.samples[i]);
    cts_json_kv_fixed(w, "bytes", (double)bins.samples[i] * bps, 0);
    cts_json_end(w);
  }
  cts_json_end(w);
  cts_json_end(w);
}

static void print_json(cts_json_t *w, const cli_trace_t *t, const view_t *views, size_t nviews) {
  const cts_alloc_profile_t *p = &t->prof;
  const double bps = cts_alloc_profile_bytes_per_sample(p), dur = cts_alloc_profile_duration_s(p);
  cts_json_object(w);
  cli_jw_trace_header(w, t);
  cts_json_key(w, "allocated");
  cts_json_object(w);
  cli_jw_estimate(w, p, "alloc", cts_alloc_profile_samples(p));
  cts_json_kv_u64(w, "allocs_sampled", cts_alloc_profile_allocs(p));
  cts_json_kv_fixed(w, "allocs_est", p->est_allocs_total, 1);
  cts_json_end(w);
  static const char *const heaps[] = {"minor", "major", "external"};
  member(w, "heaps");
  cts_json_object(w);
  for (unsigned h = 0; h < 3; h++) {
    cts_json_key(w, heaps[h]);
    cts_json_object(w);
    cts_json_kv_u64(w, "allocs_sampled", p->allocs_by_source[h]);
    cts_json_kv_u64(w, "samples", p->samples_by_source[h]);
    cts_json_kv_fixed(w, "bytes", (double)p->samples_by_source[h] * bps, 0);
    cts_json_end(w);
  }
  cts_json_end(w);
  member(w, "promoted");
  cts_json_object(w);
  cts_json_kv_u64(w, "allocs_sampled", p->promoted_allocs);
  cts_json_kv_u64(w, "samples", p->promoted_samples);
  cts_json_kv_fixed(w, "bytes", (double)p->promoted_samples * bps, 0);
  cts_json_end(w);
  member(w, "collected");
  cts_json_object(w);
  cts_json_kv_u64(w, "allocs_sampled", p->collected_allocs);
  cts_json_kv_u64(w, "minor_samples", p->collected_minor_samples);
  cts_json_kv_u64(w, "major_samples", p->collected_major_samples);
  cts_json_kv_u64(w, "external_samples", p->collected_external_samples);
  cts_json_end(w);
  const double minor = (double)p->samples_by_source[0] * bps;
  const double direct = (double)p->samples_by_source[1] * bps;
  const double promoted = (double)p->promoted_samples * bps;
  const double d = dur > 0 ? dur : 1;
  member(w, "rates");
  cts_json_object(w);
  cts_json_kv_fixed(w, "minor_alloc_bytes_per_s", dur > 0 ? minor / d : 0.0, 1);
  cts_json_kv_fixed(w, "promoted_percent", minor > 0 ? 100.0 * promoted / minor : 0.0, 3);
  cts_json_kv_fixed(w, "major_alloc_bytes_per_s", dur > 0 ? (direct + promoted) / d : 0.0, 1);
  cts_json_kv_fixed(w, "major_direct_bytes_per_s", dur > 0 ? direct / d : 0.0, 1);
  cts_json_kv_fixed(w, "major_collect_bytes_per_s",
                    dur > 0 ? (double)p->collected_major_samples * bps / d : 0.0, 1);
  cts_json_kv_fixed(w, "external_alloc_bytes_per_s",
                    dur > 0 ? (double)p->samples_by_source[2] * bps / d : 0.0, 1);
  cts_json_kv_fixed(w, "external_free_bytes_per_s",
                    dur > 0 ? (double)p->collected_external_samples * bps / d : 0.0, 1);
  cts_json_end(w);
  member(w, "live_end");
  cts_json_object(w);
  cts_json_kv_u64(w, "blocks", p->live_blocks);
  cli_jw_estimate(w, p, "live", p->stacks.live_samples);
  cts_json_end(w);
  for (size_t i = 0; i < nviews; i++) json_view(w, p, &views[i]);
  cli_jw_end(w, false);
}

static void print_text(cts_out_t *o, const cli_trace_t *t, const view_t *views, size_t nviews,
                       bool bars) {
  const cts_alloc_profile_t *p = &t->prof;
  char a[96], b[32];
  cli_text_trace_header(o, t);
  cts_out_char(o, '\n');
  print_rates_text(o, t);
  cts_out_printf(o, "Live      %s at the end in %s sampled blocks (not in the lifetimes)\n",
                 cli_est_bytes(p, p->stacks.live_samples, true, a, sizeof a),
                 cli_grouped(p->live_blocks, b, sizeof b));
  for (size_t i = 0; i < nviews; i++) print_view_text(o, p, &views[i], bars);
  if (bars) cts_out_str(o, "\n  bars: # blocks, = bytes (each scaled to its largest bin)\n");
}

static void print_csv(cts_out_t *o, const cts_alloc_profile_t *p, const view_t *views,
                      size_t nviews) {
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  cts_out_str(o, "histogram,unit,low,high,blocks,samples,est_bytes\n");
  for (size_t v = 0; v < nviews; v++) {
    cts_hist_pow2_t bins;
    cts_hist_pow2(views[v].h, &bins);
    for (int i = bins.lo; i <= bins.hi; i++)
      cts_out_printf(o, "%s,%s,%.0f,%.0f,%llu,%llu,%.0f\n", views[v].key,
                     views[v].unit == UNIT_US ? "us" : "bytes",
                     (double)cts_hist_pow2_low(i) * views[v].scale,
                     i ? (double)cts_hist_pow2_low(i + 1) * views[v].scale : views[v].scale,
                     (unsigned long long)bins.blocks[i], (unsigned long long)bins.samples[i],
                     (double)bins.samples[i] * bps);
  }
}

/* ---- SVG ------------------------------------------------------------------------------ */

int cmd_stats(int argc, char **argv) {
  static const struct option longopts[] = {
      {"bars", no_argument, NULL, 'b'},
      {"no-bars", no_argument, NULL, 'N'},
      {"svg", required_argument, NULL, 'S'},
      {"png", required_argument, NULL, 'P'},
      CLI_LONGOPT_JSON,
      CLI_LONGOPT_CSV,
      CLI_LONGOPT_QUIET,
      CLI_LONGOPT_THREADS,
      {0},
  };
  stats_opts_t opts = {.bars = -1};
  int first;
  const int rc = cli_parse(argc, argv, "q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  cli_trace_kind_t kind;
  const int kc = cli_one_trace(argc, argv, first, &opts.out, "one trace at a time", NULL, &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS) {
    const cli_tasks_stats_opts_t to = {.out = opts.out,
                                       .bars = opts.bars < 0 ? isatty(STDOUT_FILENO) : opts.bars,
                                       .svg = opts.svg,
                                       .png = opts.png};
    return cli_tasks_stats(argv[first], &to);
  }

  const cts_alloc_profile_config_t cfg = {.stacks = false};
  cli_trace_t t;
  int code = cli_trace_load(&t, argv[first], &cfg, opts.out.quiet);
  if (code != CLI_EXIT_OK && code != CLI_EXIT_DATA) {
    cli_trace_free(&t);
    return code;
  }
  const cts_alloc_profile_t *p = &t.prof;
  const view_t views[] = {
      {"size", "Block sizes", "sizes", &p->size_words, (double)p->word_bytes, UNIT_BYTES},
      {"lifetime", "Lifetimes of collected blocks (time)", "lifetime_time", &p->life_us, 1.0,
       UNIT_US},
      {"lifetime_bytes", "Lifetimes of collected blocks (bytes allocated meanwhile)",
       "lifetime_allocated", &p->life_samples, cts_alloc_profile_bytes_per_sample(p), UNIT_BYTES},
  };
  cts_out_t *out = cli_stdout_for(&opts.out);
  if (opts.out.json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_json(&w, &t, views, CTS_ARRAY_SIZE(views));
  } else if (opts.out.csv) {
    print_csv(out, p, views, CTS_ARRAY_SIZE(views));
  } else {
    print_text(out, &t, views, CTS_ARRAY_SIZE(views),
               opts.bars < 0 ? isatty(STDOUT_FILENO) : opts.bars);
  }
  code = cli_finish_output(out, code);
  if (opts.svg || opts.png) {
    cli_hist_panel_t panels[CTS_ARRAY_SIZE(views)];
    for (size_t i = 0; i < CTS_ARRAY_SIZE(views); i++)
      panels[i] = (cli_hist_panel_t){views[i].h, views[i].title, views[i].scale, &views[i].unit};
    const cli_hist_svg_t svg = {
        panels,  CTS_ARRAY_SIZE(panels), "% of sampled blocks", "% of estimated bytes", "blocks",
        "bytes", format_in_unit};
    const char *const input = argv[first];
    const int e = cli_write_svg_and_png(opts.svg, opts.png, cli_write_hist_svg, &svg, &input, 1);
    if (e && code < e) code = e;
  }
  cli_trace_free(&t);
  return code;
}
