/* SPDX-License-Identifier: MIT */
/* The writer's compact backtrace encoding (CTS_MT_ENCODING_COMPACT): the reader decodes
 * exactly what memtrace's encoding gives, every code is defined before a backtrace uses it,
 * and the trace is smaller where backtraces recur and not larger elsewhere: on generated
 * workloads (the allocation benchmark's call stacks, deep recursion cut by the 4 KiB bound,
 * more distinct frames than the cache holds) and on every real trace of the corpus. */
#include <stdlib.h>

#include "../../src/analysis/transcode.h"
#include "../../src/os/os.h"
#include "../test.h"
#include "../test_buf.h"
#include "buf_writer.h"

/* ---- decoding into a digest ---------------------------------------------------------- */

#define DEFINED_BITS 20u /* open-addressing set of defined codes: room for ~1 M codes */

typedef struct digest {
  uint64_t hash;
  uint64_t events, allocs, frames, locations;
  uint64_t undefined; /* backtrace codes used before their location event */
  uint64_t *defined;
  bool ok;
} digest_t;

static void mix(digest_t *d, uint64_t v) {
  d->hash = (d->hash ^ v) * 0x100000001b3ull;
  d->hash ^= d->hash >> 31;
}

static uint64_t *defined_slot(digest_t *d, uint64_t code) {
  const uint64_t mask = (1ull << DEFINED_BITS) - 1;
  uint64_t i = (code * 0x9E3779B97F4A7C15ull) >> (64 - DEFINED_BITS);
  while (d->defined[i] != 0 && d->defined[i] != code) i = (i + 1) & mask;
  return &d->defined[i];
}

static int on_location(void *ud, uint64_t code, const cts_mt_location_t *locs, size_t n) {
  digest_t *d = ud;
  (void)locs;
  (void)n;
  *defined_slot(d, code) = code;
  d->locations++;
  return 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  digest_t *d = ud;
  d->events++;
  mix(d, (uint64_t)ev->kind);
  mix(d, ev->time_us);
  mix(d, ev->obj_id);
  if (ev->kind != CTS_MT_ALLOC) return 0;
  d->allocs++;
  mix(d, ev->length);
  mix(d, ev->nsamples);
  mix(d, (uint64_t)ev->source);
  mix(d, ev->backtrace_len);
  d->frames += ev->backtrace_len;
  for (size_t i = 0; i < ev->backtrace_len; i++) {
    mix(d, ev->backtrace[i]);
    if (*defined_slot(d, ev->backtrace[i]) != ev->backtrace[i]) d->undefined++;
  }
  return 0;
}

/* Decodes the whole trace (cache verifiers included) into d->ok, printing any error. */
static void decode(const buf_t *trace, digest_t *d) {
  memset(d, 0, sizeof *d);
  d->hash = 0xcbf29ce484222325ull;
  d->defined = calloc((size_t)1 << DEFINED_BITS, sizeof *d->defined);
  CTS_ASSERT(d->defined != NULL);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = d, .on_location = on_location, .on_event = on_event};
  cts_mt_reader_t *r;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &cfg, &h), 0);
  int e = cts_mt_reader_feed(r, trace->data, trace->len);
  if (!e) e = cts_mt_reader_finish(r);
  if (e) fprintf(stderr, "decode: %s\n", cts_mt_reader_error_message(r));
  cts_mt_reader_destroy(r);
  free(d->defined);
  d->defined = NULL;
  d->ok = e == 0;
}

/* Both traces decode, to the same events, every code defined before use. */
static void expect_same_events(const char *name, const buf_t *reference, const buf_t *compact) {
  digest_t dr, dc;
  decode(reference, &dr);
  decode(compact, &dc);
  CTS_ASSERT_MSG(dr.ok, "%s: the reference trace does not decode", name);
  CTS_ASSERT_MSG(dc.ok, "%s: the compact trace does not decode", name);
  CTS_ASSERT_EQ_U64(dc.events, dr.events);
  CTS_ASSERT_EQ_U64(dc.frames, dr.frames);
  CTS_ASSERT_MSG(dc.hash == dr.hash, "%s: the compact trace decodes to other events", name);
  CTS_ASSERT_EQ_U64(dc.undefined, 0);
  printf("%s: %llu events, %llu allocations\n", name, (unsigned long long)dr.events,
         (unsigned long long)dr.allocs);
}

/* ---- generated workloads ----------------------------------------------------------------- */

#define MAX_DEPTH 6000u

typedef struct workload {
  cts_mt_writer_t *w;
  void *mem;
  uint64_t now, rng;
  uint64_t bt[MAX_DEPTH];
  uint64_t live[256];
  size_t nlive;
} workload_t;

static uint64_t fixed_clock(void *ud) {
  return ((workload_t *)ud)->now;
}

static uint64_t next_random(workload_t *wl) {
  uint64_t z = (wl->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void start(workload_t *wl, cts_mt_encoding_t encoding, buf_t *out) {
  memset(wl, 0, sizeof *wl);
  wl->now = 1700000000000000ull;
  wl->rng = 7;
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.start_time_us = wl->now;
  cfg.max_backtrace_frames = MAX_DEPTH;
  cfg.clock = fixed_clock;
  cfg.clock_user_data = wl;
  cfg.resolve = resolve_any; /* (so that sizes measure backtraces) */
  cfg.encoding = encoding;
  open_buf_writer(&cfg, out, &wl->w, &wl->mem);
}

/* One allocation; the block 256 allocations older is freed, as in bench/bench_alloc.c. */
static void allocate(workload_t *wl, size_t depth, cts_mt_source_t source) {
  wl->now += 1 + next_random(wl) % 3;
  const uint64_t words =
      source == CTS_MT_SOURCE_MINOR ? 1 + next_random(wl) % 16 : 1 + next_random(wl) % 5000;
  const uint64_t samples = source == CTS_MT_SOURCE_MINOR ? 1 : words;
  uint64_t id;
  CTS_ASSERT_EQ_INT(
      cts_mt_writer_alloc(wl->w, CTS_TIME_NOW, words, samples, source, wl->bt, depth, &id), 0);
  const size_t slot = id % 256;
  if (wl->nlive == 256)
    CTS_ASSERT_EQ_INT(cts_mt_writer_collect(wl->w, CTS_TIME_NOW, wl->live[slot]), 0);
  else
    wl->nlive++;
  wl->live[slot] = id;
}

static void finish(workload_t *wl) {
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(wl->w), 0);
  free(wl->mem);
}

/* bench_alloc's 16 call stacks: start-up frames, main, 4/8/12/16 recursive frames, the
 * call into one of 16 sites, the site's call to malloc; stacks interleaved by i * 7 % 16. */
static void bench_stacks(workload_t *wl, cts_mt_encoding_t encoding, buf_t *out) {
  start(wl, encoding, out);
  for (unsigned i = 0; i < 20000; i++) {
    const unsigned site = i * 7 % 16, depth = 4 * (site % 4) + 4;
    size_t n = 0;
    wl->bt[n++] = 0x401000;
    wl->bt[n++] = 0x7f0000102030;
    wl->bt[n++] = 0x401234;                                      /* main */
    for (unsigned d = 0; d < depth; d++) wl->bt[n++] = 0x401500; /* descend → descend */
    wl->bt[n++] = 0x401580;                                      /* descend → site */
    wl->bt[n++] = 0x401600 + 0x20 * site;                        /* site → malloc */
    allocate(wl, n, CTS_MT_SOURCE_MAJOR);
  }
  finish(wl);
}

/* Recursion 2000-5800 frames deep with a varying frame in the middle and a varying leaf:
 * memtrace's self-predicting bucket, and in the compact encoding the fallback to it; some
 * backtraces are cut by the 4 KiB bound. */
static void deep_recursion(workload_t *wl, cts_mt_encoding_t encoding, buf_t *out) {
  start(wl, encoding, out);
  for (unsigned i = 0; i < 400; i++) {
    const size_t depth = 2000 + next_random(wl) % 3800;
    for (size_t d = 0; d < depth; d++) wl->bt[d] = 0x500000;
    wl->bt[depth / 2] = 0x600000 + 8 * (next_random(wl) % 4);
    if (i % 50 == 0) /* distinct codes all the way down: cut by the 4 KiB bound */
      for (size_t d = depth / 2; d < depth; d++) wl->bt[d] = 0x700000 + 8 * (d + i);
    wl->bt[depth - 1] = 0x800000 + 8 * (next_random(wl) % 8);
    allocate(wl, depth, CTS_MT_SOURCE_MAJOR);
  }
  finish(wl);
}

/* 3000 distinct backtraces 20-40 frames deep over 40 000 codes, drawn with a skew (a few
 * hot, most rare): more chain links than the 16 384 buckets hold. Some allocations are
 * minor-heap blocks of <= 16 words, written in the short form. */
static void cache_pressure(workload_t *wl, cts_mt_encoding_t encoding, buf_t *out) {
  static uint64_t stacks[3000][41];
  start(wl, encoding, out);
  for (unsigned s = 0; s < 3000; s++) {
    const unsigned depth = 20 + (unsigned)(next_random(wl) % 21);
    stacks[s][0] = depth;
    for (unsigned d = 0; d < depth; d++) /* shallow frames shared more than deep ones */
      stacks[s][1 + d] = 0x10000 + 8 * (next_random(wl) % (d < 5 ? 50 : 40000));
  }
  for (unsigned i = 0; i < 60000; i++) {
    const uint64_t r = next_random(wl);
    const unsigned s = (unsigned)((r % 3000) * (r % 3000) / 3000); /* skewed towards 0 */
    const size_t depth = stacks[s][0];
    memcpy(wl->bt, &stacks[s][1], depth * sizeof *wl->bt);
    allocate(wl, depth, i % 3 == 0 ? CTS_MT_SOURCE_MINOR : CTS_MT_SOURCE_MAJOR);
  }
  finish(wl);
}

typedef void (*workload_fn)(workload_t *, cts_mt_encoding_t, buf_t *);

/* Writes the workload both ways; both must decode to the same events, with every code
 * defined first; *ratio receives compact size / memtrace size. */
static void compare(workload_fn fn, const char *name, double *ratio) {
  static workload_t wl;
  buf_t memtrace = {0}, compact = {0};
  fn(&wl, CTS_MT_ENCODING_MEMTRACE, &memtrace);
  fn(&wl, CTS_MT_ENCODING_COMPACT, &compact);
  expect_same_events(name, &memtrace, &compact);
  *ratio = (double)compact.len / (double)memtrace.len;
  printf("%s: memtrace %zu bytes, compact %zu bytes (%.3f)\n", name, memtrace.len, compact.len,
         *ratio);
  free(memtrace.data);
  free(compact.data);
}

CTS_TEST(bench_stacks_take_one_codeword_each) {
  /* memtrace: ~2.6 codewords an allocation (5.2 bytes); compact: 1 (2.25 bytes). */
  double ratio = 2;
  compare(bench_stacks, "bench stacks", &ratio);
  CTS_ASSERT_MSG(ratio < 0.9, "compact/memtrace = %.3f, expected < 0.9", ratio);
}

CTS_TEST(deep_recursion_is_not_larger) {
  double ratio = 2;
  compare(deep_recursion, "deep recursion", &ratio);
  CTS_ASSERT_MSG(ratio <= 1.0, "compact/memtrace = %.4f, expected <= 1", ratio);
}

CTS_TEST(cache_pressure_is_not_larger) {
  double ratio = 2;
  compare(cache_pressure, "cache pressure", &ratio);
  CTS_ASSERT_MSG(ratio <= 1.0, "compact/memtrace = %.4f, expected <= 1", ratio);
}

/* ---- the corpus -------------------------------------------------------------------------- */

static void check_corpus_trace(const char *name) {
  CTS_REQUIRE_CORPUS(corpus);
  char path[1024];
  snprintf(path, sizeof path, "%s/memtrace/%s", corpus, name);
  buf_t src = {0}, out = {0};
  CTS_ASSERT_MSG(read_file(path, &src), "cannot read %s", path);
  cts_transcode_t t;
  CTS_ASSERT_EQ_INT(cts_transcode_init(&t, 0, CTS_MT_ENCODING_COMPACT, buf_write, &out), 0);
  int e = cts_transcode_feed(&t, src.data, src.len);
  if (!e) e = cts_transcode_finish(&t);
  cts_transcode_fini(&t);
  CTS_ASSERT_MSG(e == 0, "%s: %s", name, cts_err_name(e));
  expect_same_events(name, &src, &out);
  const double ratio = (double)out.len / (double)src.len;
  printf("%s: %zu -> %zu bytes (%.3f)\n", name, src.len, out.len, ratio);
  /* A heuristic: never more than 0.1% larger (the worst, lists_and_sets, is one byte). */
  CTS_ASSERT_MSG(ratio <= 1.001, "%s: compact/original = %.4f, expected <= 1.001", name, ratio);
  free(src.data);
  free(out.data);
}

#define CORPUS(id, file)      \
  CTS_TEST(id) {              \
    check_corpus_trace(file); \
  }

CORPUS(corpus_p1_r1, "traces/p1_short_lived.r1.ctf")
CORPUS(corpus_p1_r1e_2, "traces/p1_short_lived.r1e-2.ctf")
CORPUS(corpus_p1_r1e_4, "traces/p1_short_lived.r1e-4.ctf")
CORPUS(corpus_p1_r1_v3, "traces/p1_short_lived.r1.v3.ctf")
CORPUS(corpus_p2_r1, "traces/p2_leak.r1.ctf")
CORPUS(corpus_p2_r1e_2, "traces/p2_leak.r1e-2.ctf")
CORPUS(corpus_p2_r1e_4, "traces/p2_leak.r1e-4.ctf")
CORPUS(corpus_p3_r1, "traces/p3_large_arrays.r1.ctf")
CORPUS(corpus_p3_r1e_2, "traces/p3_large_arrays.r1e-2.ctf")
CORPUS(corpus_p3_r1e_4, "traces/p3_large_arrays.r1e-4.ctf")
CORPUS(corpus_p4_r1, "traces/p4_deep_recursion.r1.ctf")
CORPUS(corpus_p4_r1e_2, "traces/p4_deep_recursion.r1e-2.ctf")
CORPUS(corpus_p4_r1e_4, "traces/p4_deep_recursion.r1e-4.ctf")
CORPUS(corpus_p5_r1, "traces/p5_mixed_promote.r1.ctf")
CORPUS(corpus_p5_r1e_2, "traces/p5_mixed_promote.r1e-2.ctf")
CORPUS(corpus_p5_r1e_4, "traces/p5_mixed_promote.r1e-4.ctf")
CORPUS(corpus_p5_r1e_4_v3, "traces/p5_mixed_promote.r1e-4.v3.ctf")
CORPUS(corpus_public_lists_and_sets, "public/memtrace-v0.2.3-examples-lists_and_sets.ctf")

CTS_TEST_MAIN()
