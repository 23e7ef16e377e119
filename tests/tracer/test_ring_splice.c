/* SPDX-License-Identifier: MIT */
/* Alloc records that leave out the outer frames they share with the previous record of
 * their ring (tracer_state.h, REC_SHARED_SHIFT): the writer rebuilds every backtrace as the
 * sampling thread captured it, across laps of the ring, sessions and drop mode's losses,
 * and a record whose shared frames it does not have is written without a backtrace, never
 * with frames guessed. White-box: the ring's counters and cts__ring_backtrace are read
 * directly. */
#define _GNU_SOURCE
/* First: tracer_state.h's inline functions take check.h's CTS_ASSERT, the tests test.h's. */
#include "tracer/tracer_state.h"
#undef CTS_ASSERT

#include <ctfscope/tracer.h>
#include <pthread.h>

#include "../test.h"
#include "decoded.h"

#define SITES     3u
#define MAX_DEPTH 64u

/* ---- the trace, with each backtrace whole ---------------------------------------------- */

typedef struct seen {
  uint64_t length;
  size_t depth;
  uint64_t innermost;
  uint64_t outer_hash; /* FNV-1a of every frame but the innermost, outermost first */
} seen_t;

typedef struct trace {
  seen_t *allocs;
  size_t nallocs, cap;
  uint64_t markers; /* loss markers */
} trace_t;

static uint64_t fnv(const uint64_t *f, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ f[i]) * 0x100000001b3ull;
  return h;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  trace_t *const t = ud;
  if (ev->kind != CTS_MT_ALLOC) return 0;
  if (ev->backtrace_len == 1 && ev->backtrace[0] >> 61 == 1) { /* CTS_TRACER_LOST_CODE_BASE */
    t->markers++;
    return 0;
  }
  if (t->nallocs == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 4096;
    t->allocs = realloc(t->allocs, t->cap * sizeof *t->allocs);
    if (!t->allocs) abort();
  }
  seen_t *const s = &t->allocs[t->nallocs++];
  s->length = ev->length;
  s->depth = ev->backtrace_len;
  s->innermost = ev->backtrace_len ? ev->backtrace[ev->backtrace_len - 1] : 0;
  s->outer_hash = fnv(ev->backtrace, ev->backtrace_len ? ev->backtrace_len - 1 : 0);
  return 0;
}

static void read_trace(trace_t *t, const void *data, size_t len) {
  memset(t, 0, sizeof *t);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = t, .on_event = on_event};
  cts_mt_reader_t *rd;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&rd, &cfg, &h), 0);
  CTS_ASSERT_EQ_INT(cts_mt_reader_feed(rd, data, len), 0);
  CTS_ASSERT_EQ_INT(cts_mt_reader_finish(rd), 0);
  cts_mt_reader_destroy(rd);
}

/* ---- the program: allocations at three sites under recursions of varied depth --------- */

typedef struct membuf {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool gated, open; /* gated: every write after the first waits until open */
  int writes;
  uint8_t *data;
  size_t len, cap;
} membuf_t;

static int membuf_write(void *ud, const void *p, size_t n) {
  membuf_t *const b = ud;
  pthread_mutex_lock(&b->mu);
  if (b->gated && b->writes++ > 0)
    while (!b->open) pthread_cond_wait(&b->cv, &b->mu);
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + n) cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) abort();
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  pthread_mutex_unlock(&b->mu);
  return 0;
}

/* What each allocation's backtrace must be (the block of 8 * (i + 1) bytes is number i):
 * its frames beyond the innermost, as the same unwinder gives them from a sibling call. */
static uint64_t *expected_hash;
static size_t expected_depth[SITES];

static const void *block(uint64_t i) {
  return (const void *)(uintptr_t)(0x200000000ull + i * 64u);
}

static __attribute__((noinline)) void reference(uint64_t i) {
  uint64_t out[MAX_DEPTH + CTS__OWN_FRAMES];
  const size_t n =
      cts__unwind_fp(&cts__thread, (uintptr_t)__builtin_frame_address(0), out, MAX_DEPTH);
  uint64_t outer_first[MAX_DEPTH];
  for (size_t j = 1; j < n; j++) outer_first[n - 1 - j] = out[j];
  expected_hash[i] = fnv(outer_first, n ? n - 1 : 0);
  __asm__ volatile("" ::: "memory");
}

/* Each site allocates block i and, from a second call, records what its backtrace is. */
#define SITE(k)                                               \
  static __attribute__((noinline)) void site##k(uint64_t i) { \
    cts_tracer_track_alloc(block(i), 8u * (size_t)(i + 1u));  \
    reference(i);                                             \
    if (i % 2u) cts_tracer_track_free(block(i - 1u));         \
    __asm__ volatile("" ::: "memory"); /* no tail call */     \
  }
SITE(0)
SITE(1)
SITE(2)

static __attribute__((noinline)) void descend(unsigned level, uint64_t i) {
  if (level == 0) {
    switch (i % SITES) {
      case 0:
        site0(i);
        break;
      case 1:
        site1(i);
        break;
      default:
        site2(i);
        break;
    }
  } else {
    descend(level - 1u, i);
  }
  __asm__ volatile("" ::: "memory");
}

/* Blocks [from, to): the depth changes every 16 allocations, the site at each. */
static void allocate(uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; i++) descend((unsigned)((i >> 4) % 9u), i);
}

static void start(membuf_t *b, bool drop) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.seed = 7;
  cfg.unwind = CTS_TRACER_UNWIND_FRAME_POINTER;
  cfg.max_frames = MAX_DEPTH;
  cfg.drop_when_full = drop;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_CALLBACK);
  sink.write = membuf_write;
  sink.write_user_data = b;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
}

/* Every allocation in the trace has the backtrace it was made with (its block's length
 * says which allocation it is); *checked gets how many there were. */
static void check_backtraces(const trace_t *t, uint64_t from, uint64_t to, uint64_t *checked) {
  uint64_t innermost[SITES] = {0};
  for (size_t a = 0; a < t->nallocs; a++) {
    const seen_t *const s = &t->allocs[a];
    CTS_ASSERT(s->length >= from + 1u && s->length <= to);
    const uint64_t i = s->length - 1u;
    CTS_ASSERT_MSG(s->depth >= 2u, "allocation %" PRIu64 ": %zu frames", i, s->depth);
    CTS_ASSERT_MSG(s->outer_hash == expected_hash[i], "allocation %" PRIu64 ": wrong frames", i);
    const size_t depth = s->depth - (size_t)((i >> 4) % 9u); /* without the recursion */
    const unsigned k = (unsigned)(i % SITES);
    if (!innermost[k]) innermost[k] = s->innermost, expected_depth[k] = depth;
    CTS_ASSERT_EQ_U64(s->innermost, innermost[k]);
    CTS_ASSERT_EQ_U64(depth, expected_depth[k]);
  }
  *checked = t->nallocs;
}

static uint64_t head_of_this_thread(void) {
  return cts__thread.ring ? atomic_load(&cts__thread.ring->head) : 0;
}

/* ---- tests --------------------------------------------------------------------------------- */

/* Five laps of the ring and a second session on the same ring: every backtrace rebuilt,
 * none unknown, and the records take less than 60 % of the words whole ones would. */
CTS_TEST(spliced_records_rebuild_every_backtrace_across_laps_and_sessions) {
  const uint64_t n = 100000;
  expected_hash = calloc(2 * n, sizeof *expected_hash);
  CTS_ASSERT(expected_hash != NULL);
  for (int session = 0; session < 2; session++) {
    membuf_t b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const uint64_t from = (uint64_t)session * n, to = from + n;
    start(&b, false);
    const uint64_t head0 = head_of_this_thread();
    const uint64_t unknown0 = cts__ctl->backtraces_unknown;
    allocate(from, to);
    const uint64_t published = head_of_this_thread() - head0;
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    cts_tracer_stats_t st;
    cts_tracer_get_stats(&st);
    CTS_ASSERT_EQ_U64(st.samples, n);
    CTS_ASSERT_EQ_U64(cts__ctl->backtraces_unknown, unknown0);
    trace_t t;
    read_trace(&t, b.data, b.len);
    CTS_ASSERT_EQ_U64(t.nallocs, n);
    uint64_t checked, frames = 0;
    check_backtraces(&t, from, to, &checked);
    for (size_t a = 0; a < t.nallocs; a++) frames += t.allocs[a].depth;
    /* Whole records: REC_ALLOC_WORDS and the frames each, a collect per free (and a pad
     * per lap at most, which the margin covers). */
    const uint64_t whole = n * REC_ALLOC_WORDS + frames + st.collects * REC_COLLECT_WORDS;
    fprintf(stderr,
            "  session %d: %" PRIu64 " words published for %" PRIu64
            " whole (%.2f), %.1f laps, %.1f frames a backtrace\n",
            session, published, whole, (double)published / (double)whole,
            (double)published / RING_WORDS, (double)frames / (double)n);
    CTS_ASSERT(published > 4u * RING_WORDS);
    CTS_ASSERT_MSG(published * 10u < whole * 6u, "%" PRIu64 " of %" PRIu64 " words", published,
                   whole);
    free(t.allocs);
    free(b.data);
  }
  free(expected_hash);
}

/* Drop mode with a writer stuck in its sink: allocations are lost while the ring is full,
 * and every one that is written has its own backtrace. */
CTS_TEST(losses_never_give_a_wrong_backtrace) {
  const uint64_t n = 200000;
  expected_hash = calloc(n, sizeof *expected_hash);
  CTS_ASSERT(expected_hash != NULL);
  membuf_t b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .gated = true};
  start(&b, true);
  const uint64_t unknown0 = cts__ctl->backtraces_unknown;
  allocate(0, n / 2);
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_MSG(st.lost_allocs > 0, "nothing was lost: the test did not fill the ring");
  pthread_mutex_lock(&b.mu);
  b.open = true;
  pthread_cond_broadcast(&b.cv);
  pthread_mutex_unlock(&b.mu);
  allocate(n / 2, n); /* (losses again if the writer falls behind) */
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(cts__ctl->backtraces_unknown, unknown0);
  trace_t t;
  read_trace(&t, b.data, b.len);
  uint64_t checked;
  check_backtraces(&t, 0, n, &checked);
  fprintf(stderr, "  %" PRIu64 " written, %" PRIu64 " lost, %" PRIu64 " markers\n", checked,
          st.lost_allocs, t.markers);
  CTS_ASSERT_EQ_U64(checked, st.samples);
  CTS_ASSERT_EQ_U64(checked + st.lost_allocs, n);
  CTS_ASSERT(t.markers >= 1);
  free(t.allocs);
  free(b.data);
  free(expected_hash);
}

/* The writer's side alone, on records made by hand: a record that shares frames with one
 * the writer did not take just before it gets no backtrace, nor do the ones sharing with
 * it, until a whole record. */
static uint64_t header(size_t own, size_t shared, uint64_t back) {
  return REC_ALLOC | (uint64_t)own << REC_OWN_SHIFT | (uint64_t)shared << REC_SHARED_SHIFT |
         back << REC_BACK_SHIFT;
}

/* The backtrace rebuilt from rec at pos is want[0..n) (outermost first). */
static void expect_frames(cts__ring_t *r, uint64_t pos, const uint64_t *rec, const uint64_t *want,
                          size_t n) {
  size_t depth;
  const uint64_t *const got = cts__ring_backtrace(r, pos, rec, &depth);
  CTS_ASSERT(got != NULL);
  CTS_ASSERT_EQ_U64(depth, n);
  for (size_t i = 0; i < n; i++) CTS_ASSERT_EQ_U64(got[i], want[i]);
}

CTS_TEST(writer_rebuilds_only_from_the_record_just_before) {
  static uint64_t wbt[BT_WORDS];
  cts__ring_t r;
  memset(&r, 0, sizeof r);
  r.wbt = wbt;
  size_t depth;
  /* Whole, at position 100: frames 1 2 3 (innermost first). */
  const uint64_t a[] = {header(3, 0, 0), 0, 0, 0, 0, 1, 2, 3};
  expect_frames(&r, 100, a, (const uint64_t[]){3, 2, 1}, 3);
  /* At 108, 4 then the outer two of the last: 4 2 3. */
  const uint64_t b[] = {header(1, 2, 8), 0, 0, 0, 0, 4};
  expect_frames(&r, 108, b, (const uint64_t[]){3, 2, 4}, 3);
  /* At 120, two of its own and all three of the last one's: 6 5 4 2 3. */
  const uint64_t c[] = {header(2, 3, 12), 0, 0, 0, 0, 6, 5};
  expect_frames(&r, 120, c, (const uint64_t[]){3, 2, 4, 5, 6}, 5);
  /* Sharing with a record at 110, which the writer never took: unknown. */
  const uint64_t d[] = {header(1, 2, 20), 0, 0, 0, 0, 7};
  CTS_ASSERT(cts__ring_backtrace(&r, 130, d, &depth) == NULL && depth == 0);
  /* Then sharing with that one (at 130): unknown too. */
  const uint64_t e[] = {header(1, 1, 10), 0, 0, 0, 0, 8};
  CTS_ASSERT(cts__ring_backtrace(&r, 140, e, &depth) == NULL);
  /* A whole record starts again; more shared frames than the last has: unknown. */
  const uint64_t f[] = {header(2, 0, 0), 0, 0, 0, 0, 9, 10};
  expect_frames(&r, 150, f, (const uint64_t[]){10, 9}, 2);
  const uint64_t g[] = {header(1, 3, 10), 0, 0, 0, 0, 11};
  CTS_ASSERT(cts__ring_backtrace(&r, 160, g, &depth) == NULL);
  /* Impossible headers: a distance of 0, or beyond the ring's start, or too many frames. */
  expect_frames(&r, 170, f, (const uint64_t[]){10, 9}, 2);
  const uint64_t h0[] = {header(1, 1, 0), 0, 0, 0, 0, 12};
  CTS_ASSERT(cts__ring_backtrace(&r, 180, h0, &depth) == NULL);
  expect_frames(&r, 190, f, (const uint64_t[]){10, 9}, 2);
  const uint64_t h1[] = {header(1, 1, 1000), 0, 0, 0, 0, 12};
  CTS_ASSERT(cts__ring_backtrace(&r, 200, h1, &depth) == NULL);
  expect_frames(&r, 210, f, (const uint64_t[]){10, 9}, 2);
  const uint64_t h2[] = {header(MAX_FRAMES_LIMIT, 2, 10), 0, 0, 0, 0};
  CTS_ASSERT(cts__ring_backtrace(&r, 220, h2, &depth) == NULL);
}

CTS_TEST_MAIN()
