/* SPDX-License-Identifier: MIT */
/* The memtrace reader's arithmetic decoding style (src/core/memtrace_events.c, "Decoding
 * styles") on long-form allocations whose fields take every size: a trace written with a
 * random mix of 1- and 3-byte lengths and sample counts and of codeword tags (what makes
 * the reader take that style, checked), with the rare 5- and 9-byte vints, common prefixes
 * of 253 frames or more (a 3-byte vint), and long-form allocations that the short form
 * would take but for their 256 codewords or more. Every event must come back as written,
 * delivered or counted (cts_mt_reader_count_allocs()). White-box: the test reads the
 * reader's domain state to know which style decoded the trace. */
#include <ctfscope/ctfscope.h>
#include <stdlib.h>

#include "../../src/common/hash.h"
#include "../../src/core/memtrace_reader_impl.h"
#include "../mt_reader_config.h"
#include "../test.h"
#include "../test_buf.h"
#include "buf_writer.h"

enum { ALLOCS = 60000, STACKS = 48, DEEP = 300, POOL = 150 };

/* What was written, in order: allocations and collections. */
typedef struct written {
  bool collect;
  uint64_t obj_id, length, nsamples, frames_hash;
  size_t depth;
  cts_mt_source_t source;
} written_t;

static written_t *log_;
static size_t nlog;

static uint64_t now_us = 1700000000000000ull;
static uint64_t clock_us(void *ud) {
  (void)ud;
  return now_us;
}

static uint64_t frames_hash(const uint64_t *bt, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ bt[i]) * 0x100000001b3ull;
  return h ^ n;
}

/* A value whose vint takes 1 or 3 bytes at random, and now and then 5 or 9. */
static uint64_t mixed_value(uint64_t *rng, uint64_t small_min) {
  const uint64_t r = cts_splitmix64(rng);
  if (r % 97 == 0) return 65536 + r % 1000000;                /* 5 bytes */
  if (r % 89 == 0) return (1ull << 33) + (r >> 40);           /* 9 bytes */
  if (r & 1) return small_min + (r >> 8) % (253 - small_min); /* 1 byte */
  return 253 + (r >> 8) % 60000;                              /* 3 bytes */
}

static void write_trace(buf_t *out) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 1e-3;
  cfg.clock = clock_us;
  cfg.resolve = resolve_any;
  cfg.start_time_us = now_us;
  cts_mt_writer_t *w;
  void *mem;
  open_buf_writer(&cfg, out, &w, &mem);
  if (cts_test_state.failed) return;
  /* A few dozen stacks picked at random: codewords of every tag in no order. And DEEP frames drawn
   * from POOL codes, all cached after the first allocation that uses them and in a new order each
   * time: nearly every frame a codeword of its own, none of them a literal. */
  static uint64_t stacks[STACKS][16], deep[DEEP + 1];
  size_t depths[STACKS];
  uint64_t rng = 36;
  for (size_t s = 0; s < STACKS; s++) {
    /* Two outer frames of a score of codes, then one of four fixed chains of 5-12 frames
     * (a hit and a run of predictions): tags 0, 1 and 2 mixed. */
    stacks[s][0] = 0x1000 + cts_splitmix64(&rng) % 20;
    stacks[s][1] = 0x1100 + cts_splitmix64(&rng) % 20;
    depths[s] = 2 + 5 + (s % 4) * 2;
    for (size_t k = 2; k < depths[s]; k++) stacks[s][k] = 0x2000 + (s % 4) * 64 + k;
  }
  log_ = calloc(2 * ALLOCS + 64, sizeof *log_);
  CTS_ASSERT(log_ != NULL);
  uint64_t ids[64] = {0};
  for (uint32_t i = 0; i < ALLOCS && !cts_test_state.failed; i++) {
    const uint64_t r = cts_splitmix64(&rng);
    written_t a = {.source = (cts_mt_source_t)(r % 3)};
    const uint64_t *bt = stacks[(r >> 8) % STACKS];
    a.depth = depths[(r >> 8) % STACKS];
    a.length = mixed_value(&rng, 17); /* never 1-16 words: always the long form */
    a.nsamples = mixed_value(&rng, 1);
    const uint32_t round = i % 2000;
    if (i == 100 || (i > ALLOCS / 2 && round < 3)) {
      if (i == 100 || round == 0)
        for (size_t k = 0; k <= DEEP; k++)
          deep[k] = 0x900000 + (i == 100 ? k % POOL : cts_splitmix64(&rng) % POOL);
      bt = deep;
      a.depth = i == 100 ? POOL : DEEP;
      if (round == 0 && i != 100) {
        /* Minor, one sample, 1-16 words: the short form's but for its codewords. */
        a.length = 1 + r % 16;
        a.nsamples = 1;
        a.source = CTS_MT_SOURCE_MINOR;
      } else if (i != 100) {
        a.depth = DEEP - (round == 1) + (round == 2); /* prefixes of 299 and 300 frames */
      }
    }
    a.frames_hash = frames_hash(bt, a.depth);
    now_us += r % 3;
    CTS_ASSERT_EQ_INT(cts_mt_writer_alloc(w, CTS_TIME_NOW, a.length, a.nsamples, a.source, bt,
                                          a.depth, &a.obj_id),
                      0);
    log_[nlog++] = a;
    const size_t slot = (r >> 20) % 64;
    if (ids[slot] && (r >> 30) % 3 == 0) {
      CTS_ASSERT_EQ_INT(cts_mt_writer_collect(w, CTS_TIME_NOW, ids[slot]), 0);
      log_[nlog++] = (written_t){.collect = true, .obj_id = ids[slot]};
      ids[slot] = 0;
    } else if (!ids[slot]) {
      ids[slot] = a.obj_id;
    }
  }
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(w), 0);
  free(mem);
}

/* What the reader gave back, compared with the log as it comes (delivering everything). */
typedef struct check {
  bool counting, literal; /* literal: one in the allocation being decoded */
  bool arithmetic;        /* the domain ended decoded by arithmetic */
  size_t next;            /* the log's next entry not yet seen */
  uint64_t mismatches, delivered_allocs, allocs, samples, lengths, frames;
  /* Long-form allocations that the short form would take but for their codewords, and
   * those of them without a literal (which the literal hook alone would have delivered). */
  uint64_t short_candidates, without_literal;
} check_t;

static void on_literal(void *ud, uint64_t code, bool in_backtrace) {
  (void)code;
  ((check_t *)ud)->literal |= in_backtrace;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  check_t *const c = ud;
  if (ev->kind != CTS_MT_ALLOC) {
    if (c->counting) return 0;
    const written_t *const want = &log_[c->next++];
    c->mismatches += !want->collect || want->obj_id != ev->obj_id;
    return 0;
  }
  c->delivered_allocs++;
  c->allocs++;
  c->samples += ev->nsamples;
  c->lengths += ev->length;
  c->frames += ev->backtrace_len;
  if (!ev->short_form && ev->length - 1 < 16 && ev->source == CTS_MT_SOURCE_MINOR &&
      ev->nsamples == 1) {
    c->short_candidates++;
    c->without_literal += !c->literal;
  }
  c->literal = false;
  if (c->counting) return 0;
  const written_t *const want = &log_[c->next++];
  c->mismatches += want->collect || want->obj_id != ev->obj_id || want->length != ev->length ||
                   want->nsamples != ev->nsamples || want->source != ev->source ||
                   want->depth != ev->backtrace_len ||
                   want->frames_hash != frames_hash(ev->backtrace, ev->backtrace_len);
  return 0;
}

/* Reads the trace, counting allocations if c->counting. */
static void read_back(const buf_t *trace, check_t *c) {
  cts_mt_reader_config_t cfg = test_reader_config();
  const cts_mt_handler_t h = {.user_data = c, .on_event = on_event};
  cts_mt_reader_t *r;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &cfg, &h), 0);
  if (c->counting) {
    cts_mt_reader_count_frees(r, true);
    cts_mt_reader_count_allocs(r, true);
  } else {
    cts_mt_reader_set_literal_hook(r, on_literal, c);
  }
  CTS_ASSERT_EQ_INT(cts_mt_reader_feed(r, trace->data, trace->len), 0);
  CTS_ASSERT_EQ_INT(cts_mt_reader_finish(r), 0);
  c->arithmetic = r->ndomains == 1 && r->domains[0]->random_mix;
  if (c->counting) {
    cts_mt_alloc_counts_t a;
    cts_mt_reader_alloc_counts(r, &a);
    for (int s = 0; s < 3; s++) c->allocs += a.allocs[s], c->samples += a.samples[s];
    c->lengths += a.sum_length_words;
    c->frames += a.frames_total;
  }
  cts_mt_reader_destroy(r);
}

static void forget_trace(buf_t *trace) {
  free(trace->data);
  free(log_);
  log_ = NULL;
  nlog = 0;
}

CTS_TEST(every_field_size_decodes_as_written) {
  buf_t trace = {0};
  write_trace(&trace);
  if (cts_test_state.failed) return;
  check_t c = {0};
  read_back(&trace, &c);
  /* Not vacuous: the arithmetic style decoded it. */
  CTS_ASSERT(c.arithmetic);
  CTS_ASSERT_EQ_U64(c.next, nlog);
  CTS_ASSERT_EQ_U64(c.mismatches, 0);
  forget_trace(&trace);
}

/* Counting allocations (`ctfscope info`'s way), the delivered and the counted add up to
 * what was written, and a long-form allocation that the short form would take but for its
 * codewords is delivered (its consumer decides on the backtrace), with or without a literal
 * among them: the arithmetic style's counting then needs no limit for the long form. (The
 * reader before this counted those without a literal.) */
CTS_TEST(counted_allocations_add_up_and_short_candidates_are_delivered) {
  buf_t trace = {0};
  write_trace(&trace);
  if (cts_test_state.failed) return;
  check_t all = {0}, counted = {.counting = true};
  read_back(&trace, &all);
  read_back(&trace, &counted);
  CTS_ASSERT(all.arithmetic && counted.arithmetic);
  CTS_ASSERT_EQ_U64(counted.allocs, all.allocs);
  CTS_ASSERT_EQ_U64(counted.samples, all.samples);
  CTS_ASSERT_EQ_U64(counted.lengths, all.lengths);
  CTS_ASSERT_EQ_U64(counted.frames, all.frames);
  /* Not vacuous: most allocations counted, not delivered; candidates without a literal. */
  CTS_ASSERT(counted.delivered_allocs < all.allocs / 10);
  CTS_ASSERT_MSG(all.without_literal >= 5, "%llu candidates without a literal",
                 (unsigned long long)all.without_literal);
  CTS_ASSERT_EQ_U64(counted.short_candidates, all.short_candidates);
  forget_trace(&trace);
}

CTS_TEST_MAIN()
