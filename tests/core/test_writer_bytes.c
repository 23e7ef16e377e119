/* SPDX-License-Identifier: MIT */
/* The memtrace writer's bytes for a fixed, synthetic event stream that takes every branch of
 * its per-event path: common prefixes of every length modulo 4, runs of more than 255
 * predictions, backtraces cut by the 4 KiB bound, bursts of new codes (more than 128 waiting
 * locations), times that step back, jump past a packet's 30 s span or come from the clock
 * (CTS_TIME_NOW), frees and promotions, v2 and v3 (id chunks), both encodings. Each output's
 * FNV-1a hash must equal the one the writer gave before its per-event path was reworked for
 * speed (commit b1b607a's memtrace_writer.c): a faster writer must write the same bytes. The
 * stream is also read back, so a changed hash comes with a reader's view of what broke.
 * cts__mt_writer_alloc_innermost_first, given each backtrace reversed, must write the same
 * bytes as cts_mt_writer_alloc. */
#include <stdlib.h>

#include "../../src/common/hash.h"
#include "../../src/core/memtrace_writer.h"
#include "../../src/os/os.h"
#include "../test.h"
#include "../test_buf.h"

#define NEVENTS    20000u
#define MAX_FRAMES 1024u
#define NSTACKS    64u

typedef struct stream {
  uint64_t stacks[NSTACKS][MAX_FRAMES];
  size_t depth[NSTACKS];
} stream_t;

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* One location per code; file names repeat (move-to-front hits), function names do not. */
static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static const char *const files[] = {"a.c", "b.c", "lib/c.c", "d.h", "e.cpp"};
  static char names[8][32];
  static unsigned next;
  (void)ud;
  if (max < 1) return 0;
  char *name = names[next++ % 8];
  snprintf(name, sizeof names[0], "f_%llx", (unsigned long long)code);
  out[0] = (cts_mt_location_t){(uint32_t)(code % 5000), (uint32_t)(code % 50),
                               (uint32_t)(code % 700), files[code % 5], name};
  return 1;
}

static uint64_t fake_clock(void *ud) {
  uint64_t *t = ud;
  return *t += 7;
}

/* Stacks sharing a 300-frame base to various depths, with random tails over 3000 codes; a
 * few deep recursive ones (one code repeated: runs of predictions) and one of 700 distinct
 * codes (7 KB of literals: cut by the 4 KiB bound). */
static void make_stacks(stream_t *s, uint64_t *rng) {
  uint64_t base[300];
  for (size_t i = 0; i < 300; i++) base[i] = 0x400000u + cts_splitmix64(rng) % 3000u * 16u;
  for (size_t k = 0; k < NSTACKS; k++) {
    size_t d, shared;
    if (k % 16 == 5) { /* recursion */
      shared = 3;
      d = 200 + cts_splitmix64(rng) % 500;
    } else if (k == 9) { /* too many literals for one event */
      shared = 0;
      d = 700;
    } else {
      shared = cts_splitmix64(rng) % 41;
      d = shared + 1 + cts_splitmix64(rng) % 30;
    }
    for (size_t i = 0; i < d; i++) {
      if (i < shared)
        s->stacks[k][i] = base[i];
      else if (k % 16 == 5)
        s->stacks[k][i] = 0x900000u + k;
      else if (k == 9)
        s->stacks[k][i] = 0x800000u + i * 16u;
      else
        s->stacks[k][i] = 0x400000u + cts_splitmix64(rng) % 3000u * 16u;
    }
    s->depth[k] = d;
  }
}

typedef struct written {
  buf_t out;
  uint64_t allocs;
} written_t;

/* One allocation through either entry point (innermost: the frames reversed first). */
static int alloc(cts_mt_writer_t *w, bool innermost, uint64_t t, uint64_t length, uint64_t nsamples,
                 cts_mt_source_t source, const uint64_t *bt, size_t depth) {
  if (!innermost) return cts_mt_writer_alloc(w, t, length, nsamples, source, bt, depth, NULL);
  uint64_t rev[MAX_FRAMES];
  for (size_t i = 0; i < depth; i++) rev[i] = bt[depth - 1 - i];
  return cts__mt_writer_alloc_innermost_first(w, t, length, nsamples, source, rev, depth, NULL);
}

static void write_stream(const stream_t *s, uint16_t version, cts_mt_encoding_t encoding,
                         bool clock_times, bool innermost, written_t *wr) {
  uint64_t rng = 42, now = 1700000000000000ull;
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.version = version;
  cfg.encoding = encoding;
  cfg.sample_rate = 1.0;
  cfg.executable_name = "synthetic";
  cfg.pid = 4242;
  cfg.start_time_us = now;
  cfg.clock = fake_clock;
  cfg.clock_user_data = &now;
  cfg.resolve = resolve;
  cfg.write = buf_write;
  cfg.write_user_data = &wr->out;
  cfg.max_backtrace_frames = MAX_FRAMES;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  CTS_ASSERT(mem != NULL);
  cts_mt_writer_t *w;
  CTS_ASSERT_EQ_INT(cts_mt_writer_init(&w, mem, size, &cfg), 0);
  uint64_t burst[200], jump_t = 0;
  unsigned boundary = 0;
  for (unsigned n = 0; n < NEVENTS; n++) {
    const uint64_t r = cts_splitmix64(&rng);
    uint64_t t;
    if (boundary) { /* a jump started a packet at jump_t: its last time, then one past it */
      t = now = jump_t + 30000000u + (boundary == 1);
      boundary--;
    } else if (clock_times && r % 3 == 0)
      t = CTS_TIME_NOW;
    else if (r % 997 == 0) { /* past a packet's span */
      t = jump_t = now += 31000000u;
      boundary = 2;
    } else if (r % 101 == 0)
      t = now - 100u; /* a step back */
    else
      t = now += r % 50u;
    const uint64_t ids = cts_mt_writer_next_id(w);
    if (ids && r % 7 < 3) {
      const uint64_t victim = cts_splitmix64(&rng) % ids;
      CTS_ASSERT_EQ_INT(
          r % 7 == 0 ? cts_mt_writer_promote(w, t, victim) : cts_mt_writer_collect(w, t, victim),
          0);
      continue;
    }
    const uint64_t length = 1 + (r >> 8) % 40u, nsamples = (r >> 16) % 9u ? 1 : 1 + (r >> 20) % 5u;
    const cts_mt_source_t source = (cts_mt_source_t)((r >> 24) % 11u == 0 ? 1 : 0);
    if (r % 613 == 0) { /* 200 codes never seen: more locations wait than a packet holds back */
      for (size_t i = 0; i < 200; i++) burst[i] = 0xA00000u + (uint64_t)n * 200u * 16u + i * 16u;
      CTS_ASSERT_EQ_INT(alloc(w, innermost, t, length, nsamples, source, burst, 200), 0);
    } else {
      const size_t k = (r >> 32) % NSTACKS;
      CTS_ASSERT_EQ_INT(alloc(w, innermost, t, length, nsamples, source, s->stacks[k], s->depth[k]),
                        0);
    }
    wr->allocs++;
  }
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(w), 0);
  free(mem);
}

typedef struct seen {
  uint64_t allocs, events;
} seen_t;

static int on_event(void *ud, const cts_mt_event_t *ev) {
  seen_t *s = ud;
  s->events++;
  if (ev->kind == CTS_MT_ALLOC) s->allocs++;
  return 0;
}

static void check(uint16_t version, cts_mt_encoding_t encoding, bool clock_times, bool innermost,
                  uint64_t expected_hash, uint64_t expected_len) {
  stream_t *s = calloc(1, sizeof *s);
  CTS_ASSERT(s != NULL);
  uint64_t rng = 7;
  make_stacks(s, &rng);
  written_t wr = {0};
  write_stream(s, version, encoding, clock_times, innermost, &wr);
  free(s);
  /* The reader takes it all. */
  cts_mt_reader_config_t rc;
  cts_mt_reader_config_init(&rc);
  rc.allocator = cts_os_allocator();
  seen_t seen = {0};
  const cts_mt_handler_t h = {.user_data = &seen, .on_event = on_event};
  cts_mt_reader_t *r;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &rc, &h), 0);
  int e = cts_mt_reader_feed(r, wr.out.data, wr.out.len);
  if (!e) e = cts_mt_reader_finish(r);
  CTS_ASSERT_MSG(e == 0, "reader: %s", cts_mt_reader_error_message(r));
  cts_mt_reader_destroy(r);
  CTS_ASSERT_EQ_U64(seen.allocs, wr.allocs);
  CTS_ASSERT_EQ_U64(seen.events, NEVENTS);
  const uint64_t hash = fnv1a(wr.out.data, wr.out.len);
  CTS_ASSERT_MSG(hash == expected_hash && wr.out.len == expected_len,
                 "v%u enc %d clock %d: %zu bytes, hash 0x%016llx; expected %llu bytes, 0x%016llx",
                 version, (int)encoding, clock_times, wr.out.len, (unsigned long long)hash,
                 (unsigned long long)expected_len, (unsigned long long)expected_hash);
  free(wr.out.data);
}

CTS_TEST(v2_memtrace) {
  check(2, CTS_MT_ENCODING_MEMTRACE, false, false, 0x5e798d54113d6a50ull, 515648);
}
CTS_TEST(v2_memtrace_clock) {
  check(2, CTS_MT_ENCODING_MEMTRACE, true, false, 0xa8deedfa0c6af28eull, 514262);
}
CTS_TEST(v2_compact) {
  check(2, CTS_MT_ENCODING_COMPACT, false, false, 0x26f859262e0197fdull, 500559);
}
CTS_TEST(v3_memtrace) {
  check(3, CTS_MT_ENCODING_MEMTRACE, false, false, 0x7fb584326ea48381ull, 515938);
}
CTS_TEST(v3_compact_clock) {
  check(3, CTS_MT_ENCODING_COMPACT, true, false, 0x8fcd3ff734e6b7beull, 499291);
}

CTS_TEST(v2_memtrace_innermost_first) {
  check(2, CTS_MT_ENCODING_MEMTRACE, false, true, 0x5e798d54113d6a50ull, 515648);
}
CTS_TEST(v2_compact_innermost_first) {
  check(2, CTS_MT_ENCODING_COMPACT, false, true, 0x26f859262e0197fdull, 500559);
}
CTS_TEST(v3_compact_clock_innermost_first) {
  check(3, CTS_MT_ENCODING_COMPACT, true, true, 0x8fcd3ff734e6b7beull, 499291);
}

/* Frames past max_backtrace_frames have no room in the writer's copy: refused, nothing
 * written, and the writer goes on. */
CTS_TEST(innermost_first_longer_than_the_writer_holds) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.start_time_us = 1000;
  cfg.write = buf_write;
  buf_t out = {0};
  cfg.write_user_data = &out;
  cfg.max_backtrace_frames = 4;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  CTS_ASSERT(mem != NULL);
  cts_mt_writer_t *w;
  CTS_ASSERT_EQ_INT(cts_mt_writer_init(&w, mem, size, &cfg), 0);
  const uint64_t frames[5] = {0x10, 0x20, 0x30, 0x40, 0x50};
  CTS_ASSERT_EQ_INT(
      cts__mt_writer_alloc_innermost_first(w, 1001, 2, 1, CTS_MT_SOURCE_MINOR, frames, 5, NULL),
      CTS_E_INVAL);
  CTS_ASSERT_EQ_U64(cts_mt_writer_next_id(w), 0);
  uint64_t id = 99;
  CTS_ASSERT_EQ_INT(
      cts__mt_writer_alloc_innermost_first(w, 1002, 2, 1, CTS_MT_SOURCE_MINOR, frames, 4, &id), 0);
  CTS_ASSERT_EQ_U64(id, 0);
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(w), 0);
  free(mem);
  free(out.data);
}

CTS_TEST_MAIN()
