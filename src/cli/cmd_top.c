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
    "      --csv           print CSV (flat table only)\n" CLI_FRAME_HELP CLI_WIDTH_HELP
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
  cli_out_heading(o, "Total    %s allocated in %s samples (%s sampled blocks, ~%s allocations)\n",
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
  cli_out_heading(o, "\n%s %zu of %zu allocation sites by %s (grouped by %s):\n",
                  shown < rows->n ? "Top" : "All", shown, rows->n, sort_names[opts->sort],
                  group_names[opts->by]);
  cts_out_str(o, "   allocated       %       allocs    peak live  live at end  site\n");
  const uint64_t total = cts_alloc_profile_samples(p);
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows->rows[i];
    char a[32], b[32], c[32], d[32], before[128], after[96] = "";
    const char *site = cli_site_name(r);
    snprintf(before, sizeof before, "%12s  %5.1f%%  %11s  %11s  %11s  ",
             cli_est_bytes(p, r->st.samples, false, a, sizeof a),
             total ? 100.0 * (double)r->st.samples / (double)total : 0.0,
             cli_grouped(cts_est_round(r->st.est_allocs), b, sizeof b),
             cli_est_bytes(p, r->st.peak_samples, false, c, sizeof c),
             cli_est_bytes(p, r->st.live_samples, false, d, sizeof d));
    if (cli_show_ci(p, r->st.samples)) {
      char ci[96];
      const char *full = cli_est_bytes(p, r->st.samples, true, ci, sizeof ci);
      const char *paren = strchr(full, '(');
      snprintf(after, sizeof after, "  [%.*s]", paren ? (int)(strlen(paren) - 2) : 0,
               paren ? paren + 1 : "");
    }
    cli_out_fitted_row(o, before, site, after);
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

/* How a tree's children are listed and ordered for printing. */
typedef struct child_walk {
  uint32_t (*next)(const void *ctx, uint32_t c); /* c's next sibling, UINT32_MAX: none */
  bool (*shown)(const void *ctx, uint32_t c);    /* whether c is printed */
  int (*cmp)(const void *a, const void *b, void *ctx);
  void *ctx;
} child_walk_t;

/* The printed children from first on (UINT32_MAX: none), in print order: an array to
 * free(), *n of them (NULL when none; *n SIZE_MAX when out of memory). */
static uint32_t *sorted_children(const child_walk_t *cw, uint32_t first, size_t *n) {
  size_t count = 0;
  for (uint32_t c = first; c != UINT32_MAX; c = cw->next(cw->ctx, c))
    if (cw->shown(cw->ctx, c)) count++;
  *n = count;
  if (!count) return NULL;
  uint32_t *children = malloc(count * sizeof *children);
  if (!children) {
    *n = SIZE_MAX;
    return NULL;
  }
  size_t k = 0;
  for (uint32_t c = first; c != UINT32_MAX; c = cw->next(cw->ctx, c))
    if (cw->shown(cw->ctx, c)) children[k++] = c;
  qsort_r(children, count, sizeof *children, cw->cmp, cw->ctx);
  return children;
}

static uint32_t tree_next(const void *ctx, uint32_t c) {
  const tree_print_t *tp = ctx;
  return tp->next_sibling[c] ? tp->next_sibling[c] : UINT32_MAX;
}

static bool tree_shown(const void *ctx, uint32_t c) {
  const tree_print_t *tp = ctx;
  return reaches(tp->metric[c], tp->threshold);
}

/* One line of a text tree: the node's share of the total, its bytes column (inclusive) and,
 * in the call tree, its self bytes (self: NULL in the callers view, which shows none). */
static void print_text_line(cts_out_t *o, const cts_alloc_profile_t *p, uint64_t metric,
                            uint64_t total, uint64_t shown, const uint64_t *self, uint32_t depth,
                            const char *label) {
  char a[32], b[32] = "";
  cli_est_bytes(p, shown, false, a, sizeof a);
  if (self) cli_est_bytes(p, *self, false, b, sizeof b);
  char before[128];
  snprintf(before, sizeof before, "%6.1f%%  %11s  %11s  %*s",
           total ? 100.0 * (double)metric / (double)total : 0.0, a, b,
           (int)(depth > 60 ? 60 : depth) * 2, "");
  cli_out_fitted_row(o, before, label, "\n");
}

/* Prints node n, at depth frames from the root, and the subtree below it. */
static void print_node(tree_print_t *tp, uint32_t n, uint32_t depth) {
  const char *label = cts_labels_name(tp->labels, tp->s->nodes[n].code);
  /* Self = inclusive - the children's inclusive (integers, exact): the trie of an in-place
   * relabel keeps no figures. */
  uint64_t self = tp->shown[n];
  for (uint32_t c = tp->first_child[n]; c; c = tp->next_sibling[c]) self -= tp->shown[c];
  print_text_line(tp->o, &tp->t->prof, tp->metric[n], tp->total, tp->shown[n], &self, depth, label);
  if ((long)depth >= tp->max_depth) return;
  size_t nchildren;
  uint32_t *children = sorted_children(
      &(child_walk_t){.next = tree_next, .shown = tree_shown, .cmp = cmp_children, .ctx = tp},
      tp->first_child[n] ? tp->first_child[n] : UINT32_MAX, &nchildren);
  if (nchildren == SIZE_MAX) {
    tp->nomem = true;
    return;
  }
  for (size_t i = 0; i < nchildren; i++) print_node(tp, children[i], depth + 1);
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
  cli_out_heading(o,
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
  print_node(&tp, 0, 0);
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
  uint32_t parent;                    /* printed index of its parent (the root: itself) */
  uint32_t first_child, next_sibling; /* printed indices, UINT32_MAX = none */
  uint64_t code;                      /* label */
  uint64_t order;                     /* siblings of the same metric print in this order */
  uint32_t depth;
  uint64_t metric; /* inclusive, by the sort key */
  cts_site_stats_t incl, self;
} printed_node_t;

typedef struct printed_tree {
  printed_node_t *nodes;
  size_t n, cap;
  uint32_t root; /* printed index of the root */
  uint64_t total, threshold;
} printed_tree_t;

/* Appends a printed node (its links none yet): its index, or UINT32_MAX out of memory. */
static uint32_t printed_add(printed_tree_t *pt, const printed_node_t *n) {
  if (pt->n >= UINT32_MAX - 1 || cts_grow((void **)&pt->nodes, &pt->cap, pt->n, sizeof *pt->nodes))
    return UINT32_MAX;
  pt->nodes[pt->n] = *n;
  pt->nodes[pt->n].first_child = pt->nodes[pt->n].next_sibling = UINT32_MAX;
  return (uint32_t)pt->n++;
}

/* Whether trie node i (parent p, printed index kept[p] the nearest printed ancestor) is
 * printed: only below a printed parent, so its depth is that parent's + 1. */
static bool is_printed(const printed_tree_t *pt, const cts_stacks_t *s, const uint32_t *kept,
                       const uint64_t *metric, uint32_t i, long max_depth) {
  const uint32_t p = s->nodes[i].parent;
  const printed_node_t *pp = &pt->nodes[kept[p]];
  return pp->node == p && reaches(metric[i], pt->threshold) && (long)pp->depth + 1 <= max_depth;
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
    kept[i] = printed_add(
        pt, &(printed_node_t){.node = i,
                              .parent = i ? kept[s->nodes[i].parent] : 0,
                              .code = s->nodes[i].code,
                              .order = i,
                              .depth = i ? pt->nodes[kept[s->nodes[i].parent]].depth + 1 : 0,
                              .metric = metric[i]});
    if (kept[i] == UINT32_MAX) e = -ENOMEM;
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

/* Children by the metric, largest first, then in their order (that of the trie's nodes). */
static int cmp_printed(const void *a, const void *b, void *arg) {
  const printed_node_t *nodes = arg;
  const printed_node_t *x = &nodes[*(const uint32_t *)a], *y = &nodes[*(const uint32_t *)b];
  if (x->metric != y->metric) return x->metric > y->metric ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
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

static uint32_t printed_next(const void *ctx, uint32_t c) {
  const printed_node_t *nodes = ctx;
  return nodes[c].next_sibling;
}

static bool printed_shown(const void *ctx, uint32_t c) {
  (void)ctx;
  (void)c;
  return true; /* (a printed tree holds only what it prints) */
}

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
    if (k == pp->pt->root)
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
  size_t nchildren;
  uint32_t *children = sorted_children(&(child_walk_t){.next = printed_next,
                                                       .shown = printed_shown,
                                                       .cmp = cmp_printed,
                                                       .ctx = (void *)pp->pt->nodes},
                                       n->first_child, &nchildren);
  if (nchildren == SIZE_MAX) {
    pp->nomem = true;
    return;
  }
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
  print_printed(&pp, pt->root, 0);
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

/* ---- the callers view, made without its trie --------------------------------------------- */

/* The callers view is the trie of the call tree's stacks reversed (allocation point first)
 * and cut at --depth frames, each carrying the self figures of the tree node it came from
 * (a source: a node that allocated). That trie can be several times the tree's size (23.5 M
 * nodes for default150.ctf's 7.9 M), so it is not made: its nodes are walked depth first,
 * each as the run of sources whose reversed stacks share its path, split by the label of
 * their next frame; only the printed nodes are kept. The output is the trie's: a node's
 * children come in the order the trie would have made them (by their first source, the
 * sources taken in the tree's order), which orders siblings of the same figure and the sums
 * of est_allocs (children from the last made, as cts_stacks_inclusive). No node budget
 * applies: the walk holds a few words per source, not per node, so every stack the tree
 * kept is in the view, however many nodes its trie would have had. */

/* A source on its walk: its ordinal (sources are in the tree's order) and the tree node
 * whose label is its next frame (0: none left). */
typedef struct inv_entry {
  uint32_t ord, cur;
} inv_entry_t;

/* Scratch of the walk: entries, or sort keys. */
typedef union inv_slot {
  inv_entry_t e;
  uint64_t key;
} inv_slot_t;

typedef struct inv_walk {
  const cts_stacks_t *s;
  const top_opts_t *opts;
  uint32_t *src;   /* tree node of each source */
  uint32_t *len;   /* its frames, at most opts->depth */
  inv_entry_t *e;  /* the sources' walks, each node's run in source order */
  inv_slot_t *tmp; /* scratch, as many */
  uint64_t *keys;  /* a run's sort keys: label << 32 | place in the run */
  unsigned label_bytes;
  uint32_t *groups; /* stack of the runs of children being walked: start, end, first, label */
  size_t ngroups, groups_cap;
  double *ests; /* stack of the walked children's inclusive est_allocs */
  size_t nests, ests_cap;
  uint32_t *pending; /* stack of printed nodes whose parent is not printed yet */
  size_t npending, pending_cap;
  /* Text only (no est_allocs printed): each source's sort key, so that a child that cannot
   * be printed is summed rather than walked. */
  uint64_t *metric;
  printed_tree_t *pt;
  int err;
} inv_walk_t;

/* Pushes a walked child's inclusive est_allocs (w->err set if out of memory). */
static void push_est(inv_walk_t *w, double est) {
  if (w->err) return;
  if (cts_grow((void **)&w->ests, &w->ests_cap, w->nests, sizeof *w->ests))
    w->err = -ENOMEM;
  else
    w->ests[w->nests++] = est;
}

/* Sorts keys[0..m) by their label (high half), keeping the order of equal ones: the low
 * halves, places in the run, are in order. LSD radix by byte of the label, scratch tmp. */
static void sort_by_label(uint64_t *keys, inv_slot_t *tmp, size_t m, unsigned label_bytes) {
  if (m <= 32) {
    for (size_t j = 1; j < m; j++) {
      const uint64_t k = keys[j];
      size_t i = j;
      for (; i > 0 && keys[i - 1] > k; i--) keys[i] = keys[i - 1];
      keys[i] = k;
    }
    return;
  }
  for (unsigned b = 0; b < label_bytes; b++) {
    size_t count[257] = {0};
    const unsigned shift = 32 + 8 * b;
    for (size_t j = 0; j < m; j++) count[(keys[j] >> shift & 255) + 1]++;
    for (size_t d = 1; d < 257; d++) count[d] += count[d - 1];
    for (size_t j = 0; j < m; j++) tmp[count[keys[j] >> shift & 255]++].key = keys[j];
    for (size_t j = 0; j < m; j++) keys[j] = tmp[j].key;
  }
}

/* Pushes v on a stack of uint32_t (false: out of memory). */
static bool push_u32(uint32_t **v, size_t *n, size_t *cap, uint32_t x) {
  if (cts_grow((void **)v, cap, *n, sizeof **v)) return false;
  (*v)[(*n)++] = x;
  return true;
}

static bool push_group(inv_walk_t *w, uint32_t lo, uint32_t hi, uint32_t first, uint32_t label) {
  if (w->ngroups + 4 > w->groups_cap &&
      cts_grow((void **)&w->groups, &w->groups_cap, w->ngroups + 3, sizeof *w->groups))
    return false;
  uint32_t *g = &w->groups[w->ngroups];
  g[0] = lo;
  g[1] = hi;
  g[2] = first;
  g[3] = label;
  w->ngroups += 4;
  return true;
}

/* Puts the runs groups[gbase..) (4 words each) in the order of their first source. */
static void order_groups(inv_walk_t *w, size_t gbase) {
  const size_t ng = (w->ngroups - gbase) / 4;
  if (ng < 2) return; /* (groups may still be NULL: no offset from it) */
  uint32_t *g = &w->groups[gbase];
  for (size_t j = 1; j < ng; j++) { /* (nearly always few, and nearly in order) */
    uint32_t k[4];
    memcpy(k, &g[4 * j], sizeof k);
    size_t i = j;
    for (; i > 0 && g[4 * (i - 1) + 2] > k[2]; i--) memcpy(&g[4 * i], &g[4 * (i - 1)], sizeof k);
    memcpy(&g[4 * i], k, sizeof k);
  }
}

/* Links the printed nodes above pending[base] as children of printed node parent and pops
 * them. */
static void adopt(inv_walk_t *w, size_t base, uint32_t parent) {
  for (size_t j = w->npending; j-- > base;) {
    printed_node_t *c = &w->pt->nodes[w->pending[j]];
    c->parent = parent;
    c->next_sibling = w->pt->nodes[parent].first_child;
    w->pt->nodes[parent].first_child = w->pending[j];
  }
  w->npending = base;
}

/* Records node (code, depth, order) with those figures if it is printed: the root, or one
 * that reaches the threshold (its parent then does too: a child's figure is at most its
 * parent's), its printed children above pending[base]. */
static void inv_record(inv_walk_t *w, size_t base, uint64_t code, uint32_t depth, uint64_t order,
                       const cts_site_stats_t *incl, const cts_site_stats_t *self, double est) {
  const uint64_t metric = cts_site_stats_metric(incl, w->opts->sort);
  if (depth && !reaches(metric, w->pt->threshold)) {
    w->npending = base; /* (none) */
    return;
  }
  printed_node_t n = {.node = UINT32_MAX,
                      .code = code,
                      .order = order,
                      .depth = depth,
                      .metric = metric,
                      .incl = *incl,
                      .self = *self};
  n.incl.est_allocs = est;
  const uint32_t k = printed_add(w->pt, &n);
  if (k == UINT32_MAX) {
    w->err = -ENOMEM;
    return;
  }
  w->pt->nodes[k].parent = k;
  adopt(w, base, k);
  if (depth && !push_u32(&w->pending, &w->npending, &w->pending_cap, k)) w->err = -ENOMEM;
}

/* Whether the node of sources e[lo..hi) reaches the threshold (its sort key is theirs). */
static bool inv_reaches(const inv_walk_t *w, size_t lo, size_t hi) {
  uint64_t sum = 0;
  for (size_t j = lo; j < hi; j++) sum += w->metric[w->e[j].ord];
  return reaches(sum, w->pt->threshold);
}

/* The inclusive figures of the node of sources e[lo..hi) without its walk (*est: 0, for
 * the text, which prints none). */
static void inv_sum(const inv_walk_t *w, size_t lo, size_t hi, cts_site_stats_t *incl,
                    double *est) {
  *incl = (cts_site_stats_t){0};
  for (size_t j = lo; j < hi; j++) {
    const cts_site_stats_t f = cts_stacks_self(w->s, w->src[w->e[j].ord]);
    cts_site_stats_add(incl, &f);
  }
  *est = 0;
}

/* Walks the node (label code, at depth) whose sources are e[lo..hi), in source order:
 * returns its inclusive figures in *incl and their est_allocs in *est. */
static void inv_node(inv_walk_t *w, size_t lo, size_t hi, uint64_t code, uint32_t depth,
                     cts_site_stats_t *incl, double *est) {
  const uint32_t first = w->e[lo].ord;
  const bool at_max = (long)depth >= w->opts->depth;
  /* The sources that end here first (their self figures are this node's), in order. */
  size_t c = lo;
  if (at_max) {
    c = hi;
  } else {
    while (c < hi && !w->e[c].cur) c++;
    size_t t = 0;
    for (size_t j = c; j < hi; j++)
      if (!w->e[j].cur)
        w->e[c++] = w->e[j];
      else
        w->tmp[t++].e = w->e[j];
    for (size_t j = 0; j < t; j++) w->e[c + j] = w->tmp[j].e;
  }
  cts_site_stats_t self = {0};
  for (size_t j = lo; j < c; j++) {
    const cts_site_stats_t f = cts_stacks_self(w->s, w->src[w->e[j].ord]);
    cts_site_stats_add(&self, &f);
  }
  *incl = self;
  /* The others by the label of their next frame, which is read with the frame after it (one
   * look at the tree's node: a likely cache miss), in source order within a label. */
  const size_t m = hi - c;
  const cts_stack_node_t *nodes = w->s->nodes;
  bool one = true;
  for (size_t j = 0; j < m; j++) {
    const cts_stack_node_t *n = &nodes[w->e[c + j].cur];
    w->keys[j] = n->code << 32 | j;
    w->e[c + j].cur = n->parent;
    one = one && w->keys[j] >> 32 == w->keys[0] >> 32;
  }
  if (!one) {
    sort_by_label(w->keys, w->tmp, m, w->label_bytes);
    for (size_t j = 0; j < m; j++) w->tmp[j].e = w->e[c + (uint32_t)w->keys[j]];
    for (size_t j = 0; j < m; j++) w->e[c + j] = w->tmp[j].e;
  }
  const size_t gbase = w->ngroups;
  for (size_t j = 0; j < m && !w->err;) {
    size_t k = j;
    while (k < m && w->keys[k] >> 32 == w->keys[j] >> 32) k++;
    if (!push_group(w, (uint32_t)(c + j), (uint32_t)(c + k), w->e[c + j].ord,
                    (uint32_t)(w->keys[j] >> 32)))
      w->err = -ENOMEM;
    j = k;
  }
  order_groups(w, gbase); /* the order the trie makes them */
  const size_t ng = (w->ngroups - gbase) / 4, ebase = w->nests, pbase = w->npending;
  for (size_t g = 0; g < ng && !w->err; g++) {
    const uint32_t *grp = &w->groups[gbase + 4 * g];
    cts_site_stats_t child;
    double child_est;
    if (w->metric && !inv_reaches(w, grp[0], grp[1]))
      inv_sum(w, grp[0], grp[1], &child, &child_est); /* (nothing under it printed) */
    else
      inv_node(w, grp[0], grp[1], grp[3], depth + 1, &child, &child_est);
    cts_site_stats_add(incl, &child);
    push_est(w, child_est);
  }
  w->ngroups = gbase;
  /* est_allocs: self, then the children from the last made (cts_stacks_inclusive's). */
  double sum = self.est_allocs;
  for (size_t j = w->nests; j-- > ebase;) sum += w->ests[j];
  w->nests = ebase;
  *est = sum;
  if (!w->err) inv_record(w, pbase, code, depth, first, incl, &self, sum);
}

/* Resets the walks: every source at its own node, in order. */
static void inv_start(inv_walk_t *w, uint32_t nsrc) {
  for (uint32_t o = 0; o < nsrc; o++) w->e[o] = (inv_entry_t){.ord = o, .cur = w->src[o]};
}

/* The callers view of tree s (relabelled, with its records) as a printed tree. Returns 0
 * or -ENOMEM. */
static int inverted_build(printed_tree_t *pt, const cts_stacks_t *s, const top_opts_t *opts,
                          size_t nlabels) {
  *pt = (printed_tree_t){0};
  inv_walk_t w = {.s = s, .opts = opts, .pt = pt, .label_bytes = 1};
  while (w.label_bytes < 4 && nlabels >> (8 * w.label_bytes)) w.label_bytes++;
  uint32_t nsrc = 0;
  uint64_t total = 0;
  for (uint32_t i = 0; i < s->count; i++) {
    const cts_site_stats_t self = cts_stacks_self(s, i);
    if (!self.allocs) continue;
    nsrc++;
    total += cts_site_stats_metric(&self, opts->sort);
  }
  pt->total = total;
  pt->threshold = (uint64_t)((double)total * opts->min_percent / 100.0);
  w.src = malloc(((size_t)nsrc + 1) * sizeof *w.src);
  w.e = malloc(((size_t)nsrc + 1) * sizeof *w.e);
  w.tmp = malloc(((size_t)nsrc + 1) * sizeof *w.tmp);
  w.keys = malloc(((size_t)nsrc + 1) * sizeof *w.keys);
  w.len = malloc(((size_t)nsrc + 1) * sizeof *w.len);
  /* The nodes keep no depth: the sources' are taken from one pass over them. */
  uint32_t *depths = cts_stacks_depths(s);
  int e = w.src && w.e && w.tmp && w.keys && w.len && depths && nlabels < UINT32_MAX ? 0 : -ENOMEM;
  if (!opts->out.json && !(w.metric = malloc(((size_t)nsrc + 1) * sizeof *w.metric))) e = -ENOMEM;
  for (uint32_t i = 0, o = 0; !e && i < s->count; i++) {
    const cts_site_stats_t self = cts_stacks_self(s, i);
    if (!self.allocs) continue;
    if (w.metric) w.metric[o] = cts_site_stats_metric(&self, opts->sort);
    w.len[o] = (long)depths[i] < opts->depth ? depths[i] : (uint32_t)opts->depth;
    w.src[o++] = i;
  }
  free(depths);
  cts_site_stats_t incl;
  double est;
  if (!e && nsrc) {
    inv_start(&w, nsrc);
    inv_node(&w, 0, nsrc, 0, 0, &incl, &est);
    e = w.err;
  } else if (!e && printed_add(pt, &(printed_node_t){.node = UINT32_MAX}) == UINT32_MAX) {
    e = -ENOMEM; /* (no source: the root alone) */
  }
  if (!e) pt->root = (uint32_t)pt->n - 1;
  free(w.src);
  free(w.len);
  free(w.e);
  free(w.tmp);
  free(w.keys);
  free(w.metric);
  free(w.groups);
  free(w.ests);
  free(w.pending);
  if (e) {
    free(pt->nodes);
    *pt = (printed_tree_t){0};
  }
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
      CLI_WIDTH_OPTIONS,
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
      if (!e)
        e = opts.view == VIEW_INVERTED ? inverted_build(&pt, &t.prof.stacks, &opts, labels.n)
                                       : printed_tree_build(&pt, &t.prof.stacks, &opts);
      drop_trie(&t.prof.stacks);
      if (!e)
        view_code = print_printed_tree(out, w, &t, &pt, &labels, &opts, opts.view == VIEW_INVERTED);
    }
    if (e) {
      cli_error("out of memory");
      view_code = CLI_EXIT_INTERNAL;
    }
    cts_labels_fini(&labels);
  }
  if (view_code > code) code = view_code;
  code = cli_finish_output(out, code);
  cli_trace_free(&t);
  return code;
}
