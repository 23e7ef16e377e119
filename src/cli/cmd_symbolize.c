/* SPDX-License-Identifier: MIT */
/* ctfscope symbolize: a memtrace trace re-written with the locations of its codes resolved
 * from ELF files on the host, for traces whose writer could not name them (a kernel with
 * no symbol table of its own, a program traced without its debug information). Events,
 * times, object ids and the header are re-written as they were (analysis/transcode.h);
 * only location records change: the source's are kept, codes without any are looked up in
 * the ELF files (analysis/elfcodes.h, elfsym.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/elfcodes.h"
#include "../analysis/transcode.h"
#include "cli.h"

#define MAX_ELVES 16

static const char help[] =
    "Usage: ctfscope symbolize --elf FILE[@BASE] -o OUTPUT [OPTIONS] TRACE\n"
    "\n"
    "Write a copy of a memtrace trace whose location codes (return addresses) are named\n"
    "from ELF files: function, file and line from DWARF, one location per inlined call,\n"
    "or the function alone from the symbol table where there is no DWARF. For traces whose\n"
    "writer sent its codes without locations, such as a kernel with no symbol table of its\n"
    "own (examples/unikernel). Codes that already have locations in TRACE keep them; codes\n"
    "in none of the files stay without locations and are counted. Events, times, object\n"
    "ids and the header are unchanged.\n"
    "\n"
    "Options:\n"
    "      --elf FILE[@BASE]   an executable or shared object (repeatable, up to 16, tried\n"
    "                          in order); BASE is its load bias, the address its address 0\n"
    "                          was loaded at (hex with 0x, or decimal; default 0: an\n"
    "                          executable run where it was linked)\n"
    "      --strip-prefix DIR  write file names under DIR relative to it (e.g. the source\n"
    "                          tree, as DWARF names files by their absolute paths)\n"
    "  -o, --output FILE       the trace to write (required)\n"
    "      --encoding E        backtrace encoding: memtrace (default; TRACE's own cache\n"
    "                          choices when TRACE is memtrace's) or compact\n"
    "  -q, --quiet             do not print warnings and the summary\n"
    "  -h, --help              show this help\n"
    "\n"
    "Example, the unikernel's trace (examples/unikernel/run.sh does this):\n"
    "  ctfscope symbolize --elf unikernel.elf --strip-prefix \"$PWD\" -o named.ctf memtrace.ctf\n"
    "\n"
    "Exit status: 0 when the trace was read and written completely, 1 when it is corrupt\n"
    "(what was read before the error is written as a valid trace) or an ELF file cannot be\n"
    "used (not an executable or shared object, or with neither DWARF nor symbols), 2 for a\n"
    "usage error, 3 when a file cannot be read or written, 4 out of memory. An output that\n"
    "is one of the inputs is refused (2); the output is written aside and replaces an\n"
    "existing file only when the run ends with 0 or 1.\n";

typedef struct symbolize_opts {
  const char *elf[MAX_ELVES];
  uint64_t base[MAX_ELVES];
  size_t nelf;
  const char *strip_prefix;
  const char *output;
  cts_mt_encoding_t encoding;
  bool quiet;
  const char *path; /* the trace, for warnings */
} symbolize_opts_t;

/* FILE@BASE: a number after the last '@' is the base, else the whole argument names the
 * file. The file part is kept in argv's own string, cut at the '@'. */
static int parse_elf(symbolize_opts_t *o, char *arg) {
  if (o->nelf == MAX_ELVES) return cli_usage_error("at most %d --elf files", MAX_ELVES);
  uint64_t base = 0;
  char *const at = strrchr(arg, '@');
  if (at && at != arg && at[1]) {
    char *end;
    const unsigned long long v = strtoull(at + 1, &end, 0);
    if (*end == '\0' && at[1] != '-') {
      base = v;
      *at = '\0';
    }
  }
  if (!arg[0]) return cli_usage_error("--elf takes FILE[@BASE], not '%s'", arg);
  o->elf[o->nelf] = arg;
  o->base[o->nelf++] = base;
  return -1;
}

static int on_option(void *ctx, int opt, const char *arg) {
  symbolize_opts_t *const o = ctx;
  switch (opt) {
    case 'e':
      return parse_elf(o, (char *)arg);
    case 'p':
      o->strip_prefix = arg;
      break;
    case 'o':
      o->output = arg;
      break;
    case 'E': {
      static const cli_keyword_t encodings[] = {
          {"memtrace", CTS_MT_ENCODING_MEMTRACE}, {"compact", CTS_MT_ENCODING_COMPACT}, {0}};
      int e;
      const int rc = cli_parse_keyword("--encoding", arg, encodings, NULL, &e);
      if (rc >= 0) return rc;
      o->encoding = (cts_mt_encoding_t)e;
      break;
    }
    case 'q':
      o->quiet = true;
      break;
  }
  return -1;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const symbolize_opts_t *const o = ud;
  (void)code;
  if (!o->quiet) cli_warn("%s: at offset %llu: %s", o->path, (unsigned long long)offset, message);
}

/* Opens the ELF files; -1 when all are open, else the exit code (printed). */
static int open_elves(const symbolize_opts_t *o, cts_elfsym_t **elves) {
  for (size_t i = 0; i < o->nelf; i++) {
    char msg[512];
    const int err =
        cts_elfsym_open(&elves[i], o->elf[i], o->base[i], o->strip_prefix, msg, sizeof msg);
    if (err == CTS_E_NOMEM) {
      cli_error("out of memory opening '%s'", o->elf[i]);
      return CLI_EXIT_INTERNAL;
    }
    if (err) {
      cli_error("%s", msg);
      return err == CTS_E_INVAL ? CLI_EXIT_DATA : CLI_EXIT_IO;
    }
    if (!cts_elfsym_has_dwarf(elves[i]) && !o->quiet)
      cli_warn(
          "%s: no DWARF debug information: functions are named from its symbol table, "
          "without files or lines",
          o->elf[i]);
  }
  return -1;
}

static void print_summary(const symbolize_opts_t *o, const cts_elfcodes_stats_t *s) {
  if (o->quiet) return;
  cli_note(
      "%llu codes: %llu with file and line, %llu by function only, %llu by offset, %llu "
      "kept from the trace, %llu in no ELF file (left unresolved)",
      (unsigned long long)s->codes, (unsigned long long)s->line, (unsigned long long)s->symbol,
      (unsigned long long)s->offset, (unsigned long long)s->kept, (unsigned long long)s->outside);
  if (s->codes && s->codes == s->outside)
    cli_warn("no code of %s is in the ELF files: another build of them, or a wrong @BASE?",
             o->path);
  if (s->failed)
    cli_warn("%llu codes were left without locations: out of memory",
             (unsigned long long)s->failed);
}

/* Reads the trace into the transcoder writing to `file`; returns the exit code. */
static int rewrite(const symbolize_opts_t *o, cts_elfsym_t *const *elves, cts_outfile_t *file,
                   bool *discard) {
  cts_transcode_t t;
  int err = cts_transcode_init(&t, 0, o->encoding, cts_os_fd_write, (void *)(intptr_t)file->fd);
  if (err) {
    cli_error("cannot create a reader: %s", cts_os_strerror(err));
    return CLI_EXIT_INTERNAL;
  }
  cts_elfcodes_t codes;
  cts_elfcodes_init(&codes, elves, o->nelf, t.reader);
  t.resolve = cts_elfcodes_resolve;
  t.resolve_user_data = &codes;
  t.on_warning = on_warning;
  t.warning_user_data = (void *)o;
  cli_progress_t progress;
  cli_progress_init(&progress, "reading", o->path);
  bool input_error = false;
  err = cts_os_read_memtrace(o->path, t.reader, cli_progress_cb, &progress, &input_error);
  cli_progress_done(&progress);
  int code = CLI_EXIT_OK;
  /* A writer error is the output's when it is -errno (the write failed), the input's
   * header's otherwise (refused before anything was written). */
  const bool write_failed = t.err < 0 && t.err > CTS_E_AGAIN;
  if (err && t.err && err == t.err && write_failed) {
    cli_error("cannot write '%s': %s", o->output, cts_os_strerror(err));
    code = CLI_EXIT_IO;
  } else if (err && t.err && err == t.err && !t.writer) {
    cli_error("%s: its trace info cannot be written back (%s): %s", o->path, cts_err_name(err),
              cts_os_strerror(err));
    *discard = true;
    code = CLI_EXIT_DATA;
  } else {
    if (err) {
      cli_error("%s: %s (%s)%s", o->path,
                input_error ? cts_os_strerror(err) : cts_mt_reader_error_message(t.reader),
                cts_err_name(err), t.writer ? "; what was read before it is written" : "");
      code = cli_exit_code(err, input_error);
    }
    const int e = t.writer ? cts_mt_writer_close(t.writer) : 0;
    if (e) {
      cli_error("cannot write '%s': %s", o->output, cts_os_strerror(e));
      code = e == CTS_E_NOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_IO;
    } else if (!t.writer) {
      *discard = true; /* no trace info was read: nothing to write */
    }
    if (code == CLI_EXIT_OK) print_summary(o, &codes.stats);
  }
  if (t.id_mismatches && !o->quiet)
    cli_warn("%s: %llu object ids could not be kept (a v3 trace with several domains)", o->path,
             (unsigned long long)t.id_mismatches);
  cts_elfcodes_fini(&codes);
  cts_transcode_fini(&t);
  return code;
}

int cmd_symbolize(int argc, char **argv) {
  static const struct option longopts[] = {
      {"elf", required_argument, NULL, 'e'},
      {"strip-prefix", required_argument, NULL, 'p'},
      {"output", required_argument, NULL, 'o'},
      {"encoding", required_argument, NULL, 'E'},
      CLI_LONGOPT_QUIET,
      {0},
  };
  symbolize_opts_t o = {.encoding = CTS_MT_ENCODING_MEMTRACE};
  int first;
  const int rc = cli_parse(argc, argv, "o:q", longopts, help, on_option, &o, &first);
  if (rc >= 0) return rc;
  if (o.nelf == 0) return cli_usage_error("--elf is required");
  if (!o.output) return cli_usage_error("--output is required");
  if (argc - first != 1) return cli_usage_error("give one trace");
  o.path = argv[first];

  cli_trace_kind_t kind;
  const int kc = cli_trace_detect(o.path, &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS) {
    cli_error("%s is a mirage-profile task trace: symbolize names the codes of memtrace traces",
              o.path);
    return CLI_EXIT_DATA;
  }
  cts_elfsym_t *elves[MAX_ELVES] = {0};
  int code = open_elves(&o, elves);
  if (code < 0) {
    const char *inputs[MAX_ELVES + 1] = {o.path};
    for (size_t i = 0; i < o.nelf; i++) inputs[i + 1] = o.elf[i];
    cts_outfile_t file;
    code = cli_output_open(&file, o.output, inputs, o.nelf + 1);
    if (code < 0) {
      bool discard = false;
      code = rewrite(&o, elves, &file, &discard);
      if (discard)
        cts_outfile_discard(&file);
      else
        code = cli_output_close(&file, code);
    }
  }
  for (size_t i = 0; i < o.nelf; i++) cts_elfsym_close(elves[i]);
  return code;
}
