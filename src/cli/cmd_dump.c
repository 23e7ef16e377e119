/* SPDX-License-Identifier: MIT */
/* ctfscope dump: every event of a memtrace trace, in the text format of memtrace's own
 * reader (docs/formats/memtrace-dump.md), so that our output can be compared with theirs
 * line for line. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/u64map.h"
#include "../os/mprof_ring.h"
#include "../os/output.h"
#include "cli.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope dump [OPTIONS] TRACE\n"
    "\n"
    "Print every event of a memtrace trace (v001-v003, plain, gzip- or zstd-compressed; '-'\n"
    "reads standard input), one line each: the trace info, then each allocation, promotion\n"
    "and collection in file order, with each location code described just before its first\n"
    "use.\n"
    "The format is that of memtrace's own reader (see docs/formats/memtrace-dump.md); lines\n"
    "starting with '# ' are comments.\n"
    "A mirage-profile task trace (record --tasks, the task API of libctfscope, a\n"
    "mirage-profile ring) is recognised by its first packet and printed event by event\n"
    "instead: each packet, in sequence order, then its events with their time in ns,\n"
    "task and fields (docs/formats/mprof.md).\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE   write to FILE instead of standard output\n"
    "      --no-comments   leave out the '# ' comment lines\n"
    "  -q, --quiet         do not print warnings (e.g. a truncated last packet)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 when the whole trace was read (a truncated last packet is only a\n"
    "warning), 1 when the trace is corrupt, a corrupt gzip stream included (events before\n"
    "the error are printed), 2 for a usage error, 3 when a file cannot be read or written.\n"
    "TRACE may be a FIFO or <(...). With -o, an output that is the trace itself is refused\n"
    "(2), and the file is written aside and replaced only when the run ends with 0 or 1.\n"
    "Names are printed as they are, but escaped (\\xNN) on a terminal.\n";

typedef struct dump_opts {
  const char *output;
  bool comments;
  bool quiet;
} dump_opts_t;

typedef struct dump_ctx {
  cts_out_t out;
  cts_mt_reader_t *reader;
  cts_u64map_t codes; /* location code -> L number */
  uint64_t next_label;
  uint64_t start;
  bool comments, quiet;
  const char *path;
} dump_ctx_t;

/* OCaml's %S: the string in quotes with OCaml's escapes (String.escaped). */
static void put_ocaml_string(cts_out_t *o, const char *s) {
  cts_out_char(o, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    const unsigned char c = *p;
    switch (c) {
      case '"':
        cts_out_str(o, "\\\"");
        break;
      case '\\':
        cts_out_str(o, "\\\\");
        break;
      case '\n':
        cts_out_str(o, "\\n");
        break;
      case '\t':
        cts_out_str(o, "\\t");
        break;
      case '\r':
        cts_out_str(o, "\\r");
        break;
      case '\b':
        cts_out_str(o, "\\b");
        break;
      default:
        if (c >= ' ' && c <= '~') {
          cts_out_char(o, (char)c);
        } else {
          cts_out_printf(o, "\\%03u", c);
        }
    }
  }
  cts_out_char(o, '"');
}

static int on_info(void *ud, const cts_mt_info_t *info) {
  dump_ctx_t *d = ud;
  cts_out_t *o = &d->out;
  d->start = info->start_time_us;
  if (d->comments) {
    cts_out_str(o, "# ctfscope dump, format 1\n# file: ");
    cts_out_str(o, d->path);
    cts_out_printf(o, "\n# format: memtrace v%03u\n", info->version);
  }
  /* %.17g as the dump format says (not the shortest form: they differ for 0.1, 1e-6). */
  cts_out_printf(o, "info.sample_rate %.17g (%a)\n", info->sample_rate, info->sample_rate);
  cts_out_printf(o, "info.word_size %u\n", info->word_size);
  cts_out_str(o, "info.executable_name ");
  cts_out_str(o, info->executable_name);
  cts_out_str(o, "\ninfo.host_name ");
  cts_out_str(o, info->host_name);
  cts_out_str(o, "\ninfo.ocaml_runtime_params ");
  cts_out_str(o, info->runtime_params);
  /* memtrace prints the pid as a signed int64 (memtrace-mirage writes -1). */
  cts_out_str(o, "\ninfo.pid ");
  cts_out_i64(o, (int64_t)info->pid);
  cts_out_str(o, "\ninfo.start_time_us ");
  cts_out_i64(o, (int64_t)info->start_time_us);
  cts_out_str(o, "\ninfo.context ");
  if (info->context)
    put_ocaml_string(o, info->context);
  else
    cts_out_str(o, "<none>");
  cts_out_char(o, '\n');
  if (d->comments)
    cts_out_str(o,
                "# loc lines:   loc L<n> <code> <nlocs>: <location> + <location> ...  "
                "(outermost inlined first)\n"
                "#   location = file:line:start_char-end_char:defname\n"
                "# event lines: <dt_us> <obj_id> alloc|alloc_major|alloc_ext len=<words> "
                "ns=<nsamples> cp=<common_prefix> bt=<backtrace_length>: L<n> L<n> ...  "
                "(caller first, allocation point last)\n"
                "#              <dt_us> <obj_id> promote | <dt_us> <obj_id> collect\n");
  return 0;
}

static int describe_location(dump_ctx_t *d, uint64_t code, uint64_t label) {
  cts_out_t *o = &d->out;
  const cts_mt_location_t *locs = NULL;
  size_t n = 0;
  /* The reader guarantees every code in a backtrace was defined first. */
  cts_mt_reader_lookup_location(d->reader, code, &locs, &n);
  cts_out_str(o, "loc L");
  cts_out_u64(o, label);
  cts_out_char(o, ' ');
  cts_out_u64(o, code);
  cts_out_char(o, ' ');
  cts_out_u64(o, n);
  cts_out_char(o, ':');
  for (size_t i = 0; i < n; i++) {
    cts_out_str(o, i ? " + " : " ");
    cts_out_str(o, locs[i].filename);
    cts_out_char(o, ':');
    cts_out_u64(o, locs[i].line);
    cts_out_char(o, ':');
    cts_out_u64(o, locs[i].start_char);
    cts_out_char(o, '-');
    cts_out_u64(o, locs[i].end_char);
    cts_out_char(o, ':');
    cts_out_str(o, locs[i].defname);
  }
  cts_out_char(o, '\n');
  return 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  dump_ctx_t *d = ud;
  cts_out_t *o = &d->out;
  uint64_t labels_stack[64];
  /* Labels are looked up once; long backtraces fall back to a second lookup pass. */
  const size_t n = ev->backtrace_len;
  for (size_t i = 0; i < n; i++) {
    bool added;
    uint64_t *slot = cts_u64map_insert(&d->codes, ev->backtrace[i], d->next_label, &added);
    if (!slot) return -ENOMEM;
    if (added) describe_location(d, ev->backtrace[i], d->next_label++);
    if (i < 64) labels_stack[i] = *slot;
  }
  cts_out_u64(o, ev->time_us - d->start);
  cts_out_char(o, ' ');
  cts_out_u64(o, ev->obj_id);
  if (ev->kind == CTS_MT_PROMOTE) {
    cts_out_str(o, " promote\n");
    return 0;
  }
  if (ev->kind == CTS_MT_COLLECT) {
    cts_out_str(o, " collect\n");
    return 0;
  }
  static const char *const kinds[] = {" alloc len=", " alloc_major len=", " alloc_ext len="};
  cts_out_str(o, kinds[ev->source < 3 ? ev->source : 2]);
  cts_out_u64(o, ev->length);
  cts_out_str(o, " ns=");
  cts_out_u64(o, ev->nsamples);
  cts_out_str(o, " cp=");
  cts_out_u64(o, ev->common_prefix);
  cts_out_str(o, " bt=");
  cts_out_u64(o, n);
  cts_out_char(o, ':');
  for (size_t i = 0; i < n; i++) {
    cts_out_str(o, " L");
    cts_out_u64(o, i < 64 ? labels_stack[i] : *cts_u64map_find(&d->codes, ev->backtrace[i]));
  }
  cts_out_char(o, '\n');
  return o->err;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const dump_ctx_t *d = ud;
  (void)code;
  if (!d->quiet) cli_warn("%s: at offset %llu: %s", d->path, (unsigned long long)offset, message);
}

static int on_option(void *ctx, int opt, const char *arg) {
  dump_opts_t *o = ctx;
  switch (opt) {
    case 'o':
      o->output = arg;
      break;
    case 'q':
      o->quiet = true;
      break;
    case 'C':
      o->comments = false;
      break;
  }
  return -1;
}

int cmd_dump(int argc, char **argv) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      CLI_LONGOPT_QUIET,
      {"no-comments", no_argument, NULL, 'C'},
      {0},
  };
  dump_opts_t opts = {.comments = true};
  int first;
  const int rc = cli_parse(argc, argv, "o:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (first >= argc) return cli_usage_error("no trace given");
  if (argc - first > 1) return cli_usage_error("one trace at a time (got %d)", argc - first);
  const char *path = argv[first];
  /* mirage-profile traces share memtrace's magic; their uuid tells them apart. */
  cli_trace_kind_t kind;
  const int kc = cli_trace_detect_lenient(path, &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS) return cli_dump_mprof(path, opts.output, opts.comments, opts.quiet);

  cts_outfile_t file;
  const int oc = cli_output_open(&file, opts.output, &path, 1);
  if (oc >= 0) return oc;
  static dump_ctx_t d; /* 256 KiB output buffer: keep it off the stack */
  memset(&d, 0, sizeof d);
  cts_out_init(&d.out, file.fd);
  /* The format prints names as they are; a terminal gets their controls escaped. */
  d.out.term = isatty(file.fd);
  cts_u64map_init(&d.codes);
  d.comments = opts.comments;
  d.quiet = opts.quiet;
  d.path = path;

  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {
      .user_data = &d, .on_info = on_info, .on_event = on_event, .on_warning = on_warning};
  int err = cts_mt_reader_create(&d.reader, &cfg, &h);
  int exit_code = CLI_EXIT_OK;
  if (err) {
    cli_error("cannot create a reader: %s", cts_os_strerror(err));
    exit_code = CLI_EXIT_INTERNAL;
    goto end;
  }
  cli_progress_t progress;
  cli_progress_init(&progress, "reading", path);
  bool input_error;
  err = cts_os_read_memtrace(path, d.reader, cli_progress_cb, &progress, &input_error);
  cli_progress_done(&progress);
  if (d.comments) {
    if (!err) {
      cts_out_str(&d.out, "# end: ok\n");
    } else if (!input_error) {
      cts_out_str(&d.out, "# end: error ");
      cts_out_str(&d.out, cts_mt_reader_error_message(d.reader));
      cts_out_char(&d.out, '\n');
    }
  }
  const int out_err = cts_out_flush(&d.out);
  if (err) {
    if (input_error)
      cli_error("cannot read '%s': %s", path, cts_os_strerror(err));
    else if (err == d.out.err)
      cli_error("cannot write the dump: %s", cts_os_strerror(err));
    else
      cli_error("%s: %s (%s)", path, cts_mt_reader_error_message(d.reader), cts_err_name(err));
    exit_code = cli_exit_code(err, input_error || err == d.out.err);
  } else if (out_err) {
    cli_error("cannot write the dump: %s", cts_os_strerror(out_err));
    exit_code = CLI_EXIT_IO;
  }
end:
  cts_mt_reader_destroy(d.reader);
  cts_u64map_fini(&d.codes);
  return cli_output_close(&file, exit_code);
}
