/* SPDX-License-Identifier: MIT */
/* Tracing onto a full file system (issue 17): the task ring's file is reserved before it is
 * mapped, so a file system without room for it leaves the program running untraced with
 * one message, where a sparse mapping killed it with SIGBUS at its first event; and a
 * memtrace trace cut short by a full disk is summarised as such, not as a killed program.
 * The test mounts a 64 KiB tmpfs in a mount namespace of its own (it needs root: it skips
 * without, except under CI=true, where CI runs as root). */
#define _GNU_SOURCE /* unshare */
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "os/mprof_ring.h"
#include "../run_cmd.h"
#include "../test.h"

static char small[64];

/* The mount goes with this process's namespace; its mount point is removed. */
__attribute__((destructor)) static void remove_small_fs(void) {
  if (small[0] && umount2(small, MNT_DETACH) == 0) rmdir(small);
}

/* A 64 KiB tmpfs at `small`, seen by this process and its children only; false (with the
 * reason in why) when it cannot be had. */
static bool mount_small_fs(char *why, size_t size) {
  if (small[0]) return true;
  if (unshare(CLONE_NEWNS) != 0) {
    snprintf(why, size, "unshare(CLONE_NEWNS): %s", strerror(errno));
    return false;
  }
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
    snprintf(why, size, "making / private: %s", strerror(errno));
    return false;
  }
  char dir[] = "/tmp/cts-full-disk-XXXXXX";
  if (!mkdtemp(dir)) {
    snprintf(why, size, "mkdtemp: %s", strerror(errno));
    return false;
  }
  if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) {
    snprintf(why, size, "mount -t tmpfs -o size=64k: %s", strerror(errno));
    rmdir(dir);
    return false;
  }
  snprintf(small, sizeof small, "%s", dir);
  return true;
}

#define REQUIRE_SMALL_FS()                                                   \
  do {                                                                       \
    char why_[256];                                                          \
    if (!mount_small_fs(why_, sizeof why_)) {                                \
      const char *ci_ = getenv("CI");                                        \
      if (ci_ && strcmp(ci_, "true") == 0) CTS_FAIL("CI=true and %s", why_); \
      CTS_SKIP("cannot mount a small file system (%s): run as root", why_);  \
    }                                                                        \
  } while (0)

/* The preload library next to ctfscope (not built with sanitizers). */
static bool have_preload(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s", CTS_TEST_CTFSCOPE);
  char *slash = strrchr(path, '/');
  if (!slash) return false;
  snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "libctfscope-preload.so");
  return access(path, R_OK) == 0;
}

CTS_TEST(a_ring_file_without_room_is_an_error_not_a_sigbus) {
  REQUIRE_SMALL_FS();
  char path[128];
  snprintf(path, sizeof path, "%s/ring.ctf", small);
  /* In a child: without the reservation its first event is a SIGBUS. */
  const pid_t pid = fork();
  CTS_ASSERT(pid >= 0);
  if (pid == 0) {
    cts_os_mprof_ring_t *r;
    const int e = cts_os_mprof_ring_open(&r, path, 1u << 20, 4);
    if (e == 0) {
      cts_task_start(cts_os_mprof_ring_borrow(r));
      for (int i = 0; i < 100000; i++) cts_task_label(i, "filling the ring");
      _exit(0);
    }
    _exit(e == -ENOSPC ? 42 : 43);
  }
  int status;
  CTS_ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  CTS_ASSERT_MSG(WIFEXITED(status), "killed by signal %d", WTERMSIG(status));
  CTS_ASSERT_EQ_INT(WEXITSTATUS(status), 42);
  CTS_ASSERT(access(path, F_OK) != 0); /* no empty file left behind */
  /* A ring that fits still opens. */
  cts_os_mprof_ring_t *r;
  CTS_ASSERT_EQ_INT(cts_os_mprof_ring_open(&r, path, 16 * 1024, 4), 0);
  CTS_ASSERT_EQ_INT(cts_os_mprof_ring_close(r), 0);
  unlink(path);
}

CTS_TEST(record_tasks_on_a_full_file_system_leaves_the_program_unharmed) {
  if (!have_preload()) CTS_SKIP("no preload library (a sanitizer build)");
  REQUIRE_SMALL_FS();
  char tasks[128];
  snprintf(tasks, sizeof tasks, "%s/tasks.ctf", small);
  char out[] = "/tmp/cts-full-disk-trace-XXXXXX";
  const int fd = mkstemp(out);
  CTS_ASSERT(fd >= 0);
  close(fd);
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "-o",     out, "-T", tasks, "--",
                  "/bin/sh",         "-c",     "exit 7", NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
  unlink(tasks); /* whatever was left fills the small file system: the next test needs it */
  CTS_ASSERT_MSG(r.exit_code == 7, "exit %d (signal %d): %s", r.exit_code, r.signal, r.err);
  CTS_ASSERT_MSG(strstr(r.err, "no room for the trace buffer"), "%s", r.err);
  /* One message about it: record does not add its own. */
  CTS_ASSERT_MSG(!strstr(r.err, "no task trace was written"), "%s", r.err);
  run_result_free(&r);
  unlink(out);
}

CTS_TEST(record_onto_a_full_disk_says_so) {
  if (!have_preload()) CTS_SKIP("no preload library (a sanitizer build)");
  REQUIRE_SMALL_FS();
  char out[128];
  snprintf(out, sizeof out, "%s/trace.ctf", small);
  /* Every allocation of a busy shell, sampled: far more than 64 KiB of trace. */
  char *argv[] = {CTS_TEST_CTFSCOPE,
                  "record",
                  "--rate",
                  "1",
                  "-o",
                  out,
                  "--",
                  "/bin/sh",
                  "-c",
                  "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); x=\"$x$i\"; done",
                  NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 120, &r));
  CTS_ASSERT_MSG(r.exit_code == 0, "exit %d (signal %d): %s", r.exit_code, r.signal, r.err);
  CTS_ASSERT_MSG(strstr(r.err, "the last packet is cut off"), "%s", r.err);
  CTS_ASSERT_MSG(!strstr(r.err, "killed"), "%s", r.err);
  CTS_ASSERT_MSG(strstr(r.err, "full"), "%s", r.err);
  run_result_free(&r);
  unlink(out);
}

CTS_TEST_MAIN()
