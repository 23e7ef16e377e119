/* SPDX-License-Identifier: MIT */
/* Acceptance: `ctfscope dump FILE` prints exactly what memtrace's own reader prints for every
 * trace of the golden corpus (comparison ignores '# ' lines), including gzipped goldens, the
 * .v3 files, the truncated-body file (a warning naming the offset, exit 0) and the
 * truncated-header file (the earlier events, then an error naming the offset, exit 1). */
#include <zlib.h>

#include "../run_cmd.h"
#include "../test.h"
#include "corpus_files.h"

/* Next line of a golden (plain or gz) that is not a '# ' comment; NULL at the end. */
static char *next_golden_line(gzFile g, char *buf, size_t size) {
  while (gzgets(g, buf, (int)size)) {
    if (strncmp(buf, "# ", 2) != 0) return buf;
  }
  return NULL;
}

static char *next_line(FILE *f, char **line, size_t *cap) {
  while (getline(line, cap, f) >= 0) {
    if (strncmp(*line, "# ", 2) != 0) return *line;
  }
  return NULL;
}

/* Returns true if the dump of `path` matches; prints the first difference otherwise. */
static bool compare_dump(const char *path, const char *golden, int *expected_exit) {
  char tmp[] = "/tmp/cts-dump-XXXXXX";
  const int fd = mkstemp(tmp);
  if (fd < 0) return false;
  close(fd);
  char *argv[] = {CTS_TEST_CTFSCOPE, "dump", (char *)path, NULL};
  run_result_t r;
  bool ok = run_cmd(argv, tmp, 120, &r);
  gzFile g = gzopen(golden, "rb");
  FILE *f = fopen(tmp, "r");
  char gbuf[1 << 16];
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  /* The golden's last line tells how memtrace's reader ended. */
  *expected_exit = 0;
  for (;;) {
    char *a = f ? next_line(f, &line, &cap) : NULL;
    char *b = g ? next_golden_line(g, gbuf, sizeof gbuf) : NULL;
    lineno++;
    if (!a && !b) break;
    if (!a || !b || strcmp(a, b) != 0) {
      fprintf(stderr, "  %s: line %zu differs\n    ours:   %s    golden: %s", path, lineno,
              a ? a : "(end)\n", b ? b : "(end)\n");
      ok = false;
      break;
    }
  }
  if (g) {
    gzrewind(g);
    char last[4096] = "";
    while (gzgets(g, gbuf, sizeof gbuf)) {
      size_t n = strlen(gbuf);
      if (n >= sizeof last) n = sizeof last - 1;
      memcpy(last, gbuf, n);
      last[n] = '\0';
    }
    if (strncmp(last, "# end: exception", 16) == 0) *expected_exit = 1;
    gzclose(g);
  }
  if (r.exit_code != *expected_exit || r.signal || r.timed_out) {
    fprintf(stderr, "  %s: exit %d signal %d (expected exit %d); stderr: %s\n", path, r.exit_code,
            r.signal, *expected_exit, r.err);
    ok = false;
  }
  /* Both kinds of truncation name the packet's offset on stderr. */
  if (*expected_exit == 1 && !strstr(r.err, "at offset")) {
    fprintf(stderr, "  %s: the error does not name an offset: %s\n", path, r.err);
    ok = false;
  }
  char stderr_golden[1200];
  snprintf(stderr_golden, sizeof stderr_golden, "%s.stderr.txt", path);
  if (access(stderr_golden, R_OK) == 0 &&
      !(strstr(r.err, "warning") && strstr(r.err, "skipping truncated packet") &&
        strstr(r.err, "at offset"))) {
    fprintf(stderr, "  %s: expected a truncated-packet warning with its offset, got: %s\n", path,
            r.err);
    ok = false;
  }
  free(line);
  if (f) fclose(f);
  unlink(tmp);
  run_result_free(&r);
  return ok;
}

CTS_TEST(dump_matches_every_golden) {
  CTS_REQUIRE_CORPUS(corpus);
  corpus_list_t l;
  corpus_list_memtrace(corpus, &l);
  CTS_ASSERT_MSG(l.n >= 20, "expected at least 20 corpus traces, found %zu", l.n);
  size_t failures = 0, compared = 0;
  for (size_t i = 0; i < l.n; i++) {
    char *golden = corpus_golden(l.paths[i], ".dump.txt");
    if (!golden) {
      fprintf(stderr, "  %s: no golden dump\n", l.paths[i]);
      failures++;
      continue;
    }
    int expected_exit;
    if (!compare_dump(l.paths[i], golden, &expected_exit)) failures++;
    compared++;
    free(golden);
  }
  corpus_list_free(&l);
  CTS_ASSERT_MSG(failures == 0, "%zu of %zu traces differ from their golden dump", failures,
                 compared);
}

CTS_TEST(truncated_header_error_names_offset) {
  CTS_REQUIRE_CORPUS(corpus);
  char path[1024];
  snprintf(path, sizeof path, "%s/memtrace/traces/p1_short_lived.r1e-2.trunc-header.ctf", corpus);
  char *argv[] = {CTS_TEST_CTFSCOPE, "dump", path, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, "/dev/null", 60, &r));
  const bool named = strstr(r.err, "at offset 343761") && strstr(r.err, "error");
  const int code = r.exit_code;
  run_result_free(&r);
  CTS_ASSERT_EQ_INT(code, 1);
  CTS_ASSERT_MSG(named, "the error must name offset 343761, where the last header starts");
}

CTS_TEST(truncated_body_warning_names_offset) {
  CTS_REQUIRE_CORPUS(corpus);
  char path[1024];
  snprintf(path, sizeof path, "%s/memtrace/traces/p1_short_lived.r1e-2.trunc-body.ctf", corpus);
  char *argv[] = {CTS_TEST_CTFSCOPE, "dump", path, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, "/dev/null", 60, &r));
  const bool named = strstr(r.err, "warning") && strstr(r.err, "at offset 315181");
  const int code = r.exit_code;
  run_result_free(&r);
  CTS_ASSERT_EQ_INT(code, 0);
  CTS_ASSERT_MSG(named, "the warning must name offset 315181, where the cut packet starts");
}

CTS_TEST_MAIN()
