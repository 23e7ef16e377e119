/* SPDX-License-Identifier: MIT */
/* cts_mt_reader_count_frees(): promotions and collections counted instead of delivered.
 * Each trace is read twice, delivering every event and counting, fed whole and in small
 * pieces (packets split across feeds), backtraces decoded and skipped; both readings must
 * give the same allocations (a digest of every field and frame), the same packets, the
 * same error (code and offset), and counts, first and last times and offsets equal to the
 * promotions and collections delivered -- before an error too. On the golden corpus, the
 * corrupt-trace corpus and generated v2 and v3 traces. */
#include <dirent.h>
#include <stdlib.h>

#include <ctfscope/ctfscope.h>

#include "../../src/common/hash.h"
#include "../../src/os/os.h"
#include "../test.h"
#include "../test_buf.h"

typedef struct seen {
  uint64_t allocs, digest, packets, packet_digest;
  cts_mt_free_counts_t frees; /* delivered ones, tallied as the reader counts them */
} seen_t;

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
  int err;
  uint64_t err_offset;
} reading_t;

static void read_trace(const uint8_t *data, size_t len, size_t piece, bool decode, bool count,
                       reading_t *out) {
  memset(out, 0, sizeof *out);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cfg.decode_backtraces = decode;
  const cts_mt_handler_t h = {
      .user_data = &out->seen, .on_event = on_event, .on_packet = on_packet};
  cts_mt_reader_t *r;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &cfg, &h), 0);
  if (count) cts_mt_reader_count_frees(r, true);
  int e = 0;
  for (size_t off = 0; !e && off < len; off += piece)
    e = cts_mt_reader_feed(r, data + off, len - off < piece ? len - off : piece);
  if (!e) e = cts_mt_reader_finish(r);
  out->err = e;
  out->err_offset = cts_mt_reader_error_offset(r);
  cts_mt_reader_free_counts(r, &out->counted);
  cts_mt_reader_destroy(r);
}

static bool same_frees(const cts_mt_free_counts_t *a, const cts_mt_free_counts_t *b) {
  if (a->promote != b->promote || a->collect != b->collect) return false;
  if (a->promote + a->collect == 0) return true;
  return a->first_time_us == b->first_time_us && a->first_offset == b->first_offset &&
         a->last_time_us == b->last_time_us && a->last_offset == b->last_offset;
}

/* Both readings of data agree, in every feed size and mode. Adds to *counted the
 * promotions and collections counted with backtraces decoded, fed whole. */
static void check_trace(const char *name, const uint8_t *data, size_t len, uint64_t *counted) {
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
    }
  }
}

/* Checks every .ctf file of dir; counts them, and adds their counted events. */
static void check_dir(const char *dir, size_t *nfiles, uint64_t *counted) {
  DIR *d = opendir(dir);
  CTS_ASSERT_MSG(d != NULL, "cannot open %s", dir);
  if (!d) return;
  const struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const size_t n = strlen(de->d_name);
    if (n < 4 || strcmp(de->d_name + n - 4, ".ctf") != 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    buf_t data = {0};
    CTS_ASSERT_MSG(read_file(path, &data), "cannot read %s", de->d_name);
    check_trace(de->d_name, data.data, data.len, counted);
    (*nfiles)++;
    free(data.data);
  }
  closedir(d);
}

CTS_TEST(counting_matches_delivering_on_corpus) {
  CTS_REQUIRE_CORPUS(corpus);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/memtrace/traces", corpus);
  uint64_t counted = 0;
  size_t nfiles = 0;
  check_dir(dir, &nfiles, &counted);
  CTS_ASSERT(nfiles >= 10);
  CTS_ASSERT(counted > 1000);
}

CTS_TEST(counting_matches_delivering_on_corrupt_traces) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fail", cts_test_data_dir());
  uint64_t counted = 0;
  size_t nfiles = 0;
  check_dir(dir, &nfiles, &counted);
  CTS_ASSERT(nfiles >= 10);
}

/* ---- generated traces: many packets, every event kind, v2 and v3 ------------------------ */

static size_t resolve_any(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  if (max) out[0] = (cts_mt_location_t){(uint32_t)(code & 0xFFFFF), 0, 0, "f.c", "fn"};
  return 1;
}

static uint64_t now_us;
static uint64_t test_clock(void *ud) {
  (void)ud;
  return now_us;
}

/* A trace of n allocations with backtraces from a few dozen codes, each block promoted or
 * collected or both a few allocations later, time moving on by 0-3 us an event. */
static void make_trace(buf_t *out, uint16_t version, uint32_t n, uint64_t seed) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.version = version;
  cfg.sample_rate = 1e-3;
  cfg.write = buf_write;
  cfg.write_user_data = out;
  cfg.clock = test_clock;
  cfg.resolve = resolve_any;
  now_us = 1700000000000000ull;
  cfg.start_time_us = now_us;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) / 64 * 64);
  CTS_ASSERT(mem != NULL);
  cts_mt_writer_t *w;
  CTS_ASSERT_EQ_INT(cts_mt_writer_init(&w, mem, size, &cfg), 0);
  uint64_t rng = seed, ids[8] = {0};
  bool live[8] = {0};
  for (uint32_t i = 0; i < n; i++) {
    uint64_t bt[24];
    const size_t depth = 1 + cts_splitmix64(&rng) % 24;
    for (size_t k = 0; k < depth; k++) bt[k] = 0x1000 + (k * 7 + cts_splitmix64(&rng) % 5) % 40;
    const uint64_t words = 1 + cts_splitmix64(&rng) % 300;
    const size_t slot = i % 8;
    if (live[slot]) {
      if (cts_splitmix64(&rng) % 3 == 0)
        CTS_ASSERT_EQ_INT(cts_mt_writer_promote(w, CTS_TIME_NOW, ids[slot]), 0);
      now_us += cts_splitmix64(&rng) % 4;
      CTS_ASSERT_EQ_INT(cts_mt_writer_collect(w, CTS_TIME_NOW, ids[slot]), 0);
    }
    now_us += cts_splitmix64(&rng) % 4;
    CTS_ASSERT_EQ_INT(cts_mt_writer_alloc(w, CTS_TIME_NOW, words, 1 + words / 100,
                                          (cts_mt_source_t)(words % 3), bt, depth, &ids[slot]),
                      0);
    live[slot] = true;
  }
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(w), 0);
  free(mem);
}

CTS_TEST(counting_matches_delivering_on_generated_traces) {
  for (uint16_t version = 2; version <= 3; version++) {
    buf_t data = {0};
    make_trace(&data, version, 20000, version);
    CTS_ASSERT(data.len > 100000); /* many packets */
    char name[32];
    snprintf(name, sizeof name, "generated v%u", version);
    uint64_t counted = 0;
    check_trace(name, data.data, data.len, &counted);
    CTS_ASSERT(counted > 19000);
    /* Cut short inside the trace: the last packet is dropped, and counting agrees. */
    check_trace(name, data.data, data.len * 2 / 3, &counted);
    free(data.data);
  }
}

CTS_TEST_MAIN()
