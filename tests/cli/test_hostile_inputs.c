/* SPDX-License-Identifier: MIT */
/* Every command on a generated set of bad inputs (issue 17): an empty file, a directory, a
 * missing file, a FIFO, random bytes, a valid trace cut at sampled points and with sampled
 * bit flips, huge declared sizes and counts, a task trace cut and bit-flipped, bad gzip
 * streams. For each run: the exit code documented in docs/exit-codes.md (1 for bad input, 3
 * for a file that cannot be read, 2 for an allocation view of a task trace, and for damaged
 * traces the same verdict in every command as in dump), no sanitizer report (the asan
 * preset runs this too) and an end within RUN_LIMIT_S seconds. Sampled: 540 runs, about
 * 15 s in the dev build and 25-50 s in asan on two busy cores. */
#include <sys/stat.h>

#include "../run_cmd.h"
#include "../test.h"
#include "hostile_traces.h"

enum { RUN_LIMIT_S = 10 };
#define NELEM(a) (sizeof(a) / sizeof *(a))

static char dir[64];
static char good[128]; /* a valid trace, for diff's other side */

/* The commands, INPUT standing for the input. */
static const char *const commands[][8] = {
    {"info", "INPUT", NULL},
    {"dump", "INPUT", NULL},
    {"stats", "INPUT", NULL},
    {"top", "INPUT", NULL},
    {"top", "--tree", "INPUT", NULL},
    {"leaks", "INPUT", NULL},
    {"diff", "--no-normalize", "INPUT", good, NULL},
    {"export", "-f", "csv", "INPUT", NULL},
    {"export", "-f", "folded", "INPUT", NULL},
    {"export", "-f", "chrome", "INPUT", NULL},
    {"export", "-f", "pprof", "-o", "/dev/null", "INPUT", NULL},
    {"subsample", "--factor", "3", "-o", "/dev/null", "INPUT", NULL},
    {"filter", "--from", "0", "-o", "/dev/null", "INPUT", NULL},
    {"symbolize", "--elf", CTS_TEST_CTFSCOPE, "-o", "/dev/null", "INPUT", NULL},
    {"convert", "INPUT", "CONVERT_DIR", NULL},
    {"report", "-o", "/dev/null", "INPUT", NULL},
};

typedef struct input {
  char path[160];
  const char *what;
  int expected; /* -1: whatever dump says, which must be 0 or 1 */
  bool fifo_of; /* path is a file served through a fresh FIFO to each command */
  bool tasks;   /* a damaged task trace (still recognised as one) */
} input_t;

static input_t inputs[96];
static size_t ninputs;

static input_t *add_input(const char *name, const char *what, int expected) {
  input_t *in = &inputs[ninputs++];
  snprintf(in->path, sizeof in->path, "%s/%s", dir, name);
  in->what = what;
  in->expected = expected;
  return in;
}

static void write_file(const char *path, const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) abort();
}

static uint8_t *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) abort();
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  uint8_t *p = malloc(*n ? *n : 1);
  if (fread(p, 1, *n, f) != *n) abort();
  fclose(f);
  return p;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_random(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Offsets of the packets of a memtrace trace (v2: sizes in bits at +4). */
static size_t packet_offsets(const uint8_t *p, size_t n, size_t *off, size_t max) {
  size_t k = 0;
  for (size_t at = 0; at + 66 <= n && k < max;) {
    uint32_t bits;
    memcpy(&bits, p + at + 4, 4);
    off[k++] = at;
    if (bits / 8 < 66) break;
    at += bits / 8;
  }
  return k;
}

static void make_inputs(void) {
  strcpy(dir, "/tmp/cts-hostile-inputs-XXXXXX");
  if (!mkdtemp(dir)) abort();
  ht_spec_t s = ht_plain();
  s.nallocs = 60;
  s.collect = true;
  snprintf(good, sizeof good, "%s/good.ctf", dir);
  if (ht_write(&s, good) != 0) abort();
  size_t n;
  uint8_t *trace = read_file(good, &n);

  write_file(add_input("empty.ctf", "an empty file", 1)->path, trace, 0);
  mkdir(add_input("a-directory", "a directory", 3)->path, 0755);
  add_input("missing.ctf", "a missing file", 3);
  input_t *fifo = add_input("good.ctf", "a FIFO", 0);
  fifo->fifo_of = true;
  for (int i = 0; i < 3; i++) {
    static const size_t sizes[] = {17, 300, 5000};
    uint8_t buf[5000];
    for (size_t k = 0; k < sizes[i]; k++) buf[k] = (uint8_t)next_random();
    if (i == 2) memcpy(buf, trace, 4); /* random bytes after a right magic */
    char name[32];
    snprintf(name, sizeof name, "random-%d.ctf", i);
    write_file(add_input(name, "random bytes", 1)->path, buf, sizes[i]);
  }
  /* Cut at sampled points: in and around the first headers, and spread over the rest. */
  const size_t cuts[] = {1, 20, 66, 67, n / 4, n / 2, n - 9, n - 1};
  for (size_t i = 0; i < NELEM(cuts); i++) {
    char name[32];
    snprintf(name, sizeof name, "cut-%zu.ctf", cuts[i]);
    write_file(add_input(name, "a truncated trace", -1)->path, trace, cuts[i]);
  }
  /* Single bit flips at sampled places. */
  uint8_t *copy = malloc(n);
  for (int i = 0; i < 7; i++) {
    memcpy(copy, trace, n);
    const size_t at = (size_t)(next_random() % n);
    copy[at] ^= (uint8_t)(1u << (next_random() % 8));
    char name[32];
    snprintf(name, sizeof name, "flip-%zu.ctf", at);
    write_file(add_input(name, "a trace with a bit flipped", -1)->path, copy, n);
  }
  /* Huge declared sizes: a packet of 512 MiB, a packet claiming 2^64-1 allocations. */
  size_t off[16];
  const size_t npackets = packet_offsets(trace, n, off, 16);
  for (size_t k = 0; k < npackets && k < 3; k++) {
    memcpy(copy, trace, n);
    const uint32_t huge_bits = 0xfffffff8u;
    memcpy(copy + off[k] + 4, &huge_bits, 4);
    char name[40];
    snprintf(name, sizeof name, "huge-packet-%zu.ctf", k);
    write_file(add_input(name, "a huge packet size", 1)->path, copy, n);
    memcpy(copy, trace, n);
    const uint64_t huge_id = UINT64_MAX;
    memcpy(copy + off[k] + 58, &huge_id, 8);
    snprintf(name, sizeof name, "huge-ids-%zu.ctf", k);
    /* The trace-info packet's ids are not read: dump's verdict, like the others'. */
    write_file(add_input(name, "a huge allocation count", k ? 1 : -1)->path, copy, n);
  }
  /* Huge counts in valid events: 2^63 - 1 samples of 2^63 - 2 words. */
  ht_spec_t big = ht_plain();
  big.nallocs = 3;
  big.length = (uint64_t)INT64_MAX - 1;
  big.nsamples = (uint64_t)INT64_MAX;
  if (ht_write(&big, add_input("huge-samples.ctf", "huge sample counts", 0)->path) != 0) abort();
  /* A task trace cut and bit-flipped (past its first 20 bytes, which say what it is). */
  char known[512];
  snprintf(known, sizeof known, "%s/tasks/known.ctf", cts_test_data_dir());
  size_t kn;
  uint8_t *tasks = read_file(known, &kn);
  uint8_t *tcopy = malloc(kn);
  for (int i = 0; i < 4; i++) {
    char name[40];
    size_t len = kn;
    memcpy(tcopy, tasks, kn);
    if (i < 2) {
      len = 20 + (size_t)(next_random() % (kn - 20));
      snprintf(name, sizeof name, "tasks-cut-%zu.ctf", len);
    } else {
      const size_t at = 20 + (size_t)(next_random() % (kn - 20));
      tcopy[at] ^= (uint8_t)(1u << (next_random() % 8));
      snprintf(name, sizeof name, "tasks-flip-%zu.ctf", at);
    }
    input_t *in =
        add_input(name, i < 2 ? "a truncated task trace" : "a task trace with a bit flipped", -1);
    in->tasks = true;
    write_file(in->path, tcopy, len);
  }
  free(tcopy);
  free(tasks);
  /* gzip: cut short, garbage after the magic, a valid gzip of random bytes. */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "gzip -c '%s' | head -c 150 > '%s'", good,
           add_input("cut.ctf.gz", "a truncated gzip stream", 1)->path);
  if (system(cmd) != 0) abort();
  static const uint8_t garbage[] = "\x1f\x8b\x08\x00 this is not deflate data at all";
  write_file(add_input("garbage.ctf.gz", "a corrupt gzip stream", 1)->path, garbage,
             sizeof garbage - 1);
  snprintf(cmd, sizeof cmd, "head -c 3000 /dev/urandom | gzip -c > '%s'",
           add_input("random.ctf.gz", "gzip of random bytes", 1)->path);
  if (system(cmd) != 0) abort();
  free(copy);
  free(trace);
}

/* Runs one command on one input; false with the reason printed if it crashed, hung or
 * printed a sanitizer report. */
static bool run_one(const char *const *cmd, const input_t *in, run_result_t *r) {
  char fifo[200], conv[200];
  const char *path = in->path;
  if (in->fifo_of) {
    snprintf(fifo, sizeof fifo, "%s/in.fifo", dir);
    ht_fifo(fifo, in->path);
    path = fifo;
  }
  snprintf(conv, sizeof conv, "%s/converted", dir);
  char *argv[12] = {CTS_TEST_CTFSCOPE};
  size_t k = 1;
  for (; cmd[k - 1]; k++) {
    const char *a = cmd[k - 1];
    argv[k] = (char *)(strcmp(a, "INPUT") == 0 ? path : strcmp(a, "CONVERT_DIR") == 0 ? conv : a);
  }
  argv[k] = NULL;
  const bool started = run_cmd(argv, "/dev/null", RUN_LIMIT_S, r);
  while (waitpid(-1, NULL, WNOHANG) > 0) { /* the FIFO's writer */
  }
  if (!started) return false;
  if (r->timed_out || r->signal) {
    fprintf(stderr, "  %s on %s (%s): %s\n", cmd[0], in->path, in->what,
            r->timed_out ? "did not end within the limit" : "killed by a signal");
    return false;
  }
  if (strstr(r->err, "Sanitizer") || strstr(r->err, "runtime error:")) {
    fprintf(stderr, "  %s on %s (%s): sanitizer report:\n%s", cmd[0], in->path, in->what, r->err);
    return false;
  }
  return true;
}

/* Whether cmd is `name`, with `arg` (if not NULL) among its first two arguments. */
static bool is(const char *const *cmd, const char *name, const char *arg) {
  if (strcmp(cmd[0], name) != 0) return false;
  if (!arg) return true;
  for (int i = 1; i <= 2 && cmd[i]; i++)
    if (strcmp(cmd[i], arg) == 0) return true;
  return false;
}

/* What cmd must exit with on an input whose verdict (dump's) is `verdict`. */
static int expected_code(const char *const *cmd, const input_t *in, int verdict) {
  if (in->tasks) {
    /* Allocation views of a task trace are usage errors; rewriting one is refused. */
    if (is(cmd, "top", "--tree") || is(cmd, "export", "folded") || is(cmd, "export", "pprof") ||
        is(cmd, "diff", NULL))
      return 2;
    if (is(cmd, "subsample", NULL) || is(cmd, "filter", NULL) || is(cmd, "symbolize", NULL))
      return 1;
    return verdict;
  }
  if (strcmp(cmd[0], "convert") == 0)
    return verdict == 3 ? 3 : 1; /* reads task traces only: any memtrace input is refused */
  return verdict;
}

CTS_TEST(every_command_gives_the_documented_verdict_on_bad_input) {
  make_inputs();
  size_t runs = 0, wrong = 0;
  for (size_t i = 0; i < ninputs; i++) {
    const input_t *in = &inputs[i];
    int verdict = in->expected;
    if (verdict < 0) { /* a damaged trace: dump's verdict, which must be 0 or 1 */
      run_result_t r;
      CTS_ASSERT(run_one(commands[1], in, &r));
      verdict = r.exit_code;
      CTS_ASSERT_MSG(verdict == 0 || verdict == 1, "dump on %s (%s): exit %d: %s", in->path,
                     in->what, verdict, r.err);
      run_result_free(&r);
    }
    for (size_t c = 0; c < NELEM(commands); c++) {
      run_result_t r;
      CTS_ASSERT(run_one(commands[c], in, &r));
      runs++;
      const int want = expected_code(commands[c], in, verdict);
      if (r.exit_code != want) { /* every mismatch is listed, then the test fails */
        fprintf(stderr, "  %s %s on %s (%s): exit %d, expected %d: %s\n", commands[c][0],
                commands[c][1], in->path, in->what, r.exit_code, want, r.err);
        wrong++;
      }
      run_result_free(&r);
    }
  }
  fprintf(stderr, "  %zu runs on %zu inputs, %zu with another exit code\n", runs, ninputs, wrong);
  CTS_ASSERT_EQ_U64(wrong, 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) abort();
}

CTS_TEST_MAIN()
