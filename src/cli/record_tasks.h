/* SPDX-License-Identifier: MIT */
/* The task-tracing part of `ctfscope record` (--tasks, -T, --tasks-size, --tasks-packets):
 * checking the options, naming the task trace, handing the settings to the preload library
 * (src/preload/preload_pthread.c, docs/environment.md) and the summary line of what it
 * wrote. */
#ifndef CTS_CLI_RECORD_TASKS_H
#define CTS_CLI_RECORD_TASKS_H

#include <stdbool.h>
#include <stddef.h>

/* The options as given (borrowed from argv; NULL when absent). */
typedef struct record_tasks_opts {
  bool on;             /* --tasks */
  const char *output;  /* -T, --tasks-output FILE (implies --tasks) */
  const char *size;    /* --tasks-size BYTES (implies --tasks) */
  const char *packets; /* --tasks-packets N (implies --tasks) */
} record_tasks_opts_t;

/* Whether task tracing was asked for, by any of the options. */
bool record_tasks_wanted(const record_tasks_opts_t *o);

/* Checks the values as the preload library will (a size with K, M or G, 1 to 4096 packets,
 * at least 256 bytes a packet): a typo is a usage error, not an untraced run. Returns -1
 * when they are fine, else the exit code (the message is printed). */
int record_tasks_check(const record_tasks_opts_t *o);

/* The task trace's file name: -T's FILE; else the memory trace's @p memtrace_output with
 * its ".ctf" or ".ctf.zst" ending replaced by ".tasks.ctf" (".tasks.ctf" appended when it
 * has neither); else (no memory trace file: --connect, --listen) the default
 * ctfscope.PROGRAM.PID.tasks.ctf. "" when task tracing was not asked for. */
void record_tasks_path(char *out, size_t size, const record_tasks_opts_t *o,
                       const char *memtrace_output, const char *program, int pid);

/* One line on stderr about the task trace at @p path. When there is none and @p explained,
 * nothing: a line said why already (the preload library's refusal, or record's own "no
 * trace was written" when the library was not loaded). */
void record_tasks_summarise(const char *path, bool explained);

#endif /* CTS_CLI_RECORD_TASKS_H */
