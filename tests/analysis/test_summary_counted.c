/* SPDX-License-Identifier: MIT */
/* `ctfscope info`'s summary with the reader counting promotions, collections and most
 * allocations itself (cts_summary_count_events(), cts_mt_reader_count_allocs()) must give
 * every figure it gives with every event delivered: counts, sums, largest values, the short
 * form's count, frames, distinct codes, loss markers, first and last event, packets, and the
 * same error at the same offset. Each trace is fed whole, in 4 KiB and in 37-byte pieces, on
 * the golden corpus (with memtrace's writer-truncated backtraces, where the summary turns the
 * counting off), every corrupt trace of tests/data/fail, and generated v2 and v3 traces with
 * every source, long and short forms, one-frame backtraces and drop-mode loss markers. */
#include "../../src/analysis/summary.h"

#include <stdlib.h>

#include <ctfscope/ctfscope.h>
#include <ctfscope/tracer.h>

#include "../../src/common/hash.h"
#include "../../src/os/os.h"
#include "../test.h"
#include "../test_buf.h"
#include "../trace_dir.h"
#include "../core/mixed_trace.h"

typedef struct reading {
  cts_summary_t s;
  cts_mt_reader_t *reader;
  int err;
  uint64_t err_offset;
  uint64_t counted_allocs; /* by the reader, not delivered */
} reading_t;

static int on_event(void *ud, const cts_mt_event_t *ev) {
  reading_t *x = ud;
  return cts_summary_add_event(&x->s, ev);
}

static int on_packet(void *ud, const cts_mt_packet_t *p) {
  reading_t *x = ud;
  cts_summary_add_packet(&x->s, p);
  return 0;
}

static void read_summary(reading_t *x, const uint8_t *data, size_t len, size_t piece, bool count) {
  memset(x, 0, sizeof *x);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = x, .on_event = on_event, .on_packet = on_packet};
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&x->reader, &cfg, &h), 0);
  cts_summary_init(&x->s, x->reader);
  if (count) cts_summary_count_events(&x->s);
  int e = 0;
  for (size_t off = 0; !e && off < len; off += piece)
    e = cts_mt_reader_feed(x->reader, data + off, len - off < piece ? len - off : piece);
  if (!e) e = cts_mt_reader_finish(x->reader);
  x->err = e;
  x->err_offset = cts_mt_reader_error_offset(x->reader);
  cts_summary_finish(&x->s);
  cts_mt_alloc_counts_t a;
  cts_mt_reader_alloc_counts(x->reader, &a);
  x->counted_allocs = a.allocs[0] + a.allocs[1] + a.allocs[2];
}

static void reading_fini(reading_t *x) {
  cts_summary_fini(&x->s);
  cts_mt_reader_destroy(x->reader);
}

/* Every figure `info` prints: each into each[], *n of them, and their digest. */
static uint64_t figures(const cts_summary_t *s, uint64_t *each, size_t *n) {
  const uint64_t v[] = {s->events_total,
                        s->alloc_by_source[0],
                        s->alloc_by_source[1],
                        s->alloc_by_source[2],
                        s->promote,
                        s->collect,
                        s->allocs_short_eligible,
                        s->samples_by_source[0],
                        s->samples_by_source[1],
                        s->samples_by_source[2],
                        s->sum_length_words,
                        s->sum_length_x_nsamples,
                        s->max_length_words,
                        s->backtrace_frames_total,
                        s->backtrace_length_max,
                        s->distinct_codes,
                        s->codes_without_locations,
                        s->have_events,
                        s->have_events ? s->first_event_us : 0,
                        s->have_events ? s->last_event_us : 0,
                        s->have_events ? s->first_event_offset : 0,
                        s->have_events ? s->last_event_offset : 0,
                        s->end_us,
                        s->packets_total,
                        s->packets_by_kind[0],
                        s->packets_by_kind[1],
                        s->packets_by_kind[2],
                        s->packets_by_kind[3],
                        s->packets_by_kind[4],
                        s->packets_by_kind[5],
                        s->loss_markers,
                        s->lost_allocs,
                        s->lost_frees,
                        s->lost_samples};
  uint64_t h = 0;
  *n = sizeof v / sizeof v[0];
  for (size_t i = 0; i < *n; i++) each[i] = v[i], h = cts_hash_combine(h, v[i]);
  return h;
}

/* Both readings agree in every feed size; adds the allocations the reader counted (fed
 * whole) to *counted and the loss markers to *markers. */
static void check_trace(const char *name, const uint8_t *data, size_t len, uint64_t *counted,
                        uint64_t *markers) {
  static const size_t pieces[] = {SIZE_MAX, 4096, 37};
  for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
    reading_t all, cnt;
    read_summary(&all, data, len, pieces[i], false);
    read_summary(&cnt, data, len, pieces[i], true);
    CTS_ASSERT_MSG(all.err == cnt.err && all.err_offset == cnt.err_offset,
                   "%s (piece %zu): error %d at %llu delivering, %d at %llu counting", name,
                   pieces[i], all.err, (unsigned long long)all.err_offset, cnt.err,
                   (unsigned long long)cnt.err_offset);
    uint64_t a[64], b[64];
    size_t na, nb;
    if (figures(&all.s, a, &na) != figures(&cnt.s, b, &nb)) {
      for (size_t k = 0; k < na; k++)
        CTS_ASSERT_MSG(a[k] == b[k], "%s (piece %zu): figure %zu is %llu delivering, %llu counting",
                       name, pieces[i], k, (unsigned long long)a[k], (unsigned long long)b[k]);
    }
    CTS_ASSERT_MSG(all.counted_allocs == 0, "%s: allocations counted while delivering", name);
    if (i == 0) *counted += cnt.counted_allocs, *markers += cnt.s.loss_markers;
    reading_fini(&all);
    reading_fini(&cnt);
  }
}

typedef struct dir_check {
  bool fuzz;
  uint64_t counted, markers;
} dir_check_t;

static void check_file(const char *name, const uint8_t *data, size_t len, void *ctx) {
  dir_check_t *c = ctx;
  size_t skip = 0;
  if (c->fuzz && len) skip = 1 + (data[0] & 7u) < len ? 1 + (data[0] & 7u) : len;
  /* (An empty file has no buffer: no offset on a null pointer.) */
  check_trace(name, data ? data + skip : data, len - skip, &c->counted, &c->markers);
}

/* Checks the .ctf files of dir, or with fuzz every file of a fuzz_memtrace_reader corpus
 * (its inputs: a byte n & 7, n feed sizes, then the trace). */
static void check_dir(const char *dir, bool fuzz, size_t *nfiles, uint64_t *counted) {
  dir_check_t c = {.fuzz = fuzz, .counted = *counted};
  for_each_trace_file(dir, fuzz ? NULL : ".ctf", check_file, &c, nfiles);
  *counted = c.counted;
}

CTS_TEST(counted_summary_matches_on_corpus) {
  CTS_REQUIRE_CORPUS(corpus);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/memtrace/traces", corpus);
  uint64_t counted = 0;
  size_t nfiles = 0;
  check_dir(dir, false, &nfiles, &counted);
  CTS_ASSERT(nfiles >= 10);
  CTS_ASSERT(counted > 1000);
}

CTS_TEST(counted_summary_matches_on_corrupt_traces) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fail", cts_test_data_dir());
  uint64_t counted = 0;
  size_t nfiles = 0;
  check_dir(dir, false, &nfiles, &counted);
  CTS_ASSERT(nfiles >= 10);
}

CTS_TEST(counted_summary_matches_on_fuzz_corpus) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/../fuzz/corpus/fuzz_memtrace_reader", cts_test_data_dir());
  uint64_t counted = 0;
  size_t nfiles = 0;
  check_dir(dir, true, &nfiles, &counted);
  CTS_ASSERT(nfiles >= 100);
  CTS_ASSERT(counted > 0);
}

CTS_TEST(counted_summary_matches_on_generated_traces) {
  for (uint16_t version = 2; version <= 3; version++) {
    buf_t data = {0};
    make_mixed_trace(&data, version, 30000, version * 11);
    CTS_ASSERT(data.len > 100000); /* many packets */
    char name[32];
    snprintf(name, sizeof name, "generated v%u", version);
    uint64_t counted = 0, markers = 0;
    check_trace(name, data.data, data.len, &counted, &markers);
    /* Most allocations counted by the reader, the loss markers still seen. */
    CTS_ASSERT(counted > 20000);
    CTS_ASSERT(markers > 100);
    /* Cut short inside the trace: the last packet is dropped, and counting agrees. */
    check_trace(name, data.data, data.len * 2 / 3, &counted, &markers);
    free(data.data);
  }
}

CTS_TEST_MAIN()
