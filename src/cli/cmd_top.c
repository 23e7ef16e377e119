/* SPDX-License-Identifier: MIT */
/* ctfscope top: allocation sites by estimated bytes, count, live at peak and live at end;
 * flat (grouped by line, function or file), as a call tree (--tree) or as callers of each
 * site (--inverted). What memtrace's hotspots and heaptrack_print show, in one pass. */
#define _GNU_SOURCE /* qsort_r */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/grow.h"
#include "cli.h"
#include "cmd_tasks.h"
#include "cmd_top_tasks.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope top [OPTIONS] TRACE\n"
    "\n"
    "List the allocation sites of a memtrace trace, largest first: bytes allocated, number\n"
    "of allocations, bytes live when the heap was at its peak and bytes still live at the\n"
    "end. Bytes are estimates (samples / sample rate x word size); figures from few samples\n"
    "show a 95% confidence interval. Allocation counts are estimates too (each sampled block\n"
    "weighs 1 / its probability of being sampled).\n"
    "\n"
    "On a mirage-profile task trace, list the task labels (or types) by running time:\n"
    "tasks, running time and periods, time alive (from creation to resolution, merge or\n"
    "last sight) and tasks still pending; unlabelled tasks count under their type.\n"
    "\n"
    "Options:\n"
    "      --by WHAT       group sites by 'line' (function, file and line: default),\n"
    "                      'function' or 'file'; tasks by 'label' (default) or 'type'\n"
    "  -s, --sort KEY      order by 'bytes' (allocated, default), 'count', 'peak' or 'live';\n"
    "                      tasks by 'running' (default), 'count' or 'alive'\n"
    "  -n, --limit N       show the first N sites (default 20, 0 = all)\n"
    "      --tree          show the call tree from the program's entry down (callees)\n"
    "      --inverted      show each allocation site with the chain of its callers\n"
    "      --depth N       deepest level shown by --tree and --inverted (default 24)\n"
    "      --min-percent P hide tree nodes under P % of the total (default 1)\n"
    "      --json          print JSON\n"
    "      --csv           print CSV (flat table only)\n" CLI_FRAME_HELP
    "  -q, --quiet         do not print warnings\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 when the trace was read completely, 1 when it is corrupt, a corrupt\n"
    "gzip stream included (the figures cover what was read before the error), 2 for a usage\n"
    "error, 3 when it cannot be read, 4 out of memory.\n";

typedef enum { VIEW_FLAT, VIEW_TREE, VIEW_INVERTED } view_t;

typedef struct top_opts {
  cli_out_opts_t out;
  cts_group_t by;
  cts_sort_t sort;
  const char *by_arg, *sort_arg; /* checked once the trace's kind is known */
  view_t view;
  long depth;
  double min_percent;
} top_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  top_opts_t *o = ctx;
  const int common = cli_output_option(opt, arg, &o->out, true);
  if (common != CLI_OPTION_OTHER) return common;
  switch (opt) {
    case 'B':
      o->by_arg = arg;
      break;
    case 's':
      o->sort_arg = arg;
      break;
    case 'T':
      o->view = VIEW_TREE;
      break;
    case 'I':
      o->view = VIEW_INVERTED;
      break;
    case 'D':
      if (!cli_parse_long(arg, 1, 1000, &o->depth))
        return cli_usage_error("--depth takes a number from 1 to 1000, not '%s'", arg);
      break;
    case 'M': {
      char *end;
      o->min_percent = strtod(arg, &end);
      if (*arg == '\0' || *end != '\0' || !(o->min_percent >= 0 && o->min_percent <= 100))
        return cli_usage_error("--min-percent takes a number from 0 to 100, not '%s'", arg);
      break;
    }
  }
  return -1;
}

static const char *const sort_names[] = {"allocated bytes", "allocation count", "live at peak",
                                         "live at end"};
static const char *const sort_keys[] = {"bytes", "count", "peak", "live"};
static const char *const group_names[] = {"function, file and line", "function", "file"};
static const char *const group_keys[] = {"line", "function", "file"};

static void print_totals_text(cts_out_t *o, const cli_trace_t *t) {
  const cts_alloc_profile_t *p = &t->prof;
  char a[96], b[64], c[96], d[96];
  cts_out_printf(o, "Total    %s allocated in %s samples (%s sampled blocks, ~%s allocations)\n",
                 cli_est_bytes(p, cts_alloc_profile_samples(p), true, a, sizeof a),
                 cli_grouped(cts_alloc_profile_samples(p), b, sizeof b),
                 cli_grouped(cts_alloc_profile_allocs(p), c, sizeof c),
                 cli_grouped(cts_est_round(p->est_allocs_total), d, sizeof d));
  const double peak_at = p->stacks.peak_time_us > p->start_time_us
                             ? (double)(p->stacks.peak_time_us - p->start_time_us) * 1e-6
                             : 0.0;
  cts_out_printf(o, "Live     peak %s at +%.3f s; %s at the end\n",
                 cli_est_bytes(p, p->stacks.peak_samples, true, a, sizeof a), peak_at,
                 cli_est_bytes(p, p->stacks.live_samples, true, c, sizeof c));
}

static void print_flat_text(cts_out_t *o, const cli_trace_t *t, const cts_rows_t *rows,
                            const top_opts_t *opts) {
  const cts_alloc_profile_t *p = &t->prof;
  const size_t shown = cli_rows_shown(&opts->out, rows->n);
  cts_out_printf(o, "\n%s %zu of %zu allocation sites by %s (grouped by %s):\n",
                 shown < rows->n ? "Top" : "All", shown, rows->n, sort_names[opts->sort],
                 group_names[opts->by]);
  cts_out_str(o, "   allocated       %       allocs    peak live  live at end  site\n");
  const uint64_t total = cts_alloc_profile_samples(p);
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows->rows[i];
    char a[32], b[32], c[32], d[32], site[512];
    cts_row_name(r, site, sizeof site);
    cts_out_printf(o, "%12s  %5.1f%%  %11s  %11s  %11s  %s",
                   cli_est_bytes(p, r->st.samples, false, a, sizeof a),
                   total ? 100.0 * (double)r->st.samples / (double)total : 0.0,
                   cli_grouped(cts_est_round(r->st.est_allocs), b, sizeof b),
                   cli_est_bytes(p, r->st.peak_samples, false, c, sizeof c),
                   cli_est_bytes(p, r->st.live_samples, false, d, sizeof d), site);
    if (cli_show_ci(p, r->st.samples)) {
      char ci[96];
      const char *full = cli_est_bytes(p, r->st.samples, true, ci, sizeof ci);
      const char *paren = strchr(full, '(');
      cts_out_printf(o, "  [%.*s]", paren ? (int)(strlen(paren) - 2) : 0, paren ? paren + 1 : "");
    }
    cts_out_char(o, '\n');
  }
}

static void json_stats(cts_json_t *w, const cts_alloc_profile_t *p, const cts_site_stats_t *st) {
  cli_jw_estimate(w, p, "alloc", st->samples);
  cts_json_kv_u64(w, "allocs_sampled", st->allocs);
  cts_json_kv_fixed(w, "allocs_est", st->est_allocs, 1);
  cli_jw_estimate(w, p, "peak", st->peak_samples);
  cts_json_kv_u64(w, "peak_allocs_sampled", st->peak_allocs);
  cli_jw_estimate(w, p, "live_end", st->live_samples);
  cts_json_kv_u64(w, "live_end_allocs_sampled", st->live_allocs);
}

/* Opens the document: the trace, the view and the totals, a line break after each part. */
static void print_json_header(cts_json_t *w, const cli_trace_t *t, const top_opts_t *opts,
                              const char *view) {
  const cts_alloc_profile_t *p = &t->prof;
  cts_json_object(w);
  cli_jw_trace_header(w, t);
  cts_json_kv_str(w, "view", view);
  cts_json_kv_str(w, "group_by", group_keys[opts->by]);
  cts_json_kv_str(w, "sort", sort_keys[opts->sort]);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "total");
  cts_json_object(w);
  cli_jw_estimate(w, p, "alloc", cts_alloc_profile_samples(p));
  cts_json_kv_u64(w, "allocs_sampled", cts_alloc_profile_allocs(p));
  cts_json_kv_fixed(w, "allocs_est", p->est_allocs_total, 1);
  cli_jw_estimate(w, p, "peak", p->stacks.peak_samples);
  cts_json_kv_fixed(w, "peak_time_s",
                    p->stacks.peak_time_us > p->start_time_us
                        ? (double)(p->stacks.peak_time_us - p->start_time_us) * 1e-6
                        : 0.0,
                    6);
  cli_jw_estimate(w, p, "live_end", p->stacks.live_samples);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
}

static void print_flat_json(cts_json_t *w, const cli_trace_t *t, const cts_rows_t *rows,
                            const top_opts_t *opts) {
  print_json_header(w, t, opts, "flat");
  const size_t shown = cli_rows_shown(&opts->out, rows->n);
  cts_json_kv_u64(w, "sites_total", rows->n);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "sites");
  cts_json_array(w);
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows->rows[i];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cli_jw_site(w, t, r);
    json_stats(w, &t->prof, &r->st);
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

static void print_flat_csv(cts_out_t *o, const cli_trace_t *t, const cts_rows_t *rows,
                           const top_opts_t *opts) {
  const cts_alloc_profile_t *p = &t->prof;
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  const size_t shown = cli_rows_shown(&opts->out, rows->n);
  cts_out_str(o,
              "function,file,line,alloc_samples,alloc_bytes,alloc_bytes_ci95_low,"
              "alloc_bytes_ci95_high,allocs_sampled,allocs_est,peak_samples,peak_bytes,"
              "live_end_samples,live_end_bytes\n");
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows->rows[i];
    double lo = (double)r->st.samples, hi = lo;
    if (p->sample_rate < 1.0) cts_poisson_ci95(r->st.samples, &lo, &hi);
    cli_csv_str(o, r->code ? r->function : "(no backtrace)");
    cts_out_char(o, ',');
    cli_csv_str(o, r->file);
    cts_out_printf(o, ",%u,%llu,%.0f,%.0f,%.0f,%llu,%.1f,%llu,%.0f,%llu,%.0f\n", r->line,
                   (unsigned long long)r->st.samples, (double)r->st.samples * bps, lo * bps,
                   hi * bps, (unsigned long long)r->st.allocs, r->st.est_allocs,
                   (unsigned long long)r->st.peak_samples, (double)r->st.peak_samples * bps,
                   (unsigned long long)r->st.live_samples, (double)r->st.live_samples * bps);
  }
}

/* ---- trees ---------------------------------------------------------------------------- */

typedef struct tree_print {
  cts_out_t *o;
  const cli_trace_t *t;
  const cts_stacks_t *s;
  /* Inclusive figures of each node by the sort key (metric) and by the bytes column's
   * (shown), 16 bytes a node instead of cts_site_stats_t's 88 (most of the tree's peak RSS
   * on gen_trace's default shape). */
  const uint64_t *metric, *shown;
  uint32_t *first_child, *next_sibling;
  const cts_labels_t *labels;
  cts_sort_t sort;
  uint64_t total, threshold;
  long max_depth;
  bool nomem;
} tree_print_t;

/* The bytes columns show bytes even when sorted by count. */
static cts_sort_t shown_sort(cts_sort_t sort) {
  return sort == CTS_SORT_COUNT ? CTS_SORT_BYTES : sort;
}

/* Whether a node whose inclusive figure by the sort key is v is printed. */
static bool reaches(uint64_t v, uint64_t threshold) {
  return v >= threshold && v > 0;
}

/* Children by the metric, largest first, then by node index (creation order). */
static int cmp_children(const void *a, const void *b, void *arg) {
  const tree_print_t *tp = arg;
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  const uint64_t vx = tp->metric[x];
  const uint64_t vy = tp->metric[y];
  if (vx != vy) return vx > vy ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* One line of a text tree: the node's share of the total, its bytes column (inclusive) and,
 * in the call tree, its self bytes (self: NULL in the callers view, which shows none). */
static void print_text_line(cts_out_t *o, const cts_alloc_profile_t *p, uint64_t metric,
                            uint64_t total, uint64_t shown, const uint64_t *self, uint32_t depth,
                            const char *label) {
  char a[32], b[32] = "";
  cli_est_bytes(p, shown, false, a, sizeof a);
  if (self) cli_est_bytes(p, *self, false, b, sizeof b);
  cts_out_printf(o, "%6.1f%%  %11s  %11s  %*s%s\n",
                 total ? 100.0 * (double)metric / (double)total : 0.0, a, b,
                 (int)(depth > 60 ? 60 : depth) * 2, "", label);
}

static void print_node(tree_print_t *tp, uint32_t n) {
  const char *label = cts_labels_name(tp->labels, tp->s->nodes[n].code);
  const uint32_t depth = tp->s->nodes[n].depth;
  /* Self = inclusive - the children's inclusive (integers, exact): the trie of an in-place
   * relabel keeps no figures. */
  uint64_t self = tp->shown[n];
  for (uint32_t c = tp->first_child[n]; c; c = tp->next_sibling[c]) self -= tp->shown[c];
  print_text_line(tp->o, &tp->t->prof, tp->metric[n], tp->total, tp->shown[n], &self, depth, label);
  if ((long)depth >= tp->max_depth) return;
  size_t nchildren = 0;
  for (uint32_t c = tp->first_child[n]; c; c = tp->next_sibling[c])
    if (reaches(tp->metric[c], tp->threshold)) nchildren++;
  if (!nchildren) return;
  uint32_t *children = malloc(nchildren * sizeof *children);
  if (!children) {
    tp->nomem = true;
    return;
  }
  size_t k = 0;
  for (uint32_t c = tp->first_child[n]; c; c = tp->next_sibling[c])
    if (reaches(tp->metric[c], tp->threshold)) children[k++] = c;
  qsort_r(children, nchildren, sizeof *children, cmp_children, tp);
  for (size_t i = 0; i < nchildren; i++) print_node(tp, children[i]);
  free(children);
}

/* Self figures to inclusive ones: integer sums, so the same as cts_stacks_inclusive's
 * whatever the order. */
static void inclusive_two(const cts_stacks_t *s, uint64_t *metric, uint64_t *shown) {
  for (uint32_t i = s->count; i-- > 1;) {
    metric[s->nodes[i].parent] += metric[i];
    if (shown != metric) shown[s->nodes[i].parent] += shown[i];
  }
}

/* The text trees' heading. */
static void print_tree_heading(cts_out_t *o, const top_opts_t *opts, bool inverted) {
  cts_out_printf(o,
                 "\n%s by %s; nodes under %g%% hidden, at most %ld levels:\n"
                 "  total  %11s  %11s  %s\n",
                 inverted ? "Allocation sites and their callers (inverted call tree)"
                          : "Call tree from the entry point (callees)",
                 sort_names[opts->sort], opts->min_percent, opts->depth,
                 opts->sort == CTS_SORT_COUNT ? "bytes" : sort_keys[opts->sort],
                 inverted ? "" : "self", inverted ? "site, then its callers" : "frame");
}

/* Prints the call tree of s as text from the self figures metric and shown (by the sort key
 * and by shown_sort's; shown may be metric) of its nodes, taken over and freed here. */
static int print_tree(cts_out_t *o, const cli_trace_t *t, const cts_stacks_t *s,
                      const cts_labels_t *labels, const top_opts_t *opts, uint64_t *metric,
                      uint64_t *shown) {
  tree_print_t tp = {.o = o,
                     .t = t,
                     .s = s,
                     .labels = labels,
                     .sort = opts->sort,
                     .max_depth = opts->depth,
                     .metric = metric,
                     .shown = shown};
  if (metric) inclusive_two(s, metric, shown);
  uint32_t *first_child = calloc(s->count, sizeof *first_child);
  uint32_t *next_sibling = calloc(s->count, sizeof *next_sibling);
  tp.first_child = first_child;
  tp.next_sibling = next_sibling;
  if (!tp.metric || !first_child || !next_sibling) {
    tp.nomem = true;
    goto out;
  }
  for (uint32_t i = s->count; i-- > 1;) {
    next_sibling[i] = first_child[s->nodes[i].parent];
    first_child[s->nodes[i].parent] = i;
  }
  tp.total = tp.metric[0];
  tp.threshold = (uint64_t)((double)tp.total * opts->min_percent / 100.0);
  print_tree_heading(o, opts, false);
  print_node(&tp, 0);
out:
  if (tp.shown != tp.metric) free((uint64_t *)tp.shown);
  free((uint64_t *)tp.metric);
  free(first_child);
  free(next_sibling);
  if (tp.nomem) {
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  return CLI_EXIT_OK;
}

/* ---- trees printed from a trie with figures: JSON, and the callers view ----------------- */

/* A node that is printed: the root, and every node whose inclusive figure by the sort key
 * reaches the threshold, at most max_depth deep, under a printed parent. Only these need
 * all of their figures; the others' count only in their ancestors' sums. So a tree holds
 * 12 bytes a trie node while it is made (its inclusive sort key, and the printed node each
 * node's figures go to), then ~220 bytes a printed node, each of which prints more. */
typedef struct printed_node {
  uint32_t node;                      /* in the trie (kept nodes are in the trie's order) */
  uint32_t parent;                    /* printed index of its parent (the root: 0) */
  uint32_t first_child, next_sibling; /* printed indices, 0 = none */
  uint64_t code;                      /* label */
  uint32_t depth;
  uint64_t metric; /* inclusive, by the sort key */
  cts_site_stats_t incl, self;
} printed_node_t;

typedef struct printed_tree {
  printed_node_t *nodes;
  size_t n, cap;
  uint64_t total, threshold;
} printed_tree_t;

/* Whether trie node i (parent p, printed index kept[p] the nearest printed ancestor) is
 * printed. */
static bool is_printed(const printed_tree_t *pt, const cts_stacks_t *s, const uint32_t *kept,
                       const uint64_t *metric, uint32_t i, long max_depth) {
  const uint32_t p = s->nodes[i].parent;
  return pt->nodes[kept[p]].node == p && reaches(metric[i], pt->threshold) &&
         (long)s->nodes[i].depth <= max_depth;
}

/* The printed nodes of s with their inclusive and self figures, est_allocs of the
 * inclusive ones summed in cts_stacks_inclusive's order (the same digits). Reads s's nodes
 * and records, frees nothing of s. Returns 0 or -ENOMEM (pt then empty). */
static int printed_tree_build(printed_tree_t *pt, const cts_stacks_t *s, const top_opts_t *opts) {
  *pt = (printed_tree_t){0};
  uint64_t *metric = malloc((size_t)s->count * sizeof *metric);
  uint32_t *kept = malloc((size_t)s->count * sizeof *kept);
  int e = metric && kept ? 0 : -ENOMEM;
  for (uint32_t i = 0; !e && i < s->count; i++) {
    const cts_site_stats_t self = cts_stacks_self(s, i);
    metric[i] = cts_site_stats_metric(&self, opts->sort);
  }
  for (uint32_t i = s->count; !e && i-- > 1;) metric[s->nodes[i].parent] += metric[i];
  /* (A trie always has its root: count >= 1.) */
  if (!e) {
    pt->total = metric[0];
    pt->threshold = (uint64_t)((double)pt->total * opts->min_percent / 100.0);
  }
  for (uint32_t i = 0; !e && i < s->count; i++) {
    if (i && !is_printed(pt, s, kept, metric, i, opts->depth)) {
      kept[i] = kept[s->nodes[i].parent];
      continue;
    }
    if (cts_grow((void **)&pt->nodes, &pt->cap, pt->n, sizeof *pt->nodes)) {
      e = -ENOMEM;
      break;
    }
    pt->nodes[pt->n] = (printed_node_t){.node = i,
                                        .parent = i ? kept[s->nodes[i].parent] : 0,
                                        .code = s->nodes[i].code,
                                        .depth = s->nodes[i].depth,
                                        .metric = metric[i]};
    kept[i] = (uint32_t)pt->n++;
  }
  free(metric);
  metric = NULL;
  /* Each node's own figures into its nearest printed ancestor-or-self, then the printed
   * nodes' sums up the printed tree: integers, exact whatever the order. */
  for (uint32_t i = 0; !e && i < s->count; i++) {
    printed_node_t *k = &pt->nodes[kept[i]];
    const cts_site_stats_t self = cts_stacks_self(s, i);
    cts_site_stats_add(&k->incl, &self);
    if (k->node == i) k->self = self;
  }
  free(kept);
  for (size_t k = pt->n; !e && k-- > 1;)
    cts_site_stats_add(&pt->nodes[pt->nodes[k].parent].incl, &pt->nodes[k].incl);
  /* est_allocs, a double, in cts_stacks_inclusive's order: every node's, children from the
   * last made. */
  double *est = e ? NULL : malloc((size_t)s->count * sizeof *est);
  if (!e && !est) e = -ENOMEM;
  for (uint32_t i = 0; !e && i < s->count; i++) est[i] = cts_stacks_self(s, i).est_allocs;
  for (uint32_t i = s->count; !e && i-- > 1;) est[s->nodes[i].parent] += est[i];
  for (size_t k = 0; !e && k < pt->n; k++) pt->nodes[k].incl.est_allocs = est[pt->nodes[k].node];
  free(est);
  for (size_t k = pt->n; !e && k-- > 1;) {
    printed_node_t *parent = &pt->nodes[pt->nodes[k].parent];
    pt->nodes[k].next_sibling = parent->first_child;
    parent->first_child = (uint32_t)k;
  }
  if (e) {
    free(pt->nodes);
    *pt = (printed_tree_t){0};
  }
  return e;
}

/* Children by the metric, largest first, then in the trie's order. */
static int cmp_printed(const void *a, const void *b, void *arg) {
  const printed_node_t *nodes = arg;
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  const uint64_t vx = nodes[x].metric, vy = nodes[y].metric;
  if (vx != vy) return vx > vy ? -1 : 1;
  return x < y ? -1 : x > y;
}

typedef struct printed_print {
  cts_out_t *o;
  cts_json_t *w; /* JSON nodes, else text */
  const cli_trace_t *t;
  const printed_tree_t *pt;
  const cts_labels_t *labels;
  cts_sort_t sort;
  bool inverted, nomem;
  size_t printed;
} printed_print_t;

static void print_printed(printed_print_t *pp, uint32_t k, size_t parent_id) {
  const printed_node_t *n = &pp->pt->nodes[k];
  const cts_alloc_profile_t *p = &pp->t->prof;
  const char *label = cts_labels_name(pp->labels, n->code);
  const size_t id = pp->printed++;
  if (pp->w) {
    cts_json_t *w = pp->w;
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_u64(w, "id", id);
    cts_json_key(w, "parent");
    if (k == 0)
      cts_json_null(w);
    else
      cts_json_u64(w, parent_id);
    cts_json_kv_u64(w, "depth", n->depth);
    cts_json_kv_str(w, "frame", label);
    json_stats(w, p, &n->incl);
    cts_json_key(w, "self");
    cts_json_object(w);
    json_stats(w, p, &n->self);
    cts_json_end(w);
    cts_json_end(w);
  } else {
    const uint64_t self = cts_site_stats_metric(&n->self, shown_sort(pp->sort));
    print_text_line(pp->o, p, n->metric, pp->pt->total,
                    cts_site_stats_metric(&n->incl, shown_sort(pp->sort)),
                    pp->inverted ? NULL : &self, n->depth, label);
  }
  size_t nchildren = 0;
  for (uint32_t c = n->first_child; c; c = pp->pt->nodes[c].next_sibling) nchildren++;
  if (!nchildren) return;
  uint32_t *children = malloc(nchildren * sizeof *children);
  if (!children) {
    pp->nomem = true;
    return;
  }
  size_t j = 0;
  for (uint32_t c = n->first_child; c; c = pp->pt->nodes[c].next_sibling) children[j++] = c;
  qsort_r(children, nchildren, sizeof *children, cmp_printed, pp->pt->nodes);
  for (size_t i = 0; i < nchildren; i++) print_printed(pp, children[i], id);
  free(children);
}

/* Prints a printed tree as JSON (w) or text, and frees it. */
static int print_printed_tree(cts_out_t *o, cts_json_t *w, const cli_trace_t *t, printed_tree_t *pt,
                              const cts_labels_t *labels, const top_opts_t *opts, bool inverted) {
  printed_print_t pp = {
      .o = o, .w = w, .t = t, .pt = pt, .labels = labels, .sort = opts->sort, .inverted = inverted};
  if (w) {
    print_json_header(w, t, opts, inverted ? "inverted" : "tree");
    cts_json_kv_i64(w, "depth", opts->depth);
    cts_json_key(w, "min_percent");
    cts_json_g(w, opts->min_percent, 6);
    cts_json_ws(w, "\n ");
    cts_json_key(w, "nodes");
    cts_json_array(w);
  } else {
    print_tree_heading(o, opts, inverted);
  }
  print_printed(&pp, 0, 0);
  if (w) cli_jw_end(w, true);
  free(pt->nodes);
  *pt = (printed_tree_t){0};
  if (pp.nomem) {
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  return CLI_EXIT_OK;
}

/* Frees a profile's trie once its view no longer reads it: the heap's totals, which the
 * headers print, stay. */
static void drop_trie(cts_stacks_t *s) {
  const uint64_t live = s->live_samples, peak = s->peak_samples, peak_at = s->peak_time_us;
  cts_stacks_fini(s);
  s->live_samples = live;
  s->peak_samples = peak;
  s->peak_time_us = peak_at;
}

/* The callers view: each stack reversed (allocation point first) and cut at depth levels,
 * interned in a second trie that carries the self figures of the stacks it came from. */
static int build_inverted(const cts_stacks_t *s, long depth, cts_stacks_t *inv) {
  int e = cts_stacks_init(inv, false, 0);
  if (e) return e;
  inv->max_nodes = CTS_STACKS_DEFAULT_MAX_NODES; /* a profile's bound */
  uint64_t *path = malloc((size_t)depth * sizeof *path);
  if (!path) return -ENOMEM;
  for (uint32_t i = 0; i < s->count && !e; i++) {
    const cts_site_stats_t self = cts_stacks_self(s, i);
    if (self.allocs == 0) continue;
    size_t n = 0;
    for (uint32_t cur = i; cur != 0 && n < (size_t)depth; cur = s->nodes[cur].parent)
      path[n++] = s->nodes[cur].code;
    uint32_t node;
    e = cts_stacks_intern(inv, path, n, &node);
    if (!e) e = cts_stacks_add_self(inv, node, &self);
  }
  free(path);
  return e;
}

int cmd_top(int argc, char **argv) {
  static const struct option longopts[] = {
      {"by", required_argument, NULL, 'B'},
      {"sort", required_argument, NULL, 's'},
      CLI_LONGOPT_LIMIT,
      {"tree", no_argument, NULL, 'T'},
      {"inverted", no_argument, NULL, 'I'},
      {"depth", required_argument, NULL, 'D'},
      {"min-percent", required_argument, NULL, 'M'},
      CLI_LONGOPT_JSON,
      CLI_LONGOPT_CSV,
      CLI_LONGOPT_QUIET,
      CLI_FRAME_OPTIONS,
      {0},
  };
  if (cmd_top_by_task(argc, argv)) return cmd_top_tasks(argc, argv); /* memory per task */
  top_opts_t opts = {.out.limit = 20, .depth = 24, .min_percent = 1.0};
  int first;
  const int rc = cli_parse(argc, argv, "s:n:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  cli_trace_kind_t kind;
  const int kc =
      cli_one_trace(argc, argv, first, &opts.out, "one trace at a time (use 'diff' to compare)",
                    opts.out.csv && opts.view != VIEW_FLAT
                        ? "--csv is for the flat table, not --tree or --inverted"
                        : NULL,
                    &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS) {
    if (opts.view != VIEW_FLAT)
      return cli_usage_error("--tree and --inverted are for memtrace traces, not task traces");
    cli_tasks_top_opts_t to = {.out = opts.out};
    int rc2 = cli_tasks_parse_by(opts.by_arg, &to.by);
    if (rc2 < 0) rc2 = cli_tasks_parse_metric("--sort", opts.sort_arg, &to.sort);
    return rc2 >= 0 ? rc2 : cli_tasks_top(argv[first], &to);
  }
  if (opts.by_arg) {
    const int rc2 = cli_parse_group(opts.by_arg, &opts.by);
    if (rc2 >= 0) return rc2;
  }
  if (opts.sort_arg) {
    static const cli_keyword_t sorts[] = {{"bytes", CTS_SORT_BYTES},
                                          {"count", CTS_SORT_COUNT},
                                          {"peak", CTS_SORT_PEAK},
                                          {"live", CTS_SORT_LIVE},
                                          {0}};
    int v;
    const int rc2 = cli_parse_keyword("--sort", opts.sort_arg, sorts, NULL, &v);
    if (rc2 >= 0) return rc2;
    opts.sort = (cts_sort_t)v;
  }

  /* The flat table needs only allocation points: exact, and small whatever the trace. Its
   * text and CSV read live and peak figures as samples by allocation point alone, which the
   * sites keep (live_by_site: a free then touches no node record); its JSON also prints the
   * live and peak counts of allocations, which only the nodes' full records hold. The trees
   * as text, sorted by bytes or count, read each node's allocated figures alone (and the
   * heap's totals): by site, the nodes keep 24-byte records rather than 64-byte ones. */
  const bool flat = opts.view == VIEW_FLAT;
  const bool allocated_tree = opts.sort == CTS_SORT_BYTES || opts.sort == CTS_SORT_COUNT;
  const cts_alloc_profile_config_t cfg = {
      .stacks = true,
      .leaf_only = flat,
      .skip_histograms = true,
      .live_by_site = !opts.out.json && (flat || allocated_tree)};
  cli_trace_t t;
  int code = cli_trace_load(&t, argv[first], &cfg, opts.out.quiet);
  if (code != CLI_EXIT_OK && code != CLI_EXIT_DATA) {
    cli_trace_free(&t);
    return code;
  }
  cts_out_t *out = cli_stdout_for(&opts.out);
  cts_json_t json, *w = opts.out.json ? &json : NULL;
  if (w) cts_json_init(w, out);
  if (!opts.out.json && !opts.out.csv) {
    cli_text_trace_header(out, &t);
    print_totals_text(out, &t);
  }
  int view_code = CLI_EXIT_OK;
  if (opts.view == VIEW_FLAT) {
    cts_rows_t rows;
    const cts_frames_t frames = cli_trace_frames(&t);
    if (cts_rows_build(&rows, &t.prof.stacks, &frames, opts.by, opts.sort, 0, 0)) {
      cli_error("out of memory");
      view_code = CLI_EXIT_INTERNAL;
    } else {
      cts_rows_sort(&rows, opts.sort);
      if (w)
        print_flat_json(w, &t, &rows, &opts);
      else if (opts.out.csv)
        print_flat_csv(out, &t, &rows, &opts);
      else
        print_flat_text(out, &t, &rows, &opts);
      cts_rows_fini(&rows);
    }
  } else {
    /* Frames with the same label (per --by) are one node, as people read them. */
    const cts_frames_t frames = cli_trace_frames(&t);
    cts_labels_t labels;
    cts_labels_init(&labels, &frames, (cts_label_style_t)opts.by);
    cts_stacks_t inv = {0};
    printed_tree_t pt = {0};
    int e;
    if (opts.view == VIEW_TREE && !w) {
      /* The text tree reads two figures a node: the profile's trie is relabelled in place
       * (no second trie, nor its records), and is nodes alone afterwards. */
      uint64_t *metric, *shown;
      e = cts_stacks_relabel_in_place(&t.prof.stacks, &labels, opts.sort, shown_sort(opts.sort),
                                      &metric, &shown);
      if (!e) view_code = print_tree(out, &t, &t.prof.stacks, &labels, &opts, metric, shown);
    } else {
      /* JSON and the callers view read every figure: the profile's trie is relabelled in
       * place with its records (no second trie), and only the printed nodes get all of
       * their inclusive figures. */
      e = cts_stacks_relabel_merge_in_place(&t.prof.stacks, &labels);
      const cts_stacks_t *printed = &t.prof.stacks;
      if (!e && opts.view == VIEW_INVERTED) {
        e = build_inverted(&t.prof.stacks, opts.depth, &inv);
        drop_trie(&t.prof.stacks);   /* (inv carries the figures: not read again) */
        cts_stacks_drop_table(&inv); /* (walked from here on, never interned into) */
        printed = &inv;
      }
      if (!e) e = printed_tree_build(&pt, printed, &opts);
      drop_trie(&t.prof.stacks);
      cts_stacks_fini(&inv);
      if (!e)
        view_code = print_printed_tree(out, w, &t, &pt, &labels, &opts, opts.view == VIEW_INVERTED);
    }
    if (e) {
      cli_error("out of memory");
      view_code = CLI_EXIT_INTERNAL;
    }
    cts_stacks_fini(&inv);
    cts_labels_fini(&labels);
  }
  if (view_code > code) code = view_code;
  code = cli_finish_output(out, code);
  cli_trace_free(&t);
  return code;
}
