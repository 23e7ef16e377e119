/* SPDX-License-Identifier: MIT */
/* cts_mt_reader_count_frees(): promotions and collections counted instead of delivered, and
 * cts_mt_reader_count_allocs(): most allocations too (a third reading: the allocations it
 * delivers plus its counts must add up to every allocation's figures, first and last too).
 * Each trace is read twice, delivering every event and counting, fed whole and in small
 * pieces (packets split across feeds), backtraces decoded and skipped; both readings must
 * give the same allocations (a digest of every field and frame), the same packets, the
 * same error (code and offset), and counts, first and last times and offsets equal to the
 * promotions and collections delivered -- before an error too. On the golden corpus, the
 * corrupt-trace corpus and generated v2 and v3 traces. */
#include <stdlib.h>

#include <ctfscope/ctfscope.h>

#include "../../src/common/hash.h"
#include "../../src/os/os.h"
#include "../mt_reader_config.h"
#include "../test.h"
#include "../test_buf.h"
#include "../trace_dir.h"
#include "mixed_trace.h"

typedef struct seen {
  uint64_t allocs, digest, packets, packet_digest;
  cts_mt_free_counts_t frees;  /* delivered ones, tallied as the reader counts them */
  cts_mt_alloc_counts_t tally; /* delivered allocations, tallied as the reader counts them */
} seen_t;

/* What cts_mt_reader_count_allocs() counts of ev, by its definition. */
static void tally_alloc(cts_mt_alloc_counts_t *a, const cts_mt_event_t *ev) {
  if (a->allocs[0] + a->allocs[1] + a->allocs[2] == 0)
    a->first_time_us = ev->time_us, a->first_offset = ev->offset;
  a->last_time_us = ev->time_us;
  a->last_offset = ev->offset;
  a->allocs[ev->source]++;
  a->samples[ev->source] += ev->nsamples;
  a->sum_length_words += ev->length;
  a->sum_length_x_nsamples += ev->length * ev->nsamples;
  if (ev->length > a->max_length_words) a->max_length_words = ev->length;
  const uint64_t n = ev->backtrace_len;
  const uint64_t suffix = n - (ev->common_prefix < n ? ev->common_prefix : n);
  if (ev->length >= 1 && ev->length <= 16 && ev->source == CTS_MT_SOURCE_MINOR &&
      ev->nsamples == 1 && suffix < 256)
    a->short_form_eligible++;
  a->frames_total += n;
  if (n > a->frames_max) a->frames_max = n;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  seen_t *s = ud;
  if (ev->kind != CTS_MT_ALLOC) {
    cts_mt_free_counts_t *f = &s->frees;
    if (f->promote + f->collect == 0) f->first_time_us = ev->time_us, f->first_offset = ev->offset;
    f->last_time_us = ev->time_us;
    f->last_offset = ev->offset;
    if (ev->kind == CTS_MT_PROMOTE)
      f->promote++;
    else
      f->collect++;
    return 0;
  }
  s->allocs++;
  tally_alloc(&s->tally, ev);
  uint64_t h = cts_hash_combine(s->digest, ev->time_us);
  h = cts_hash_combine(h, ev->obj_id);
  h = cts_hash_combine(h, ev->length);
  h = cts_hash_combine(h, ev->nsamples);
  h = cts_hash_combine(h, ev->source);
  h = cts_hash_combine(h, ev->short_form);
  h = cts_hash_combine(h, ev->common_prefix);
  h = cts_hash_combine(h, ev->offset);
  h = cts_hash_combine(h, ev->backtrace_len);
  for (size_t i = 0; i < ev->backtrace_len; i++) h = cts_hash_combine(h, ev->backtrace[i]);
  s->digest = h;
  return 0;
}

static int on_packet(void *ud, const cts_mt_packet_t *p) {
  seen_t *s = ud;
  s->packets++;
  uint64_t h = cts_hash_combine(s->packet_digest, p->offset);
  h = cts_hash_combine(h, p->kind);
  s->packet_digest = cts_hash_combine(h, p->nevents);
  return 0;
}

typedef struct reading {
  seen_t seen;
  cts_mt_free_counts_t counted;
  cts_mt_alloc_counts_t counted_allocs;
  int err;
  uint64_t err_offset;
} reading_t;

/* count: 0 delivers everything, 1 counts promotions and collections, 2 allocations too. */
static void read_trace(const uint8_t *data, size_t len, size_t piece, bool decode, int count,
                       reading_t *out) {
  memset(out, 0, sizeof *out);
  cts_mt_reader_config_t cfg = test_reader_config();
  cfg.decode_backtraces = decode;
  const cts_mt_handler_t h = {
      .user_data = &out->seen, .on_event = on_event, .on_packet = on_packet};
  cts_mt_reader_t *r;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &cfg, &h), 0);
  if (count) cts_mt_reader_count_frees(r, true);
  if (count == 2) cts_mt_reader_count_allocs(r, true);
  int e = 0;
  for (size_t off = 0; !e && off < len; off += piece)
    e = cts_mt_reader_feed(r, data + off, len - off < piece ? len - off : piece);
  if (!e) e = cts_mt_reader_finish(r);
  out->err = e;
  out->err_offset = cts_mt_reader_error_offset(r);
  cts_mt_reader_free_counts(r, &out->counted);
  cts_mt_reader_alloc_counts(r, &out->counted_allocs);
  cts_mt_reader_destroy(r);
}

static bool same_frees(const cts_mt_free_counts_t *a, const cts_mt_free_counts_t *b) {
  if (a->promote != b->promote || a->collect != b->collect) return false;
  if (a->promote + a->collect == 0) return true;
  return a->first_time_us == b->first_time_us && a->first_offset == b->first_offset &&
         a->last_time_us == b->last_time_us && a->last_offset == b->last_offset;
}

/* a + b, the first and last by offset: what delivered and counted allocations add up to. */
static cts_mt_alloc_counts_t merge_allocs(const cts_mt_alloc_counts_t *a,
                                          const cts_mt_alloc_counts_t *b) {
  const uint64_t na = a->allocs[0] + a->allocs[1] + a->allocs[2];
  const uint64_t nb = b->allocs[0] + b->allocs[1] + b->allocs[2];
  if (!nb) return *a;
  if (!na) return *b;
  cts_mt_alloc_counts_t m = *a;
  for (int i = 0; i < 3; i++) m.allocs[i] += b->allocs[i], m.samples[i] += b->samples[i];
  m.sum_length_words += b->sum_length_words;
  m.sum_length_x_nsamples += b->sum_length_x_nsamples;
  if (b->max_length_words > m.max_length_words) m.max_length_words = b->max_length_words;
  m.short_form_eligible += b->short_form_eligible;
  m.frames_total += b->frames_total;
  if (b->frames_max > m.frames_max) m.frames_max = b->frames_max;
  if (b->first_offset < m.first_offset)
    m.first_offset = b->first_offset, m.first_time_us = b->first_time_us;
  if (b->last_offset > m.last_offset)
    m.last_offset = b->last_offset, m.last_time_us = b->last_time_us;
  return m;
}

/* Counting allocations too (decoding), delivered plus counted must be every allocation. */
static void check_allocs_counted(const char *name, size_t piece, const reading_t *all,
                                 const reading_t *tal, uint64_t *counted) {
  CTS_ASSERT_MSG(all->err == tal->err && all->err_offset == tal->err_offset,
                 "%s (piece %zu): error %d at %llu delivering, %d at %llu counting allocations",
                 name, piece, all->err, (unsigned long long)all->err_offset, tal->err,
                 (unsigned long long)tal->err_offset);
  CTS_ASSERT_MSG(
      all->seen.packets == tal->seen.packets && all->seen.packet_digest == tal->seen.packet_digest,
      "%s (piece %zu): packets differ when counting allocations", name, piece);
  CTS_ASSERT_MSG(same_frees(&all->seen.frees, &tal->counted),
                 "%s (piece %zu): promotions and collections differ counting allocations", name,
                 piece);
  const cts_mt_alloc_counts_t m = merge_allocs(&tal->seen.tally, &tal->counted_allocs);
  const uint64_t n = m.allocs[0] + m.allocs[1] + m.allocs[2];
  CTS_ASSERT_MSG(n == all->seen.allocs && (n == 0 || memcmp(&m, &all->seen.tally, sizeof m) == 0),
                 "%s (piece %zu): %llu allocations delivered, %llu delivered + counted, or "
                 "their figures differ",
                 name, piece, (unsigned long long)all->seen.allocs, (unsigned long long)n);
  *counted +=
      tal->counted_allocs.allocs[0] + tal->counted_allocs.allocs[1] + tal->counted_allocs.allocs[2];
}

/* Both readings of data agree, in every feed size and mode. Adds to *counted the
 * promotions and collections counted with backtraces decoded, fed whole. */
static void check_trace(const char *name, const uint8_t *data, size_t len, uint64_t *counted,
                        uint64_t *counted_allocs) {
  static const size_t pieces[] = {SIZE_MAX, 4096, 37};
  for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
    for (int decode = 0; decode < 2; decode++) {
      reading_t all, cnt;
      read_trace(data, len, pieces[i], decode, false, &all);
      read_trace(data, len, pieces[i], decode, true, &cnt);
      CTS_ASSERT_MSG(all.err == cnt.err && all.err_offset == cnt.err_offset,
                     "%s (piece %zu, decode %d): error %d at %llu delivering, %d at %llu counting",
                     name, pieces[i], decode, all.err, (unsigned long long)all.err_offset, cnt.err,
                     (unsigned long long)cnt.err_offset);
      CTS_ASSERT_MSG(all.seen.allocs == cnt.seen.allocs && all.seen.digest == cnt.seen.digest,
                     "%s (piece %zu, decode %d): allocations differ when counting", name, pieces[i],
                     decode);
      CTS_ASSERT_MSG(
          all.seen.packets == cnt.seen.packets && all.seen.packet_digest == cnt.seen.packet_digest,
          "%s (piece %zu, decode %d): packets differ when counting", name, pieces[i], decode);
      /* Counting, nothing but allocations reaches on_event; delivering, nothing is counted. */
      CTS_ASSERT_MSG(cnt.seen.frees.promote + cnt.seen.frees.collect == 0,
                     "%s: a promotion or collection delivered while counting", name);
      CTS_ASSERT_MSG(all.counted.promote + all.counted.collect == 0,
                     "%s: a promotion or collection counted while delivering", name);
      CTS_ASSERT_MSG(
          same_frees(&all.seen.frees, &cnt.counted),
          "%s (piece %zu, decode %d): delivered %llu promotions, %llu collections "
          "(last at %llu); counted %llu, %llu (last at %llu)",
          name, pieces[i], decode, (unsigned long long)all.seen.frees.promote,
          (unsigned long long)all.seen.frees.collect,
          (unsigned long long)all.seen.frees.last_offset, (unsigned long long)cnt.counted.promote,
          (unsigned long long)cnt.counted.collect, (unsigned long long)cnt.counted.last_offset);
      if (i == 0 && decode) *counted += cnt.counted.promote + cnt.counted.collect;
      reading_t tal;
      read_trace(data, len, pieces[i], decode, 2, &tal);
      uint64_t unused = 0;
      check_allocs_counted(name, pieces[i], &all, &tal, decode ? counted_allocs : &unused);
    }
  }
}

typedef struct dir_counts {
  uint64_t counted, counted_allocs;
} dir_counts_t;

static void check_file(const char *name, const uint8_t *data, size_t len, void *ctx) {
  dir_counts_t *c = ctx;
  check_trace(name, data, len, &c->counted, &c->counted_allocs);
}

CTS_TEST(counting_matches_delivering_on_corpus) {
  CTS_REQUIRE_CORPUS(corpus);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/memtrace/traces", corpus);
  dir_counts_t c = {0};
  size_t nfiles = 0;
  for_each_trace_file(dir, ".ctf", check_file, &c, &nfiles);
  CTS_ASSERT(nfiles >= 10);
  CTS_ASSERT(c.counted > 1000);
  CTS_ASSERT(c.counted_allocs > 1000);
}

CTS_TEST(counting_matches_delivering_on_corrupt_traces) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fail", cts_test_data_dir());
  dir_counts_t c = {0};
  size_t nfiles = 0;
  for_each_trace_file(dir, ".ctf", check_file, &c, &nfiles);
  CTS_ASSERT(nfiles >= 10);
}

/* ---- generated traces: many packets, every event kind, v2 and v3 ------------------------ */

CTS_TEST(counting_matches_delivering_on_generated_traces) {
  for (uint16_t version = 2; version <= 3; version++) {
    buf_t data = {0};
    make_mixed_trace(&data, version, 20000, version);
    CTS_ASSERT(data.len > 100000); /* many packets */
    char name[32];
    snprintf(name, sizeof name, "generated v%u", version);
    uint64_t counted = 0, counted_allocs = 0;
    check_trace(name, data.data, data.len, &counted, &counted_allocs);
    CTS_ASSERT(counted > 19000);
    CTS_ASSERT(counted_allocs > 10000);
    /* Cut short inside the trace: the last packet is dropped, and counting agrees. */
    check_trace(name, data.data, data.len * 2 / 3, &counted, &counted_allocs);
    free(data.data);
  }
}

CTS_TEST_MAIN()
