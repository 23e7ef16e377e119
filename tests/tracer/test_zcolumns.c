/* SPDX-License-Identifier: MIT */
/* Compressed traces with the column transform (docs/formats/memtrace-zstd.md): what the
 * writer's zstd stage (src/tracer/zsink.c) writes reads back (src/os/input.c) as the very
 * bytes it was given, whatever they are and however they were cut into writes and flushes;
 * a truncated file keeps its complete groups and says where it was cut; corrupt groups
 * are refused with the offset; the older form (plain zstd of memtrace) still reads; and a
 * real program's trace recorded with -z dumps as the plain trace's transform does. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "../run_cmd.h"
#include "../test.h"
#include "os/mtcols.h"
#include "os/os.h"
#include "tracer/zsink.h"

typedef struct {
  uint8_t *p;
  size_t len;
} bytes_t;

static bool slurp(const char *path, bytes_t *b) {
  FILE *const f = fopen(path, "rb");
  if (!f) return false;
  b->p = NULL;
  b->len = 0;
  size_t cap = 0;
  for (;;) {
    if (b->len + 65536 > cap) b->p = realloc(b->p, cap = cap * 2 + 65536);
    const size_t n = fread(b->p + b->len, 1, 65536, f);
    if (!n) break;
    b->len += n;
  }
  fclose(f);
  return true;
}

static int fd_write(void *user_data, const void *buf, size_t len) {
  return write(*(int *)user_data, buf, len) == (ssize_t)len ? 0 : -5;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Compresses `b` into `path` as the writer does: writes of `chunk` bytes (0: random sizes),
 * a flush every `flush_every` bytes or so (0: never), the frame ended at the end only. */
static bool compress_to(const bytes_t *b, const char *path, size_t chunk, size_t flush_every) {
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0) return false;
  cts__zsink_t *const z = cts__zsink_open(3, fd_write, &fd);
  bool ok = z != NULL;
  size_t since_flush = 0;
  for (size_t off = 0; ok && off < b->len;) {
    size_t n = chunk ? chunk : 1 + next_rand() % 70000;
    if (n > b->len - off) n = b->len - off;
    ok = cts__zsink_write(z, b->p + off, n) == 0;
    off += n;
    since_flush += n;
    if (ok && flush_every && since_flush >= flush_every) {
      ok = cts__zsink_flush(z) == 0;
      since_flush = 0;
    }
  }
  if (ok) ok = cts__zsink_end(z) == 0;
  cts__zsink_close(z);
  close(fd);
  return ok;
}

/* Everything cts_os_input reads from `path`, and the error that ended it (0: none). */
static int read_back(const char *path, bytes_t *b, bool *tail_lost) {
  cts_os_input_t *in;
  int e = cts_os_input_open(&in, path);
  if (e) return e;
  b->p = NULL;
  b->len = 0;
  size_t cap = 0;
  for (;;) {
    if (b->len + 65536 > cap) b->p = realloc(b->p, cap = cap * 2 + 65536);
    const ssize_t n = cts_os_input_read(in, b->p + b->len, 1 + next_rand() % 65535);
    if (n <= 0) {
      e = (int)n;
      break;
    }
    b->len += (size_t)n;
  }
  if (tail_lost) *tail_lost = cts_os_input_tail_lost(in);
  cts_os_input_close(in);
  return e;
}

/* Whether `path` round-trips through the transform byte for byte in several cuttings. */
static bool roundtrips(const char *path, const char *tmp) {
  bytes_t src, back;
  if (!slurp(path, &src)) return false;
  static const size_t chunks[] = {0, 1, 7, 32768, 1u << 20};
  static const size_t flushes[] = {0, 5000, 0, 100000, 0};
  bool ok = true;
  for (unsigned i = 0; ok && i < sizeof chunks / sizeof chunks[0]; i++) {
    bool lost = true;
    ok = compress_to(&src, tmp, chunks[i], flushes[i]) && read_back(tmp, &back, &lost) == 0 &&
         !lost && back.len == src.len && memcmp(back.p, src.p, src.len) == 0;
    if (!ok)
      fprintf(stderr, "  %s: chunk %zu flush %zu: %zu bytes back of %zu\n", path, chunks[i],
              flushes[i], back.len, src.len);
    free(back.p);
  }
  free(src.p);
  return ok;
}

static void temp_file(char *path, size_t size, const char *name) {
  snprintf(path, size, "/tmp/cts_zcolumns_%d_%s", (int)getpid(), name);
}

CTS_TEST(corpus_traces_read_back_byte_for_byte) {
  CTS_REQUIRE_CORPUS(corpus);
  char dir[512], tmp[256];
  snprintf(dir, sizeof dir, "%s/memtrace/traces", corpus);
  temp_file(tmp, sizeof tmp, "corpus.ctf.zst");
  DIR *const d = opendir(dir);
  CTS_ASSERT(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    const size_t l = strlen(e->d_name);
    if (l < 4 || strcmp(e->d_name + l - 4, ".ctf") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    CTS_ASSERT_MSG(roundtrips(path, tmp), "%s", e->d_name);
    n++;
  }
  closedir(d);
  unlink(tmp);
  CTS_ASSERT(n >= 10);
}

/* What the transform is for (a deterministic guard, not a timing): the corpus's traces
 * come out at most half the size zstd alone gives at the same level and minimum match
 * (0.13-0.31 x when this was written; before the transform, 1.0 x). */
CTS_TEST(columns_compress_corpus_traces_to_half_of_zstd_alone) {
  CTS_REQUIRE_CORPUS(corpus);
  static const char *const names[] = {"p1_short_lived.r1", "p2_leak.r1", "p5_mixed_promote.r1",
                                      "p1_short_lived.r1e-2"};
  char tmp[256];
  temp_file(tmp, sizeof tmp, "ratio.zst");
  for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/memtrace/traces/%s.ctf", corpus, names[i]);
    bytes_t src, z;
    CTS_ASSERT(slurp(path, &src));
    CTS_ASSERT(compress_to(&src, tmp, 32768, 0) && slurp(tmp, &z));
    ZSTD_CCtx *const c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(c, ZSTD_c_minMatch, 3);
    const size_t cap = ZSTD_compressBound(src.len);
    uint8_t *const plain = malloc(cap);
    const size_t n = ZSTD_compress2(c, plain, cap, src.p, src.len);
    CTS_ASSERT(!ZSTD_isError(n));
    CTS_ASSERT_MSG(z.len * 2 <= n, "%s: %zu bytes with columns, %zu with zstd alone", names[i],
                   z.len, n);
    ZSTD_freeCCtx(c);
    free(plain);
    free(src.p);
    free(z.p);
  }
  unlink(tmp);
}

/* Not memtrace at all, or memtrace with junk in between: passed on whole, still exact. */
CTS_TEST(any_bytes_read_back_byte_for_byte) {
  char src_path[256], tmp[256];
  temp_file(src_path, sizeof src_path, "junk");
  temp_file(tmp, sizeof tmp, "junk.zst");
  bytes_t b = {malloc(300000), 300000};
  for (size_t i = 0; i < b.len; i++) b.p[i] = (uint8_t)(next_rand() % 7 == 0 ? 0xC1 : next_rand());
  /* A packet magic with a plausible size in the middle of the junk. */
  static const uint8_t fake[] = {0xC1, 0x1F, 0xFC, 0xC1, 0x00, 0x04, 0x00, 0x00};
  memcpy(b.p + 1000, fake, sizeof fake);
  /* A version-3 header (68 bytes) in a packet that claims 66. */
  static const uint8_t short_v3[] = {0xC1, 0x1F, 0xFC, 0xC1, 0x10, 0x02, 0x00, 0x00};
  memcpy(b.p + 5000, short_v3, sizeof short_v3);
  memset(b.p + 5000 + 8, 0, 58);
  b.p[5000 + 28] = 3;
  FILE *const f = fopen(src_path, "wb");
  CTS_ASSERT(f && fwrite(b.p, 1, b.len, f) == b.len);
  fclose(f);
  free(b.p);
  CTS_ASSERT(roundtrips(src_path, tmp));
  unlink(src_path);
  unlink(tmp);
}

/* A corpus trace, compressed with a flush every few kilobytes (groups), for the tests
 * that damage it. */
static bool flushed_corpus_trace(const char *corpus, const char *tmp, bytes_t *src) {
  char path[1024];
  snprintf(path, sizeof path, "%s/memtrace/traces/p2_leak.r1.ctf", corpus);
  return slurp(path, src) && compress_to(src, tmp, 32768, 20000);
}

/* Cut anywhere, the file reads as a prefix of the trace: every complete group, no more,
 * and says its tail was lost; `dump` names the decompressed offset of the lost group. */
CTS_TEST(a_truncated_file_keeps_its_complete_groups) {
  CTS_REQUIRE_CORPUS(corpus);
  char tmp[256], cut[256];
  temp_file(tmp, sizeof tmp, "trunc.zst");
  temp_file(cut, sizeof cut, "trunc-cut.zst");
  bytes_t src, z;
  CTS_ASSERT(flushed_corpus_trace(corpus, tmp, &src));
  CTS_ASSERT(slurp(tmp, &z));
  size_t best = 0;
  for (size_t at = CTS_MTCOLS_HEAD_SIZE + 1; at < z.len; at += z.len / 37) {
    FILE *const f = fopen(cut, "wb");
    CTS_ASSERT(f && fwrite(z.p, 1, at, f) == at);
    fclose(f);
    bytes_t back;
    bool lost = false;
    const int e = read_back(cut, &back, &lost);
    CTS_ASSERT_MSG(e == 0 && lost, "cut at %zu: error %d, lost %d", at, e, lost);
    CTS_ASSERT(back.len <= src.len && memcmp(back.p, src.p, back.len) == 0);
    if (back.len > best) best = back.len;
    free(back.p);
  }
  CTS_ASSERT(best > src.len / 2); /* the groups before the cut were all there */
  /* Through the CLI: the good part is dumped, with a warning naming the offset. */
  FILE *const f = fopen(cut, "wb");
  CTS_ASSERT(f && fwrite(z.p, 1, z.len * 2 / 3, f) == z.len * 2 / 3);
  fclose(f);
  char *dump[] = {CTS_TEST_CTFSCOPE, "dump", cut, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(dump, NULL, 60, &r));
  CTS_ASSERT_MSG(
      r.err && strstr(r.err, "column groups up to byte ") && strstr(r.out, " alloc_major "), "%s",
      r.err ? r.err : "");
  run_result_free(&r);
  free(src.p);
  free(z.p);
  unlink(tmp);
  unlink(cut);
}

/* A group whose columns disagree with its packets: an error with the offset, no crash. */
CTS_TEST(a_corrupt_group_is_an_error_naming_its_offset) {
  CTS_REQUIRE_CORPUS(corpus);
  char tmp[256];
  temp_file(tmp, sizeof tmp, "corrupt.zst");
  bytes_t src;
  CTS_ASSERT(flushed_corpus_trace(corpus, tmp, &src));
  /* Decompress, damage the second group's packet column, compress again. */
  bytes_t z;
  CTS_ASSERT(slurp(tmp, &z));
  const size_t cap = src.len * 2 + 4096;
  uint8_t *const plain = malloc(cap);
  const size_t n = ZSTD_decompress(plain, cap, z.p, z.len); /* skips the opening frame */
  CTS_ASSERT(!ZSTD_isError(n));
  size_t total, raw;
  const char *why;
  CTS_ASSERT(cts_mtcols_group_size(plain, &total, &raw, &why) == 0);
  uint8_t *const second = plain + total;
  second[CTS_MTCOLS_GROUP_HEAD] = 7; /* the first packet's mode */
  const size_t zcap = ZSTD_compressBound(n) + CTS_MTCOLS_HEAD_SIZE;
  uint8_t *const out = malloc(zcap);
  cts_mtcols_head(out);
  const size_t zn = ZSTD_compress(out + CTS_MTCOLS_HEAD_SIZE, zcap, plain, n, 3);
  CTS_ASSERT(!ZSTD_isError(zn));
  FILE *const f = fopen(tmp, "wb");
  CTS_ASSERT(f && fwrite(out, 1, zn + CTS_MTCOLS_HEAD_SIZE, f) == zn + CTS_MTCOLS_HEAD_SIZE);
  fclose(f);
  bytes_t back;
  CTS_ASSERT(read_back(tmp, &back, NULL) == CTS_E_BAD_COMPRESSION);
  CTS_ASSERT(back.len == raw && memcmp(back.p, src.p, raw) == 0); /* the first group */
  free(back.p);
  char *dump[] = {CTS_TEST_CTFSCOPE, "dump", tmp, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(dump, NULL, 60, &r));
  char want[128];
  snprintf(want, sizeof want, "corrupt column group at byte %zu of the decompressed", total);
  CTS_ASSERT_MSG(r.exit_code == 1 && r.err && strstr(r.err, want), "%d %s", r.exit_code,
                 r.err ? r.err : "");
  run_result_free(&r);
  free(plain);
  free(out);
  free(src.p);
  free(z.p);
  unlink(tmp);
}

/* Damaged zstd data (not the columns inside): the good part, then an error with the file
 * offset. */
CTS_TEST(corrupt_zstd_data_is_an_error_naming_the_file_offset) {
  CTS_REQUIRE_CORPUS(corpus);
  char tmp[256];
  temp_file(tmp, sizeof tmp, "badzstd.zst");
  bytes_t src, z;
  CTS_ASSERT(flushed_corpus_trace(corpus, tmp, &src));
  CTS_ASSERT(slurp(tmp, &z));
  for (size_t i = z.len / 2; i < z.len / 2 + 64; i++) z.p[i] ^= 0x5a;
  FILE *const f = fopen(tmp, "wb");
  CTS_ASSERT(f && fwrite(z.p, 1, z.len, f) == z.len);
  fclose(f);
  char *dump[] = {CTS_TEST_CTFSCOPE, "dump", tmp, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(dump, NULL, 60, &r));
  CTS_ASSERT_MSG(r.exit_code != 0 && r.err && strstr(r.err, "at or before file byte ") &&
                     strstr(r.out, " alloc"),
                 "%d %s", r.exit_code, r.err ? r.err : "");
  run_result_free(&r);
  free(src.p);
  free(z.p);
  unlink(tmp);
}

/* Files written before the transform (plain zstd of memtrace) read as before. */
CTS_TEST(plain_zstd_of_memtrace_still_reads) {
  CTS_REQUIRE_CORPUS(corpus);
  char path[1024], tmp[256];
  snprintf(path, sizeof path, "%s/memtrace/traces/p5_mixed_promote.r1.ctf", corpus);
  temp_file(tmp, sizeof tmp, "plain.zst");
  bytes_t src, back;
  CTS_ASSERT(slurp(path, &src));
  const size_t cap = ZSTD_compressBound(src.len);
  uint8_t *const z = malloc(cap);
  const size_t n = ZSTD_compress(z, cap, src.p, src.len, 3);
  CTS_ASSERT(!ZSTD_isError(n));
  FILE *const f = fopen(tmp, "wb");
  CTS_ASSERT(f && fwrite(z, 1, n, f) == n);
  fclose(f);
  CTS_ASSERT(read_back(tmp, &back, NULL) == 0);
  CTS_ASSERT(back.len == src.len && memcmp(back.p, src.p, src.len) == 0);
  free(back.p);
  free(src.p);
  free(z);
  unlink(tmp);
}

/* A later version of the transform is refused, not misread. */
CTS_TEST(a_later_version_is_refused) {
  char tmp[256];
  temp_file(tmp, sizeof tmp, "v2.zst");
  uint8_t head[CTS_MTCOLS_HEAD_SIZE];
  cts_mtcols_head(head);
  head[16] = CTS_MTCOLS_VERSION + 1;
  FILE *const f = fopen(tmp, "wb");
  CTS_ASSERT(f && fwrite(head, 1, sizeof head, f) == sizeof head);
  fclose(f);
  cts_os_input_t *in;
  CTS_ASSERT(cts_os_input_open(&in, tmp) == CTS_E_BAD_VERSION);
  unlink(tmp);
}

/* A real program recorded at rate 1: its plain trace through the transform reads back byte
 * for byte, and its trace recorded with -z dumps without a warning, with as many events as
 * `info` counts. */
CTS_TEST(a_real_programs_trace_round_trips) {
#ifndef CTS_TEST_CAN_RECORD
  CTS_SKIP("no preload library in this build");
#endif
  if (access("/usr/bin/python3", X_OK) != 0) CTS_SKIP("no /usr/bin/python3");
  char plain[256], zst[256], tmp[256];
  temp_file(plain, sizeof plain, "py.ctf");
  temp_file(zst, sizeof zst, "py.ctf.zst");
  temp_file(tmp, sizeof tmp, "py-t.zst");
  setenv("PYTHONMALLOC", "malloc", 1);
  char *rec_plain[] = {CTS_TEST_CTFSCOPE,
                       "record",
                       "-q",
                       "-r",
                       "1",
                       "-o",
                       plain,
                       "--",
                       "/usr/bin/python3",
                       "-c",
                       "d = {str(i): i for i in range(20000)}",
                       NULL};
  char *rec_z[] = {CTS_TEST_CTFSCOPE,
                   "record",
                   "-q",
                   "-z",
                   "-r",
                   "1",
                   "-o",
                   zst,
                   "--",
                   "/usr/bin/python3",
                   "-c",
                   "d = {str(i): i for i in range(20000)}",
                   NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(rec_plain, NULL, 120, &r) && r.exit_code == 0);
  run_result_free(&r);
  CTS_ASSERT(run_cmd(rec_z, NULL, 120, &r) && r.exit_code == 0);
  run_result_free(&r);
  unsetenv("PYTHONMALLOC");
  CTS_ASSERT(roundtrips(plain, tmp));
  char *dump[] = {CTS_TEST_CTFSCOPE, "dump", zst, NULL};
  CTS_ASSERT(run_cmd(dump, NULL, 120, &r));
  CTS_ASSERT_MSG(r.exit_code == 0 && r.err && !strstr(r.err, "warning"), "%s", r.err);
  size_t events = 0;
  for (const char *p = r.out; (p = strstr(p, " alloc")); p++) events++;
  run_result_free(&r);
  CTS_ASSERT_MSG(events > 20000, "%zu events", events);
  /* Every command: `info` detects the format before it reads. */
  char *info[] = {CTS_TEST_CTFSCOPE, "info", zst, NULL};
  CTS_ASSERT(run_cmd(info, NULL, 120, &r));
  CTS_ASSERT_MSG(r.exit_code == 0 && r.out && strstr(r.out, "Result         ok"), "%s",
                 r.err ? r.err : "");
  run_result_free(&r);
  unlink(plain);
  unlink(zst);
  unlink(tmp);
}

CTS_TEST_MAIN()
