/* SPDX-License-Identifier: MIT */
/* Interop with Jane Street's own reader (../shared/tools/memtrace-ocaml-reader, the one
 * OCaml users and memtrace_viewer use): traces written by our tracer, at rate 1 and
 * sampled, in the default compact encoding and in memtrace's own (rewritten by
 * `ctfscope filter --encoding memtrace`), must read without error there, decode to the
 * same events as ours (`dump`, comment lines aside) and give the same summary figures as
 * `ctfscope info --json`. Skipped when the reader is absent, a failure then under CI=true. */
#include <unistd.h>

#include "../run_json.h"
#include "../test.h"

static const char *const ocaml = CTS_TEST_CORPUS_DIR "/../tools/memtrace-ocaml-reader";

/* The figures of `memtrace-ocaml-reader summary` compared, by their name there. */
static const char *const figures[] = {
    "events_total",
    "events.alloc",
    "events.alloc_major",
    "events.alloc_ext",
    "events.promote",
    "events.collect",
    "allocs_total",
    "allocs_eligible_for_short_form",
    "samples_total",
    "samples.minor",
    "samples.major",
    "samples.external",
    "sum_length_words",
    "sum_length_x_nsamples",
    "max_length_words",
    "backtrace_length_max",
    "backtrace_length_mean",
    "distinct_location_codes_in_backtraces",
    "location_codes_without_locations",
    "first_event_dt_us",
    "last_event_dt_us",
    "packets_total",
    "packets.events",
    "packets.locations",
    "reader_result",
};

/* Text without its lines that start with '#' (each side's comments name its reader). */
static char *strip_comments(const char *s) {
  char *out = malloc(strlen(s) + 1), *o = out;
  if (!out) return NULL;
  while (*s) {
    const char *nl = strchr(s, '\n');
    const size_t n = nl ? (size_t)(nl - s) + 1 : strlen(s);
    if (*s != '#') memcpy(o, s, n), o += n;
    s += n;
  }
  *o = '\0';
  return out;
}

/* The value of "key value" in the reader's summary, or NULL. */
static const char *summary_value(const char *summary, const char *key, char *buf, size_t size) {
  const size_t klen = strlen(key);
  for (const char *s = summary; s && *s;) {
    if (strncmp(s, key, klen) == 0 && s[klen] == ' ') {
      const char *v = s + klen + 1;
      const size_t n = strcspn(v, "\n");
      snprintf(buf, size, "%.*s", (int)n, v);
      return buf;
    }
    s = strchr(s, '\n');
    if (s) s++;
  }
  return NULL;
}

static bool same_as_ocaml(const char *trace) {
  run_result_t o, c;
  char *odump_argv[] = {(char *)ocaml, "dump", (char *)trace, NULL};
  char *cdump_argv[] = {CTS_TEST_CTFSCOPE, "dump", "--no-comments", (char *)trace, NULL};
  if (!run_cmd(odump_argv, NULL, 120, &o) || !run_cmd(cdump_argv, NULL, 120, &c)) return false;
  bool ok = o.exit_code == 0 && c.exit_code == 0;
  if (!ok)
    fprintf(stderr, "  %s: dump exit %d (OCaml: %s), %d\n", trace, o.exit_code, o.err, c.exit_code);
  char *stripped = ok ? strip_comments(o.out) : NULL;
  if (ok && (!stripped || strcmp(stripped, c.out) != 0)) {
    fprintf(stderr, "  %s: the OCaml reader's dump differs from ctfscope's\n", trace);
    ok = false;
  }
  free(stripped);
  run_result_free(&o);
  run_result_free(&c);
  if (!ok) return false;

  char *osum_argv[] = {(char *)ocaml, "summary", (char *)trace, NULL};
  char *info_argv[] = {CTS_TEST_CTFSCOPE, "info", "--json", (char *)trace, NULL};
  json_flat_t j = {0};
  if (!run_cmd(osum_argv, NULL, 120, &o)) return false;
  ok = o.exit_code == 0 && run_json(info_argv, &j, &c);
  for (size_t i = 0; ok && i < sizeof figures / sizeof *figures; i++) {
    char buf[128];
    const char *want = summary_value(o.out, figures[i], buf, sizeof buf);
    const char *got = json_flat_str(&j, figures[i]);
    if (!want || strcmp(want, got) != 0) {
      fprintf(stderr, "  %s: %s is %s for the OCaml reader, %s for ctfscope info\n", trace,
              figures[i], want ? want : "(missing)", got);
      ok = false;
    }
  }
  json_flat_free(&j);
  run_result_free(&o);
  run_result_free(&c);
  return ok;
}

/* Skips the test when the reader is absent, a failure under CI=true. */
#define REQUIRE_OCAML_READER()                                                         \
  do {                                                                                 \
    if (access(ocaml, X_OK) != 0) {                                                    \
      const char *ci_ = getenv("CI");                                                  \
      if (ci_ && strcmp(ci_, "true") == 0) CTS_FAIL("%s is missing (CI=true)", ocaml); \
      CTS_SKIP("%s not found: the interop check needs ../shared/tools", ocaml);        \
    }                                                                                  \
  } while (0)

/* Runs `ctfscope record` (rec_argv, which writes `compact`), then rewrites that trace in
 * memtrace's encoding into `memtrace`; false, with a message, if either fails. */
static bool record_in_both_encodings(char *const rec_argv[], const char *compact,
                                     const char *memtrace) {
  run_result_t res;
  if (!run_cmd(rec_argv, NULL, 60, &res)) return false;
  bool ok = res.exit_code == 0;
  if (!ok) fprintf(stderr, "  record: %d %s\n", res.exit_code, res.err);
  run_result_free(&res);
  char *filter_argv[] = {CTS_TEST_CTFSCOPE, "filter",        "-q", "--encoding", "memtrace", "-o",
                         (char *)memtrace,  (char *)compact, NULL};
  if (!ok || !run_cmd(filter_argv, NULL, 60, &res)) return false;
  ok = res.exit_code == 0;
  if (!ok) fprintf(stderr, "  filter: %d %s\n", res.exit_code, res.err);
  run_result_free(&res);
  return ok;
}

CTS_TEST(ocaml_reader_reads_our_traces_as_we_do) {
  REQUIRE_OCAML_READER();
  char dir[] = "/tmp/cts-interop.XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  const char *const rates[] = {"1", "0.01"};
  for (size_t r = 0; r < 2; r++) {
    char compact[64], memtrace[64];
    snprintf(compact, sizeof compact, "%s/r%zu.ctf", dir, r);
    snprintf(memtrace, sizeof memtrace, "%s/r%zu.memtrace.ctf", dir, r);
    /* victim_realloc: 4 400 allocations of 16 B to 20 kB, realloc chains. */
    char *rec_argv[] = {CTS_TEST_CTFSCOPE, "record", "-q",    "--rate",
                        (char *)rates[r],  "-o",     compact, "--",
                        CTS_TEST_VICTIM,   NULL};
    CTS_ASSERT(record_in_both_encodings(rec_argv, compact, memtrace));
    CTS_ASSERT(same_as_ocaml(compact));
    CTS_ASSERT(same_as_ocaml(memtrace));
    unlink(compact);
    unlink(memtrace);
  }
  rmdir(dir);
}

/* A stack cut at the tracer's frame limit ends in a marker frame that the trace names
 * (src/tracer/tracer_state.h, CUT_CODE_BASE): OCaml's reader reads such a trace, in both
 * encodings, as we do, and its dump shows the marker by name. (Before, checked on main's
 * code: record refused --max-frames, and no stack said it was cut.) */
CTS_TEST(ocaml_reader_shows_the_marker_of_a_cut_stack) {
  REQUIRE_OCAML_READER();
  char dir[] = "/tmp/cts-interop-cut.XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  char compact[64], memtrace[64];
  snprintf(compact, sizeof compact, "%s/cut.ctf", dir);
  snprintf(memtrace, sizeof memtrace, "%s/cut.memtrace.ctf", dir);
  /* victim_deep: 3 blocks allocated 100 calls deep */
  char *rec_argv[] = {CTS_TEST_CTFSCOPE,    "record", "-q", "--rate", "1",
                      "--max-frames",       "16",     "-o", compact,  "--",
                      CTS_TEST_DEEP_VICTIM, "100",    NULL};
  CTS_ASSERT(record_in_both_encodings(rec_argv, compact, memtrace));
  run_result_t res;
  const char *const traces[] = {compact, memtrace};
  for (size_t i = 0; i < 2; i++) {
    CTS_ASSERT(same_as_ocaml(traces[i]));
    char *odump_argv[] = {(char *)ocaml, "dump", (char *)traces[i], NULL};
    CTS_ASSERT(run_cmd(odump_argv, NULL, 120, &res));
    CTS_ASSERT_EQ_INT(res.exit_code, 0);
    CTS_ASSERT_MSG(strstr(res.out, "[deeper frames not recorded: --max-frames 16]"), "%s", res.out);
    run_result_free(&res);
    unlink(traces[i]);
  }
  rmdir(dir);
}

CTS_TEST_MAIN()
