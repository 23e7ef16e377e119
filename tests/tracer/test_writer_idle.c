/* SPDX-License-Identifier: MIT */
/* Guard: a writer process with nothing to write sleeps. At the default rate most programs
 * sample little or nothing, and every time the writer wakes is a context switch; pinned to
 * one CPU with it, the program pays for each. The writer used to look at the program's pipe
 * every 1 to 50 ms (about 85 times in its first second); its watcher thread now wakes it
 * when the pipe closes. Counted, not timed: the voluntary context switches of the writer
 * process's threads over an idle second, which the machine's load does not change. */
#define _GNU_SOURCE
#include <ctfscope/tracer.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "../test.h"
#include "decoded.h"
#include "tracer/tracer_internal.h"

/* At most this many sleeps of the writer process over an idle second (the flush timer's
 * wake-up, the watcher's start, a few spare). */
#define IDLE_SWITCHES_MAX 10

/* The voluntary context switches of every thread of process `pid` so far, or -1. */
static long voluntary_switches(int pid) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", pid);
  DIR *const d = opendir(dir);
  if (!d) return -1;
  long total = 0;
  const struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[384], line[128];
    snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
    FILE *const f = fopen(path, "r");
    if (!f) continue;
    long n;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1) total += n;
    fclose(f);
  }
  closedir(d);
  return total;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {}
}

static void temp_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "/tmp/cts_writer_idle_%s_%d.ctf", name, (int)getpid());
}

static int start_default_rate(const char *path) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg); /* the default rate */
  cfg.writer = CTS_TRACER_WRITER_PROCESS;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = path;
  return cts_tracer_start(&cfg, &sink);
}

CTS_TEST(an_idle_writer_process_sleeps) {
  char path[256];
  temp_path(path, sizeof path, "sleeps");
  CTS_ASSERT_EQ_INT(start_default_rate(path), 0);
  const int pid = cts__tracer_writer_pid();
  CTS_ASSERT_MSG(pid > 0, "the session has a writer thread, not a process");
  /* From its start: the first second is when it looked most often (every millisecond). */
  const long before = voluntary_switches(pid);
  sleep_ms(1000);
  const long after = voluntary_switches(pid);
  CTS_ASSERT(before >= 0 && after >= before);
  printf("the idle writer process slept %ld times in a second\n", after - before);
  CTS_ASSERT_MSG(after - before <= IDLE_SWITCHES_MAX, "%ld wake-ups in an idle second",
                 after - before);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  decoded_fini(&d);
  unlink(path);
}

CTS_TEST_MAIN()
