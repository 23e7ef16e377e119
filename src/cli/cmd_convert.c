/* SPDX-License-Identifier: MIT */
/* ctfscope convert: a mirage-profile ring or task stream (ours or mirage-profile's) into a
 * CTF directory that babeltrace2 reads completely: our metadata (CTF 1.8, a 1 GHz clock,
 * every event id) and one stream file whose events are in time order, in packets numbered
 * 0, 1, 2… (mprof.md §12, mprof-viewer.md §D.4). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/grow.h"
#include "../os/mprof_ring.h"
#include "cli.h"
#include "load.h"

#define OUT_PACKET_SIZE (1u << 20)
#define OUT_PACKETS     2u

static const char help[] =
    "Usage: ctfscope convert [OPTIONS] TRACE DIR\n"
    "\n"
    "Turn a mirage-profile task trace (a ring saved by mirage-profile or ctfscope, or a\n"
    "ctfscope task stream) into a CTF directory that babeltrace2 and other CTF tools read:\n"
    "DIR/metadata and DIR/stream, the events in time order (a wrapped ring is unrolled, and\n"
    "the packets of different threads are merged). DIR is created if needed; its metadata\n"
    "and stream files are replaced.\n"
    "\n"
    "Options:\n"
    "  -q, --quiet   do not print warnings (e.g. a malformed packet tail)\n"
    "  -h, --help    show this help\n"
    "\n"
    "Exit status: 0 when the whole trace was converted (skipped malformed tails are only\n"
    "warnings), 1 when the trace is corrupt, 2 for a usage error (DIR/stream being TRACE\n"
    "itself included), 3 when a file cannot be read or written, 4 when memory runs out. The\n"
    "files are written aside and replace existing ones only when the run ends with 0 or 1.\n";

typedef struct convert_ctx {
  const char *path;
  bool quiet;
  /* pass 1: are the events already in time order? */
  uint64_t last_time;
  bool sorted;
  /* pass 2, unsorted input: every event, strings copied */
  cts_mprof_event_t *events;
  size_t n, cap;
  /* output */
  cts_mprof_writer_t writer;
  int write_err;
} convert_ctx_t;

static int check_order(void *ud, const cts_mprof_event_t *ev) {
  convert_ctx_t *c = ud;
  if (ev->time_ns < c->last_time) c->sorted = false;
  c->last_time = ev->time_ns;
  return 0;
}

static int write_event(void *ud, const cts_mprof_event_t *ev) {
  convert_ctx_t *c = ud;
  const int err = cts_mprof_writer_write(&c->writer, ev);
  return err ? (c->write_err = err) : 0;
}

static int collect_event(void *ud, const cts_mprof_event_t *ev) {
  convert_ctx_t *c = ud;
  if (cts_grow((void **)&c->events, &c->cap, c->n, sizeof *c->events)) return CTS_E_NOMEM;
  cts_mprof_event_t *e = &c->events[c->n];
  *e = *ev;
  if (ev->str) {
    char *s = malloc(ev->str_len + 1);
    if (!s) return CTS_E_NOMEM;
    memcpy(s, ev->str, ev->str_len + 1);
    e->str = s;
  }
  e->offset = c->n++; /* stable sort key: reading order */
  return 0;
}

static int by_time(const void *a, const void *b) {
  const cts_mprof_event_t *x = a, *y = b;
  if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const convert_ctx_t *c = ud;
  (void)code;
  if (!c->quiet) cli_warn("%s: at offset %llu: %s", c->path, (unsigned long long)offset, message);
}

static uint64_t no_clock(void *ud) {
  (void)ud;
  return 0; /* every event comes with its time */
}

static int on_option(void *ctx, int opt, const char *arg) {
  (void)arg;
  if (opt == 'q') ((convert_ctx_t *)ctx)->quiet = true;
  return -1;
}

int cmd_convert(int argc, char **argv) {
  static const struct option longopts[] = {CLI_LONGOPT_QUIET, {0}};
  static convert_ctx_t c;
  memset(&c, 0, sizeof c);
  int first;
  const int rc = cli_parse(argc, argv, "q", longopts, help, on_option, &c, &first);
  if (rc >= 0) return rc;
  if (argc - first != 2) return cli_usage_error("expected TRACE and DIR");
  const char *path = argv[first], *dir = argv[first + 1];
  c.path = path;
  cli_trace_kind_t kind;
  const int kc = cli_trace_detect(path, &kind);
  if (kc >= 0) return kc;
  if (kind != CLI_TRACE_TASKS) {
    cli_error(
        "%s: not a mirage-profile CTF trace (no c1 1f fc c1 magic with its uuid): convert "
        "reads task traces",
        path);
    return CLI_EXIT_DATA;
  }

  /* Pass 1: decode and check the time order (the reader keeps memory bounded). */
  char msg[512];
  bool input_error;
  c.sorted = true;
  cts_mprof_summary_t sum;
  cts_mprof_handler_t h = {.user_data = &c, .on_event = check_order, .on_warning = on_warning};
  int err = cts_os_mprof_read_file(path, &h, false, &sum, msg, sizeof msg, &input_error);
  if (err) {
    cli_error("%s: %s", path, msg);
    return input_error ? CLI_EXIT_IO : err == CTS_E_NOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_DATA;
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    cli_error("cannot create '%s': %s", dir, strerror(errno));
    return CLI_EXIT_IO;
  }
  char stream_path[4096];
  snprintf(stream_path, sizeof stream_path, "%s/stream", dir);
  cts_outfile_t file;
  const int oc = cli_output_open(&file, stream_path, &path, 1);
  if (oc >= 0) return oc;
  const int fd = file.fd;
  err = cts_os_mprof_write_metadata(dir);
  if (err) {
    cli_error("cannot write '%s/metadata': %s", dir, cts_os_strerror(err));
    cts_outfile_discard(&file);
    return CLI_EXIT_IO;
  }

  /* One writer over a small ring whose sink is the stream file: packets come out full and
   * numbered in order, cut to their content. */
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(OUT_PACKETS) / 8];
  static uint8_t ring_memory[OUT_PACKETS * OUT_PACKET_SIZE];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = ring_memory;
  cfg.buffer_size = sizeof ring_memory;
  cfg.packets = OUT_PACKETS;
  cfg.clock = no_clock;
  cfg.sink = cts_os_fd_write;
  cfg.sink_user_data = (void *)(intptr_t)fd;
  cts_mprof_ring_t *ring;
  err = cts_mprof_ring_init(&ring, state, sizeof state, &cfg);
  int exit_code = CLI_EXIT_OK;
  if (err) {
    cli_error("internal error: %s", cts_err_name(err));
    exit_code = CLI_EXIT_INTERNAL;
    goto end;
  }
  cts_mprof_writer_init(&c.writer, ring);
  h.on_warning = NULL; /* already reported in pass 1 */
  if (c.sorted) {
    h.on_event = write_event;
    err = cts_os_mprof_read_file(path, &h, false, NULL, msg, sizeof msg, &input_error);
  } else {
    h.on_event = collect_event;
    err = cts_os_mprof_read_file(path, &h, false, NULL, msg, sizeof msg, &input_error);
    if (!err) {
      qsort(c.events, c.n, sizeof *c.events, by_time);
      for (size_t i = 0; i < c.n && !err; i++) err = write_event(&c, &c.events[i]);
    }
  }
  cts_mprof_writer_fini(&c.writer);
  const int sink_err = cts_mprof_ring_flush(ring);
  if (err == CTS_E_NOMEM) {
    cli_error("out of memory sorting the events of '%s'", path);
    exit_code = CLI_EXIT_INTERNAL;
  } else if (err) {
    cli_error("%s: %s", path, c.write_err ? cts_err_name(err) : msg);
    exit_code = input_error ? CLI_EXIT_IO : CLI_EXIT_DATA;
  } else if (sink_err) {
    cli_error("cannot write '%s': %s", stream_path, cts_os_strerror(sink_err));
    exit_code = CLI_EXIT_IO;
  } else if (cts_mprof_ring_dropped(ring)) {
    cli_error("internal error: %llu events dropped",
              (unsigned long long)cts_mprof_ring_dropped(ring));
    exit_code = CLI_EXIT_INTERNAL;
  }
end:
  exit_code = cli_output_close(&file, exit_code);
  for (size_t i = 0; i < c.n; i++) free((void *)c.events[i].str);
  free(c.events);
  return exit_code;
}
