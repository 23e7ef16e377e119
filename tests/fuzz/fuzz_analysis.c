/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the CLI's analysis front ends on one trace. The input is a trace (any
 * bytes: memtrace plain or gzip, mirage-profile, or neither) and every analysis command
 * runs on it in-process, as `ctfscope COMMAND ... TRACE` would, in its output modes:
 * info (text, JSON with packets), dump, top (flat by line/function/file, --tree,
 * --inverted; text, JSON, CSV), leaks, stats (text with bars, JSON, CSV, SVG), export
 * (folded, pprof, chrome, csv), diff of the trace against itself, subsample, filter,
 * symbolize (against the fuzzer's own ELF file), and the re-writing (transcode) behind them. Their
 * standard output goes to /dev/null and their files to a private directory (fuzz_file.h).
 *
 * Besides memory errors and undefined behaviour (ASan/UBSan) and leaks across inputs, it
 * aborts when a command returns anything but a documented exit code (docs/exit-codes.md:
 * 0 to 4). The work per input is bounded by the input's length (run with -max_len; the
 * replayed corpus holds inputs of at most 8 KiB, besides a few real traces up to 27 KiB). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctfscope/memtrace.h>

#include "analysis/transcode.h"
#include "cli/cli.h"
#include "fuzz_check.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TRACE  "@T" /* replaced by the input's path */
#define OUTPUT "@O" /* replaced by an output file's path */
#define SVG    "@S"

typedef struct run {
  const char *name;
  int (*cmd)(int argc, char **argv);
  const char *args[12]; /* after the command name, NULL-terminated */
} run_t;

static const run_t runs[] = {
    {"info", cmd_info, {"-q", TRACE}},
    {"info", cmd_info, {"-q", "--json", "--packets", TRACE}},
    {"dump", cmd_dump, {"-q", "-o", OUTPUT, TRACE}},
    {"top", cmd_top, {"-q", "-n", "0", TRACE}},
    {"top", cmd_top, {"-q", "--by", "function", "-s", "count", "--json", TRACE}},
    {"top", cmd_top, {"-q", "--by", "file", "-s", "peak", "--csv", TRACE}},
    {"top", cmd_top, {"-q", "-s", "live", "--csv", TRACE}},
    {"top", cmd_top, {"-q", "--tree", "--min-percent", "0", "--depth", "64", TRACE}},
    {"top", cmd_top, {"-q", "--tree", "--by", "function", "--json", TRACE}},
    {"top", cmd_top, {"-q", "--inverted", "--min-percent", "0", TRACE}},
    {"top", cmd_top, {"-q", "--by", "type", "-s", "alive", TRACE}}, /* task traces */
    {"leaks", cmd_leaks, {"-q", "-n", "0", TRACE}},
    {"leaks", cmd_leaks, {"-q", "--by", "function", "--json", TRACE}},
    {"leaks", cmd_leaks, {"-q", "--by", "file", "--csv", TRACE}},
    {"stats", cmd_stats, {"-q", "--bars", TRACE}},
    {"stats", cmd_stats, {"-q", "--json", "--svg", SVG, TRACE}},
    {"stats", cmd_stats, {"-q", "--csv", TRACE}},
    {"export", cmd_export, {"-q", "-f", "folded", "-o", OUTPUT, TRACE}},
    {"export", cmd_export, {"-q", "-f", "folded", "--value", "count", "-o", OUTPUT, TRACE}},
    {"export", cmd_export, {"-q", "-f", "pprof", "-o", OUTPUT, TRACE}},
    {"export", cmd_export, {"-q", "-f", "chrome", "-o", OUTPUT, TRACE}},
    {"export", cmd_export, {"-q", "-f", "csv", "-o", OUTPUT, TRACE}},
    {"diff", cmd_diff, {"-q", "-n", "0", TRACE, TRACE}},
    {"diff", cmd_diff, {"-q", "-m", "count", "--no-normalize", "--json", TRACE, TRACE}},
    {"diff", cmd_diff, {"-q", "--by", "function", "--csv", TRACE, TRACE}},
    {"subsample", cmd_subsample, {"-q", "--factor", "3", "-o", OUTPUT, TRACE}},
    {"filter", cmd_filter, {"-q", "--from", "0.001", "--to", "0.5", "-o", OUTPUT, TRACE}},
    /* The codes named from the fuzzer's own ELF file: whatever addresses the input holds. */
    {"symbolize", cmd_symbolize, {"-q", "--elf", "/proc/self/exe", "-o", OUTPUT, TRACE}},
};

static int devnull = -1;

/* Runs one command with stdout on /dev/null; returns its exit code. */
static int run_command(const run_t *r, const char *trace) {
  char out[128], svg[128];
  fuzz_out_path(out, sizeof out, "out");
  fuzz_out_path(svg, sizeof svg, "hist.svg");
  char *argv[16];
  int argc = 0;
  argv[argc++] = (char *)r->name;
  for (size_t i = 0; r->args[i]; i++) {
    const char *a = r->args[i];
    argv[argc++] = (char *)(strcmp(a, TRACE) == 0    ? trace
                            : strcmp(a, OUTPUT) == 0 ? out
                            : strcmp(a, SVG) == 0    ? svg
                                                     : a);
  }
  argv[argc] = NULL;
  fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  CHECK(saved >= 0 && dup2(devnull, STDOUT_FILENO) >= 0);
  cli_set_command(r->name);
  const int code = r->cmd(argc, argv);
  fflush(stdout);
  CHECK(dup2(saved, STDOUT_FILENO) >= 0);
  close(saved);
  return code;
}

static int discard(void *ud, const void *p, size_t n) {
  (void)ud, (void)p, (void)n;
  return 0;
}

/* The re-writing behind subsample and filter (analysis/transcode.h): the whole input
 * through the transcoder, the output discarded. */
static void transcode(const uint8_t *data, size_t size, uint16_t version,
                      cts_mt_encoding_t encoding) {
  cts_transcode_t t;
  if (cts_transcode_init(&t, version, encoding, discard, NULL) == 0 &&
      cts_transcode_feed(&t, data, size) == 0)
    (void)cts_transcode_finish(&t);
  cts_transcode_fini(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz_file_t input = FUZZ_FILE_INIT;
  if (devnull < 0) {
    devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    CHECK(devnull >= 0);
  }
  const char *trace = fuzz_file_set(&input, data, size);
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    const int code = run_command(&runs[i], trace);
    if (code < 0 || code > 4) {
      fprintf(stderr, "ctfscope %s: exit code %d\n", runs[i].name, code);
      abort();
    }
  }
  transcode(data, size, 0, CTS_MT_ENCODING_MEMTRACE); /* the source's version, byte for byte */
  transcode(data, size, 3, CTS_MT_ENCODING_COMPACT);
  return 0;
}
