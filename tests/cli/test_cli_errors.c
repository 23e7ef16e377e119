/* SPDX-License-Identifier: MIT */
/* `ctfscope dump` on corrupt traces: every trace of tests/data/fail makes it exit 1 with one
 * error line naming the file, the offset and the error (or, for the traces that only earn a
 * warning, exit 0 with a warning line), never a crash or a hang; a missing file exits 3. */
#include <dirent.h>

#include "../run_cmd.h"
#include "../test.h"

enum { TIMEOUT_S = 30 };

/* Lines of `text` that start with `prefix`; *first receives the first one (or NULL). */
static size_t count_lines(const char *text, const char *prefix, const char **first) {
  size_t n = 0;
  const size_t plen = strlen(prefix);
  *first = NULL;
  for (const char *line = text; line && *line;) {
    if (strncmp(line, prefix, plen) == 0) {
      if (!n) *first = line;
      n++;
    }
    line = strchr(line, '\n');
    if (line) line++;
  }
  return n;
}

/* Runs `ctfscope dump path`; false (with the reason on stderr) if it crashed or hung. */
static bool run_dump(const char *path, run_result_t *r) {
  char *argv[] = {CTS_TEST_CTFSCOPE, "dump", (char *)path, NULL};
  if (!run_cmd(argv, "/dev/null", TIMEOUT_S, r)) {
    fprintf(stderr, "  cannot run %s\n", argv[0]);
    return false;
  }
  if (r->signal || r->timed_out) {
    fprintf(stderr, "  %s: killed by signal %d%s\n", path, r->signal,
            r->timed_out ? " (timeout)" : "");
    return false;
  }
  return true;
}

/* Line 1 of a .expect file: the error name, or OK; line 2: the offset (or, after OK, the
 * warning name, then the offset on line 3). */
static bool read_expect(const char *path, char *name, size_t size, bool *ok,
                        unsigned long long *offset) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char l1[128] = "", l2[128] = "", l3[128] = "";
  const bool got = fgets(l1, sizeof l1, f) && fgets(l2, sizeof l2, f);
  if (got && fgets(l3, sizeof l3, f) == NULL) l3[0] = '\0';
  fclose(f);
  if (!got) return false;
  l1[strcspn(l1, "\r\n")] = l2[strcspn(l2, "\r\n")] = '\0';
  *ok = strcmp(l1, "OK") == 0;
  snprintf(name, size, "%s", *ok ? l2 : l1);
  char *end;
  *offset = strtoull(*ok ? l3 : l2, &end, 10);
  return end != (*ok ? l3 : l2);
}

static bool check_trace(const char *dir, const char *file) {
  char path[4200], expect_path[4300];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  snprintf(expect_path, sizeof expect_path, "%s.expect", path);
  char name[128];
  bool ok;
  unsigned long long offset;
  if (!read_expect(expect_path, name, sizeof name, &ok, &offset)) {
    fprintf(stderr, "  %s: missing or malformed .expect\n", file);
    return false;
  }
  run_result_t r;
  if (!run_dump(path, &r)) return false;
  char want[4400];
  const char *line;
  bool good = true;
  if (ok) {
    snprintf(want, sizeof want, "ctfscope dump: warning: %s: at offset %llu: ", path, offset);
    if (r.exit_code != 0 || count_lines(r.err, "ctfscope dump: error:", &line) != 0 ||
        count_lines(r.err, want, &line) != 1) {
      fprintf(stderr, "  %s: expected exit 0 and a warning at offset %llu; got exit %d:\n%s", file,
              offset, r.exit_code, r.err);
      good = false;
    }
  } else {
    snprintf(want, sizeof want, "ctfscope dump: error: %s: at offset %llu: ", path, offset);
    char error_name[140];
    snprintf(error_name, sizeof error_name, "(%s)\n", name);
    if (r.exit_code != 1 || count_lines(r.err, "ctfscope dump: error:", &line) != 1 ||
        strncmp(line, want, strlen(want)) != 0 || !strstr(line, error_name)) {
      fprintf(stderr, "  %s: expected exit 1 and one line \"%s... %s\"; got exit %d:\n%s", file,
              want, name, r.exit_code, r.err);
      good = false;
    }
  }
  run_result_free(&r);
  return good;
}

CTS_TEST(dump_reports_each_corrupt_trace) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fail", cts_test_data_dir());
  DIR *d = opendir(dir);
  CTS_ASSERT_MSG(d, "cannot open %s", dir);
  size_t ntraces = 0, nbad = 0;
  const struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const size_t n = strlen(de->d_name);
    if (n <= 4 || strcmp(de->d_name + n - 4, ".ctf") != 0) continue;
    ntraces++;
    nbad += !check_trace(dir, de->d_name);
  }
  closedir(d);
  fprintf(stderr, "  %zu traces\n", ntraces);
  CTS_ASSERT_MSG(ntraces >= 40, "only %zu traces in %s", ntraces, dir);
  CTS_ASSERT_MSG(nbad == 0, "%zu traces handled wrongly (listed above)", nbad);
}

CTS_TEST(dump_truncated_last_packet_is_a_warning) {
  char path[4200];
  snprintf(path, sizeof path, "%s/fail/warn_truncated_last_packet.ctf", cts_test_data_dir());
  run_result_t r;
  CTS_ASSERT(run_dump(path, &r));
  const char *line;
  const size_t nwarnings = count_lines(r.err, "ctfscope dump: warning: ", &line);
  const bool has_offset = line && strstr(line, ": at offset ") && strstr(line, "truncated");
  const int code = r.exit_code;
  char *err = r.err;
  r.err = NULL;
  run_result_free(&r);
  CTS_ASSERT_MSG(code == 0 && nwarnings == 1 && has_offset, "exit %d, stderr:\n%s", code, err);
  free(err);
}

CTS_TEST(dump_missing_file_is_an_io_error) {
  run_result_t r;
  CTS_ASSERT(run_dump("/nonexistent", &r));
  const int code = r.exit_code;
  const bool says_cannot_read = strstr(r.err, "cannot read") && strstr(r.err, "/nonexistent");
  char *err = r.err;
  r.err = NULL;
  run_result_free(&r);
  CTS_ASSERT_MSG(code == 3 && says_cannot_read, "exit %d, stderr:\n%s", code, err);
  free(err);
}

CTS_TEST_MAIN()
