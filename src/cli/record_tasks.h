/* SPDX-License-Identifier: MIT */
/* The task-tracing part of `ctfscope record` (--tasks): the summary line of the task trace
 * the preload library wrote (src/preload/preload_pthread.c). */
#ifndef CTS_CLI_RECORD_TASKS_H
#define CTS_CLI_RECORD_TASKS_H

/* One line on stderr about the task trace at @p path. */
void record_tasks_summarise(const char *path);

#endif /* CTS_CLI_RECORD_TASKS_H */
