/* SPDX-License-Identifier: MIT */
/* The per-event exports (`export -f csv|chrome`, memtrace and task traces) and `diff`
 * write exactly the bytes they wrote when they formatted with printf (issue 20: they now
 * format in place): each output's size and FNV-1a hash against golden/export_bytes.txt,
 * taken from the printf version. Inputs: the corpus's traces, the repository's task trace,
 * and hostile traces (names with commas, quotes, newlines, controls and invalid UTF-8;
 * sample rates whose estimates and byte clock are not whole numbers).
 * Regenerate after an intended change: CTS_UPDATE_GOLDEN=1 build/dev/tests/cli/test_export_bytes */
#include <dirent.h>
#include <sys/stat.h>

#include "../run_cmd.h"
#include "../test.h"
#include "hostile_traces.h"
#include "scratch_dir.h"

enum { TIMEOUT_S = 60 };

static const char *in_dir(const char *name, char *buf, size_t size) {
  return scratch_file("cts-export-bytes", name, buf, size);
}

/* FNV-1a over the file; its size in *size. */
static uint64_t file_hash(const char *path, uint64_t *size) {
  uint64_t h = 0xcbf29ce484222325ull;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
    *size += n;
  }
  fclose(f);
  return h;
}

/* "name exit size hash" lines, in the order the cases run. */
static char got[1 << 16];
static size_t got_len;

/* Runs ctfscope args... with stdout to a file and records the case. */
static void run_case(const char *name, const char *const *args) {
  char out[256];
  in_dir("out", out, sizeof out);
  char *argv[16] = {CTS_TEST_CTFSCOPE};
  size_t n = 1;
  for (; args[n - 1] && n < 15; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  run_result_t r;
  if (!run_cmd(argv, out, TIMEOUT_S, &r)) abort();
  uint64_t size;
  const uint64_t h = file_hash(out, &size);
  got_len += (size_t)snprintf(got + got_len, sizeof got - got_len, "%s %d %llu %016llx\n", name,
                              r.signal ? 128 + r.signal : r.exit_code, (unsigned long long)size,
                              (unsigned long long)h);
  run_result_free(&r);
}

/* The per-event exports of a trace (memtrace or tasks). */
static void export_cases(const char *label, const char *trace) {
  char name[128];
  snprintf(name, sizeof name, "%s:csv", label);
  run_case(name, (const char *const[]){"export", "-q", "-f", "csv", trace, NULL});
  snprintf(name, sizeof name, "%s:chrome", label);
  run_case(name,
           (const char *const[]){"export", "-q", "-f", "chrome", "--max-size", "0", trace, NULL});
}

/* The exports of a memtrace trace, and its diffs with a sibling. */
static void memtrace_cases(const char *label, const char *trace, const char *other) {
  char name[128];
  export_cases(label, trace);
  snprintf(name, sizeof name, "%s:diff", label);
  run_case(name, (const char *const[]){"diff", "-q", "-n", "0", trace, other, NULL});
  snprintf(name, sizeof name, "%s:diff-csv-count", label);
  run_case(name, (const char *const[]){"diff", "-q", "--csv", "-n", "0", "-m", "count", other,
                                       trace, NULL});
  /* (not --json: it names the traces by their paths) */
  snprintf(name, sizeof name, "%s:diff-csv-peak", label);
  run_case(name, (const char *const[]){"diff", "-q", "--csv", "-n", "0", "-m", "peak", trace, other,
                                       NULL});
  snprintf(name, sizeof name, "%s:diff-rate", label);
  run_case(name,
           (const char *const[]){"diff", "-q", "--per-second", "-n", "0", trace, other, NULL});
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

CTS_TEST(exports_and_diffs_write_the_bytes_they_wrote_with_printf) {
  CTS_REQUIRE_CORPUS(corpus);
  got_len = 0;
  /* Hostile names and rates: estimates and the chrome byte clock that are not whole. */
  static const char fn[] = "Evil,\"quoted\"\nname\r\x01\x1b[31m\xff\xc2\x85;x\\y";
  static const char file[] = "dir,\"a\"/f\nile\x7f\xe2\x80.ml";
  const ht_spec_t specs[] = {
      {.rate = 0.3,
       .function = fn,
       .file = file,
       .nallocs = 300,
       .length = 5,
       .nsamples = 2,
       .collect = true},
      {.rate = 1, .function = fn, .file = "plain.ml", .nallocs = 100, .length = 3, .nsamples = 3},
      {.rate = 1.0 / 3,
       .function = "A,B",
       .file = file,
       .nallocs = 200,
       .length = 1000,
       .nsamples = 7,
       .collect = true},
      {.rate = 1e-4, .function = "\"", .file = ",", .nallocs = 50, .length = 100000, .nsamples = 1},
      /* Sample counts on either side of the ones csv keeps as text (below 4096). */
      {.rate = 1, .function = "f", .file = "g.ml", .nallocs = 3, .length = 4094, .nsamples = 4095},
      {.rate = 1, .function = "f", .file = "g.ml", .nallocs = 3, .length = 4095, .nsamples = 4096},
  };
  enum { NSPECS = sizeof specs / sizeof *specs };
  char traces[NSPECS][256];
  for (size_t i = 0; i < NSPECS; i++) {
    char name[32];
    snprintf(name, sizeof name, "hostile%zu.ctf", i);
    in_dir(name, traces[i], sizeof traces[i]);
    CTS_ASSERT_EQ_INT(ht_write(&specs[i], traces[i]), 0);
  }
  for (size_t i = 0; i < NSPECS; i++) {
    char label[32];
    snprintf(label, sizeof label, "hostile%zu", i);
    memtrace_cases(label, traces[i], traces[(i + 1) % NSPECS]);
  }
  /* The corpus's memtrace traces, in name order, each against the next. */
  char mdir[512];
  snprintf(mdir, sizeof mdir, "%s/memtrace/traces", corpus);
  DIR *d = opendir(mdir);
  CTS_ASSERT(d);
  char *names[64];
  size_t nn = 0;
  for (struct dirent *e; (e = readdir(d)) && nn < 64;) {
    const size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".ctf") == 0) names[nn++] = strdup(e->d_name);
  }
  closedir(d);
  CTS_ASSERT(nn > 0);
  qsort(names, nn, sizeof *names, cmp_names);
  for (size_t i = 0; i < nn; i++) {
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/%s", mdir, names[i]);
    snprintf(b, sizeof b, "%s/%s", mdir, names[(i + 1) % nn]);
    memtrace_cases(names[i], a, b);
  }
  for (size_t i = 0; i < nn; i++) free(names[i]);
  char t[700];
  snprintf(t, sizeof t, "%s/tasks/known.ctf", cts_test_data_dir());
  export_cases("known.ctf", t);
  snprintf(t, sizeof t, "%s/mprof/net/net.ctf", corpus);
  export_cases("net.ctf", t);
  snprintf(t, sizeof t, "%s/mprof/wrapped/koleini-trace1-0a4963a.ctf", corpus);
  export_cases("koleini", t);

  const char *golden = CTS_GOLDEN_FILE;
  const char *update = getenv("CTS_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0) {
    FILE *f = fopen(golden, "w");
    CTS_ASSERT(f);
    fwrite(got, 1, got_len, f);
    fclose(f);
    return;
  }
  FILE *f = fopen(golden, "r");
  CTS_ASSERT_MSG(f, "cannot read %s", golden);
  static char want[1 << 16];
  const size_t n = fread(want, 1, sizeof want - 1, f);
  fclose(f);
  want[n] = 0;
  got[got_len] = 0;
  CTS_ASSERT_STR_EQ(got, want);
}

CTS_TEST_MAIN()
