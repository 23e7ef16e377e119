/* SPDX-License-Identifier: MIT */
/* Runs each victim program twice, untraced and under libctfscope-preload.so, checks that
 * both runs print the same and exit the same, then decodes the trace with our reader and
 * checks what it must contain. Test names are passed on the command line by CTest. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../test.h"
#include "../tracer/decoded.h"

typedef struct run_result {
  char out[1 << 16];
  size_t len;
  int status; /* exit code, or 128 + signal */
  char err[1 << 14];
  size_t err_len;
} run_result_t;

static void read_all(int fd, char *buf, size_t cap, size_t *len) {
  *len = 0;
  for (;;) {
    const ssize_t n = read(fd, buf + *len, cap - 1 - *len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    *len += (size_t)n;
    if (*len == cap - 1) break;
  }
  buf[*len] = '\0';
}

/* Runs argv with the preload when trace != NULL. extra: "NAME=VALUE" or NULL. cwd: where
 * to run it, NULL = here. */
static void run_in(run_result_t *r, char *const argv[], const char *trace, const char *rate,
                   const char *extra, const char *cwd) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) abort();
  fflush(NULL);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    unsetenv("LD_PRELOAD");
    unsetenv("MEMTRACE");
    unsetenv("MEMTRACE_RATE");
    if (trace) {
      setenv("LD_PRELOAD", CTS_TEST_PRELOAD, 1);
      setenv("MEMTRACE", trace, 1);
      if (rate) setenv("MEMTRACE_RATE", rate, 1);
      if (extra) putenv((char *)extra);
    }
    if (cwd && chdir(cwd) != 0) _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  close(out[1]), close(err[1]);
  /* Victims print little: reading stdout to the end first cannot deadlock on stderr. */
  read_all(out[0], r->out, sizeof r->out, &r->len);
  read_all(err[0], r->err, sizeof r->err, &r->err_len);
  close(out[0]), close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void run(run_result_t *r, char *const argv[], const char *trace, const char *rate,
                const char *extra) {
  run_in(r, argv, trace, rate, extra, NULL);
}

static run_result_t plain, traced;

static void victim_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", CTS_TEST_VICTIM_DIR, name);
}

static void trace_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "/tmp/cts_preload_%s_%d.ctf", name, (int)getpid());
}

/* Runs the victim untraced and traced; true if both behaved the same. */
static bool run_both(const char *name, const char *arg1, const char *arg2, const char *rate,
                     const char *trace, const char *extra) {
  char path[1024];
  victim_path(path, sizeof path, name);
  char *argv[] = {path, (char *)arg1, arg1 ? (char *)arg2 : NULL, NULL};
  run(&plain, argv, NULL, NULL, NULL);
  unlink(trace);
  run(&traced, argv, trace, rate, extra);
  if (plain.len != traced.len || memcmp(plain.out, traced.out, plain.len) != 0 ||
      plain.status != traced.status) {
    fprintf(stderr, "  untraced: exit %d, stdout:\n%s  traced: exit %d, stdout:\n%s  stderr:\n%s",
            plain.status, plain.out, traced.status, traced.out, traced.err);
    return false;
  }
  if (traced.err_len) fprintf(stderr, "  traced stderr: %s", traced.err);
  return true;
}

static size_t count_length(const decoded_t *d, uint64_t bytes) {
  size_t n = 0;
  for (size_t i = 0; i < d->nallocs; i++) n += d->allocs[i].length == (bytes + 7) / 8;
  return n;
}

/* Checks that the trace decodes cleanly: no truncation, no collect of an unknown object. */
#define CHECK_TRACE(d, trace)                                                  \
  do {                                                                         \
    decoded_from_file(&(d), trace);                                            \
    CTS_ASSERT_MSG((d).error == 0, "%s", (d).message);                         \
    CTS_ASSERT((d).truncated_packets == 0);                                    \
    CTS_ASSERT_MSG(!(d).collected_twice, "a collect names an unknown object"); \
    CTS_ASSERT(!(d).time_backwards);                                           \
  } while (0)

/* ---- exactness and accuracy ------------------------------------------------------------- */

CTS_TEST(accuracy_rate_one_is_exact) {
  char trace[256];
  trace_path(trace, sizeof trace, "exact");
  CTS_ASSERT(run_both("victim_accuracy", "20000", "2048", "1", trace, NULL));
  unsigned long long allocs, frees, words;
  CTS_ASSERT(sscanf(plain.out, "allocs=%llu frees=%llu words=%llu", &allocs, &frees, &words) == 3);
  decoded_t d;
  CHECK_TRACE(d, trace);
  uint64_t trace_words = 0, trace_samples = 0;
  for (size_t i = 0; i < d.nallocs; i++) {
    trace_words += d.allocs[i].length;
    trace_samples += d.allocs[i].nsamples;
  }
  CTS_ASSERT_EQ_U64(d.nallocs, allocs);
  CTS_ASSERT_EQ_U64(d.ncollects, frees);
  CTS_ASSERT_EQ_U64(trace_words, words);
  CTS_ASSERT_EQ_U64(trace_samples, words);
  CTS_ASSERT(d.rate == 1.0);
  CTS_ASSERT(d.max_depth >= 3);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(accuracy_sampled_within_3_percent) {
  char trace[256];
  trace_path(trace, sizeof trace, "sampled");
  /* 400 000 blocks of 1..4096 bytes: ~1e8 words; at 1e-4, ~1e4 expected samples. */
  CTS_ASSERT(run_both("victim_accuracy", "400000", "4096", "1e-4", trace, NULL));
  unsigned long long allocs, frees, words;
  CTS_ASSERT(sscanf(plain.out, "allocs=%llu frees=%llu words=%llu", &allocs, &frees, &words) == 3);
  decoded_t d;
  CHECK_TRACE(d, trace);
  const double expected = (double)words * 1e-4;
  const double ratio = d.sampled_words / expected;
  fprintf(stderr, "  %zu sampled blocks, %.0f samples, %.0f expected: estimate %.4f of true\n",
          d.nallocs, d.sampled_words, expected, ratio);
  CTS_ASSERT(expected >= 1e4);
  CTS_ASSERT_MSG(ratio > 0.97 && ratio < 1.03, "estimated/true bytes = %.4f", ratio);
  decoded_fini(&d);
  unlink(trace);
}

/* ---- process and thread shapes -------------------------------------------------------- */

CTS_TEST(threads) {
  char trace[256];
  trace_path(trace, sizeof trace, "threads");
  CTS_ASSERT(run_both("victim_threads", NULL, NULL, "1", trace, NULL));
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_MSG(d.nallocs >= 8 * 20000 + 8 * 64, "%zu allocs", d.nallocs);
  CTS_ASSERT_MSG(d.ncollects >= 8 * 20000 + 8 * 64, "%zu collects", d.ncollects);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(threads_frame_pointers) {
  char trace[256];
  trace_path(trace, sizeof trace, "threads_fp");
  CTS_ASSERT(run_both("victim_threads", NULL, NULL, "0.01", trace, "CTFSCOPE_UNWIND=fp"));
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT(d.nallocs > 100);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(fork_child_is_not_traced) {
  char trace[256];
  trace_path(trace, sizeof trace, "fork");
  CTS_ASSERT(run_both("victim_fork", NULL, NULL, "1", trace, NULL));
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(count_length(&d, 33333), 20);
  CTS_ASSERT_EQ_U64(count_length(&d, 77777), 0);
  CTS_ASSERT_EQ_U64(d.skipped_packets, 0); /* no packet from another pid */
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(exec_flushes_and_new_image_is_not_traced) {
  char trace[256];
  trace_path(trace, sizeof trace, "exec");
  CTS_ASSERT(run_both("victim_exec", NULL, NULL, "1", trace, NULL));
  CTS_ASSERT_EQ_INT(traced.status, 7);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(count_length(&d, 55555), 11);
  CTS_ASSERT_EQ_U64(count_length(&d, 66666), 0);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(dlopen_plugin_allocations_are_named) {
  char trace[256];
  trace_path(trace, sizeof trace, "dlopen");
  CTS_ASSERT(run_both("victim_dlopen", CTS_TEST_PLUGIN, NULL, "1", trace, NULL));
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(count_length(&d, 44444), 20);
#ifdef CTS_TEST_HAVE_LIBDW
  for (size_t i = 0; i < d.nallocs; i++) {
    if (d.allocs[i].length != (44444 + 7) / 8) continue;
    const char *f = decoded_function(&d, d.allocs[i].innermost);
    CTS_ASSERT_MSG(f && strcmp(f, "plugin_allocate") == 0, "allocation site %s",
                   f ? f : "(unknown)");
  }
#endif
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(calloc_before_initialisation) {
  char trace[256];
  trace_path(trace, sizeof trace, "early");
  CTS_ASSERT(run_both("victim_early", NULL, NULL, "1", trace, NULL));
  CTS_ASSERT(strstr(traced.out, "early calloc ok") != NULL);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT(count_length(&d, 3000) == 1);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(realloc_chains) {
  char trace[256];
  trace_path(trace, sizeof trace, "realloc");
  CTS_ASSERT(run_both("victim_realloc", NULL, NULL, "1", trace, NULL));
  unsigned long long allocs, frees;
  CTS_ASSERT(sscanf(plain.out, "allocs=%llu frees=%llu", &allocs, &frees) == 2);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(d.nallocs, allocs);
  CTS_ASSERT_EQ_U64(d.ncollects, frees);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(aligned_allocators) {
  char trace[256];
  trace_path(trace, sizeof trace, "memalign");
  CTS_ASSERT(run_both("victim_memalign", NULL, NULL, "1", trace, NULL));
  CTS_ASSERT_EQ_INT(traced.status, 0);
  unsigned long long allocs, frees;
  CTS_ASSERT(sscanf(plain.out, "allocs=%llu frees=%llu", &allocs, &frees) == 2);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(d.nallocs, allocs);
  CTS_ASSERT_EQ_U64(d.ncollects, frees);
  decoded_fini(&d);
  unlink(trace);
}

/* ---- configuration errors: one line, untraced, unharmed ---------------------------------- */

static void check_refused(const char *memtrace, const char *rate, const char *expect) {
  char path[1024];
  victim_path(path, sizeof path, "victim_realloc");
  char *argv[] = {path, NULL};
  run(&plain, argv, NULL, NULL, NULL);
  run(&traced, argv, memtrace, rate, NULL);
  CTS_ASSERT_EQ_INT(traced.status, plain.status);
  CTS_ASSERT_STR_EQ(traced.out, plain.out);
  CTS_ASSERT_MSG(strstr(traced.err, expect) != NULL, "stderr: %s", traced.err);
  const char *nl = strchr(traced.err, '\n');
  CTS_ASSERT_MSG(nl && nl[1] == '\0', "not exactly one line: %s", traced.err);
}

CTS_TEST(bad_rate_is_refused) {
  check_refused("/tmp/cts_never.ctf", "abc", "MEMTRACE_RATE=\"abc\": not a number in (0, 1]");
  check_refused("/tmp/cts_never.ctf", "0", "not a number in (0, 1]");
  check_refused("/tmp/cts_never.ctf", "2", "not a number in (0, 1]");
  CTS_ASSERT(access("/tmp/cts_never.ctf", F_OK) != 0);
}

CTS_TEST(unwritable_file_is_refused) {
  check_refused("/nonexistent-dir/x.ctf", "1", "cannot trace into this file");
}

CTS_TEST(tcp_is_refused_for_now) {
  check_refused("tcp://localhost:1234", "1", "TCP output");
  check_refused("listen://5555", "1", "TCP output");
}

/* ---- ctfscope record ---------------------------------------------------------------------- */

CTS_TEST(record_runs_the_program_and_reports) {
  char victim[1024], trace[256];
  victim_path(victim, sizeof victim, "victim_accuracy");
  trace_path(trace, sizeof trace, "record");
  unlink(trace);
  char *plain_argv[] = {victim, "3000", "100", NULL};
  run(&plain, plain_argv, NULL, NULL, NULL);
  char *argv[] = {
      CTS_TEST_CTFSCOPE, "record", "-o", trace, "--rate", "1", "--", victim, "3000", "100", NULL};
  run(&traced, argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, plain.status);
  CTS_ASSERT_STR_EQ(traced.out, plain.out);
  CTS_ASSERT_MSG(strstr(traced.err, "trace written to ") && strstr(traced.err, trace), "stderr: %s",
                 traced.err);
  CTS_ASSERT_MSG(strstr(traced.err, "3 001 sampled allocations"), "stderr: %s", traced.err);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(d.nallocs, 3001);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(record_default_name_and_exit_code) {
  char dir[] = "/tmp/cts_record_XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  char victim[1024];
  victim_path(victim, sizeof victim, "victim_exec");
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "-q", victim, NULL};
  run_in(&traced, argv, NULL, NULL, NULL, dir);
  CTS_ASSERT_EQ_INT(traced.status, 7);
  CTS_ASSERT_EQ_U64(traced.err_len, 0); /* -q */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls %s | grep -c '^ctfscope\\.victim_exec\\.[0-9]*\\.ctf$'", dir);
  FILE *ls = popen(cmd, "r");
  int count = 0;
  CTS_ASSERT(ls && fscanf(ls, "%d", &count) == 1);
  pclose(ls);
  CTS_ASSERT_EQ_INT(count, 1);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CTS_ASSERT(system(cmd) == 0);
}

CTS_TEST(record_of_a_killed_program_keeps_its_last_second) {
  char victim[1024], trace[256];
  victim_path(victim, sizeof victim, "victim_killed");
  trace_path(trace, sizeof trace, "killed");
  unlink(trace);
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "-o", trace, "--rate", "1", victim, NULL};
  run(&traced, argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 128 + 9);
  CTS_ASSERT_STR_EQ(traced.out, "allocated\n");
  decoded_t d;
  decoded_from_file(&d, trace);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(count_length(&d, 22222), 10);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(record_usage_errors) {
  char *no_prog[] = {CTS_TEST_CTFSCOPE, "record", NULL};
  run(&traced, no_prog, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 2);
  char *bad_rate[] = {CTS_TEST_CTFSCOPE, "record", "--rate", "x", "true", NULL};
  run(&traced, bad_rate, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 2);
  CTS_ASSERT(strstr(traced.err, "--rate 'x' is not a number in (0, 1]") != NULL);
  char *missing[] = {CTS_TEST_CTFSCOPE, "record", "-q", "/nonexistent/prog", NULL};
  run(&traced, missing, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 127);
  CTS_ASSERT(strstr(traced.err, "cannot run '/nonexistent/prog'") != NULL);
}

CTS_TEST_MAIN()
