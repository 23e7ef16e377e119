/* SPDX-License-Identifier: MIT */
/* The tracer through its linked API (no malloc interposition): blocks are reported with
 * cts_tracer_track_alloc/_free, the trace goes to a callback or a file, and is checked
 * with our reader. Sampling runs with fixed seeds, so every figure here is deterministic. */
#define _GNU_SOURCE
#include <ctfscope/tracer.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

/* The tracer's state first (cts__owner_check_ms): its inline functions keep
 * common/check.h's CTS_ASSERT; the tests' own takes the name after it. */
#include "tracer/tracer_state.h"
#undef CTS_ASSERT

#include "../test.h"
#include "common/cpu_counter.h"
#include "decoded.h"
#include "os/net.h"
#include "os/tsc_clock.h"
#include "tracer/lazylib.h"
#include "tracer/tracer_internal.h"

typedef struct membuf {
  uint8_t *data;
  size_t len, cap;
  int writes;
} membuf_t;

static int membuf_write(void *ud, const void *p, size_t n) {
  membuf_t *b = ud;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + n) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) return CTS_E_NOMEM;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->writes++;
  return 0;
}

/* Reads what was written to tmp into b, and closes it. */
static void read_back(FILE *tmp, membuf_t *b) {
  memset(b, 0, sizeof *b);
  rewind(tmp);
  uint8_t chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, tmp)) > 0) membuf_write(b, chunk, got);
  fclose(tmp);
}

/* An injected clock (the Pclock of memtrace-mirage): 1 µs per reading. */
static uint64_t fake_now = 1700000000000000ull;
static uint64_t fake_clock(void *ud) {
  (void)ud;
  return __atomic_add_fetch(&fake_now, 1, __ATOMIC_RELAXED);
}

static void start_to_memory(membuf_t *b, double rate, uint64_t seed, cts_tracer_unwind_t unwind) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = rate;
  cfg.seed = seed;
  cfg.unwind = unwind;
  cfg.context = "test_tracer";
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_CALLBACK);
  sink.write = membuf_write;
  sink.write_user_data = b;
  sink.clock = fake_clock;
  memset(b, 0, sizeof *b);
  const int e = cts_tracer_start(&cfg, &sink);
  if (e) {
    fprintf(stderr, "cts_tracer_start: %s\n", cts_os_strerror(e));
    abort();
  }
}

/* Distinct fake addresses: the tracer never dereferences them. */
static const void *fake_ptr(uint64_t i) {
  return (const void *)(uintptr_t)(0x100000000ull + i * 64u);
}

/* Decodes the trace in b into d and checks what every trace must satisfy: our reader
 * accepts it (ids in order, each collect after its allocation), no object is collected
 * twice or without an allocation, times never go backwards. */
static void decode_consistent(decoded_t *d, const membuf_t *b) {
  decoded_from_memory(d, b->data, b->len);
  CTS_ASSERT_MSG(d->error == 0, "%s", d->message);
  CTS_ASSERT(!d->collected_twice && !d->time_backwards);
}

CTS_TEST(rate_one_records_every_block_exactly) {
  membuf_t b;
  start_to_memory(&b, 1.0, 1, CTS_TRACER_UNWIND_NONE);
  CTS_ASSERT(cts_tracer_is_active());
  uint64_t words = 0;
  for (uint64_t i = 0; i < 5000; i++) {
    const size_t size = 1 + (size_t)(i * 37 % 3000);
    words += (size + 7) / 8;
    cts_tracer_track_alloc(fake_ptr(i), size);
  }
  for (uint64_t i = 0; i < 5000; i += 2) cts_tracer_track_free(fake_ptr(i));
  cts_tracer_track_free(fake_ptr(999999)); /* never sampled: no event */
  cts_tracer_stats_t st;
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  CTS_ASSERT(!cts_tracer_is_active());
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(st.samples, 5000);
  CTS_ASSERT_EQ_U64(st.collects, 2500);
  CTS_ASSERT_EQ_U64(st.bytes_written, b.len);

  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_STR_EQ(d.context, "test_tracer");
  CTS_ASSERT_EQ_U64(d.pid, (uint64_t)getpid());
  CTS_ASSERT_EQ_U64(d.nallocs, 5000);
  CTS_ASSERT_EQ_U64(d.ncollects, 2500);
  CTS_ASSERT(!d.collected_twice && !d.time_backwards);
  uint64_t trace_words = 0;
  for (size_t i = 0; i < d.nallocs; i++) {
    CTS_ASSERT_EQ_U64(d.allocs[i].id, i);
    CTS_ASSERT_EQ_U64(d.allocs[i].nsamples, d.allocs[i].length); /* Binomial(n, 1) = n */
    CTS_ASSERT_EQ_U64(d.allocs[i].length, (1 + i * 37 % 3000 + 7) / 8);
    trace_words += d.allocs[i].length;
  }
  CTS_ASSERT_EQ_U64(trace_words, words);
  for (size_t i = 0; i < d.ncollects; i++) CTS_ASSERT_EQ_U64(d.collects[i], 2 * i);
  decoded_fini(&d);
  free(b.data);
}

/* Estimated bytes = Σ nsamples / λ × 8 must be within ±3 % of the truth with ≥ 10⁴
 * expected samples, in each branch of the sampler (exact jumps, complement jumps, normal
 * approximation). */
static void check_accuracy(double rate, size_t min_size, size_t max_size, uint64_t count,
                           uint64_t seed) {
  membuf_t b;
  start_to_memory(&b, rate, seed, CTS_TRACER_UNWIND_NONE);
  double bytes = 0;
  uint64_t x = seed;
  for (uint64_t i = 0; i < count; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const size_t size = min_size + (size_t)((x >> 33) % (max_size - min_size + 1));
    bytes += (double)((size + 7) / 8 * 8);
    cts_tracer_track_alloc(fake_ptr(i), size);
    cts_tracer_track_free(fake_ptr(i));
  }
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT(!d.collected_twice);
  CTS_ASSERT_EQ_U64(d.ncollects, d.nallocs);
  const double expected_samples = bytes / 8 * rate;
  const double estimate = d.sampled_words / rate * 8;
  fprintf(stderr, "  rate %g: %zu blocks, %.0f samples (expected %.0f), estimate %.4f of true\n",
          rate, d.nallocs, d.sampled_words, expected_samples, estimate / bytes);
  CTS_ASSERT_MSG(expected_samples >= 1e4, "test needs >= 1e4 expected samples");
  CTS_ASSERT_MSG(estimate > bytes * 0.97 && estimate < bytes * 1.03,
                 "estimate %.0f vs true %.0f bytes", estimate, bytes);
  for (size_t i = 0; i < d.nallocs; i++) {
    CTS_ASSERT(d.allocs[i].nsamples >= 1);
    CTS_ASSERT(d.allocs[i].nsamples <= d.allocs[i].length);
  }
  decoded_fini(&d);
  free(b.data);
}

CTS_TEST(accuracy_small_rate) {
  check_accuracy(1e-4, 1, 4096, 400000, 7); /* ~2e4 samples, nearly all blocks unsampled */
}

CTS_TEST(accuracy_large_blocks_normal_approximation) {
  check_accuracy(0.3, 40000, 80000, 20, 11); /* ~3.6e4 samples, > 1000 per block */
}

CTS_TEST(accuracy_rate_above_half) {
  check_accuracy(0.8, 100, 5000, 500, 13); /* complement jumps */
}

CTS_TEST(same_seed_same_trace) {
  membuf_t a, b;
  for (int round = 0; round < 2; round++) {
    membuf_t *m = round ? &b : &a;
    start_to_memory(m, 1e-2, 42, CTS_TRACER_UNWIND_NONE);
    for (uint64_t i = 0; i < 2000; i++) cts_tracer_track_alloc(fake_ptr(i), 100 + i);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  }
  decoded_t da, db;
  decoded_from_memory(&da, a.data, a.len);
  decoded_from_memory(&db, b.data, b.len);
  CTS_ASSERT(da.error == 0 && db.error == 0);
  CTS_ASSERT(da.nallocs > 100);
  CTS_ASSERT_EQ_U64(da.nallocs, db.nallocs);
  for (size_t i = 0; i < da.nallocs; i++) {
    CTS_ASSERT_EQ_U64(da.allocs[i].length, db.allocs[i].length);
    CTS_ASSERT_EQ_U64(da.allocs[i].nsamples, db.allocs[i].nsamples);
  }
  decoded_fini(&da);
  decoded_fini(&db);
  free(a.data);
  free(b.data);
}

/* ---- threads: one object id sequence, collects always after their allocs -------------- */

#define THREADS    8
#define PER_THREAD 20000

static void *thread_body(void *arg) {
  const uint64_t base = (uint64_t)(uintptr_t)arg * PER_THREAD;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    cts_tracer_track_alloc(fake_ptr(base + i), 24 + i % 200);
    if (i >= 10) cts_tracer_track_free(fake_ptr(base + i - 10));
  }
  for (uint64_t i = PER_THREAD - 10; i < PER_THREAD; i++) cts_tracer_track_free(fake_ptr(base + i));
  return NULL;
}

CTS_TEST(threads_share_one_consistent_trace) {
  membuf_t b;
  start_to_memory(&b, 1.0, 3, CTS_TRACER_UNWIND_FRAME_POINTER);
  pthread_t th[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, thread_body, (void *)t);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  decoded_t d;
  decode_consistent(&d, &b);
  CTS_ASSERT_EQ_U64(d.nallocs, THREADS * PER_THREAD);
  CTS_ASSERT_EQ_U64(d.ncollects, THREADS * PER_THREAD);
  fprintf(stderr, "  %" PRIu64 " waits for queue space, %zu packets, %zu bytes\n", st.waits,
          (size_t)d.packets, b.len);
  decoded_fini(&d);
  free(b.data);
}

/* ---- many threads at once: the writer takes the rings in id order ------------------------ */

/* Threads allocating at once interleave their object ids across their rings. Going round
 * the rings in list order, the writer wrote a few records per ring visited, and each record
 * cost a visit to most rings: with 1 000 threads the writer spent 71 % of its time there
 * and the program waited for it. Here the interleaving is forced: each round, the threads
 * allocate one block each in a shuffled order (a fixed seed), freeing their previous one. */
#define LOCKSTEP_THREADS 32
#define LOCKSTEP_ROUNDS  200
static atomic_uint_fast64_t lockstep_turn;

/* The position of thread `t` in round `round`'s shuffled order. */
static unsigned lockstep_position(unsigned round, unsigned t) {
  unsigned order[LOCKSTEP_THREADS];
  for (unsigned i = 0; i < LOCKSTEP_THREADS; i++) order[i] = i;
  uint64_t x = 0x9E3779B97F4A7C15ull * (round + 1u);
  for (unsigned i = LOCKSTEP_THREADS - 1u; i > 0; i--) {
    x ^= x >> 33, x *= 0xFF51AFD7ED558CCDull, x ^= x >> 29;
    const unsigned j = (unsigned)(x % (i + 1u)), tmp = order[i];
    order[i] = order[j], order[j] = tmp;
  }
  for (unsigned i = 0; i < LOCKSTEP_THREADS; i++)
    if (order[i] == t) return i;
  return 0;
}

static void *lockstep_body(void *arg) {
  const unsigned t = (unsigned)(uintptr_t)arg;
  const uint64_t base = 7000000u + (uint64_t)t * LOCKSTEP_ROUNDS;
  for (unsigned round = 0; round < LOCKSTEP_ROUNDS; round++) {
    const uint64_t mine = (uint64_t)round * LOCKSTEP_THREADS + lockstep_position(round, t);
    while (atomic_load(&lockstep_turn) != mine) sched_yield();
    cts_tracer_track_alloc(fake_ptr(base + round), 40);
    if (round) cts_tracer_track_free(fake_ptr(base + round - 1u));
    atomic_fetch_add(&lockstep_turn, 1);
  }
  cts_tracer_track_free(fake_ptr(base + LOCKSTEP_ROUNDS - 1u));
  return NULL;
}

CTS_TEST(interleaved_threads_cost_the_writer_few_ring_visits_per_record) {
  membuf_t b;
  start_to_memory(&b, 1.0, 43, CTS_TRACER_UNWIND_NONE);
  atomic_store(&lockstep_turn, 0);
  pthread_t th[LOCKSTEP_THREADS];
  for (uintptr_t t = 0; t < LOCKSTEP_THREADS; t++)
    pthread_create(&th[t], NULL, lockstep_body, (void *)t);
  for (int t = 0; t < LOCKSTEP_THREADS; t++) pthread_join(th[t], NULL);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0); /* the writer thread is joined: its count is read */
  const uint64_t visits = cts__writer.ring_visits;
  const uint64_t records = 2u * LOCKSTEP_THREADS * LOCKSTEP_ROUNDS;
  const size_t rings = cts__tracer_ring_count();
  decoded_t d;
  decode_consistent(&d, &b);
  CTS_ASSERT_EQ_U64(d.nallocs, LOCKSTEP_THREADS * LOCKSTEP_ROUNDS);
  CTS_ASSERT_EQ_U64(d.ncollects, LOCKSTEP_THREADS * LOCKSTEP_ROUNDS);
  decoded_fini(&d);
  free(b.data);
  fprintf(stderr, "  %" PRIu64 " ring visits for %" PRIu64 " records, %zu rings\n", visits, records,
          rings);
  CTS_ASSERT_MSG(visits <= 2u * records, "%" PRIu64 " ring visits for %" PRIu64 " records", visits,
                 records);
}

/* ---- the mixed unwinder: libunwind's backtraces, mostly without libunwind ---------------- */

enum { MIXED_ALLOCS = 300 };
static uint64_t mixed_next_obj;

static __attribute__((noinline)) void mixed_site(void) {
  cts_tracer_track_alloc(fake_ptr(6000000 + mixed_next_obj++), 48);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void mixed_caller(int depth) {
  if (depth > 0)
    mixed_caller(depth - 1);
  else
    mixed_site();
  __asm__ volatile("" ::: "memory");
}

/* qsort is libc's, built without frame pointers: the comparator's callers are found by
 * libunwind, beyond the frames the walk trusts. */
static int mixed_compare(const void *a, const void *b) {
  mixed_site();
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static __attribute__((noinline)) void mixed_through_qsort(void) {
  int v[24];
  for (int i = 0; i < 24; i++) v[i] = (i * 7919) % 24;
  qsort(v, 24, sizeof v[0], mixed_compare);
  __asm__ volatile("" ::: "memory");
}

/* Whether each allocation of `mixed` has the backtrace of the same allocation in `lib`
 * (same frames, same depth); the first that does not is printed. */
static bool same_backtraces(const decoded_t *mixed, const decoded_t *lib) {
  if (mixed->nallocs != lib->nallocs) {
    fprintf(stderr, "  %zu allocations (mixed) against %zu (libunwind)\n", mixed->nallocs,
            lib->nallocs);
    return false;
  }
  for (size_t i = 0; i < mixed->nallocs; i++)
    if (mixed->allocs[i].backtrace_hash != lib->allocs[i].backtrace_hash ||
        mixed->allocs[i].depth != lib->allocs[i].depth) {
      fprintf(stderr, "  allocation %zu: %zu frames (mixed) against %zu (libunwind)\n", i,
              mixed->allocs[i].depth, lib->allocs[i].depth);
      return false;
    }
  return true;
}

typedef struct mixed_counts {
  uint64_t walked, cached, cached_slots, full;
} mixed_counts_t;

static void *mixed_thread_body(void *arg) {
  for (int i = 0; i < MIXED_ALLOCS; i++) mixed_caller(i % 5);
  mixed_counts_t *const c = arg;
  *c = (mixed_counts_t){cts__thread.unwind_walked, cts__thread.unwind_cached,
                        cts__thread.unwind_cached_slots, cts__thread.unwind_full};
  return NULL;
}

/* Runs every path once with `unwind`; the decoded trace in *d, this thread's and the other
 * thread's path counts in *here and *there. */
static void mixed_run(cts_tracer_unwind_t unwind, decoded_t *d, mixed_counts_t *here,
                      mixed_counts_t *there) {
  membuf_t b;
  mixed_next_obj = 0;
  start_to_memory(&b, 1.0, 41, unwind);
  const mixed_counts_t before = {cts__thread.unwind_walked, cts__thread.unwind_cached,
                                 cts__thread.unwind_cached_slots, cts__thread.unwind_full};
  for (int i = 0; i < MIXED_ALLOCS; i++) mixed_caller(i % 7);
  mixed_through_qsort();
  pthread_t th;
  pthread_create(&th, NULL, mixed_thread_body, there);
  pthread_join(th, NULL);
  *here = (mixed_counts_t){
      cts__thread.unwind_walked - before.walked, cts__thread.unwind_cached - before.cached,
      cts__thread.unwind_cached_slots - before.cached_slots, cts__thread.unwind_full - before.full};
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_from_memory(d, b.data, b.len);
  free(b.data);
  CTS_ASSERT_MSG(d->error == 0, "%s", d->message);
}

CTS_TEST(mixed_unwinder_gives_libunwinds_backtraces) {
#ifndef CTS_TEST_HAVE_LIBUNWIND
  CTS_SKIP("built without libunwind");
#else
  if (!cts__unwind_mixed_available())
    CTS_SKIP("no _dl_find_object or not x86-64: mixed = libunwind");
  decoded_t runs[2];
  mixed_counts_t here[2], there[2];
  const cts_tracer_unwind_t modes[2] = {CTS_TRACER_UNWIND_MIXED, CTS_TRACER_UNWIND_LIBUNWIND};
  for (int m = 0; m < 2; m++) mixed_run(modes[m], &runs[m], &here[m], &there[m]); /* 1 call site */
  decoded_t mixed = runs[0], lib = runs[1];
  const mixed_counts_t mh = here[0], mt = there[0], lh = here[1], lt = there[1];
  CTS_ASSERT_EQ_U64(mixed.nallocs, lib.nallocs);
  CTS_ASSERT(mixed.nallocs > 2 * MIXED_ALLOCS + 24);
  CTS_ASSERT(same_backtraces(&mixed, &lib));
  size_t deeper = 0;
  for (size_t i = 0; i < mixed.nallocs; i++) deeper += mixed.allocs[i].depth > 8;
  CTS_ASSERT(deeper > 0);
  /* Both threads: the outer frames (libc's start-up, start_thread) came from libunwind
   * once or twice, then from the cache; qsort's frames from libunwind each time. */
  fprintf(stderr,
          "  main thread: %" PRIu64 " cached (%" PRIu64 " by slots), %" PRIu64
          " unwound; other thread: %" PRIu64 " cached (%" PRIu64 " by slots), %" PRIu64
          " unwound\n",
          mh.cached, mh.cached_slots, mh.full, mt.cached, mt.cached_slots, mt.full);
  CTS_ASSERT(mh.cached >= MIXED_ALLOCS - 8 && mt.cached >= MIXED_ALLOCS - 8);
  CTS_ASSERT(mt.full <= 8);
  CTS_ASSERT(mh.full >= 24); /* every comparator call went through libunwind */
  CTS_ASSERT_EQ_U64(lh.cached + lh.full + lt.cached + lt.full, 0);
  decoded_fini(&mixed);
  decoded_fini(&lib);
#endif
}

/* ---- the mixed unwinder's verdicts: prologues and call frame information ---------------- */

#if defined(__x86_64__) && defined(__ELF__)
#define CFI_FUNCTIONS 1
/* Three functions that call cfi_callee(), as compilers may lay them out:
 * - cfi_plain_prologue: push %rbp; mov %rsp,%rbp first (what clang and gcc -O0 write);
 * - cfi_scheduled_prologue: another instruction between the two (gcc -O2 schedules its
 *   prologue so), its call frame information saying CFA = %rbp + 16 from the mov on;
 * - cfi_no_frame_pointer: pushes %rbp to keep the stack aligned, but the CFA stays at
 *   %rsp + 16 and %rbp is not its frame record. */
void cfi_plain_prologue(void);
void cfi_scheduled_prologue(void);
void cfi_no_frame_pointer(void);
__attribute__((used, noinline)) void cfi_callee(void);
static uint64_t cfi_next_obj;
__attribute__((used, noinline)) void cfi_callee(void) {
  cts_tracer_track_alloc(fake_ptr(7000000 + cfi_next_obj++), 40);
  __asm__ volatile("" ::: "memory");
}
#define CFI_FUNCTION(name, body)                                            \
  ".globl " #name "\n.hidden " #name "\n.type " #name ", @function\n" #name \
  ":\n"                                                                     \
  ".cfi_startproc\n" body ".cfi_endproc\n.size " #name ", .-" #name "\n"
#define CFI_PUSH_RBP     "  pushq %rbp\n  .cfi_def_cfa_offset 16\n  .cfi_offset %rbp, -16\n"
#define CFI_FRAME_RECORD "  movq %rsp, %rbp\n  .cfi_def_cfa_register %rbp\n"
#define CFI_CALL_AND_POP "  call cfi_callee\n  nop\n  popq %rbp\n"
__asm__(".text\n" CFI_FUNCTION(cfi_plain_prologue, CFI_PUSH_RBP CFI_FRAME_RECORD CFI_CALL_AND_POP
                               "  .cfi_def_cfa %rsp, 8\n  ret\n")
            CFI_FUNCTION(cfi_scheduled_prologue,
                         CFI_PUSH_RBP "  xorl %eax, %eax\n" CFI_FRAME_RECORD CFI_CALL_AND_POP
                                      "  .cfi_def_cfa %rsp, 8\n  ret\n")
                CFI_FUNCTION(cfi_no_frame_pointer,
                             CFI_PUSH_RBP "  xorl %ebp, %ebp\n" CFI_CALL_AND_POP
                                          "  .cfi_def_cfa_offset 8\n  ret\n"));

/* Traces 50 calls of `fn` with `unwind` into *d. */
static void cfi_trace(void (*fn)(void), cts_tracer_unwind_t unwind, decoded_t *d) {
  membuf_t b;
  start_to_memory(&b, 1.0, 45, unwind);
  for (int i = 0; i < 50; i++) fn();
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_from_memory(d, b.data, b.len);
  free(b.data);
  CTS_ASSERT_MSG(d->error == 0, "%s", d->message);
  CTS_ASSERT_EQ_U64(d->nallocs, 50);
}
#endif

CTS_TEST(mixed_unwinder_reads_call_frame_information) {
#if !defined(CFI_FUNCTIONS) || !defined(CTS_TEST_HAVE_LIBUNWIND)
  CTS_SKIP("x86-64 ELF with libunwind only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  static void (*const fns[3])(void) = {cfi_plain_prologue, cfi_scheduled_prologue,
                                       cfi_no_frame_pointer};
  static const bool framed[3] = {true, true, false};
  for (int f = 0; f < 3; f++) {
    decoded_t runs[2];
    const cts_tracer_unwind_t modes[2] = {CTS_TRACER_UNWIND_MIXED, CTS_TRACER_UNWIND_LIBUNWIND};
    for (int m = 0; m < 2; m++) cfi_trace(fns[f], modes[m], &runs[m]); /* 1 call site */
    decoded_t mixed = runs[0], lib = runs[1];
    /* The allocation's second frame: the return address of fns[f]'s call. */
    const uint64_t ret = lib.allocs[0].caller;
    CTS_ASSERT_MSG(ret != 0 && cts__unwind_keeps_frame_pointers((uintptr_t)ret) == framed[f],
                   "function %d: verdict %d", f, !framed[f]);
    CTS_ASSERT_MSG(same_backtraces(&mixed, &lib), "function %d", f);
    decoded_fini(&mixed);
    decoded_fini(&lib);
  }
#endif
}

/* ---- the outer-frame cache checked by its return addresses' slots ---------------------- */

#ifdef CFI_FUNCTIONS
/* A thread whose own functions keep no frame pointers, their CFA at %rsp + a constant:
 * slots_thread calls slots_via_a, then slots_via_b from two call sites, each of which
 * calls slots_inner(slots_leaf), which calls slots_leaf. The via functions have the same
 * code and frame size, so slots_leaf's frame record and the return address it holds (into
 * slots_inner) are the same each time. The first two calls differ in the return address
 * saved in slots_inner's frame, the last two only in the one saved in slots_via_b's. */
void *slots_thread(void *unused);
__attribute__((used, noinline)) void slots_leaf(void);
void slots_via_a(void (*leaf)(void));
void slots_via_b(void (*leaf)(void));
void slots_inner(void (*leaf)(void));
#define SLOTS_VIA                                                                    \
  "  subq $8, %rsp\n  .cfi_def_cfa_offset 16\n  call slots_inner\n  addq $8, %rsp\n" \
  "  .cfi_def_cfa_offset 8\n  ret\n"
__asm__(".text\n" CFI_FUNCTION(
    slots_thread,
    "  subq $24, %rsp\n  .cfi_def_cfa_offset 32\n  leaq slots_leaf(%rip), %rdi\n"
    "  movq %rdi, 8(%rsp)\n  call slots_via_a\n"
    "  movq 8(%rsp), %rdi\n  call slots_via_b\n  movq 8(%rsp), %rdi\n  call slots_via_b\n"
    "  xorl %eax, %eax\n  addq $24, %rsp\n  .cfi_def_cfa_offset 8\n  ret\n")
            CFI_FUNCTION(slots_via_a, SLOTS_VIA) CFI_FUNCTION(slots_via_b, SLOTS_VIA)
                CFI_FUNCTION(slots_inner,
                             "  subq $8, %rsp\n  .cfi_def_cfa_offset 16\n"
                             "  call *%rdi\n  addq $8, %rsp\n"
                             "  .cfi_def_cfa_offset 8\n  ret\n"));

static uint64_t slots_next_obj;
static mixed_counts_t slots_counts;
static uint64_t slots_spliced;

/* Two allocations per call: the first finds the outer frames changed (but for the first
 * call ever), the second finds them in the cache. */
__attribute__((used, noinline)) void slots_leaf(void) {
  static volatile int calls = 2; /* a loop that stays one: one call site */
  for (int i = 0; i < calls; i++) {
    cts_tracer_track_alloc(fake_ptr(8000000 + slots_next_obj++), 24);
    __asm__ volatile("" ::: "memory");
  }
  slots_counts = (mixed_counts_t){cts__thread.unwind_walked, cts__thread.unwind_cached,
                                  cts__thread.unwind_cached_slots, cts__thread.unwind_full};
  slots_spliced = cts__thread.unwind_spliced;
}
#endif

#if defined(CFI_FUNCTIONS) && defined(CTS_TEST_HAVE_LIBUNWIND)
/* slots_thread at rate 1, with the mixed unwinder into runs[0], libunwind into runs[1]: on
 * a thread of its own or on this one; the unwinder's counts of each run (walks, splices)
 * into counts[] and spliced[]. */
static void slots_runs(uint64_t seed, bool own_thread, decoded_t runs[2], mixed_counts_t counts[2],
                       uint64_t spliced[2]) {
  const cts_tracer_unwind_t modes[2] = {CTS_TRACER_UNWIND_MIXED, CTS_TRACER_UNWIND_LIBUNWIND};
  for (int m = 0; m < 2; m++) {
    membuf_t b;
    start_to_memory(&b, 1.0, seed, modes[m]);
    const mixed_counts_t before = {cts__thread.unwind_walked, cts__thread.unwind_cached,
                                   cts__thread.unwind_cached_slots, cts__thread.unwind_full};
    const uint64_t spliced_before = cts__thread.unwind_spliced;
    if (own_thread) {
      pthread_t th;
      CTS_ASSERT_EQ_INT(pthread_create(&th, NULL, slots_thread, NULL), 0);
      pthread_join(th, NULL);
      counts[m] = slots_counts; /* a new thread's counters start at 0 */
      spliced[m] = slots_spliced;
    } else {
      slots_thread(NULL);
      counts[m] = (mixed_counts_t){
          slots_counts.walked - before.walked, slots_counts.cached - before.cached,
          slots_counts.cached_slots - before.cached_slots, slots_counts.full - before.full};
      spliced[m] = slots_spliced - spliced_before;
    }
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    decoded_from_memory(&runs[m], b.data, b.len);
    free(b.data);
    CTS_ASSERT_MSG(runs[m].error == 0, "%s", runs[m].message);
    CTS_ASSERT_EQ_U64(runs[m].nallocs, 6);
  }
}
#endif

CTS_TEST(outer_frame_cache_sees_a_changed_return_address) {
#if !defined(CFI_FUNCTIONS) || !defined(CTS_TEST_HAVE_LIBUNWIND)
  CTS_SKIP("x86-64 ELF with libunwind only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  decoded_t runs[2];
  mixed_counts_t counts[2];
  uint64_t spliced[2];
  slots_runs(47, true, runs, counts, spliced);
  if (cts_test_state.failed) return;
  decoded_t mixed = runs[0], lib = runs[1];
  CTS_ASSERT(same_backtraces(&mixed, &lib));
  /* The three calls differ in one outer frame, the two allocations of a call in none. */
  for (int i = 0; i < 6; i += 2) {
    CTS_ASSERT(lib.allocs[i].backtrace_hash == lib.allocs[i + 1].backtrace_hash);
    CTS_ASSERT(lib.allocs[i].backtrace_hash != lib.allocs[(i + 2) % 6].backtrace_hash);
  }
  fprintf(stderr,
          "  %" PRIu64 " cached (%" PRIu64 " by slots), %" PRIu64 " unwound (%" PRIu64
          " spliced)\n",
          counts[0].cached, counts[0].cached_slots, counts[0].full, spliced[0]);
  /* Each call: the second allocation's outer frames are the first's, from the cache
   * (checked by the slots: start_thread and clone3 keep no frame pointers either) or
   * spliced from the first's walk (checked by the same words), and still libunwind's
   * (above) after the return address changed. */
  CTS_ASSERT_EQ_U64(counts[0].full + counts[0].cached, 6);
  CTS_ASSERT(counts[0].cached + spliced[0] >= 3);
  CTS_ASSERT_EQ_U64(counts[0].cached_slots, counts[0].cached);
  decoded_fini(&mixed);
  decoded_fini(&lib);
#endif
}

/* The same functions on the main thread, whose outer frames the call frame walk follows
 * itself (to _start; start_thread's it leaves to libunwind): each walk after the first
 * rejoins the previous one where the frames are the same again and takes the rest from
 * it, this test's frame-pointer frames (%rbp-based CFA) included. */
CTS_TEST(outer_walk_reuses_the_previous_walks_outer_frames) {
#if !defined(CFI_FUNCTIONS) || !defined(CTS_TEST_HAVE_LIBUNWIND)
  CTS_SKIP("x86-64 ELF with libunwind only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  decoded_t runs[2];
  mixed_counts_t counts[2];
  uint64_t spliced[2], full[2];
  slots_runs(48, false, runs, counts, spliced);
  if (cts_test_state.failed) return;
  for (int m = 0; m < 2; m++) full[m] = counts[m].full;
  decoded_t mixed = runs[0], lib = runs[1];
  CTS_ASSERT(same_backtraces(&mixed, &lib));
  fprintf(stderr, "  %" PRIu64 " walks, %" PRIu64 " spliced\n", full[0], spliced[0]);
  /* Every walk but perhaps the first (an earlier test's walk may be the previous one;
   * whether the second allocation of a call finds the whole stack in the outer-frame
   * cache depends on the frames' sizes). */
  CTS_ASSERT(full[0] >= 3);
  CTS_ASSERT(spliced[0] + 1u >= full[0] && spliced[0] <= full[0]);
  decoded_fini(&mixed);
  decoded_fini(&lib);
#endif
}

/* ---- a deep stack of every kind of frame, walked in turn from several depths ---------- */

#ifdef CFI_FUNCTIONS
/* deep_*(depth, fn): depth + 1 frames of one kind, the innermost calling fn():
 * - deep_rsp: no frame pointer, CFA at %rsp + 16, %rbp left alone;
 * - deep_save: no frame pointer, CFA at %rsp + 16, %rbp saved and then clobbered (with the
 *   depth: not a frame record), so the next %rbp-based frame outwards takes its %rbp from
 *   the saved word;
 * - deep_rbp: frame records (push %rbp; mov %rsp, %rbp), CFA at %rbp + 16. */
void deep_rsp(uint64_t depth, void (*fn)(void));
void deep_save(uint64_t depth, void (*fn)(void));
void deep_rbp(uint64_t depth, void (*fn)(void));
#define DEEP_RECURSE(name) \
  "  testq %rdi, %rdi\n  jz 1f\n  decq %rdi\n  call " #name "\n  jmp 2f\n1:\n  call *%rsi\n2:\n"
__asm__(".text\n" CFI_FUNCTION(deep_rsp, "  subq $8, %rsp\n  .cfi_def_cfa_offset 16\n" DEEP_RECURSE(
                                             deep_rsp) "  addq $8, %rsp\n  .cfi_def_cfa_offset 8\n"
                                                       "  ret\n")
            CFI_FUNCTION(deep_save, CFI_PUSH_RBP "  movq %rdi, %rbp\n" DEEP_RECURSE(
                                        deep_save) "  popq %rbp\n  .cfi_def_cfa_offset 8\n"
                                                   "  .cfi_restore %rbp\n  ret\n")
                CFI_FUNCTION(deep_rbp,
                             CFI_PUSH_RBP CFI_FRAME_RECORD DEEP_RECURSE(
                                 deep_rbp) "  popq %rbp\n  .cfi_def_cfa %rsp, 8\n  ret\n"));

/* The stack, innermost first: deep_leaf (frame pointer) <- deep_rsp x (deep_path + 1) <-
 * deep_stage3 <- deep_save x 4 <- deep_stage2 <- deep_rbp x 5 <- deep_stage1a or b <- deep_rsp
 * x 6 <- the test. The stages are this file's functions: %rbp-based CFAs (-O0), whose
 * %rbp the call frame walk takes from deep_save's and deep_rbp's saved words. */
static uint64_t deep_next_obj, deep_path;
__attribute__((used, noinline)) static void deep_leaf(void) {
  cts_tracer_track_alloc(fake_ptr(9500000 + deep_next_obj++), 48);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void deep_stage3(void) {
  deep_rsp(deep_path, deep_leaf);
}
__attribute__((noinline)) static void deep_stage2(void) {
  deep_save(3, deep_stage3);
}
/* Two of the same code and frame size: walks through one and the other differ only in the
 * return addresses outwards of deep_stage2, which a rejoining walk must check. */
__attribute__((noinline)) static void deep_stage1a(void) {
  deep_rbp(4, deep_stage2);
}
__attribute__((noinline)) static void deep_stage1b(void) {
  deep_rbp(4, deep_stage2);
}
#endif

#if defined(CFI_FUNCTIONS) && defined(CTS_TEST_HAVE_LIBUNWIND)
/* `drive`, which makes `rounds` allocations, at rate 1 with the mixed unwinder and then
 * with libunwind, from one call site: every backtrace must be libunwind's, and every walk
 * but perhaps the first must have rejoined the previous one. The shallowest backtrace's
 * depth into *min_depth. */
static void rejoin_compare(void (*drive)(void), uint64_t seed, uint64_t rounds, size_t *min_depth) {
  decoded_t runs[2];
  uint64_t spliced = 0;
  const cts_tracer_unwind_t modes[2] = {CTS_TRACER_UNWIND_MIXED, CTS_TRACER_UNWIND_LIBUNWIND};
  for (int m = 0; m < 2; m++) {
    membuf_t b;
    start_to_memory(&b, 1.0, seed, modes[m]);
    const uint64_t before = cts__thread.unwind_spliced;
    drive(); /* 1 call site */
    if (m == 0) spliced = cts__thread.unwind_spliced - before;
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    decoded_from_memory(&runs[m], b.data, b.len);
    free(b.data);
    CTS_ASSERT_MSG(runs[m].error == 0, "%s", runs[m].message);
    CTS_ASSERT_EQ_U64(runs[m].nallocs, rounds);
  }
  decoded_t mixed = runs[0], lib = runs[1];
  *min_depth = SIZE_MAX;
  for (size_t i = 0; i < mixed.nallocs; i++)
    if (mixed.allocs[i].depth < *min_depth) *min_depth = mixed.allocs[i].depth;
  fprintf(stderr, "  %" PRIu64 " of %" PRIu64 " walks rejoined the previous one; depth >= %zu\n",
          spliced, rounds, *min_depth);
  CTS_ASSERT(same_backtraces(&mixed, &lib));
  CTS_ASSERT(spliced + 1u >= rounds);
  decoded_fini(&mixed);
  decoded_fini(&lib);
}

/* DEEP_ROUNDS allocations through the deep stack, the innermost run of frames 1-4 deep in
 * turn. */
#define DEEP_ROUNDS 64
static void deep_drive(void) {
  for (int i = 0; i < DEEP_ROUNDS; i++) {
    deep_path = (uint64_t)(i * 7 % 4); /* 0, 3, 2, 1, ... */
    deep_rsp(5, i / 3 % 2 ? deep_stage1b : deep_stage1a);
  }
}
#endif

/* Walks that rejoin the previous one (the fast path: the shared frames taken from it, the
 * words they depend on checked) give the frames that libunwind's full walk (the slow path)
 * gives, on a stack of ~30 frames with and without frame pointers, %rbp-based CFAs whose
 * %rbp comes from a word saved further in, and frames that clobber %rbp. */
CTS_TEST(rejoined_walks_equal_full_walks_on_a_deep_mixed_stack) {
#if !defined(CFI_FUNCTIONS) || !defined(CTS_TEST_HAVE_LIBUNWIND)
  CTS_SKIP("x86-64 ELF with libunwind only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  size_t min_depth;
  rejoin_compare(deep_drive, 50, DEEP_ROUNDS, &min_depth);
  CTS_ASSERT(min_depth >= 20); /* the deep_* frames and stages alone */
#endif
}

#if defined(CFI_FUNCTIONS) && defined(CTS_TEST_HAVE_LIBUNWIND)
/* deep_drive's stack under 75 more deep_rsp frames: ~100 frames, all of them without frame
 * pointers, as a C++ compiler's recursive descent and template instantiation make them. */
#define DEEPER_OUTER 80
static void deeper_drive(void) {
  for (int i = 0; i < DEEP_ROUNDS; i++) {
    deep_path = (uint64_t)(i * 7 % 4);
    deep_rsp(DEEPER_OUTER, i / 3 % 2 ? deep_stage1b : deep_stage1a);
  }
}
#endif

/* A walk deeper than the outer-frame cache's 64 frames rejoins the previous one too (cc1plus:
 * 2.5 % of its walks, ~88 frames each, were walked whole, 41 % of its rule look-ups), and
 * its frames are libunwind's. */
CTS_TEST(rejoined_walks_equal_full_walks_on_a_stack_of_100_frames) {
#if !defined(CFI_FUNCTIONS) || !defined(CTS_TEST_HAVE_LIBUNWIND)
  CTS_SKIP("x86-64 ELF with libunwind only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  size_t min_depth;
  rejoin_compare(deeper_drive, 51, DEEP_ROUNDS, &min_depth);
  CTS_ASSERT(min_depth >= 95); /* beyond the outer-frame cache's 64 */
#endif
}

/* ---- a %rbp-based frame that moved under a frame at the same place ----------------------- */

#ifdef CFI_FUNCTIONS
/* feed_f(pad_f, pad_g, site) and feed_g(pad_g): frame records (CFA at %rbp + 16) that move
 * their stack pointer down by pad_f and pad_g bytes; feed_f calls feed_g from one of two
 * call sites. feed_s (CFA at %rsp + 16) saves %rbp and clobbers it, then calls feed_leaf.
 * With pad_f + pad_g the same, feed_s is at the same place and address each time while
 * feed_g is not: only feed_s's saved %rbp word (feed_g's frame) tells the walks apart. The
 * words where the previous walk read feed_g's return address lie in feed_f's padding and
 * still hold it: a walk that rejoined the previous one at feed_s without checking the saved
 * word would report the previous call site. */
void feed_f(uint64_t pad_f, uint64_t pad_g, uint64_t site);
void feed_g(uint64_t pad_g);
void feed_s(void);
__attribute__((used, noinline)) void feed_leaf(void);
__asm__(".text\n" CFI_FUNCTION(feed_f, CFI_PUSH_RBP CFI_FRAME_RECORD
                               "  subq %rdi, %rsp\n  movq %rsi, %rdi\n  testq %rdx, %rdx\n"
                               "  jnz 1f\n  call feed_g\n  jmp 2f\n1:\n  call feed_g\n2:\n"
                               "  leave\n  .cfi_def_cfa %rsp, 8\n  .cfi_restore %rbp\n  ret\n")
            CFI_FUNCTION(feed_g, CFI_PUSH_RBP CFI_FRAME_RECORD
                         "  subq %rdi, %rsp\n  call feed_s\n"
                         "  leave\n  .cfi_def_cfa %rsp, 8\n  .cfi_restore %rbp\n  ret\n")
                CFI_FUNCTION(feed_s, CFI_PUSH_RBP "  movl $1, %ebp\n  call feed_leaf\n"
                                                  "  popq %rbp\n  .cfi_def_cfa_offset 8\n"
                                                  "  .cfi_restore %rbp\n  ret\n"));
static uint64_t feed_next_obj;
__attribute__((used, noinline)) void feed_leaf(void) {
  cts_tracer_track_alloc(fake_ptr(9700000 + feed_next_obj++), 56);
  __asm__ volatile("" ::: "memory");
}
#endif

#if defined(CFI_FUNCTIONS) && defined(CTS_TEST_HAVE_LIBUNWIND)
#define FEED_ROUNDS 32
static void feed_drive(void) {
  for (uint64_t i = 0; i < FEED_ROUNDS; i++) feed_f(i % 2 ? 64 : 0, i % 2 ? 0 : 64, i % 2);
}
#endif

/* The walks rejoin the previous one only where the saved %rbp word of a %rbp-based frame
 * further out is unchanged (else further out: this test's own frames): their backtraces
 * are libunwind's. */
CTS_TEST(rejoined_walks_check_the_saved_rbp_of_moved_frames) {
#if !defined(CFI_FUNCTIONS) || !defined(CTS_TEST_HAVE_LIBUNWIND)
  CTS_SKIP("x86-64 ELF with libunwind only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  size_t min_depth;
  rejoin_compare(feed_drive, 51, FEED_ROUNDS, &min_depth);
#endif
}

/* ---- the walk's instructions per rejoined walk ------------------------------------------ */

#ifdef CFI_FUNCTIONS
/* cc1plus's walks in small: code without frame pointers (CFA at %rsp plus a constant, %rbp
 * saved and clobbered or left alone), ~4 frames of a walk's own by their rules, then a
 * rejoin of the previous walk whose ~20 shared frames are checked and copied. */
static uint64_t cost_next_obj, cost_rounds;
__attribute__((used, noinline)) static void cost_leaf(void) {
  cts_tracer_track_alloc(fake_ptr(9700000 + cost_next_obj++), 48);
  __asm__ volatile("" ::: "memory");
}
__attribute__((used, noinline)) static void cost_loop(void) {
  for (uint64_t i = 0; i < cost_rounds; i++) {
    deep_save(2, cost_leaf);
    deep_rsp(2, cost_leaf);
  }
}
#endif

/* The counts of function `fn` (callgrind, collecting inside it only) in test `test` of
 * this executable `self`, run under valgrind with CTS_TEST_CHILD=arg in its environment
 * (the test then does its work): its instructions into total[0] and, with branch_sim,
 * callgrind's simulated conditional branches and their mispredictions into total[1] and
 * total[2] (the test fails when they cannot be had). */
static void child_counts(const char *self, const char *test, const char *fn, uint64_t arg,
                         bool branch_sim, uint64_t total[3]) {
  char dir[] = "/tmp/cts_walk_cg_XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  char out[128], path[300], env[64], toggle[128], line[256];
  /* One file per process (a writer process forked under Valgrind would write its dump over
   * the child's): the child's own is read. */
  snprintf(out, sizeof out, "--callgrind-out-file=%s/cg.%%p", dir);
  snprintf(toggle, sizeof toggle, "--toggle-collect=%s", fn);
  snprintf(env, sizeof env, "CTS_TEST_CHILD=%" PRIu64, arg);
  char sim[] = "--branch-sim=yes";
  char *argv[] = {"/usr/bin/valgrind", "--tool=callgrind", toggle, out, NULL, NULL, NULL, NULL};
  size_t argc = 4;
  if (branch_sim) argv[argc++] = sim;
  argv[argc++] = (char *)self;
  argv[argc] = (char *)test;
  fflush(NULL);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1), dup2(null, 2);
    putenv(env);
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  total[0] = total[1] = total[2] = 0;
  snprintf(path, sizeof path, "%s/cg.%d", dir, (int)pid);
  FILE *const f = fopen(path, "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "summary:", 8) == 0) { /* Ir, then with branch_sim Bc Bcm Bi Bim */
        char *p = line + 8;
        for (size_t c = 0; c < (branch_sim ? 3u : 1u); c++) total[c] = strtoull(p, &p, 10);
      }
    fclose(f);
  }
  /* (and any other process's dump) */
  DIR *const d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
  CTS_ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "valgrind: status %d", status);
}

/* child_counts' instructions alone, into *total. */
static void child_instructions(const char *self, const char *test, const char *fn, uint64_t arg,
                               uint64_t *total) {
  uint64_t counts[3];
  child_counts(self, test, fn, arg, false, counts);
  *total = counts[0];
}

/* Whether this test can count instructions under valgrind; the test's path into self. */
static bool can_count_instructions(char *self, size_t cap) {
  if (access("/usr/bin/valgrind", X_OK) != 0) return false;
#if defined(__clang__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)self, (void)cap;
  return false; /* clang 14's DWARF 5, the sanitizers' runtimes: not under valgrind */
#else
  const ssize_t len = readlink("/proc/self/exe", self, cap - 1);
  if (len <= 0) return false;
  self[len] = '\0';
  return true;
#endif
}

#ifdef CFI_FUNCTIONS
/* A walk guard's counts of cts__unwind_mixed per walk into per (callgrind: instructions and,
 * with branch_sim, simulated conditional branches and their mispredictions): the test
 * `test` run again under valgrind with *rounds = few and then many, `loop` then making
 * walks_per_round walks a round at rate 1 with the mixed unwinder (seed), under 13
 * deep_save frames, every walk but the first rejoining the previous one (else the guard
 * would count something else); the difference divided by the walks between. *counted
 * false when this is that run (CTS_TEST_CHILD set: it made the walks), or the test is
 * skipped or has failed: the caller ends. Inline: the guards' figures are those of walks
 * from the test's own frame, one frame fewer to compare. */
__attribute__((always_inline)) static inline void walk_guard_counts(
    const char *test, void (*loop)(void), uint64_t *rounds, uint64_t seed, uint64_t walks_per_round,
    uint64_t few, uint64_t many, bool branch_sim, double per[3], bool *counted) {
  *counted = false;
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  const char *const child = getenv("CTS_TEST_CHILD");
  if (child) { /* under valgrind */
    *rounds = strtoull(child, NULL, 10);
    membuf_t b;
    start_to_memory(&b, 1.0, seed, CTS_TRACER_UNWIND_MIXED);
    const uint64_t spliced = cts__thread.unwind_spliced;
    deep_save(12, loop);
    CTS_ASSERT(cts__thread.unwind_spliced - spliced + 1u >= walks_per_round * *rounds);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    free(b.data);
    return;
  }
  char self[4096];
  if (!can_count_instructions(self, sizeof self)) CTS_SKIP("no valgrind for this build");
  uint64_t at_few[3], at_many[3];
  child_counts(self, test, "cts__unwind_mixed", few, branch_sim, at_few);
  if (!cts_test_state.failed)
    child_counts(self, test, "cts__unwind_mixed", many, branch_sim, at_many);
  if (cts_test_state.failed) return;
  /* Not vacuous: the walks were counted. */
  CTS_ASSERT_MSG(at_few[0] > few * walks_per_round * 100,
                 "%" PRIu64 " instructions in %" PRIu64 " walks", at_few[0], few * walks_per_round);
  for (size_t c = 0; c < 3; c++)
    per[c] = ((double)at_many[c] - (double)at_few[c]) / (double)((many - few) * walks_per_round);
  *counted = !cts_test_state.failed;
}
#endif

/* Fails the test when `per` instructions of `what` are more than `optimized` (a build with
 * optimization, the figure the guard is for) or `debug` (-O0: only a call or a loop added). */
static void assert_instructions_at_most(double per, double optimized, double debug,
                                        const char *what) {
#ifdef __OPTIMIZE__
  const double most = optimized;
  (void)debug;
#else
  const double most = debug;
  (void)optimized;
#endif
  fprintf(stderr, "  %.1f instructions %s (at most %.0f)\n", per, what, most);
  CTS_ASSERT_MSG(per <= most, "%.1f instructions %s (at most %.0f)", per, what, most);
}

/* Guard for rate 1 on code without frame pointers (#16, cc1plus): the mixed unwinder's
 * instructions per walk that goes 4 frames by call frame rules (3 of them at %rsp plus a
 * constant) and then rejoins the previous walk, ~25 frames from the stack's top. Counted
 * by callgrind (the same every run) over 2 000 walks less a run of 200 (the first
 * look-ups of the rules and the first walks). A frame at %rsp plus a constant with %rbp
 * alone or saved below its return address takes a step of its own (RULE_RSP_STEP), the
 * rejoin's check copies the shared frames as it reads them, and the kept walk is updated
 * inline: 886 instructions a walk before (release build, gcc 12), 826 after; 843 since the
 * rejoin's check stops at the first step of four words that differs (a walk that never
 * fails its check pays that test; cc1's and cc1plus's walks gain); 834 since the first
 * frame's set in the rule cache is hashed once, for the prefetch and the walk (843 fails the
 * bound); 825 since the check takes the last four words in a step of its own instead of a
 * loop of one word a step (834 fails the bound). The bound at -O0 (2 485) only catches a
 * call or a loop added to the walk. */
CTS_TEST(walk_instructions_per_rejoined_walk) {
#ifndef CFI_FUNCTIONS
  CTS_SKIP("x86-64 ELF only");
#else
  double per[3];
  bool counted;
  walk_guard_counts("walk_instructions_per_rejoined_walk", cost_loop, &cost_rounds, 52, 2, 100,
                    1000, false, per, &counted);
  if (counted) assert_instructions_at_most(per[0], 830, 3200, "a walk");
#endif
}

/* Guard for the walk's cold branch predictors (#16, cc1): mispredicted conditional branches
 * per walk, by callgrind's simulated predictor (the same every run), over walks that
 * rejoin the previous one at a random depth: each allocation under 0-7 deep_rsp frames of
 * its own (a fixed xorshift sequence), so that the number of shared words the rejoin check
 * compares differs from walk to walk, as on cc1. 2 000 walks less a run of 200. The check
 * takes the last four words in a step of its own, not in a loop of one word a step whose
 * count follows the depth: 6.38 mispredictions a walk before (release build, gcc 12),
 * 4.72 after (6.38 fails the bound). The bound at -O0 only catches a gross change. */
static uint64_t mispredict_rounds;
__attribute__((used, noinline)) static void mispredict_loop(void) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (uint64_t i = 0; i < mispredict_rounds; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    deep_rsp(x >> 61, cost_leaf);
  }
}

CTS_TEST(walk_mispredictions_per_rejoined_walk_at_random_depths) {
#ifndef CFI_FUNCTIONS
  CTS_SKIP("x86-64 ELF only");
#else
  double per[3];
  bool counted;
  walk_guard_counts("walk_mispredictions_per_rejoined_walk_at_random_depths", mispredict_loop,
                    &mispredict_rounds, 53, 1, 200, 2000, true, per, &counted);
  if (!counted) return;
#ifdef __OPTIMIZE__
  const double most = 5.5;
#else
  const double most = 12.0;
#endif
  fprintf(stderr, "  %.2f mispredicted conditional branches a walk (at most %.1f)\n", per[2], most);
  CTS_ASSERT_MSG(per[2] <= most, "%.2f mispredicted conditional branches a walk (at most %.1f)",
                 per[2], most);
#endif
}

/* ---- the cache of call frame rules ----------------------------------------------------- */

#ifdef CFI_FUNCTIONS
/* RULES_SITES calls of rules_leaf, each from a call site of its own, in a function without
 * frame pointers: each walk looks up the rules at one more address, as cc1's allocations
 * do at its ~8 000 call sites (a cache of 1 024 direct-mapped entries missed there 174 000
 * times in 580 000 walks). */
#define RULES_SITES   1024
#define RULES_STR2(x) #x
#define RULES_STR(x)  RULES_STR2(x)
void rules_many_sites(void);
__attribute__((used, noinline)) void rules_leaf(void);
__asm__(".text\n" CFI_FUNCTION(
    rules_many_sites,
    "  subq $8, %rsp\n  .cfi_def_cfa_offset 16\n"
    "  .rept " RULES_STR(RULES_SITES) "\n  call rules_leaf\n  .endr\n"
                                      "  addq $8, %rsp\n  .cfi_def_cfa_offset 8\n  ret\n"));
static uint64_t rules_next_obj;
__attribute__((used, noinline)) void rules_leaf(void) {
  cts_tracer_track_alloc(fake_ptr(9000000 + rules_next_obj++), 40);
  __asm__ volatile("" ::: "memory");
}
#endif

#if defined(CFI_FUNCTIONS) && defined(CTS_TEST_HAVE_LIBUNWIND)
/* Two passes over RULES_SITES call sites with `unwind` into *d; the rules read in each
 * into misses[]. */
static void rules_run(cts_tracer_unwind_t unwind, decoded_t *d, uint64_t misses[2]) {
  membuf_t b;
  start_to_memory(&b, 1.0, 49, unwind);
  for (int pass = 0; pass < 2; pass++) {
    const uint64_t before = cts__thread.unwind_rule_misses;
    rules_many_sites();
    misses[pass] = cts__thread.unwind_rule_misses - before;
  }
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_from_memory(d, b.data, b.len);
  free(b.data);
  CTS_ASSERT_MSG(d->error == 0, "%s", d->message);
  CTS_ASSERT_EQ_U64(d->nallocs, 2 * RULES_SITES);
}
#endif

/* The second pass finds every address's rules in the thread's cache, but for the few its
 * sets cannot hold; the backtraces are libunwind's. */
CTS_TEST(call_frame_rules_of_a_thousand_call_sites_stay_cached) {
#if !defined(CFI_FUNCTIONS) || !defined(CTS_TEST_HAVE_LIBUNWIND)
  CTS_SKIP("x86-64 ELF with libunwind only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  decoded_t runs[2];
  uint64_t counts[2][2];
  const cts_tracer_unwind_t modes[2] = {CTS_TRACER_UNWIND_MIXED, CTS_TRACER_UNWIND_LIBUNWIND};
  for (int m = 0; m < 2; m++) rules_run(modes[m], &runs[m], counts[m]); /* 1 call site */
  if (cts_test_state.failed) return;
  decoded_t mixed = runs[0], lib = runs[1];
  const uint64_t *const misses = counts[0];
  fprintf(stderr, "  rules read: %" PRIu64 " in the first pass, %" PRIu64 " in the second\n",
          misses[0], misses[1]);
  CTS_ASSERT(same_backtraces(&mixed, &lib));
  /* Each call site's allocation found through its own return address. */
  for (size_t i = 0; i < mixed.nallocs; i++) {
    CTS_ASSERT(mixed.allocs[i].caller != 0);
    if (i % RULES_SITES > 0) CTS_ASSERT(mixed.allocs[i].caller != mixed.allocs[i - 1].caller);
    if (i >= RULES_SITES)
      CTS_ASSERT(mixed.allocs[i].caller == mixed.allocs[i - RULES_SITES].caller);
  }
  CTS_ASSERT(misses[0] >= RULES_SITES);
  CTS_ASSERT_MSG(misses[1] <= RULES_SITES / 16, "%" PRIu64 " misses", misses[1]);
  decoded_fini(&mixed);
  decoded_fini(&lib);
#endif
}

/* ---- the call frame information's instructions per rule look-up ------------------------- */

#ifdef CFI_FUNCTIONS
/* LONG_SITES call sites of long_leaf in one function without frame pointers, each after
 * LONG_PAIRS pushes and pops of %rbx that the call frame information follows (an advance,
 * a CFA offset and a saved register per push; an advance, a CFA offset and a restore per
 * pop: what gcc writes around calls that need a callee-saved register). Each site's rules
 * are looked up once: its FDE's instructions are run from the start up to it, as for cc1's
 * long functions (~370 instructions a look-up). */
#define LONG_SITES 48
#define LONG_PAIRS 8
void long_program(void);
__attribute__((used, noinline)) void long_leaf(void);
__asm__(".text\n" CFI_FUNCTION(
    long_program,
    "  subq $8, %rsp\n  .cfi_def_cfa_offset 16\n"
    "  .rept " RULES_STR(
        LONG_SITES) "\n"
                    "  .rept " RULES_STR(
                        LONG_PAIRS) "\n"
                                    "  pushq %rbx\n  .cfi_adjust_cfa_offset 8\n  .cfi_offset %rbx, "
                                    "-24\n"
                                    "  popq %rbx\n  .cfi_adjust_cfa_offset -8\n  .cfi_restore "
                                    "%rbx\n"
                                    "  .endr\n  call long_leaf\n  .endr\n"
                                    "  addq $8, %rsp\n  .cfi_def_cfa_offset 8\n  ret\n"));
static uint64_t long_next_obj;
__attribute__((used, noinline)) void long_leaf(void) {
  cts_tracer_track_alloc(fake_ptr(9800000 + long_next_obj++), 40);
  __asm__ volatile("" ::: "memory");
}
#endif

/* Guard for the rule look-ups of rate 1 (#16: cc1plus looks up ~10 000 addresses' rules,
 * ~5 900 instructions each, mostly running their FDE's instructions from the start): the
 * instructions of cts__cfi_row_at per call frame instruction of long_program's pairs,
 * counted by callgrind over its LONG_SITES look-ups (site k runs k x LONG_PAIRS x 6 more
 * than the first) less a run without them. The four common instructions with at most a
 * one-byte operand (advance, CFA offset, register saved, register restored) run in a loop
 * of their own: 41.9 instructions each before (release build, gcc 12: the test fails
 * there), 23.5 after; at -O0 43.8, where the bound only catches a call added to each. */
CTS_TEST(cfi_row_instructions_per_call_frame_instruction) {
#ifndef CFI_FUNCTIONS
  CTS_SKIP("x86-64 ELF only");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  const char *const child = getenv("CTS_TEST_CHILD");
  if (child) { /* under valgrind: 1 or all look-ups */
    membuf_t b;
    start_to_memory(&b, 1.0, 53, CTS_TRACER_UNWIND_MIXED);
    const uint64_t misses = cts__thread.unwind_rule_misses;
    if (strcmp(child, "1") == 0)
      long_leaf(); /* the same walk outwards of long_program, without its sites */
    else
      long_program();
    /* Not vacuous: each site's rules were looked up. */
    if (strcmp(child, "1") != 0) CTS_ASSERT(cts__thread.unwind_rule_misses - misses >= LONG_SITES);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    free(b.data);
    return;
  }
  char self[4096];
  if (!can_count_instructions(self, sizeof self)) CTS_SKIP("no valgrind for this build");
  static const char *const test = "cfi_row_instructions_per_call_frame_instruction";
  uint64_t one = 0, all = 0;
  child_instructions(self, test, "cts__cfi_row_at", 1, &one);
  if (!cts_test_state.failed) child_instructions(self, test, "cts__cfi_row_at", 2, &all);
  if (cts_test_state.failed) return;
  /* Site k (from 0) runs k x LONG_PAIRS x 6 instructions more than a look-up of nothing. */
  const double ops = (double)LONG_PAIRS * 6.0 * LONG_SITES * (LONG_SITES - 1) / 2.0;
  CTS_ASSERT_MSG(all > one + (uint64_t)ops, "%" PRIu64 " instructions, %" PRIu64 " without sites",
                 all, one);
  const double per = ((double)all - (double)one) / ops;
  assert_instructions_at_most(per, 30, 60, "a call frame instruction");
#endif
}

/* ---- the record and collect of a sampled block at rate 1 -------------------------------- */

/* Guard for rate 1's cost outside the walk (#16, cc1): the instructions of
 * cts__tracer_record and cts__tracer_record_free for a sampled block and its free, with the
 * preload library's arguments (its header keeps the full id), TSC times and no stack (the
 * walk has its own guard above), counted by callgrind over 2 000 pairs less 200. The
 * collect's common case is written inline without a register saved or a call, and the
 * full id comes back whole instead of through a pointer: 191.0 instructions a pair before
 * (release build, gcc 12: the test fails there), 161.0 after; at -O0 592, where the bound
 * only catches a call or a loop added. */
CTS_TEST(record_and_free_instructions_at_rate_1) {
  const char *const child = getenv("CTS_TEST_CHILD");
  if (child) { /* under valgrind */
    const uint64_t pairs = strtoull(child, NULL, 10);
    membuf_t b;
    memset(&b, 0, sizeof b);
    cts_tracer_config_t cfg;
    cts_tracer_config_init(&cfg);
    cfg.sample_rate = 1.0;
    cfg.seed = 54;
    cfg.unwind = CTS_TRACER_UNWIND_NONE;
    cts_tracer_sink_t sink;
    cts_tracer_sink_init(&sink, CTS_TRACER_SINK_CALLBACK);
    sink.write = membuf_write;
    sink.write_user_data = &b;
    CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
    /* Not vacuous: the common case is the one counted. */
    CTS_ASSERT(cts__session.tsc_mode);
    const uint64_t collects = cts__thread.ring ? cts__thread.ring->collects : 0;
    for (uint64_t i = 0; i < pairs; i++) {
      const uint64_t full =
          cts__tracer_record(fake_ptr(9600000 + i), 48, 6, __builtin_frame_address(0), false);
      CTS_ASSERT(full != CTS__TRACER_NO_ID);
      cts__tracer_record_free(full & CTS__TRACER_NO_ID,
                              (unsigned)(full >> CTS__TRACER_ID_BITS) & CTS__TRACER_SESSION_MASK);
    }
    CTS_ASSERT_EQ_U64(cts__thread.ring->collects - collects, pairs);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    free(b.data);
    return;
  }
  char self[4096];
  if (!can_count_instructions(self, sizeof self)) CTS_SKIP("no valgrind for this build");
  if (!cts_os_tsc_usable()) CTS_SKIP("events are not timed by the TSC here");
  static const char *const test = "record_and_free_instructions_at_rate_1";
  uint64_t few = 0, many = 0;
  child_instructions(self, test, "cts__tracer_record*", 200, &few);
  if (!cts_test_state.failed) child_instructions(self, test, "cts__tracer_record*", 2000, &many);
  if (cts_test_state.failed) return;
  /* Not vacuous: the pairs were counted. */
  CTS_ASSERT_MSG(few > 200 * 50, "%" PRIu64 " instructions in 200 pairs", few);
  const double per = ((double)many - (double)few) / 1800.0;
  assert_instructions_at_most(per, 175, 680, "a record and its collect");
}

/* ---- the mixed unwinder through a signal frame ------------------------------------------ */

/* A handler that allocates: the walk stops at the signal trampoline (no frame pointer),
 * and the frames beyond come from libunwind, through the signal frame. Its return
 * address rule is not what the slots check accepts (a signal frame, CFA by expression),
 * and its saved context is too large for the byte copy, so no capture here is served from
 * the cache; the test checks that each gets libunwind's backtrace. */

enum { SIGNAL_ALLOCS = 3 };
static uint64_t signal_next_obj;

static void signal_handler(int sig) {
  (void)sig;
  for (int i = 0; i < SIGNAL_ALLOCS; i++) {
    cts_tracer_track_alloc(fake_ptr(9000000 + signal_next_obj++), 32);
    __asm__ volatile("" ::: "memory");
  }
}

/* Two places that raise the signal: the frames beyond the signal frame differ. */
static __attribute__((noinline)) void signal_from_a(void) {
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void signal_from_b(void) {
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory");
}

CTS_TEST(mixed_unwinder_through_a_signal_frame) {
#ifndef CTS_TEST_HAVE_LIBUNWIND
  CTS_SKIP("built without libunwind");
#else
  if (!cts__unwind_mixed_available()) CTS_SKIP("no _dl_find_object: mixed = libunwind");
  struct sigaction sa = {0}, old;
  sa.sa_handler = signal_handler;
  sigemptyset(&sa.sa_mask);
  CTS_ASSERT_EQ_INT(sigaction(SIGUSR1, &sa, &old), 0);
  decoded_t runs[2];
  const cts_tracer_unwind_t modes[2] = {CTS_TRACER_UNWIND_MIXED, CTS_TRACER_UNWIND_LIBUNWIND};
  for (int m = 0; m < 2; m++) {
    membuf_t b;
    start_to_memory(&b, 1.0, 49, modes[m]);
    const uint64_t cached = cts__thread.unwind_cached, full = cts__thread.unwind_full;
    signal_from_a();
    signal_from_b();
    signal_from_a();
    if (m == 0)
      fprintf(stderr, "  %" PRIu64 " cached, %" PRIu64 " unwound by libunwind\n",
              cts__thread.unwind_cached - cached, cts__thread.unwind_full - full);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    decoded_from_memory(&runs[m], b.data, b.len);
    free(b.data);
    CTS_ASSERT_MSG(runs[m].error == 0, "%s", runs[m].message);
    CTS_ASSERT_EQ_U64(runs[m].nallocs, 3 * SIGNAL_ALLOCS);
  }
  sigaction(SIGUSR1, &old, NULL);
  decoded_t mixed = runs[0], lib = runs[1];
  /* Beyond the handler: the signal frame, raise and the function that called it. */
  CTS_ASSERT(lib.allocs[0].depth > 4);
  CTS_ASSERT(lib.allocs[0].backtrace_hash != lib.allocs[SIGNAL_ALLOCS].backtrace_hash);
  CTS_ASSERT(same_backtraces(&mixed, &lib));
  decoded_fini(&mixed);
  decoded_fini(&lib);
#endif
}

/* ---- per-thread rings: frees on other threads, thread exits, sessions ------------------ */

/* Blocks handed from each allocating thread to the next one, which frees them: a collect
 * is often published (in the freeing thread's ring) before the writer thread has reached
 * the allocation (in the allocating thread's ring). */
#define HANDOFF_THREADS 4
#define HANDOFF_BLOCKS  30000

typedef struct handoff {
  pthread_mutex_t mu;
  uint64_t items[256];
  size_t head, tail;
  bool done;
} handoff_t;

static handoff_t handoffs[HANDOFF_THREADS];

static void handoff_put(handoff_t *h, uint64_t v) {
  for (;;) {
    pthread_mutex_lock(&h->mu);
    if (h->tail - h->head < 256) {
      h->items[h->tail++ % 256] = v;
      pthread_mutex_unlock(&h->mu);
      return;
    }
    pthread_mutex_unlock(&h->mu);
    sched_yield();
  }
}

/* Frees what is waiting in h; true while its producer is not done or items remain. */
static bool handoff_free_some(handoff_t *h) {
  pthread_mutex_lock(&h->mu);
  const bool more = !h->done || h->head != h->tail;
  while (h->head != h->tail) cts_tracer_track_free(fake_ptr(h->items[h->head++ % 256]));
  pthread_mutex_unlock(&h->mu);
  return more;
}

static void *handoff_body(void *arg) {
  const uintptr_t t = (uintptr_t)arg;
  handoff_t *const mine = &handoffs[t], *const neighbours = &handoffs[(t + 1) % HANDOFF_THREADS];
  for (uint64_t i = 0; i < HANDOFF_BLOCKS; i++) {
    const uint64_t obj = t * HANDOFF_BLOCKS + i;
    cts_tracer_track_alloc(fake_ptr(obj), 16 + i % 100);
    handoff_put(mine, obj);
    if (i % 8 == 0) handoff_free_some(neighbours);
  }
  pthread_mutex_lock(&mine->mu);
  mine->done = true;
  pthread_mutex_unlock(&mine->mu);
  while (handoff_free_some(neighbours)) sched_yield();
  return NULL;
}

CTS_TEST(frees_on_other_threads_follow_their_allocations) {
  membuf_t b;
  start_to_memory(&b, 1.0, 29, CTS_TRACER_UNWIND_NONE);
  pthread_t th[HANDOFF_THREADS];
  for (int t = 0; t < HANDOFF_THREADS; t++) {
    memset(&handoffs[t], 0, sizeof handoffs[t]);
    pthread_mutex_init(&handoffs[t].mu, NULL);
  }
  for (uintptr_t t = 0; t < HANDOFF_THREADS; t++)
    pthread_create(&th[t], NULL, handoff_body, (void *)t);
  for (int t = 0; t < HANDOFF_THREADS; t++) pthread_join(th[t], NULL);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(st.samples, HANDOFF_THREADS * HANDOFF_BLOCKS);
  CTS_ASSERT_EQ_U64(st.collects, HANDOFF_THREADS * HANDOFF_BLOCKS);
  decoded_t d;
  decode_consistent(&d, &b); /* a collect before its allocation would be refused */
  CTS_ASSERT_EQ_U64(d.nallocs, HANDOFF_THREADS * HANDOFF_BLOCKS);
  CTS_ASSERT_EQ_U64(d.ncollects, HANDOFF_THREADS * HANDOFF_BLOCKS);
  decoded_fini(&d);
  free(b.data);
}

static void *short_lived_body(void *arg) {
  const uint64_t base = (uint64_t)(uintptr_t)arg * 1000u;
  for (uint64_t i = 0; i < 1000; i++) cts_tracer_track_alloc(fake_ptr(base + i), 40);
  for (uint64_t i = 0; i < 1000; i += 2) cts_tracer_track_free(fake_ptr(base + i));
  return NULL;
}

CTS_TEST(exited_threads_hand_their_rings_on) {
  membuf_t b;
  start_to_memory(&b, 1.0, 31, CTS_TRACER_UNWIND_NONE);
  const size_t rings_before = cts__tracer_ring_count();
  enum { ROUNDS = 25, AT_ONCE = 4 };
  for (uintptr_t round = 0; round < ROUNDS; round++) {
    pthread_t th[AT_ONCE];
    for (uintptr_t t = 0; t < AT_ONCE; t++)
      pthread_create(&th[t], NULL, short_lived_body, (void *)(round * AT_ONCE + t));
    for (int t = 0; t < AT_ONCE; t++) pthread_join(th[t], NULL);
  }
  /* 100 threads, at most 4 at a time (and this one): their rings were reused. */
  const size_t rings = cts__tracer_ring_count();
  CTS_ASSERT_MSG(rings <= rings_before + AT_ONCE + 1, "%zu rings for %d threads (%zu before)",
                 rings, ROUNDS * AT_ONCE, rings_before);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decode_consistent(&d, &b);
  CTS_ASSERT_EQ_U64(d.nallocs, ROUNDS * AT_ONCE * 1000);
  CTS_ASSERT_EQ_U64(d.ncollects, ROUNDS * AT_ONCE * 500);
  decoded_fini(&d);
  free(b.data);
}

/* A thread allocating and freeing without pause while sessions start and stop: whatever
 * it publishes as a session ends must never reach the next session's trace. */
static atomic_bool churn_stop;

static void *churn_body(void *arg) {
  (void)arg;
  for (uint64_t i = 0; !atomic_load(&churn_stop); i++) {
    cts_tracer_track_alloc(fake_ptr(5000000 + i % 512), 32);
    cts_tracer_track_free(fake_ptr(5000000 + (i + 256) % 512));
  }
  return NULL;
}

CTS_TEST(sessions_started_and_stopped_under_load_stay_apart) {
  atomic_store(&churn_stop, false);
  pthread_t th[2];
  for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, churn_body, NULL);
  for (int round = 0; round < 12; round++) {
    membuf_t b;
    start_to_memory(&b, round % 2 ? 1.0 : 0.01, 37 + (uint64_t)round, CTS_TRACER_UNWIND_NONE);
    const struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    /* On a loaded machine the churning threads may not run in 20 ms: the round lasts until
     * they have sampled something (at most 5 s more). */
    cts_tracer_stats_t st = {0};
    for (int wait = 0; wait < 250 && (cts_tracer_get_stats(&st), st.samples == 0); wait++)
      nanosleep(&pause, NULL);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    decoded_t d;
    decoded_from_memory(&d, b.data, b.len);
    CTS_ASSERT_MSG(d.error == 0, "round %d: %s", round, d.message);
    CTS_ASSERT_MSG(!d.collected_twice && !d.time_backwards, "round %d", round);
    CTS_ASSERT_MSG(d.nallocs > 0, "round %d: nothing sampled", round);
    for (size_t i = 0; i < d.nallocs; i++) CTS_ASSERT_EQ_U64(d.allocs[i].id, i);
    decoded_fini(&d);
    free(b.data);
  }
  atomic_store(&churn_stop, true);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
}

/* ---- backtraces and locations ------------------------------------------------------------ */

static __attribute__((noinline)) void allocation_site_for_test(uint64_t i) {
  cts_tracer_track_alloc(fake_ptr(i), 64);
  __asm__ volatile("" ::: "memory"); /* keep the call from becoming a tail call */
}

static __attribute__((noinline)) void caller_of_site(uint64_t i) {
  allocation_site_for_test(i);
  __asm__ volatile("" ::: "memory");
}

static void check_backtraces(cts_tracer_unwind_t unwind) {
  membuf_t b;
  start_to_memory(&b, 1.0, 5, unwind);
  for (uint64_t i = 0; i < 100; i++) caller_of_site(i);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 100);
  CTS_ASSERT_MSG(d.allocs[0].depth >= 3, "depth %zu", d.allocs[0].depth);
  for (size_t i = 1; i < d.nallocs; i++) {
    CTS_ASSERT_EQ_U64(d.allocs[i].innermost, d.allocs[0].innermost);
    CTS_ASSERT_EQ_U64(d.allocs[i].depth, d.allocs[0].depth);
  }
#ifdef CTS_TEST_HAVE_LIBDW
  const char *site = decoded_function(&d, d.allocs[0].innermost);
  CTS_ASSERT_MSG(site && strcmp(site, "allocation_site_for_test") == 0, "innermost is %s",
                 site ? site : "(unknown)");
#endif
  fprintf(stderr, "  depth %zu\n", d.allocs[0].depth);
  decoded_fini(&d);
  free(b.data);
}

CTS_TEST(backtraces_frame_pointers) {
  check_backtraces(CTS_TRACER_UNWIND_FRAME_POINTER);
}

CTS_TEST(backtraces_libunwind) {
#ifndef CTS_TEST_HAVE_LIBUNWIND
  CTS_SKIP("built without libunwind");
#endif
  check_backtraces(CTS_TRACER_UNWIND_LIBUNWIND);
}

/* always_inline is honoured at -O0 too: the allocation site is in inlined code. (80 bytes:
 * with allocation_site_for_test's 64, gcc -O2 would fold the two functions into one.) */
static inline __attribute__((always_inline)) void inlined_helper_for_test(uint64_t i) {
  cts_tracer_track_alloc(fake_ptr(i), 80);
}

static __attribute__((noinline)) void outer_for_inline_test(uint64_t i) {
  inlined_helper_for_test(i);
  __asm__ volatile("" ::: "memory");
}

CTS_TEST(inlined_frames_are_listed_outermost_first) {
#ifndef CTS_TEST_HAVE_LIBDW
  CTS_SKIP("built without libdw");
#endif
  membuf_t b;
  start_to_memory(&b, 1.0, 5, CTS_TRACER_UNWIND_FRAME_POINTER);
  outer_for_inline_test(0);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 1);
  const cts_mt_location_t *locs;
  size_t n;
  CTS_ASSERT_EQ_INT(cts_mt_reader_lookup_location(d.reader, d.allocs[0].innermost, &locs, &n), 0);
  CTS_ASSERT_EQ_U64(n, 2);
  CTS_ASSERT_STR_EQ(locs[0].defname, "outer_for_inline_test");
  CTS_ASSERT_STR_EQ(locs[1].defname, "inlined_helper_for_test");
  CTS_ASSERT(strstr(locs[0].filename, "test_tracer.c") != NULL);
  CTS_ASSERT(locs[0].line > 0 && locs[1].line > locs[0].line - 10 && locs[1].line < locs[0].line);
  decoded_fini(&d);
  free(b.data);
}

CTS_TEST(fd_sink_writes_to_the_callers_descriptor) {
  FILE *tmp = tmpfile();
  CTS_ASSERT(tmp != NULL);
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FD);
  sink.fd = fileno(tmp);
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
  for (uint64_t i = 0; i < 10; i++) cts_tracer_track_alloc(fake_ptr(i), 8);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  CTS_ASSERT(fcntl(fileno(tmp), F_GETFD) >= 0); /* still open: the caller's */
  membuf_t b;
  read_back(tmp, &b);
  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 10);
  decoded_fini(&d);
  free(b.data);
}

static uint64_t realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The default clock (the time-stamp counter when usable, converted by the writer thread):
 * each event's time is the wall-clock time it happened, within a millisecond, for events
 * spread over 24 ms. */
CTS_TEST(default_clock_gives_wall_clock_times) {
  FILE *tmp = tmpfile();
  CTS_ASSERT(tmp != NULL);
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FD);
  sink.fd = fileno(tmp);
  uint64_t before[6], after[6];
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
  for (uint64_t i = 0; i < 6; i++) {
    before[i] = realtime_us();
    cts_tracer_track_alloc(fake_ptr(i), 64);
    after[i] = realtime_us();
    const struct timespec pause = {0, 4000000}; /* 4 ms */
    nanosleep(&pause, NULL);
  }
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  membuf_t b;
  read_back(tmp, &b);
  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 6);
  CTS_ASSERT(!d.time_backwards);
  for (size_t i = 0; i < 6; i++)
    CTS_ASSERT_MSG(d.allocs[i].time + 1000 >= before[i] && d.allocs[i].time <= after[i] + 1000,
                   "event %zu at %llu, called between %llu and %llu", i,
                   (unsigned long long)d.allocs[i].time, (unsigned long long)before[i],
                   (unsigned long long)after[i]);
  decoded_fini(&d);
  free(b.data);
}

CTS_TEST(no_backtraces) {
  membuf_t b;
  start_to_memory(&b, 1.0, 5, CTS_TRACER_UNWIND_NONE);
  caller_of_site(0);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT(d.error == 0 && d.nallocs == 1 && d.allocs[0].depth == 0);
  decoded_fini(&d);
  free(b.data);
}

/* ---- sinks, flushing, errors ---------------------------------------------------------------- */

/* Starts tracing at rate 1 into a new file named from the mkstemp template `path`, with
 * zstd level `compress_level` (0: plain). */
static void start_file(char *path, int compress_level, cts_tracer_config_t *cfg,
                       cts_tracer_sink_t *sink) {
  const int fd = mkstemp(path);
  CTS_ASSERT(fd >= 0);
  close(fd);
  cts_tracer_config_init(cfg);
  cfg->sample_rate = 1.0;
  cfg->compress_level = compress_level;
  cts_tracer_sink_init(sink, CTS_TRACER_SINK_FILE);
  sink->path = path;
  CTS_ASSERT_EQ_INT(cts_tracer_start(cfg, sink), 0);
}

CTS_TEST(file_sink_is_readable_after_each_flush) {
  char path[] = "/tmp/cts_tracer_XXXXXX";
  cts_tracer_config_t cfg;
  cts_tracer_sink_t sink;
  start_file(path, 0, &cfg, &sink);
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_STATE);
  for (uint64_t i = 0; i < 300; i++) cts_tracer_track_alloc(fake_ptr(i), 100);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), 0);
  decoded_t d; /* while tracing goes on */
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 300);
  decoded_fini(&d);
  for (uint64_t i = 0; i < 300; i++) cts_tracer_track_free(fake_ptr(i));
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), CTS_E_STATE);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), CTS_E_STATE);
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 300);
  CTS_ASSERT_EQ_U64(d.ncollects, 300);
  CTS_ASSERT(d.rate == 1.0);
  decoded_fini(&d);
  unlink(path);
}

/* Whether the file at `path` starts as a compressed trace: the skippable frame that names
 * the column transform (docs/formats/memtrace-zstd.md). */
static bool starts_as_zstd(const char *path) {
  unsigned char m[4] = {0};
  FILE *const f = fopen(path, "rb");
  const bool ok = f && fread(m, 1, 4, f) == 4;
  if (f) fclose(f);
  return ok && m[0] == 0x5c && m[1] == 0x2a && m[2] == 0x4d && m[3] == 0x18;
}

/* Compression (tracer.h, "Compression"): the file is zstd from its first flush; a flush
 * the program asks for ends the frame (the file is then complete: no warning, zstd(1)
 * checks it), later events go into a new one; at the end, whole frames with checksums,
 * the same events. */
CTS_TEST(compressed_file_sink_is_readable_after_each_flush) {
  char path[] = "/tmp/cts_tracer_zst_XXXXXX";
  cts_tracer_config_t cfg;
  cts_tracer_sink_t sink;
  start_file(path, 3, &cfg, &sink);
  CTS_ASSERT(starts_as_zstd(path)); /* the trace-info packet is there at once */
  for (uint64_t i = 0; i < 3000; i++) cts_tracer_track_alloc(fake_ptr(i), 100 + i % 500);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), 0);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 3000);
  CTS_ASSERT_MSG(d.warnings == 0, "%s", d.warning);
  decoded_fini(&d);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "zstd -q -t %s", path);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  for (uint64_t i = 0; i < 3000; i++) cts_tracer_track_free(fake_ptr(i));
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 3000);
  CTS_ASSERT_EQ_U64(d.ncollects, 3000);
  CTS_ASSERT_MSG(d.warnings == 0, "%s", d.warning);
  CTS_ASSERT(!d.collected_twice && !d.time_backwards);
  decoded_fini(&d);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  unlink(path);
  /* TCP sinks stream plain memtrace: the collector and fetch read that. */
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_TCP_CONNECT);
  sink.address = "127.0.0.1:1";
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_INVAL);
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = path;
  cfg.compress_level = 20;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_INVAL);
}

/* The trace ends when the session did, not at its last event (issue 16: a program that
 * sleeps after its last allocation has a trace whose duration covers the sleep). */
CTS_TEST(trace_ends_when_the_session_stops) {
  char path[] = "/tmp/cts_tracer_end_XXXXXX";
  cts_tracer_config_t cfg;
  cts_tracer_sink_t sink;
  start_file(path, 0, &cfg, &sink);
  for (uint64_t i = 0; i < 10; i++) cts_tracer_track_alloc(fake_ptr(i), 100);
  const struct timespec pause = {0, 400 * 1000000L};
  nanosleep(&pause, NULL);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 10);
  CTS_ASSERT_MSG(d.end_time >= d.last_time + 400000, "end %llu, last event %llu",
                 (unsigned long long)d.end_time, (unsigned long long)d.last_time);
  decoded_fini(&d);
  unlink(path);
}

static int failing_write(void *ud, const void *p, size_t n) {
  (void)p, (void)n;
  return ++*(int *)ud > 1 ? -EIO : 0; /* the trace-info packet goes through */
}

CTS_TEST(sink_error_is_reported_and_stops_sampling) {
  int calls = 0;
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_CALLBACK);
  sink.write = failing_write;
  sink.write_user_data = &calls;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
  for (uint64_t i = 0; i < 100; i++) cts_tracer_track_alloc(fake_ptr(i), 100);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), -EIO);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), -EIO);
}

/* Whether the time-stamp counter may time events is asked at a session's start and kept
 * only while it runs (an exec hands it to the next image): the kernel may give the TSC up
 * while a program runs, so the next session asks again (tracer_internal.h). */
CTS_TEST(each_session_asks_whether_the_tsc_is_usable) {
  membuf_t b;
  memset(&b, 0, sizeof b);
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_CALLBACK);
  sink.write = membuf_write;
  sink.write_user_data = &b;
  for (int session = 0; session < 2; session++) {
    CTS_ASSERT_EQ_INT(cts__tsc_usable_known, -1);
    CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
    CTS_ASSERT(cts__tsc_usable_known == (CTS_HAVE_CPU_COUNTER ? cts_os_tsc_usable() : -1));
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  }
  free(b.data);
}

/* A writer process sees a program that ended by _exit, a signal or an exec only when it
 * next looks: a short run must not wait the full 50 ms of a long-running one's looks (a
 * 20-image exec chain of 15 ms took 80-90 ms traced), and a long-running one must not be
 * looked at more often than every 50 ms. */
CTS_TEST(the_writer_looks_for_a_gone_program_by_its_age) {
  CTS_ASSERT_EQ_U64(cts__owner_check_ms(0), 1);
  CTS_ASSERT_EQ_U64(cts__owner_check_ms(31), 1);
  CTS_ASSERT_EQ_U64(cts__owner_check_ms(160), 10);
  CTS_ASSERT_EQ_U64(cts__owner_check_ms(800), 50);
  CTS_ASSERT_EQ_U64(cts__owner_check_ms(UINT64_MAX), 50);
  uint64_t last = 0;
  for (uint64_t age = 0; age < 5000; age++) {
    const uint64_t look = cts__owner_check_ms(age);
    CTS_ASSERT(look >= last && look >= 1 && look <= 50);
    /* The wait after the end stays a small share of the run (at least 1 ms). */
    CTS_ASSERT(look <= 1 || look * 16 <= age);
    last = look;
  }
}

CTS_TEST(bad_configurations_are_refused) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = "/nonexistent-dir/trace.ctf";
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), -ENOENT);
  sink.path = "/tmp/cts_never_written.ctf";
  cfg.sample_rate = 0;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_INVAL);
  cfg.sample_rate = 1.5;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_INVAL);
  cfg.sample_rate = 1e-3;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_TCP_CONNECT);
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_INVAL); /* no address */
  sink.address = "no-port-here";
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), -EINVAL);
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_TCP_LISTEN);
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_INVAL);
  sink.address = "127.0.0.1:99999";
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), -EINVAL);
  CTS_ASSERT_EQ_U64(cts_tracer_listen_port(), 0);
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_CALLBACK);
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_INVAL); /* no callback */
  CTS_ASSERT(!cts_tracer_is_active());
}

/* ---- TCP sinks (real sockets on 127.0.0.1; every wait has a deadline) ------------------- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A listening socket on 127.0.0.1 with a free port. */
static int listen_loopback(uint16_t *port) {
  cts_net_addr_t a;
  int fd;
  if (cts_net_parse_listen("127.0.0.1:0", &a, NULL, 0) != 0 || cts_net_listen(&a, 8, false, &fd) ||
      cts_net_local_addr(fd, &a) != 0)
    abort();
  *port = cts_net_addr_port(&a);
  return fd;
}

static int connect_loopback(uint16_t port) {
  char spec[32];
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  cts_net_addr_t a;
  int fd;
  if (cts_net_parse_connect(spec, &a, NULL, 0) != 0 || cts_net_connect(&a, 5000, &fd) != 0)
    return -1;
  return fd;
}

/* Reads until the peer closes; false after 20 s. */
static bool read_until_eof(int fd, membuf_t *b) {
  const int64_t deadline = now_ms() + 20000;
  uint8_t buf[65536];
  while (now_ms() < deadline) {
    if (cts_net_wait(fd, false, 100) <= 0) continue;
    const ssize_t n = cts_net_read(fd, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0) return n == -EAGAIN ? true : false;
    membuf_write(b, buf, (size_t)n);
  }
  return false;
}

/* Waits (10 s at most) until the listening tracer's stats say serving == want and at least
 * `clients` clients were served. */
static bool wait_serving(bool want, uint64_t clients) {
  for (int i = 0; i < 1000; i++) {
    cts_tracer_stats_t st;
    cts_tracer_get_stats(&st);
    if (st.serving == want && st.clients >= clients) return true;
    sleep_ms(10);
  }
  return false;
}

static void start_tcp(cts_tracer_sink_kind_t kind, const char *address, bool drop) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.seed = 21;
  cfg.unwind = CTS_TRACER_UNWIND_NONE;
  cfg.drop_when_full = drop;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, kind);
  sink.address = address;
  sink.clock = fake_clock;
  const int e = cts_tracer_start(&cfg, &sink);
  if (e) {
    fprintf(stderr, "cts_tracer_start(%s): %s\n", address, cts_os_strerror(e));
    abort();
  }
}

CTS_TEST(tcp_connect_streams_the_trace) {
  uint16_t port;
  const int lfd = listen_loopback(&port);
  char address[32];
  snprintf(address, sizeof address, "127.0.0.1:%u", port);
  start_tcp(CTS_TRACER_SINK_TCP_CONNECT, address, false);
  int cfd;
  CTS_ASSERT_EQ_INT(cts_net_accept(lfd, false, &cfd, NULL), 0);
  for (uint64_t i = 0; i < 1000; i++) cts_tracer_track_alloc(fake_ptr(i), 100 + i);
  for (uint64_t i = 0; i < 1000; i += 2) cts_tracer_track_free(fake_ptr(i));
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  membuf_t b = {0};
  CTS_ASSERT(read_until_eof(cfd, &b));
  decoded_t d;
  decoded_from_memory(&d, b.data, b.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, 1000);
  CTS_ASSERT_EQ_U64(d.ncollects, 500);
  CTS_ASSERT(!d.collected_twice && !d.time_backwards);
  decoded_fini(&d);
  free(b.data);
  close(cfd);
  close(lfd);
}

CTS_TEST(tcp_connect_failure_starts_nothing) {
  uint16_t port;
  close(listen_loopback(&port)); /* nobody listens there now */
  char address[32];
  snprintf(address, sizeof address, "127.0.0.1:%u", port);
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_TCP_CONNECT);
  sink.address = address;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), -ECONNREFUSED);
  CTS_ASSERT(!cts_tracer_is_active());
  sink.address = "host.invalid:4242"; /* never resolves (RFC 2606) */
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), -EINVAL);
  CTS_ASSERT(!cts_tracer_is_active());
}

CTS_TEST(tcp_peer_that_goes_away_stops_tracing_not_the_program) {
  uint16_t port;
  const int lfd = listen_loopback(&port);
  char address[32];
  snprintf(address, sizeof address, "127.0.0.1:%u", port);
  start_tcp(CTS_TRACER_SINK_TCP_CONNECT, address, false);
  int cfd;
  CTS_ASSERT_EQ_INT(cts_net_accept(lfd, false, &cfd, NULL), 0);
  close(cfd);
  close(lfd);
  /* Writing to the closed connection fails (EPIPE or ECONNRESET, never SIGPIPE, which
   * would kill this test); sampling then stops. */
  int e = 0;
  for (uint64_t round = 0; round < 50 && e == 0; round++) {
    for (uint64_t i = 0; i < 1000; i++) cts_tracer_track_alloc(fake_ptr(round * 1000 + i), 64);
    e = cts_tracer_flush();
  }
  CTS_ASSERT_MSG(e == -EPIPE || e == -ECONNRESET, "flush: %s", cts_os_strerror(e));
  CTS_ASSERT(cts_tracer_is_active()); /* until stopped */
  e = cts_tracer_stop();
  CTS_ASSERT_MSG(e == -EPIPE || e == -ECONNRESET, "stop: %s", cts_os_strerror(e));
}

/* Log lines of the listening tracer. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[4096];

static void capture_log(void *ud, const char *line) {
  (void)ud;
  pthread_mutex_lock(&log_mu);
  const size_t n = strlen(log_text);
  snprintf(log_text + n, sizeof log_text - n, "%s\n", line);
  pthread_mutex_unlock(&log_mu);
}

static bool log_has(const char *needle) {
  pthread_mutex_lock(&log_mu);
  const bool found = strstr(log_text, needle) != NULL;
  pthread_mutex_unlock(&log_mu);
  return found;
}

CTS_TEST(tcp_listen_serves_each_client_a_fresh_trace) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.seed = 22;
  cfg.unwind = CTS_TRACER_UNWIND_NONE;
  cfg.context = "served";
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_TCP_LISTEN);
  sink.address = "127.0.0.1:0";
  sink.clock = fake_clock;
  sink.log = capture_log;
  log_text[0] = '\0';
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
  CTS_ASSERT(cts_tracer_is_active());
  const uint16_t port = cts_tracer_listen_port();
  CTS_ASSERT(port != 0);
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), CTS_E_STATE);

  cts_tracer_track_alloc(fake_ptr(0), 100);           /* no client: not traced */
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), CTS_E_STATE); /* no trace being written */

  /* First client: a trace of what happens while it is connected. */
  const int c1 = connect_loopback(port);
  CTS_ASSERT(c1 >= 0);
  CTS_ASSERT(wait_serving(true, 1));
  for (uint64_t i = 1; i <= 100; i++) cts_tracer_track_alloc(fake_ptr(i), 200);
  /* A second client meanwhile is accepted and closed at once, with a log line. */
  const int c2 = connect_loopback(port);
  CTS_ASSERT(c2 >= 0);
  membuf_t refused = {0};
  CTS_ASSERT(read_until_eof(c2, &refused));
  CTS_ASSERT_EQ_U64(refused.len, 0);
  close(c2);
  CTS_ASSERT(log_has("refused a client from 127.0.0.1:"));
  for (uint64_t i = 1; i <= 50; i++) cts_tracer_track_free(fake_ptr(i));
  /* The client half-closes: the program ends the trace and closes. */
  shutdown(c1, SHUT_WR);
  membuf_t t1 = {0};
  CTS_ASSERT(read_until_eof(c1, &t1));
  close(c1);
  CTS_ASSERT(wait_serving(false, 1));
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(st.refused, 1);
  CTS_ASSERT_EQ_U64(st.samples, 100);
  CTS_ASSERT_EQ_U64(st.collects, 50);

  cts_tracer_track_alloc(fake_ptr(1000), 300); /* between clients: not traced */

  /* A later client: a new trace, ids from 0 again, started later. */
  const int c3 = connect_loopback(port);
  CTS_ASSERT(c3 >= 0);
  CTS_ASSERT(wait_serving(true, 2));
  for (uint64_t i = 0; i < 10; i++) cts_tracer_track_alloc(fake_ptr(2000 + i), 400);
  for (uint64_t i = 51; i <= 100; i++) cts_tracer_track_free(fake_ptr(i)); /* sampled before */
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0); /* ends the client's trace too */
  CTS_ASSERT(!cts_tracer_is_active());
  CTS_ASSERT_EQ_U64(cts_tracer_listen_port(), 0);
  membuf_t t2 = {0};
  CTS_ASSERT(read_until_eof(c3, &t2));
  close(c3);

  decoded_t d1, d2;
  decoded_from_memory(&d1, t1.data, t1.len);
  decoded_from_memory(&d2, t2.data, t2.len);
  CTS_ASSERT_MSG(d1.error == 0, "%s", d1.message);
  CTS_ASSERT_MSG(d2.error == 0, "%s", d2.message);
  CTS_ASSERT_STR_EQ(d1.context, "served");
  CTS_ASSERT_EQ_U64(d1.nallocs, 100);
  CTS_ASSERT_EQ_U64(d1.ncollects, 50);
  CTS_ASSERT_EQ_U64(d2.nallocs, 10);
  CTS_ASSERT_EQ_U64(d2.ncollects, 0);
  CTS_ASSERT_EQ_U64(d2.allocs[0].id, 0);
  CTS_ASSERT(d2.allocs[0].time > d1.last_time);
  for (size_t i = 0; i < d1.nallocs; i++) CTS_ASSERT_EQ_U64(d1.allocs[i].length, 25);
  for (size_t i = 0; i < d2.nallocs; i++) CTS_ASSERT_EQ_U64(d2.allocs[i].length, 50);
  decoded_fini(&d1);
  decoded_fini(&d2);
  free(t1.data);
  free(t2.data);
  free(refused.data);
}

/* ---- drop mode ------------------------------------------------------------------------- */

/* A sink that lets the trace-info packet through, then blocks until opened: the slowest
 * reader there is. */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool open;
  int writes;
  membuf_t buf;
} gate_t;

static int gated_write(void *ud, const void *p, size_t n) {
  gate_t *g = ud;
  pthread_mutex_lock(&g->mu);
  if (g->writes++ > 0)
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  const int e = membuf_write(&g->buf, p, n);
  pthread_mutex_unlock(&g->mu);
  return e;
}

static bool is_marker(uint64_t code) {
  return code >> 61 == 1;
}

CTS_TEST(drop_mode_never_waits_and_marks_the_loss) {
  gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.seed = 23;
  cfg.unwind = CTS_TRACER_UNWIND_NONE;
  cfg.drop_when_full = true;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_CALLBACK);
  sink.write = gated_write;
  sink.write_user_data = &g;
  sink.clock = fake_clock;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
  /* The writer thread is stuck in the sink: this loop finishes only if allocating threads
   * never wait for it. */
  const uint64_t total = 300000;
  for (uint64_t i = 0; i < total; i++) {
    cts_tracer_track_alloc(fake_ptr(i), 64);
    cts_tracer_track_free(fake_ptr(i));
  }
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(st.waits, 0);
  CTS_ASSERT_MSG(st.lost_allocs > 0, "nothing was lost: the test did not fill the queue");
  CTS_ASSERT_EQ_U64(st.samples + st.lost_allocs, total);
  CTS_ASSERT_EQ_U64(st.lost_samples, st.lost_allocs * 8); /* 64 bytes = 8 words, rate 1 */
  pthread_mutex_lock(&g.mu);
  g.open = true;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  cts_tracer_get_stats(&st);
  CTS_ASSERT(st.loss_markers >= 1);
  CTS_ASSERT_EQ_U64(st.collects + st.lost_collects, st.samples);

  decoded_t d;
  decoded_from_memory(&d, g.buf.data, g.buf.len);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT(!d.collected_twice && !d.time_backwards);
  uint64_t real = 0, markers = 0, lost_allocs = 0, lost_frees = 0, lost_samples = 0;
  for (size_t i = 0; i < d.nallocs; i++) {
    const decoded_alloc_t *a = &d.allocs[i];
    if (a->depth == 1 && is_marker(a->innermost)) {
      markers++;
      lost_allocs += CTS_TRACER_LOST_ALLOCS_OF(a->innermost);
      lost_frees += CTS_TRACER_LOST_FREES_OF(a->innermost);
      lost_samples += a->nsamples;
      CTS_ASSERT_EQ_U64(a->length, a->nsamples); /* rate 1: every lost word is a sample */
      const char *name = decoded_function(&d, a->innermost);
      CTS_ASSERT_MSG(name && strncmp(name, CTS_TRACER_LOST_NAME_PREFIX,
                                     strlen(CTS_TRACER_LOST_NAME_PREFIX)) == 0,
                     "marker named %s", name ? name : "(nothing)");
    } else {
      real++;
    }
  }
  fprintf(stderr, "  %" PRIu64 " recorded, %" PRIu64 " lost in %" PRIu64 " markers\n", real,
          lost_allocs, markers);
  CTS_ASSERT_EQ_U64(real, st.samples);
  CTS_ASSERT_EQ_U64(markers, st.loss_markers);
  CTS_ASSERT_EQ_U64(lost_allocs, st.lost_allocs);
  CTS_ASSERT_EQ_U64(lost_frees, st.lost_collects);
  CTS_ASSERT_EQ_U64(lost_samples, st.lost_samples);
  CTS_ASSERT_EQ_U64(d.ncollects, st.collects + markers); /* markers are collected at once */
  decoded_fini(&d);
  free(g.buf.data);
}

/* lazylib.h: a library bound on first use. A missing library or function leaves the
 * table NULL and is not tried again; a present one is bound to the right functions. */
#define LAZY_OK(X)      X(strlen)
#define LAZY_MISSING(X) X(strlen) X(cts_no_such_function)
size_t cts_no_such_function(const char *s); /* declared, defined nowhere */
CTS__LAZYLIB_DEFINE(lazy_ok, lazy_ok_lib, "libc.so.6", LAZY_OK);
CTS__LAZYLIB_DEFINE(lazy_gone, lazy_gone_lib, "libcts-no-such-library.so.1", LAZY_OK);
CTS__LAZYLIB_DEFINE(lazy_part, lazy_part_lib, "libc.so.6", LAZY_MISSING);

CTS_TEST(lazy_library_binds_once_or_never) {
  CTS_ASSERT(cts__lazylib_bind(&lazy_ok_lib));
  CTS_ASSERT(lazy_ok.strlen != NULL);
  CTS_ASSERT_EQ_U64(lazy_ok.strlen("four"), 4);
  CTS_ASSERT(cts__lazylib_bind(&lazy_ok_lib));
  CTS_ASSERT(!cts__lazylib_bind(&lazy_gone_lib));
  CTS_ASSERT(lazy_gone.strlen == NULL);
  CTS_ASSERT_EQ_INT(lazy_gone_lib.state, -1);
  CTS_ASSERT(!cts__lazylib_bind(&lazy_gone_lib));
  CTS_ASSERT(!cts__lazylib_bind(&lazy_part_lib));
  CTS_ASSERT(lazy_part.strlen == NULL && lazy_part.cts_no_such_function == NULL);
}

CTS_TEST_MAIN()
