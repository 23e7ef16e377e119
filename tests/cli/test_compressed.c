/* SPDX-License-Identifier: MIT */
/* zstd-compressed traces (include/ctfscope/tracer.h, "Compression"): every command that
 * reads a memtrace trace reads the .zst form as the plain one (same output), from a file
 * and from standard input (a pipe); a stream cut inside its frame reads up to its last
 * complete block and says that the tail was lost. The compressed copies are made here with
 * libzstd the way the tracer's writer makes them: one frame, a block ended at each flush. */
#define _GNU_SOURCE /* memmem */
#include <sys/stat.h>
#include <zstd.h>

#include "../../src/os/os.h"
#include "../run_cmd.h"
#include "../test_buf.h"
#include "../test.h"

/* Compresses `len` bytes in one frame, ending a block every `flush_every` bytes, as the
 * writer does at each flush. `block_ends` (if not NULL) gets the compressed offset of each
 * block end, `*nends` their number. Returns the compressed size. */
static size_t compress_flushed(const char *in, size_t len, size_t flush_every, char *out,
                               size_t cap, size_t *block_ends, size_t *nends) {
  ZSTD_CCtx *const c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
  ZSTD_outBuffer o = {out, cap, 0};
  size_t n = 0;
  for (size_t pos = 0; pos < len; pos += flush_every) {
    const size_t take = len - pos < flush_every ? len - pos : flush_every;
    ZSTD_inBuffer i = {in + pos, take, 0};
    const ZSTD_EndDirective mode = pos + take == len ? ZSTD_e_end : ZSTD_e_flush;
    size_t left;
    do left = ZSTD_compressStream2(c, &o, &i, mode);
    while (left && !ZSTD_isError(left));
    if (block_ends) block_ends[n++] = o.pos;
  }
  if (nends) *nends = n;
  ZSTD_freeCCtx(c);
  return o.pos;
}

typedef struct files {
  char plain[256], zst[256];
} files_t;

static bool make_files(files_t *f) {
  char src[1024];
  snprintf(src, sizeof src, "%s/../../examples/traces/p2_leak.r1e-4.ctf", cts_test_data_dir());
  size_t len;
  char *const data = slurp(src, &len);
  if (!data) return false;
  snprintf(f->plain, sizeof f->plain, "/tmp/cts_compressed_%d.ctf", (int)getpid());
  snprintf(f->zst, sizeof f->zst, "/tmp/cts_compressed_%d.ctf.zst", (int)getpid());
  const size_t cap = ZSTD_compressBound(len) + 4096;
  char *const z = malloc(cap);
  const size_t zlen = compress_flushed(data, len, 20000, z, cap, NULL, NULL);
  const bool ok = spit(f->plain, data, len) && spit(f->zst, z, zlen);
  free(data);
  free(z);
  return ok;
}

static void remove_files(const files_t *f) {
  unlink(f->plain);
  unlink(f->zst);
}

/* Runs ctfscope with argv[1..] where "@" stands for the trace; stdout and the exit code. */
static bool run_on(const char *trace, const char *const args[], run_result_t *r) {
  char *argv[16] = {CTS_TEST_CTFSCOPE};
  int n = 1;
  for (; args[n - 1] && n < 15; n++)
    argv[n] = (char *)(strcmp(args[n - 1], "@") == 0 ? trace : args[n - 1]);
  argv[n] = NULL;
  return run_cmd(argv, NULL, 60, r);
}

/* stdout without the lines that name the file itself (its path, size and compression). */
static void strip_file_lines(char *out, const files_t *f) {
  char *w = out;
  for (char *line = out; *line;) {
    char *const end = strchr(line, '\n');
    const size_t n = end ? (size_t)(end - line + 1) : strlen(line);
    const char *const plain_base = strrchr(f->plain, '/') + 1;
    const bool names_file = memmem(line, n, plain_base, strlen(plain_base)) ||
                            memmem(line, n, "file_size_bytes", 15) ||
                            strncmp(line, "# file:", 7) == 0;
    if (!names_file) memmove(w, line, n), w += n;
    line += n;
  }
  *w = '\0';
}

CTS_TEST(every_reading_command_reads_zstd_as_plain) {
  files_t f;
  CTS_ASSERT(make_files(&f));
  static const char *const commands[][8] = {
      {"dump", "@", NULL},
      {"info", "@", NULL},
      {"info", "--json", "@", NULL},
      {"top", "@", NULL},
      {"top", "--tree", "@", NULL},
      {"leaks", "@", NULL},
      {"stats", "@", NULL},
      {"export", "--format", "folded", "@", NULL},
      {"export", "--format", "chrome", "@", NULL},
      {"diff", "@", "@", NULL},
  };
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
    run_result_t a, b;
    CTS_ASSERT(run_on(f.plain, commands[i], &a));
    CTS_ASSERT(run_on(f.zst, commands[i], &b));
    CTS_ASSERT_MSG(a.exit_code == 0, "%s: exit %d: %s", commands[i][0], a.exit_code, a.err);
    CTS_ASSERT_MSG(b.exit_code == 0, "%s on .zst: exit %d: %s", commands[i][0], b.exit_code, b.err);
    strip_file_lines(a.out, &f);
    strip_file_lines(b.out, &f);
    CTS_ASSERT_MSG(strcmp(a.out, b.out) == 0, "%s %s: outputs differ", commands[i][0],
                   commands[i][1]);
    run_result_free(&a);
    run_result_free(&b);
  }
  /* The commands that write a trace or a report take it too. */
  char out[300];
  snprintf(out, sizeof out, "/tmp/cts_compressed_%d.out", (int)getpid());
  const char *const writers[][10] = {
      {"subsample", "--factor", "2", "-o", out, "@", NULL},
      {"filter", "--from", "0", "-o", out, "@", NULL},
      {"report", "@", "-o", out, NULL},
      {"export", "--format", "pprof", "-o", out, "@", NULL},
  };
  for (size_t i = 0; i < sizeof writers / sizeof *writers; i++) {
    run_result_t r;
    CTS_ASSERT(run_on(f.zst, writers[i], &r));
    CTS_ASSERT_MSG(r.exit_code == 0, "%s on .zst: exit %d: %s", writers[i][0], r.exit_code, r.err);
    run_result_free(&r);
  }
  unlink(out);
  remove_files(&f);
}

CTS_TEST(zstd_from_standard_input) {
  files_t f;
  CTS_ASSERT(make_files(&f));
  char cmd[2048];
  const char *const plain_args[] = {"dump", "@", NULL};
  run_result_t want;
  CTS_ASSERT(run_on(f.plain, plain_args, &want));
  CTS_ASSERT_EQ_INT(want.exit_code, 0);
  snprintf(cmd, sizeof cmd, "%s dump - < %s", CTS_TEST_CTFSCOPE, f.zst);
  char *sh_stdin[] = {"/bin/sh", "-c", cmd, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(sh_stdin, NULL, 60, &r));
  CTS_ASSERT_MSG(r.exit_code == 0, "stdin: %s", r.err);
  strip_file_lines(r.out, &f);
  strip_file_lines(want.out, &f);
  CTS_ASSERT(strcmp(r.out, want.out) == 0);
  run_result_free(&r);
  run_result_free(&want);
  remove_files(&f);
}

/* The events decoded from `path` by dump (lines that are events), and its stderr. */
static size_t dumped_events(const char *path, run_result_t *r) {
  const char *const args[] = {"dump", "@", NULL};
  if (!run_on(path, args, r)) return 0;
  size_t n = 0;
  for (const char *p = r->out; (p = strstr(p, "alloc")) != NULL; p++) n++;
  return n;
}

CTS_TEST(truncated_zstd_reads_up_to_its_last_block_and_says_so) {
  files_t f;
  CTS_ASSERT(make_files(&f));
  size_t len;
  char *const data = slurp(f.plain, &len);
  CTS_ASSERT(data != NULL);
  const size_t cap = ZSTD_compressBound(len) + 4096;
  char *const z = malloc(cap);
  size_t ends[256], nends = 0;
  const size_t zlen = compress_flushed(data, len, 8192, z, cap, ends, &nends);
  CTS_ASSERT(nends > 4);
  run_result_t whole;
  const size_t all = dumped_events(f.plain, &whole);
  CTS_ASSERT(all > 0);
  /* Cut inside the third block: the first two blocks' bytes are read, no more; and cut
   * right at a block's end: no less. */
  char cut[256];
  snprintf(cut, sizeof cut, "/tmp/cts_compressed_%d.cut.zst", (int)getpid());
  const size_t points[] = {ends[1] + (ends[2] - ends[1]) / 2, ends[nends / 2]};
  size_t prev = 0;
  for (size_t i = 0; i < 2; i++) {
    CTS_ASSERT(spit(cut, z, points[i]));
    run_result_t r;
    const size_t n = dumped_events(cut, &r);
    CTS_ASSERT_MSG(r.exit_code == 0, "cut at %zu of %zu: exit %d: %s", points[i], zlen, r.exit_code,
                   r.err);
    CTS_ASSERT_MSG(strstr(r.err, "the trace's tail was lost") != NULL, "stderr: %s", r.err);
    CTS_ASSERT(n > prev && n < all);
    prev = n;
    run_result_free(&r);
  }
  /* The whole stream: no warning. */
  CTS_ASSERT(spit(cut, z, zlen));
  run_result_t r;
  CTS_ASSERT_EQ_U64(dumped_events(cut, &r), all);
  CTS_ASSERT_MSG(r.err_len == 0, "stderr: %s", r.err);
  run_result_free(&r);
  run_result_free(&whole);
  unlink(cut);
  free(z);
  free(data);
  remove_files(&f);
}

/* The input layer itself (os/input.c), read the way the readers read it (1 MiB at a time):
 * a frame whose last block straddles a read's end is read whole, with no warning, and so
 * is a stream of several frames; a file cut inside a frame loses only what was cut. */
static size_t read_all_input(const char *path, char *out, size_t cap, size_t chunk,
                             bool *tail_lost) {
  cts_os_input_t *in;
  if (cts_os_input_open(&in, path) != 0) return 0;
  size_t got = 0;
  for (;;) {
    const size_t want = cap - got < chunk ? cap - got : chunk;
    const ssize_t n = want ? cts_os_input_read(in, out + got, want) : 0;
    if (n <= 0) break;
    got += (size_t)n;
  }
  *tail_lost = cts_os_input_tail_lost(in);
  cts_os_input_close(in);
  return got;
}

CTS_TEST(zstd_input_reads_every_byte_across_reads_and_frames) {
  /* Two frames: the 1 MiB read ends inside the second frame's last block (blocks hold
   * 128 KiB from their frame's start), which the decoder then holds half given out when
   * the file has no more bytes. */
  const size_t len1 = 100000, len2 = 1000000, len = len1 + len2;
  char *const data = malloc(len);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < len; i++) { /* compressible, not trivially */
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    data[i] = (char)('a' + (x % 7 == 0 ? x % 26 : i / 1000 % 26));
  }
  const size_t cap = ZSTD_compressBound(len) + 4096;
  char *const z = malloc(cap), *const back = malloc(len + 1);
  char path[256];
  snprintf(path, sizeof path, "/tmp/cts_compressed_%d.bin.zst", (int)getpid());
  bool lost = true;
  const size_t first = ZSTD_compress(z, cap, data, len1, 3);
  CTS_ASSERT(!ZSTD_isError(first));
  const size_t second = ZSTD_compress(z + first, cap - first, data + len1, len2, 3);
  CTS_ASSERT(!ZSTD_isError(second) && spit(path, z, first + second));
  static const size_t chunks[] = {1u << 20, 777, 131075};
  for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
    memset(back, 0, len);
    CTS_ASSERT_EQ_U64(read_all_input(path, back, len + 1, chunks[c], &lost), len);
    CTS_ASSERT(memcmp(back, data, len) == 0);
    CTS_ASSERT(!lost);
  }
  /* Cut inside the second frame: the first is whole, the loss is said. */
  CTS_ASSERT(spit(path, z, first + second / 2));
  const size_t n = read_all_input(path, back, len + 1, 1u << 20, &lost);
  CTS_ASSERT(n >= len1 && n < len && lost);
  CTS_ASSERT(memcmp(back, data, n) == 0);
  unlink(path);
  free(data);
  free(z);
  free(back);
}

CTS_TEST_MAIN()
