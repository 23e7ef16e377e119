/* SPDX-License-Identifier: MIT */
/* info, stats, top, leaks and diff on mirage-profile task traces: the options and the text,
 * JSON and CSV printers of the figures analysis/task_summary.h computes from the task model
 * (analysis/tasks.h). */
#include "cmd_tasks.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/diff.h"
#include "../analysis/hist.h"
#include "cli.h"
#include "hist_views.h"
#include "load.h"

#define NONE CTS_TASKS_NONE

static int load(cli_tasks_t *t, const char *path, bool quiet, bool keep_packets) {
  const cts_tasks_config_t cfg = {.lanes = true};
  return cli_tasks_load(t, path, &cfg, quiet, keep_packets, NULL, NULL);
}

static bool loaded(int code) {
  return code == CLI_EXIT_OK || code == CLI_EXIT_DATA;
}

static void json_header(cts_json_t *w, const cli_tasks_t *t) {
  cts_json_kv_str(w, "trace", t->path);
  cts_json_kv_str(w, "kind", "tasks");
  cts_json_kv_str(w, "format", "mirage-profile");
  cts_json_kv_u64(w, "events", t->m.events);
  cts_json_kv_u64(w, "lanes", t->m.nlanes);
  cts_json_kv_fixed(w, "duration_s", cli_tasks_duration_s(t), 9);
  cts_json_key(w, "reader_result");
  cli_jw_reader_result(w, t->err);
  if (t->m.lost) /* recorded by the writer (ctfscope_lost): events it could not place */
    cts_json_kv_u64(w, "events_lost", t->m.lost);
  cts_json_ws(w, "\n ");
}

/* The task counts of info and stats, as one JSON object. */
static void json_totals(cts_json_t *w, const cts_task_totals_t *k) {
  cts_json_object(w);
  cts_json_kv_u64(w, "total", k->tasks);
  cts_json_kv_u64(w, "created", k->created);
  cts_json_kv_u64(w, "preexisting", k->preexisting);
  cts_json_kv_u64(w, "resolved", k->resolved);
  cts_json_kv_u64(w, "failed", k->failed);
  cts_json_kv_u64(w, "merged", k->merged);
  cts_json_kv_u64(w, "pending", k->pending);
  cts_json_kv_u64(w, "should_resolve_pending", k->should_pending);
  cts_json_end(w);
}

/* The writer's own count of events it dropped, when it recorded one. */
static void text_lost(cts_out_t *o, const cli_tasks_t *t) {
  char a[32];
  if (t->m.lost)
    cts_out_printf(o,
                   "Lost     %s events: the writer found no room for them (more threads "
                   "than packets; CTFSCOPE_TASKS_PACKETS)\n",
                   cli_grouped(t->m.lost, a, sizeof a));
}

static void text_header(cts_out_t *o, const cli_tasks_t *t) {
  char a[32];
  cli_out_heading(o, "Trace    %s: mirage-profile task trace, %s events, %.6f s, %zu lane%s%s\n",
                  cli_basename(t->path), cli_grouped(t->m.events, a, sizeof a),
                  cli_tasks_duration_s(t), t->m.nlanes, t->m.nlanes == 1 ? "" : "s",
                  t->m.nlanes > 1 ? " (threads writing at the same time)" : "");
  text_lost(o, t);
}

/* ---- info ------------------------------------------------------------------------------ */

static const char *layout(const cli_tasks_t *t, char *buf, size_t size) {
  if (!t->packets_seen) return "no packets";
  if (t->packets_full_content == t->packets_seen)
    snprintf(buf, size, "stream of %llu packet%s of %u to %u bytes",
             (unsigned long long)t->packets_seen, t->packets_seen == 1 ? "" : "s", t->packet_min,
             t->packet_max);
  else if (t->packet_min == t->packet_max || t->packet_max - t->packet_min < 4)
    snprintf(buf, size, "ring of %llu packets of %u bytes%s", (unsigned long long)t->packets_seen,
             t->packet_min, t->sum.wrapped ? ", wrapped (the oldest events were overwritten)" : "");
  else
    snprintf(buf, size, "%llu packets of %u to %u bytes", (unsigned long long)t->packets_seen,
             t->packet_min, t->packet_max);
  return buf;
}

/* info --json: one member per line. */
static void print_info_json(cts_json_t *w, const cli_tasks_t *t, const cts_task_totals_t *s,
                            bool packets) {
  const cts_tasks_t *m = &t->m;
  cts_json_object(w);
  cts_json_item_ws(w, "\n  "); /* one member per line */
  cts_json_kv_str(w, "file", t->path);
  cts_json_kv_u64(w, "file_size_bytes", t->file_size);
  cts_json_kv_str(w, "format", "mirage-profile");
  cts_json_key(w, "reader_result");
  cli_jw_reader_result(w, t->err);
  if (t->err) {
    cts_json_kv_str(w, "error", t->msg);
  }
  cts_json_kv_str(w, "layout",
                  !t->packets_seen                             ? "none"
                  : t->packets_full_content == t->packets_seen ? "stream"
                  : t->packet_max - t->packet_min < 4          ? "ring"
                                                               : "packets");
  cts_json_kv_bool(w, "wrapped", t->sum.wrapped);
  cts_json_kv_bool(w, "sequence_order", t->sum.sequence_order);
  cts_json_kv_u64(w, "packets_total", t->packets_seen);
  cts_json_key(w, "packets");
  cts_json_object(w);
  cts_json_kv_u64(w, "empty", t->packets_empty);
  cts_json_kv_u64(w, "truncated", t->packets_truncated);
  cts_json_kv_u64(w, "size_min", t->packet_min);
  cts_json_kv_u64(w, "size_max", t->packet_max);
  cts_json_end(w);
  cts_json_kv_u64(w, "lanes", m->nlanes);
  cts_json_kv_u64(w, "events_total", t->sum.events);
  cts_json_key(w, "events");
  cts_json_object(w);
  for (unsigned id = 0; id < CTS_MPROF_EVENT_IDS; id++)
    if (id < CTS_MPROF_MIRAGE_IDS || t->sum.events_by_id[id]) /* extensions when present */
      cts_json_kv_u64(w, cts_mprof_event_name(id), t->sum.events_by_id[id]);
  cts_json_end(w);
  cts_json_kv_u64(w, "warnings", t->sum.warnings);
  if (m->lost) {
    cts_json_kv_u64(w, "events_lost", m->lost);
  }
  if (m->have_anchor) { /* docs/formats/mprof.md §14.2 */
    cts_json_key(w, "clock_anchor");
    cts_json_object(w);
    cts_json_kv_i64(w, "pid", m->anchor_pid);
    cts_json_kv_u64(w, "trace_ns", m->anchor_ns);
    cts_json_kv_u64(w, "realtime_ns", m->anchor_other_ns);
    cts_json_end(w);
  }
  if (m->have_time) {
    cts_json_kv_u64(w, "first_event_ns", m->first_ns);
    cts_json_kv_u64(w, "last_event_ns", m->last_ns);
    cts_json_kv_fixed(w, "duration_s", cli_tasks_duration_s(t), 9);
  }
  cts_json_key(w, "tasks");
  json_totals(w, s);
  cts_json_kv_u64(w, "strings_distinct", m->strs.n);
  cts_json_key(w, "counters");
  cts_json_array(w);
  for (size_t i = 0; i < m->ncounters; i++) cts_json_str(w, cts_tasks_str(m, m->counters[i].name));
  cts_json_end(w);
  if (packets) {
    cts_json_key(w, "packet_list");
    cts_json_array(w);
    for (size_t i = 0; i < t->npackets; i++) {
      const cts_mprof_packet_t *p = &t->packets[i];
      cts_json_ws(w, "\n    ");
      cts_json_object(w);
      cts_json_kv_u64(w, "offset", p->offset);
      cts_json_kv_u64(w, "size", p->size);
      cts_json_kv_u64(w, "content_size", p->content_size);
      cts_json_kv_u64(w, "count", p->count);
      cts_json_kv_u64(w, "file_index", p->file_index);
      cts_json_kv_bool(w, "truncated", p->truncated);
      cts_json_end(w);
    }
    cts_json_ws(w, "\n  ");
    cts_json_end(w);
  }
  cts_json_ws(w, "\n");
  cts_json_end(w);
}

static void print_info_text(cts_out_t *o, const cli_tasks_t *t, const cts_task_totals_t *s,
                            bool packets) {
  const cts_tasks_t *m = &t->m;
  char a[64], b[160], c[64], d[64];
  cts_out_printf(o, "Trace          %s (%s, mirage-profile CTF task trace)\n", t->path,
                 cli_human_bytes((double)t->file_size, a, sizeof a));
  cts_out_printf(o, "Layout         %s; read in %s order\n", layout(t, b, sizeof b),
                 t->sum.sequence_order ? "sequence" : "file");
  cts_out_printf(o, "Lanes          %zu (threads writing at the same time)\n", m->nlanes);
  if (m->have_time)
    cts_out_printf(o, "Time           %.6f s, from %.9f s to %.9f s on the trace clock\n",
                   cli_tasks_duration_s(t), (double)m->first_ns * 1e-9, (double)m->last_ns * 1e-9);
  cts_out_printf(o, "\nEvents         %s:", cli_grouped(t->sum.events, a, sizeof a));
  bool any = false;
  for (unsigned id = 0; id < CTS_MPROF_EVENT_IDS; id++) {
    if (!t->sum.events_by_id[id]) continue;
    cts_out_printf(o, "%s %s %s", any ? "," : "", cts_mprof_event_name(id),
                   cli_grouped(t->sum.events_by_id[id], a, sizeof a));
    any = true;
  }
  cts_out_char(o, '\n');
  cts_out_printf(o, "Tasks          %s: %s created, %s preexisting (created before the trace)\n",
                 cli_grouped(s->tasks, a, sizeof a), cli_grouped(s->created, b, sizeof b),
                 cli_grouped(s->preexisting, c, sizeof c));
  cts_out_printf(o, "               %s resolved (%s failed), %s merged (becomes), %s pending",
                 cli_grouped(s->resolved, a, sizeof a), cli_grouped(s->failed, b, sizeof b),
                 cli_grouped(s->merged, c, sizeof c), cli_grouped(s->pending, d, sizeof d));
  if (s->should_pending)
    cts_out_printf(o, " (%s should have resolved)", cli_grouped(s->should_pending, a, sizeof a));
  cts_out_char(o, '\n');
  cts_out_printf(o, "Strings        %zu distinct (labels, failure texts, counter names)\n",
                 m->strs.n);
  cts_out_printf(o, "Counters       %zu", m->ncounters);
  for (size_t i = 0; i < m->ncounters && i < 8; i++)
    cts_out_printf(o, "%s%s", i ? ", " : ": ", cts_tasks_str(m, m->counters[i].name));
  cts_out_str(o, m->ncounters > 8 ? ", ...\n" : "\n");
  cts_out_printf(
      o, "Packets        %s: %s empty, %s truncated\n", cli_grouped(t->packets_seen, a, sizeof a),
      cli_grouped(t->packets_empty, b, sizeof b), cli_grouped(t->packets_truncated, c, sizeof c));
  cts_out_printf(o, "Result         %s%s (%llu warnings)\n", t->err ? "error: " : "ok",
                 t->err ? t->msg : "", (unsigned long long)t->sum.warnings);
  text_lost(o, t);
  if (m->have_anchor)
    cts_out_printf(o,
                   "Clock anchor   pid %lld: aligns with a memory trace of that process "
                   "(top --by task, report)\n",
                   (long long)m->anchor_pid);
  if (packets) {
    cts_out_str(o, "\n  offset     size  content  count  index\n");
    for (size_t i = 0; i < t->npackets; i++) {
      const cts_mprof_packet_t *p = &t->packets[i];
      cts_out_printf(o, "%8llu %8u %8u %6u %6u%s\n", (unsigned long long)p->offset, p->size,
                     p->content_size, p->count, p->file_index, p->truncated ? " truncated" : "");
    }
  }
}

int cli_tasks_info(cts_out_t *o, cts_json_t *w, const char *path, bool packets, bool quiet) {
  cli_tasks_t t;
  int code = load(&t, path, quiet, packets);
  if (!loaded(code)) {
    cli_tasks_free(&t);
    return code;
  }
  cts_task_totals_t s;
  cts_task_totals(&t.m, &s);
  if (w) {
    print_info_json(w, &t, &s, packets);
  } else {
    print_info_text(o, &t, &s, packets);
  }
  cli_tasks_free(&t);
  return code;
}

/* ---- stats ----------------------------------------------------------------------------- */

/* cli_human_ns for cli_print_quantile_lines. */
static const char *format_ns(double ns, const void *ctx, char *buf, size_t size) {
  (void)ctx;
  return cli_human_ns(ns, buf, size);
}

static void print_hist_text(cts_out_t *o, const cts_hist_t *h, bool bars) {
  char a[32], b[32];
  if (!h->total_blocks) {
    cts_out_str(o, "  (no task was both created and resolved in the trace)\n");
    return;
  }
  cli_print_quantile_lines(o, h, "by tasks", "by time", 1.0, format_ns, NULL);
  cts_hist_pow2_t bins;
  cts_hist_pow2(h, &bins);
  uint64_t max_tasks = 0, max_time = 0;
  for (int i = bins.lo; i <= bins.hi; i++) {
    if (bins.blocks[i] > max_tasks) max_tasks = bins.blocks[i];
    if (bins.samples[i] > max_time) max_time = bins.samples[i];
  }
  cts_out_printf(o, "  %21s  %9s  %6s  %10s  %6s\n", "range", "tasks", "%", "time", "%");
  for (int i = bins.lo; i <= bins.hi; i++) {
    char range[48], c[32], d[32];
    if (i == 0)
      snprintf(range, sizeof range, "0 ns");
    else
      snprintf(range, sizeof range, "%s - <%s",
               cli_human_ns((double)cts_hist_pow2_low(i), a, sizeof a),
               cli_human_ns((double)cts_hist_pow2_low(i + 1), b, sizeof b));
    cts_out_printf(
        o, "  %21s  %9s  %5.1f%%  %10s  %5.1f%%", range, cli_grouped(bins.blocks[i], c, sizeof c),
        100.0 * (double)bins.blocks[i] / (double)h->total_blocks,
        cli_human_ns((double)bins.samples[i], d, sizeof d),
        h->total_samples ? 100.0 * (double)bins.samples[i] / (double)h->total_samples : 0.0);
    if (bars) {
      const int wb = max_tasks ? (int)(20.0 * (double)bins.blocks[i] / (double)max_tasks + 0.5) : 0;
      const int ws = max_time ? (int)(20.0 * (double)bins.samples[i] / (double)max_time + 0.5) : 0;
      if (ws)
        cts_out_printf(o, "  %-20.*s %.*s", wb, "####################", ws, "====================");
      else if (wb)
        cts_out_printf(o, "  %.*s", wb, "####################");
    }
    cts_out_char(o, '\n');
  }
}

static void json_hist(cts_json_t *w, const cts_hist_t *h, bool with_bins) {
  cts_json_object(w);
  cts_json_kv_u64(w, "tasks", h->total_blocks);
  cts_json_kv_u64(w, "total_ns", h->total_samples);
  if (h->total_blocks) {
    cts_json_kv_u64(w, "min_ns", h->min);
    cts_json_kv_fixed(w, "mean_ns", h->sum_by_blocks / (double)h->total_blocks, 1);
  }
  for (int by_time = 0; by_time < 2; by_time++) {
    cts_json_key(w, by_time ? "percentiles_by_time_ns" : "percentiles_by_tasks_ns");
    cts_json_object(w);
    for (unsigned q = 0; q < 4; q++)
      cts_json_kv_u64(w, cli_quantile_names[q], cts_hist_quantile(h, cli_quantiles[q], by_time));
    cts_json_end(w);
  }
  if (with_bins) {
    cts_hist_pow2_t bins;
    cts_hist_pow2(h, &bins);
    cts_json_key(w, "bins");
    cts_json_array(w);
    for (int i = bins.lo; i <= bins.hi; i++) {
      cts_json_ws(w, "\n   ");
      cts_json_object(w);
      cts_json_kv_u64(w, "low_ns", cts_hist_pow2_low(i));
      cts_json_kv_u64(w, "high_ns", i ? cts_hist_pow2_low(i + 1) : 1);
      cts_json_kv_u64(w, "tasks", bins.blocks[i]);
      cts_json_kv_u64(w, "time_ns", bins.samples[i]);
      cts_json_end(w);
    }
    cts_json_end(w);
  }
  cts_json_end(w);
}

static void print_stats_json(cts_json_t *w, const cli_tasks_t *t, const cts_task_stats_t *s,
                             double span_ns) {
  const cts_tasks_t *m = &t->m;
  const cts_task_totals_t *k = &s->tot;
  cts_json_object(w);
  json_header(w, t);
  cts_json_key(w, "tasks");
  json_totals(w, k);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "time");
  cts_json_object(w);
  cts_json_kv_fixed(w, "span_ns", span_ns, 0);
  cts_json_kv_u64(w, "running_ns", k->running_ns);
  cts_json_kv_u64(w, "idle_ns", k->idle_ns);
  cts_json_kv_u64(w, "gc_ns", m->gc_ns);
  cts_json_kv_u64(w, "gc_pauses", m->gc_events);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "durations");
  json_hist(w, &s->all, true);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "types");
  cts_json_array(w);
  for (unsigned i = 0; i < CTS_TASK_SLOTS; i++) {
    const cts_task_type_stats_t *r = &s->types[i];
    if (!r->tasks) continue;
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_str(w, "type", cts_task_slot_name(i));
    cts_json_kv_u64(w, "tasks", r->tasks);
    cts_json_kv_u64(w, "resolved", r->resolved);
    cts_json_kv_u64(w, "failed", r->failed);
    cts_json_kv_u64(w, "merged", r->merged);
    cts_json_kv_u64(w, "pending", r->pending);
    cts_json_kv_u64(w, "runs", r->runs);
    cts_json_kv_u64(w, "running_ns", r->running_ns);
    cts_json_kv_u64(w, "alive_ns", r->alive_ns);
    cts_json_kv_u64(w, "waiting_ns", r->alive_ns > r->running_ns ? r->alive_ns - r->running_ns : 0);
    cts_json_key(w, "durations");
    json_hist(w, &r->dur, false);
    cts_json_end(w);
  }
  cts_json_ws(w, "\n ");
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "counters");
  cts_json_array(w);
  for (size_t i = 0; i < m->ncounters; i++) {
    const cts_tasks_counter_t *c = &m->counters[i];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_str(w, "name", cts_tasks_str(m, c->name));
    cts_json_kv_u64(w, "updates", c->updates);
    cts_json_kv_i64(w, "min", c->min);
    cts_json_kv_i64(w, "max", c->max);
    cts_json_kv_i64(w, "last", c->last);
    cts_json_kv_bool(w, "relative", c->relative);
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

static void print_stats_csv(cts_out_t *out, const cts_task_stats_t *s) {
  cts_out_str(out, "histogram,type,unit,low,high,tasks,time_ns\n");
  for (int ty = -1; ty < CTS_TASK_SLOTS; ty++) {
    const cts_hist_t *h = ty < 0 ? &s->all : &s->types[ty].dur;
    cts_hist_pow2_t bins;
    cts_hist_pow2(h, &bins);
    for (int i = bins.lo; i <= bins.hi; i++)
      cts_out_printf(out, "duration,%s,ns,%llu,%llu,%llu,%llu\n",
                     ty < 0 ? "all" : cts_task_slot_name((unsigned)ty),
                     (unsigned long long)cts_hist_pow2_low(i),
                     (unsigned long long)(i ? cts_hist_pow2_low(i + 1) : 1),
                     (unsigned long long)bins.blocks[i], (unsigned long long)bins.samples[i]);
  }
}

/* span_ns: the trace's time span; bars: draw bar charts. */
static void print_stats_text(cts_out_t *out, const cli_tasks_t *t, const cts_task_stats_t *s,
                             double span_ns, bool bars) {
  const cts_tasks_t *m = &t->m;
  char a[32], b[32], c[32], d[32], e[32], f[32];
  const cts_task_totals_t *k = &s->tot;
  char g0[32];
  const double lanes_span = span_ns * (double)(m->nlanes ? m->nlanes : 1);
  text_header(out, t);
  cts_out_printf(out,
                 "Time     running %s (%.1f%%), idle %s (%.1f%%) of %.6f s x %zu lane%s; gc %s "
                 "in %llu pause%s\n",
                 cli_human_ns((double)k->running_ns, a, sizeof a),
                 lanes_span > 0 ? 100.0 * (double)k->running_ns / lanes_span : 0.0,
                 cli_human_ns((double)k->idle_ns, b, sizeof b),
                 lanes_span > 0 ? 100.0 * (double)k->idle_ns / lanes_span : 0.0, span_ns * 1e-9,
                 m->nlanes, m->nlanes == 1 ? "" : "s", cli_human_ns((double)m->gc_ns, c, sizeof c),
                 (unsigned long long)m->gc_events, m->gc_events == 1 ? "" : "s");
  cts_out_printf(out,
                 "Tasks    %s: %s created, %s preexisting; %s resolved (%s failed), %s "
                 "merged, %s pending\n",
                 cli_grouped(k->tasks, a, sizeof a), cli_grouped(k->created, b, sizeof b),
                 cli_grouped(k->preexisting, c, sizeof c), cli_grouped(k->resolved, d, sizeof d),
                 cli_grouped(k->failed, e, sizeof e), cli_grouped(k->merged, f, sizeof f),
                 cli_grouped(k->pending, g0, sizeof g0));
  cts_out_str(out,
              "\nBy type            tasks  resolved  failed  merged  pending     running  "
              "   alive  p50 created->resolved  p99\n");
  for (unsigned i = 0; i < CTS_TASK_SLOTS; i++) {
    const cts_task_type_stats_t *r = &s->types[i];
    if (!r->tasks) continue;
    char g[32], h[32], j[32];
    cts_out_printf(out, "  %-15s %7s  %8s  %6s  %6s  %7s  %10s  %10s", cts_task_slot_name(i),
                   cli_grouped(r->tasks, a, sizeof a), cli_grouped(r->resolved, b, sizeof b),
                   cli_grouped(r->failed, c, sizeof c), cli_grouped(r->merged, d, sizeof d),
                   cli_grouped(r->pending, e, sizeof e),
                   cli_human_ns((double)r->running_ns, f, sizeof f),
                   cli_human_ns((double)r->alive_ns, g, sizeof g));
    if (r->dur.total_blocks)
      cts_out_printf(out, "  %23s  %s",
                     cli_human_ns((double)cts_hist_quantile(&r->dur, 0.5, false), h, sizeof h),
                     cli_human_ns((double)cts_hist_quantile(&r->dur, 0.99, false), j, sizeof j));
    cts_out_char(out, '\n');
  }
  cts_out_printf(out, "\nDurations, created -> resolved (%s tasks)\n",
                 cli_grouped(s->all.total_blocks, a, sizeof a));
  print_hist_text(out, &s->all, bars);
  if (bars && s->all.total_blocks)
    cts_out_str(out, "\n  bars: # tasks, = time (each scaled to its largest bin)\n");
  if (m->ncounters) {
    cts_out_str(out,
                "\nCounters                 updates           min           max          last\n");
    for (size_t i = 0; i < m->ncounters; i++) {
      const cts_tasks_counter_t *k2 = &m->counters[i];
      cts_out_printf(out, "  %-20s %11s %13lld %13lld %13lld%s\n", cts_tasks_str(m, k2->name),
                     cli_grouped(k2->updates, a, sizeof a), (long long)k2->min, (long long)k2->max,
                     (long long)k2->last,
                     k2->relative ? "  (relative: from 0 at the trace start)" : "");
    }
  }
}

int cli_tasks_stats(const char *path, const cli_tasks_stats_opts_t *opts) {
  cli_tasks_t t;
  int code = load(&t, path, opts->out.quiet, false);
  cts_task_stats_t *s = loaded(code) ? malloc(sizeof *s) : NULL;
  if (!s) {
    if (loaded(code)) cli_error("out of memory"), code = CLI_EXIT_INTERNAL;
    cli_tasks_free(&t);
    return code;
  }
  cts_task_stats(&t.m, s);
  const cts_tasks_t *m = &t.m;
  const double span_ns = m->have_time ? (double)(m->last_ns - m->first_ns) : 0.0;
  cts_out_t *out = cli_stdout_for(&opts->out);
  if (opts->out.json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_stats_json(&w, &t, s, span_ns);
  } else if (opts->out.csv) {
    print_stats_csv(out, s);
  } else {
    print_stats_text(out, &t, s, span_ns, opts->bars);
  }
  code = cli_finish_output(out, code);
  if (opts->svg || opts->png) {
    /* One panel per histogram: % of tasks and % of time per power-of-two bin, like the
     * memtrace histograms of `stats --svg`. */
    cli_hist_panel_t panels[CTS_TASK_SLOTS + 1];
    static char title_buf[CTS_TASK_SLOTS][64];
    size_t n = 0;
    panels[n++] =
        (cli_hist_panel_t){&s->all, "Task durations, created -> resolved (all types)", 1.0, NULL};
    for (unsigned i = 0; i < CTS_TASK_SLOTS; i++) {
      if (!s->types[i].dur.total_blocks) continue;
      snprintf(title_buf[i], sizeof title_buf[i], "%s tasks, created -> resolved",
               cts_task_slot_name(i));
      panels[n++] = (cli_hist_panel_t){&s->types[i].dur, title_buf[i], 1.0, NULL};
    }
    const cli_hist_svg_t svg = {panels, n, "% of tasks", "% of time", "tasks", "time", format_ns};
    const int img = cli_write_svg_and_png(opts->svg, opts->png, cli_write_hist_svg, &svg, &path, 1);
    if (img && code < img) code = img;
  }
  free(s);
  cli_tasks_free(&t);
  return code;
}

/* "label": the string, or null for an unlabelled task. */
static void json_label(cts_json_t *w, const cts_tasks_t *m, uint32_t label) {
  cts_json_key(w, "label");
  if (label != NONE)
    cts_json_str(w, cts_tasks_str(m, label));
  else
    cts_json_null(w);
}

/* ---- groups: top and diff -------------------------------------------------------------- */

int cli_tasks_parse_by(const char *arg, cts_task_group_by_t *out) {
  static const cli_keyword_t by[] = {{"label", CTS_TASK_BY_LABEL}, {"type", CTS_TASK_BY_TYPE}, {0}};
  int v = CTS_TASK_BY_LABEL;
  const int rc = arg ? cli_parse_keyword("--by", arg, by, " for a task trace", &v) : -1;
  if (rc < 0) *out = (cts_task_group_by_t)v;
  return rc;
}

int cli_tasks_parse_metric(const char *option, const char *arg, cts_task_metric_t *out) {
  static const cli_keyword_t metrics[] = {
      {"running", CTS_TASK_RUNNING}, {"count", CTS_TASK_COUNT}, {"alive", CTS_TASK_ALIVE}, {0}};
  int v = CTS_TASK_RUNNING;
  const int rc = arg ? cli_parse_keyword(option, arg, metrics, " for a task trace", &v) : -1;
  if (rc < 0) *out = (cts_task_metric_t)v;
  return rc;
}

static const char *const metric_keys[] = {"running", "count", "alive"};
static const char *const metric_names[] = {"running time", "task count", "time alive"};

static void print_top_json(cts_json_t *w, const cli_tasks_t *t, const cts_task_groups_t *gs,
                           const cts_task_totals_t *tot, const cli_tasks_top_opts_t *opts) {
  const cts_tasks_t *m = &t->m;
  const size_t shown = cli_rows_shown(&opts->out, gs->n);
  const char *by_key = opts->by == CTS_TASK_BY_LABEL ? "label" : "type";
  char name[64];
  cts_json_object(w);
  json_header(w, t);
  cts_json_kv_str(w, "group_by", by_key);
  cts_json_kv_str(w, "sort", metric_keys[opts->sort]);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "total");
  cts_json_object(w);
  cts_json_kv_u64(w, "tasks", tot->tasks);
  cts_json_kv_u64(w, "running_ns", tot->running_ns);
  cts_json_kv_u64(w, "idle_ns", tot->idle_ns);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "rows_total", gs->n);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "rows");
  cts_json_array(w);
  for (size_t i = 0; i < shown; i++) {
    const cts_task_group_t *g = &gs->g[i];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_str(w, by_key, cts_task_group_name(m, g, opts->by, name, sizeof name));
    cts_json_kv_u64(w, "tasks", g->tasks);
    cts_json_kv_u64(w, "running_ns", g->running_ns);
    cts_json_kv_u64(w, "runs", g->runs);
    cts_json_kv_u64(w, "alive_ns", g->alive_ns);
    cts_json_kv_u64(w, "resolved", g->resolved);
    cts_json_kv_u64(w, "failed", g->failed);
    cts_json_kv_u64(w, "merged", g->merged);
    cts_json_kv_u64(w, "pending", g->pending);
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

static void print_top_csv(cts_out_t *out, const cli_tasks_t *t, const cts_task_groups_t *gs,
                          const cts_task_totals_t *tot, const cli_tasks_top_opts_t *opts) {
  const cts_tasks_t *m = &t->m;
  const size_t shown = cli_rows_shown(&opts->out, gs->n);
  const char *by_key = opts->by == CTS_TASK_BY_LABEL ? "label" : "type";
  char name[64];
  cts_out_printf(out, "%s,tasks,running_ns,runs,alive_ns,resolved,failed,merged,pending\n", by_key);
  for (size_t i = 0; i < shown; i++) {
    const cts_task_group_t *g = &gs->g[i];
    cli_csv_str(out, cts_task_group_name(m, g, opts->by, name, sizeof name));
    cts_out_printf(out, ",%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", (unsigned long long)g->tasks,
                   (unsigned long long)g->running_ns, (unsigned long long)g->runs,
                   (unsigned long long)g->alive_ns, (unsigned long long)g->resolved,
                   (unsigned long long)g->failed, (unsigned long long)g->merged,
                   (unsigned long long)g->pending);
  }
}

static void print_top_text(cts_out_t *out, const cli_tasks_t *t, const cts_task_groups_t *gs,
                           const cts_task_totals_t *tot, const cli_tasks_top_opts_t *opts) {
  const cts_tasks_t *m = &t->m;
  const size_t shown = cli_rows_shown(&opts->out, gs->n);
  const char *by_key = opts->by == CTS_TASK_BY_LABEL ? "label" : "type";
  char a[32], b[32], c[32], d[32], name[64];
  text_header(out, t);
  cli_out_heading(out, "Total    %s tasks; running %s, idle %s\n",
                  cli_grouped(tot->tasks, a, sizeof a),
                  cli_human_ns((double)tot->running_ns, b, sizeof b),
                  cli_human_ns((double)tot->idle_ns, c, sizeof c));
  cli_out_heading(out, "\n%s %zu of %zu %ss by %s%s:\n", shown < gs->n ? "Top" : "All", shown,
                  gs->n, by_key, metric_names[opts->sort],
                  opts->by == CTS_TASK_BY_LABEL ? " (unlabelled tasks by their type)" : "");
  cts_out_printf(out, "     running       %%    periods      tasks       alive  pending  %s\n",
                 by_key);
  for (size_t i = 0; i < shown; i++) {
    const cts_task_group_t *g = &gs->g[i];
    char figures[192];
    snprintf(figures, sizeof figures, "%12s  %5.1f%%  %9s  %9s  %10s  %7llu  ",
             cli_human_ns((double)g->running_ns, a, sizeof a),
             tot->running_ns ? 100.0 * (double)g->running_ns / (double)tot->running_ns : 0.0,
             cli_grouped(g->runs, b, sizeof b), cli_grouped(g->tasks, c, sizeof c),
             cli_human_ns((double)g->alive_ns, d, sizeof d), (unsigned long long)g->pending);
    cli_out_fitted_row(out, figures, cts_task_group_name(m, g, opts->by, name, sizeof name), "\n");
  }
}

int cli_tasks_top(const char *path, const cli_tasks_top_opts_t *opts) {
  cli_tasks_t t;
  int code = load(&t, path, opts->out.quiet, false);
  if (!loaded(code)) {
    cli_tasks_free(&t);
    return code;
  }
  const cts_tasks_t *m = &t.m;
  cts_task_groups_t gs;
  if (cts_task_groups(m, opts->by, &gs)) {
    cts_task_groups_fini(&gs);
    cli_tasks_free(&t);
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  cts_task_groups_sort(&gs, m, opts->sort);
  cts_task_totals_t tot;
  cts_task_totals(m, &tot);
  cts_out_t *out = cli_stdout_for(&opts->out);
  if (opts->out.json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_top_json(&w, &t, &gs, &tot, opts);
  } else if (opts->out.csv) {
    print_top_csv(out, &t, &gs, &tot, opts);
  } else {
    print_top_text(out, &t, &gs, &tot, opts);
  }
  code = cli_finish_output(out, code);
  cts_task_groups_fini(&gs);
  cli_tasks_free(&t);
  return code;
}

/* ---- leaks ----------------------------------------------------------------------------- */

static void print_leaks_json(cts_json_t *w, const cli_tasks_t *t, const cts_task_pending_list_t *pl,
                             const cli_out_opts_t *opts) {
  const cts_tasks_t *m = &t->m;
  const uint32_t *pend = pl->tasks;
  const cts_task_pending_group_t *pg = pl->groups;
  const size_t np = pl->n;
  const size_t ng = pl->ngroups;
  const uint64_t nshould = pl->should;
  const size_t shown = cli_rows_shown(opts, pl->n);
  const size_t gshown = cli_rows_shown(opts, pl->ngroups);
  const uint64_t end = m->last_ns;
  char name[64];
  cts_json_object(w);
  json_header(w, t);
  cts_json_kv_u64(w, "pending_total", np);
  cts_json_kv_u64(w, "should_resolve_pending", nshould);
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "groups_total", ng);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "groups");
  cts_json_array(w);
  for (size_t i = 0; i < gshown; i++) {
    const cts_task_pending_group_t *g = &pg[i];
    const cts_task_group_t gg = {.key = g->key};
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_str(w, "label", cts_task_group_name(m, &gg, CTS_TASK_BY_LABEL, name, sizeof name));
    cts_json_kv_u64(w, "tasks", g->tasks);
    cts_json_kv_u64(w, "should_resolve", g->should);
    cts_json_kv_u64(w, "oldest_age_ns", end - g->oldest_start);
    cts_json_end(w);
  }
  cts_json_ws(w, "\n ");
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "tasks");
  cts_json_array(w);
  for (size_t i = 0; i < shown; i++) {
    const cts_task_t *k = &m->tasks[pend[i]];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_i64(w, "id", k->id);
    cts_json_kv_str(w, "type", cts_task_slot_name(cts_task_slot(k)));
    json_label(w, m, k->label);
    cts_json_kv_bool(w, "should_resolve", cts_task_marked_should_resolve(k));
    cts_json_kv_bool(w, "preexisting", k->flags & CTS_TASK_F_PREEXISTING);
    cts_json_kv_u64(w, "created_ns", k->start - m->first_ns);
    cts_json_kv_u64(w, "age_ns", end - k->start);
    cts_json_kv_u64(w, "last_seen_ns", k->last - m->first_ns);
    cts_json_key(w, "creator");
    if (k->parent == NONE) {
      cts_json_null(w);
    } else {
      const cts_task_t *p = &m->tasks[k->parent];
      cts_json_object(w);
      cts_json_kv_i64(w, "id", p->id);
      json_label(w, m, p->label);
      cts_json_end(w);
    }
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

static void print_leaks_csv(cts_out_t *out, const cli_tasks_t *t, const cts_task_pending_list_t *pl,
                            const cli_out_opts_t *opts) {
  const cts_tasks_t *m = &t->m;
  const uint32_t *pend = pl->tasks;
  const size_t shown = cli_rows_shown(opts, pl->n);
  const uint64_t end = m->last_ns;
  cts_out_str(out,
              "id,type,label,should_resolve,preexisting,created_ns,age_ns,last_seen_ns,"
              "creator_id,creator_label\n");
  for (size_t i = 0; i < shown; i++) {
    const cts_task_t *k = &m->tasks[pend[i]];
    cts_out_printf(out, "%lld,%s,", (long long)k->id, cts_task_slot_name(cts_task_slot(k)));
    cli_csv_str(out, k->label != NONE ? cts_tasks_str(m, k->label) : "");
    cts_out_printf(out, ",%s,%s,%llu,%llu,%llu,", cts_task_marked_should_resolve(k) ? "yes" : "no",
                   (k->flags & CTS_TASK_F_PREEXISTING) ? "yes" : "no",
                   (unsigned long long)(k->start - m->first_ns),
                   (unsigned long long)(end - k->start),
                   (unsigned long long)(k->last - m->first_ns));
    if (k->parent != NONE) {
      const cts_task_t *p = &m->tasks[k->parent];
      cts_out_printf(out, "%lld,", (long long)p->id);
      cli_csv_str(out, p->label != NONE ? cts_tasks_str(m, p->label) : "");
    } else {
      cts_out_char(out, ',');
    }
    cts_out_char(out, '\n');
  }
}

static void print_leaks_text(cts_out_t *out, const cli_tasks_t *t,
                             const cts_task_pending_list_t *pl, const cli_out_opts_t *opts) {
  const cts_tasks_t *m = &t->m;
  const uint32_t *pend = pl->tasks;
  const cts_task_pending_group_t *pg = pl->groups;
  const size_t np = pl->n;
  const size_t ng = pl->ngroups;
  const uint64_t nshould = pl->should;
  const size_t shown = cli_rows_shown(opts, pl->n);
  const size_t gshown = cli_rows_shown(opts, pl->ngroups);
  const uint64_t end = m->last_ns;
  char a[64], b[64], name[64], pname[64];
  text_header(out, t);
  cli_out_heading(out,
                  "Pending  %s tasks never resolved (nor merged into another) by the end, %s of "
                  "them marked should-resolve\n",
                  cli_grouped(np, a, sizeof a), cli_grouped(nshould, b, sizeof b));
  if (!np) {
    cts_out_str(out, "\nEvery task resolved.\n");
  } else {
    cli_out_heading(out,
                    "\n%s %zu of %zu labels of pending tasks (should-resolve first, then by "
                    "count):\n     tasks  should  oldest age  label\n",
                    gshown < ng ? "Top" : "All", gshown, ng);
    for (size_t i = 0; i < gshown; i++) {
      const cts_task_pending_group_t *g = &pg[i];
      const cts_task_group_t gg = {.key = g->key};
      char figures[96];
      snprintf(figures, sizeof figures, "%10s  %6llu  %10s  ", cli_grouped(g->tasks, a, sizeof a),
               (unsigned long long)g->should,
               cli_human_ns((double)(end - g->oldest_start), b, sizeof b));
      cli_out_fitted_row(out, figures,
                         cts_task_group_name(m, &gg, CTS_TASK_BY_LABEL, name, sizeof name), "\n");
    }
    cli_out_heading(out,
                    "\n%s %zu of %zu pending tasks (should-resolve first, then the oldest):\n"
                    "        task  type            age  should  label / created by\n",
                    shown < np ? "Oldest" : "All", shown, np);
    for (size_t i = 0; i < shown; i++) {
      const cts_task_t *k = &m->tasks[pend[i]];
      char figures[128], label[160];
      snprintf(figures, sizeof figures, "%12lld  %-12s %7s%s  %-6s  ", (long long)k->id,
               cts_task_slot_name(cts_task_slot(k)),
               cli_human_ns((double)(end - k->start), a, sizeof a),
               (k->flags & CTS_TASK_F_PREEXISTING) ? "+" : " ",
               cts_task_marked_should_resolve(k) ? "yes" : "");
      snprintf(label, sizeof label, "%s%s%s", cts_tasks_name(m, pend[i], name, sizeof name),
               k->parent != NONE ? "  <- " : "",
               k->parent != NONE ? cts_tasks_name(m, k->parent, pname, sizeof pname) : "");
      cli_out_fitted_row(out, figures, label, "\n");
    }
    cts_out_str(out,
                "\n  age: from creation to the end of the trace ('+': created before the "
                "trace, so older)\n");
  }
}

int cli_tasks_leaks(const char *path, const cli_out_opts_t *opts) {
  cli_tasks_t t;
  int code = load(&t, path, opts->quiet, false);
  if (!loaded(code)) {
    cli_tasks_free(&t);
    return code;
  }
  const cts_tasks_t *m = &t.m;
  cts_task_pending_list_t pending;
  if (cts_task_pending_list(m, &pending)) {
    cli_tasks_free(&t);
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  cts_out_t *out = cli_stdout_for(opts);
  if (opts->json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_leaks_json(&w, &t, &pending, opts);
  } else if (opts->csv) {
    print_leaks_csv(out, &t, &pending, opts);
  } else {
    print_leaks_text(out, &t, &pending, opts);
  }
  code = cli_finish_output(out, code);
  cts_task_pending_list_fini(&pending);
  cli_tasks_free(&t);
  return code;
}

/* ---- diff ------------------------------------------------------------------------------ */

static const char *fmt_metric(double v, cts_task_metric_t m, bool rate, char *buf, size_t size) {
  char tmp[32];
  if (m == CTS_TASK_COUNT)
    snprintf(tmp, sizeof tmp, "%.4g", fabs(v));
  else
    cli_human_ns(fabs(v), tmp, sizeof tmp);
  snprintf(buf, size, "%s%s%s", v < 0 ? "-" : "", tmp, rate ? "/s" : "");
  return buf;
}

static void print_diff_json(cts_json_t *w, const cli_tasks_t t[2], const cts_task_groups_t g[2],
                            const cts_task_diff_t *d, const cli_tasks_diff_opts_t *opts,
                            bool rate) {
  const cts_task_diff_row_t *rows = d->rows;
  const size_t n = d->n;
  const double total_a = d->total_a, total_b = d->total_b;
  const size_t shown = cli_rows_shown(&opts->out, d->n);
  const char *by_key = opts->by == CTS_TASK_BY_LABEL ? "label" : "type";
  cts_json_object(w);
  cts_json_kv_str(w, "kind", "tasks");
  cts_json_kv_str(w, "metric", metric_keys[opts->metric]);
  cts_json_kv_str(w, "group_by", by_key);
  cts_json_kv_bool(w, "per_second", rate);
  cts_json_key(w, "traces");
  cts_json_array(w);
  for (int s = 0; s < 2; s++) {
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    json_header(w, &t[s]);
    cts_json_ws(w, "\n   ");
    cts_json_kv_u64(w, "rows_total", g[s].n);
    cts_json_end(w);
  }
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "total");
  cts_json_object(w);
  cts_json_kv_fixed(w, "before", total_a, 3);
  cts_json_kv_fixed(w, "after", total_b, 3);
  cts_json_kv_fixed(w, "change", total_b - total_a, 3);
  cts_json_end(w);
  cts_json_ws(w, "\n ");
  cts_json_kv_u64(w, "rows_total", n);
  cts_json_ws(w, "\n ");
  cts_json_key(w, "rows");
  cts_json_array(w);
  for (size_t i = 0; i < shown; i++) {
    const cts_task_diff_row_t *r = &rows[i];
    cts_json_ws(w, "\n  ");
    cts_json_object(w);
    cts_json_kv_str(w, by_key, r->name);
    cts_json_kv_fixed(w, "before", r->va, 3);
    cts_json_kv_fixed(w, "after", r->vb, 3);
    cts_json_kv_fixed(w, "change", r->change, 3);
    cts_json_kv_bool(w, "in_before", r->a);
    cts_json_kv_bool(w, "in_after", r->b);
    cts_json_end(w);
  }
  cli_jw_end(w, true);
}

static void print_diff_csv(cts_out_t *out, const cli_tasks_t t[2], const cts_task_groups_t g[2],
                           const cts_task_diff_t *d, const cli_tasks_diff_opts_t *opts, bool rate) {
  const cts_task_diff_row_t *rows = d->rows;
  const size_t shown = cli_rows_shown(&opts->out, d->n);
  const char *by_key = opts->by == CTS_TASK_BY_LABEL ? "label" : "type";
  cts_out_printf(out, "%s,before,after,change\n", by_key);
  for (size_t i = 0; i < shown; i++) {
    cli_csv_str(out, rows[i].name);
    cts_out_printf(out, ",%.3f,%.3f,%.3f\n", rows[i].va, rows[i].vb, rows[i].change);
  }
}

static void print_diff_text(cts_out_t *out, const cli_tasks_t t[2], const cts_task_groups_t g[2],
                            const cts_task_diff_t *d, const cli_tasks_diff_opts_t *opts,
                            bool rate) {
  const cts_task_diff_row_t *rows = d->rows;
  const size_t n = d->n;
  const double total_a = d->total_a, total_b = d->total_b;
  const size_t shown = cli_rows_shown(&opts->out, d->n);
  const char *by_key = opts->by == CTS_TASK_BY_LABEL ? "label" : "type";
  char a[48], b[48], c[48];
  for (int s = 0; s < 2; s++)
    cli_out_heading(out, "%s  %s: task trace, %s events, %.6f s, %zu tasks\n",
                    s ? "After " : "Before", cli_basename(t[s].path),
                    cli_grouped(t[s].m.events, a, sizeof a), cli_tasks_duration_s(&t[s]),
                    t[s].m.ntasks);
  cli_out_heading(out, "Total   %s -> %s (%s)\n",
                  fmt_metric(total_a, opts->metric, rate, a, sizeof a),
                  fmt_metric(total_b, opts->metric, rate, b, sizeof b),
                  fmt_metric(total_b - total_a, opts->metric, rate, c, sizeof c));
  cli_out_heading(out, "\n%s %zu of %zu %ss by change in %s, %s:\n", shown < n ? "Top" : "All",
                  shown, n, by_key, metric_names[opts->metric],
                  rate ? "per second of each trace's span" : "totals");
  cts_out_printf(out, "       before         after        change  change%%  %s\n", by_key);
  for (size_t i = 0; i < shown; i++) {
    const cts_task_diff_row_t *r = &rows[i];
    char pct[16];
    cts_diff_change_pct(r->a != NULL, r->b != NULL, r->va, r->vb, pct, sizeof pct);
    char figures[192];
    snprintf(figures, sizeof figures, "%13s %13s %13s %8s  ",
             fmt_metric(r->va, opts->metric, rate, a, sizeof a),
             fmt_metric(r->vb, opts->metric, rate, b, sizeof b),
             fmt_metric(r->change, opts->metric, rate, c, sizeof c), pct);
    cli_out_fitted_row(out, figures, r->name, "\n");
  }
}

int cli_tasks_diff(const char *before, const char *after, const cli_tasks_diff_opts_t *opts) {
  cli_tasks_t t[2];
  cts_task_groups_t g[2];
  memset(t, 0, sizeof t);
  memset(g, 0, sizeof g);
  const char *paths[2] = {before, after};
  double scale[2] = {1, 1};
  const bool rate = opts->per_second;
  int code = CLI_EXIT_OK, nloaded = 0;
  cts_task_diff_t d = {0};
  for (int s = 0; s < 2; s++) {
    const int c = load(&t[s], paths[s], opts->out.quiet, false);
    nloaded++;
    if (c > code) code = c;
    if (!loaded(c)) goto end;
    if (cts_task_groups(&t[s].m, opts->by, &g[s])) goto nomem;
    if (rate) {
      const double duration = cli_tasks_duration_s(&t[s]);
      if (duration <= 0) {
        cli_error("%s has no duration: compare totals (without --per-second)", paths[s]);
        code = CLI_EXIT_DATA;
        goto end;
      }
      scale[s] = 1.0 / duration;
    }
  }
  const cts_tasks_t *const models[2] = {&t[0].m, &t[1].m};
  const cts_task_groups_t *const groups[2] = {&g[0], &g[1]};
  if (cts_task_diff(models, groups, opts->metric, scale, &d)) goto nomem;
  cts_out_t *out = cli_stdout_for(&opts->out);
  if (opts->out.json) {
    cts_json_t w;
    cts_json_init(&w, out);
    print_diff_json(&w, t, g, &d, opts, rate);
  } else if (opts->out.csv) {
    print_diff_csv(out, t, g, &d, opts, rate);
  } else {
    print_diff_text(out, t, g, &d, opts, rate);
  }
  code = cli_finish_output(out, code);
  goto end;
nomem:
  cli_error("out of memory");
  code = CLI_EXIT_INTERNAL;
end:
  cts_task_diff_fini(&d);
  for (int s = 0; s < nloaded; s++) {
    cts_task_groups_fini(&g[s]);
    cli_tasks_free(&t[s]);
  }
  return code;
}
