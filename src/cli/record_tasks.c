/* SPDX-License-Identifier: MIT */
#include "record_tasks.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../os/mprof_ring.h"
#include "cli.h"

/* As the preload library has them (preload_pthread.c): the defaults and limits. */
#define TASKS_SIZE_DEFAULT    (16u << 20)
#define TASKS_SIZE_MAX        ((uint64_t)1 << 40)
#define TASKS_PACKETS_DEFAULT 256u
#define TASKS_PACKETS_MAX     4096u
#define TASKS_PACKET_MIN      256u /* bytes */
#define TASKS_PACKET_MAX      (UINT32_MAX / 8u)

bool record_tasks_wanted(const record_tasks_opts_t *o) {
  return o->on || o->output || o->size || o->packets;
}

/* A decimal count with an optional K, M or G suffix (powers of 1024), at most @p max. */
static bool parse_count(const char *s, uint64_t max, uint64_t *out) {
  if (*s < '0' || *s > '9') return false;
  char *end;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (errno || *end || v > (max >> shift)) return false;
  *out = (uint64_t)v << shift;
  return true;
}

int record_tasks_check(const record_tasks_opts_t *o) {
  uint64_t size = TASKS_SIZE_DEFAULT, packets = TASKS_PACKETS_DEFAULT;
  if (o->size && !parse_count(o->size, TASKS_SIZE_MAX, &size))
    return cli_usage_error("--tasks-size '%s': expected bytes, with K, M or G if you like",
                           o->size);
  if (o->packets && (!parse_count(o->packets, TASKS_PACKETS_MAX, &packets) || packets == 0))
    return cli_usage_error("--tasks-packets '%s': expected a number from 1 to %u", o->packets,
                           TASKS_PACKETS_MAX);
  if (size / packets < TASKS_PACKET_MIN || size / packets > TASKS_PACKET_MAX)
    return cli_usage_error(
        "--tasks-size %s for %llu packets: each packet must get 256 bytes to 512 MiB",
        o->size ? o->size : "16M", (unsigned long long)packets);
  return -1;
}

static bool ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

void record_tasks_path(char *out, size_t size, const record_tasks_opts_t *o,
                       const char *memtrace_output, const char *program, int pid) {
  if (!record_tasks_wanted(o)) {
    snprintf(out, size, "%s", "");
  } else if (o->output) {
    snprintf(out, size, "%s", o->output);
  } else if (memtrace_output) {
    /* Next to the memory trace, named after it: the two files go together. */
    size_t stem = strlen(memtrace_output);
    if (ends_with(memtrace_output, ".ctf.zst"))
      stem -= 8;
    else if (ends_with(memtrace_output, ".ctf"))
      stem -= 4;
    snprintf(out, size, "%.*s.tasks.ctf", (int)stem, memtrace_output);
  } else {
    const char *const slash = strrchr(program, '/');
    snprintf(out, size, "ctfscope.%s.%d.tasks.ctf", slash ? slash + 1 : program, pid);
  }
}

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
                        "(--tasks-size sets its size)"
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
