/* SPDX-License-Identifier: MIT */
/* Sampling (tracer.h, "Sampling"): each thread's countdown of words to its next sample,
 * the binomial draw for a block, and the producers of records: the alloc record with its
 * backtrace, the collect record; and the side table of the linked API's sampled blocks.
 * Parts cts__sampler and cts__side. Nothing here allocates through malloc. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include <ctfscope/tasks.h>

#include "common/hash.h"
#include "mathlite.h"
#include "tracer_state.h"

#define SIDE_INITIAL         4096u
#define SIDE_EMPTY           ((uintptr_t)0)
#define SIDE_TOMB            ((uintptr_t)1)
#define SLOT_STICKY          255u
#define BINOMIAL_EXACT_LIMIT 1000.0
/* The words of an alloc record whose cache lines are fetched ahead (cts__tracer_record):
 * its fields and ~27 frames, most backtraces of real programs. */
#define REC_PREFETCH_WORDS 32u

CTS__TLS cts__thread_t cts__thread;
atomic_int cts__tracer_active;
atomic_bool cts__tracer_every_word;
CTS__COLD_BSS _Atomic uint8_t cts__sampled_slots[CTS__SLOT_COUNT];
cts__sampler_t cts__sampler;
cts__side_table_t cts__side = {.side_lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t cts__wall_clock_us(void *user_data) {
  (void)user_data;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t rng_next(cts__thread_t *t) {
  uint64_t x = t->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  t->rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in (0, 1]. */
static double rng_unit(cts__thread_t *t) {
  return ((double)(rng_next(t) >> 11) + 1.0) * 0x1.0p-53;
}

/* tracer_state.h. */
void cts__sampler_configure(const cts_tracer_config_t *cfg) {
  cts_tracer_unwind_t unwind = cfg->unwind;
#ifdef CTS_HAVE_LIBUNWIND
  if (unwind == CTS_TRACER_UNWIND_AUTO || unwind == CTS_TRACER_UNWIND_MIXED)
    unwind = cts__unwind_mixed_available() ? CTS_TRACER_UNWIND_MIXED : CTS_TRACER_UNWIND_LIBUNWIND;
#else
  if (unwind != CTS_TRACER_UNWIND_NONE) unwind = CTS_TRACER_UNWIND_FRAME_POINTER;
#endif
  const double rate = cfg->sample_rate;
  SAMPLER_SET(unwind, unwind);
  SAMPLER_SET(rate, rate);
  atomic_store_explicit(&cts__tracer_every_word, rate >= 1.0, memory_order_relaxed);
  SAMPLER_SET(inv_log_miss, 1.0 / cts__ln1p(-rate));
  SAMPLER_SET(inv_log_hit, rate < 1.0 ? 1.0 / cts__ln(rate) : 0.0);
  SAMPLER_SET(seed, cfg->seed);
  /* (max_frames 0, the API's "no frames": none walked, none marked) */
  SAMPLER_SET(walk_frames, cfg->max_frames ? cfg->max_frames + 1u : 0u);
  SAMPLER_SET(drop_when_full, cfg->drop_when_full);
}

/* Geometric ≥ 1: trials up to and including the first success, for a success probability
 * p given as inv_log = 1 / log(1 − p) (−0.0 when p = 1). */
static uint64_t draw_gap(cts__thread_t *t, double inv_log) {
  if (inv_log == 0.0) return 1;
  const double g = cts__ln(rng_unit(t)) * inv_log;
  if (!(g < 4e18)) return (uint64_t)4e18;
  return (uint64_t)g + 1u;
}

static double draw_normal(cts__thread_t *t) {
  const double u1 = rng_unit(t), u2 = rng_unit(t);
  return cts__sqrt(-2.0 * cts__ln(u1)) * cts__cos(6.283185307179586 * u2);
}

/* Binomial(m, λ): exact by jumping from success to success (or failure to failure when
 * λ > 1/2) while that takes at most ~1000 steps, a normal approximation beyond. */
static uint64_t draw_binomial(cts__thread_t *t, uint64_t m) {
  const double lambda = SAMPLER_GET(rate);
  if (m == 0) return 0;
  if (lambda >= 1.0) return m;
  const double mean = (double)m * lambda, q = 1.0 - lambda;
  if (lambda <= 0.5 && mean <= BINOMIAL_EXACT_LIMIT) {
    uint64_t k = 0;
    const double inv_log_miss = SAMPLER_GET(inv_log_miss);
    for (uint64_t pos = draw_gap(t, inv_log_miss); pos <= m; pos += draw_gap(t, inv_log_miss)) k++;
    return k;
  }
  if (lambda > 0.5 && (double)m * q <= BINOMIAL_EXACT_LIMIT) {
    uint64_t misses = 0;
    const double inv_log_hit = SAMPLER_GET(inv_log_hit);
    for (uint64_t pos = draw_gap(t, inv_log_hit); pos <= m; pos += draw_gap(t, inv_log_hit))
      misses++;
    return m - misses;
  }
  const double k = cts__floor(mean + cts__sqrt(mean * q) * draw_normal(t) + 0.5);
  if (k <= 0.0) return 0;
  if (k >= (double)m) return m;
  return (uint64_t)k;
}

static void seed_thread(cts__thread_t *t, uint32_t session) {
  const uint64_t n = atomic_fetch_add(&cts__sampler.thread_seeds, 1);
  const uint64_t seed = SAMPLER_GET(seed);
  uint64_t state = seed ? seed + n : cts__wall_clock_us(NULL) ^ (uintptr_t)t ^ (n << 32);
  const uint64_t s = cts_splitmix64(&state);
  t->rng = s ? s : 1;
  t->session = session;
  t->words_left = draw_gap(t, SAMPLER_GET(inv_log_miss));
}

/* Captures the backtrace into out (room for max + CTS__OWN_FRAMES entries), innermost
 * first (the allocation site first), and returns the number of frames (unwind.c). */
static CTS_FORCE_INLINE size_t capture_backtrace(cts__thread_t *t, void *frame, uint64_t *out,
                                                 size_t max, cts__bottom_t *bottom) {
  const uintptr_t fp = (uintptr_t)frame;
  switch (SAMPLER_GET(unwind)) {
    case CTS_TRACER_UNWIND_NONE:
      return 0;
    case CTS_TRACER_UNWIND_MIXED:
      return cts__unwind_mixed(t, fp, out, max, bottom);
#ifdef CTS_HAVE_LIBUNWIND
    case CTS_TRACER_UNWIND_LIBUNWIND: {
      const size_t n = cts__unwind_libunwind(t, fp, out, max);
      if (n) return n;
      break; /* the hook's frame was not found: fall back to the frame pointers */
    }
#endif
    default:
      break;
  }
  return cts__unwind_fp(t, fp, out, max);
}

static size_t side_index(uintptr_t addr, size_t cap) {
  return (size_t)cts_mix64((uint64_t)addr >> 4) & (cap - 1);
}

static bool side_rehash(size_t cap) {
  cts__side_entry_t *const fresh = cts__map_pages(cap * sizeof *fresh);
  if (!fresh) return false;
  for (size_t i = 0; i < cts__side.side_cap; i++) {
    const uintptr_t a = cts__side.side[i].addr;
    if (a == SIDE_EMPTY || a == SIDE_TOMB) continue;
    size_t j = side_index(a, cap);
    while (fresh[j].addr != SIDE_EMPTY) j = (j + 1) & (cap - 1);
    fresh[j] = cts__side.side[i];
  }
  if (cts__side.side) munmap(cts__side.side, cts__side.side_cap * sizeof *cts__side.side);
  cts__side.side = fresh;
  cts__side.side_cap = cap;
  cts__side.side_tombs = 0;
  return true;
}

static void slot_add(uintptr_t addr) {
  _Atomic uint8_t *const s = &cts__sampled_slots[cts__slot_of((const void *)addr)];
  const uint8_t v = atomic_load_explicit(s, memory_order_relaxed);
  if (v != SLOT_STICKY) atomic_store_explicit(s, (uint8_t)(v + 1), memory_order_relaxed);
}

static void slot_remove(uintptr_t addr) {
  _Atomic uint8_t *const s = &cts__sampled_slots[cts__slot_of((const void *)addr)];
  const uint8_t v = atomic_load_explicit(s, memory_order_relaxed);
  if (v != SLOT_STICKY && v != 0) atomic_store_explicit(s, (uint8_t)(v - 1), memory_order_relaxed);
}

/* tracer_state.h. */
bool cts__side_reset(void) {
  pthread_mutex_lock(&cts__side.side_lock);
  bool ok = true;
  if (!cts__side.side) {
    ok = side_rehash(SIDE_INITIAL);
  } else {
    memset(cts__side.side, 0, cts__side.side_cap * sizeof *cts__side.side);
  }
  cts__side.side_count = cts__side.side_tombs = 0;
  pthread_mutex_unlock(&cts__side.side_lock);
  return ok;
}

/* Remembers that `addr` is sampled object `id`. False only if memory for the table ran out
 * (the block's free then goes unrecorded). */
static bool side_insert(uintptr_t addr, uint64_t id) {
  if ((cts__side.side_count + cts__side.side_tombs + 1) * 2 > cts__side.side_cap) {
    const size_t cap = (cts__side.side_count + 1) * 4 > cts__side.side_cap ? cts__side.side_cap * 2
                                                                           : cts__side.side_cap;
    if (!side_rehash(cap)) return false;
  }
  size_t i = side_index(addr, cts__side.side_cap), tomb = SIZE_MAX;
  for (;; i = (i + 1) & (cts__side.side_cap - 1)) {
    const uintptr_t a = cts__side.side[i].addr;
    if (a == addr) { /* its free was never seen: the old object just gets no collect */
      cts__side.side[i].id = id;
      return true;
    }
    if (a == SIDE_TOMB && tomb == SIZE_MAX) tomb = i;
    if (a == SIDE_EMPTY) break;
  }
  if (tomb != SIZE_MAX) {
    i = tomb;
    cts__side.side_tombs--;
  }
  cts__side.side[i].addr = addr;
  cts__side.side[i].id = id;
  cts__side.side_count++;
  CTS_ASSERT(cts__side.side_count + cts__side.side_tombs < cts__side.side_cap);
  slot_add(addr);
  return true;
}

static bool side_remove(uintptr_t addr, uint64_t *id) {
  if (!cts__side.side_count) return false;
  for (size_t i = side_index(addr, cts__side.side_cap);; i = (i + 1) & (cts__side.side_cap - 1)) {
    const uintptr_t a = cts__side.side[i].addr;
    if (a == SIDE_EMPTY) return false;
    if (a == addr) {
      *id = cts__side.side[i].id;
      cts__side.side[i].addr = SIDE_TOMB;
      cts__side.side_count--;
      cts__side.side_tombs++;
      slot_remove(addr);
      return true;
    }
  }
}

static void side_add(const void *ptr, uint64_t full, cts__ring_t *r) {
  pthread_mutex_lock(&cts__side.side_lock);
  const bool ok = side_insert((uintptr_t)ptr, full);
  pthread_mutex_unlock(&cts__side.side_lock);
  if (!ok) cts__bump(&r->dropped, 1);
}

/* tracer_internal.h. The object id is taken after the ring has room, so that between
 * taking it and publishing the record a thread never waits: the writer thread, which
 * writes records in id order, only ever waits for ids on their way. The preload library
 * keeps the id in the block's header; the linked API's blocks (`side`) go into the side
 * table for their free to be found. */
uint64_t cts__tracer_record(const void *ptr, size_t size, uint64_t nsamples, void *frame,
                            bool side) {
  cts__thread_t *const t = &cts__thread;
  const uint64_t words = ((uint64_t)size + 7u) >> 3;
  if (!cts__sampling_on()) return CTS__TRACER_NO_ID;
  cts__guard_enter();
  cts__ring_t *const r = cts__thread_ring(t);
  /* Room for the longest backtrace, one frame more to see whether it was cut (the writer
   * marks it: tracer_state.h, CUT_CODE_BASE), and libunwind's view of our own frames: the
   * frames go straight into the ring, and only what they take is published. */
  const size_t walk_frames = SAMPLER_GET(walk_frames);
  const bool drop_when_full = SAMPLER_GET(drop_when_full);
  const size_t room = REC_ALLOC_WORDS + walk_frames + CTS__OWN_FRAMES;
  size_t pad;
  uint64_t *const rec =
      r ? cts__ring_reserve(r, room, drop_when_full ? RING_ALLOC_LIMIT : RING_WORDS, &pad) : NULL;
  if (CTS_UNLIKELY(!rec)) {
    if (r && drop_when_full && cts__sampling_on()) {
      cts__bump(&r->lost_allocs, 1);
      cts__bump(&r->lost_words, words);
      cts__bump(&r->lost_samples, nsamples);
    } else if (!r) {
      atomic_fetch_add_explicit(&cts__ctl->unrecorded, 1, memory_order_relaxed);
    }
    cts__guard_leave();
    return CTS__TRACER_NO_ID;
  }
  /* The ring's lines were last written a lap of the ring ago (1 MiB of records: out of
   * this core's caches) and the writer process read them since: they are fetched for
   * writing while the backtrace is captured, instead of one by one as its frames are
   * stored (cc1 at rate 1: ~200 bytes per record, 580 000 records). */
  for (size_t at = 0; at < REC_PREFETCH_WORDS; at += 8u)
    __builtin_prefetch(rec + at, 1); /* (beyond the room too: a prefetch never faults) */
  const size_t depth = capture_backtrace(t, frame, rec + REC_ALLOC_WORDS, walk_frames, r->bottom);
  rec[1] = cts__event_time();
  const uint64_t full = atomic_fetch_add_explicit(&cts__ctl->next_id, 1, memory_order_relaxed);
  rec[0] = REC_ALLOC | (uint64_t)depth << 8;
  rec[2] = full;
  rec[3] = words;
  rec[4] = nsamples;
  cts__ring_publish(r, pad + REC_ALLOC_WORDS + depth);
  cts__bump(&r->samples, 1);
  /* The task running on this thread, for attribution (docs/formats/mprof.md §14.1). */
  if (CTS__TASK_ON()) cts__task_alloc(full & ID_MASK);
  if (side) side_add(ptr, full, r);
  cts__guard_leave();
  return full;
}

/* cts__tracer_sample_slow below rate 1: the countdown, the draws. */
static CTS_NOINLINE uint64_t sample_drawn(size_t size, unsigned session) {
  cts__thread_t *const t = &cts__thread;
  if (CTS_UNLIKELY(t->session != session || t->rng == 0)) seed_thread(t, session);
  const uint64_t words = ((uint64_t)size + 7u) >> 3;
  if (words < t->words_left) {
    t->words_left -= words;
    return 0;
  }
  /* The countdown's word falls in this block; the rest of the block is sampled afresh
   * (geometric gaps are memoryless), and so is the countdown after it. */
  const uint64_t nsamples = 1 + draw_binomial(t, words - t->words_left);
  t->words_left = draw_gap(t, SAMPLER_GET(inv_log_miss));
  if (t->guard) return 0; /* the tracer's own allocation */
  return nsamples;
}

/* At rate 1 (every allocation comes here) only this runs: no register is saved, no draw. */
uint64_t cts__tracer_sample_slow(size_t size) {
  const unsigned session =
      (unsigned)atomic_load_explicit(&cts__tracer_active, memory_order_acquire);
  if (!session) return 0;
  /* λ = 1: every word is a sample (the countdown is never used). */
  if (atomic_load_explicit(&cts__tracer_every_word, memory_order_relaxed))
    return cts__thread.guard ? 0 : ((uint64_t)size + 7u) >> 3;
  return sample_drawn(size, session);
}

void cts__tracer_alloc_slow(const void *ptr, size_t size, void *frame) {
  const uint64_t nsamples = cts__tracer_sample_slow(size);
  if (nsamples) cts__tracer_record(ptr, size, nsamples, frame, true);
}

/* Queues the collect of the object with full id `full`. Guard raised. Inline: the free of
 * every sampled block comes here (a call less per free at rate 1). */
static CTS_FORCE_INLINE void queue_collect(uint64_t full) {
  cts__ring_t *const r = cts__thread_ring(&cts__thread);
  size_t pad;
  uint64_t *const rec = r ? cts__ring_reserve(r, REC_COLLECT_WORDS, RING_WORDS, &pad) : NULL;
  if (CTS_LIKELY(rec != NULL)) {
    rec[0] = REC_COLLECT;
    rec[1] = cts__event_time();
    rec[2] = full;
    cts__ring_publish(r, pad + REC_COLLECT_WORDS);
    cts__bump(&r->collects, 1);
  } else if (r && SAMPLER_GET(drop_when_full) && cts__sampling_on()) {
    cts__bump(&r->lost_collects, 1);
  } else if (r && cts__sampling_on()) {
    cts__bump(&r->dropped, 1);
  }
}

void cts__tracer_free_slow(const void *ptr) {
  /* Guarded: the tracer's own frees (never of sampled blocks), or a signal handler that
   * interrupted this thread inside the tracer, which must not take the lock again. */
  if (!ptr || cts__guarded()) return;
  cts__guard_enter();
  uint64_t full;
  pthread_mutex_lock(&cts__side.side_lock);
  const bool found = cts__sampling_on() && side_remove((uintptr_t)ptr, &full);
  pthread_mutex_unlock(&cts__side.side_lock);
  if (found) queue_collect(full);
  cts__guard_leave();
}

/* cts__tracer_record_free's queue_collect when its common case does not hold. */
static CTS_NOINLINE void record_free_slow(uint64_t full) {
  cts__guard_enter();
  queue_collect(full);
  cts__guard_leave();
}

#if CTS_HAVE_CPU_COUNTER
/* The writer is woken out of line (it takes the control lock), guard raised. */
static CTS_NOINLINE void wake_guarded(cts__ring_t *r, uint64_t head) {
  cts__guard_enter();
  cts__ring_wake(r, head);
  cts__guard_leave();
}
#endif

/* Every sampled block's free at rate 1 comes here. Its common case (the thread has a ring
 * with room before its end, TSC times) writes the record inline and calls nothing, so it
 * keeps no register of the caller's on the stack (cc1: 70 -> ~55 instructions a free).
 * The rest is queue_collect's. */
void cts__tracer_record_free(uint64_t id, unsigned session) {
  /* Guarded: a signal handler that interrupted this thread's own record. */
  if (id == CTS__TRACER_NO_ID || cts__guarded()) return;
  /* Only in the session that sampled the block: a later session's ids start again at 0. */
  const unsigned active = cts__tracer_session();
  if (!active || (active & CTS__TRACER_SESSION_MASK) != session) return;
  const uint64_t full = (uint64_t)session << ID_BITS | id;
#if CTS_HAVE_CPU_COUNTER
  cts__guard_enter(); /* from here: a signal handler's free must not take the same words */
  cts__ring_t *const r = cts__thread.ring;
  uint64_t *const rec = r ? cts__ring_reserve_fast(r, REC_COLLECT_WORDS) : NULL;
  if (CTS_LIKELY(rec != NULL && cts__event_time_is_tsc())) {
    rec[0] = REC_COLLECT;
    rec[1] = cts__cpu_counter();
    rec[2] = full;
    cts__bump(&r->collects, 1);
    const uint64_t head = cts__ring_advance(r, REC_COLLECT_WORDS);
    cts__guard_leave();
    if (CTS_UNLIKELY(head > r->wake_check)) wake_guarded(r, head);
    return;
  }
  cts__guard_leave();
#endif
  record_free_slow(full);
}
