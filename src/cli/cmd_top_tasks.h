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

#endif /* CTS_CLI_CMD_TOP_TASKS_H */
