/* SPDX-License-Identifier: MIT */
#include "hist_views.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli.h"

const double cli_quantiles[CLI_NQUANTILES] = {0.5, 0.9, 0.99, 1.0};
const char *const cli_quantile_names[CLI_NQUANTILES] = {"p50", "p90", "p99", "max"};

void cli_print_quantile_lines(cts_out_t *o, const cts_hist_t *h, const char *by_count,
                              const char *by_weight, double scale, cli_value_fmt fmt,
                              const void *ctx) {
  char a[32];
  for (int weighted = 0; weighted < 2; weighted++) {
    cts_out_printf(o, "  %-9s", weighted ? by_weight : by_count);
    for (unsigned q = 0; q < CLI_NQUANTILES; q++)
      cts_out_printf(
          o, "  %s %s", cli_quantile_names[q],
          fmt((double)cts_hist_quantile(h, cli_quantiles[q], weighted) * scale, ctx, a, sizeof a));
    if (!weighted)
      cts_out_printf(o, "  mean %s",
                     fmt(h->sum_by_blocks / (double)h->total_blocks * scale, ctx, a, sizeof a));
    cts_out_char(o, '\n');
  }
}

static void svg_panel(cts_out_t *o, const cli_hist_svg_t *s, const cli_hist_panel_t *p, int y0) {
  const int x0 = 60, width = 820, height = 160;
  cts_out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">", x0, y0 + 16);
  cts_out_xml_text(o, p->title);
  cts_out_str(o, "</text>\n");
  const int top = y0 + 28, base = top + height;
  cts_out_printf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", x0, base,
                 x0 + width, base);
  for (int pct = 0; pct <= 100; pct += 25)
    cts_out_printf(o,
                   "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%d%%</text>"
                   "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n",
                   x0 - 4, base - height * pct / 100 + 3, pct, x0, base - height * pct / 100,
                   x0 + width, base - height * pct / 100);
  cts_hist_pow2_t bins;
  cts_hist_pow2(p->h, &bins);
  if (bins.lo > bins.hi) return;
  const double slot = (double)width / (bins.hi - bins.lo + 1);
  for (int i = bins.lo; i <= bins.hi; i++) {
    const double x = x0 + (i - bins.lo) * slot;
    const double fb = (double)bins.blocks[i] / (double)p->h->total_blocks;
    const double fs =
        p->h->total_samples ? (double)bins.samples[i] / (double)p->h->total_samples : 0.0;
    cts_out_printf(o,
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#4878cf\">"
                   "<title>%.1f%% of %s</title></rect>\n",
                   x + slot * 0.1, base - fb * height, slot * 0.4, fb * height, 100 * fb,
                   s->count_unit);
    cts_out_printf(o,
                   "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e8833a\">"
                   "<title>%.1f%% of %s</title></rect>\n",
                   x + slot * 0.5, base - fs * height, slot * 0.4, fs * height, 100 * fs,
                   s->weight_unit);
    char label[32];
    s->fmt((double)cts_hist_pow2_low(i) * p->scale, p->fmt_ctx, label, sizeof label);
    cts_out_printf(o,
                   "<text x=\"%.1f\" y=\"%d\" font-size=\"9\" text-anchor=\"end\" "
                   "transform=\"rotate(-45 %.1f %d)\">%s</text>\n",
                   x + slot * 0.5, base + 12, x + slot * 0.5, base + 12, label);
  }
}

int cli_write_hist_svg(const char *path, const void *ctx) {
  const cli_hist_svg_t *s = ctx;
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -errno;
  /* The commands' one buffer: their standard output is flushed before images are drawn. */
  cts_out_t *o = cli_out_buffer(fd, false);
  const int panel = 250;
  cts_out_printf(o,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"%d\" "
                 "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
                 "fill=\"white\"/>\n"
                 "<rect x=\"600\" y=\"8\" width=\"10\" height=\"10\" fill=\"#4878cf\"/>"
                 "<text x=\"614\" y=\"17\" font-size=\"11\">%s</text>\n"
                 "<rect x=\"740\" y=\"8\" width=\"10\" height=\"10\" fill=\"#e8833a\"/>"
                 "<text x=\"754\" y=\"17\" font-size=\"11\">%s</text>\n",
                 40 + panel * (int)s->n, s->count_legend, s->weight_legend);
  for (size_t i = 0; i < s->n; i++) svg_panel(o, s, &s->panels[i], 24 + panel * (int)i);
  cts_out_str(o, "</svg>\n");
  int e = cts_out_flush(o);
  if (close(fd) != 0 && !e) e = -errno;
  return e;
}
