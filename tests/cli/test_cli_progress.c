/* SPDX-License-Identifier: MIT */
/* What a person at a terminal sees around a long command (issue 20, point 6): the reading
 * progress line on stderr (run under a pseudo-terminal, with CTFSCOPE_PROGRESS_DELAY_MS=0
 * so that a small trace shows it), the "wrote FILE (SIZE)" note, and none of either when
 * stderr is not a terminal; and `export --format chrome` refusing JSON over --max-size
 * with exit 2, keeping the old output file. */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pty.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/compiler.h"

#include "../run_cmd.h"
#include "../test.h"
#include "analysis_trace.h"

enum { TIMEOUT_S = 60 };

static char tmpdir[256];
static char trace[320];
static at_trace_t tr;

static void cleanup(void) {
  static const char *const files[] = {"progress.ctf", "piped.json",   "told.json",
                                      "full.json",    "limited.json", "fresh.json"};
  char path[400];
  for (size_t i = 0; i < CTS_ARRAY_SIZE(files); i++) {
    snprintf(path, sizeof path, "%s/%s", tmpdir, files[i]);
    unlink(path);
  }
  rmdir(tmpdir);
}

static bool setup(void) {
  if (tmpdir[0]) return true;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cts-progress-XXXXXX");
  if (!mkdtemp(tmpdir)) return false;
  atexit(cleanup);
  snprintf(trace, sizeof trace, "%s/progress.ctf", tmpdir);
  at_build(&tr, 1.0);
  return at_write(&tr, trace) == 0;
}

/* Runs argv with stderr (and stdin) on a pseudo-terminal and stdout on /dev/null, with
 * CTFSCOPE_PROGRESS_DELAY_MS set to delay_ms (NULL: unset). Returns the terminal's bytes
 * (malloc'd, NUL-terminated; NULL if the command could not run, crashed or hung) and sets
 * *exit_code. */
static char *run_on_tty(char *const argv[], const char *delay_ms, int *exit_code) {
  int master;
  const pid_t pid = forkpty(&master, NULL, NULL, NULL);
  if (pid < 0) return NULL;
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull < 0) _exit(127);
    dup2(devnull, STDOUT_FILENO);
    if (delay_ms)
      setenv("CTFSCOPE_PROGRESS_DELAY_MS", delay_ms, 1);
    else
      unsetenv("CTFSCOPE_PROGRESS_DELAY_MS");
    execv(argv[0], argv);
    _exit(127);
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  run_append(&buf, &len, &cap, "", 0);
  const time_t deadline = time(NULL) + TIMEOUT_S;
  bool hung = false;
  for (;;) {
    const int left = (int)(deadline - time(NULL));
    if (left <= 0) {
      hung = true;
      kill(pid, SIGKILL);
      break;
    }
    struct pollfd p = {master, POLLIN, 0};
    if (poll(&p, 1, left * 1000) <= 0) continue;
    char tmp[4096];
    const ssize_t n = read(master, tmp, sizeof tmp);
    if (n <= 0) break; /* EIO: the child closed the terminal's last descriptor */
    run_append(&buf, &len, &cap, tmp, (size_t)n);
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  if (hung || !WIFEXITED(status)) {
    free(buf);
    return NULL;
  }
  *exit_code = WEXITSTATUS(status);
  return buf;
}

static bool matches(const char *text, const char *pattern) {
  regex_t re;
  if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) return false;
  const bool m = regexec(&re, text, 0, NULL, 0) == 0;
  regfree(&re);
  return m;
}

CTS_TEST(progress_line_on_a_terminal_has_size_rate_and_time_left) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "stats", trace, NULL};
  int code = -1;
  char *tty = run_on_tty(argv, "0", &code);
  CTS_ASSERT(tty != NULL);
  CTS_ASSERT_EQ_INT(code, 0);
  /* Drawn from the start of the line, and erased (to the end of the line) afterwards. */
  CTS_ASSERT_MSG(matches(tty,
                         "^\rctfscope stats: reading progress\\.ctf +[0-9]+% [0-9.]+ [kMG]?B "
                         "of [0-9.]+ [kMG]?B, [0-9.]+ [kMG]?B/s, [0-9]+ s left\033\\[K"),
                 "terminal got: %s", tty);
  CTS_ASSERT_MSG(strstr(tty, "\r\033[K") != NULL, "the line is not erased: %s", tty);
  CTS_ASSERT(strstr(tty, "\n") == NULL); /* stdout went elsewhere, and nothing else */
  free(tty);
}

CTS_TEST(progress_line_waits_for_a_second_of_work) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "leaks", trace, NULL};
  int code = -1;
  char *tty = run_on_tty(argv, NULL, &code); /* the default delay: a small trace is quicker */
  CTS_ASSERT(tty != NULL);
  CTS_ASSERT_EQ_INT(code, 0);
  CTS_ASSERT_MSG(tty[0] == '\0', "terminal got: %s", tty);
  free(tty);
}

CTS_TEST(nothing_new_on_stderr_when_it_is_not_a_terminal) {
  CTS_ASSERT(setup());
  setenv("CTFSCOPE_PROGRESS_DELAY_MS", "0", 1);
  char out[400];
  snprintf(out, sizeof out, "%s/piped.json", tmpdir);
  char *stats[] = {CTS_TEST_CTFSCOPE, "stats", trace, NULL};
  char *export[] = {CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "-o", out, trace, NULL};
  char *const *cmds[] = {stats, export};
  for (size_t i = 0; i < CTS_ARRAY_SIZE(cmds); i++) {
    run_result_t r;
    CTS_ASSERT(run_cmd(cmds[i], NULL, TIMEOUT_S, &r));
    CTS_ASSERT_EQ_INT(r.exit_code, 0);
    CTS_ASSERT_MSG(r.err_len == 0, "%s: stderr got: %s", cmds[i][1], r.err);
    run_result_free(&r);
  }
  unsetenv("CTFSCOPE_PROGRESS_DELAY_MS");
}

CTS_TEST(a_written_file_is_named_with_its_size_on_a_terminal) {
  CTS_ASSERT(setup());
  char out[400];
  snprintf(out, sizeof out, "%s/told.json", tmpdir);
  char *argv[] = {CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "-o", out, trace, NULL};
  int code = -1;
  char *tty = run_on_tty(argv, NULL, &code);
  CTS_ASSERT(tty != NULL);
  CTS_ASSERT_EQ_INT(code, 0);
  struct stat st;
  CTS_ASSERT(stat(out, &st) == 0 && st.st_size > 1000);
  char want[600];
  snprintf(want, sizeof want, "ctfscope export: wrote %s (", out);
  const size_t n = strlen(want);
  double kb = 0;
  char unit[8] = "";
  CTS_ASSERT_MSG(strncmp(tty, want, n) == 0 && sscanf(tty + n, "%lf %7[^)]", &kb, unit) == 2 &&
                     strcmp(unit, "kB") == 0 && strcmp(strchr(tty + n, ')'), ")\r\n") == 0,
                 "terminal got '%s'", tty);
  /* Three significant digits of the size. */
  CTS_ASSERT_MSG(fabs(kb * 1000 - (double)st.st_size) <= (double)st.st_size * 0.005,
                 "%.2f kB for %lld bytes", kb, (long long)st.st_size);
  free(tty);
  /* Standard output is not a file anyone needs told about. */
  char *to_stdout[] = {CTS_TEST_CTFSCOPE, "export", "-f", "chrome", trace, NULL};
  tty = run_on_tty(to_stdout, NULL, &code);
  CTS_ASSERT(tty != NULL && code == 0);
  CTS_ASSERT_MSG(tty[0] == '\0', "terminal got: %s", tty);
  free(tty);
}

static bool slurp(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char *buf = NULL;
  size_t cap = 0;
  *len = 0;
  run_append(&buf, len, &cap, "", 0);
  char tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) run_append(&buf, len, &cap, tmp, n);
  fclose(f);
  *data = buf;
  return true;
}

CTS_TEST(chrome_export_over_max_size_is_refused_and_keeps_the_old_file) {
  CTS_ASSERT(setup());
  char full[400], out[400];
  snprintf(full, sizeof full, "%s/full.json", tmpdir);
  snprintf(out, sizeof out, "%s/limited.json", tmpdir);
  /* The default limit is far above this trace's JSON, and 0 is no limit: the same output as
   * before the limit existed. */
  char *plain[] = {CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "-o", full, trace, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(plain, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  run_result_free(&r);
  char *want, *got;
  size_t want_len, got_len;
  CTS_ASSERT(slurp(full, &want, &want_len));
  CTS_ASSERT(want_len > 10000);
  char *nolimit[] = {
      CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "--max-size", "0", "-o", out, trace, NULL};
  CTS_ASSERT(run_cmd(nolimit, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  run_result_free(&r);
  CTS_ASSERT(slurp(out, &got, &got_len));
  CTS_ASSERT(got_len == want_len && memcmp(got, want, want_len) == 0);
  free(got);

  /* A limit of a tenth of the JSON: exit 2, a message naming the way out, and the file
   * written by the run before left as it was. */
  char limit[32];
  snprintf(limit, sizeof limit, "%zu", want_len / 10);
  char *limited[] = {
      CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "--max-size", limit, "-o", out, trace, NULL};
  CTS_ASSERT(run_cmd(limited, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  CTS_ASSERT_MSG(matches(r.err,
                         "^ctfscope export: error: the Chrome JSON would be (about "
                         "[0-9.]+ kB, )?more than --max-size [0-9.]+ kB"),
                 "stderr: %s", r.err);
  CTS_ASSERT_MSG(strstr(r.err, "ctfscope subsample --factor ") && strstr(r.err, "filter --from") &&
                     strstr(r.err, "--max-size 0"),
                 "stderr: %s", r.err);
  run_result_free(&r);
  CTS_ASSERT(slurp(out, &got, &got_len));
  CTS_ASSERT(got_len == want_len && memcmp(got, want, want_len) == 0);
  free(got);

  /* Just above the JSON's size: written, the same bytes. */
  snprintf(limit, sizeof limit, "%zu", want_len + 1000);
  CTS_ASSERT(run_cmd(limited, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  run_result_free(&r);
  free(want);

  char *bad[] = {CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "--max-size", "12X", trace, NULL};
  CTS_ASSERT(run_cmd(bad, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  CTS_ASSERT(strstr(r.err, "--max-size: '12X' is not a size") != NULL);
  CTS_ASSERT(r.out_len == 0);
  run_result_free(&r);

  /* A limit asked for where the format has none is refused, not silently dropped. */
  char *csv_limited[] = {CTS_TEST_CTFSCOPE, "export", "-f", "csv", "--max-size", "1k", trace, NULL};
  CTS_ASSERT(run_cmd(csv_limited, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  CTS_ASSERT(strstr(r.err, "--max-size limits --format chrome only") != NULL);
  CTS_ASSERT(r.out_len == 0);
  run_result_free(&r);
  char *pprof_value[] = {CTS_TEST_CTFSCOPE, "export", "-f",  "pprof",
                         "--value",         "live",   trace, NULL};
  CTS_ASSERT(run_cmd(pprof_value, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  CTS_ASSERT(strstr(r.err, "--value applies to --format folded only") != NULL);
  CTS_ASSERT(r.out_len == 0);
  run_result_free(&r);
}

/* The limit is decided before a byte is written: the JSON's size is counted exactly first.
 * At the limit, the whole JSON, byte for byte; a byte under it, nothing on standard output
 * and no file where there was none, with the size and the ways out. (Main's code wrote the
 * limit's worth, then refused: "standard output got its start only".) */
CTS_TEST(chrome_export_one_byte_over_max_size_writes_nothing) {
  CTS_ASSERT(setup());
  char *want;
  size_t want_len;
  run_result_t r;
  char *nolimit[] = {CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "--max-size", "0", trace, NULL};
  CTS_ASSERT(run_cmd(nolimit, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  want = r.out;
  want_len = r.out_len;
  r.out = NULL;
  run_result_free(&r);
  CTS_ASSERT(want_len > 10000);

  char limit[32], fresh[400];
  snprintf(limit, sizeof limit, "%zu", want_len);
  char *at_limit[] = {CTS_TEST_CTFSCOPE, "export", "-f",  "chrome",
                      "--max-size",      limit,    trace, NULL};
  CTS_ASSERT(run_cmd(at_limit, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  CTS_ASSERT(r.out_len == want_len && memcmp(r.out, want, want_len) == 0);
  run_result_free(&r);

  snprintf(limit, sizeof limit, "%zu", want_len - 1);
  CTS_ASSERT(run_cmd(at_limit, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  CTS_ASSERT_MSG(r.out_len == 0, "%zu bytes written before the refusal", r.out_len);
  CTS_ASSERT_MSG(matches(r.err,
                         "^ctfscope export: error: the Chrome JSON would be [0-9][^,]* bytes, "
                         "more than --max-size [0-9][^:]* bytes: .*\\(nothing was written\\)"),
                 "stderr: %s", r.err);
  CTS_ASSERT_MSG(strstr(r.err, "subsample --factor 2 ") && strstr(r.err, "filter --from"),
                 "stderr: %s", r.err);
  run_result_free(&r);

  /* Into a file that did not exist: none made. */
  snprintf(fresh, sizeof fresh, "%s/fresh.json", tmpdir);
  unlink(fresh);
  char *to_file[] = {
      CTS_TEST_CTFSCOPE, "export", "-f", "chrome", "--max-size", limit, "-o", fresh, trace, NULL};
  CTS_ASSERT(run_cmd(to_file, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  run_result_free(&r);
  CTS_ASSERT(access(fresh, F_OK) != 0);
  free(want);
}

CTS_TEST_MAIN()
