/* SPDX-License-Identifier: MIT */
/* The hosted outputs (src/os/mprof_ring.c): the mmap'd ring survives a crash of the
 * program and can be read while it runs; the stream sink writes packets to a descriptor;
 * and with our metadata babeltrace2 (when installed) prints every event we wrote. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#include "os/mprof_ring.h"
#include "../test.h"

typedef struct counts {
  uint64_t n, labels;
  int64_t last_thread;
} counts_t;

static int count_event(void *ud, const cts_mprof_event_t *ev) {
  counts_t *c = ud;
  c->n++;
  if (ev->id == CTS_MPROF_LABEL) c->labels++;
  c->last_thread = ev->thread;
  return 0;
}

static int read_counts(const char *path, counts_t *c, cts_mprof_summary_t *sum) {
  memset(c, 0, sizeof *c);
  const cts_mprof_handler_t h = {.user_data = c, .on_event = count_event};
  char msg[256];
  bool input_error;
  return cts_os_mprof_read_file(path, &h, false, sum, msg, sizeof msg, &input_error);
}

static void tmp_dir(char *dir) {
  strcpy(dir, "/tmp/cts-mprof-ring-XXXXXX");
  if (!mkdtemp(dir)) abort();
}

static void remove_dir(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) abort();
}

CTS_TEST(ring_file_survives_a_crash) {
  char dir[64], path[128];
  tmp_dir(dir);
  snprintf(path, sizeof path, "%s/trace.ctf", dir);
  const pid_t pid = fork();
  CTS_ASSERT(pid >= 0);
  if (pid == 0) {
    cts_os_mprof_ring_t *r;
    if (cts_os_mprof_ring_open(&r, path, 1000000, 4) != 0) _exit(2);
    cts_task_start(cts_os_mprof_ring_borrow(r));
    for (int i = 0; i < 50000; i++) cts_task_label(i, "before the crash");
    abort(); /* no stop, no close, no flush */
  }
  int status;
  CTS_ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  CTS_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
  counts_t c;
  cts_mprof_summary_t sum;
  CTS_ASSERT_EQ_INT(read_counts(path, &c, &sum), 0);
  CTS_ASSERT_EQ_U64(sum.warnings, 0);
  CTS_ASSERT(sum.wrapped); /* 50000 × 34 bytes wrap a 1 MB ring */
  CTS_ASSERT(c.labels > 20000);
  CTS_ASSERT_EQ_INT(c.last_thread, 49999);
  remove_dir(dir);
}

CTS_TEST(ring_file_is_readable_while_written) {
  char dir[64], path[128];
  tmp_dir(dir);
  snprintf(path, sizeof path, "%s/trace.ctf", dir);
  cts_os_mprof_ring_t *r;
  CTS_ASSERT_EQ_INT(cts_os_mprof_ring_open(&r, path, 64 * 1024, 8), 0);
  CTS_ASSERT_EQ_INT(cts_task_start(cts_os_mprof_ring_borrow(r)), 0);
  counts_t c;
  cts_mprof_summary_t sum;
  for (int round = 1; round <= 3; round++) {
    for (int i = 0; i < 100; i++) cts_task_label(i, "live");
    CTS_ASSERT_EQ_INT(read_counts(path, &c, &sum), 0);
    CTS_ASSERT_EQ_U64(c.labels, 100 * round);
    CTS_ASSERT_EQ_U64(sum.packets, 8);
  }
  cts_task_stop();
  CTS_ASSERT_EQ_INT(cts_os_mprof_ring_close(r), 0);
  remove_dir(dir);
}

/* Writes @p n label events through a stream to @p dir/stream, with the metadata. */
static int write_stream(const char *dir, int n) {
  char path[128];
  snprintf(path, sizeof path, "%s/stream", dir);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  cts_os_mprof_ring_t *r;
  int err = cts_os_mprof_stream_open(&r, fd, 4096, 4);
  if (err) return err;
  cts_task_start(cts_os_mprof_ring_borrow(r));
  for (int i = 0; i < n; i++) {
    const cts_task_id_t t = cts_task_create(CTS_TASK_TASK);
    cts_task_label(t, "streamed \"quoted\"");
    cts_task_read(t, t - 1);
    cts_task_resolved(t);
    cts_task_gc(7);
  }
  cts_task_stop();
  err = cts_os_mprof_ring_close(r);
  close(fd);
  return err ? err : cts_os_mprof_write_metadata(dir);
}

CTS_TEST(stream_to_a_file) {
  char dir[64], path[128];
  tmp_dir(dir);
  CTS_ASSERT_EQ_INT(write_stream(dir, 1000), 0);
  snprintf(path, sizeof path, "%s/stream", dir);
  counts_t c;
  cts_mprof_summary_t sum;
  CTS_ASSERT_EQ_INT(read_counts(path, &c, &sum), 0);
  CTS_ASSERT_EQ_U64(c.n, 1 + 5 * 1000);
  CTS_ASSERT_EQ_U64(c.labels, 1000);
  CTS_ASSERT_EQ_U64(sum.warnings, 0);
  remove_dir(dir);
}

static uint64_t babeltrace_lines(const char *dir) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "babeltrace2 '%s' 2>&1", dir);
  FILE *p = popen(cmd, "r");
  if (!p) return 0;
  uint64_t n = 0;
  char line[1024];
  while (fgets(line, sizeof line, p)) n++;
  return pclose(p) == 0 ? n : 0;
}

CTS_TEST(babeltrace2_reads_our_stream_and_ring) {
  if (system("babeltrace2 --version >/dev/null 2>&1") != 0)
    CTS_SKIP("babeltrace2 is not installed (apt-get install babeltrace2)");
  char dir[64], path[128];
  tmp_dir(dir);
  CTS_ASSERT_EQ_INT(write_stream(dir, 2000), 0);
  CTS_ASSERT_EQ_U64(babeltrace_lines(dir), 1 + 5 * 2000);
  remove_dir(dir);
  /* an unwrapped ring file, with every event kind */
  tmp_dir(dir);
  snprintf(path, sizeof path, "%s/trace.ctf", dir);
  cts_os_mprof_ring_t *r;
  CTS_ASSERT_EQ_INT(cts_os_mprof_ring_open(&r, path, 64 * 1024, 4), 0);
  CTS_ASSERT_EQ_INT(cts_task_start(cts_os_mprof_ring_borrow(r)), 0);
  cts_task_counter_t ctr = CTS_TASK_COUNTER_INIT("c", 0);
  for (int i = 0; i < 100; i++) {
    const cts_task_id_t t = cts_task_named_wait("w");
    cts_task_try_read(0, t);
    cts_task_idle();
    cts_task_resume(0);
    cts_task_failed(t, "oops");
    cts_task_read(0, t);
    cts_task_becomes(t, t + 1);
    cts_task_signal(t, 0);
    cts_task_signal_noswitch(0, t);
    cts_task_read_later(t, 0);
    cts_task_counter_increase(&ctr, 1);
    cts_task_note_increase("n", 1);
    cts_task_gc(5);
    cts_task_created(t + 1, (cts_task_type_t)200);
  }
  cts_task_stop();
  CTS_ASSERT_EQ_INT(cts_os_mprof_ring_close(r), 0);
  CTS_ASSERT_EQ_INT(cts_os_mprof_write_metadata(dir), 0);
  CTS_ASSERT_EQ_U64(babeltrace_lines(dir), 1 + 15 * 100);
  remove_dir(dir);
}

CTS_TEST_MAIN()
