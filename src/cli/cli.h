/* SPDX-License-Identifier: MIT */
/* Shared plumbing of the ctfscope subcommands: one vocabulary for errors, exit codes,
 * option parsing and progress, so every command behaves the same.
 *
 * One way to write an analysis command (cmd_leaks.c is the model):
 *  - its options in a struct holding a cli_out_opts_t (--json, --csv, -q, --limit), read by
 *    an on_option callback that tries cli_output_option first and reads keyword values
 *    through cli_parse_keyword tables; the shared getopt rows are CLI_LONGOPT_*;
 *  - cli_parse, then cli_one_trace (one trace, one output format, its kind), and for a task
 *    trace the cli_tasks_* function of cmd_tasks.h;
 *  - the trace read (load.h) and its figures computed in src/analysis/, which prints
 *    nothing;
 *  - one printer per format on cli_stdout_for(): print_json through a cts_json_t
 *    (os/json.h; the shared members are cli_jw_*), print_csv, print_text;
 *  - cli_finish_output for the exit code. */
#ifndef CTS_CLI_H
#define CTS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/compiler.h"
#include "../analysis/fold.h"
#include "../analysis/siterows.h"
#include "../os/os.h"
#include "../os/json.h"
#include "../os/output.h"
#include "load.h"

/* Exit codes (docs/exit-codes.md). */
enum {
  CLI_EXIT_OK = 0,       /* success (warnings may have been printed) */
  CLI_EXIT_DATA = 1,     /* the input is not a valid trace; what could be read was used */
  CLI_EXIT_USAGE = 2,    /* bad command line */
  CLI_EXIT_IO = 3,       /* a file or stream could not be opened, read or written */
  CLI_EXIT_INTERNAL = 4, /* out of memory or a bug */
};

typedef struct cli_command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
} cli_command_t;

/* The running subcommand's name, for messages ("ctfscope dump: ..."). */
void cli_set_command(const char *name);
const char *cli_command(void);

void cli_error(const char *fmt, ...) CTS_PRINTF(1, 2);

/* Images (png.c). cli_svg_to_png renders an SVG file into a PNG file with librsvg: 0, or a
 * negative code with a message in err (-ENOTSUP when built without librsvg).
 * cli_write_svg_and_png writes the SVG image with write_svg(path, ctx) to svg_path, or to a
 * temporary file when only a PNG is asked for, then renders it to png_path (if not NULL);
 * both go through cli_output_open (refused when one is an input, replaced only when
 * written whole); errors are printed; returns a CLI exit code. */
/* A library of ctfscope's (the preload library, the PNG renderer) by file name: next to
 * this binary (the build tree), in the library directory relative to the binary's (an
 * installed tree, wherever it was copied), or in the install lib dir. Writes its
 * path into out; false if none is readable. */
bool cli_find_module(const char *name, char *out, size_t size);
int cli_svg_to_png(const char *svg_path, const char *png_path, char *err, size_t err_size);
int cli_write_svg_and_png(const char *svg_path, const char *png_path,
                          int (*write_svg)(const char *path, const void *ctx), const void *ctx,
                          const char *const *inputs, size_t ninputs);
void cli_warn(const char *fmt, ...) CTS_PRINTF(1, 2);
/* Prints the error and a pointer to --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) CTS_PRINTF(1, 2);

/* Parses the options common to all commands out of argv (--help and unknown options),
 * using getopt_long with the command's table; see the commands for use. */
struct option;
typedef int (*cli_option_cb)(void *ctx, int opt, const char *arg);
/* Returns -1 to go on (positional arguments start at *first_arg), or an exit code. */
int cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
              const char *help, cli_option_cb on_option, void *ctx, int *first_arg);

/* Parses a whole decimal number in [min, max] (nothing else on the string). */
bool cli_parse_long(const char *s, long min, long max, long *out);

/* The output options the analysis commands share: --json ('J'), --csv ('C'), -q ('q') and,
 * for the commands that list rows, -n/--limit ('n'). */
typedef struct cli_out_opts {
  bool json, csv, quiet;
  long limit; /* rows shown, 0 = all */
} cli_out_opts_t;
/* Their rows in a command's getopt_long table (<getopt.h>), with the values
 * cli_output_option reads. */
#define CLI_LONGOPT_JSON \
  { "json", no_argument, NULL, 'J' }
#define CLI_LONGOPT_CSV \
  { "csv", no_argument, NULL, 'C' }
#define CLI_LONGOPT_QUIET \
  { "quiet", no_argument, NULL, 'q' }
#define CLI_LONGOPT_LIMIT \
  { "limit", required_argument, NULL, 'n' }
/* For a cli_option_cb: returns -1 when `opt` was one of them, the usage error's exit code
 * for a bad value, CLI_OPTION_OTHER for any other (and for 'n' unless with_limit). */
#define CLI_OPTION_OTHER (-2)
int cli_output_option(int opt, const char *arg, cli_out_opts_t *o, bool with_limit);
/* The first `limit` of n rows (all when the limit is 0). */
size_t cli_rows_shown(const cli_out_opts_t *o, size_t n);
/* The frame options of the commands that show allocation sites (analysis/fold.h): they set
 * cli_fold_settings, which every trace loaded afterwards (cli_trace_load) uses. Add
 * CLI_FRAME_OPTIONS to the command's long options and CLI_FRAME_HELP to its help; the
 * callback gets them through cli_output_option, or calls cli_frame_option (same results).
 * An expression that does not compile is a usage error here. */
enum {
  CLI_OPT_NO_DEMANGLE = 0x4601,
  CLI_OPT_KEEP_ALLOCATOR,
  CLI_OPT_DROP_FRAMES,
  CLI_OPT_KEEP_FRAMES,
  CLI_OPT_THREADS,
};
/* --threads N, for every command that reads a memtrace trace into a profile: it goes with
 * the frame options (CLI_FRAME_OPTIONS and CLI_FRAME_HELP hold it), and a command without
 * them adds CLI_LONGOPT_THREADS and CLI_THREADS_HELP. It sets cts_load_set_threads. */
#define CLI_LONGOPT_THREADS \
  { "threads", required_argument, NULL, CLI_OPT_THREADS }
#define CLI_THREADS_HELP                                                                       \
  "      --threads N     1: read the trace on one thread; 2: decode it on a second thread\n"   \
  "                      while this one aggregates (default: 2 for a file of 64 MiB or more\n" \
  "                      when a second CPU is idle; same results either way)\n"
#define CLI_FRAME_OPTIONS                                                   \
  {"no-demangle", no_argument, NULL, CLI_OPT_NO_DEMANGLE},                  \
      {"keep-allocator-frames", no_argument, NULL, CLI_OPT_KEEP_ALLOCATOR}, \
      {"drop-frames", required_argument, NULL, CLI_OPT_DROP_FRAMES},        \
      {"keep-frames", required_argument, NULL, CLI_OPT_KEEP_FRAMES}, CLI_LONGOPT_THREADS
#define CLI_FRAME_HELP                                                                         \
  "      --no-demangle   show C++ and Rust function names mangled, as in the trace\n"          \
  "      --keep-allocator-frames\n"                                                            \
  "                      show the allocator's frames (malloc, operator new, std::, alloc::)\n" \
  "                      instead of folding them into the allocation site\n"                   \
  "      --drop-frames RE  fold frames matching RE (POSIX extended) and all they call\n"       \
  "      --keep-frames RE  never fold frames matching RE\n" CLI_THREADS_HELP
extern struct cts_fold_config cli_fold_settings;
int cli_frame_option(int opt, const char *arg);

/* Rows that fit the terminal (fit.c), for the commands whose text tables name sites or
 * frames (top, leaks, diff): add CLI_WIDTH_OPTIONS and CLI_WIDTH_HELP; cli_output_option
 * reads them (or call cli_width_option: same results). Without them, rows fit the terminal
 * when standard output is one (its TIOCGWINSZ width, else $COLUMNS, else 80) and nothing
 * changes in a pipe or a file. Not thread-safe (one command per process). */
enum { CLI_OPT_WIDTH = 0x4620, CLI_OPT_FULL_NAMES };
#define CLI_WIDTH_OPTIONS                               \
  {"width", required_argument, NULL, CLI_OPT_WIDTH}, {  \
    "full-names", no_argument, NULL, CLI_OPT_FULL_NAMES \
  }
#define CLI_WIDTH_HELP                                                                          \
  "      --width N       fit each text row into N columns, shortening long names: their\n"      \
  "                      (...) and <...> lists collapse, then their middle is elided; 0 = no\n" \
  "                      limit (default: the terminal's width when standard output is one,\n"   \
  "                      else no limit)\n"                                                      \
  "      --full-names    print names whole, however wide (--width 0)\n"
int cli_width_option(int opt, const char *arg);
/* The columns a text row may take: 0 = no limit. */
size_t cli_row_width(void);
/* Columns that s takes on a terminal once its controls are escaped (a CJK character: 2). */
size_t cli_text_columns(const char *s);
/* name as the terminal will show it (controls as \xNN), shortened to the row's width less
 * used_columns (at least 16 columns); name itself when there is no limit. The text is
 * valid until the next call. */
const char *cli_fit_name(const char *name, size_t used_columns);
/* printf into o for a heading of a text table (lines that name what follows): on a
 * terminal (cli_row_width), each line longer than the width is wrapped at its spaces, the
 * continuation indented past its label; into a pipe or a file, the bytes as printf writes
 * them. */
void cli_out_heading(cts_out_t *o, const char *fmt, ...) CTS_PRINTF(2, 3);
/* A site's name for a text row (cts_row_name), and a frame's (cts_frame_label): whole (up
 * to 64 KiB; a longer one ends in "…" at a character's start), valid until the next call
 * of either. */
const char *cli_site_name(const cts_row_t *r);
const char *cli_frame_name(const cts_frames_t *f, uint64_t code);
/* Writes before, name fitted between before and after (NULL: nothing), and after. */
void cli_out_fitted_row(cts_out_t *o, const char *before, const char *name, const char *after);

/* --json and --csv exclude each other: -1 when at most one is given, else the usage error. */
int cli_output_check(const cli_out_opts_t *o);

/* A keyword value of an option (--by, --sort, --metric, --format, ...): a table of names
 * and values, ended by a NULL name. */
typedef struct cli_keyword {
  const char *name;
  int value;
} cli_keyword_t;
/* Sets *out to the value of arg in the table and returns -1; otherwise prints the usage
 * error "OPTION takes A, B or C[SUFFIX], not 'ARG'" (suffix may be NULL) and returns its
 * exit code, as cli_option_cb results do. */
int cli_parse_keyword(const char *option, const char *arg, const cli_keyword_t *table,
                      const char *suffix, int *out);
/* Parses the value of --by (line, function or file), as cli_parse_keyword. */
int cli_parse_group(const char *arg, cts_group_t *out);

/* The preamble of the commands that read one trace, after cli_parse: exactly one trace
 * (usage errors "no trace given" and `many`), --json and --csv not both, then `conflict`
 * as a usage error when not NULL (a command's own incompatible options), then the kind of
 * the trace (cli_trace_detect). Returns -1 with *kind set, else the exit code (printed). */
int cli_one_trace(int argc, char **argv, int first, const cli_out_opts_t *o, const char *many,
                  const char *conflict, cli_trace_kind_t *kind);

/* The commands' output: one buffer for the process (a command prints one report; 256 KiB,
 * too large for a stack). cli_out_buffer starts it over on fd; `term` escapes control
 * characters for a person's terminal (cts_out_t.term). cli_stdout is it on standard output;
 * cli_stdout_for chooses `term` from the output options: text for people, and CSV when
 * standard output is a terminal; JSON escapes its own. Not thread-safe. */
cts_out_t *cli_out_buffer(int fd, bool term);
cts_out_t *cli_stdout(bool term);
cts_out_t *cli_stdout_for(const cli_out_opts_t *o);

/* JSON members the commands share, through the writer:
 * cli_jw_estimate: "<name>_samples": n, "<name>_bytes": x, and when the rate is below 1
 *   "<name>_bytes_ci95": [lo, hi];
 * cli_jw_trace_header: "trace", "executable", "sample_rate", "word_size",
 *   "bytes_per_sample", "duration_s", "reader_result", then a line break before the next
 *   member;
 * cli_jw_reader_result: the value "ok", or "error: CTS_E_NAME" for err. */
void cli_jw_estimate(cts_json_t *w, const cts_alloc_profile_t *p, const char *name,
                     uint64_t samples);
void cli_jw_trace_header(cts_json_t *w, const cli_trace_t *t);
void cli_jw_reader_result(cts_json_t *w, int err);
/* A site's "function" ("(no backtrace)" for the root), "mangled" when the function is shown
 * demangled (t may be NULL: never), "file" and "line" members. */
void cli_jw_site(cts_json_t *w, const cli_trace_t *t, const cts_row_t *r);
/* Ends a command's JSON document, laid out one member per line: closes the array of rows
 * still open when `rows` (on its own line, indented by one), then the object (on its own
 * line), and ends the output's last line. */
void cli_jw_end(cts_json_t *w, bool rows);

/* The one log line of the commands: "ctfscope CMD: message" on stderr (progress, what was
 * saved, what a server listens on). Not for errors and warnings (cli_error, cli_warn).
 * cli_log_line is it as a log callback (void *user_data, const char *line), for the
 * long-running commands' one-line-per-event logs. */
void cli_note(const char *fmt, ...) CTS_PRINTF(1, 2);
void cli_log_line(void *user_data, const char *line);

/* For long-running commands: SIGINT and SIGTERM call `stop` (which must be
 * async-signal-safe), and SIGPIPE is ignored so a closed peer is an error, not a kill. */
void cli_catch_stop_signals(void (*stop)(int sig));

/* A command's output file (NULL or "-": standard output), through cts_outfile_t: refused
 * with a usage error when it is the same file as one of the inputs (which it would
 * destroy), else opened. Returns -1 when open, else the exit code (the error printed). */
int cli_output_open(cts_outfile_t *f, const char *path, const char *const *inputs, size_t n);
/* Ends the output of a run that ends with exit code `code`: the file is put in place when
 * the code is 0 or 1 (what could be read of a damaged trace was written, as on standard
 * output), else dropped and any old file kept. Returns code, or CLI_EXIT_IO (printed) when
 * the file could not be written. */
int cli_output_close(cts_outfile_t *f, int code);

/* Exit code for an error returned while reading or writing. */
int cli_exit_code(int err, bool input_error);

/* Progress on stderr for long reads, shown only when stderr is a terminal: a line
 * "CMD: reading NAME  45% 81.2 MB of 175 MB, 120 MB/s, 1 s left" (no percentage or time
 * left when the size is unknown, as for a pipe) that appears once the read has taken
 * CLI_PROGRESS_DELAY_MS, is redrawn at most every CLI_PROGRESS_EVERY_MS, and is erased by
 * cli_progress_done() (and cli_progress_erase(), before a message). The environment
 * variable CTFSCOPE_PROGRESS_DELAY_MS replaces the delay (tests set 0 to see the line on a
 * small trace). Not thread-safe: one progress per reading thread. */
#define CLI_PROGRESS_DELAY_MS 1000u
#define CLI_PROGRESS_EVERY_MS 250u
typedef struct cli_progress {
  const char *label;
  const char *name; /* the input's file name, shown after the label */
  bool active;      /* stderr is a terminal */
  bool shown;       /* the line is on the screen */
  uint64_t start_ns, last_ns, delay_ns;
} cli_progress_t;
void cli_progress_init(cli_progress_t *p, const char *label, const char *path);
void cli_progress_cb(void *user_data, uint64_t done, uint64_t total);
void cli_progress_erase(cli_progress_t *p);
void cli_progress_done(cli_progress_t *p);

/* "12.3 MB" style sizes (decimal units, like memtrace's tools). */
const char *cli_human_bytes(double bytes, char *buf, size_t size);
/* "1 234 567": digits grouped for people. */
const char *cli_grouped(uint64_t v, char *buf, size_t size);
/* Shortest %g form that reads back as the same double. */
const char *cli_shortest_double(double v, char *buf, size_t size);

int cmd_dump(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* ctfscope dump of a mirage-profile task trace (cmd_dump_mprof.c); an exit code. */
int cli_dump_mprof(const char *path, const char *output, bool comments, bool quiet);
int cmd_top(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_subsample(int argc, char **argv);
int cmd_filter(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);

#endif /* CTS_CLI_H */
