/* SPDX-License-Identifier: MIT */
/* The task-tracing part of `ctfscope record` (--tasks): the summary line of the task trace
 * the preload library wrote (src/preload/preload_pthread.c). */
#ifndef CTS_CLI_RECORD_TASKS_H
#define CTS_CLI_RECORD_TASKS_H

#include <stdbool.h>

/* One line on stderr about the task trace at @p path. When there is none and @p explained,
 * nothing: a line said why already (the preload library's refusal, or record's own "no
 * trace was written" when the library was not loaded). */
void record_tasks_summarise(const char *path, bool explained);

#endif /* CTS_CLI_RECORD_TASKS_H */
