/* SPDX-License-Identifier: MIT */
/* Reading a trace for the analyses (the CLI's commands, the report): the kind of a trace
 * from its first bytes; a memtrace trace into an allocation profile (alloc_profile.h); a
 * mirage-profile task trace into the task model (tasks.h).
 *
 * Errors come back as return codes (0, a negative errno or a CTS_E_* code of
 * <ctfscope/errors.h>) with flags on the result that say what is left; messages (the error
 * explained, warnings about the trace) go to a log callback, never to a stream: mapping
 * them to exit codes and printing them is the caller's (src/cli/load.c).
 *
 * Not thread-safe: one load per object at a time. The detection and the loaders read
 * files and may register piped inputs with cts_os_input_register (process-wide). */
#ifndef CTS_ANALYSIS_LOAD_H
#define CTS_ANALYSIS_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/compiler.h"
#include "../os/os.h"
#include "alloc_profile.h"
#include "siterows.h"
#include "tasks.h"

/* ---- messages --------------------------------------------------------------------------- */

typedef enum cts_log_level {
  CTS_LOG_WARNING, /* something about the trace worth knowing; the result is complete */
  CTS_LOG_ERROR,   /* why the call returned its error (one line) */
} cts_log_level_t;

/* A message sink: fn (may be NULL: messages are dropped) gets one line, without a trailing
 * newline, valid only during the call. */
typedef struct cts_log {
  void (*fn)(void *user_data, cts_log_level_t level, const char *msg);
  void *user_data;
} cts_log_t;

/* Formats a message (at most 2 KiB; longer ones are cut) and hands it to log->fn. */
void cts_logf(const cts_log_t *log, cts_log_level_t level, const char *fmt, ...) CTS_PRINTF(3, 4);

/* ---- the kind of a trace ---------------------------------------------------------------- */

typedef enum cts_trace_kind {
  CTS_TRACE_MEMTRACE, /* memtrace (plain or gzip); also standard input ("-") */
  CTS_TRACE_TASKS,    /* mirage-profile CTF: a ring or a stream of packets */
} cts_trace_kind_t;

/* Sets *kind from the first bytes of path ("-": standard input). A task trace on a pipe is
 * copied into an unlinked temporary file first (it is read at offsets), and a FIFO is
 * opened once and registered (cts_os_input_register) so that the loaders read the same
 * bytes. Returns 0, or with an error logged: a negative errno (a directory: -EISDIR; path
 * cannot be opened or read; the copy failed), CTS_E_BAD_MAGIC (CTF metadata, or bytes of
 * neither format), CTS_E_LIMIT (too many piped inputs). When !strict (`dump`, whose reader
 * names the offset of a defect) only directories and CTF metadata are refused; an
 * unreadable or unknown file is left to the reader (0, memtrace). */
int cts_trace_detect(const char *path, cts_trace_kind_t *kind, bool strict, const cts_log_t *log);

/* ---- memtrace traces -------------------------------------------------------------------- */

typedef struct cts_mem_trace cts_mem_trace_t;
/* Called for every event after the profile took it in (for an allocation,
 * t->prof.last_node is its stack node; the profile takes nothing with opts->events_only).
 * Returns 0 or an error that stops reading. */
typedef int (*cts_mem_trace_hook)(void *user_data, cts_mem_trace_t *t, const cts_mt_event_t *ev);

/* A load's options; log and progress are called during the load only (not kept). */
typedef struct cts_load_opts {
  cts_log_t log;
  bool quiet; /* no warnings (errors are still logged) */
  /* Reading progress (memtrace: bytes of the input), may be NULL. */
  cts_os_progress_cb progress;
  void *progress_user_data;
  /* Names as people read them (fold.h: demangled, allocator frames folded into the site);
   * NULL: the trace's own names and frames. Borrowed during the load only. */
  const struct cts_fold_config *fold;
  /* memtrace: 1 reads on the calling thread; 2 decodes on a second thread while the calling
   * thread aggregates (pipeline.h), when the trace is a regular file (a pipe is read on the
   * calling thread: a stalled writer could not be left behind); 0, the process default
   * (cts_load_set_threads), else as cts_pipe_auto_threads (pipeline.h) rules: two threads
   * for a file of CTS_PIPE_MIN_BYTES or more when a second CPU is idle. Results are the same
   * either way. */
  unsigned threads;
  /* memtrace: events go to the hook only, not into the profile: t->prof keeps the trace's
   * info (rate, word size, start time) and its packets' end times, and no figure of any
   * event (no live block, stack, histogram, count or clock; prof.last_node stays 0). For
   * callers that format each event themselves (export csv|chrome): the live table alone
   * was ~0.6 s of CPU per 10 M survivors. Errors are those of a load with a profile. */
  bool events_only;
  /* memtrace, with a profile of stacks (leaks' second pass, leaks_load.h): an allocation
   * interns its full stack only when its object id is marked here, else its allocation
   * point alone (cts_alloc_profile_add_alloc); t->full_allocs counts the former. NULL: as
   * the profile's configuration says. Ignored with events_only or a hook. Borrowed during the
   * load. */
  const struct cts_leaks_marks *full_stacks;
} cts_load_opts_t;

/* The process default for cts_load_opts_t.threads when a load leaves it 0: 0 (automatic),
 * 1 or 2. Not thread-safe: set it before loading (the CLI's --threads). */
void cts_load_set_threads(unsigned threads);

struct cts_mem_trace {
  const char *path;
  cts_mt_reader_t *reader;
  cts_alloc_profile_t prof;
  const cts_mt_info_t *info; /* NULL if the trace has none (empty or unreadable) */
  uint64_t file_size;
  int err;          /* reader or input error, 0 if the trace was read completely */
  bool input_error; /* err came from opening or reading the input, not from its bytes */
  bool kept;        /* err is a defect of the trace; prof holds what was read before it */
  bool quiet;
  cts_log_t log; /* opts->log during the load; cleared on return */
  cts_mem_trace_hook hook;
  void *hook_user_data;
  int hook_err;          /* the hook's error, if it stopped reading */
  struct cts_fold *fold; /* opts->fold's state (owned), or NULL */
  unsigned threads;      /* how it was read: 1, or 2 (decoded on a second thread) */
  struct cts_pipe *pipe; /* during a load on two threads (pipeline.h), else NULL */
  const struct cts_leaks_marks *full_stacks; /* opts->full_stacks during the load */
  uint64_t full_allocs; /* allocations whose full stack was interned under full_stacks */
};

/* Reads path into t->prof (configured by cfg), calling hook (may be NULL) for each event.
 * The hook, the fold and every callback run on the calling thread, in file order, also
 * when the trace is decoded on a second thread (opts->threads); cts_mem_trace_frames
 * works from the hook then too.
 * Returns 0 when the trace was read completely, else an error, logged unless it is the
 * hook's (t->hook_err, the caller says why): CTS_E_NOMEM (or a bad reader configuration's
 * CTS_E_INVAL); with t->kept, the trace's defect (the profile holds what was read before
 * it); without, an input error (t->input_error) or a defect found where nothing could be
 * reported. Warnings (skipped packets, stacks beyond the budget) are logged unless quiet.
 * t is always initialised: cts_mem_trace_free() it. */
int cts_mem_trace_load(cts_mem_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                       const cts_load_opts_t *opts, cts_mem_trace_hook hook, void *hook_user_data);
void cts_mem_trace_free(cts_mem_trace_t *t);
/* Frame descriptions from the trace's location table (borrows t): as people read them when
 * it was loaded with opts->fold. */
cts_frames_t cts_mem_trace_frames(cts_mem_trace_t *t);
/* The mangled name of a function name shown by cts_mem_trace_frames, or NULL if it is shown
 * as the trace has it. */
const char *cts_mem_trace_mangled(const cts_mem_trace_t *t, const char *shown);

/* ---- task traces ------------------------------------------------------------------------ */

typedef struct cts_task_trace cts_task_trace_t;
/* Called for every event after the model took it. Returns 0 or an error that stops reading. */
typedef int (*cts_task_trace_hook)(void *user_data, cts_task_trace_t *t,
                                   const cts_mprof_event_t *ev);
struct cts_task_trace {
  const char *path;
  cts_tasks_t m;
  cts_mprof_summary_t sum;
  uint64_t file_size;
  int err;          /* reader or input error, 0 if the trace was read completely */
  bool input_error; /* err came from opening or reading the input */
  bool kept;        /* err is a defect of the trace; the model holds what was read */
  bool quiet;
  char msg[512]; /* the reader's message for err */
  cts_log_t log; /* opts->log during the load; cleared on return */
  /* packets: totals, and the list when keep_packets */
  bool keep_packets;
  cts_mprof_packet_t *packets;
  size_t npackets, cap_packets;
  uint64_t packets_seen, packets_empty, packets_truncated, packets_full_content;
  uint32_t packet_min, packet_max;
  cts_task_trace_hook hook; /* optional: each event, after the model took it */
  void *hook_user_data;
  int hook_err;
};

/* Reads path into t->m (configured by cfg; finished on return). Returns 0, or an error
 * with the same meaning as cts_mem_trace_load's (t->kept: a corrupt trace, the model holds
 * what was read; CTS_E_NOMEM; an input error; the hook's). Tasks beyond cfg->max_tasks are
 * a warning. t is always initialised: cts_task_trace_free() it. */
int cts_task_trace_load(cts_task_trace_t *t, const char *path, const cts_tasks_config_t *cfg,
                        const cts_load_opts_t *opts, bool keep_packets, cts_task_trace_hook hook,
                        void *hook_user_data);
void cts_task_trace_free(cts_task_trace_t *t);
/* The span of the trace in seconds (first to latest event). */
double cts_task_trace_duration_s(const cts_task_trace_t *t);

/* The file name without its directory (a pointer into path). */
const char *cts_basename(const char *path);

#endif /* CTS_ANALYSIS_LOAD_H */
