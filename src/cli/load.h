/* SPDX-License-Identifier: MIT */
/* Reading a trace, shared by the analysis commands (info, top, leaks, stats, diff, export):
 * the kind of a trace from its first bytes; a memtrace trace into an allocation profile; a
 * mirage-profile task trace into the task model (analysis/tasks.h); and the formatting of
 * estimates they all print the same way. */
#ifndef CTS_CLI_LOAD_H
#define CTS_CLI_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "../analysis/mtprof.h"
#include "../analysis/siterows.h"
#include "../analysis/tasks.h"
#include "../os/output.h"

/* What a trace is, from its first bytes. */
typedef enum cli_trace_kind {
  CLI_TRACE_MEMTRACE, /* memtrace (plain or gzip); also standard input ("-") */
  CLI_TRACE_TASKS,    /* mirage-profile CTF: a ring or a stream of packets */
} cli_trace_kind_t;

/* Sets *kind and returns -1 for a trace; otherwise prints why path is not one (a
 * directory, a CTF metadata file, a file of other bytes: naming what to pass instead) and
 * returns the exit code (CLI_EXIT_IO when it cannot be read, else CLI_EXIT_DATA). */
int cli_trace_detect(const char *path, cli_trace_kind_t *kind);
/* The same for `dump`, whose reader names the offset of a defect: only directories and CTF
 * metadata are refused here; anything else unknown (or unreadable) is left to the reader. */
int cli_trace_detect_lenient(const char *path, cli_trace_kind_t *kind);

/* A task trace read into the model. */
typedef struct cli_tasks cli_tasks_t;
typedef int (*cli_tasks_hook)(void *user_data, cli_tasks_t *t, const cts_mprof_event_t *ev);
struct cli_tasks {
  const char *path;
  cts_tasks_t m;
  cts_mprof_summary_t sum;
  uint64_t file_size;
  int err; /* reader or input error, 0 if the trace was read completely */
  bool input_error, quiet;
  char msg[512];
  /* packets: totals, and the list when keep_packets */
  bool keep_packets;
  cts_mprof_packet_t *packets;
  size_t npackets, cap_packets;
  uint64_t packets_seen, packets_empty, packets_truncated, packets_full_content;
  uint32_t packet_min, packet_max;
  cli_tasks_hook hook; /* optional: each event, after the model took it */
  void *hook_user_data;
  int hook_err;
};

/* Reads path into t->m (configured by cfg) like cli_trace_load: CLI_EXIT_OK, CLI_EXIT_DATA
 * for a corrupt trace (printed; the model holds what was read), CLI_EXIT_IO or
 * CLI_EXIT_INTERNAL (printed; nothing to report). The model is finished on return. */
int cli_tasks_load(cli_tasks_t *t, const char *path, const cts_tasks_config_t *cfg, bool quiet,
                   bool keep_packets, cli_tasks_hook hook, void *hook_user_data);
void cli_tasks_free(cli_tasks_t *t);
/* The span of the trace in seconds (first to latest event). */
double cli_tasks_duration_s(const cli_tasks_t *t);
/* "850 ns", "12.3 us", "4.56 ms", "1.23 s". */
const char *cli_human_ns(double ns, char *buf, size_t size);

/* Called for every event after the profile took it in (for an allocation,
 * t->prof.last_node is its stack node). Returns 0 or an error that stops reading. */
typedef struct cli_trace cli_trace_t;
typedef int (*cli_event_hook)(void *user_data, cli_trace_t *t, const cts_mt_event_t *ev);

struct cli_trace {
  const char *path;
  cts_mt_reader_t *reader;
  cts_mtprof_t prof;
  const cts_mt_info_t *info; /* NULL if the trace has none (empty or unreadable) */
  uint64_t file_size;
  int err; /* reader or input error, 0 if the trace was read completely */
  bool input_error;
  bool quiet;
  cli_event_hook hook; /* optional, set before cli_trace_load_hooked() */
  void *hook_user_data;
  int hook_err; /* the hook's error, if it stopped reading */
  /* Frames as shown (cli_fold_settings): demangled, allocator frames folded; owned. */
  struct cts_fold *fold;
};

/* Reads path into t->prof, with a progress line on a terminal for large inputs. Returns an
 * exit code: CLI_EXIT_OK; CLI_EXIT_DATA for a corrupt trace (the error is printed, and the
 * profile holds what was read before it, so the caller reports it and exits 1);
 * CLI_EXIT_IO / CLI_EXIT_INTERNAL (printed; nothing to report). */
int cli_trace_load(cli_trace_t *t, const char *path, const cts_mtprof_config_t *cfg, bool quiet);
/* The same, calling hook for each event. A hook error is printed by the caller. */
int cli_trace_load_hooked(cli_trace_t *t, const char *path, const cts_mtprof_config_t *cfg,
                          bool quiet, cli_event_hook hook, void *hook_user_data);
void cli_trace_free(cli_trace_t *t);
/* The mangled name of a function name shown by cli_trace_frames, or NULL if shown as is. */
const char *cli_trace_mangled(const cli_trace_t *t, const char *shown);
/* JSON: ', "mangled": "<symbol>"' after a function name shown demangled, else nothing. */
void cli_json_mangled(cts_out_t *o, const cli_trace_t *t, const char *shown);
/* Frame descriptions from the trace's location table, as people read them (fold.h). */
cts_frames_t cli_trace_frames(cli_trace_t *t);
/* The file name without its directory. */
const char *cli_basename(const char *path);

/* "12.3 MB" for samples × bytes per sample, and with few samples at a rate below 1
 * " (95% CI 8.10 MB-17.9 MB)" appended when with_ci. */
const char *cli_est_bytes(const cts_mtprof_t *p, uint64_t samples, bool with_ci, char *buf,
                          size_t size);
/* Whether samples is few enough for its confidence interval to be worth showing. */
bool cli_show_ci(const cts_mtprof_t *p, uint64_t samples);
/* JSON members for an estimate: "<name>_samples": n, "<name>_bytes": x, and when the rate is
 * below 1 "<name>_bytes_ci95": [lo, hi]. */
void cli_json_estimate(cts_out_t *o, const cts_mtprof_t *p, const char *name, uint64_t samples);
/* JSON header shared by the commands: "trace", "executable", "sample_rate", "word_size",
 * "bytes_per_sample", "duration_s", "reader_result" (no braces, ends with a comma). */
void cli_json_trace_header(cts_out_t *o, const cli_trace_t *t);
/* The JSON value of a trace's reading outcome: "ok", or "error: CTS_E_NAME" for err. */
void cli_json_reader_result(cts_out_t *o, int err);
/* A CSV field, quoted when needed. */
void cli_csv_str(cts_out_t *o, const char *s);
/* Prints the text header: "Trace X: program, rate, what estimates mean". */
void cli_text_trace_header(cts_out_t *o, const cli_trace_t *t);
/* Flushes o; prints an error and returns CLI_EXIT_IO on failure, else `code`. */
int cli_finish_output(cts_out_t *o, int code);

#endif /* CTS_CLI_LOAD_H */
