/* SPDX-License-Identifier: MIT */
/* Reading a trace for the analysis commands (info, top, leaks, stats, diff, export): the
 * loaders of analysis/load.h with the CLI's ends attached. Their messages are printed as
 * "ctfscope CMD: error: ..." (warnings unless quiet), with a progress line for large inputs,
 * and their errors become exit codes in one place (cli_load_exit). Also the output
 * helpers the commands share (estimates, JSON and CSV fields, the trace header). */
#ifndef CTS_CLI_LOAD_H
#define CTS_CLI_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "../analysis/load.h"
#include "../analysis/alloc_profile.h"
#include "../analysis/siterows.h"
#include "../analysis/tasks.h"
#include "../analysis/units.h"
#include "../os/output.h"

/* The exit code (docs/exit-codes.md) for an error returned by a loader of analysis/load.h
 * or src/report/report.h, the one place where they are mapped: 0 → OK; a hook's error
 * (by_hook, printed by the caller) or an input that could not be read (input_error, nothing
 * kept) → IO; a corrupt trace whose figures were kept → DATA; too many piped inputs
 * (CTS_E_LIMIT) → USAGE; a bad configuration (CTS_E_INVAL) → INTERNAL; else as
 * cli_exit_code: out of memory → INTERNAL, an errno or CTS_E_IO → IO, a defect → DATA. */
int cli_load_exit(int err, bool kept, bool input_error, bool by_hook);
/* Calls load(ctx, opts) with the CLI's ends of a loader in opts: its messages printed
 * (cli_error; cli_warn unless quiet) and, when progress_path is not NULL, a progress line
 * on a terminal while a large input is read (erased before a message and at the end).
 * Returns what load returns. */
int cli_load_run(const char *progress_path, bool quiet,
                 int (*load)(void *ctx, const cts_load_opts_t *opts), void *ctx);

/* What a trace is, from its first bytes. */
typedef cts_trace_kind_t cli_trace_kind_t;
#define CLI_TRACE_MEMTRACE CTS_TRACE_MEMTRACE
#define CLI_TRACE_TASKS    CTS_TRACE_TASKS

/* Sets *kind and returns -1 for a trace; otherwise prints why path is not one (a
 * directory, a CTF metadata file, a file of other bytes: naming what to pass instead) and
 * returns the exit code (CLI_EXIT_IO when it cannot be read, else CLI_EXIT_DATA). */
int cli_trace_detect(const char *path, cli_trace_kind_t *kind);
/* The same for `dump`, whose reader names the offset of a defect: only directories and CTF
 * metadata are refused here; anything else unknown (or unreadable) is left to the reader. */
int cli_trace_detect_lenient(const char *path, cli_trace_kind_t *kind);

/* A task trace read into the model (analysis/load.h). */
typedef cts_task_trace_t cli_tasks_t;
typedef cts_task_trace_hook cli_tasks_hook;

/* Reads path into t->m (configured by cfg) like cli_trace_load: CLI_EXIT_OK, CLI_EXIT_DATA
 * for a corrupt trace (printed; the model holds what was read), CLI_EXIT_IO or
 * CLI_EXIT_INTERNAL (printed; nothing to report). The model is finished on return. */
int cli_tasks_load(cli_tasks_t *t, const char *path, const cts_tasks_config_t *cfg, bool quiet,
                   bool keep_packets, cli_tasks_hook hook, void *hook_user_data);
static inline void cli_tasks_free(cli_tasks_t *t) {
  cts_task_trace_free(t);
}
/* The span of the trace in seconds (first to latest event). */
static inline double cli_tasks_duration_s(const cli_tasks_t *t) {
  return cts_task_trace_duration_s(t);
}
static inline const char *cli_human_ns(double ns, char *buf, size_t size) {
  return cts_human_ns(ns, buf, size);
}

/* A memtrace trace read into an allocation profile (analysis/load.h). */
typedef cts_mem_trace_t cli_trace_t;
typedef cts_mem_trace_hook cli_event_hook;

/* Reads path into t->prof, with a progress line on a terminal for large inputs. Returns an
 * exit code: CLI_EXIT_OK; CLI_EXIT_DATA for a corrupt trace (the error is printed, and the
 * profile holds what was read before it, so the caller reports it and exits 1);
 * CLI_EXIT_IO / CLI_EXIT_INTERNAL (printed; nothing to report). */
int cli_trace_load(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                   bool quiet);
/* The same, calling hook for each event. A hook error is printed by the caller. */
int cli_trace_load_hooked(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                          bool quiet, cli_event_hook hook, void *hook_user_data);
/* The same, the events going to hook only (cts_load_opts_t.events_only): t->prof gets the
 * trace info and packet times but no live blocks, stacks or figures. For commands that
 * format each event themselves (export csv and chrome). */
int cli_trace_load_events(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                          bool quiet, cli_event_hook hook, void *hook_user_data);
/* cli_trace_load_events for a pass that reads a trace before the one that writes (export's
 * count of the chrome JSON): quiet (the second pass reports the trace's problems), its
 * progress line "counting". */
int cli_trace_count_events(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                           cli_event_hook hook, void *hook_user_data);
static inline void cli_trace_free(cli_trace_t *t) {
  cts_mem_trace_free(t);
}
/* Frame descriptions from the trace's location table, as people read them (the frame
 * options: demangled, allocator frames folded; analysis/fold.h). */
static inline cts_frames_t cli_trace_frames(cli_trace_t *t) {
  return cts_mem_trace_frames(t);
}
/* The mangled name of a function name shown by cli_trace_frames, or NULL if shown as is. */
static inline const char *cli_trace_mangled(const cli_trace_t *t, const char *shown) {
  return cts_mem_trace_mangled(t, shown);
}
/* JSON: a "mangled" member with the symbol after a function name shown demangled, else
 * nothing. */
struct cts_json;
void cli_jw_mangled(struct cts_json *w, const cli_trace_t *t, const char *shown);
/* The file name without its directory. */
static inline const char *cli_basename(const char *path) {
  return cts_basename(path);
}

/* "12.3 MB" for samples × bytes per sample, and with few samples at a rate below 1
 * " (95% CI 8.10 MB-17.9 MB)" appended when with_ci. */
static inline const char *cli_est_bytes(const cts_alloc_profile_t *p, uint64_t samples,
                                        bool with_ci, char *buf, size_t size) {
  return cts_est_bytes(p, samples, with_ci, buf, size);
}
/* Whether samples is few enough for its confidence interval to be worth showing. */
static inline bool cli_show_ci(const cts_alloc_profile_t *p, uint64_t samples) {
  return cts_show_ci(p, samples);
}
/* A CSV field, quoted when needed. */
void cli_csv_str(cts_out_t *o, const char *s);
/* Prints the text header: "Trace X: program, rate, what estimates mean". */
void cli_text_trace_header(cts_out_t *o, const cli_trace_t *t);
/* Flushes o; prints an error and returns CLI_EXIT_IO on failure, else `code`. */
int cli_finish_output(cts_out_t *o, int code);

#endif /* CTS_CLI_LOAD_H */
