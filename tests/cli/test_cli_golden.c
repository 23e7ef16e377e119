/* SPDX-License-Identifier: MIT */
/* CLI output as users see it: stdout, stderr and the exit code of each case in
 * tests/cli/golden/cases.txt must equal the golden files. CTS_UPDATE_GOLDEN=1 rewrites
 * them instead (review the diff before committing). */
#include <unistd.h>

#include "../run_cmd.h"
#include "../test_buf.h"
#include "../test.h"

/* Compares (or with update, writes) one golden file; prints the first differing line. */
static bool check(const char *golden_dir, const char *name, const char *ext, const char *actual,
                  size_t len, bool update) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.%s", golden_dir, name, ext);
  if (update) return spit(path, actual, len);
  size_t glen;
  char *want = slurp(path, &glen);
  if (!want) {
    fprintf(stderr, "  %s: missing golden %s (run with CTS_UPDATE_GOLDEN=1)\n", name, path);
    return false;
  }
  const bool same = glen == len && memcmp(want, actual, len) == 0;
  if (!same) {
    size_t i = 0, line = 1;
    while (i < glen && i < len && want[i] == actual[i]) line += want[i++] == '\n';
    fprintf(stderr, "  %s.%s differs at line %zu:\n    golden: %.80s\n    actual: %.80s\n", name,
            ext, line, want + i, actual + i);
  }
  free(want);
  return same;
}

CTS_TEST(cli_output_matches_golden) {
  const char *data = cts_test_data_dir(); /* <source>/tests/data */
  char root[1024], golden_dir[1100], cases[1200];
  snprintf(root, sizeof root, "%s/../..", data);
  snprintf(golden_dir, sizeof golden_dir, "%s/tests/cli/golden", root);
  snprintf(cases, sizeof cases, "%s/cases.txt", golden_dir);
  CTS_ASSERT_MSG(chdir(root) == 0, "cannot enter %s", root);
  const char *update_env = getenv("CTS_UPDATE_GOLDEN");
  const bool update = update_env && strcmp(update_env, "1") == 0;
  FILE *f = fopen(cases, "r");
  CTS_ASSERT_MSG(f != NULL, "cannot read %s", cases);
  char line[1024];
  size_t ncases = 0, failures = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (!line[0] || line[0] == '#') continue;
    char *argv[32] = {CTS_TEST_CTFSCOPE};
    int argc = 1;
    char *save = NULL;
    const char *name = strtok_r(line, " ", &save);
    for (char *tok; argc < 31 && (tok = strtok_r(NULL, " ", &save));) argv[argc++] = tok;
    argv[argc] = NULL;
    run_result_t r;
    if (!run_cmd(argv, NULL, 60, &r)) {
      failures++;
      continue;
    }
    char code[16];
    const int n = snprintf(code, sizeof code, "%d\n", r.exit_code);
    bool ok = check(golden_dir, name, "out", r.out, r.out_len, update);
    ok &= check(golden_dir, name, "err", r.err, r.err_len, update);
    ok &= check(golden_dir, name, "code", code, (size_t)n, update);
    if (r.signal || r.timed_out) {
      fprintf(stderr, "  %s: killed by signal %d%s\n", name, r.signal,
              r.timed_out ? " (timeout)" : "");
      ok = false;
    }
    failures += !ok;
    ncases++;
    run_result_free(&r);
  }
  fclose(f);
  CTS_ASSERT_MSG(ncases >= 10, "only %zu cases found", ncases);
  CTS_ASSERT_MSG(failures == 0, "%zu of %zu CLI cases differ from their golden files", failures,
                 ncases);
}

CTS_TEST_MAIN()
