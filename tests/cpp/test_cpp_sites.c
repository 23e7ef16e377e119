/* SPDX-License-Identifier: MIT */
/* A C++ program traced at rate 1 (cpp_sites.cpp): each of its allocation sites gets
 * exactly its bytes, at the program's own function, not in operator new or the standard
 * library; names are demangled in text, JSON, CSV, folded, pprof and the report, and
 * --no-demangle, --keep-allocator-frames and --drop-frames change that as documented. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../run_json.h"
#include "../test.h"

static char dir[256], trace[300];

typedef struct expect {
  char site[32];
  double bytes;
} expect_t;
static expect_t expected[8];
static size_t nexpected;

/* Runs ctfscope with args (NULL-terminated, after the command name) and returns its stdout,
 * or NULL (the reason on stderr) when it fails. */
static char *ctfscope(const char *cmd, const char *const *args) {
  char *argv[32] = {CTS_TEST_CTFSCOPE, (char *)cmd};
  size_t n = 2;
  for (; *args && n < 30; args++) argv[n++] = (char *)*args;
  argv[n] = NULL;
  run_result_t r;
  if (!run_cmd(argv, NULL, 120, &r)) return NULL;
  char *out = r.out;
  r.out = NULL;
  if (r.exit_code != 0) {
    fprintf(stderr, "  ctfscope %s: exit %d: %s\n", cmd, r.exit_code, r.err);
    free(out);
    out = NULL;
  }
  run_result_free(&r);
  return out;
}

/* The program traced once for every test. */
static bool setup(void) {
  if (trace[0]) return true;
  snprintf(dir, sizeof dir, "/tmp/cts_cpp_sites.XXXXXX");
  if (!mkdtemp(dir)) return false;
  snprintf(trace, sizeof trace, "%s/cpp.ctf", dir);
  char *expect_argv[] = {CTS_TEST_CPP_SITES, "--expect", NULL};
  run_result_t r;
  if (!run_cmd(expect_argv, NULL, 60, &r) || r.exit_code != 0) return false;
  for (char *line = strtok(r.out, "\n"); line && nexpected < 8; line = strtok(NULL, "\n"))
    if (sscanf(line, "%31s %lf", expected[nexpected].site, &expected[nexpected].bytes) == 2)
      nexpected++;
  run_result_free(&r);
  char *rec_argv[] = {CTS_TEST_CTFSCOPE,  "record", "-q", "-r", "1", "-o", trace, "--",
                      CTS_TEST_CPP_SITES, NULL};
  if (!run_cmd(rec_argv, NULL, 120, &r) || r.exit_code != 0) {
    fprintf(stderr, "  record: exit %d: %s\n", r.exit_code, r.err);
    return false;
  }
  run_result_free(&r);
  return nexpected == 5;
}

/* allocated bytes of function `site` in top --by function --json of trace path t (with
 * extra options). */
static double site_bytes_in(const char *t, const char *site, const char *extra) {
  char *argv[16] = {CTS_TEST_CTFSCOPE, "top", "--by", "function", "--json", "-n", "0"};
  size_t n = 7;
  if (extra) argv[n++] = (char *)extra;
  argv[n++] = (char *)t;
  argv[n] = NULL;
  json_flat_t j;
  run_result_t r;
  double v = -1;
  if (run_json(argv, &j, &r)) {
    const int i = json_flat_find(&j, "sites", "function", site, 1000);
    char path[64];
    snprintf(path, sizeof path, "sites[%d].alloc_bytes", i);
    if (i >= 0) v = json_flat_num(&j, path);
    json_flat_free(&j);
  }
  run_result_free(&r);
  return v;
}

static double site_bytes(const char *site, const char *extra) {
  return site_bytes_in(trace, site, extra);
}

CTS_TEST(each_site_gets_its_bytes_in_the_program) {
  CTS_ASSERT(setup());
  for (size_t i = 0; i < nexpected; i++) {
    const expect_t *e = &expected[i];
    /* The program's wrapper is a site of its own until --drop-frames folds it. */
    const bool pool = strcmp(e->site, "site_pool") == 0;
    const double got = site_bytes(pool ? "pool_alloc" : e->site, NULL);
    CTS_ASSERT_MSG(got == e->bytes, "%s: %.0f bytes, expected %.0f", e->site, got, e->bytes);
  }
  /* Nothing is left in the allocator or the standard library. */
  CTS_ASSERT(site_bytes("operator new(unsigned long)", NULL) < 0);
  CTS_ASSERT(site_bytes("allocate", NULL) < 0);
}

CTS_TEST(drop_frames_folds_the_wrapper) {
  CTS_ASSERT(setup());
  CTS_ASSERT(site_bytes("site_pool", "--drop-frames=^pool_alloc$") == 4000);
  CTS_ASSERT(site_bytes("pool_alloc", "--drop-frames=^pool_alloc$") < 0);
  /* --keep-frames wins over --drop-frames. */
  char *out = ctfscope("top", (const char *[]){"--by", "function", "--drop-frames", "^pool_alloc$",
                                               "--keep-frames", "pool_alloc", trace, NULL});
  CTS_ASSERT(out && strstr(out, "pool_alloc (") && !strstr(out, "site_pool ("));
  free(out);
}

CTS_TEST(allocator_frames_kept_and_demangled) {
  CTS_ASSERT(setup());
  const double total = site_bytes("operator new(unsigned long)", "--keep-allocator-frames");
  CTS_ASSERT_MSG(total > 50000, "operator new: %.0f bytes", total);
  /* JSON keeps the symbol. */
  char *out = ctfscope("top", (const char *[]){"--json", "--keep-allocator-frames", trace, NULL});
  CTS_ASSERT(out && strstr(out,
                           "\"function\": \"operator new(unsigned long)\", \"mangled\": "
                           "\"_Znwm\""));
  free(out);
  out = ctfscope("top", (const char *[]){"--csv", "--keep-allocator-frames", trace, NULL});
  CTS_ASSERT(out && strstr(out, "\noperator new(unsigned long),"));
  free(out);
  out = ctfscope("top", (const char *[]){"--keep-allocator-frames", trace, NULL});
  CTS_ASSERT(out && strstr(out, "operator new(unsigned long) ("));
  free(out);
  out = ctfscope("leaks", (const char *[]){"--keep-allocator-frames", trace, NULL});
  CTS_ASSERT(out && strstr(out, "operator new(unsigned long)"));
  free(out);
  /* --no-demangle: as the trace has it. */
  out = ctfscope("top", (const char *[]){"--keep-allocator-frames", "--no-demangle", trace, NULL});
  CTS_ASSERT(out && strstr(out, "_Znwm (") && !strstr(out, "operator new"));
  free(out);
  out = ctfscope(
      "top", (const char *[]){"--json", "--keep-allocator-frames", "--no-demangle", trace, NULL});
  CTS_ASSERT(out && strstr(out, "\"function\": \"_Znwm\", \"file\""));
  free(out);
}

/* Whether ctfscope report (with option, if any) writes a page that contains text. */
static bool report_has(char *html, size_t size, const char *option, const char *text) {
  char path[400];
  snprintf(path, sizeof path, "%s/cpp.html", dir);
  char *out = option ? ctfscope("report", (const char *[]){option, "-o", path, trace, NULL})
                     : ctfscope("report", (const char *[]){"-o", path, trace, NULL});
  if (!out) return false;
  free(out);
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  const size_t n = fread(html, 1, size, f);
  fclose(f);
  return memmem(html, n, text, strlen(text)) != NULL;
}

CTS_TEST(exports_and_report) {
  CTS_ASSERT(setup());
  char *out = ctfscope("export", (const char *[]){"-f", "folded", trace, NULL});
  CTS_ASSERT(out && strstr(out, ";site_map ") && !strstr(out, "operator new"));
  free(out);
  out =
      ctfscope("export", (const char *[]){"-f", "folded", "--keep-allocator-frames", trace, NULL});
  CTS_ASSERT(out && strstr(out, ";operator new(unsigned long) "));
  free(out);
  /* pprof: gzip; function names and their system names in the string table. */
  char path[400];
  snprintf(path, sizeof path, "%s/cpp.pb.gz", dir);
  out = ctfscope("export", (const char *[]){"-f", "pprof", "--keep-allocator-frames", "-o", path,
                                            trace, NULL});
  CTS_ASSERT(out);
  free(out);
  gzFile gz = gzopen(path, "rb");
  CTS_ASSERT(gz);
  static char pb[1 << 20];
  const int n = gzread(gz, pb, sizeof pb);
  gzclose(gz);
  CTS_ASSERT(n > 0 && n < (int)sizeof pb);
  CTS_ASSERT(memmem(pb, (size_t)n, "operator new(unsigned long)", 27));
  CTS_ASSERT(memmem(pb, (size_t)n, "_Znwm", 5));
  CTS_ASSERT(memmem(pb, (size_t)n, "site_map", 8));
  out = ctfscope("export", (const char *[]){"-f", "csv", "--keep-allocator-frames", trace, NULL});
  CTS_ASSERT(out && strstr(out, "operator new(unsigned long)"));
  free(out);
  /* The report's top-sites table (its tree is compressed in the page). */
  static char html[8 << 20];
  CTS_ASSERT(report_has(html, sizeof html, NULL, "site_map ("));
  CTS_ASSERT(!report_has(html, sizeof html, NULL, "operator new"));
  CTS_ASSERT(
      report_has(html, sizeof html, "--keep-allocator-frames", "operator new(unsigned long) ("));
}

CTS_TEST(bad_expression_is_a_usage_error) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "top", "--drop-frames", "(", trace, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  CTS_ASSERT(strstr(r.err, "--drop-frames '('"));
  run_result_free(&r);
}

/* Debian's own C++ program: g++'s cc1plus compiling a small C++ file, traced at 1e-3. Its
 * output is the untraced run's, and every C++ function name it shows is demangled. */
CTS_TEST(debian_cc1plus) {
  CTS_ASSERT(setup());
  char *pa[] = {"/usr/bin/g++", "-print-prog-name=cc1plus", NULL},
       *ma[] = {"/usr/bin/g++", "-print-multiarch", NULL};
  run_result_t r1, r2;
  if (access("/usr/bin/g++", X_OK) != 0 || !run_cmd(pa, NULL, 30, &r1)) CTS_SKIP("no g++");
  CTS_ASSERT(run_cmd(ma, NULL, 30, &r2) && r1.exit_code == 0 && r2.exit_code == 0);
  r1.out[strcspn(r1.out, "\n")] = '\0';
  r2.out[strcspn(r2.out, "\n")] = '\0';
  char src[400], plain[400], traced[400], t2[400];
  snprintf(src, sizeof src, "%s/in.cpp", dir);
  snprintf(plain, sizeof plain, "%s/plain.s", dir);
  snprintf(traced, sizeof traced, "%s/traced.s", dir);
  snprintf(t2, sizeof t2, "%s/cc1plus.ctf", dir);
  FILE *f = fopen(src, "w");
  CTS_ASSERT(f);
  fputs(
      "#include <map>\n#include <string>\n#include <vector>\n"
      "long f(int k) {\n  std::map<std::string, std::vector<long>> m;\n"
      "  for (int i = 0; i < k; i++) m[std::to_string(i)].push_back(i);\n"
      "  return (long)m.size();\n}\n",
      f);
  CTS_ASSERT(fclose(f) == 0);
  char *cc[] = {r1.out, "-quiet", "-imultiarch", r2.out, "-D_GNU_SOURCE", src, "-o", plain, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(cc, NULL, 120, &r) && r.exit_code == 0);
  run_result_free(&r);
  char *rec[] = {CTS_TEST_CTFSCOPE,
                 "record",
                 "-q",
                 "-r",
                 "1e-3",
                 "-o",
                 t2,
                 "--",
                 r1.out,
                 "-quiet",
                 "-imultiarch",
                 r2.out,
                 "-D_GNU_SOURCE",
                 src,
                 "-o",
                 traced,
                 NULL};
  CTS_ASSERT(run_cmd(rec, NULL, 120, &r) && r.exit_code == 0);
  run_result_free(&r);
  char *cmp[] = {"/usr/bin/cmp", plain, traced, NULL};
  CTS_ASSERT(run_cmd(cmp, NULL, 30, &r) && r.exit_code == 0);
  run_result_free(&r);
  char *out = ctfscope("top", (const char *[]){"--by", "function", "-n", "0", "--json", t2, NULL});
  CTS_ASSERT(out && strstr(out, "\"mangled\": \"_Z") && !strstr(out, "\"function\": \"_Z"));
  free(out);
  run_result_free(&r1);
  run_result_free(&r2);
}

/* The Rust program: Vec growth, String and Box sites at the program's functions. */
CTS_TEST(rust_sites) {
  if (!CTS_TEST_RUST_SITES[0]) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0 && system("apt-cache show rustc > /dev/null 2>&1") == 0)
      CTS_FAIL("rustc is installable (Debian's rustc) but not installed, and CI=true");
    CTS_SKIP("rustc is not installed: no Rust program to trace");
  }
  CTS_ASSERT(setup());
  char rtrace[400];
  snprintf(rtrace, sizeof rtrace, "%s/rust.ctf", dir);
  char *expect_argv[] = {CTS_TEST_RUST_SITES, "--expect", NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(expect_argv, NULL, 60, &r) && r.exit_code == 0);
  expect_t rust[4];
  size_t n = 0;
  for (char *line = strtok(r.out, "\n"); line && n < 4; line = strtok(NULL, "\n"))
    if (sscanf(line, "%31s %lf", rust[n].site, &rust[n].bytes) == 2) n++;
  run_result_free(&r);
  CTS_ASSERT_EQ_U64(n, 3);
  char *rec_argv[] = {CTS_TEST_CTFSCOPE,   "record", "-q", "-r", "1", "-o", rtrace, "--",
                      CTS_TEST_RUST_SITES, NULL};
  CTS_ASSERT(run_cmd(rec_argv, NULL, 120, &r) && r.exit_code == 0);
  run_result_free(&r);
  for (size_t i = 0; i < n; i++) {
    char name[192]; /* "rust_sites::" and a site name of up to 159 bytes */
    snprintf(name, sizeof name, "rust_sites::%s", rust[i].site);
    const double got = site_bytes_in(rtrace, name, NULL);
    CTS_ASSERT_MSG(got == rust[i].bytes, "%s: %.0f bytes, expected %.0f", name, got, rust[i].bytes);
  }
  /* The allocator's frames, demangled with their symbols; and --no-demangle. */
  char *out = ctfscope("top", (const char *[]){"--by", "function", "--json",
                                               "--keep-allocator-frames", rtrace, NULL});
  CTS_ASSERT(out && strstr(out, "\"function\": \"<alloc::") && strstr(out, "\"mangled\": \"_"));
  free(out);
  out = ctfscope("top", (const char *[]){"--by", "function", "--no-demangle", rtrace, NULL});
  CTS_ASSERT(out && strstr(out, "site_vec") && !strstr(out, "rust_sites::site_vec"));
  free(out);
}

int main(int argc, char **argv) {
  const int rc = cts_test_main(argc, argv);
  if (trace[0]) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  }
  return rc;
}
