/* SPDX-License-Identifier: MIT */
/* `ctfscope record` with the persistent location cache (src/tracer/symcache.h): the writer
 * process saves it at the end of a run, and the trace's stacks are the same with the
 * cache off, cold and warm. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../run_cmd.h"
#include "../test.h"

static int count_files(const char *dir) {
  int n = 0;
  DIR *const d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static void remove_tree(const char *dir) {
  DIR *const d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) != 0) remove_tree(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* Records `sort` of `input` with CTFSCOPE_CACHE=`cache`, every allocation, and returns
 * the trace's folded stacks (malloc'd), or NULL. */
static char *folded_stacks(const char *dir, const char *input, const char *cache) {
  char trace[300], out[300];
  snprintf(trace, sizeof trace, "%s/trace.ctf", dir);
  snprintf(out, sizeof out, "%s/sorted", dir);
  setenv("CTFSCOPE_CACHE", cache, 1);
  char *record[] = {CTS_TEST_CTFSCOPE, "record", "-q", "-r",          "1", "-o", trace, "--",
                    "/usr/bin/sort",   "-o",     out,  (char *)input, NULL};
  run_result_t r;
  const bool ran = run_cmd(record, NULL, 120, &r) && r.exit_code == 0;
  if (!ran) fprintf(stderr, "record: %s\n", r.err ? r.err : "");
  run_result_free(&r);
  unsetenv("CTFSCOPE_CACHE");
  if (!ran) return NULL;
  char *export[] = {CTS_TEST_CTFSCOPE, "export", "--format", "folded", trace, NULL};
  char *stacks = NULL;
  if (run_cmd(export, NULL, 120, &r) && r.exit_code == 0 && r.out) stacks = strdup(r.out);
  run_result_free(&r);
  unlink(trace);
  return stacks;
}

CTS_TEST(record_gives_the_same_stacks_with_the_cache_off_cold_and_warm) {
  if (access("/usr/bin/sort", X_OK) != 0) CTS_SKIP("no /usr/bin/sort");
  char dir[] = "/tmp/cts-symcache-record-XXXXXX";
  CTS_ASSERT(mkdtemp(dir));
  char input[300], cache[300];
  snprintf(input, sizeof input, "%s/lines", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  FILE *const f = fopen(input, "w");
  for (int i = 0; f && i < 20000; i++) fprintf(f, "%08x line %d\n", i * 2654435761u, i);
  if (f) fclose(f);
  setenv("LC_ALL", "C", 1);
  char *const off = folded_stacks(dir, input, "off");
  const int files_off = count_files(cache);
  char *const cold = folded_stacks(dir, input, cache);
  /* The writer process saves the cache as it ends; on a loaded machine that can come
   * after record returned (seen once in a clean-clone CI): wait for it, at most 5 s. */
  int files_cold = count_files(cache);
  for (int i = 0; i < 100 && files_cold < 2; i++) {
    const struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    files_cold = count_files(cache);
  }
  char *const warm = folded_stacks(dir, input, cache);
  remove_tree(dir);
  CTS_ASSERT(off && cold && warm);
  CTS_ASSERT(strstr(off, "__libc_start") != NULL);
  CTS_ASSERT_EQ_INT(files_off, 0);
  CTS_ASSERT(files_cold >= 2); /* sort's and libc's, saved by the writer process */
  CTS_ASSERT_STR_EQ(cold, off);
  CTS_ASSERT_STR_EQ(warm, off);
  free(off);
  free(cold);
  free(warm);
}

CTS_TEST_MAIN()
