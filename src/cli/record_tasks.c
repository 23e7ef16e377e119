/* SPDX-License-Identifier: MIT */
#include "record_tasks.h"

#include <stdio.h>
#include <sys/stat.h>

#include "../os/mprof_ring.h"
#include "cli.h"

typedef struct task_counts {
  uint64_t events, threads, waits, conditions;
  uint64_t warnings;
  uint64_t lost;   /* the writer's count of events it could not place (ctfscope_lost) */
  uint64_t allocs; /* sampled allocations named with their task (ctfscope_alloc) */
} task_counts_t;

static int count_event(void *ud, const cts_mprof_event_t *ev) {
  task_counts_t *c = ud;
  c->events++;
  if (ev->id == CTS_MPROF_CREATES && ev->thread_type == CTS_TASK_TASK) c->threads++;
  if (ev->id == CTS_MPROF_CREATES && ev->thread_type == CTS_TASK_CONDITION) c->conditions++;
  if (ev->id == CTS_MPROF_TRY_READ) c->waits++;
  if (ev->id == CTS_MPROF_LOST && ev->arg > c->lost) c->lost = ev->arg;
  if (ev->id == CTS_MPROF_ALLOC) c->allocs++;
  return 0;
}

static void count_warning(void *ud, int code, uint64_t offset, const char *message) {
  (void)code, (void)offset, (void)message;
  ((task_counts_t *)ud)->warnings++;
}

void record_tasks_summarise(const char *path, bool explained) {
  struct stat st;
  if (stat(path, &st) != 0) {
    if (explained) return; /* one message per problem */
    cli_warn(
        "no task trace was written to %s (the program did not load the preload library, or "
        "the preload library refused to trace threads and said why above)",
        path);
    return;
  }
  task_counts_t c = {0};
  const cts_mprof_handler_t h = {
      .user_data = &c, .on_event = count_event, .on_warning = count_warning};
  cts_mprof_summary_t sum;
  char msg[512], size[32], events[32];
  bool input_error = false;
  const int e = cts_os_mprof_read_file(path, &h, false, &sum, msg, sizeof msg, &input_error);
  cli_human_bytes((double)st.st_size, size, sizeof size);
  if (e) {
    cli_warn("task trace written to %s (%s), but it does not read back: %s", path, size, msg);
    return;
  }
  fprintf(stderr,
          "ctfscope record: task trace written to %s (%s): %s events, %llu threads started, "
          "%llu condition variables, %llu waits (contended locks and condition waits)%s%s\n",
          path, size, cli_grouped(c.events, events, sizeof events), (unsigned long long)c.threads,
          (unsigned long long)c.conditions, (unsigned long long)c.waits,
          sum.wrapped ? "; the ring wrapped: the oldest events were overwritten "
                        "(CTFSCOPE_TASKS_SIZE sets its size)"
                      : "",
          c.warnings ? "; the last events of some packets are cut off" : "");
  if (c.allocs)
    fprintf(stderr,
            "ctfscope record: %s sampled allocations carry their thread's task: `ctfscope top "
            "--by task MEMORY_TRACE %s` shows memory per task\n",
            cli_grouped(c.allocs, events, sizeof events), path);
  if (c.lost)
    cli_warn(
        "%s events of the task trace were lost: no packet had room for them "
        "(CTFSCOPE_TASKS_PACKETS, CTFSCOPE_TASKS_SIZE)",
        cli_grouped(c.lost, events, sizeof events));
}
