/* SPDX-License-Identifier: MIT */
/* The one mapping from the loaders' errors to exit codes (cli_load_exit, src/cli/load.h),
 * and the kind detection of analysis/load.h it serves: what cts_trace_detect returns and
 * says through the log callback for each sort of input, and the exit code `ctfscope` gives
 * for it (docs/exit-codes.md). In-process: no binary is run. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctfscope/tasks.h>

#include "../../src/cli/cli.h"
#include "../../src/cli/load.h"
#include "../test.h"
#include "../test_buf.h"

static char tmpdir[64];
#define MAX_FILES 32
static char files[MAX_FILES][128];
static unsigned nfiles;

/* A path in the test's directory, removed at exit. */
static const char *tmp_path(const char *name) {
  if (nfiles == MAX_FILES) abort(); /* a test was added: raise MAX_FILES */
  char *p = files[nfiles++];
  snprintf(p, sizeof files[0], "%s/%s", tmpdir, name);
  return p;
}

typedef struct logged {
  unsigned errors, warnings;
  char last[2048];
} logged_t;

static void on_log(void *ud, cts_log_level_t level, const char *msg) {
  logged_t *l = ud;
  if (level == CTS_LOG_ERROR)
    l->errors++;
  else
    l->warnings++;
  snprintf(l->last, sizeof l->last, "%s", msg);
}

typedef struct exit_case {
  int err;
  bool kept, input_error, by_hook;
  int want;
} exit_case_t;

CTS_TEST(exit_codes_of_the_loaders_errors) {
  static const exit_case_t cases[] = {
      {0, false, false, false, CLI_EXIT_OK},
      {0, true, true, true, CLI_EXIT_OK},
      /* a corrupt trace whose figures were kept: 1, whatever the code */
      {CTS_E_TRUNCATED_HEADER, true, false, false, CLI_EXIT_DATA},
      {CTS_E_BAD_COMPRESSION, true, true, false, CLI_EXIT_DATA},
      {CTS_E_IO, true, true, false, CLI_EXIT_DATA},
      {-EIO, true, false, false, CLI_EXIT_DATA},
      /* the input could not be read */
      {-ENOENT, false, true, false, CLI_EXIT_IO},
      {-ENOMEM, false, true, false, CLI_EXIT_IO},
      {CTS_E_IO, false, true, false, CLI_EXIT_IO},
      {-EISDIR, false, false, false, CLI_EXIT_IO},
      {CTS_E_IO, false, false, false, CLI_EXIT_IO},
      /* the caller's hook stopped reading: the caller says why */
      {-ENOMEM, false, false, true, CLI_EXIT_IO},
      {CTS_E_NOMEM, true, false, true, CLI_EXIT_IO},
      /* out of memory, a bad configuration */
      {CTS_E_NOMEM, false, false, false, CLI_EXIT_INTERNAL},
      {-ENOMEM, false, false, false, CLI_EXIT_INTERNAL},
      {CTS_E_INVAL, false, false, false, CLI_EXIT_INTERNAL},
      /* cts_trace_detect: not a trace, too many piped inputs */
      {CTS_E_BAD_MAGIC, false, false, false, CLI_EXIT_DATA},
      {CTS_E_LIMIT, false, false, false, CLI_EXIT_USAGE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const exit_case_t *c = &cases[i];
    CTS_ASSERT_MSG(cli_load_exit(c->err, c->kept, c->input_error, c->by_hook) == c->want,
                   "case %zu (%s, kept %d, input %d, hook %d): %d, not %d", i, cts_err_name(c->err),
                   c->kept, c->input_error, c->by_hook,
                   cli_load_exit(c->err, c->kept, c->input_error, c->by_hook), c->want);
  }
}

static void save(const char *path, const void *data, size_t len) {
  CTS_ASSERT_MSG(spit(path, data, len), "cannot write %s", path);
}

static uint64_t no_clock(void *ud) {
  (void)ud;
  return 0;
}

/* A task ring's first packet headers: what cts_mprof_is_trace recognises. */
static void save_task_ring(const char *path) {
  static uint8_t mem[1024];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(4) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = mem;
  cfg.buffer_size = sizeof mem;
  cfg.packets = 4;
  cfg.clock = no_clock;
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, sizeof state, &cfg), 0);
  save(path, mem, sizeof mem);
}

/* Detects path strictly or not; checks the error, the kind, the messages (the last one
 * contains `says`) and the exit code the CLI gives. */
static void detect(const char *path, bool strict, int want_err, cts_trace_kind_t want_kind,
                   const char *says, int want_exit) {
  logged_t l = {0};
  const cts_log_t log = {.fn = on_log, .user_data = &l};
  cts_trace_kind_t kind = (cts_trace_kind_t)-1;
  const int err = cts_trace_detect(path, &kind, strict, &log);
  CTS_ASSERT_MSG(err == want_err, "%s: %s, not %s", path, cts_err_name(err),
                 cts_err_name(want_err));
  if (!err) CTS_ASSERT_EQ_INT(kind, want_kind);
  CTS_ASSERT_EQ_INT(l.errors, err ? 1 : 0);
  CTS_ASSERT_EQ_INT(l.warnings, 0);
  if (says) CTS_ASSERT_MSG(strstr(l.last, says), "%s: said '%s', not '%s'", path, l.last, says);
  CTS_ASSERT_EQ_INT(cli_load_exit(err, false, false, false), want_exit);
  /* The CLI's wrapper: -1 for a trace, else the same exit code. */
  cli_trace_kind_t k;
  const int code = strict ? cli_trace_detect(path, &k) : cli_trace_detect_lenient(path, &k);
  CTS_ASSERT_EQ_INT(code, err ? want_exit : -1);
}

CTS_TEST(detect_kinds_and_refusals) {
  static const uint8_t memtrace[] = {0xc1, 0x1f, 0xfc, 0xc1, 0, 0, 0, 0};
  const char *mt = tmp_path("trace.ctf");
  save(mt, memtrace, sizeof memtrace);
  detect(mt, true, 0, CTS_TRACE_MEMTRACE, NULL, CLI_EXIT_OK);
  const char *tasks = tmp_path("tasks.ctf");
  save_task_ring(tasks);
  detect(tasks, true, 0, CTS_TRACE_TASKS, NULL, CLI_EXIT_OK);
  const char *gz = tmp_path("trace.ctf.gz");
  save(gz, "\x1f\x8b\x08\x00\x00\x00\x00\x00", 8);
  detect(gz, true, 0, CTS_TRACE_MEMTRACE, NULL, CLI_EXIT_OK);
  /* An empty file is left to the memtrace reader, which names the offset. */
  const char *empty = tmp_path("empty.ctf");
  save(empty, "", 0);
  detect(empty, true, 0, CTS_TRACE_MEMTRACE, NULL, CLI_EXIT_OK);

  const char *dir = tmp_path("ctf-dir");
  CTS_ASSERT_EQ_INT(mkdir(dir, 0700), 0);
  detect(dir, true, -EISDIR, 0, "is a directory: pass a trace file", CLI_EXIT_IO);
  detect(dir, false, -EISDIR, 0, "is a directory: pass a trace file", CLI_EXIT_IO);
  const char *stream = tmp_path("ctf-dir/stream");
  save(stream, memtrace, sizeof memtrace);
  detect(dir, true, -EISDIR, 0, "(a CTF trace): pass its stream file", CLI_EXIT_IO);

  const char *meta = tmp_path("metadata");
  static const char tsdl[] = "/* CTF 1.8 */\ntrace {\n  major = 1;\n};\n";
  save(meta, tsdl, sizeof tsdl - 1);
  detect(meta, true, CTS_E_BAD_MAGIC, 0, "this is CTF metadata", CLI_EXIT_DATA);
  detect(meta, false, CTS_E_BAD_MAGIC, 0, "this is CTF metadata", CLI_EXIT_DATA);

  const char *junk = tmp_path("junk.bin");
  save(junk,
       "\x7f"
       "ELF and more bytes",
       19);
  detect(junk, true, CTS_E_BAD_MAGIC, 0, "starts with bytes 7f 45 4c 46", CLI_EXIT_DATA);
  detect(junk, false, 0, CTS_TRACE_MEMTRACE, NULL, CLI_EXIT_OK); /* the reader says it */

  const char *missing = tmp_path("missing.ctf");
  detect(missing, true, -ENOENT, 0, "cannot read '", CLI_EXIT_IO);
  detect(missing, false, 0, CTS_TRACE_MEMTRACE, NULL, CLI_EXIT_OK);
}

/* FIFOs are opened once and registered, 8 at most: the 9th is a usage error. Each is opened
 * for writing here first (so that opening it to read does not wait) with a memtrace
 * packet's first bytes in it. */
CTS_TEST(too_many_piped_inputs_is_a_usage_error) {
  static const uint8_t memtrace[24] = {0xc1, 0x1f, 0xfc, 0xc1};
  int fds[9];
  for (int i = 0; i < 9; i++) {
    char name[16];
    snprintf(name, sizeof name, "fifo%d", i);
    const char *path = tmp_path(name);
    CTS_ASSERT_EQ_INT(mkfifo(path, 0600), 0);
    fds[i] = open(path, O_RDWR | O_CLOEXEC);
    CTS_ASSERT(fds[i] >= 0);
    CTS_ASSERT_EQ_INT(write(fds[i], memtrace, sizeof memtrace), (int)sizeof memtrace);
    detect(path, true, i < 8 ? 0 : CTS_E_LIMIT, CTS_TRACE_MEMTRACE,
           i < 8 ? NULL : "too many piped inputs", i < 8 ? CLI_EXIT_OK : CLI_EXIT_USAGE);
  }
  for (int i = 0; i < 9; i++) close(fds[i]);
}

static void cleanup(void) {
  for (unsigned i = nfiles; i-- > 0;)
    if (unlink(files[i]) != 0) rmdir(files[i]);
  if (rmdir(tmpdir) != 0) fprintf(stderr, "cannot remove %s: %s\n", tmpdir, strerror(errno));
}

int main(int argc, char **argv) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cts-cli-load-XXXXXX");
  if (!mkdtemp(tmpdir)) {
    fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  atexit(cleanup);
  return cts_test_main(argc, argv);
}
