/* SPDX-License-Identifier: MIT */
/* `ctfscope record`'s task-trace options (src/cli/record_tasks.c): with -o FILE the task
 * trace goes next to FILE, named after it (.ctf or .ctf.zst replaced by .tasks.ctf);
 * --tasks-size and --tasks-packets shape the ring and imply --tasks; bad values are usage
 * errors before anything runs. The traced program is `true`: the preload library writes
 * the ring (task 0's events) for any program. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/mprof_ring.h"
#include "../run_cmd.h"
#include "../test.h"

static char dir[64];

static void make_dir(void) {
  strcpy(dir, "/tmp/cts-record-tasks-XXXXXX");
  if (!mkdtemp(dir)) abort();
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (e->d_name[0] != '.') unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* Runs `ctfscope record ARGS... true` in dir; returns the exit code (stderr in *err). */
static int record(const char *const *args, char **err) {
  char *argv[16] = {(char *)CTS_TEST_CTFSCOPE, "record"};
  size_t n = 2;
  for (; *args && n < 14; args++) argv[n++] = (char *)*args;
  argv[n++] = "true";
  argv[n] = NULL;
  setenv("CTFSCOPE_PRELOAD", CTS_TEST_PRELOAD, 1);
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd) || chdir(dir) != 0) abort();
  run_result_t r;
  const bool ran = run_cmd(argv, NULL, 60, &r);
  if (chdir(cwd) != 0) abort();
  unsetenv("CTFSCOPE_PRELOAD");
  if (!ran) abort();
  *err = strdup(r.err ? r.err : "");
  const int code = r.exit_code;
  run_result_free(&r);
  return code;
}

static bool exists(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  return stat(path, &st) == 0;
}

/* Files in dir whose name ends with @p suffix. */
static int count_files(const char *suffix) {
  int n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    const size_t len = strlen(e->d_name), k = strlen(suffix);
    if (len >= k && strcmp(e->d_name + len - k, suffix) == 0) n++;
  }
  if (d) closedir(d);
  return n;
}

CTS_TEST(the_task_trace_goes_next_to_the_memory_trace) {
  make_dir();
  char *err;
  const char *plain[] = {"-o", "sub.run.ctf", "--tasks", NULL};
  CTS_ASSERT_MSG(record(plain, &err) == 0, "%s", err);
  CTS_ASSERT_MSG(exists("sub.run.tasks.ctf"), "%s", err);
  CTS_ASSERT_MSG(strstr(err, "task trace written to sub.run.tasks.ctf"), "%s", err);
  free(err);
  const char *zst[] = {"-o", "z.ctf.zst", "-z", "--tasks", NULL};
  CTS_ASSERT_MSG(record(zst, &err) == 0, "%s", err);
  CTS_ASSERT_MSG(exists("z.ctf.zst") && exists("z.tasks.ctf"), "%s", err);
  free(err);
  const char *other[] = {"-o", "trace.bin", "--tasks", NULL};
  CTS_ASSERT_MSG(record(other, &err) == 0, "%s", err);
  CTS_ASSERT_MSG(exists("trace.bin.tasks.ctf"), "%s", err);
  free(err);
  /* None went to the default name. */
  CTS_ASSERT_EQ_INT(count_files(".tasks.ctf"), 3);
  /* Without -o: the default name, from the memory trace's. */
  const char *none[] = {"--tasks", NULL};
  CTS_ASSERT_MSG(record(none, &err) == 0, "%s", err);
  CTS_ASSERT_MSG(strstr(err, "task trace written to ctfscope.true."), "%s", err);
  CTS_ASSERT_EQ_INT(count_files(".tasks.ctf"), 4);
  free(err);
  remove_dir();
}

CTS_TEST(size_and_packets_shape_the_ring) {
  make_dir();
  char *err;
  const char *args[] = {"-o", "p.ctf", "--tasks-size", "64K", "--tasks-packets", "8", NULL};
  CTS_ASSERT_MSG(record(args, &err) == 0, "%s", err);
  free(err);
  char path[512];
  snprintf(path, sizeof path, "%s/p.tasks.ctf", dir);
  struct stat st;
  CTS_ASSERT(stat(path, &st) == 0);
  CTS_ASSERT_EQ_U64((uint64_t)st.st_size, 65536);
  const cts_mprof_handler_t h = {0};
  cts_mprof_summary_t sum;
  char msg[256];
  bool input_error;
  CTS_ASSERT_MSG(cts_os_mprof_read_file(path, &h, false, &sum, msg, sizeof msg, &input_error) == 0,
                 "%s", msg);
  CTS_ASSERT_EQ_U64(sum.packets, 8);
  remove_dir();
}

CTS_TEST(bad_values_are_usage_errors) {
  make_dir();
  static const char *const bad[][5] = {
      {"--tasks-packets", "0", NULL},
      {"--tasks-packets", "4097", NULL},
      {"--tasks-size", "12Q", NULL},
      {"--tasks-size", "", NULL},
      {"--tasks-size", "1K", "--tasks-packets", "8", NULL}, /* 128 bytes a packet */
      {"-T", "same.ctf", "-o", "same.ctf", NULL},           /* one file for two traces */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *err;
    CTS_ASSERT_EQ_INT(record(bad[i], &err), 2);
    CTS_ASSERT_MSG(strstr(err, bad[i][0]), "%s", err);
    free(err);
  }
  CTS_ASSERT_EQ_INT(count_files(".ctf"), 0); /* nothing ran */
  remove_dir();
}

CTS_TEST_MAIN()
