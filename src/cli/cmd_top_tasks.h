/* SPDX-License-Identifier: MIT */
/* `ctfscope top --by task MEMORY_TRACE TASK_TRACE` (cmd_top_tasks.c), dispatched from
 * cmd_top.c. */
#ifndef CTS_CLI_CMD_TOP_TASKS_H
#define CTS_CLI_CMD_TOP_TASKS_H

#include <stdbool.h>

/* Whether the command line asks for `--by task` (before any `--`). */
bool cmd_top_by_task(int argc, char **argv);
/* The command; returns its exit code. */
int cmd_top_tasks(int argc, char **argv);

/* For commands that take both traces (report, serve): reads the memory trace's info record
 * and the task trace's first clock anchor, stopping there, and aligns them
 * (analysis/task_memory.h): returns CTS_TASK_MEM_ALIGNED (0) with *offset_ns the task-trace
 * time at the memory trace's start, or the cts_task_mem_status_t saying why not (unreadable
 * files count as having no anchor or no info). */
int cli_task_align_files(const char *mem_path, const char *task_path, long long *offset_ns);

#endif /* CTS_CLI_CMD_TOP_TASKS_H */
