/* SPDX-License-Identifier: MIT */
/* ctfscope info: a trace's header and whole-trace figures, for people (default) or for
 * machines (--json). The figures are those of memtrace's own summary
 * (docs/formats/memtrace-dump.md), computed in one streaming pass. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../analysis/summary.h"
#include "../common/grow.h"
#include "../os/output.h"
#include "cli.h"
#include "cmd_tasks.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope info [OPTIONS] TRACE...\n"
    "\n"
    "Show what a memtrace trace is (program, host, pid, start time, sample rate, context)\n"
    "and its figures: events per kind, samples per heap, allocated lengths, estimated\n"
    "allocated bytes, backtrace lengths, location codes and packets. Estimated bytes are\n"
    "samples / sample rate x word size: an unbiased estimate from sampled allocations.\n"
    "\n"
    "For a mirage-profile task trace: its layout (a ring, wrapped or not, or a stream of\n"
    "packets), lanes (threads writing at the same time), time span, events per kind, tasks\n"
    "(created, preexisting, resolved, failed, merged, pending), labels and counters.\n"
    "\n"
    "Options:\n"
    "      --json       print JSON instead of text (an array when several traces are given)\n"
    "      --packets    also list every packet: offset, size, kind, times, ids, verifier\n"
    "  -q, --quiet      do not print warnings\n"
    "  -h, --help       show this help\n"
    "\n"
    "Exit status: 0 when every trace was read completely, 1 when one is corrupt, a corrupt\n"
    "gzip stream included (its figures then cover what was read before the error), 2 for a\n"
    "usage error, 3 when a file cannot be read.\n";

typedef struct info_opts {
  cli_out_opts_t out; /* --json, -q */
  bool packets;
} info_opts_t;

typedef struct packet_list {
  cts_mt_packet_t *items;
  size_t n, cap;
} packet_list_t;

typedef struct info_ctx {
  cts_summary_t summary;
  packet_list_t packets;
  bool keep_packets, quiet;
  const char *path;
  int err;
} info_ctx_t;

static const char *const packet_kind_names[] = {"trace_info", "locations", "events",
                                                "empty",      "truncated", "skipped"};

static int on_event(void *ud, const cts_mt_event_t *ev) {
  info_ctx_t *c = ud;
  return cts_summary_add_event(&c->summary, ev);
}

static int on_packet(void *ud, const cts_mt_packet_t *p) {
  info_ctx_t *c = ud;
  cts_summary_add_packet(&c->summary, p);
  if (!c->keep_packets) return 0;
  packet_list_t *l = &c->packets;
  if (cts_grow((void **)&l->items, &l->cap, l->n, sizeof *l->items)) return -ENOMEM;
  l->items[l->n++] = *p;
  return 0;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const info_ctx_t *c = ud;
  (void)code;
  if (!c->quiet) cli_warn("%s: at offset %llu: %s", c->path, (unsigned long long)offset, message);
}

/* Where the packet walk stopped, in memtrace's summary words. */
static void walk_end(const cts_mt_reader_t *r, int err, char *buf, size_t size) {
  if (!err)
    snprintf(buf, size, "clean");
  else if (err == CTS_E_TRUNCATED_HEADER)
    snprintf(buf, size, "truncated header at %llu",
             (unsigned long long)cts_mt_reader_error_offset(r));
  else
    snprintf(buf, size, "error at %llu", (unsigned long long)cts_mt_reader_error_offset(r));
}

static void print_json(cts_json_t *w, const char *path, uint64_t file_size, const cts_mt_info_t *in,
                       const info_ctx_t *c, const cts_mt_reader_t *r, int err, bool input_error) {
  const cts_summary_t *s = &c->summary;
  char buf[128];
  cts_json_object(w);
  cts_json_item_ws(w, "\n  "); /* one member per line, as jq would indent it */
  cts_json_key(w, "file");
  cts_json_str(w, path);
  cts_json_key(w, "file_size_bytes");
  cts_json_u64(w, file_size);
  if (in) {
    cts_json_key(w, "format_version");
    cts_json_u64(w, in->version);
    cts_json_key(w, "info");
    cts_json_object(w);
    cts_json_item_ws(w, "\n    ");
    cts_json_key(w, "sample_rate");
    cts_json_shortest(w, in->sample_rate);
    cts_json_kv_u64(w, "word_size", in->word_size);
    cts_json_kv_str(w, "executable_name", in->executable_name);
    cts_json_kv_str(w, "host_name", in->host_name);
    cts_json_kv_str(w, "ocaml_runtime_params", in->runtime_params);
    cts_json_kv_i64(w, "pid", in->pid);
    cts_json_kv_i64(w, "start_time_us", in->start_time_us);
    cts_json_key(w, "context");
    if (in->context)
      cts_json_str(w, in->context);
    else
      cts_json_null(w);
    cts_json_ws(w, "\n  ");
    cts_json_end(w);
  }
  cts_json_key(w, "reader_result");
  cli_jw_reader_result(w, err);
  if (err) {
    cts_json_key(w, "error");
    cts_json_str(w, input_error ? cts_os_strerror(err) : cts_mt_reader_error_message(r));
  }
  cts_json_key(w, "events_total");
  cts_json_u64(w, s->events_total);
  cts_json_key(w, "events");
  cts_json_object(w);
  cts_json_kv_u64(w, "alloc", s->alloc_by_source[0]);
  cts_json_kv_u64(w, "alloc_major", s->alloc_by_source[1]);
  cts_json_kv_u64(w, "alloc_ext", s->alloc_by_source[2]);
  cts_json_kv_u64(w, "promote", s->promote);
  cts_json_kv_u64(w, "collect", s->collect);
  cts_json_end(w);
  cts_json_key(w, "allocs_total");
  cts_json_u64(w, cts_summary_allocs(s));
  cts_json_key(w, "allocs_eligible_for_short_form");
  cts_json_u64(w, s->allocs_short_eligible);
  cts_json_key(w, "samples_total");
  cts_json_u64(w, cts_summary_samples(s));
  cts_json_key(w, "samples");
  cts_json_object(w);
  cts_json_kv_u64(w, "minor", s->samples_by_source[0]);
  cts_json_kv_u64(w, "major", s->samples_by_source[1]);
  cts_json_kv_u64(w, "external", s->samples_by_source[2]);
  cts_json_end(w);
  cts_json_key(w, "sum_length_words");
  cts_json_u64(w, s->sum_length_words);
  cts_json_key(w, "sum_length_x_nsamples");
  cts_json_u64(w, s->sum_length_x_nsamples);
  cts_json_key(w, "max_length_words");
  cts_json_u64(w, s->max_length_words);
  if (in) {
    cts_json_key(w, "estimated_allocated_bytes");
    cts_json_fixed(w, cts_summary_estimated_bytes(s, in), 0);
  }
  cts_json_key(w, "backtrace_length_max");
  cts_json_u64(w, s->backtrace_length_max);
  cts_json_key(w, "backtrace_length_mean");
  cts_json_fixed(w, cts_summary_backtrace_mean(s), 3);
  cts_json_key(w, "distinct_location_codes_in_backtraces");
  cts_json_u64(w, s->distinct_codes);
  cts_json_key(w, "location_codes_without_locations");
  cts_json_u64(w, s->codes_without_locations);
  if (s->loss_markers) {
    cts_json_key(w, "drop_mode_losses");
    cts_json_object(w);
    cts_json_kv_u64(w, "markers", s->loss_markers);
    cts_json_kv_u64(w, "allocs", s->lost_allocs);
    cts_json_kv_u64(w, "samples", s->lost_samples);
    cts_json_kv_u64(w, "frees", s->lost_frees);
    cts_json_end(w);
  }
  if (s->cut_stacks) {
    cts_json_key(w, "cut_stacks");
    cts_json_u64(w, s->cut_stacks);
  }
  if (in && s->have_events) {
    cts_json_key(w, "first_event_dt_us");
    cts_json_u64(w, s->first_event_us - in->start_time_us);
    cts_json_key(w, "last_event_dt_us");
    cts_json_u64(w, s->last_event_us - in->start_time_us);
  }
  if (in && s->end_us > in->start_time_us) {
    cts_json_key(w, "end_dt_us");
    cts_json_u64(w, s->end_us - in->start_time_us);
  }
  cts_json_key(w, "packets_total");
  cts_json_u64(w, s->packets_total);
  cts_json_key(w, "packets");
  cts_json_object(w);
  for (unsigned k = 0; k < 6; k++) cts_json_kv_u64(w, packet_kind_names[k], s->packets_by_kind[k]);
  cts_json_end(w);
  walk_end(r, input_error ? 0 : err, buf, sizeof buf);
  cts_json_key(w, "packet_walk_end");
  cts_json_str(w, buf);
  if (c->keep_packets) {
    cts_json_key(w, "packet_list");
    cts_json_array(w);
    for (size_t i = 0; i < c->packets.n; i++) {
      const cts_mt_packet_t *p = &c->packets.items[i];
      cts_json_ws(w, "\n    ");
      cts_json_object(w);
      cts_json_kv_u64(w, "offset", p->offset);
      cts_json_kv_u64(w, "size", p->size);
      cts_json_kv_str(w, "kind", packet_kind_names[p->kind]);
      cts_json_kv_u64(w, "version", p->version);
      cts_json_kv_i64(w, "pid", p->pid);
      cts_json_kv_u64(w, "domain", p->domain);
      cts_json_kv_u64(w, "time_begin_us", p->time_begin_us);
      cts_json_kv_u64(w, "time_end_us", p->time_end_us);
      cts_json_kv_u64(w, "alloc_id_begin", p->alloc_id_begin);
      cts_json_kv_u64(w, "alloc_id_end", p->alloc_id_end);
      cts_json_kv_u64(w, "verify_ix", p->verify_ix);
      cts_json_kv_u64(w, "verify_pred", p->verify_pred);
      cts_json_kv_u64(w, "verify_val", p->verify_val);
      cts_json_kv_u64(w, "events", p->nevents);
      cts_json_end(w);
    }
    cts_json_ws(w, "\n  ");
    cts_json_end(w);
  }
  cts_json_ws(w, "\n");
  cts_json_end(w);
}

static void print_text(cts_out_t *o, const char *path, uint64_t file_size, const cts_mt_info_t *in,
                       const info_ctx_t *c, const cts_mt_reader_t *r, int err, bool input_error) {
  const cts_summary_t *s = &c->summary;
  char a[64], b[64], d[64], e[64], f[64];
  cts_out_printf(o, "Trace          %s (%s", path, cli_human_bytes((double)file_size, a, sizeof a));
  if (in) cts_out_printf(o, ", memtrace v%03u", in->version);
  cts_out_str(o, ")\n");
  if (in) {
    cts_out_printf(o, "Program        %s\n", in->executable_name);
    cts_out_printf(o, "Host, pid      %s, pid %lld\n", in->host_name, (long long)in->pid);
    const time_t secs = (time_t)(in->start_time_us / 1000000u);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(a, sizeof a, "%Y-%m-%d %H:%M:%S", &tm);
    cts_out_printf(o, "Started        %s.%06llu UTC\n", a,
                   (unsigned long long)(in->start_time_us % 1000000u));
    if (in->sample_rate >= 1.0)
      cts_out_printf(o, "Sample rate    1 (every word sampled), word size %u bits\n",
                     in->word_size);
    else
      cts_out_printf(o,
                     "Sample rate    %s per word (1 sample per %s%.4g words), word size %u bits\n",
                     cli_shortest_double(in->sample_rate, b, sizeof b),
                     1.0 / in->sample_rate > CTS_EST_MAX ? "more than " : "",
                     cts_est_clamp(1.0 / in->sample_rate), in->word_size);
    if (in->runtime_params[0]) cts_out_printf(o, "Runtime params %s\n", in->runtime_params);
    cts_out_printf(o, "Context        %s\n", in->context ? in->context : "(none)");
  }
  cts_out_char(o, '\n');
  char g[64];
  cts_out_printf(o,
                 "Events         %s: alloc %s, alloc_major %s, alloc_ext %s, promote %s, "
                 "collect %s\n",
                 cli_grouped(s->events_total, a, sizeof a),
                 cli_grouped(s->alloc_by_source[0], b, sizeof b),
                 cli_grouped(s->alloc_by_source[1], d, sizeof d),
                 cli_grouped(s->alloc_by_source[2], e, sizeof e),
                 cli_grouped(s->promote, f, sizeof f), cli_grouped(s->collect, g, sizeof g));
  cts_out_printf(o, "Samples        %s: minor %s, major %s, external %s\n",
                 cli_grouped(cts_summary_samples(s), a, sizeof a),
                 cli_grouped(s->samples_by_source[0], b, sizeof b),
                 cli_grouped(s->samples_by_source[1], d, sizeof d),
                 cli_grouped(s->samples_by_source[2], e, sizeof e));
  cts_out_printf(o, "Allocations    %s sampled (%s eligible for the short form)\n",
                 cli_grouped(cts_summary_allocs(s), a, sizeof a),
                 cli_grouped(s->allocs_short_eligible, b, sizeof b));
  cts_out_printf(o, "Lengths        sum %s words, sum x samples %s, largest %s words\n",
                 cli_grouped(s->sum_length_words, a, sizeof a),
                 cli_grouped(s->sum_length_x_nsamples, b, sizeof b),
                 cli_grouped(s->max_length_words, d, sizeof d));
  if (in) {
    const double est = cts_summary_estimated_bytes(s, in);
    cts_out_printf(o, "Est. allocated %s (%.0f bytes = samples / rate x %u bytes)\n",
                   cli_human_bytes(est, a, sizeof a), est, in->word_size / 8);
  }
  if (s->loss_markers) /* ctfscope's tracer in drop mode (tracer.h): counted in the above */
    cts_out_printf(
        o,
        "Lost (drop)    %s sampled allocations (%s samples) and %s frees, in %s loss "
        "markers: the trace reader was too slow\n",
        cli_grouped(s->lost_allocs, a, sizeof a), cli_grouped(s->lost_samples, b, sizeof b),
        cli_grouped(s->lost_frees, d, sizeof d), cli_grouped(s->loss_markers, e, sizeof e));
  cts_out_printf(o,
                 "Backtraces     longest %s frames, mean %.3f; %s distinct codes, %s without "
                 "locations\n",
                 cli_grouped(s->backtrace_length_max, a, sizeof a), cts_summary_backtrace_mean(s),
                 cli_grouped(s->distinct_codes, b, sizeof b),
                 cli_grouped(s->codes_without_locations, d, sizeof d));
  if (s->cut_stacks) /* ctfscope's tracer at its frame limit: the stacks' root is a marker */
    cts_out_printf(o,
                   "Cut stacks     %s sampled allocations had more frames than recorded: their "
                   "root is '[deeper frames not recorded: ...]' (record --max-frames)\n",
                   cli_grouped(s->cut_stacks, a, sizeof a));
  if (in && s->have_events)
    cts_out_printf(o, "Time           events from +%.6f s to +%.6f s after the start\n",
                   (double)(s->first_event_us - in->start_time_us) / 1e6,
                   (double)(s->last_event_us - in->start_time_us) / 1e6);
  /* The program's end, where the writer recorded it after the last event. */
  if (in && s->end_us > in->start_time_us && (!s->have_events || s->end_us > s->last_event_us))
    cts_out_printf(o, "Duration       %.6f s (the trace ends after its last event)\n",
                   (double)(s->end_us - in->start_time_us) / 1e6);
  else if (in && !err && s->packets_total == s->packets_by_kind[0])
    /* No packet closed the trace: its program was killed before it sampled anything (a lazy
     * session has no writer until then), or its writer before its first write. */
    cts_out_printf(o,
                   "Duration       unknown: the trace has its header only (no end time was "
                   "recorded)\n");
  cts_out_printf(
      o,
      "Packets        %s: trace_info %llu, locations %llu, events %llu, empty %llu, "
      "truncated %llu, skipped %llu\n",
      cli_grouped(s->packets_total, a, sizeof a), (unsigned long long)s->packets_by_kind[0],
      (unsigned long long)s->packets_by_kind[1], (unsigned long long)s->packets_by_kind[2],
      (unsigned long long)s->packets_by_kind[3], (unsigned long long)s->packets_by_kind[4],
      (unsigned long long)s->packets_by_kind[5]);
  walk_end(r, input_error ? 0 : err, a, sizeof a);
  if (!err && s->packets_by_kind[4]) /* the reader skipped a cut-off last packet */
    cts_out_printf(o,
                   "Result         tail lost: the last packet is cut off (the writer stopped "
                   "while writing it); what comes before reads clean\n");
  else
    cts_out_printf(o, "Result         %s%s\n", err ? "error: " : "ok, packet walk ",
                   err ? (input_error ? cts_os_strerror(err) : cts_mt_reader_error_message(r)) : a);
  if (c->keep_packets) {
    cts_out_str(o,
                "\n  offset     size kind        ver  pid     dom  t_begin_us        t_end_us"
                "          ids                  verifier\n");
    for (size_t i = 0; i < c->packets.n; i++) {
      const cts_mt_packet_t *p = &c->packets.items[i];
      cts_out_printf(o, "%8llu %8u %-10s %4u %-7lld %4u %17llu %17llu %9llu-%-9llu %5u %5u %llu\n",
                     (unsigned long long)p->offset, p->size, packet_kind_names[p->kind], p->version,
                     (long long)p->pid, p->domain, (unsigned long long)p->time_begin_us,
                     (unsigned long long)p->time_end_us, (unsigned long long)p->alloc_id_begin,
                     (unsigned long long)p->alloc_id_end, p->verify_ix, p->verify_pred,
                     (unsigned long long)p->verify_val);
    }
  }
}

static int on_option(void *ctx, int opt, const char *arg) {
  info_opts_t *o = ctx;
  const int common = cli_output_option(opt, arg, &o->out, false);
  if (common != CLI_OPTION_OTHER) return common;
  if (opt == 'P') o->packets = true;
  return -1;
}

/* Reads one trace and prints its figures (as JSON through w when not NULL); returns the exit
 * code for it. */
static int info_one(cts_out_t *o, cts_json_t *w, const char *path, const info_opts_t *opts) {
  cli_trace_kind_t kind;
  const int kc = cli_trace_detect(path, &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS) return cli_tasks_info(o, w, path, opts->packets, opts->out.quiet);
  info_ctx_t c = {.keep_packets = opts->packets, .quiet = opts->out.quiet, .path = path};
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {
      .user_data = &c, .on_event = on_event, .on_packet = on_packet, .on_warning = on_warning};
  cts_mt_reader_t *r;
  int err = cts_mt_reader_create(&r, &cfg, &h);
  if (err) {
    cli_error("cannot create a reader: %s", cts_os_strerror(err));
    return CLI_EXIT_INTERNAL;
  }
  cts_summary_init(&c.summary, r);
  cts_summary_count_events(&c.summary);
  cli_progress_t progress;
  cli_progress_init(&progress, "reading", path);
  bool input_error;
  err = cts_os_read_memtrace(path, r, cli_progress_cb, &progress, &input_error);
  cli_progress_done(&progress);
  cts_summary_finish(&c.summary);
  int exit_code = CLI_EXIT_OK;
  if (err && input_error && err != CTS_E_IO && err != CTS_E_BAD_COMPRESSION) {
    cli_error("cannot read '%s': %s", path, cts_os_strerror(err));
    exit_code = CLI_EXIT_IO;
  } else {
    struct stat st;
    const uint64_t size = strcmp(path, "-") != 0 && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    const cts_mt_info_t *in = cts_mt_reader_borrow_info(r);
    if (w)
      print_json(w, path, size, in, &c, r, err, input_error);
    else
      print_text(o, path, size, in, &c, r, err, input_error);
    if (err) {
      cli_error("%s: %s (%s)", path,
                input_error ? cts_os_strerror(err) : cts_mt_reader_error_message(r),
                cts_err_name(err));
      exit_code = cli_exit_code(err, input_error);
    }
  }
  free(c.packets.items);
  cts_summary_fini(&c.summary);
  cts_mt_reader_destroy(r);
  return exit_code;
}

int cmd_info(int argc, char **argv) {
  static const struct option longopts[] = {
      CLI_LONGOPT_JSON,
      {"packets", no_argument, NULL, 'P'},
      CLI_LONGOPT_QUIET,
      {0},
  };
  info_opts_t opts = {0};
  int first;
  const int rc = cli_parse(argc, argv, "q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (first >= argc) return cli_usage_error("no trace given");
  cts_out_t *out = cli_stdout(!opts.out.json); /* names from the trace: no raw controls */
  const bool many = argc - first > 1;
  int worst = CLI_EXIT_OK;
  cts_json_t json, *w = opts.out.json ? &json : NULL;
  if (w) {
    /* Several traces make an array, one object per line break; a trace that cannot be read
     * adds nothing to it. */
    cts_json_init(w, out);
    if (many) cts_json_array(w);
  }
  for (int i = first; i < argc; i++) {
    if (w && many)
      cts_json_ws(w, "\n");
    else if (!w && i > first)
      cts_out_char(out, '\n');
    const int code = info_one(out, w, argv[i], &opts);
    if (code > worst) worst = code;
    cts_out_flush(out);
  }
  if (w) {
    if (many) {
      cts_json_ws(w, "\n");
      cts_json_end(w);
    }
    cts_json_finish(w);
    cts_out_char(out, '\n');
  }
  if (cts_out_flush(out)) {
    cli_error("cannot write to standard output: %s", cts_os_strerror(out->err));
    return CLI_EXIT_IO;
  }
  return worst;
}
