/* SPDX-License-Identifier: MIT */
/* The commands on traces and command lines meant to hurt (issue 17): an output that is the
 * input, a failed run over an old output, 2^63 samples, a sample rate of 5e-324, a trace
 * with no allocation, escape sequences in names, corrupt backtraces, a corrupt gzip stream,
 * FIFOs. Each test fails without its fix. */
#define _GNU_SOURCE /* posix_openpt, cfmakeraw */
#include <dirent.h>
#include <sys/stat.h>
#include <termios.h>

#include "../run_cmd.h"
#include "../test.h"
#include "hostile_traces.h"
#include "pty_run.h"

enum { TIMEOUT_S = 30 };
#define NELEM(a) (sizeof(a) / sizeof *(a))

static char dir[64];

/* The traces and outputs go when the tests end, passed or not. */
__attribute__((destructor)) static void remove_tmp_dir(void) {
  if (!dir[0]) return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static const char *tmp_dir(void) {
  if (!dir[0]) {
    strcpy(dir, "/tmp/cts-hostile-XXXXXX");
    if (!mkdtemp(dir)) abort();
  }
  return dir;
}

/* dir/name in a static buffer of four (tests hold a few at once). */
static const char *in_dir(const char *name) {
  static char bufs[4][256];
  static unsigned next;
  char *b = bufs[next++ % 4];
  snprintf(b, 256, "%s/%s", tmp_dir(), name);
  return b;
}

static const char *write_trace(const char *name, const ht_spec_t *s) {
  const char *path = in_dir(name);
  if (ht_write(s, path) != 0) abort();
  return path;
}

/* Runs ctfscope with args (NULL-terminated, without the binary); fails the test on a crash
 * or a timeout. */
static bool run(run_result_t *r, const char *const *args) {
  char *argv[32] = {CTS_TEST_CTFSCOPE};
  size_t n = 1;
  for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  if (!run_cmd(argv, NULL, TIMEOUT_S, r)) return false;
  if (r->signal || r->timed_out) {
    fprintf(stderr, "  ctfscope %s: signal %d%s\n  stderr: %s", args[0], r->signal,
            r->timed_out ? " (timeout)" : "", r->err);
    return false;
  }
  return true;
}

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : -1;
}

static bool contains(const char *s, const char *what) {
  return s && strstr(s, what);
}

/* ---- 2: an output that is the input --------------------------------------------------- */

CTS_TEST(an_output_that_is_the_input_is_refused_and_the_input_kept) {
  const ht_spec_t plain = ht_plain();
  const char *trace = write_trace("same.ctf", &plain);
  const off_t size = file_size(trace);
  char lnk[256], hard[256];
  snprintf(lnk, sizeof lnk, "%s", in_dir("same-link.ctf"));
  snprintf(hard, sizeof hard, "%s", in_dir("same-hard.ctf"));
  unlink(lnk);
  unlink(hard);
  CTS_ASSERT_EQ_INT(symlink(trace, lnk), 0);
  CTS_ASSERT_EQ_INT(link(trace, hard), 0);
  const char *const outs[] = {trace, lnk, hard};
  for (size_t o = 0; o < 3; o++) {
    const char *out = outs[o];
    const char *const cmds[][12] = {
        {"dump", "-o", out, trace, NULL},
        {"export", "-f", "csv", "-o", out, trace, NULL},
        {"export", "-f", "folded", "-o", out, trace, NULL},
        {"export", "-f", "chrome", "-o", out, trace, NULL},
        {"export", "-f", "pprof", "-o", out, trace, NULL},
        {"subsample", "--factor", "2", "-o", out, trace, NULL},
        {"filter", "--from", "0", "-o", out, trace, NULL},
        {"report", "-o", out, trace, NULL},
        {"stats", "--svg", out, trace, NULL},
    };
    for (size_t c = 0; c < NELEM(cmds); c++) {
      run_result_t r;
      CTS_ASSERT(run(&r, cmds[c]));
      CTS_ASSERT_MSG(r.exit_code == 2, "%s -> %s: exit %d, expected 2", cmds[c][0], out,
                     r.exit_code);
      CTS_ASSERT_MSG(contains(r.err, "is the input"), "%s: %s", cmds[c][0], r.err);
      CTS_ASSERT_EQ_U64((uint64_t)file_size(trace), (uint64_t)size);
      run_result_free(&r);
    }
  }
  /* The trace still reads whole. */
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"info", trace, NULL}));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  run_result_free(&r);
}

CTS_TEST(convert_refuses_to_write_over_its_input) {
  const char *data = cts_test_data_dir();
  char src[512], work[256], stream[300];
  snprintf(src, sizeof src, "%s/tasks/known.ctf", data);
  if (file_size(src) < 0) CTS_SKIP("no %s", src);
  snprintf(work, sizeof work, "%s", in_dir("conv"));
  mkdir(work, 0755);
  snprintf(stream, sizeof stream, "%s/stream", work);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, stream);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  const off_t size = file_size(stream);
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"convert", stream, work, NULL}));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  CTS_ASSERT_EQ_U64((uint64_t)file_size(stream), (uint64_t)size);
  run_result_free(&r);
}

CTS_TEST(a_failed_run_keeps_the_old_output_and_leaves_no_temporary_file) {
  const char *out = in_dir("old-output.txt");
  FILE *f = fopen(out, "w");
  CTS_ASSERT(f);
  fputs("precious\n", f);
  fclose(f);
  const char *const cmds[][8] = {
      {"dump", "-o", out, "/nonexistent/trace.ctf", NULL},
      {"export", "-f", "csv", "-o", out, "/nonexistent/trace.ctf", NULL},
      {"subsample", "--factor", "2", "-o", out, "/nonexistent/trace.ctf", NULL},
      {"report", "-o", out, "/nonexistent/trace.ctf", NULL},
  };
  for (size_t c = 0; c < NELEM(cmds); c++) {
    run_result_t r;
    CTS_ASSERT(run(&r, cmds[c]));
    CTS_ASSERT_MSG(r.exit_code == 3, "%s: exit %d", cmds[c][0], r.exit_code);
    CTS_ASSERT_EQ_U64((uint64_t)file_size(out), 9);
    run_result_free(&r);
  }
  /* Only the old output and the traces of the other tests: no ".old-output.txt.XXXXXX". */
  char cmd[300];
  snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q '^\\.old-output'", tmp_dir());
  CTS_ASSERT(system(cmd) != 0);
  /* A successful run replaces it, with the usual mode. */
  const ht_spec_t plain = ht_plain();
  const char *trace = write_trace("replace.ctf", &plain);
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"dump", "-o", out, trace, NULL}));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  CTS_ASSERT(file_size(out) > 100);
  run_result_free(&r);
}

CTS_TEST(file_permissions_are_respected) {
  if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0)
    CTS_SKIP("needs root and setpriv, to run as another user");
  const ht_spec_t plain = ht_plain();
  const char *trace = write_trace("ro-dir.ctf", &plain);
  char ro[256], out[300], cmd[1200];
  snprintf(ro, sizeof ro, "%s", in_dir("ro-dir"));
  mkdir(ro, 0755); /* root's: nobody may not create files in it */
  snprintf(out, sizeof out, "%s/out.txt", ro);
  FILE *f = fopen(out, "w");
  CTS_ASSERT(f);
  fclose(f);
  CTS_ASSERT_EQ_INT(chmod(out, 0666), 0);
  CTS_ASSERT_EQ_INT(chmod(tmp_dir(), 0755), 0);
  snprintf(cmd, sizeof cmd,
           "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups %s dump -o '%s' '%s'",
           CTS_TEST_CTFSCOPE, out, trace);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  CTS_ASSERT(file_size(out) > 100);
  /* A read-only file in a writable directory is not replaced behind its mode's back. */
  char rw[256], ro_file[300];
  snprintf(rw, sizeof rw, "%s", in_dir("rw-dir"));
  mkdir(rw, 0777);
  CTS_ASSERT_EQ_INT(chmod(rw, 0777), 0);
  snprintf(ro_file, sizeof ro_file, "%s/read-only.txt", rw);
  f = fopen(ro_file, "w");
  CTS_ASSERT(f);
  fputs("kept\n", f);
  fclose(f);
  CTS_ASSERT_EQ_INT(chmod(ro_file, 0444), 0);
  snprintf(cmd, sizeof cmd,
           "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups %s dump -o '%s' '%s' "
           "2>/dev/null",
           CTS_TEST_CTFSCOPE, ro_file, trace);
  CTS_ASSERT(system(cmd) != 0);
  CTS_ASSERT_EQ_U64((uint64_t)file_size(ro_file), 5);
}

/* ---- 5: 2^63 samples ------------------------------------------------------------------ */

CTS_TEST(subsample_of_a_huge_sample_count_finishes) {
  ht_spec_t s = ht_plain();
  s.nallocs = 3;
  s.length = (uint64_t)INT64_MAX - 1;
  s.nsamples = (uint64_t)INT64_MAX;
  const char *trace = write_trace("huge-samples.ctf", &s);
  CTS_ASSERT(file_size(trace) < 1024);
  const char *out = in_dir("huge-samples.sub.ctf");
  const char *const factors[] = {"2", "1e6", "1.0000001"};
  for (size_t i = 0; i < 3; i++) {
    run_result_t r;
    CTS_ASSERT(run(&r, (const char *const[]){"subsample", "-q", "--factor", factors[i], "-o", out,
                                             trace, NULL}));
    CTS_ASSERT_MSG(r.exit_code == 0, "factor %s: exit %d: %s", factors[i], r.exit_code, r.err);
    run_result_free(&r);
    CTS_ASSERT(run(&r, (const char *const[]){"info", out, NULL}));
    CTS_ASSERT_EQ_INT(r.exit_code, 0);
    run_result_free(&r);
  }
}

/* ---- 7: a rate of 5e-324 -------------------------------------------------------------- */

CTS_TEST(estimates_at_a_tiny_rate_are_finite) {
  ht_spec_t s = ht_plain();
  s.rate = 5e-324;
  s.nsamples = 1000;
  s.length = 100000;
  const char *trace = write_trace("tiny-rate.ctf", &s);
  const char *const cmds[][8] = {
      {"stats", trace, NULL},
      {"stats", "--json", trace, NULL},
      {"top", trace, NULL},
      {"top", "--tree", trace, NULL},
      {"top", "--json", trace, NULL},
      {"leaks", trace, NULL},
      {"info", trace, NULL},
      {"report", "-o", "-", trace, NULL},
      {"export", "-f", "csv", trace, NULL},
  };
  for (size_t c = 0; c < NELEM(cmds); c++) {
    run_result_t r;
    CTS_ASSERT(run(&r, cmds[c]));
    CTS_ASSERT_MSG(r.exit_code == 0, "%s %s: exit %d: %s", cmds[c][0], cmds[c][1], r.exit_code,
                   r.err);
    CTS_ASSERT_MSG(!contains(r.out, "inf ") && !contains(r.out, "nan") &&
                       !contains(r.out, "inf,") && !contains(r.out, "inf\""),
                   "%s %s printed an overflowed figure:\n%s", cmds[c][0], cmds[c][1], r.out);
    run_result_free(&r);
  }
}

/* ---- 8: no allocation ----------------------------------------------------------------- */

CTS_TEST(a_trace_without_allocations_reports) {
  ht_spec_t s = ht_plain();
  s.nallocs = 0;
  const char *trace = write_trace("no-allocs.ctf", &s);
  const char *const cmds[][8] = {
      {"report", "-o", in_dir("no-allocs.html"), trace, NULL},
      {"top", trace, NULL},
      {"top", "--tree", trace, NULL},
      {"leaks", trace, NULL},
      {"stats", trace, NULL},
      {"diff", "--no-normalize", trace, trace, NULL},
  };
  for (size_t c = 0; c < NELEM(cmds); c++) {
    run_result_t r;
    CTS_ASSERT(run(&r, cmds[c]));
    CTS_ASSERT_MSG(r.exit_code == 0, "%s: exit %d: %s", cmds[c][0], r.exit_code, r.err);
    CTS_ASSERT_MSG(!contains(r.err, "runtime error") && !contains(r.err, "Sanitizer"), "%s: %s",
                   cmds[c][0], r.err);
    run_result_free(&r);
  }
}

/* ---- 9: escape sequences in names ----------------------------------------------------- */

static void assert_no_controls(const char *what, const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; p && *p; p++) {
    const bool c0 = *p < 0x20 && *p != '\n' && *p != '\t';
    const bool c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
    if (c0 || *p == 0x7f || c1) {
      CTS_FAIL("%s: control byte 0x%02x at offset %zu", what, *p,
               (size_t)(p - (const unsigned char *)text));
    }
  }
}

CTS_TEST(escape_sequences_in_names_do_not_reach_the_terminal) {
  ht_spec_t s = ht_plain();
  s.function = "Evil.\x1b]0;pwned\x07title\x1b[2J";
  s.file =
      "evil\x1b[31m.ml\x7f\xc2\x9b"
      "1m";
  s.executable = "/opt/\x1b[5mexe";
  s.context = "ctx\x1b[K";
  const char *trace = write_trace("escapes.ctf", &s);
  const char *const cmds[][8] = {
      {"top", trace, NULL},   {"top", "--tree", trace, NULL}, {"top", "--by", "file", trace, NULL},
      {"leaks", trace, NULL}, {"diff", trace, trace, NULL},   {"info", trace, NULL},
      {"stats", trace, NULL},
  };
  for (size_t c = 0; c < NELEM(cmds); c++) {
    run_result_t r;
    CTS_ASSERT(run(&r, cmds[c]));
    CTS_ASSERT_MSG(r.exit_code == 0, "%s: exit %d: %s", cmds[c][0], r.exit_code, r.err);
    assert_no_controls(cmds[c][0], r.out);
    assert_no_controls(cmds[c][0], r.err);
    run_result_free(&r);
  }
  /* The names are there, escaped. */
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"top", "--by", "function", trace, NULL}));
  CTS_ASSERT_MSG(contains(r.out, "Evil.\\x1b]0;pwned\\x07title"), "%s", r.out);
  run_result_free(&r);
}

/* Runs ctfscope with args (at most 4) with standard output on a pseudo-terminal; its
 * output. */
static char *on_a_terminal(const char *a0, const char *a1, const char *a2, const char *a3) {
  return pty_run(0, (const char *const[]){a0, a1, a2, a3, NULL});
}

CTS_TEST(machine_formats_escape_names_on_a_terminal_only) {
  ht_spec_t s = ht_plain();
  s.function = "Evil.\x1b]0;pwned\x07title";
  const char *trace = write_trace("escapes-dump.ctf", &s);
  const char *const cmds[][4] = {
      {"dump", trace, NULL},
      {"top", "--csv", trace, NULL},
      {"export", "-f", "folded", trace},
  };
  for (size_t c = 0; c < NELEM(cmds); c++) {
    char *tty = on_a_terminal(cmds[c][0], cmds[c][1], cmds[c][2], cmds[c][3]);
    CTS_ASSERT(tty);
    CTS_ASSERT_MSG(contains(tty, "Evil.\\x1b]0"), "%s: %s", cmds[c][0], tty);
    assert_no_controls(cmds[c][0], tty);
    free(tty);
  }
  /* Into a file the format's strings stay as they are. */
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"dump", trace, NULL}));
  CTS_ASSERT(contains(r.out, "Evil.\x1b]0;pwned\x07title"));
  run_result_free(&r);
}

/* ---- 6: every command's verdict on a corrupt trace is the same ------------------------ */

CTS_TEST(stats_rejects_what_the_other_commands_reject) {
  char dirname[512];
  snprintf(dirname, sizeof dirname, "%s/fail", cts_test_data_dir());
  DIR *d = opendir(dirname);
  CTS_ASSERT(d);
  struct dirent *e;
  size_t checked = 0;
  while ((e = readdir(d))) {
    const size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".ctf") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dirname, e->d_name);
    run_result_t r;
    CTS_ASSERT(run(&r, (const char *const[]){"dump", path, NULL}));
    const int expected = r.exit_code;
    run_result_free(&r);
    const char *const cmds[][6] = {
        {"stats", path, NULL},
        {"top", path, NULL},
        {"leaks", path, NULL},
        {"info", path, NULL},
        {"export", "-f", "csv", path, NULL},
    };
    for (size_t c = 0; c < NELEM(cmds); c++) {
      CTS_ASSERT(run(&r, cmds[c]));
      CTS_ASSERT_MSG(r.exit_code == expected, "%s %s: exit %d, dump's %d", cmds[c][0], e->d_name,
                     r.exit_code, expected);
      run_result_free(&r);
    }
    checked++;
  }
  closedir(d);
  CTS_ASSERT(checked >= 40);
}

/* ---- 10: bad gzip, FIFOs, messages, exit codes ---------------------------------------- */

CTS_TEST(a_corrupt_gzip_stream_is_bad_input_in_every_command) {
  const ht_spec_t plain = ht_plain();
  const char *trace = write_trace("gz.ctf", &plain);
  char cmd[600];
  const char *cut = in_dir("gz-cut.ctf.gz"), *garbage = in_dir("gz-garbage.ctf.gz");
  snprintf(cmd, sizeof cmd, "gzip -c '%s' | head -c 200 > '%s'", trace, cut);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  FILE *f = fopen(garbage, "wb");
  CTS_ASSERT(f);
  static const char bad[] = "\x1f\x8b\x08\x00garbage, not deflate data at all";
  fwrite(bad, 1, sizeof bad - 1, f);
  fclose(f);
  const char *const inputs[] = {cut, garbage};
  for (size_t i = 0; i < 2; i++) {
    const char *in = inputs[i];
    const char *const cmds[][8] = {
        {"info", in, NULL},
        {"dump", in, NULL},
        {"stats", in, NULL},
        {"top", in, NULL},
        {"leaks", in, NULL},
        {"export", "-f", "csv", in, NULL},
        {"report", "-o", "/dev/null", in, NULL},
        {"subsample", "--factor", "2", "-o", "/dev/null", in, NULL},
    };
    for (size_t c = 0; c < NELEM(cmds); c++) {
      run_result_t r;
      CTS_ASSERT(run(&r, cmds[c]));
      CTS_ASSERT_MSG(r.exit_code == 1, "%s %s: exit %d: %s", cmds[c][0], in, r.exit_code, r.err);
      run_result_free(&r);
    }
  }
}

/* A FIFO at dir/name that a child fills with the file `from` once a reader opens it. */
static const char *fifo_of(const char *name, const char *from) {
  const char *path = in_dir(name);
  ht_fifo(path, from);
  return path;
}

CTS_TEST(fifos_are_read_by_every_command) {
  const ht_spec_t plain = ht_plain();
  char trace[256], tasks[512];
  snprintf(trace, sizeof trace, "%s", write_trace("fifo-src.ctf", &plain));
  snprintf(tasks, sizeof tasks, "%s/tasks/known.ctf", cts_test_data_dir());
  char out[256];
  snprintf(out, sizeof out, "%s", in_dir("fifo-out"));
  const char *const cmds[][8] = {
      {"info", NULL},
      {"dump", NULL},
      {"stats", NULL},
      {"top", NULL},
      {"top", "--tree", NULL},
      {"leaks", NULL},
      {"export", "-f", "csv", NULL},
      {"export", "-f", "pprof", "-o", "/dev/null", NULL},
      {"report", "-o", "/dev/null", NULL},
      {"subsample", "-q", "--factor", "2", "-o", out, NULL},
      {"filter", "-q", "--from", "0", "-o", out, NULL},
  };
  for (int kind = 0; kind < 2; kind++) {
    for (size_t c = 0; c < NELEM(cmds); c++) {
      if (kind == 1 && (strcmp(cmds[c][0], "subsample") == 0 || strcmp(cmds[c][0], "filter") == 0 ||
                        strcmp(cmds[c][0], "leaks") == 0 || cmds[c][1]))
        continue; /* memtrace only */
      const char *args[12];
      size_t n = 0;
      for (; cmds[c][n]; n++) args[n] = cmds[c][n];
      args[n++] = fifo_of("in.fifo", kind ? tasks : trace);
      args[n] = NULL;
      run_result_t r;
      CTS_ASSERT(run(&r, args));
      CTS_ASSERT_MSG(r.exit_code == 0, "%s on a FIFO of a %s trace: exit %d: %s", cmds[c][0],
                     kind ? "task" : "memtrace", r.exit_code, r.err);
      while (waitpid(-1, NULL, WNOHANG) > 0) {}
      run_result_free(&r);
    }
  }
  /* A task trace from a FIFO read twice over (convert's two passes), and diff's two. */
  run_result_t r;
  const char *conv = in_dir("fifo-conv");
  CTS_ASSERT(run(&r, (const char *const[]){"convert", fifo_of("in.fifo", tasks), conv, NULL}));
  CTS_ASSERT_MSG(r.exit_code == 0, "convert: exit %d: %s", r.exit_code, r.err);
  run_result_free(&r);
  CTS_ASSERT(run(
      &r, (const char *const[]){"diff", "--no-normalize", fifo_of("in.fifo", trace), trace, NULL}));
  CTS_ASSERT_MSG(r.exit_code == 0, "diff: exit %d: %s", r.exit_code, r.err);
  run_result_free(&r);
  while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

CTS_TEST(subsample_blames_the_input_for_a_header_it_cannot_write_back) {
  ht_spec_t s = ht_plain();
  s.rate = 5e-324; /* divided by the factor: 0, which no trace may declare */
  const char *trace = write_trace("tiny-rate-sub.ctf", &s);
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"subsample", "--factor", "2", "-o",
                                           in_dir("tiny-rate-sub.out"), trace, NULL}));
  CTS_ASSERT_MSG(r.exit_code == 1, "exit %d: %s", r.exit_code, r.err);
  CTS_ASSERT_MSG(!contains(r.err, "cannot write") && contains(r.err, trace), "%s", r.err);
  run_result_free(&r);
}

CTS_TEST(fetch_into_a_missing_directory_is_an_io_error) {
  run_result_t r;
  CTS_ASSERT(
      run(&r, (const char *const[]){"fetch", "-o", "/nonexistent-dir/x.ctf", "127.0.0.1:9", NULL}));
  CTS_ASSERT_MSG(r.exit_code == 3, "exit %d: %s", r.exit_code, r.err);
  run_result_free(&r);
}

/* ---- 11: the dump's sample rate ------------------------------------------------------- */

CTS_TEST(dump_prints_the_sample_rate_with_17_digits) {
  ht_spec_t s = ht_plain();
  s.rate = 0.1;
  const char *trace = write_trace("rate-0.1.ctf", &s);
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"dump", trace, NULL}));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  CTS_ASSERT_MSG(contains(r.out, "info.sample_rate 0.10000000000000001 (0x1.999999999999ap-4)\n"),
                 "%s", r.out);
  run_result_free(&r);
}

CTS_TEST_MAIN()
