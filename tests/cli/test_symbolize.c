/* SPDX-License-Identifier: MIT */
/* `ctfscope symbolize`: a trace whose codes are this test's own return addresses, written
 * without locations, is re-written with them named from this executable's ELF file (at its
 * load bias, FILE@BASE): a plain call gets its function and line, a call inside an inlined
 * function gets two locations (the caller at the inlined call's line, then the inlined
 * function), a code the source trace had named keeps its name, a code in no ELF file stays
 * unresolved and is counted; the events are those of the source. Then the errors: an ELF
 * file without DWARF (names from the symbol table, a warning), with neither DWARF nor
 * symbols, truncated, or not an ELF file at all, a missing one, and outputs that would
 * overwrite an input. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctfscope/memtrace.h>

#include "../../src/os/os.h"
#include "../run_cmd.h"
#include "../test.h"

enum { TIMEOUT_S = 60 };

/* CTS_ASSERT for the helpers that return a value (CTS_ASSERT returns from a void test). */
#define NEED(cond)                                                       \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

#define OUTSIDE_CODE 0x10u /* below any load address: in no ELF file */
#define KEPT_CODE    0x20u /* named by the source trace */
#define MAX_EVENTS   8
#define MAX_FRAMES   8

/* ---- the codes: return addresses into the functions below -------------------------- */

/* The return address of its call: a code as the tracers record them. */
__attribute__((noinline)) static uint64_t here(void) {
  return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

/* The empty asm keeps the calls from becoming tail calls (jumps, with no return address
 * inside the caller). */
static const uint32_t direct_line = __LINE__ + 3;
__attribute__((noinline)) static uint64_t direct_site(void) {
  uint64_t r;
  r = here();
  __asm__ volatile("" : "+r"(r));
  return r;
}

static const uint32_t inlined_line = __LINE__ + 3;
static inline __attribute__((always_inline)) uint64_t inlined_site(void) {
  uint64_t r;
  r = here();
  __asm__ volatile("" : "+r"(r));
  return r;
}

static const uint32_t caller_line = __LINE__ + 3;
__attribute__((noinline)) static uint64_t caller_of_inlined(void) {
  uint64_t r;
  r = inlined_site();
  __asm__ volatile("" : "+r"(r));
  return r;
}

/* ---- files ------------------------------------------------------------------------- */

static char dir[64];

__attribute__((destructor)) static void remove_tmp_dir(void) {
  if (!dir[0]) return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static const char *in_dir(const char *name) {
  static char bufs[8][256];
  static unsigned next;
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/cts_symbolize_XXXXXX");
    NEED(mkdtemp(dir));
  }
  char *b = bufs[next++ % 8];
  snprintf(b, 256, "%s/%s", dir, name);
  return b;
}

static int file_write(void *ud, const void *p, size_t n) {
  return fwrite(p, 1, n, ud) == n ? 0 : CTS_E_IO;
}

/* The source trace names KEPT_CODE only. */
static size_t name_kept(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  if (code != KEPT_CODE || max == 0) return 0;
  out[0] = (cts_mt_location_t){.line = 7, .filename = "kept.ml", .defname = "Kept.f"};
  return 1;
}

static uint64_t c_direct, c_inlined;

/* Two allocations and a collection, their codes without locations but KEPT_CODE's. */
static const char *write_source(void) {
  const char *const path = in_dir("codes.ctf");
  FILE *f = fopen(path, "wb");
  NEED(f);
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 0.5;
  cfg.executable_name = "test_symbolize";
  cfg.pid = 42;
  cfg.start_time_us = 1700000000000000ull;
  cfg.write = file_write;
  cfg.write_user_data = f;
  cfg.resolve = name_kept;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  NEED(mem);
  cts_mt_writer_t *w;
  NEED(cts_mt_writer_init(&w, mem, size, &cfg) == 0);
  const uint64_t bt1[] = {OUTSIDE_CODE, c_direct}, bt2[] = {KEPT_CODE, c_inlined};
  uint64_t id;
  NEED(cts_mt_writer_alloc(w, cfg.start_time_us + 10, 4, 1, CTS_MT_SOURCE_MAJOR, bt1, 2, &id) == 0);
  NEED(cts_mt_writer_alloc(w, cfg.start_time_us + 25, 9, 2, CTS_MT_SOURCE_MINOR, bt2, 2, &id) == 0);
  NEED(cts_mt_writer_collect(w, cfg.start_time_us + 40, 0) == 0);
  NEED(cts_mt_writer_close(w) == 0);
  free(mem);
  NEED(fclose(f) == 0);
  return path;
}

/* ---- reading a trace back ------------------------------------------------------------ */

typedef struct read_event {
  cts_mt_event_kind_t kind;
  uint8_t source;
  uint64_t time_us, obj_id, length, nsamples;
  size_t depth;
  uint64_t bt[MAX_FRAMES];
} read_event_t;

typedef struct trace {
  cts_mt_reader_t *reader;
  read_event_t ev[MAX_EVENTS];
  size_t n;
  uint64_t pid;
} trace_t;

static int on_info(void *ud, const cts_mt_info_t *in) {
  ((trace_t *)ud)->pid = in->pid;
  return 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  trace_t *t = ud;
  if (t->n == MAX_EVENTS || ev->backtrace_len > MAX_FRAMES) return CTS_E_LIMIT;
  read_event_t *e = &t->ev[t->n++];
  *e = (read_event_t){ev->kind,   ev->source,   ev->time_us,       ev->obj_id,
                      ev->length, ev->nsamples, ev->backtrace_len, {0}};
  if (ev->backtrace_len) memcpy(e->bt, ev->backtrace, ev->backtrace_len * sizeof *ev->backtrace);
  return 0;
}

/* Reads the whole trace at path into t (reader kept for location look-ups). */
static void read_trace(const char *path, trace_t *t) {
  memset(t, 0, sizeof *t);
  cts_mt_reader_config_t rc;
  cts_mt_reader_config_init(&rc);
  rc.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = t, .on_info = on_info, .on_event = on_event};
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&t->reader, &rc, &h), 0);
  bool input_error;
  CTS_ASSERT_EQ_INT(cts_os_read_memtrace(path, t->reader, NULL, NULL, &input_error), 0);
}

static size_t locations(const trace_t *t, uint64_t code, const cts_mt_location_t **locs) {
  size_t n = 0;
  NEED(cts_mt_reader_lookup_location(t->reader, code, locs, &n) == 0);
  return n;
}

/* ---- running the command -------------------------------------------------------------- */

static bool run(run_result_t *r, const char *const *args) {
  char *argv[16] = {CTS_TEST_CTFSCOPE, "symbolize"};
  size_t n = 2;
  for (; args[n - 2]; n++) argv[n] = (char *)args[n - 2];
  argv[n] = NULL;
  if (!run_cmd(argv, NULL, TIMEOUT_S, r)) return false;
  return !r->signal && !r->timed_out;
}

static char self_elf[4096], self_at_base[4200];

static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  *(uint64_t *)data = info->dlpi_addr; /* the first is the executable: its load bias */
  return 1;
}

/* This executable's path and its FILE@BASE argument; the codes. */
static void setup(void) {
  const ssize_t n = readlink("/proc/self/exe", self_elf, sizeof self_elf - 1);
  CTS_ASSERT(n > 0);
  self_elf[n] = '\0';
  uint64_t bias = 0;
  dl_iterate_phdr(first_object, &bias);
  snprintf(self_at_base, sizeof self_at_base, "%s@0x%llx", self_elf, (unsigned long long)bias);
  c_direct = direct_site();
  c_inlined = caller_of_inlined();
}

static void expect_location(const cts_mt_location_t *l, const char *defname, const char *file,
                            uint32_t line) {
  CTS_ASSERT_STR_EQ(l->defname, defname);
  CTS_ASSERT_STR_EQ(l->filename, file);
  CTS_ASSERT_EQ_U64(l->line, line);
}

CTS_TEST(codes_are_named_from_the_elf_file_and_the_events_kept) {
  setup();
  const char *const src = write_source(), *const out = in_dir("named.ctf");
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"--elf", self_at_base, "--strip-prefix", CTS_SOURCE_DIR,
                                           "-o", out, src, NULL}));
  CTS_ASSERT_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  CTS_ASSERT_MSG(strstr(r.err,
                        "4 codes: 2 with file and line, 0 by function only, 0 by offset, "
                        "1 kept from the trace, 1 in no ELF file (left unresolved)"),
                 "summary: %s", r.err);
  run_result_free(&r);

  trace_t a, b;
  read_trace(src, &a);
  read_trace(out, &b);
  CTS_ASSERT_EQ_U64(b.pid, 42);
  CTS_ASSERT_EQ_U64(b.n, 3);
  CTS_ASSERT_EQ_U64(a.n, b.n);
  CTS_ASSERT(memcmp(a.ev, b.ev, sizeof a.ev) == 0); /* same events, times, ids, codes */

  const cts_mt_location_t *l;
  const char *const file = "tests/cli/test_symbolize.c";
  CTS_ASSERT_EQ_U64(locations(&b, c_direct, &l), 1);
  expect_location(&l[0], "direct_site", file, direct_line);
  CTS_ASSERT_EQ_U64(locations(&b, c_inlined, &l), 2);
  expect_location(&l[0], "caller_of_inlined", file, caller_line);
  expect_location(&l[1], "inlined_site", file, inlined_line);
  CTS_ASSERT_EQ_U64(locations(&b, KEPT_CODE, &l), 1);
  expect_location(&l[0], "Kept.f", "kept.ml", 7);
  CTS_ASSERT_EQ_U64(locations(&b, OUTSIDE_CODE, &l), 0);
  /* The source named none of them. */
  CTS_ASSERT_EQ_U64(locations(&a, c_direct, &l), 0);
  cts_mt_reader_destroy(a.reader);
  cts_mt_reader_destroy(b.reader);
}

/* A copy of this executable through objcopy with `flags` (NULL-terminated, at most 24). */
static const char *stripped_copy(const char *name, const char *const *flags) {
  const char *const path = in_dir(name);
  char *argv[28] = {CTS_TEST_OBJCOPY};
  size_t n = 1;
  for (; flags[n - 1] && n < 25; n++) argv[n] = (char *)flags[n - 1];
  argv[n++] = self_elf;
  argv[n++] = (char *)path;
  argv[n] = NULL;
  run_result_t r;
  NEED(run_cmd(argv, NULL, TIMEOUT_S, &r));
  if (r.exit_code != 0) fprintf(stderr, "objcopy: %s\n", r.err);
  NEED(r.exit_code == 0);
  run_result_free(&r);
  return path;
}

static const char *const strip_debug[] = {"--strip-debug", NULL};

CTS_TEST(an_elf_file_without_dwarf_names_functions_from_its_symbols) {
  setup();
  const char *const src = write_source(), *const out = in_dir("symbols.ctf");
  const char *const elf = stripped_copy("nodebug", strip_debug);
  char arg[4200];
  snprintf(arg, sizeof arg, "%s%s", elf, strrchr(self_at_base, '@'));
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"--elf", arg, "-o", out, src, NULL}));
  CTS_ASSERT_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  CTS_ASSERT_MSG(strstr(r.err, "warning: ") && strstr(r.err, "no DWARF debug information"), "%s",
                 r.err);
  CTS_ASSERT_MSG(strstr(r.err, "0 with file and line, 2 by function only"), "%s", r.err);
  run_result_free(&r);
  trace_t b;
  read_trace(out, &b);
  const cts_mt_location_t *l;
  CTS_ASSERT_EQ_U64(locations(&b, c_direct, &l), 1);
  expect_location(&l[0], "direct_site", "nodebug", 0);
  CTS_ASSERT_EQ_U64(locations(&b, c_inlined, &l), 1);
  expect_location(&l[0], "caller_of_inlined", "nodebug", 0);
  cts_mt_reader_destroy(b.reader);
}

/* Runs symbolize on the test's trace with --elf `elf`; checks the exit code and that stderr
 * holds `message`, and that no output was left. */
static void expect_failure(const char *elf, const char *out, int code, const char *message) {
  const char *const src = write_source();
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"--elf", elf, "-o", out, src, NULL}));
  CTS_ASSERT_MSG(r.exit_code == code, "--elf %s -o %s: exit %d, expected %d: %s", elf, out,
                 r.exit_code, code, r.err);
  CTS_ASSERT_MSG(strstr(r.err, message), "--elf %s: expected '%s' in: %s", elf, message, r.err);
  run_result_free(&r);
}

CTS_TEST(unusable_elf_files_and_outputs_are_errors_not_crashes) {
  setup();
  const char *const out = in_dir("never.ctf");
  /* The dynamic symbols go too (a sanitized build exports the sanitizer's functions), with
   * the sections that refer to them, which llvm-objcopy will not leave dangling. */
  static const char *const strip_all[] = {
      "--strip-all", "-R", ".dynsym",      "-R", ".dynstr",        "-R", ".gnu.hash", "-R",
      ".hash",       "-R", ".gnu.version", "-R", ".gnu.version_r", "-R", ".rela.dyn", "-R",
      ".rela.plt",   "-R", ".dynamic",     NULL};
  expect_failure(stripped_copy("bare", strip_all), out, 1,
                 "no DWARF debug information and no symbol table");
  expect_failure(in_dir("missing.elf"), out, 3, "cannot open");
  expect_failure(write_source(), out, 1, "not a readable ELF file");
  struct stat st;
  CTS_ASSERT(stat(out, &st) != 0); /* nothing written */

  /* This executable cut short, and its header followed by garbage: libelf and libdw must
   * turn them into messages (or names of what is left), never a crash. */
  const char *const cut = in_dir("cut.elf"), *const junk = in_dir("junk.elf");
  FILE *in = fopen(self_elf, "rb"), *fc = fopen(cut, "wb"), *fj = fopen(junk, "wb");
  CTS_ASSERT(in && fc && fj);
  static unsigned char buf[1 << 16];
  const size_t n = fread(buf, 1, sizeof buf, in);
  CTS_ASSERT(n > 4096);
  CTS_ASSERT_EQ_U64(fwrite(buf, 1, 4096, fc), 4096);
  fwrite(buf, 1, 64, fj);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 64; i < sizeof buf; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    fputc((int)(x & 0xFF), fj);
  }
  fclose(in), fclose(fc), fclose(fj);
  const char *const src = write_source();
  for (int i = 0; i < 2; i++) {
    run_result_t r;
    CTS_ASSERT(run(&r, (const char *const[]){"--elf", i ? junk : cut, "-o", out, src, NULL}));
    CTS_ASSERT_MSG(r.exit_code == 0 || r.exit_code == 1, "%s: exit %d: %s", i ? junk : cut,
                   r.exit_code, r.err);
    run_result_free(&r);
  }

  /* An output that is an input would destroy it. */
  expect_failure(self_elf, src, 2, "");
  char self_copy[4200];
  snprintf(self_copy, sizeof self_copy, "%s", stripped_copy("copy.elf", strip_debug));
  expect_failure(self_copy, self_copy, 2, "");
  CTS_ASSERT(stat(self_copy, &st) == 0 && st.st_size > 0);
}

/* Whether two files hold the same bytes. */
static bool same_bytes(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  for (int ca = 0, cb = 0; same && ca != EOF; same = ca == cb) ca = fgetc(fa), cb = fgetc(fb);
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* OCaml's traces name every code already: re-written with memtrace's bucket choices and
 * their own locations, they come out byte for byte as they went in. */
CTS_TEST(a_trace_named_already_is_written_back_unchanged) {
  CTS_REQUIRE_CORPUS(corpus);
  setup();
  const char *const names[] = {"p1_short_lived.r1.ctf", "p1_short_lived.r1.v3.ctf",
                               "p1_short_lived.r1e-2.ctf"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/memtrace/traces/%s", corpus, names[i]);
    const char *const out = in_dir("same.ctf");
    run_result_t r;
    CTS_ASSERT(run(&r, (const char *const[]){"--elf", self_elf, "-o", out, trace, NULL}));
    CTS_ASSERT_MSG(r.exit_code == 0, "%s: exit %d: %s", trace, r.exit_code, r.err);
    CTS_ASSERT_MSG(strstr(r.err, " 0 with file and line"), "%s: %s", trace, r.err);
    run_result_free(&r);
    CTS_ASSERT_MSG(same_bytes(trace, out), "%s changed", trace);
  }
}

CTS_TEST(usage_errors) {
  setup();
  const char *const src = write_source();
  const char *const cases[][6] = {
      {"-o", "x.ctf", src, NULL},                          /* no --elf */
      {"--elf", self_elf, src, NULL},                      /* no output */
      {"--elf", self_elf, "-o", "x.ctf", NULL},            /* no trace */
      {"--elf", "", "-o", "x.ctf", src, NULL},             /* empty file name */
      {"--elf", self_elf, "--encoding", "zip", src, NULL}, /* bad encoding */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_result_t r;
    CTS_ASSERT(run(&r, cases[i]));
    CTS_ASSERT_MSG(r.exit_code == 2, "case %zu: exit %d: %s", i, r.exit_code, r.err);
    run_result_free(&r);
  }
  run_result_t r;
  CTS_ASSERT(run(&r, (const char *const[]){"--help", NULL}));
  CTS_ASSERT(r.exit_code == 0 && strstr(r.out, "--elf FILE[@BASE]"));
  run_result_free(&r);
}

CTS_TEST_MAIN()
