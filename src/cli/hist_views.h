/* SPDX-License-Identifier: MIT */
/* The views of a histogram that `stats` shows for memory traces and for task traces: the
 * quantile lines of the text and the SVG panels (`--svg`, `--png`). */
#ifndef CTS_CLI_HIST_VIEWS_H
#define CTS_CLI_HIST_VIEWS_H

#include <stddef.h>

#include "../analysis/hist.h"
#include "../os/output.h"

/* The quantiles the statistics show (median, 90th, 99th percentile, maximum) and their
 * names. */
#define CLI_NQUANTILES 4
extern const double cli_quantiles[CLI_NQUANTILES];
extern const char *const cli_quantile_names[CLI_NQUANTILES];

/* Formats a histogram value (in display units) into buf; ctx is the caller's. */
typedef const char *(*cli_value_fmt)(double v, const void *ctx, char *buf, size_t size);

/* A histogram's two quantile lines, "  <by_count>  p50 V  p90 V  p99 V  max V  mean V"
 * (entries counted) and "  <by_weight>  p50 V ..." (weighted), values times scale. */
void cli_print_quantile_lines(cts_out_t *o, const cts_hist_t *h, const char *by_count,
                              const char *by_weight, double scale, cli_value_fmt fmt,
                              const void *ctx);

/* One panel of a histogram SVG: its power-of-two bins labelled fmt(low × scale, fmt_ctx). */
typedef struct cli_hist_panel {
  const cts_hist_t *h;
  const char *title;
  double scale;
  const void *fmt_ctx;
} cli_hist_panel_t;

typedef struct cli_hist_svg {
  const cli_hist_panel_t *panels;
  size_t n;
  const char *count_legend, *weight_legend; /* "% of sampled blocks", "% of estimated bytes" */
  const char *count_unit, *weight_unit;     /* bar tooltips, "12.5% of <unit>" */
  cli_value_fmt fmt;                        /* bin labels */
} cli_hist_svg_t;

/* Writes the panels as one SVG, 250 px each, two bars per bin (the bin's share of entries,
 * blue, and of weight, orange). A writer for cli_write_svg_and_png: ctx is a
 * cli_hist_svg_t. */
int cli_write_hist_svg(const char *path, const void *ctx);

#endif /* CTS_CLI_HIST_VIEWS_H */
