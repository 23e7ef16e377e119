/* SPDX-License-Identifier: MIT */
/* The rings' memory with many threads (tracer_state.h, RING_BUDGET_WORDS). At rate 1 every
 * thread that samples fills its ring, and the pages it reaches stay resident, shared with
 * the writer process: with a ring of 4 MiB for every thread, 1 000 threads took 1.76 GB
 * more. Beyond the first few, rings start small and grow while the rings' sizes sum to
 * at most 64 MiB; the records written through a ring that grows are all in the trace, in
 * their order. */
#define _GNU_SOURCE
#include <ctfscope/tracer.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* The tracer's state first (the control lock): its inline functions keep common/check.h's
 * CTS_ASSERT; the tests' own takes the name after it. */
#include "tracer/tracer_state.h"
#undef CTS_ASSERT

#include "../test.h"
#include "decoded.h"
#include "ring_test.h"

/* The bound the guard holds the program to, stated here rather than taken from
 * tracer_state.h: the rings' words (64 MiB), and per ring a page of its header and one
 * where its words start (the outer-frame cache between is not used without an unwinder). */
#define RING_BYTES_BOUND   ((size_t)64 << 20)
#define PER_RING_BOUND     ((size_t)8 << 10)
#define MANY_THREADS       100u
#define BYTES_PER_THREAD   ((size_t)1 << 20) /* 100 MiB in all with a ring each of 4 MiB */
#define ALLOCS_PER_THREAD  (BYTES_PER_THREAD / (REC_ALLOC_WORDS * sizeof(uint64_t)))
#define SHARED_BOUND_SLACK ((size_t)64 << 10) /* the control block's pages */

/* This process's resident shared memory (the rings' pages it reached), in bytes. */
static size_t rss_shmem(void) {
  FILE *const f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "RssShmem:", 9) == 0) kb = strtoul(line + 9, NULL, 10);
  fclose(f);
  return kb << 10;
}

/* ---- a ring that grows keeps its records and their order ------------------------------- */

static pthread_barrier_t holders_ready;
static int release_pipe[2];

/* Takes one of the rings made at full size, and keeps it until released. */
static void *hold_ring(void *arg) {
  cts_tracer_track_alloc(fake_ptr((uint64_t)(uintptr_t)arg), 64);
  pthread_barrier_wait(&holders_ready);
  char c;
  while (read(release_pipe[0], &c, 1) < 0) {}
  return NULL;
}

/* Until the writer has taken everything ring r holds (10 s at most). */
static bool drained(cts__ring_t *r) {
  for (int i = 0; i < 10000; i++) {
    if (atomic_load(&r->tail) == atomic_load(&r->head)) return true;
    sleep_ms(1);
  }
  return false;
}

#define GROW_FIRST_ID 1000000u
/* Record i's size, in words: distinct along the ring, to find each in the trace. */
static size_t grow_words(uint64_t i) {
  return 1u + i % 997u;
}

typedef struct {
  int writer_pid;
  uint64_t written;
  unsigned shift_before, shift_after;
  bool stopped, drained;
} grow_run_t;

/* Writes 60 % of a smallest ring while the writer is stopped (it is then half a ring
 * behind: the ring asks to grow), lets it drain, and writes on past the ring's end, each
 * record there once the writer has taken the ring's last: the ring doubles there. */
static void *grow_one(void *arg) {
  grow_run_t *const run = arg;
  cts_tracer_track_alloc(fake_ptr(GROW_FIRST_ID), 8u * grow_words(0));
  cts__ring_t *const r = cts__thread.ring;
  run->written = 1;
  if (!r) return NULL;
  run->shift_before = atomic_load(&r->shift);
  const size_t size = cts__ring_words(r);
  run->stopped = stop_writer_unlocked(run->writer_pid);
  if (!run->stopped) return NULL;
  while (atomic_load(&r->head) < size / 10u * 6u) {
    cts_tracer_track_alloc(fake_ptr(GROW_FIRST_ID + run->written), 8u * grow_words(run->written));
    run->written++;
  }
  kill(run->writer_pid, SIGCONT);
  run->drained = drained(r);
  /* The room cts__tracer_record reserves for a record (cts_tracer_config_init's
   * max_frames, 256): a record that reserves past the ring's end wraps it. */
  const size_t room = REC_ALLOC_WORDS + 256u + CTS__OWN_FRAMES;
  while (atomic_load(&r->head) < size + size / 4u) {
    if ((atomic_load(&r->head) & (size - 1u)) + room > size &&
        atomic_load(&r->shift) == run->shift_before)
      run->drained &= drained(r);
    cts_tracer_track_alloc(fake_ptr(GROW_FIRST_ID + run->written), 8u * grow_words(run->written));
    run->written++;
  }
  run->shift_after = atomic_load(&r->shift);
  return NULL;
}

/* First (tests run in their order here): it needs the rings' budget that the next one
 * spends. */
CTS_TEST(a_ring_that_grows_keeps_every_record_in_order) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/cts_ring_grow_%d.ctf", (int)getpid());
  CTS_ASSERT_EQ_INT(start_ring_session(path), 0);
  /* The rings made at full size go to threads that keep them. */
  CTS_ASSERT_EQ_INT(pipe(release_pipe), 0);
  CTS_ASSERT_EQ_INT(pthread_barrier_init(&holders_ready, NULL, RING_FULL_RINGS + 1u), 0);
  pthread_t holders[RING_FULL_RINGS];
  for (uintptr_t i = 0; i < RING_FULL_RINGS; i++)
    CTS_ASSERT_EQ_INT(pthread_create(&holders[i], NULL, hold_ring, (void *)i), 0);
  pthread_barrier_wait(&holders_ready);

  grow_run_t run = {.writer_pid = cts__tracer_writer_pid()};
  CTS_ASSERT(run.writer_pid > 0);
  pthread_t t;
  CTS_ASSERT_EQ_INT(pthread_create(&t, NULL, grow_one, &run), 0);
  pthread_join(t, NULL);
  CTS_ASSERT_EQ_INT(write(release_pipe[1], "xxxx", RING_FULL_RINGS), (int)RING_FULL_RINGS);
  for (unsigned i = 0; i < RING_FULL_RINGS; i++) pthread_join(holders[i], NULL);
  close(release_pipe[0]);
  close(release_pipe[1]);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);

  CTS_ASSERT(run.stopped);
  CTS_ASSERT(run.drained);
  CTS_ASSERT_EQ_U64(run.shift_before, RING_MAX_SHIFT);
  CTS_ASSERT_EQ_U64(run.shift_after, RING_MAX_SHIFT - 1u);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, RING_FULL_RINGS + run.written);
  for (uint64_t i = 0; i < run.written; i++) {
    const decoded_alloc_t *const a = &d.allocs[RING_FULL_RINGS + i];
    CTS_ASSERT_EQ_U64(a->id, RING_FULL_RINGS + i);
    CTS_ASSERT_EQ_U64(a->length, grow_words(i));
  }
  decoded_fini(&d);
  unlink(path);
}

/* ---- many threads at once stay within the bound ---------------------------------------- */

static pthread_barrier_t all_started, all_written;

static void *fill(void *arg) {
  const uint64_t base = (uint64_t)(uintptr_t)arg * ALLOCS_PER_THREAD;
  pthread_barrier_wait(&all_started);
  for (uint64_t i = 0; i < ALLOCS_PER_THREAD; i++) cts_tracer_track_alloc(fake_ptr(base + i), 64);
  /* Alive until every thread has written: no ring is handed on to another thread. */
  pthread_barrier_wait(&all_written);
  return NULL;
}

CTS_TEST(many_threads_at_rate_1_hold_at_most_the_ring_budget) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/cts_ring_memory_%d.ctf", (int)getpid());
  CTS_ASSERT_EQ_INT(start_ring_session(path), 0);
  const size_t before = rss_shmem();
  CTS_ASSERT_EQ_INT(pthread_barrier_init(&all_started, NULL, MANY_THREADS), 0);
  CTS_ASSERT_EQ_INT(pthread_barrier_init(&all_written, NULL, MANY_THREADS + 1u), 0);
  pthread_t t[MANY_THREADS];
  for (uintptr_t i = 0; i < MANY_THREADS; i++)
    CTS_ASSERT_EQ_INT(pthread_create(&t[i], NULL, fill, (void *)i), 0);
  pthread_barrier_wait(&all_written);
  const size_t grown = rss_shmem() - before;
  for (unsigned i = 0; i < MANY_THREADS; i++) pthread_join(t[i], NULL);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);

  const size_t bound = RING_BYTES_BOUND + MANY_THREADS * PER_RING_BOUND + SHARED_BOUND_SLACK;
  fprintf(stderr, "RssShmem: +%zu KiB for %u threads of %zu KiB of records (bound %zu KiB)\n",
          grown >> 10, MANY_THREADS, BYTES_PER_THREAD >> 10, bound >> 10);
  CTS_ASSERT_MSG(grown <= bound, "the rings took %zu KiB, more than %zu KiB", grown >> 10,
                 bound >> 10);
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(st.samples, (uint64_t)MANY_THREADS * ALLOCS_PER_THREAD);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, (uint64_t)MANY_THREADS * ALLOCS_PER_THREAD);
  decoded_fini(&d);
  unlink(path);
}

CTS_TEST_MAIN()
