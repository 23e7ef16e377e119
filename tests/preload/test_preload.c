/* SPDX-License-Identifier: MIT */
/* Runs each victim program twice, untraced and under libctfscope-preload.so, checks that
 * both runs print the same and exit the same, then decodes the trace with our reader and
 * checks what it must contain. Test names are passed on the command line by CTest. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctfscope/tracer.h>
#include <inttypes.h>

#include "../test.h"
#include "../tracer/decoded.h"
#include "driven.h"
#include "tracer/exec_name.h"

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

/* 8 threads allocating at rate 1; extra: an environment setting, or NULL. */
static void check_threads(const char *name, const char *extra) {
  char trace[256];
  trace_path(trace, sizeof trace, name);
  CTS_ASSERT(run_both("victim_threads", NULL, NULL, "1", trace, extra));
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_MSG(d.nallocs >= 8 * 20000 + 8 * 64, "%zu allocs", d.nallocs);
  CTS_ASSERT_MSG(d.ncollects >= 8 * 20000 + 8 * 64, "%zu collects", d.ncollects);
  decoded_fini(&d);
  unlink(trace);
}

CTS_TEST(threads) {
  check_threads("threads", NULL);
}

/* The writer thread (CTFSCOPE_WRITER=thread; the default is a writer process) keeps
 * working through the preload library too. */
CTS_TEST(threads_with_a_writer_thread) {
  check_threads("threads_writer_thread", "CTFSCOPE_WRITER=thread");
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

/* The default unwinder (mixed) must give libunwind's backtraces, allocation by allocation:
 * in a program built with frame pointers (the walk, and the outer-frame cache for libc's
 * start-up frames), in C++ whose operator new (libstdc++) keeps none, and in sort
 * (coreutils and libc: nothing to walk, libunwind throughout). */
static void check_mixed_equals_libunwind(const char *name, char *const argv[]) {
  char trace_mixed[256], trace_lib[256];
  snprintf(trace_mixed, sizeof trace_mixed, "/tmp/cts_preload_mixed_%s_%d.ctf", name,
           (int)getpid());
  snprintf(trace_lib, sizeof trace_lib, "/tmp/cts_preload_libunwind_%s_%d.ctf", name,
           (int)getpid());
  run_result_t a, b;
  run(&a, argv, trace_mixed, "1", "CTFSCOPE_UNWIND=mixed");
  run(&b, argv, trace_lib, "1", "CTFSCOPE_UNWIND=libunwind");
  CTS_ASSERT_MSG(a.status == 0 && b.status == 0, "%s: exit %d and %d", name, a.status, b.status);
  decoded_t m, l;
  CHECK_TRACE(m, trace_mixed);
  CHECK_TRACE(l, trace_lib);
  CTS_ASSERT_MSG(m.nallocs == l.nallocs && m.nallocs > 100, "%s: %zu and %zu allocations", name,
                 m.nallocs, l.nallocs);
  size_t deepest = 0;
  for (size_t i = 0; i < m.nallocs; i++) {
    CTS_ASSERT_MSG(m.allocs[i].backtrace_shape == l.allocs[i].backtrace_shape &&
                       m.allocs[i].depth == l.allocs[i].depth,
                   "%s: allocation %zu: %zu frames (mixed) against %zu (libunwind)", name, i,
                   m.allocs[i].depth, l.allocs[i].depth);
    if (m.allocs[i].depth > deepest) deepest = m.allocs[i].depth;
  }
  fprintf(stderr, "  %s: %zu allocations, the same backtraces (up to %zu frames)\n", name,
          m.nallocs, deepest);
  decoded_fini(&m);
  decoded_fini(&l);
  unlink(trace_mixed);
  unlink(trace_lib);
}

CTS_TEST(mixed_unwinder_gives_libunwinds_backtraces) {
#ifndef CTS_TEST_HAVE_LIBUNWIND
  CTS_SKIP("built without libunwind");
#else
  char victim[1024], cxx[1024];
  victim_path(victim, sizeof victim, "victim_accuracy");
  victim_path(cxx, sizeof cxx, "victim_cxx");
  char *const accuracy_argv[] = {victim, "3000", "512", NULL};
  check_mixed_equals_libunwind("accuracy", accuracy_argv);
  char *const cxx_argv[] = {cxx, NULL};
  check_mixed_equals_libunwind("cxx", cxx_argv);
  char input[256];
  snprintf(input, sizeof input, "/tmp/cts_preload_mixed_sort_%d.txt", (int)getpid());
  FILE *f = fopen(input, "w");
  CTS_ASSERT(f != NULL);
  for (unsigned i = 0; i < 5000; i++) fprintf(f, "%08x line %u\n", i * 2654435761u, i);
  CTS_ASSERT(fclose(f) == 0);
  char *const sort_argv[] = {"/usr/bin/sort", input, NULL};
  check_mixed_equals_libunwind("sort", sort_argv);
  unlink(input);
#endif
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

/* The file the Nth exec'd image of a traced process traces into. */
static void exec_file(char *buf, size_t size, const char *trace, unsigned n) {
  const size_t len = strlen(trace);
  snprintf(buf, size, "%.*s.exec%u.ctf", (int)(len - 4), trace, n);
}

CTS_TEST(exec_continues_the_trace_in_a_new_file) {
  static const char *const ways[] = {"execv", "execve", "execvp", "execvpe",
                                     "execl", "execlp", "execle"};
  for (size_t w = 0; w < sizeof ways / sizeof *ways; w++) {
    char trace[256], next[300];
    trace_path(trace, sizeof trace, "exec");
    exec_file(next, sizeof next, trace, 1);
    unlink(next);
    CTS_ASSERT(run_both("victim_exec", ways[w], NULL, "1", trace, NULL));
    CTS_ASSERT_EQ_INT(traced.status, 7);
    decoded_t d;
    CHECK_TRACE(d, trace); /* the first image, complete up to its exec */
    CTS_ASSERT_MSG(count_length(&d, 55555) == 11, "%s: %zu", ways[w], count_length(&d, 55555));
    CTS_ASSERT_EQ_U64(count_length(&d, 66666), 0);
    const uint64_t pid = d.pid;
    decoded_fini(&d);
    CHECK_TRACE(d, next); /* the new image, a trace of its own */
    CTS_ASSERT_MSG(count_length(&d, 66666) == 10, "%s: %zu", ways[w], count_length(&d, 66666));
    CTS_ASSERT_EQ_U64(count_length(&d, 55555), 0);
    CTS_ASSERT_EQ_U64(d.pid, pid);
    CTS_ASSERT(strstr(d.executable, "victim_exec") != NULL);
    decoded_fini(&d);
    unlink(trace);
    unlink(next);
  }
}

CTS_TEST(exec_by_a_forked_child_is_not_traced) {
  char trace[256], next[300];
  trace_path(trace, sizeof trace, "forkexec");
  exec_file(next, sizeof next, trace, 1);
  unlink(next);
  CTS_ASSERT(run_both("victim_exec", "fork-exec", NULL, "1", trace, NULL));
  CTS_ASSERT_EQ_INT(traced.status, 7);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(count_length(&d, 55555), 11);
  CTS_ASSERT_EQ_U64(count_length(&d, 66666), 0);
  decoded_fini(&d);
  CTS_ASSERT(access(next, F_OK) != 0);
  unlink(trace);
}

/* `ctfscope record` of a program started through wrappers that exec it: env, a shell
 * script's exec, both. The program's own trace is the last file of the sequence. */
CTS_TEST(record_follows_wrappers_that_exec) {
  char script[256];
  snprintf(script, sizeof script, "/tmp/cts_preload_wrapper_%d.sh", (int)getpid());
  FILE *f = fopen(script, "w");
  CTS_ASSERT(f != NULL);
  fputs("#!/bin/sh\nexec \"$@\"\n", f);
  fclose(f);
  CTS_ASSERT(chmod(script, 0755) == 0);
  char victim[1024];
  victim_path(victim, sizeof victim, "victim_accuracy");
  char *plain_argv[] = {victim, "3000", "100", NULL};
  run(&plain, plain_argv, NULL, NULL, NULL);
  struct {
    char *wrapper[3];
    unsigned execs;
  } cases[] = {
      {{"/usr/bin/env", NULL}, 1},
      {{script, NULL}, 1},
      {{"/usr/bin/env", script, NULL}, 2},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char trace[256];
    trace_path(trace, sizeof trace, "wrapped");
    char *argv[16];
    int n = 0;
    argv[n++] = CTS_TEST_CTFSCOPE;
    argv[n++] = "record";
    argv[n++] = "-o";
    argv[n++] = trace;
    argv[n++] = "--rate";
    argv[n++] = "1";
    argv[n++] = "--";
    for (int k = 0; cases[c].wrapper[k]; k++) argv[n++] = cases[c].wrapper[k];
    argv[n++] = victim;
    argv[n++] = "3000";
    argv[n++] = "100";
    argv[n] = NULL;
    run(&traced, argv, NULL, NULL, NULL);
    CTS_ASSERT_EQ_INT(traced.status, plain.status);
    CTS_ASSERT_STR_EQ(traced.out, plain.out);
    /* Every image left a valid trace; the last one is the program's. */
    for (unsigned i = 0; i <= cases[c].execs; i++) {
      char file[300];
      if (i == 0)
        snprintf(file, sizeof file, "%s", trace);
      else
        exec_file(file, sizeof file, trace, i);
      CTS_ASSERT_MSG(strstr(traced.err, file), "case %zu: %s not reported:\n%s", c, file,
                     traced.err);
      decoded_t d;
      CHECK_TRACE(d, file);
      if (i == cases[c].execs) {
        CTS_ASSERT(strstr(d.executable, "victim_accuracy") != NULL);
        CTS_ASSERT_EQ_U64(d.nallocs, 3001);
      }
      decoded_fini(&d);
      unlink(file);
    }
    char after[300];
    exec_file(after, sizeof after, trace, cases[c].execs + 1);
    CTS_ASSERT(access(after, F_OK) != 0);
  }
  unlink(script);
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

/* Sampled blocks have a header: sizes, contents and libc's own reallocs are unaffected,
 * at rate 1 (every block sampled) and at a low rate (almost none). */
CTS_TEST(sampled_block_headers) {
  char trace[256];
  trace_path(trace, sizeof trace, "headers");
  const char *const rates[] = {"1", "0.0001"};
  for (size_t i = 0; i < 2; i++) {
    CTS_ASSERT(run_both("victim_headers", NULL, NULL, rates[i], trace, NULL));
    CTS_ASSERT_EQ_INT(traced.status, 0);
    CTS_ASSERT(strstr(traced.out, "bad=0") != NULL);
    decoded_t d;
    CHECK_TRACE(d, trace);
    if (i == 0) CTS_ASSERT_MSG(d.nallocs > 1500 && d.ncollects > 1500, "%zu allocs", d.nallocs);
    decoded_fini(&d);
  }
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

CTS_TEST(cxx_new_delete_vector) {
  char trace[256];
  trace_path(trace, sizeof trace, "cxx");
  CTS_ASSERT(run_both("victim_cxx", NULL, NULL, "1", trace, NULL));
  CTS_ASSERT(strncmp(traced.out, "checksum=", 9) == 0);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(count_length(&d, 44448), 21); /* new Big, 20 times, and make_unique */
  CTS_ASSERT_EQ_U64(count_length(&d, 13332), 20); /* new int[3333] */
  CTS_ASSERT_EQ_U64(count_length(&d, 7008), 20);  /* new WithDestructor[7], with its cookie */
  for (uint64_t k = 1; k <= 128; k *= 2)          /* vector growth: 1, 2, 4... 128 records */
    CTS_ASSERT_MSG(count_length(&d, 1200 * k) == 10, "%llu records: %zu", (unsigned long long)k,
                   count_length(&d, 1200 * k));
  size_t named = 0;
  for (size_t i = 0; i < d.nallocs; i++) {
    const char *f = decoded_function(&d, d.allocs[i].innermost);
    named += f && f[0];
  }
#ifdef CTS_TEST_HAVE_LIBDW
  CTS_ASSERT(named > 0);
#endif
  CTS_ASSERT(d.ncollects >= 20 * 3 + 1 + 10 * 8); /* everything the program freed */
  decoded_fini(&d);
  unlink(trace);
}

/* ---- real programs: same output as untraced, a valid trace with named frames --------- */

/* The real executable behind a command name (a pyenv shim is a script: it would be the
 * shell's trace), or false if the command is not installed. */
static bool find_program(const char *query, char *out, size_t size) {
  FILE *p = popen(query, "r");
  char line[4096] = "";
  const bool got = p && fgets(line, sizeof line, p) != NULL;
  if (p) pclose(p);
  line[strcspn(line, "\n")] = '\0';
  char resolved[PATH_MAX];
  if (!got || !line[0] || !realpath(line, resolved) || access(resolved, X_OK) != 0) return false;
  snprintf(out, size, "%s", resolved);
  return true;
}

/* Runs argv with stdout into out_path (stderr captured in r->err), traced into trace when
 * it is not NULL. */
static int run_to_file(run_result_t *r, char *const argv[], const char *out_path, const char *trace,
                       const char *rate) {
  int err[2];
  if (pipe(err) != 0) abort();
  fflush(NULL);
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0) _exit(126);
    dup2(out, 1);
    dup2(err[1], 2);
    close(err[0]), close(err[1]);
    unsetenv("LD_PRELOAD");
    unsetenv("MEMTRACE");
    if (trace) {
      setenv("LD_PRELOAD", CTS_TEST_PRELOAD, 1);
      setenv("MEMTRACE", trace, 1);
      setenv("MEMTRACE_RATE", rate, 1);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  close(err[1]);
  read_all(err[0], r->err, sizeof r->err, &r->err_len);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r->status;
}

static bool same_files(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  static char ba[1 << 16], bb[1 << 16];
  while (same) {
    const size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
    same = na == nb && memcmp(ba, bb, na) == 0;
    if (na == 0) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* Runs a real program untraced and traced, each with stdout into a file; checks exit code
 * and output are the same, and that the trace is valid with named frames. */
static void check_real_program(const char *name, char *const argv[], const char *rate,
                               size_t min_allocs) {
  char out_plain[256], out_traced[256], trace[256];
  snprintf(out_plain, sizeof out_plain, "/tmp/cts_preload_%s_%d.plain", name, (int)getpid());
  snprintf(out_traced, sizeof out_traced, "/tmp/cts_preload_%s_%d.traced", name, (int)getpid());
  trace_path(trace, sizeof trace, name);
  run_to_file(&plain, argv, out_plain, NULL, NULL);
  run_to_file(&traced, argv, out_traced, trace, rate);
  CTS_ASSERT_MSG(traced.status == plain.status, "%s: exit %d untraced, %d traced; stderr: %s", name,
                 plain.status, traced.status, traced.err);
  CTS_ASSERT_MSG(same_files(out_plain, out_traced), "%s: the outputs differ", name);
  struct stat st;
  CTS_ASSERT(stat(out_plain, &st) == 0 && st.st_size > 0);
  decoded_t d;
  CHECK_TRACE(d, trace);
  size_t named = 0;
  for (size_t i = 0; i < d.nallocs; i++) {
    const char *f = decoded_function(&d, d.allocs[i].innermost);
    named += f && f[0];
  }
  fprintf(stderr,
          "  %s: exit %d, %lld bytes of output, %zu sampled allocations (%zu at named "
          "sites), %zu frees\n",
          name, plain.status, (long long)st.st_size, d.nallocs, named, d.ncollects);
  CTS_ASSERT_MSG(d.nallocs >= min_allocs, "%zu sampled allocations", d.nallocs);
#ifdef CTS_TEST_HAVE_LIBDW
  CTS_ASSERT(named > 0);
#endif
  decoded_fini(&d);
  unlink(out_plain);
  unlink(out_traced);
  unlink(trace);
}

CTS_TEST(real_python) {
  char python[PATH_MAX];
  if (!find_program("python3 -c 'import sys; print(sys.executable)' 2>/dev/null", python,
                    sizeof python))
    CTS_SKIP("python3 is not installed");
  char *argv[] = {python, "-c",
                  "import json, collections\n"
                  "d = {str(i): list(range(i % 50)) for i in range(20000)}\n"
                  "c = collections.Counter(len(v) for v in d.values())\n"
                  "print(sum(len(v) for v in d.values()), sorted(d)[:3])\n"
                  "print(json.dumps(sorted(c.items())[:5]))\n",
                  NULL};
  check_real_program("python", argv, "1e-3", 100);
}

CTS_TEST(real_sqlite3) {
  char sqlite[PATH_MAX];
  if (!find_program("command -v sqlite3", sqlite, sizeof sqlite))
    CTS_SKIP("sqlite3 is not installed (apt-get install sqlite3)");
  char sql[256];
  snprintf(sql, sizeof sql, "/tmp/cts_preload_sqlite_%d.sql", (int)getpid());
  FILE *f = fopen(sql, "w");
  CTS_ASSERT(f != NULL);
  fputs("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL);\nBEGIN;\n", f);
  for (int i = 0; i < 5000; i++)
    fprintf(f, "INSERT INTO t(name, value) VALUES('name-%d-%x', %d.%d);\n", i, i * 2654435761u, i,
            i % 7);
  fputs(
      "COMMIT;\nCREATE INDEX t_name ON t(name);\n"
      "SELECT count(*), sum(value), max(length(name)) FROM t;\n"
      "SELECT name FROM t WHERE id % 1000 = 0 ORDER BY name;\n",
      f);
  fclose(f);
  char read_cmd[300];
  snprintf(read_cmd, sizeof read_cmd, ".read %s", sql);
  char *argv[] = {sqlite, ":memory:", read_cmd, NULL};
  check_real_program("sqlite3", argv, "1e-3", 20);
  unlink(sql);
}

CTS_TEST(real_sort_of_50_mb) {
  char input[256];
  snprintf(input, sizeof input, "/tmp/cts_preload_sort_%d.txt", (int)getpid());
  FILE *f = fopen(input, "w");
  CTS_ASSERT(f != NULL);
  uint64_t x = 12345;
  size_t bytes = 0;
  while (bytes < 50u * 1000 * 1000) {
    char line[64];
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int n = snprintf(line, sizeof line, "%016llx %llu\n", (unsigned long long)x,
                           (unsigned long long)(x >> 40) % 100000);
    fwrite(line, 1, (size_t)n, f);
    bytes += (size_t)n;
  }
  CTS_ASSERT(fclose(f) == 0);
  char *argv[] = {"/usr/bin/sort", input, NULL};
  check_real_program("sort", argv, "1", 100);
  unlink(input);
}

CTS_TEST(real_gcc_compile) {
  char gcc[PATH_MAX];
  if (!find_program("command -v gcc", gcc, sizeof gcc)) CTS_SKIP("gcc is not installed");
  char src[256], obj_plain[256], obj_traced[256];
  snprintf(src, sizeof src, "/tmp/cts_preload_gcc_%d.c", (int)getpid());
  snprintf(obj_plain, sizeof obj_plain, "/tmp/cts_preload_gcc_%d_plain.o", (int)getpid());
  snprintf(obj_traced, sizeof obj_traced, "/tmp/cts_preload_gcc_%d_traced.o", (int)getpid());
  FILE *f = fopen(src, "w");
  CTS_ASSERT(f != NULL);
  fputs(
      "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
      "struct node { struct node *next; char name[32]; };\n"
      "int count(const struct node *n) { int k = 0; for (; n; n = n->next) k++; return k; }\n"
      "int main(int argc, char **argv) {\n"
      "  struct node *head = NULL;\n"
      "  for (int i = 0; i < argc * 100; i++) {\n"
      "    struct node *n = malloc(sizeof *n);\n"
      "    snprintf(n->name, sizeof n->name, \"%d\", i);\n"
      "    n->next = head; head = n;\n"
      "  }\n"
      "  printf(\"%d %s\\n\", count(head), argv[0]);\n"
      "  return strlen(head->name) > 3;\n"
      "}\n",
      f);
  fclose(f);
  /* The driver is traced; cc1 and as, its forked children, are not. -v: some output. */
  char *plain_argv[] = {gcc, "-O2", "-c", src, "-o", obj_plain, NULL};
  char *traced_argv[] = {gcc, "-O2", "-c", src, "-o", obj_traced, NULL};
  char out_plain[256], out_traced[256], trace[256];
  snprintf(out_plain, sizeof out_plain, "/tmp/cts_preload_gcc_%d.plain", (int)getpid());
  snprintf(out_traced, sizeof out_traced, "/tmp/cts_preload_gcc_%d.traced", (int)getpid());
  trace_path(trace, sizeof trace, "gcc");
  run_to_file(&plain, plain_argv, out_plain, NULL, NULL);
  run_to_file(&traced, traced_argv, out_traced, trace, "1e-2");
  CTS_ASSERT_EQ_INT(plain.status, 0);
  CTS_ASSERT_MSG(traced.status == 0, "traced gcc: exit %d: %s", traced.status, traced.err);
  CTS_ASSERT(same_files(out_plain, out_traced));
  CTS_ASSERT_MSG(same_files(obj_plain, obj_traced), "the object files differ");
  decoded_t d;
  CHECK_TRACE(d, trace);
  size_t named = 0;
  for (size_t i = 0; i < d.nallocs; i++) {
    const char *fn = decoded_function(&d, d.allocs[i].innermost);
    named += fn && fn[0];
  }
  fprintf(stderr, "  gcc driver: %zu sampled allocations (%zu at named sites)\n", d.nallocs, named);
  CTS_ASSERT(d.nallocs >= 5);
#ifdef CTS_TEST_HAVE_LIBDW
  CTS_ASSERT(named > 0);
#endif
  decoded_fini(&d);
  unlink(src), unlink(obj_plain), unlink(obj_traced), unlink(out_plain), unlink(out_traced);
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

CTS_TEST(bad_writer_setting_is_refused) {
  char path[1024];
  victim_path(path, sizeof path, "victim_realloc");
  char *argv[] = {path, NULL};
  run(&plain, argv, NULL, NULL, NULL);
  run(&traced, argv, "/tmp/cts_never.ctf", "1", "CTFSCOPE_WRITER=fork");
  CTS_ASSERT_EQ_INT(traced.status, plain.status);
  CTS_ASSERT_STR_EQ(traced.out, plain.out);
  CTS_ASSERT_STR_EQ(traced.err,
                    "ctfscope-preload: CTFSCOPE_WRITER=\"fork\": expected process or thread; "
                    "this program is not traced\n");
  CTS_ASSERT(access("/tmp/cts_never.ctf", F_OK) != 0);
}

/* The environment of compression and of the stall bound: bad values, and compression
 * asked of a TCP stream, leave the program untraced with one line. */
CTS_TEST(bad_compress_and_stall_settings_are_refused) {
  char path[1024];
  victim_path(path, sizeof path, "victim_realloc");
  char *argv[] = {path, NULL};
  run(&plain, argv, NULL, NULL, NULL);
  static const struct {
    const char *trace, *extra, *expect;
  } cases[] = {
      {"/tmp/cts_never.ctf", "CTFSCOPE_COMPRESS=lz4",
       "ctfscope-preload: CTFSCOPE_COMPRESS=\"lz4\": expected zstd, zstd:LEVEL (1-19) or none; "
       "this program is not traced\n"},
      {"/tmp/cts_never.ctf", "CTFSCOPE_COMPRESS=zstd:20",
       "ctfscope-preload: CTFSCOPE_COMPRESS=\"zstd:20\": expected zstd, zstd:LEVEL (1-19) or "
       "none; this program is not traced\n"},
      {"/tmp/cts_never.ctf", "CTFSCOPE_STALL_TIMEOUT=-1",
       "ctfscope-preload: CTFSCOPE_STALL_TIMEOUT=\"-1\": expected seconds, 0 to 86400 (0: for "
       "ever); this program is not traced\n"},
      {"tcp://127.0.0.1:9", "CTFSCOPE_COMPRESS=zstd",
       "ctfscope-preload: CTFSCOPE_COMPRESS=\"zstd\": compression is for file traces: tcp:// "
       "and listen:// stream plain memtrace; this program is not traced\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    run(&traced, argv, cases[i].trace, "1", cases[i].extra);
    CTS_ASSERT_EQ_INT(traced.status, plain.status);
    CTS_ASSERT_STR_EQ(traced.out, plain.out);
    CTS_ASSERT_STR_EQ(traced.err, cases[i].expect);
    CTS_ASSERT(access("/tmp/cts_never.ctf", F_OK) != 0);
  }
}

CTS_TEST(unwritable_file_is_refused) {
  check_refused("/nonexistent-dir/x.ctf", "1", "cannot trace into this file");
}

/* 1234567 -> "1 234 567", as ctfscope prints counts. */
static void group_digits(uint64_t v, char *out, size_t size) {
  char digits[32];
  const int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
  size_t k = 0;
  for (int i = 0; i < n && k + 2 < size; i++) {
    if (i > 0 && (n - i) % 3 == 0) out[k++] = ' ';
    out[k++] = digits[i];
  }
  out[k] = '\0';
}

/* ---- TCP transport (real sockets on 127.0.0.1) -------------------------------------------- */

/* A collector: `ctfscope collect --listen 127.0.0.1:0 --dir DIR`, and its port. */
static bool start_collector(driven_t *c, const char *dir, uint16_t *port) {
  char *argv[] = {CTS_TEST_CTFSCOPE, "collect",   "--listen", "127.0.0.1:0",
                  "--dir",           (char *)dir, NULL};
  if (!drv_start(c, argv, NULL) || !drv_wait_err(c, "listening on 127.0.0.1:", 10000)) return false;
  *port = (uint16_t)atoi(strstr(c->err_buf, "listening on 127.0.0.1:") + 23);
  return *port != 0;
}

/* The first file in dir whose name starts with prefix. */
static bool find_in_dir(const char *dir, const char *prefix, char *path, size_t size) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls %s | grep '^%s' | head -1", dir, prefix);
  FILE *ls = popen(cmd, "r");
  char name[256] = "";
  const bool found = ls && fgets(name, sizeof name, ls) && name[0];
  if (ls) pclose(ls);
  name[strcspn(name, "\n")] = '\0';
  snprintf(path, size, "%s/%s", dir, name);
  return found;
}

static void remove_dir(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "  cannot remove %s\n", dir);
}

CTS_TEST(tcp_client_mode_streams_to_collect) {
  char dir[] = "/tmp/cts_preload_collect_XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  driven_t col;
  uint16_t port = 0;
  CTS_ASSERT_MSG(start_collector(&col, dir, &port), "collector: %s", col.err_buf);
  char victim[1024], spec[64];
  victim_path(victim, sizeof victim, "victim_accuracy");
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  char *plain_argv[] = {victim, "20000", "2048", NULL};
  run(&plain, plain_argv, NULL, NULL, NULL);
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "--connect", spec, "--rate", "1", "--", victim,
                  "20000",           "2048",   NULL};
  run(&traced, argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, plain.status);
  CTS_ASSERT_STR_EQ(traced.out, plain.out);
  CTS_ASSERT_MSG(traced.err_len == 0, "stderr: %s", traced.err);
  CTS_ASSERT_MSG(drv_wait_err(&col, "closed by peer: saved", 20000), "collector: %s", col.err_buf);
  kill(col.pid, SIGINT);
  CTS_ASSERT_EQ_INT(drv_finish(&col, 20000), 0);
  char trace[1024];
  CTS_ASSERT(find_in_dir(dir, "victim_accuracy.", trace, sizeof trace));
  unsigned long long allocs, frees, words;
  CTS_ASSERT(sscanf(plain.out, "allocs=%llu frees=%llu words=%llu", &allocs, &frees, &words) == 3);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(d.nallocs, allocs);
  CTS_ASSERT_EQ_U64(d.ncollects, frees);
  decoded_fini(&d);
  remove_dir(dir);
}

CTS_TEST(tcp_unreachable_collector_warns_once_and_runs_untraced) {
  uint16_t port;
  const int lfd = drv_listen(&port, 0);
  CTS_ASSERT(lfd >= 0);
  close(lfd); /* nobody listens there now */
  char url[64];
  snprintf(url, sizeof url, "tcp://127.0.0.1:%u", port);
  check_refused(url, "1", "cannot connect: Connection refused");
  check_refused("tcp://host.invalid:4242", "1", "cannot resolve 'host.invalid'");
  check_refused("tcp://127.0.0.1", "1", "expected HOST:PORT");
  check_refused("listen://notaport", "1", "the port must be a number");
  char victim[1024];
  victim_path(victim, sizeof victim, "victim_realloc");
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "--connect", url + 6, "--", victim, NULL};
  run(&traced, argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, plain.status);
  CTS_ASSERT_STR_EQ(traced.out, plain.out);
  CTS_ASSERT_MSG(strstr(traced.err, "cannot connect") && strchr(traced.err, '\n')[1] == '\0',
                 "stderr: %s", traced.err);
}

/* Service mode, through `ctfscope record --listen` and `ctfscope fetch`. The victim is
 * driven line by line (victim_service.c). */
static bool command(driven_t *v, const char *cmd, const char *expect) {
  char reply[256];
  drv_command(v, cmd, reply, sizeof reply, 60000);
  if (strcmp(reply, expect) == 0) return true;
  fprintf(stderr, "  %s: got '%s', expected '%s'; victim stderr:\n%s\n", cmd, reply, expect,
          v->err_buf);
  return false;
}

/* Waits until process pid catches SIGINT (its handler is installed: ctfscope fetch sets it
 * up after connecting, and a SIGINT before that would kill it). */
static bool wait_catches_sigint(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  for (int i = 0; i < 1000; i++) {
    FILE *f = fopen(path, "r");
    unsigned long long caught = 0;
    while (f && fgets(line, sizeof line, f))
      if (strncmp(line, "SigCgt:", 7) == 0) caught = strtoull(line + 7, NULL, 16);
    if (f) fclose(f);
    if (caught & (1ull << (SIGINT - 1))) return true;
    drv_sleep_ms(10);
  }
  return false;
}

static bool start_fetch(driven_t *f, uint16_t port, const char *output) {
  char spec[64];
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  char *argv[] = {CTS_TEST_CTFSCOPE, "fetch", "-o", (char *)output, spec, NULL};
  return drv_start(f, argv, NULL);
}

CTS_TEST(tcp_service_mode_serves_fetch_one_client_at_a_time) {
  char dir[] = "/tmp/cts_preload_fetch_XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  char victim[1024], one[1100], three[1100];
  victim_path(victim, sizeof victim, "victim_service");
  snprintf(one, sizeof one, "%s/one.ctf", dir);
  snprintf(three, sizeof three, "%s/three.ctf", dir);
  char *argv[] = {
      CTS_TEST_CTFSCOPE, "record", "--listen", "127.0.0.1:0", "--rate", "1", "--", victim, NULL};
  driven_t v;
  CTS_ASSERT(drv_start(&v, argv, NULL));
  CTS_ASSERT_MSG(drv_wait_err(&v, "serving the trace on port ", 10000), "%s", v.err_buf);
  const uint16_t port = (uint16_t)atoi(strstr(v.err_buf, "on port ") + 8);
  CTS_ASSERT(port != 0);
  CTS_ASSERT(command(&v, "alloc 10 99999", "done 10")); /* no client yet: not traced */

  /* The first client gets a trace of what happens while it is connected. */
  driven_t f1;
  CTS_ASSERT(start_fetch(&f1, port, one));
  CTS_ASSERT(command(&v, "wait-client 1", "ok"));
  CTS_ASSERT(command(&v, "alloc 100 11111", "done 100"));
  /* A second client meanwhile is closed at once, with a log line. */
  const int second = drv_connect(port);
  CTS_ASSERT(second >= 0);
  drv_bytes_t nothing = {0};
  CTS_ASSERT_EQ_INT((int)drv_read_some(second, &nothing, 4096, 10000), 0);
  close(second);
  CTS_ASSERT_MSG(drv_wait_err(&v, "refused a client from 127.0.0.1:", 10000), "%s", v.err_buf);
  /* Ctrl-C: fetch half-closes, the program ends the trace, fetch saves it. */
  CTS_ASSERT(wait_catches_sigint(f1.pid));
  kill(f1.pid, SIGINT);
  CTS_ASSERT_EQ_INT(drv_finish(&f1, 20000), 0);
  CTS_ASSERT(command(&v, "wait-idle", "ok"));

  /* A client that goes away mid-trace: the program runs on, what it got is valid. */
  const int mid = drv_connect(port);
  CTS_ASSERT(mid >= 0);
  CTS_ASSERT(command(&v, "wait-client 2", "ok"));
  char reply[256];
  CTS_ASSERT(write(v.in, "alloc 20000 3000\n", 17) == 17);
  drv_bytes_t partial = {0};
  while (partial.len < 256 * 1024 && drv_read_some(mid, &partial, 65536, 20000) > 0) {}
  close(mid); /* unread data: a reset */
  CTS_ASSERT(drv_line(&v, reply, sizeof reply, 60000));
  CTS_ASSERT_STR_EQ(reply, "done 20000");
  CTS_ASSERT(command(&v, "wait-idle", "ok"));
  CTS_ASSERT(command(&v, "alloc 10 33333", "done 10"));

  /* A later client: a fresh trace. */
  driven_t f3;
  CTS_ASSERT(start_fetch(&f3, port, three));
  CTS_ASSERT(command(&v, "wait-client 3", "ok"));
  CTS_ASSERT(command(&v, "alloc 5 44444", "done 5"));
  CTS_ASSERT(wait_catches_sigint(f3.pid));
  kill(f3.pid, SIGINT);
  CTS_ASSERT_EQ_INT(drv_finish(&f3, 20000), 0);
  CTS_ASSERT(command(&v, "quit", "allocs=20125 frees=20125"));
  CTS_ASSERT_EQ_INT(drv_finish(&v, 20000), 0);

  decoded_t d;
  CHECK_TRACE(d, one);
  CTS_ASSERT_EQ_U64(d.nallocs, 100);
  CTS_ASSERT_EQ_U64(count_length(&d, 11111), 100);
  CTS_ASSERT_EQ_U64(d.ncollects, 100);
  decoded_fini(&d);
  const size_t whole = drv_whole_packets(&partial);
  fprintf(stderr, "  mid-trace client: %zu bytes received, %zu in whole packets\n", partial.len,
          whole);
  decoded_from_memory(&d, partial.data, whole);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT(d.nallocs > 0 && d.nallocs == count_length(&d, 3000));
  decoded_fini(&d);
  CHECK_TRACE(d, three);
  CTS_ASSERT_EQ_U64(d.nallocs, 5);
  CTS_ASSERT_EQ_U64(count_length(&d, 44444), 5);
  CTS_ASSERT_EQ_U64(d.allocs[0].id, 0);
  decoded_fini(&d);
  free(nothing.data);
  free(partial.data);
  remove_dir(dir);
}

/* A reader far slower than the program: lossless mode slows the program down instead of
 * losing anything. */
CTS_TEST(tcp_lossless_with_a_slow_reader) {
  uint16_t port;
  const int lfd = drv_listen(&port, 4096);
  CTS_ASSERT(lfd >= 0);
  char victim[1024], url[64];
  victim_path(victim, sizeof victim, "victim_accuracy");
  snprintf(url, sizeof url, "MEMTRACE=tcp://127.0.0.1:%u", port);
  char *argv[] = {victim, "300000", "4096", NULL};
  run(&plain, argv, NULL, NULL, NULL);
  char preload[1100];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", CTS_TEST_PRELOAD);
  const char *env[] = {preload, url, "MEMTRACE_RATE=1", NULL};
  driven_t v;
  CTS_ASSERT(drv_start(&v, argv, env));
  const int fd = drv_accept(lfd, 10000);
  CTS_ASSERT(fd >= 0);
  drv_bytes_t trace = {0};
  const int64_t start = drv_now_ms();
  for (;;) { /* about 8 KiB every 2 ms at most */
    const ssize_t n = drv_read_some(fd, &trace, 8192, 30000);
    if (n <= 0) break;
    drv_sleep_ms(2);
  }
  fprintf(stderr, "  %zu bytes read in %.1f s\n", trace.len, (double)(drv_now_ms() - start) / 1e3);
  close(fd);
  close(lfd);
  CTS_ASSERT_EQ_INT(drv_finish(&v, 20000), plain.status);
  CTS_ASSERT_STR_EQ(v.out_buf, plain.out);
  unsigned long long allocs, frees, words;
  CTS_ASSERT(sscanf(plain.out, "allocs=%llu frees=%llu words=%llu", &allocs, &frees, &words) == 3);
  decoded_t d;
  decoded_from_memory(&d, trace.data, trace.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.truncated_packets, 0);
  CTS_ASSERT_EQ_U64(d.nallocs, allocs);
  CTS_ASSERT_EQ_U64(d.ncollects, frees);
  decoded_fini(&d);
  free(trace.data);
}

/* Lossless mode with a peer that never reads (issue 17): the program waits for it at most
 * the stall timeout, then runs on untraced with one message. Before the bound, the alloc
 * command below never finished. */
static void allocate_past_the_stall(driven_t *v, bool service) {
  const int64_t start = drv_now_ms();
  char reply[256];
  CTS_ASSERT(write(v->in, "alloc 1000000 64\n", 17) == 17);
  CTS_ASSERT_MSG(drv_line(v, reply, sizeof reply, 30000), "stderr: %s", v->err_buf);
  CTS_ASSERT_STR_EQ(reply, "done 1000000");
  fprintf(stderr, "  the program went on after %.1f s\n", (double)(drv_now_ms() - start) / 1e3);
  /* The service let the client go: the next one could have a trace. */
  if (service) CTS_ASSERT(command(v, "wait-idle", "ok"));
  CTS_ASSERT(command(v, "quit", "allocs=1000000 frees=1000000"));
  CTS_ASSERT_EQ_INT(drv_finish(v, 20000), 0);
  const char *const msg = "the trace reader took nothing for 1.000 s: tracing stopped";
  const char *const first = strstr(v->err_buf, msg);
  CTS_ASSERT_MSG(first != NULL, "stderr: %s", v->err_buf);
  CTS_ASSERT_MSG(strstr(first + 1, msg) == NULL, "said twice: %s", v->err_buf);
}

CTS_TEST(tcp_connect_to_a_collector_that_never_reads_is_bounded) {
  uint16_t port;
  const int lfd = drv_listen(&port, 4096);
  CTS_ASSERT(lfd >= 0);
  char victim[1024], spec[64];
  victim_path(victim, sizeof victim, "victim_service");
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  char *argv[] = {CTS_TEST_CTFSCOPE,
                  "record",
                  "--connect",
                  spec,
                  "--stall-timeout=1",
                  "-r1",
                  "--",
                  victim,
                  NULL};
  driven_t v;
  CTS_ASSERT(drv_start(&v, argv, NULL));
  const int fd = drv_accept(lfd, 10000); /* accepted, never read */
  CTS_ASSERT(fd >= 0);
  allocate_past_the_stall(&v, false);
  close(fd);
  close(lfd);
}

CTS_TEST(tcp_listen_to_a_client_that_never_reads_is_bounded) {
  char victim[1024];
  victim_path(victim, sizeof victim, "victim_service");
  char *argv[] = {CTS_TEST_CTFSCOPE,
                  "record",
                  "--listen=127.0.0.1:0",
                  "--stall-timeout=1",
                  "-r1",
                  "--",
                  victim,
                  NULL};
  driven_t v;
  CTS_ASSERT(drv_start(&v, argv, NULL));
  CTS_ASSERT_MSG(drv_wait_err(&v, "serving the trace on port ", 10000), "%s", v.err_buf);
  const uint16_t port = (uint16_t)atoi(strstr(v.err_buf, "on port ") + 8);
  const int fd = drv_connect(port); /* connected, never read */
  CTS_ASSERT(fd >= 0);
  CTS_ASSERT(command(&v, "wait-client 1", "ok"));
  allocate_past_the_stall(&v, true);
  close(fd);
}

/* Drop mode with a reader that reads nothing at all while the program allocates: the
 * program never waits, and the trace says how much was lost. */
CTS_TEST(tcp_drop_mode_never_blocks_and_records_the_loss) {
  uint16_t port;
  const int lfd = drv_listen(&port, 4096);
  CTS_ASSERT(lfd >= 0);
  char victim[1024], spec[64];
  victim_path(victim, sizeof victim, "victim_service");
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "--connect", spec,   "--drop",
                  "--rate",          "1",      "--",        victim, NULL};
  driven_t v;
  CTS_ASSERT(drv_start(&v, argv, NULL));
  const int fd = drv_accept(lfd, 10000);
  CTS_ASSERT(fd >= 0);
  /* Nothing is read until the program has done all its work. */
  CTS_ASSERT(command(&v, "alloc 1000000 64", "done 1000000"));
  CTS_ASSERT(write(v.in, "quit\n", 5) == 5);
  drv_bytes_t trace = {0};
  while (drv_read_some(fd, &trace, 65536, 30000) > 0) {}
  close(fd);
  close(lfd);
  CTS_ASSERT_EQ_INT(drv_finish(&v, 20000), 0);
  CTS_ASSERT_STR_EQ(v.out_buf, "done 1000000\nallocs=1000000 frees=1000000\n");
  decoded_t d;
  decoded_from_memory(&d, trace.data, trace.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.truncated_packets, 0);
  uint64_t markers = 0, lost = 0, recorded = 0;
  for (size_t i = 0; i < d.nallocs; i++) {
    const decoded_alloc_t *a = &d.allocs[i];
    if (a->depth == 1 && a->innermost >> 61 == 1) {
      markers++;
      lost += CTS_TRACER_LOST_ALLOCS_OF(a->innermost);
      const char *name = decoded_function(&d, a->innermost);
      CTS_ASSERT(name && strstr(name, CTS_TRACER_LOST_NAME_PREFIX) == name);
    } else if (a->length == 8) {
      recorded++;
    }
  }
  fprintf(stderr, "  %" PRIu64 " recorded, %" PRIu64 " lost in %" PRIu64 " markers\n", recorded,
          lost, markers);
  CTS_ASSERT(markers >= 1 && lost > 0);
  CTS_ASSERT_EQ_U64(recorded + lost, 1000000);
  decoded_fini(&d);
  /* ctfscope info adds the markers up. */
  char path[256];
  trace_path(path, sizeof path, "drop");
  FILE *out = fopen(path, "wb");
  CTS_ASSERT(out && fwrite(trace.data, 1, trace.len, out) == trace.len);
  fclose(out);
  char *info[] = {CTS_TEST_CTFSCOPE, "info", path, NULL};
  run(&traced, info, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 0);
  char expect[128];
  char grouped[64];
  group_digits(lost, grouped, sizeof grouped);
  snprintf(expect, sizeof expect, "Lost (drop)    %s sampled allocations", grouped);
  CTS_ASSERT_MSG(strstr(traced.out, expect), "info:\n%s", traced.out);
  unlink(path);
  free(trace.data);
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

/* The first 4 bytes of the file at `path`, as a 32-bit little-endian word; 0 if none. */
static uint32_t file_magic(const char *path) {
  unsigned char m[4] = {0};
  FILE *const f = fopen(path, "rb");
  const bool ok = f && fread(m, 1, 4, f) == 4;
  if (f) fclose(f);
  return ok ? (uint32_t)m[0] | (uint32_t)m[1] << 8 | (uint32_t)m[2] << 16 | (uint32_t)m[3] << 24
            : 0;
}

#define CTF_MAGIC  0xC1FC1FC1u /* memtrace's packet magic: what OCaml's reader reads */
#define ZSTD_MAGIC 0xFD2FB528u

/* --compress: each image of a program that execs writes a zstd file named *.ctf.zst (the
 * exec'd image's too), which the summary and every reader read; without it the trace is
 * plain memtrace, as OCaml's reader wants. */
CTS_TEST(record_compress_writes_zstd_and_plain_stays_the_default) {
  char dir[] = "/tmp/cts_record_zst_XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  char victim[1024], first[1100], second[1100];
  victim_path(victim, sizeof victim, "victim_exec");
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "--compress", "-r", "1", "--", victim, NULL};
  run_in(&traced, argv, NULL, NULL, NULL, dir);
  CTS_ASSERT_EQ_INT(traced.status, 7);
  CTS_ASSERT_MSG(strstr(traced.err, ".ctf.zst (") && strstr(traced.err, ".exec1.ctf.zst ("),
                 "stderr: %s", traced.err);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cd %s && ls ctfscope.victim_exec.*.ctf.zst | grep -v exec1", dir);
  FILE *ls = popen(cmd, "r");
  char name[256] = "";
  CTS_ASSERT(ls && fscanf(ls, "%255s", name) == 1);
  pclose(ls);
  snprintf(first, sizeof first, "%s/%s", dir, name);
  CTS_ASSERT(cts__exec_trace_name(second, sizeof second, first, 1));
  CTS_ASSERT_EQ_U64(file_magic(first), ZSTD_MAGIC);
  CTS_ASSERT_EQ_U64(file_magic(second), ZSTD_MAGIC);
  decoded_t d;
  CHECK_TRACE(d, first);
  CTS_ASSERT_EQ_U64(count_length(&d, 55555), 11); /* 10 freed, 1 kept over the exec */
  decoded_fini(&d);
  CHECK_TRACE(d, second);
  CTS_ASSERT_EQ_U64(count_length(&d, 66666), 10);
  decoded_fini(&d);
  /* A writer thread ends with the exec: the flush before it ended the frame, so the first
   * image's file is complete (no "tail was lost"). */
  char out_arg[1200];
  snprintf(out_arg, sizeof out_arg, "-o%s/thread.ctf.zst", dir);
  char *thread_argv[] = {"/usr/bin/env",
                         "CTFSCOPE_WRITER=thread",
                         CTS_TEST_CTFSCOPE,
                         "record",
                         "-q",
                         "-z",
                         "-r1",
                         out_arg,
                         "--",
                         victim,
                         NULL};
  run(&traced, thread_argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 7);
  CHECK_TRACE(d, out_arg + 2);
  CTS_ASSERT_EQ_U64(count_length(&d, 55555), 11);
  CTS_ASSERT_MSG(d.warnings == 0, "%s", d.warning);
  decoded_fini(&d);
  /* The level is checked, and TCP streams stay plain. */
  char *bad_level[] = {CTS_TEST_CTFSCOPE, "record", "--compress=20", "true", NULL};
  run(&traced, bad_level, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 2);
  char *tcp[] = {CTS_TEST_CTFSCOPE, "record", "-z", "--connect", "127.0.0.1:9", "true", NULL};
  run(&traced, tcp, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 2);
  CTS_ASSERT_MSG(strstr(traced.err, "--compress is for trace files"), "%s", traced.err);
  /* Plain by default. */
  char plain_trace[1100];
  snprintf(plain_trace, sizeof plain_trace, "%s/plain.ctf", dir);
  char *plain_argv[] = {CTS_TEST_CTFSCOPE, "record", "-q", "-o", plain_trace, "--", victim, NULL};
  run(&traced, plain_argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 7);
  CTS_ASSERT_EQ_U64(file_magic(plain_trace), CTF_MAGIC);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CTS_ASSERT(system(cmd) == 0);
}

/* Issue 16: the trace's duration covers the whole run, not only up to its last sampled
 * event (here: a sleep after the last allocation). */
CTS_TEST(record_duration_covers_a_sleep_after_the_last_allocation) {
  char trace[256];
  trace_path(trace, sizeof trace, "sleeper");
  unlink(trace);
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "-q", "-o", trace, "-r", "1", "--",
                  "/bin/sleep",      "0.6",    NULL};
  run(&traced, argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 0);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s stats %s", CTS_TEST_CTFSCOPE, trace);
  FILE *const p = popen(cmd, "r");
  CTS_ASSERT(p != NULL);
  char line[512];
  double runtime = -1;
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "Runtime %lf s", &runtime) == 1) break;
  pclose(p);
  CTS_ASSERT_MSG(runtime >= 0.6, "runtime %.3f s", runtime);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_MSG(d.end_time >= d.last_time + 500000, "end %llu, last event %llu",
                 (unsigned long long)d.end_time, (unsigned long long)d.last_time);
  decoded_fini(&d);
  /* The packet that carries the end is one Jane Street's reader accepts (when the peer
   * tools are there: ../shared/tools/README.md). */
  const char *const ocaml = CTS_TEST_CORPUS_DIR "/../tools/memtrace-ocaml-reader";
  if (access(ocaml, X_OK) == 0) {
    snprintf(cmd, sizeof cmd, "%s summary %s > /dev/null", ocaml, trace);
    CTS_ASSERT_EQ_INT(system(cmd), 0);
  } else {
    fprintf(stderr, "  %s not found: the OCaml reader's check is skipped\n", ocaml);
  }
  unlink(trace);
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

/* Killed before any flush: the writer process (the default) finishes the trace, and
 * `record` waits for it (the trace file's flock) before summing it up. */
CTS_TEST(record_of_a_program_killed_at_once_keeps_every_record) {
  char victim[1024], trace[256];
  victim_path(victim, sizeof victim, "victim_killed");
  trace_path(trace, sizeof trace, "killed_now");
  unlink(trace);
  char *argv[] = {CTS_TEST_CTFSCOPE, "record", "-o", trace, "--rate", "1", victim, "now", NULL};
  run(&traced, argv, NULL, NULL, NULL);
  CTS_ASSERT_EQ_INT(traced.status, 128 + 9);
  CTS_ASSERT_STR_EQ(traced.out, "allocated\n");
  CTS_ASSERT_MSG(strstr(traced.err, ": 10 010 sampled allocations, 10 000 frees") != NULL,
                 "summary: %s", traced.err);
  decoded_t d;
  CHECK_TRACE(d, trace);
  CTS_ASSERT_EQ_U64(count_length(&d, 22222), 10);
  CTS_ASSERT_EQ_U64(count_length(&d, 33333), 10000);
  decoded_fini(&d);
  unlink(trace);
}

/* The writer process is invisible to the program (no child to wait for, another
 * session), and when it is killed the program runs on to the same end as untraced. */
CTS_TEST(writer_process_is_nobodys_child_and_its_death_harms_nothing) {
  char trace[256];
  trace_path(trace, sizeof trace, "writer_killed");
  CTS_ASSERT(run_both("victim_writer", NULL, NULL, "1", trace, NULL));
  CTS_ASSERT_EQ_INT(traced.status, 0);
  CTS_ASSERT_MSG(strstr(traced.err, "its own session") != NULL, "stderr: %s", traced.err);
  CTS_ASSERT_MSG(strstr(traced.err, "killed the writer process") != NULL, "stderr: %s", traced.err);
  CTS_ASSERT_MSG(strstr(traced.err, "ctfscope-preload: the writer process (pid ") != NULL &&
                     strstr(traced.err, "is gone: tracing stopped, the program runs on\n"),
                 "stderr: %s", traced.err);
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
