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
  bool json, packets, quiet;
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
  if (l->n == l->cap) {
    const size_t cap = l->cap ? l->cap * 2 : 256;
    cts_mt_packet_t *items = realloc(l->items, cap * sizeof *items);
    if (!items) return -ENOMEM;
    l->items = items;
    l->cap = cap;
  }
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

static void print_json(cts_out_t *o, const char *path, uint64_t file_size, const cts_mt_info_t *in,
                       const info_ctx_t *c, const cts_mt_reader_t *r, int err, bool input_error) {
  const cts_summary_t *s = &c->summary;
  char buf[128];
  cts_out_str(o, "{\n  \"file\": ");
  cts_out_json_str(o, path);
  cts_out_printf(o, ",\n  \"file_size_bytes\": %llu", (unsigned long long)file_size);
  if (in) {
    cts_out_printf(o, ",\n  \"format_version\": %u,\n  \"info\": {\n    \"sample_rate\": %s",
                   in->version, cli_shortest_double(in->sample_rate, buf, sizeof buf));
    cts_out_printf(o, ",\n    \"word_size\": %u,\n    \"executable_name\": ", in->word_size);
    cts_out_json_str(o, in->executable_name);
    cts_out_str(o, ",\n    \"host_name\": ");
    cts_out_json_str(o, in->host_name);
    cts_out_str(o, ",\n    \"ocaml_runtime_params\": ");
    cts_out_json_str(o, in->runtime_params);
    cts_out_printf(o, ",\n    \"pid\": %lld,\n    \"start_time_us\": %lld,\n    \"context\": ",
                   (long long)in->pid, (long long)in->start_time_us);
    if (in->context)
      cts_out_json_str(o, in->context);
    else
      cts_out_str(o, "null");
    cts_out_str(o, "\n  }");
  }
  cts_out_str(o, ",\n  \"reader_result\": ");
  cli_json_reader_result(o, err);
  if (err) {
    cts_out_str(o, ",\n  \"error\": ");
    cts_out_json_str(o, input_error ? cts_os_strerror(err) : cts_mt_reader_error_message(r));
  }
  cts_out_printf(o,
                 ",\n  \"events_total\": %llu,\n  \"events\": {\"alloc\": %llu, \"alloc_major\": "
                 "%llu, \"alloc_ext\": %llu, \"promote\": %llu, \"collect\": %llu}",
                 (unsigned long long)s->events_total, (unsigned long long)s->alloc_by_source[0],
                 (unsigned long long)s->alloc_by_source[1],
                 (unsigned long long)s->alloc_by_source[2], (unsigned long long)s->promote,
                 (unsigned long long)s->collect);
  cts_out_printf(
      o,
      ",\n  \"allocs_total\": %llu,\n  \"allocs_eligible_for_short_form\": %llu,\n"
      "  \"samples_total\": %llu,\n  \"samples\": {\"minor\": %llu, \"major\": %llu, "
      "\"external\": %llu}",
      (unsigned long long)cts_summary_allocs(s), (unsigned long long)s->allocs_short_eligible,
      (unsigned long long)cts_summary_samples(s), (unsigned long long)s->samples_by_source[0],
      (unsigned long long)s->samples_by_source[1], (unsigned long long)s->samples_by_source[2]);
  cts_out_printf(o,
                 ",\n  \"sum_length_words\": %llu,\n  \"sum_length_x_nsamples\": %llu,\n"
                 "  \"max_length_words\": %llu",
                 (unsigned long long)s->sum_length_words,
                 (unsigned long long)s->sum_length_x_nsamples,
                 (unsigned long long)s->max_length_words);
  if (in)
    cts_out_printf(o, ",\n  \"estimated_allocated_bytes\": %.0f",
                   cts_summary_estimated_bytes(s, in));
  cts_out_printf(o,
                 ",\n  \"backtrace_length_max\": %llu,\n  \"backtrace_length_mean\": %.3f,\n"
                 "  \"distinct_location_codes_in_backtraces\": %llu,\n"
                 "  \"location_codes_without_locations\": %llu",
                 (unsigned long long)s->backtrace_length_max, cts_summary_backtrace_mean(s),
                 (unsigned long long)s->distinct_codes,
                 (unsigned long long)s->codes_without_locations);
  if (s->loss_markers)
    cts_out_printf(o,
                   ",\n  \"drop_mode_losses\": {\"markers\": %llu, \"allocs\": %llu, "
                   "\"samples\": %llu, \"frees\": %llu}",
                   (unsigned long long)s->loss_markers, (unsigned long long)s->lost_allocs,
                   (unsigned long long)s->lost_samples, (unsigned long long)s->lost_frees);
  if (in && s->have_events)
    cts_out_printf(o, ",\n  \"first_event_dt_us\": %llu,\n  \"last_event_dt_us\": %llu",
                   (unsigned long long)(s->first_event_us - in->start_time_us),
                   (unsigned long long)(s->last_event_us - in->start_time_us));
  if (in && s->end_us > in->start_time_us)
    cts_out_printf(o, ",\n  \"end_dt_us\": %llu",
                   (unsigned long long)(s->end_us - in->start_time_us));
  cts_out_printf(o, ",\n  \"packets_total\": %llu,\n  \"packets\": {",
                 (unsigned long long)s->packets_total);
  for (unsigned k = 0; k < 6; k++)
    cts_out_printf(o, "%s\"%s\": %llu", k ? ", " : "", packet_kind_names[k],
                   (unsigned long long)s->packets_by_kind[k]);
  walk_end(r, input_error ? 0 : err, buf, sizeof buf);
  cts_out_str(o, "},\n  \"packet_walk_end\": ");
  cts_out_json_str(o, buf);
  if (c->keep_packets) {
    cts_out_str(o, ",\n  \"packet_list\": [");
    for (size_t i = 0; i < c->packets.n; i++) {
      const cts_mt_packet_t *p = &c->packets.items[i];
      cts_out_printf(o,
                     "%s\n    {\"offset\": %llu, \"size\": %u, \"kind\": \"%s\", \"version\": %u, "
                     "\"pid\": %lld, \"domain\": %u, \"time_begin_us\": %llu, \"time_end_us\": "
                     "%llu, \"alloc_id_begin\": %llu, \"alloc_id_end\": %llu, \"verify_ix\": %u, "
                     "\"verify_pred\": %u, \"verify_val\": %llu, \"events\": %u}",
                     i ? "," : "", (unsigned long long)p->offset, p->size,
                     packet_kind_names[p->kind], p->version, (long long)p->pid, p->domain,
                     (unsigned long long)p->time_begin_us, (unsigned long long)p->time_end_us,
                     (unsigned long long)p->alloc_id_begin, (unsigned long long)p->alloc_id_end,
                     p->verify_ix, p->verify_pred, (unsigned long long)p->verify_val, p->nevents);
    }
    cts_out_str(o, "\n  ]");
  }
  cts_out_str(o, "\n}");
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
  if (in && s->have_events)
    cts_out_printf(o, "Time           events from +%.6f s to +%.6f s after the start\n",
                   (double)(s->first_event_us - in->start_time_us) / 1e6,
                   (double)(s->last_event_us - in->start_time_us) / 1e6);
  /* The program's end, where the writer recorded it after the last event. */
  if (in && s->end_us > in->start_time_us && (!s->have_events || s->end_us > s->last_event_us))
    cts_out_printf(o, "Duration       %.6f s (the trace ends after its last event)\n",
                   (double)(s->end_us - in->start_time_us) / 1e6);
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
  (void)arg;
  switch (opt) {
    case 'J':
      o->json = true;
      break;
    case 'P':
      o->packets = true;
      break;
    case 'q':
      o->quiet = true;
      break;
  }
  return -1;
}

/* Reads one trace and prints its figures; returns the exit code for it. */
static int info_one(cts_out_t *o, const char *path, const info_opts_t *opts) {
  cli_trace_kind_t kind;
  const int kc = cli_trace_detect(path, &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS)
    return cli_tasks_info(o, path, opts->json, opts->packets, opts->quiet);
  info_ctx_t c = {.keep_packets = opts->packets, .quiet = opts->quiet, .path = path};
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
  cli_progress_t progress;
  cli_progress_init(&progress, "reading", path);
  bool input_error;
  err = cts_os_read_memtrace(path, r, cli_progress_cb, &progress, &input_error);
  cli_progress_done(&progress);
  int exit_code = CLI_EXIT_OK;
  if (err && input_error && err != CTS_E_IO && err != CTS_E_BAD_COMPRESSION) {
    cli_error("cannot read '%s': %s", path, cts_os_strerror(err));
    exit_code = CLI_EXIT_IO;
  } else {
    struct stat st;
    const uint64_t size = strcmp(path, "-") != 0 && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    const cts_mt_info_t *in = cts_mt_reader_borrow_info(r);
    if (opts->json)
      print_json(o, path, size, in, &c, r, err, input_error);
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
      {"json", no_argument, NULL, 'J'},
      {"packets", no_argument, NULL, 'P'},
      {"quiet", no_argument, NULL, 'q'},
      {0},
  };
  info_opts_t opts = {0};
  int first;
  const int rc = cli_parse(argc, argv, "q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (first >= argc) return cli_usage_error("no trace given");
  static cts_out_t out;
  cts_out_init(&out, STDOUT_FILENO);
  out.term = !opts.json; /* names from the trace: no raw controls */
  const bool many = argc - first > 1;
  int worst = CLI_EXIT_OK;
  if (opts.json && many) cts_out_str(&out, "[\n");
  for (int i = first; i < argc; i++) {
    if (i > first) cts_out_str(&out, opts.json ? ",\n" : "\n");
    const int code = info_one(&out, argv[i], &opts);
    if (code > worst) worst = code;
    cts_out_flush(&out);
  }
  if (opts.json) cts_out_str(&out, many ? "\n]\n" : "\n");
  if (cts_out_flush(&out)) {
    cli_error("cannot write to standard output: %s", cts_os_strerror(out.err));
    return CLI_EXIT_IO;
  }
  return worst;
}
