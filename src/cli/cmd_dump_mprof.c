/* SPDX-License-Identifier: MIT */
/* ctfscope dump for mirage-profile task traces (docs/formats/mprof.md): one line per
 * event, packets in sequence order (§4), so that the lines follow babeltrace2's on the
 * reordered trace event for event. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>

#include "../os/mprof_ring.h"
#include "../os/output.h"
#include "cli.h"

typedef struct mprof_dump {
  cts_out_t out;
  const char *path;
  bool comments, quiet;
} mprof_dump_t;

/* A string in double quotes with C escapes, so that a line is always one line. */
static void put_quoted(cts_out_t *o, const char *s, size_t len) {
  cts_out_char(o, '"');
  for (size_t i = 0; i < len; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      cts_out_char(o, '\\');
      cts_out_char(o, (char)c);
    } else if (c == '\n') {
      cts_out_str(o, "\\n");
    } else if (c == '\t') {
      cts_out_str(o, "\\t");
    } else if (c < ' ' || c == 0x7f) {
      cts_out_printf(o, "\\x%02x", c);
    } else {
      cts_out_char(o, (char)c);
    }
  }
  cts_out_char(o, '"');
}

static int on_packet(void *ud, const cts_mprof_packet_t *p) {
  mprof_dump_t *d = ud;
  if (d->comments)
    cts_out_printf(&d->out, "# packet %u at offset %llu: count %u, %u bytes, content %u bytes%s\n",
                   p->file_index, (unsigned long long)p->offset, p->count, p->size, p->content_size,
                   p->truncated ? " (truncated)" : "");
  return d->out.err;
}

static int on_event(void *ud, const cts_mprof_event_t *ev) {
  mprof_dump_t *d = ud;
  cts_out_t *o = &d->out;
  cts_out_u64(o, ev->time_ns);
  cts_out_char(o, ' ');
  cts_out_str(o, cts_mprof_event_name(ev->id));
  if (ev->id != CTS_MPROF_GC) {
    cts_out_str(o, " thread=");
    cts_out_i64(o, ev->thread);
  }
  switch (ev->id) {
    case CTS_MPROF_CREATES:
      cts_out_str(o, " child=");
      cts_out_i64(o, (int64_t)ev->arg);
      cts_out_str(o, " type=");
      cts_out_str(o, cts_task_type_name(ev->thread_type));
      break;
    case CTS_MPROF_FULFILLS:
    case CTS_MPROF_FAILS:
      cts_out_str(o, " resolvee=");
      cts_out_i64(o, (int64_t)ev->arg);
      if (ev->id == CTS_MPROF_FAILS) {
        cts_out_str(o, " exn=");
        put_quoted(o, ev->str, ev->str_len);
      }
      break;
    case CTS_MPROF_BECOMES:
      cts_out_str(o, " sleeper=");
      cts_out_i64(o, (int64_t)ev->arg);
      break;
    case CTS_MPROF_LABEL:
      cts_out_str(o, " label=");
      put_quoted(o, ev->str, ev->str_len);
      break;
    case CTS_MPROF_INCREASE:
    case CTS_MPROF_COUNTER:
      cts_out_str(o, ev->id == CTS_MPROF_INCREASE ? " amount=" : " value=");
      cts_out_i64(o, ev->value);
      cts_out_str(o, " counter=");
      put_quoted(o, ev->str, ev->str_len);
      break;
    case CTS_MPROF_GC:
      cts_out_str(o, " duration_ns=");
      cts_out_u64(o, ev->arg);
      break;
    case CTS_MPROF_SWITCH:
      break;
    case CTS_MPROF_ALLOC: /* ctfscope's extensions, by their metadata names (mprof.md §14) */
    case CTS_MPROF_ANCHOR:
    case CTS_MPROF_LOST:
      cts_out_str(o, ev->id == CTS_MPROF_ALLOC    ? " object_id="
                     : ev->id == CTS_MPROF_ANCHOR ? " realtime_ns="
                                                  : " dropped=");
      cts_out_u64(o, ev->arg);
      break;
    default: /* read, signal, try_read, read_later, signal_noswitch */
      cts_out_str(o, " source=");
      cts_out_i64(o, (int64_t)ev->arg);
  }
  cts_out_char(o, '\n');
  return o->err;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  mprof_dump_t *d = ud;
  (void)code;
  if (!d->quiet) cli_warn("%s: at offset %llu: %s", d->path, (unsigned long long)offset, message);
  if (d->comments) {
    cts_out_printf(&d->out, "# warning at offset %llu: %s\n", (unsigned long long)offset, message);
  }
}

int cli_dump_mprof(const char *path, const char *output, bool comments, bool quiet) {
  cts_outfile_t file;
  const int oc = cli_output_open(&file, output, &path, 1);
  if (oc >= 0) return oc;
  static mprof_dump_t d; /* 256 KiB output buffer: keep it off the stack */
  memset(&d, 0, sizeof d);
  cts_out_init(&d.out, file.fd);
  /* The format prints labels as they are; a terminal gets their controls escaped. */
  d.out.term = isatty(file.fd);
  d.path = path;
  d.comments = comments;
  d.quiet = quiet;
  if (comments) {
    cts_out_str(&d.out, "# ctfscope dump, format 1\n# file: ");
    cts_out_str(&d.out, path);
    cts_out_str(&d.out,
                "\n# format: mirage-profile CTF (packets in sequence order)\n"
                "# event lines: <time_ns> <event> thread=<task> <field>=<value> ...  "
                "(tasks as signed decimals; gc has no thread)\n");
  }
  const cts_mprof_handler_t h = {
      .user_data = &d, .on_packet = on_packet, .on_event = on_event, .on_warning = on_warning};
  cts_mprof_summary_t sum;
  char msg[512];
  bool input_error;
  const int err = cts_os_mprof_read_file(path, &h, false, &sum, msg, sizeof msg, &input_error);
  if (comments) {
    if (!err)
      cts_out_printf(&d.out, "# end: ok, %llu events in %llu packets, %llu warnings\n",
                     (unsigned long long)sum.events, (unsigned long long)sum.packets,
                     (unsigned long long)sum.warnings);
    else if (!input_error && err != d.out.err)
      cts_out_printf(&d.out, "# end: error %s\n", msg);
  }
  const int out_err = cts_out_flush(&d.out);
  int exit_code = CLI_EXIT_OK;
  if (err) {
    if (err == d.out.err) {
      cli_error("cannot write the dump: %s", cts_os_strerror(err));
      exit_code = CLI_EXIT_IO;
    } else if (input_error) {
      cli_error("%s: %s", path, msg);
      exit_code = CLI_EXIT_IO;
    } else {
      cli_error("%s: %s (%s)", path, msg, cts_err_name(err));
      exit_code = err == CTS_E_NOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_DATA;
    }
  } else if (out_err) {
    cli_error("cannot write the dump: %s", cts_os_strerror(out_err));
    exit_code = CLI_EXIT_IO;
  }
  return cli_output_close(&file, exit_code);
}
