/* SPDX-License-Identifier: MIT */
/* The whole-trace summary behind `ctfscope info` (src/analysis/summary.h) counts distinct
 * backtrace codes at literal codewords, through the reader's literal hook, not per frame.
 * Checked here against the plain definition -- every frame of every backtrace delivered --
 * on the golden corpus (including memtrace's writer-truncated backtraces, which the hook
 * cannot see into), on every corrupt trace of tests/data/fail, and on a trace that fails
 * inside a backtrace after one of its literals. */
#include "../../src/analysis/summary.h"

#include <errno.h>
#include <stdlib.h>

#include <ctfscope/ctfscope.h>

#include "../../src/common/endian.h"
#include "../../src/os/os.h"
#include "../test.h"
#include "../test_buf.h"
#include "../trace_dir.h"

/* The summary and, beside it, the codes of every delivered frame. */
typedef struct both {
  cts_summary_t summary;
  cts_u64map_t frames;
  uint64_t distinct, without_locations;
  cts_mt_reader_t *reader;
  int err;
} both_t;

static int on_event(void *ud, const cts_mt_event_t *ev) {
  both_t *b = ud;
  for (size_t i = 0; i < ev->backtrace_len; i++) {
    bool added;
    if (!cts_u64map_insert(&b->frames, ev->backtrace[i], 0, &added)) return -ENOMEM;
    if (!added) continue;
    b->distinct++;
    const cts_mt_location_t *locs;
    size_t n = 0;
    if (cts_mt_reader_lookup_location(b->reader, ev->backtrace[i], &locs, &n) == 0 && n == 0)
      b->without_locations++;
  }
  return cts_summary_add_event(&b->summary, ev);
}

/* Reads data (fed in 4 KiB pieces, so packets split across feeds) into b, which the caller
 * frees with both_fini(). */
static void read_both(both_t *b, const uint8_t *data, size_t len) {
  memset(b, 0, sizeof *b);
  cts_u64map_init(&b->frames);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = b, .on_event = on_event};
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&b->reader, &cfg, &h), 0);
  cts_summary_init(&b->summary, b->reader);
  int e = 0;
  for (size_t off = 0; !e && off < len; off += 4096)
    e = cts_mt_reader_feed(b->reader, data + off, len - off < 4096 ? len - off : 4096);
  if (!e) e = cts_mt_reader_finish(b->reader);
  b->err = e;
}

static void both_fini(both_t *b) {
  cts_summary_fini(&b->summary);
  cts_mt_reader_destroy(b->reader);
  cts_u64map_fini(&b->frames);
}

typedef struct dir_check {
  size_t walked;
  bool walked_truncated;
} dir_check_t;

static void check_file(const char *name, const uint8_t *data, size_t len, void *ctx) {
  dir_check_t *c = ctx;
  both_t b;
  read_both(&b, data, len);
  CTS_ASSERT_MSG(b.summary.distinct_codes == b.distinct &&
                     b.summary.codes_without_locations == b.without_locations,
                 "%s: summary counts %llu codes (%llu without locations), its frames %llu (%llu)",
                 name, (unsigned long long)b.summary.distinct_codes,
                 (unsigned long long)b.summary.codes_without_locations,
                 (unsigned long long)b.distinct, (unsigned long long)b.without_locations);
  if (b.summary.walk_frames) c->walked++;
  if (strcmp(name, "p4_deep_recursion.r1e-2.ctf") == 0) c->walked_truncated = b.summary.walk_frames;
  both_fini(&b);
}

/* Reads every .ctf file of dir; counts the files and those whose summary fell back to
 * walking frames. */
static void check_dir(const char *dir, size_t *nfiles, size_t *nwalked, bool *walked_truncated) {
  dir_check_t c = {.walked_truncated = *walked_truncated};
  for_each_trace_file(dir, ".ctf", check_file, &c, nfiles);
  *nwalked += c.walked;
  *walked_truncated = c.walked_truncated;
}

CTS_TEST(distinct_codes_match_frames_on_corpus) {
  CTS_REQUIRE_CORPUS(corpus);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/memtrace/traces", corpus);
  size_t nfiles = 0, nwalked = 0;
  bool walked_truncated = false;
  check_dir(dir, &nfiles, &nwalked, &walked_truncated);
  CTS_ASSERT(nfiles >= 10);
  /* The trace whose backtraces memtrace's writer truncated (docs/formats/memtrace.md §8.5)
   * takes the fallback; the others are counted at their literals alone. */
  CTS_ASSERT(walked_truncated);
  CTS_ASSERT(nwalked < nfiles);
}

CTS_TEST(distinct_codes_match_frames_on_corrupt_traces) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fail", cts_test_data_dir());
  size_t nfiles = 0, nwalked = 0;
  bool unused = false;
  check_dir(dir, &nfiles, &nwalked, &unused);
  CTS_ASSERT(nfiles >= 10);
}

/* ---- an event that fails after a literal ----------------------------------------------- */

#define CODE_A         0x0a0a0a0a0a0aull
#define CODE_B         0x0b0b0b0b0b0bull
#define CODE_UNDEFINED 0x0c0c0c0c0c0cull

static size_t resolve_any(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  if (max) out[0] = (cts_mt_location_t){(uint32_t)(code & 0xFFFFF), 0, 0, "f.c", "fn"};
  return 1;
}

static uint64_t fixed_clock(void *ud) {
  (void)ud;
  return 1700000000000000ull;
}

/* A v002 trace in memory with the short-form allocations (1 word, minor) of backtraces
 * bts[i] of depth depths[i]. */
static void write_trace(buf_t *trace, const uint64_t *const *bts, const size_t *depths, size_t n) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.write = buf_write;
  cfg.write_user_data = trace;
  cfg.clock = fixed_clock;
  cfg.resolve = resolve_any;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  CTS_ASSERT(mem != NULL);
  cts_mt_writer_t *w;
  CTS_ASSERT_EQ_INT(cts_mt_writer_init(&w, mem, size, &cfg), 0);
  for (size_t i = 0; i < n; i++) {
    uint64_t id;
    CTS_ASSERT_EQ_INT(
        cts_mt_writer_alloc(w, CTS_TIME_NOW, 1, 1, CTS_MT_SOURCE_MINOR, bts[i], depths[i], &id), 0);
  }
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(w), 0);
  free(mem);
}

/* Offset of the last copy of code's 8 bytes in the trace (its literal: the location event
 * that defines a code comes before it), or SIZE_MAX. */
static size_t last_copy(const buf_t *trace, uint64_t code) {
  uint8_t bytes[8];
  cts_st_le64(bytes, code);
  size_t at = SIZE_MAX;
  for (size_t i = 0; i + 8 <= trace->len; i++)
    if (memcmp(trace->data + i, bytes, 8) == 0) at = i;
  return at;
}

CTS_TEST(truncated_backtrace_codes_counted_later) {
  /* [A], then [A, B] whose prefix is rewritten from 1 to 5 frames, longer than the previous
   * backtrace, as memtrace's writer does after truncating one: the reader stores B's literal
   * in the cache but delivers [A] again. Then [B], a cache hit: B reaches a delivered
   * backtrace without a literal of its own. */
  const uint64_t a[1] = {CODE_A}, ab[2] = {CODE_A, CODE_B}, b_only[1] = {CODE_B};
  const uint64_t *const bts[3] = {a, ab, b_only};
  const size_t depths[3] = {1, 2, 1};
  buf_t trace = {0};
  write_trace(&trace, bts, depths, 3);
  const size_t at = last_copy(&trace, CODE_B);
  /* Short form (§8.1): header, cp vint, u8 codeword count, then the literal codeword (tag 3)
   * and its code. */
  CTS_ASSERT(at != SIZE_MAX && at >= 4);
  CTS_ASSERT_EQ_U64(trace.data[at - 2] & 3u, 3);
  CTS_ASSERT_EQ_U64(trace.data[at - 3], 1); /* one codeword */
  CTS_ASSERT_EQ_U64(trace.data[at - 4], 1); /* prefix [A] */
  trace.data[at - 4] = 5;
  both_t b;
  read_both(&b, trace.data, trace.len);
  CTS_ASSERT_EQ_INT(b.err, 0);
  CTS_ASSERT_EQ_U64(b.summary.events_total, 3);
  CTS_ASSERT_EQ_U64(b.distinct, 2);
  CTS_ASSERT_EQ_U64(b.summary.distinct_codes, 2);
  CTS_ASSERT(b.summary.walk_frames);
  both_fini(&b);
  free(trace.data);
}

CTS_TEST(failed_event_adds_no_code) {
  /* One allocation whose backtrace [A, B] is two literals, then B's literal rewritten to a
   * code no location event defines: the reader reports A's literal, then fails on B, and
   * never delivers the event. */
  const uint64_t ab[2] = {CODE_A, CODE_B};
  const uint64_t *const bts[1] = {ab};
  const size_t depths[1] = {2};
  buf_t trace = {0};
  write_trace(&trace, bts, depths, 1);
  both_t b;
  read_both(&b, trace.data, trace.len);
  CTS_ASSERT_EQ_INT(b.err, 0);
  CTS_ASSERT_EQ_U64(b.summary.distinct_codes, 2);
  CTS_ASSERT(!b.summary.walk_frames);
  both_fini(&b);

  const size_t at = last_copy(&trace, CODE_B);
  CTS_ASSERT(at != SIZE_MAX);
  cts_st_le64(trace.data + at, CODE_UNDEFINED);
  read_both(&b, trace.data, trace.len);
  CTS_ASSERT_EQ_INT(b.err, CTS_E_LOCATION_UNDEFINED);
  CTS_ASSERT_EQ_U64(b.summary.events_total, 0);
  CTS_ASSERT_EQ_U64(b.distinct, 0);
  CTS_ASSERT_EQ_U64(b.summary.distinct_codes, 0);
  both_fini(&b);
  free(trace.data);
}

CTS_TEST_MAIN()
