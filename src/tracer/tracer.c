/* SPDX-License-Identifier: MIT */
/* The allocation tracer: sampling, the sampled-block table, the queue that hands sampled
 * events to the writer thread, the writer thread itself, and the sinks (file, descriptor,
 * callback, TCP connect; TCP listen is service.c). Design: tracer.h. Nothing in
 * here allocates through malloc: the tracer's memory comes from mmap, and the only libc
 * calls that may allocate (pthread_create, pthread_getattr_np, libdw on the writer thread)
 * run with the thread's guard raised, so the preload hooks pass them straight through. */
#define _GNU_SOURCE
#include "tracer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cpu_counter.h"
#include "os/net.h"
#include "os/os.h"
#include "os/tsc_clock.h"
#include "zsink.h"

#ifdef CTS_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

/* Each thread that samples gets a ring of records, mapped at its first sample (its pages
 * only as the records reach them) and handed on to a later thread when it exits: 1 MiB,
 * room for ~6 500 allocations with 16-frame backtraces. Smaller rings cost a program
 * sampling every allocation dearly: the writer thread is woken once per half ring (a
 * futex wake and the other CPU's wake-up), and a thread waits for it whenever that takes
 * longer than the other half lasts. bench_alloc at rate 1: 187 ns per malloc+free pair
 * with 256 KiB, 165 with 512 KiB, 159 with 1 MiB, 154 with 2 MiB (bench/JOURNAL.md). */
#define RING_WORDS (128u * 1024u)
#define RING_MASK  (RING_WORDS - 1u)
/* Drop mode: allocations may fill this much of a ring, the rest is for frees. */
#define RING_ALLOC_LIMIT (RING_WORDS / 4u * 3u)
/* Drop mode: how long a stopping writer thread, or cts_tracer_flush(), waits for a peer
 * that takes nothing. */
#define DROP_GIVE_UP_MS 2000u
/* How long the writer thread waits for an object id that was taken but whose record was
 * never published (its thread stopped in between), before writing a loss marker in its
 * place; and how soon it looks again while it waits. */
#define STALL_GIVE_UP_MS   2000u
#define STALL_RETRY_MS     1u
#define CONNECT_TIMEOUT_MS 3000u
/* While the program writes records, the writer looks at the rings every POLL_MS instead of
 * being woken at each half ring (a futex call on the allocating thread); it stops polling
 * after POLL_IDLE_MAX looks that find nothing. A 1 MiB ring takes 2 ms or more to fill
 * half at rate 1. */
#define POLL_MS           1u
#define POLL_IDLE_MAX     50u
#define TSC_WINDOW_NS     10000000u /* calibrating the counter: 10 ms, about 10 ppm */
#define WRITER_CHECK_MS   100u   /* how often a waiting thread checks the writer process exists */
#define OWNER_CHECK_MS    50u    /* how often the writer process checks the program exists */
#define EXEC_CHECK_MS     1u     /* ... while the program is about to exec (exec_pending) */
#define RING_SLOTS        1024u  /* rings in a writer process's shared mapping */
#define SHARED_HEADER     65536u /* the shared mapping's control block, before the rings */
#define MAX_FRAMES_LIMIT  1024u
#define REC_ALLOC         1u
#define REC_COLLECT       2u
#define REC_PAD           3u /* the rest of the ring up to its end is unused */
#define REC_ALLOC_WORDS   5u /* header, time, full id, length, nsamples; then the frames */
#define REC_COLLECT_WORDS 3u /* header, time, full id */
/* A full id is the session's low bits above the object id: a record that a thread publishes
 * after its session ended can never pass for one of the next session. */
#define ID_BITS              40u
#define ID_MASK              ((UINT64_C(1) << ID_BITS) - 1u)
#define SIDE_INITIAL         4096u
#define SIDE_EMPTY           ((uintptr_t)0)
#define SIDE_TOMB            ((uintptr_t)1)
#define SLOT_STICKY          255u
#define BINOMIAL_EXACT_LIMIT 1000.0

_Static_assert(CTS__TRACER_NO_ID == ID_MASK, "object ids fill the low ID_BITS bits");
_Static_assert(REC_ALLOC_WORDS + MAX_FRAMES_LIMIT + CTS__OWN_FRAMES <= RING_WORDS / 4u,
               "a record fits a ring");

CTS__TLS cts__thread_t cts__thread;
/* This thread is forking the writer process: the fork handlers stand aside. Per thread, so
 * that a fork the program makes meanwhile on another thread is handled as any other. */
static CTS__TLS bool spawning_writer;
atomic_int cts__tracer_active;
_Atomic uint8_t cts__sampled_slots[CTS__SLOT_COUNT];

typedef struct side_entry {
  uintptr_t addr;
  uint64_t id; /* full id */
} side_entry_t;

/* A thread's records, in publication order: single producer (the owning thread), single
 * consumer (the writer thread). Records never wrap: one that does not fit before the end
 * of the ring is preceded by a REC_PAD record. Counters are written by the owner only
 * (relaxed load and store, no locked instruction) and summed by cts_tracer_get_stats(). */
typedef struct cts__ring {
  _Alignas(64) _Atomic uint64_t head; /* words published (owner) */
  uint64_t tail_seen;                 /* the owner's last reading of `tail` */
  uint64_t wake_check;                /* the owner looks at `tail` again past this head */
  _Atomic uint64_t samples, collects, waits, dropped;
  _Atomic uint64_t lost_allocs, lost_collects, lost_words, lost_samples;
  _Alignas(64) _Atomic uint64_t tail; /* words consumed (writer thread) */
  _Atomic bool wake_sent;             /* the owner woke the writer thread; it clears this */
  _Alignas(64) _Atomic int owned;     /* a live thread writes into it */
  struct cts__ring *next;             /* set before the ring is published, then fixed */
  uint64_t *words;
  cts__bottom_t *bottom; /* the owner's outer-frame cache (unwind.c), content-checked */
} ring_t;

/* Drop mode: what was lost (tracer.h, "Drop mode"). */
typedef struct loss {
  uint64_t allocs, collects, words, samples;
} loss_t;

/* A loss marker the writer thread writes at its object id. */
typedef struct marker {
  bool present;
  loss_t loss;
  uint64_t id, time;
} marker_t;

/* What the program's threads and the writer share. With a writer process (tracer.h,
 * "The writer process") it lives at the start of a shared mapping made before the fork, at
 * the same address in both processes, so the ring pointers in it hold in both; its mutex
 * is then process-shared and robust (either side may die holding it). Otherwise it is
 * T.local_control. */
typedef struct control {
  pthread_mutex_t lock; /* the writer's wake-ups and waits for it */
  /* Futex words, not condition variables: a process killed while waiting on a
   * process-shared condition variable leaves it blocking every later signal for ever. A
   * waiter reads the word under `lock` and sleeps while it is unchanged; a waker changes
   * it (under `lock`, after the state) and wakes. */
  _Atomic uint32_t writer_wake;
  _Atomic uint32_t progress; /* ring space freed, flush done, error, writer exited */

  /* Lock-free, shared by the sampling threads. */
  _Alignas(64) _Atomic uint64_t next_id; /* the next full id */
  _Alignas(64) _Atomic(ring_t *) rings;  /* every ring ever made, newest first */
  atomic_uint waiters;                   /* threads waiting for ring space */
  atomic_uint_fast64_t unrecorded;       /* samples with no ring (no memory for one) */
  _Atomic size_t ring_slots_used;        /* rings carved from the shared mapping */
  atomic_bool stopping;                  /* read by the writer while it waits on a socket */
  atomic_bool failed;                    /* the writer stopped on a sink error */
  atomic_bool stalled;                   /* ... because the peer took nothing (stall_timeout_ms) */
  atomic_bool exec_pending;      /* the program has flushed to exec (cts__tracer_exec_pending) */
  atomic_bool stall_reported;    /* the log line about it was written */
  _Atomic uint64_t module_epoch; /* bumped by each flush (the symbolizer looks) */
  _Atomic int writer_pid;        /* the writer process, once forked */
  /* The writer looks at the rings again within POLL_MS: no thread needs to wake it. */
  _Alignas(64) atomic_bool writer_polling;

  /* Under `lock`. */
  _Alignas(64) bool wake_requested;
  bool thread_running;
  bool stop_requested;
  uint64_t flush_requested, flush_done;
  uint64_t end_time;        /* event_time() when the session was stopped or the program seen gone */
  cts_tracer_stats_t stats; /* what the writer counts; the rings count the rest */
  uint64_t gave_up;         /* ids whose record never came (STALL_GIVE_UP_MS) */
} control_t;

static struct {
  pthread_mutex_t control;   /* serialises start/stop */
  pthread_mutex_t side_lock; /* the side table (the linked API's blocks) */
  pthread_once_t once;
  pthread_key_t ring_key; /* hands a thread's ring back when the thread exits */
  bool ring_key_ok;
  bool ready;
  control_t *ctl; /* &local_control, or the shared mapping's (writer process) */
  control_t local_control;

  /* The writer process's shared mapping: the control block, then ring slots. Made at the
   * first session with a writer process, kept for the life of this process image. */
  unsigned char *shared;
  size_t shared_size;
  int writer_pidfd;   /* the writer process (pidfd), or -1 */
  int owner_fd;       /* the program: write end of a pipe the writer process watches */
  int owner_watch_fd; /* in the writer process (only): the read end; a hang-up says the
                       * program is gone */
  pid_t traced_pid;   /* the writer process: the program it writes for */

  /* Session: fixed while active. */
  bool session_running;
  bool service_running;  /* a TCP_LISTEN service is started (service.c) */
  bool service_stopping; /* cts_tracer_stop() is joining the service thread */
  bool writer_process;   /* this session's writer is a process */
  unsigned session;      /* the running (or last) session's number, as in cts__tracer_active */
  uint64_t session_bits; /* its low CTS__TRACER_SESSION_BITS: the top of its full ids */
  cts_tracer_config_t cfg;
  cts_tracer_unwind_t unwind;
  double rate;
  bool every_word;     /* rate 1 */
  double inv_log_miss; /* 1 / log(1 − λ): geometric gaps between sampled words */
  double inv_log_hit;  /* 1 / log(λ): gaps between unsampled words, when λ > 1/2 */
  cts_clock_us_cb clock;
  void *clock_user_data;
  /* The default clock on a usable time-stamp counter: events store raw counts (one rdtsc
   * on the sampling path) and the writer thread converts them (writer_time). */
  bool tsc_mode;
  atomic_uint_fast64_t thread_seeds;
  cts_tracer_stats_t base; /* the rings' counts when the session started */

  /* Under `side_lock`. */
  side_entry_t *side;
  size_t side_cap, side_count, side_tombs;

  /* Writer side. */
  pthread_t thread;
  void *writer_mem;
  size_t writer_mem_size;
  cts_mt_writer_t *writer;
  uint64_t emitted;                  /* object ids written: the next alloc written has this id */
  marker_t pending;                  /* a loss marker waiting for its id's turn */
  loss_t lost_taken;                 /* the rings' losses already in markers */
  uint64_t frames[MAX_FRAMES_LIMIT]; /* write_alloc's outermost-first copy */
  cts_tracer_sink_t sink;
  int fd;
  bool own_fd;
  bool socket_sink;    /* fd is a non-blocking socket of ours */
  cts__zsink_t *zsink; /* compress_level: the zstd stage in front of the sink, else NULL */
  bool owner_gone;     /* the writer process: the program exited or exec'd */
  cts__symbolizer_t *symbolizer;
  uint64_t bytes_written;
  char path[4096];
  char exe[4096];
  char host[256];
  char context[4096];
  char marker_name[160];            /* the last loss marker's function name (writer thread) */
  cts_tsc_clock_t tsc;              /* tsc_mode: the calibration (writer thread) */
  bool tsc_ok;                      /* tsc_mode: calibrated */
  bool tsc_tried;                   /* tsc_mode: calibrate_tsc() ran this session */
  bool writer_ending;               /* the writer drains for the last time: no later events */
  uint64_t tsc_start, tsc_start_ns; /* tsc_mode: counter and CLOCK_MONOTONIC at the start */
  int64_t real_minus_mono;          /* tsc_mode: CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
  uint64_t writer_time;             /* the last event time written, µs */
} T = {
    .control = PTHREAD_MUTEX_INITIALIZER,
    .side_lock = PTHREAD_MUTEX_INITIALIZER,
    .once = PTHREAD_ONCE_INIT,
    .ctl = &T.local_control,
    .local_control = {.lock = PTHREAD_MUTEX_INITIALIZER},
    .writer_pidfd = -1,
    .owner_fd = -1,
    .owner_watch_fd = -1,
    .fd = -1,
};

/* ---- small helpers ------------------------------------------------------------------ */

static void *map_pages(size_t size) {
  void *const p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static uint64_t wall_clock_us(void *user_data) {
  (void)user_data;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void copy_string(char *dst, size_t size, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n >= size) n = size - 1;
  if (n) memcpy(dst, src, n);
  dst[n] = '\0';
}

/* ---- sampling ------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
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

/* Geometric ≥ 1: trials up to and including the first success, for a success probability
 * p given as inv_log = 1 / log(1 − p) (−0.0 when p = 1). */
static uint64_t draw_gap(cts__thread_t *t, double inv_log) {
  if (inv_log == 0.0) return 1;
  const double g = log(rng_unit(t)) * inv_log;
  if (!(g < 4e18)) return (uint64_t)4e18;
  return (uint64_t)g + 1u;
}

static double draw_normal(cts__thread_t *t) {
  const double u1 = rng_unit(t), u2 = rng_unit(t);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Binomial(m, λ): exact by jumping from success to success (or failure to failure when
 * λ > 1/2) while that takes at most ~1000 steps, a normal approximation beyond. */
static uint64_t draw_binomial(cts__thread_t *t, uint64_t m) {
  const double lambda = T.rate;
  if (m == 0) return 0;
  if (lambda >= 1.0) return m;
  const double mean = (double)m * lambda, q = 1.0 - lambda;
  if (lambda <= 0.5 && mean <= BINOMIAL_EXACT_LIMIT) {
    uint64_t k = 0;
    for (uint64_t pos = draw_gap(t, T.inv_log_miss); pos <= m; pos += draw_gap(t, T.inv_log_miss))
      k++;
    return k;
  }
  if (lambda > 0.5 && (double)m * q <= BINOMIAL_EXACT_LIMIT) {
    uint64_t misses = 0;
    for (uint64_t pos = draw_gap(t, T.inv_log_hit); pos <= m; pos += draw_gap(t, T.inv_log_hit))
      misses++;
    return m - misses;
  }
  const double k = floor(mean + sqrt(mean * q) * draw_normal(t) + 0.5);
  if (k <= 0.0) return 0;
  if (k >= (double)m) return m;
  return (uint64_t)k;
}

static void seed_thread(cts__thread_t *t, uint32_t session) {
  const uint64_t n = atomic_fetch_add(&T.thread_seeds, 1);
  uint64_t s = T.cfg.seed ? splitmix64(T.cfg.seed + n)
                          : splitmix64(wall_clock_us(NULL) ^ (uintptr_t)t ^ (n << 32));
  t->rng = s ? s : 1;
  t->session = session;
  t->words_left = draw_gap(t, T.inv_log_miss);
}

/* ---- backtraces ------------------------------------------------------------------------ */

/* Captures the backtrace into out (room for max + CTS__OWN_FRAMES entries), innermost
 * first (the allocation site first), and returns the number of frames (unwind.c). */
static CTS_FORCE_INLINE size_t capture_backtrace(cts__thread_t *t, void *frame, uint64_t *out,
                                                 size_t max, cts__bottom_t *bottom) {
  const uintptr_t fp = (uintptr_t)frame;
  switch (T.unwind) {
    case CTS_TRACER_UNWIND_NONE:
      return 0;
    case CTS_TRACER_UNWIND_MIXED:
      return cts__unwind_mixed(t, fp, out, max, bottom);
#ifdef CTS_HAVE_LIBUNWIND
    case CTS_TRACER_UNWIND_LIBUNWIND: {
      const size_t n = cts__unwind_libunwind(fp, out, max);
      if (n) return n;
      break; /* the hook's frame was not found: fall back to the frame pointers */
    }
#endif
    default:
      break;
  }
  return cts__unwind_fp(t, fp, out, max);
}

/* ---- sampled-block side table (under T.side_lock) --------------------------------------- */

static size_t side_index(uintptr_t addr, size_t cap) {
  return (size_t)(((uint64_t)(addr >> 4) * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static bool side_rehash(size_t cap) {
  side_entry_t *const fresh = map_pages(cap * sizeof *fresh);
  if (!fresh) return false;
  for (size_t i = 0; i < T.side_cap; i++) {
    const uintptr_t a = T.side[i].addr;
    if (a == SIDE_EMPTY || a == SIDE_TOMB) continue;
    size_t j = side_index(a, cap);
    while (fresh[j].addr != SIDE_EMPTY) j = (j + 1) & (cap - 1);
    fresh[j] = T.side[i];
  }
  if (T.side) munmap(T.side, T.side_cap * sizeof *T.side);
  T.side = fresh;
  T.side_cap = cap;
  T.side_tombs = 0;
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

/* Remembers that `addr` is sampled object `id`. False only if memory for the table ran out
 * (the block's free then goes unrecorded). */
static bool side_insert(uintptr_t addr, uint64_t id) {
  if ((T.side_count + T.side_tombs + 1) * 2 > T.side_cap) {
    const size_t cap = (T.side_count + 1) * 4 > T.side_cap ? T.side_cap * 2 : T.side_cap;
    if (!side_rehash(cap)) return false;
  }
  size_t i = side_index(addr, T.side_cap), tomb = SIZE_MAX;
  for (;; i = (i + 1) & (T.side_cap - 1)) {
    const uintptr_t a = T.side[i].addr;
    if (a == addr) { /* its free was never seen: the old object just gets no collect */
      T.side[i].id = id;
      return true;
    }
    if (a == SIDE_TOMB && tomb == SIZE_MAX) tomb = i;
    if (a == SIDE_EMPTY) break;
  }
  if (tomb != SIZE_MAX) {
    i = tomb;
    T.side_tombs--;
  }
  T.side[i].addr = addr;
  T.side[i].id = id;
  T.side_count++;
  slot_add(addr);
  return true;
}

static bool side_remove(uintptr_t addr, uint64_t *id) {
  if (!T.side_count) return false;
  for (size_t i = side_index(addr, T.side_cap);; i = (i + 1) & (T.side_cap - 1)) {
    const uintptr_t a = T.side[i].addr;
    if (a == SIDE_EMPTY) return false;
    if (a == addr) {
      *id = T.side[i].id;
      T.side[i].addr = SIDE_TOMB;
      T.side_count--;
      T.side_tombs++;
      slot_remove(addr);
      return true;
    }
  }
}

/* ---- the control block's lock and waits ----------------------------------------------------- */

/* The control block is this process's own (not shared with a writer process). Around a
 * fork only such a block is locked: a shared one is left to the writer process, and a
 * child gets a fresh block (atfork_child). */
static bool ctl_is_local(void) {
  return T.ctl == &T.local_control;
}

/* A robust mutex whose owner died (the writer process or the program, killed) is handed
 * over with EOWNERDEAD: the fields under it are plain flags and counters, still usable. */
static void ctl_lock(void) {
  if (pthread_mutex_lock(&T.ctl->lock) == EOWNERDEAD) pthread_mutex_consistent(&T.ctl->lock);
}

static void ctl_unlock(void) {
  pthread_mutex_unlock(&T.ctl->lock);
}

static int futex_flags(void) {
  return ctl_is_local() ? FUTEX_PRIVATE_FLAG : 0;
}

/* Wakes one waiter on `word` (or all). Lock held. */
static void ctl_wake(_Atomic uint32_t *word, bool all) {
  atomic_fetch_add(word, 1);
  syscall(SYS_futex, word, FUTEX_WAKE | futex_flags(), all ? INT_MAX : 1, NULL, NULL, 0);
}

/* Waits (lock held; released meanwhile) until `word` is changed or it is `deadline`
 * (CLOCK_MONOTONIC; NULL: none): 0, or ETIMEDOUT. */
static int ctl_timedwait(_Atomic uint32_t *word, const struct timespec *deadline) {
  const uint32_t seen = atomic_load(word);
  ctl_unlock();
  /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time. */
  const long r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | futex_flags(), seen, deadline, NULL,
                         FUTEX_BITSET_MATCH_ANY);
  const int e = r == 0 ? 0 : errno;
  ctl_lock();
  return e == ETIMEDOUT ? ETIMEDOUT : 0;
}

static struct timespec deadline_in_ms(uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000u);
  ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static bool before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Whether this session's writer process has exited (killed: it could not say so). */
static bool writer_process_gone(void) {
  if (T.writer_pidfd >= 0) {
    struct pollfd p = {.fd = T.writer_pidfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
  }
  const pid_t pid = (pid_t)atomic_load(&T.ctl->writer_pid);
  return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* Waits (lock held) for `progress` until `deadline` (NULL: none); ETIMEDOUT once past it.
 * With a writer process, 100 ms at a time, looking in between whether it still exists: one
 * that was killed counts as exited, so that no thread waits for it for ever. */
static int wait_progress(const struct timespec *deadline) {
  if (!T.writer_process) return ctl_timedwait(&T.ctl->progress, deadline);
  struct timespec step = deadline_in_ms(WRITER_CHECK_MS);
  const bool last = deadline && before(deadline, &step);
  const int r = ctl_timedwait(&T.ctl->progress, last ? deadline : &step);
  if (r != ETIMEDOUT) return r;
  if (T.ctl->thread_running && writer_process_gone()) {
    atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed); /* nobody takes records */
    cts__tracer_log(&T.sink,
                    "the writer process (pid %d) is gone: tracing stopped, the program runs on",
                    (int)atomic_load(&T.ctl->writer_pid));
    T.ctl->thread_running = false;
    if (!T.ctl->stats.error) T.ctl->stats.error = -ESRCH;
    atomic_store(&T.ctl->failed, true);
    ctl_wake(&T.ctl->progress, true);
  }
  return last ? ETIMEDOUT : 0;
}

/* ---- the rings (lock-free; each thread writes its own) ------------------------------------ */

static bool sampling_on(void) {
  return atomic_load_explicit(&cts__tracer_active, memory_order_relaxed) != 0;
}

/* Owner-only counter update: no locked instruction on the sampling path. */
static void bump(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* The ring key's destructor: the thread exits, its ring (and what it still holds for the
 * writer thread) goes to the next thread that needs one. */
static void ring_release(void *p) {
  ring_t *const r = p;
  if (cts__thread.ring == r) cts__thread.ring = NULL;
  atomic_store_explicit(&r->owned, 0, memory_order_release);
}

/* The owner reads `tail` (the writer thread's: a cache miss) and looks at it again once the
 * ring is half full from there. */
static void ring_read_tail(ring_t *r) {
  r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
  r->wake_check = r->tail_seen + RING_WORDS / 2u;
}

/* A ring's memory: its header, then the owner's outer-frame cache, then its words, each
 * on its own cache lines; the whole in pages. */
static size_t ring_cache_offset(void) {
  return (sizeof(ring_t) + 63u) & ~(size_t)63u;
}

static size_t ring_words_offset(void) {
  return ring_cache_offset() + ((cts__bottom_size + 63u) & ~(size_t)63u);
}

static size_t ring_size(void) {
  return (ring_words_offset() + RING_WORDS * sizeof(uint64_t) + 4095u) & ~(size_t)4095u;
}

/* Memory for a new ring, zero-filled: a slot of the shared mapping once there is one (the
 * writer process must see every ring; past RING_SLOTS rings, none), else its own pages. */
static unsigned char *ring_memory(void) {
  if (!T.shared) return map_pages(ring_size());
  const size_t slot = atomic_fetch_add(&T.ctl->ring_slots_used, 1);
  if (slot >= RING_SLOTS) return NULL;
  return T.shared + SHARED_HEADER + slot * ring_size();
}

/* This thread's first record: a ring left by an exited thread, else a new one. NULL if
 * there is no memory for one. Guard raised (pthread_setspecific may allocate). */
static CTS_NOINLINE ring_t *ring_claim(cts__thread_t *t) {
  ring_t *r = atomic_load_explicit(&T.ctl->rings, memory_order_acquire);
  for (; r; r = r->next) {
    int unowned = 0;
    if (atomic_load_explicit(&r->owned, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong(&r->owned, &unowned, 1))
      break;
  }
  if (!r) {
    unsigned char *const mem = ring_memory();
    if (!mem) return NULL;
    r = (ring_t *)mem; /* mapped zero-filled: all counters 0, the cache empty */
    r->bottom = (cts__bottom_t *)(mem + ring_cache_offset());
    r->words = (uint64_t *)(mem + ring_words_offset());
    atomic_init(&r->owned, 1);
    ring_t *old = atomic_load_explicit(&T.ctl->rings, memory_order_relaxed);
    do r->next = old;
    while (!atomic_compare_exchange_weak_explicit(&T.ctl->rings, &old, r, memory_order_release,
                                                  memory_order_relaxed));
  }
  ring_read_tail(r);
  if (T.ring_key_ok) pthread_setspecific(T.ring_key, r);
  t->ring = r;
  return r;
}

static void report_stall(void);

/* Wakes the writer thread once the ring is more than half full (once per filling). `tail`
 * and `wake_sent` are written by the writer thread: reading them costs a cache miss, and
 * while the writer drains the ring (it moves `tail` once per pass) every record would pay
 * it, so they are looked at again only after another sixteenth of the ring. */
static CTS_NOINLINE void ring_wake(ring_t *r, uint64_t head) {
  /* A writer process that stopped on a sink error cannot end sampling itself. */
  if (CTS_UNLIKELY(atomic_load_explicit(&T.ctl->failed, memory_order_relaxed))) {
    atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
    report_stall();
  }
  ring_read_tail(r);
  if (head - r->tail_seen <= RING_WORDS / 2u) return;
  r->wake_check = head + RING_WORDS / 16u;
  /* A writer that polls needs no futex wake: while a program allocates steadily, none is
   * made. The fence pairs with the writer's (writer_rest): either it sees this head, or
   * this thread sees it resting. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&T.ctl->writer_polling, memory_order_relaxed)) return;
  if (atomic_exchange_explicit(&r->wake_sent, true, memory_order_relaxed)) return;
  ctl_lock();
  T.ctl->wake_requested = true;
  ctl_wake(&T.ctl->writer_wake, false);
  ctl_unlock();
}

/* Waits until the ring, once written up to `end`, is at most `limit` words full (false:
 * sampling stopped, or drop mode). The writer thread broadcasts `progress` after moving
 * a tail when `waiters` is non-zero; the sequentially consistent waiters/tail accesses on
 * both sides make sure one of them sees the other. */
static CTS_NOINLINE bool ring_wait(ring_t *r, uint64_t end, size_t limit) {
  for (;;) {
    r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (end - r->tail_seen <= limit) return true;
    if (!sampling_on()) return false;
    if (T.cfg.drop_when_full) {
      ring_wake(r, end);
      return false;
    }
    ctl_lock();
    const bool running = T.ctl->thread_running;
    if (running) {
      atomic_fetch_add(&T.ctl->waiters, 1);
      T.ctl->wake_requested = true;
      if (!atomic_load(&T.ctl->writer_polling)) ctl_wake(&T.ctl->writer_wake, false);
      bump(&r->waits, 1);
      /* Until the ring is half empty, not until one record fits: one wait per half ring
       * however slow the writer is, not one per record (drain wakes waiters only then). */
      while (sampling_on() && T.ctl->thread_running && end - atomic_load(&r->tail) > limit / 2u)
        wait_progress(NULL);
      atomic_fetch_sub(&T.ctl->waiters, 1);
    }
    ctl_unlock();
    if (!running) return false;
  }
}

/* Room for an `n`-word record in ring r filled to at most `limit` words: where it goes, or
 * NULL. *skip gets the words of the REC_PAD record written before it, if it had to go to
 * the start of the ring. */
static CTS_FORCE_INLINE uint64_t *ring_reserve(ring_t *r, size_t n, size_t limit, size_t *skip) {
  const uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  const size_t off = (size_t)head & RING_MASK;
  const size_t pad = off + n > RING_WORDS ? RING_WORDS - off : 0;
  if (CTS_UNLIKELY(head + pad + n - r->tail_seen > limit) && !ring_wait(r, head + pad + n, limit))
    return NULL;
  *skip = pad;
  if (!pad) return r->words + off;
  r->words[off] = REC_PAD | (uint64_t)pad << 8;
  return r->words;
}

/* Publishes `total` words (the record and the padding before it). */
static CTS_FORCE_INLINE void ring_publish(ring_t *r, size_t total) {
  const uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed) + total;
  atomic_store_explicit(&r->head, head, memory_order_release);
  if (CTS_UNLIKELY(head > r->wake_check)) ring_wake(r, head);
}

static CTS_FORCE_INLINE ring_t *thread_ring(cts__thread_t *t) {
  return CTS_LIKELY(t->ring != NULL) ? t->ring : ring_claim(t);
}

/* An event's time: a raw counter value in tsc_mode, else µs from the clock (writer_time
 * converts it and keeps times non-decreasing). */
static uint64_t event_time(void) {
#if CTS_HAVE_CPU_COUNTER
  if (T.tsc_mode) return cts__cpu_counter();
#endif
  return T.clock(T.clock_user_data);
}

static void side_add(const void *ptr, uint64_t full, ring_t *r) {
  pthread_mutex_lock(&T.side_lock);
  const bool ok = side_insert((uintptr_t)ptr, full);
  pthread_mutex_unlock(&T.side_lock);
  if (!ok) bump(&r->dropped, 1);
}

/* tracer_internal.h. The object id is taken after the ring has room, so that between
 * taking it and publishing the record a thread never waits: the writer thread, which
 * writes records in id order, only ever waits for ids on their way. The preload library
 * keeps the id in the block's header; the linked API's blocks (`side`) go into the side
 * table for their free to be found. */
uint64_t cts__tracer_record(const void *ptr, size_t size, uint64_t nsamples, void *frame,
                            unsigned *session, bool side) {
  cts__thread_t *const t = &cts__thread;
  const uint64_t words = ((uint64_t)size + 7u) >> 3;
  if (session) *session = 0;
  if (!sampling_on()) return CTS__TRACER_NO_ID;
  cts__guard_enter();
  ring_t *const r = thread_ring(t);
  /* Room for the longest backtrace (and libunwind's view of our own frames): the frames
   * go straight into the ring, and only what they take is published. */
  const size_t room = REC_ALLOC_WORDS + T.cfg.max_frames + CTS__OWN_FRAMES;
  size_t pad;
  uint64_t *const rec =
      r ? ring_reserve(r, room, T.cfg.drop_when_full ? RING_ALLOC_LIMIT : RING_WORDS, &pad) : NULL;
  if (CTS_UNLIKELY(!rec)) {
    if (r && T.cfg.drop_when_full && sampling_on()) {
      bump(&r->lost_allocs, 1);
      bump(&r->lost_words, words);
      bump(&r->lost_samples, nsamples);
    } else if (!r) {
      atomic_fetch_add_explicit(&T.ctl->unrecorded, 1, memory_order_relaxed);
    }
    cts__guard_leave();
    return CTS__TRACER_NO_ID;
  }
  const size_t depth =
      capture_backtrace(t, frame, rec + REC_ALLOC_WORDS, T.cfg.max_frames, r->bottom);
  rec[1] = event_time();
  const uint64_t full = atomic_fetch_add_explicit(&T.ctl->next_id, 1, memory_order_relaxed);
  rec[0] = REC_ALLOC | (uint64_t)depth << 8;
  rec[2] = full;
  rec[3] = words;
  rec[4] = nsamples;
  ring_publish(r, pad + REC_ALLOC_WORDS + depth);
  bump(&r->samples, 1);
  if (side) side_add(ptr, full, r);
  cts__guard_leave();
  if (session) *session = (unsigned)(full >> ID_BITS) & CTS__TRACER_SESSION_MASK;
  return full & ID_MASK;
}

uint64_t cts__tracer_sample_slow(size_t size) {
  const unsigned session =
      (unsigned)atomic_load_explicit(&cts__tracer_active, memory_order_acquire);
  if (!session) return 0;
  cts__thread_t *const t = &cts__thread;
  /* λ = 1: every word is a sample (the countdown is never used). */
  if (T.every_word) return t->guard ? 0 : ((uint64_t)size + 7u) >> 3;
  if (CTS_UNLIKELY(t->session != session || t->rng == 0)) seed_thread(t, session);
  const uint64_t words = ((uint64_t)size + 7u) >> 3;
  if (words < t->words_left) {
    t->words_left -= words;
    return 0;
  }
  /* The countdown's word falls in this block; the rest of the block is sampled afresh
   * (geometric gaps are memoryless), and so is the countdown after it. */
  const uint64_t nsamples = 1 + draw_binomial(t, words - t->words_left);
  t->words_left = draw_gap(t, T.inv_log_miss);
  if (t->guard) return 0; /* the tracer's own allocation */
  return nsamples;
}

void cts__tracer_alloc_slow(const void *ptr, size_t size, void *frame) {
  const uint64_t nsamples = cts__tracer_sample_slow(size);
  if (nsamples) cts__tracer_record(ptr, size, nsamples, frame, NULL, true);
}

/* Queues the collect of the object with full id `full`. Guard raised. */
static void queue_collect(uint64_t full) {
  ring_t *const r = thread_ring(&cts__thread);
  size_t pad;
  uint64_t *const rec = r ? ring_reserve(r, REC_COLLECT_WORDS, RING_WORDS, &pad) : NULL;
  if (CTS_LIKELY(rec != NULL)) {
    rec[0] = REC_COLLECT;
    rec[1] = event_time();
    rec[2] = full;
    ring_publish(r, pad + REC_COLLECT_WORDS);
    bump(&r->collects, 1);
  } else if (r && T.cfg.drop_when_full && sampling_on()) {
    bump(&r->lost_collects, 1);
  } else if (r && sampling_on()) {
    bump(&r->dropped, 1);
  }
}

void cts__tracer_free_slow(const void *ptr) {
  /* Guarded: the tracer's own frees (never of sampled blocks), or a signal handler that
   * interrupted this thread inside the tracer, which must not take the lock again. */
  if (!ptr || cts__guarded()) return;
  cts__guard_enter();
  uint64_t full;
  pthread_mutex_lock(&T.side_lock);
  const bool found = sampling_on() && side_remove((uintptr_t)ptr, &full);
  pthread_mutex_unlock(&T.side_lock);
  if (found) queue_collect(full);
  cts__guard_leave();
}

void cts__tracer_record_free(uint64_t id, unsigned session) {
  /* Guarded: a signal handler that interrupted this thread's own record. */
  if (id == CTS__TRACER_NO_ID || cts__guarded()) return;
  /* Only in the session that sampled the block: a later session's ids start again at 0. */
  const unsigned active = cts__tracer_session();
  if (!active || (active & CTS__TRACER_SESSION_MASK) != session) return;
  cts__guard_enter();
  queue_collect((uint64_t)session << ID_BITS | id);
  cts__guard_leave();
}

int cts__tracer_writer_pid(void) {
  return T.session_running && T.writer_process ? (int)atomic_load(&T.ctl->writer_pid) : 0;
}

size_t cts__tracer_ring_count(void) {
  size_t n = 0;
  for (ring_t *r = atomic_load_explicit(&T.ctl->rings, memory_order_acquire); r; r = r->next) n++;
  return n;
}

/* ---- the writer (a thread, or the writer process) -------------------------------------------- */

/* Says once per session, on the program's side, that a peer stalled the trace: a writer
 * process's stderr is /dev/null, so the program's threads say it for it (ring_wake, the
 * session's stop). */
static void report_stall(void) {
  if (!atomic_load_explicit(&T.ctl->stalled, memory_order_relaxed) ||
      atomic_exchange(&T.ctl->stall_reported, true))
    return;
  const uint32_t ms = T.cfg.stall_timeout_ms;
  cts__tracer_log(&T.sink,
                  "the trace reader took nothing for %u.%03u s: tracing stopped, the program runs "
                  "on untraced (CTFSCOPE_STALL_TIMEOUT)",
                  ms / 1000u, ms % 1000u);
}

/* Writes to our non-blocking socket, waiting for room as long as the peer takes something
 * at least every stall_timeout_ms (lossless; 0: for ever), or, in drop mode once stopping,
 * until the peer has taken nothing for DROP_GIVE_UP_MS. */
static int socket_write(const char *p, size_t len) {
  uint64_t stalled_since = 0;
  const bool drop = T.cfg.drop_when_full;
  while (len) {
    const ssize_t n = cts_net_write(T.fd, p, len);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      stalled_since = 0;
      continue;
    }
    if (n == 0) return -EPIPE;
    if (n != -EAGAIN) return (int)n;
    const uint64_t bound =
        drop ? (atomic_load_explicit(&T.ctl->stopping, memory_order_relaxed) ? DROP_GIVE_UP_MS : 0)
             : T.cfg.stall_timeout_ms;
    if (bound) {
      const uint64_t now = monotonic_ms();
      if (!stalled_since) {
        stalled_since = now;
      } else if (now - stalled_since >= bound) {
        if (!drop) {
          /* The writer fails with this error: sampling stops and waiting threads go on. */
          atomic_store(&T.ctl->stalled, true);
          if (!T.writer_process) report_stall();
        }
        return -ETIMEDOUT;
      }
    }
    cts_net_wait(T.fd, true, 100);
  }
  return 0;
}

/* Where the trace's bytes go, after the zstd stage if there is one. */
static int raw_write(void *user_data, const void *buf, size_t len) {
  (void)user_data;
  T.bytes_written += len;
  if (T.sink.kind == CTS_TRACER_SINK_CALLBACK)
    return T.sink.write(T.sink.write_user_data, buf, len);
  if (T.socket_sink) return socket_write(buf, len);
  return cts_os_fd_write((void *)(intptr_t)T.fd, buf, len);
}

/* The memtrace writer's output. */
static int sink_write(void *user_data, const void *buf, size_t len) {
  return T.zsink ? cts__zsink_write(T.zsink, buf, len) : raw_write(user_data, buf, len);
}

static bool is_marker_code(uint64_t code) {
  return (code & ~(CTS_TRACER_LOST_CODE_BASE - 1u)) == CTS_TRACER_LOST_CODE_BASE;
}

static size_t resolve_code(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)user_data;
  if (is_marker_code(code)) {
    if (max < 1) return 1;
    snprintf(T.marker_name, sizeof T.marker_name,
             CTS_TRACER_LOST_NAME_PREFIX
             "%llu sampled allocations and %llu frees (trace "
             "reader too slow)",
             (unsigned long long)CTS_TRACER_LOST_ALLOCS_OF(code),
             (unsigned long long)CTS_TRACER_LOST_FREES_OF(code));
    out[0] = (cts_mt_location_t){.line = 1,
                                 .start_char = 0,
                                 .end_char = 0,
                                 .filename = "<ctfscope>",
                                 .defname = T.marker_name};
    return 1;
  }
  if (!T.cfg.symbolize) return 0; /* (and without libdw the symbolizer resolves nothing) */
  if (!T.symbolizer) T.symbolizer = cts__symbolizer_create(T.traced_pid, &T.ctl->module_epoch);
  return T.symbolizer ? cts__symbolizer_resolve(T.symbolizer, code, out, max) : 0;
}

#if CTS_HAVE_CPU_COUNTER
/* The counter and CLOCK_MONOTONIC read together: the closest pair of 9. */
static void tsc_sample(uint64_t *counter, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 9; i++) {
    const uint64_t before = cts__cpu_counter();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t after = cts__cpu_counter();
    if (after - before < best) {
      best = after - before;
      *counter = before + (after - before) / 2u;
      *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
  }
}
#endif

/* Calibrates the time-stamp counter on the writer thread when the first event's time is
 * written, so that no allocating thread waits for it: against the pair read when the
 * session started (tsc_start), over TSC_WINDOW_NS at least. A session that has run that
 * long needs no sleep, and one without events (a short program at the default rate) no
 * calibration at all. */
static void calibrate_tsc(void) {
  T.tsc_tried = true;
#if CTS_HAVE_CPU_COUNTER
  uint64_t c1, n1;
  tsc_sample(&c1, &n1);
  /* A session that ends inside the window has no later times to place: the window it had
   * covers every time written, so its calibration is as exact as the run needs, and the
   * program (which waits for its writer at exit) is not held up by a sleep. */
  if (!T.writer_ending && n1 - T.tsc_start_ns < TSC_WINDOW_NS) {
    const uint64_t left = TSC_WINDOW_NS - (n1 - T.tsc_start_ns);
    struct timespec wait = {0, (long)left};
    while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {}
    tsc_sample(&c1, &n1);
  }
  const uint64_t c0 = T.tsc_start, n0 = T.tsc_start_ns;
  /* (n1 - n0) < 2^34 for sessions under 17 s; a longer one drops its low bits first. */
  uint64_t dn = n1 - n0, dc = c1 - c0;
  while (dn >= (UINT64_C(1) << 34)) dn >>= 1, dc >>= 1;
  const uint64_t mult = c1 > c0 && n1 > n0 && dc ? (dn << 30) / dc << 2 : 0;
  T.tsc = (cts_tsc_clock_t){.base_counter = c1, .base_ns = n1, .mult = mult};
  T.tsc_ok = mult != 0;
#endif
  /* The counter maps to CLOCK_MONOTONIC; the offset to the wall clock is read between two
   * monotonic readings, the closest pair of 8 (a preemption between them would skew it). */
  int64_t best = INT64_MAX;
  for (int i = 0; i < 8; i++) {
    struct timespec m1, real, m2;
    clock_gettime(CLOCK_MONOTONIC, &m1);
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &m2);
    const int64_t a = (int64_t)m1.tv_sec * 1000000000 + m1.tv_nsec;
    const int64_t b = (int64_t)m2.tv_sec * 1000000000 + m2.tv_nsec;
    if (b - a < best) {
      best = b - a;
      T.real_minus_mono = ((int64_t)real.tv_sec * 1000000000 + real.tv_nsec) - a - (b - a) / 2;
    }
  }
}

/* An event's time in µs from what event_time() stored, never below the previous one
 * written (counters read on different CPUs may be a few cycles apart). */
static uint64_t writer_time(uint64_t raw) {
  uint64_t us = raw;
#if CTS_HAVE_CPU_COUNTER
  if (T.tsc_mode && !T.tsc_tried) calibrate_tsc();
  if (T.tsc_mode)
    us = T.tsc_ok ? (uint64_t)((int64_t)cts__tsc_to_ns(&T.tsc, raw) + T.real_minus_mono) / 1000u
                  : T.writer_time; /* not calibrated: no better time than the last */
#endif
  if (us < T.writer_time) us = T.writer_time;
  T.writer_time = us;
  return us;
}

/* A loss marker: one alloc of the lost words and samples at a code that counts the lost
 * events, collected at once (tracer.h, "Drop mode"). Takes the object id T.emitted. */
static int write_marker(const loss_t *loss, uint64_t raw_time) {
  const uint64_t allocs = loss->allocs < 0x7FFFFFFFu ? loss->allocs : 0x7FFFFFFFu;
  const uint64_t frees = loss->collects < 0x3FFFFFFFu ? loss->collects : 0x3FFFFFFFu;
  const uint64_t code = CTS_TRACER_LOST_CODE_BASE | allocs << 30 | frees;
  uint64_t id;
  const uint64_t time = writer_time(raw_time);
  int e = cts_mt_writer_alloc(T.writer, time, loss->words, loss->samples, CTS_MT_SOURCE_MAJOR,
                              &code, 1, &id);
  if (!e) e = cts_mt_writer_collect(T.writer, time, T.emitted);
  T.emitted++;
  T.ctl->stats.loss_markers++;
  return e;
}

/* The pending loss marker, if its id is next. */
static int marker_if_due(bool *progress) {
  if (!T.pending.present || (T.pending.id & ID_MASK) != T.emitted) return 0;
  T.pending.present = false;
  *progress = true;
  return write_marker(&T.pending.loss, T.pending.time);
}

/* What the rings lost so far (drop mode). */
static loss_t ring_losses(void) {
  loss_t l = {0};
  for (ring_t *r = atomic_load_explicit(&T.ctl->rings, memory_order_acquire); r; r = r->next) {
    l.allocs += atomic_load_explicit(&r->lost_allocs, memory_order_relaxed);
    l.collects += atomic_load_explicit(&r->lost_collects, memory_order_relaxed);
    l.words += atomic_load_explicit(&r->lost_words, memory_order_relaxed);
    l.samples += atomic_load_explicit(&r->lost_samples, memory_order_relaxed);
  }
  return l;
}

/* The rings' counters, summed (cts_tracer_get_stats subtracts the session's start). */
static void ring_counts(cts_tracer_stats_t *s) {
  memset(s, 0, sizeof *s);
  for (ring_t *r = atomic_load_explicit(&T.ctl->rings, memory_order_acquire); r; r = r->next) {
    s->samples += atomic_load_explicit(&r->samples, memory_order_relaxed);
    s->collects += atomic_load_explicit(&r->collects, memory_order_relaxed);
    s->waits += atomic_load_explicit(&r->waits, memory_order_relaxed);
    s->dropped += atomic_load_explicit(&r->dropped, memory_order_relaxed);
    s->lost_allocs += atomic_load_explicit(&r->lost_allocs, memory_order_relaxed);
    s->lost_samples += atomic_load_explicit(&r->lost_samples, memory_order_relaxed);
    s->lost_collects += atomic_load_explicit(&r->lost_collects, memory_order_relaxed);
  }
  s->dropped += atomic_load_explicit(&T.ctl->unrecorded, memory_order_relaxed);
}

/* Turns the losses since the last marker into a pending marker, with a fresh object id
 * and the current time. */
static void take_losses(void) {
  if (T.pending.present) return;
  const loss_t now = ring_losses();
  const loss_t d = {now.allocs - T.lost_taken.allocs, now.collects - T.lost_taken.collects,
                    now.words - T.lost_taken.words, now.samples - T.lost_taken.samples};
  if (!d.allocs && !d.collects) return;
  T.lost_taken = now;
  T.pending.loss = d;
  T.pending.time = event_time();
  T.pending.id = atomic_fetch_add(&T.ctl->next_id, 1);
  T.pending.present = true;
}

/* An alloc record: its frames are innermost first in the ring (so that the sampling
 * thread walks the stack straight into it); memtrace wants them outermost first. */
static int write_alloc(const uint64_t *rec, size_t depth) {
  const uint64_t *const frames = rec + REC_ALLOC_WORDS;
  for (size_t i = 0; i < depth; i++) T.frames[i] = frames[depth - 1 - i];
  uint64_t id;
  const int e = cts_mt_writer_alloc(T.writer, writer_time(rec[1]), rec[3], rec[4],
                                    CTS_MT_SOURCE_MAJOR, T.frames, depth, &id);
  T.emitted++;
  return e;
}

/* Ids taken in this session that are not written yet. */
static bool ids_outstanding(void) {
  const uint64_t next = atomic_load(&T.ctl->next_id);
  return (next >> ID_BITS) == T.session_bits && (next & ID_MASK) > T.emitted;
}

/* Writes every record that can be written: allocations in object-id order, each collect
 * once its allocation is written. Ids grow along each ring and a collect follows its
 * allocation's publication, so the head record of some ring can always go unless the next
 * id is still on its way (*blocked then says that records wait). Records of another session
 * (published by a thread after its session ended) and of ids given up are skipped. */
/* Whether some ring holds records the writer has not taken. */
static bool rings_pending(void) {
  for (ring_t *r = atomic_load_explicit(&T.ctl->rings, memory_order_acquire); r; r = r->next)
    if (atomic_load_explicit(&r->head, memory_order_acquire) !=
        atomic_load_explicit(&r->tail, memory_order_relaxed))
      return true;
  return false;
}

/* The writer's choice before it waits: poll again within POLL_MS while the program writes
 * records (`busy`), or rest until a thread wakes it (a ring half full), a flush or a stop.
 * Resting, it says so first and then looks at the rings once more (the fence pairs with
 * ring_wake's): a record published meanwhile is seen here, or its thread sees the writer
 * resting and wakes it. Whether to poll. */
static bool writer_poll(bool busy) {
  if (busy) {
    atomic_store_explicit(&T.ctl->writer_polling, true, memory_order_relaxed);
    return true;
  }
  atomic_store_explicit(&T.ctl->writer_polling, false, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  return rings_pending();
}

static int drain(size_t min_pass, bool *progress_out, bool *blocked_out) {
  int err = 0;
  bool any = false, blocked = false;
  ring_t *const rings = atomic_load_explicit(&T.ctl->rings, memory_order_acquire);
  for (bool progress = true; progress;) {
    progress = false;
    blocked = false;
    bool space = false;
    uint64_t taken = 0;
    int e = marker_if_due(&progress);
    if (e && !err) err = e;
    for (ring_t *r = rings; r; r = r->next) {
      const uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
      const uint64_t start = atomic_load_explicit(&r->tail, memory_order_relaxed);
      uint64_t tail = start;
      while (tail != head) {
        const uint64_t *const rec = r->words + (tail & RING_MASK);
        const unsigned kind = (unsigned)(rec[0] & 0xFFu);
        if (kind == REC_PAD) {
          tail += rec[0] >> 8;
          continue;
        }
        const size_t depth = kind == REC_ALLOC ? (size_t)(rec[0] >> 8) : 0;
        const uint64_t full = rec[2], id = full & ID_MASK;
        if ((full >> ID_BITS) == T.session_bits) {
          if (kind == REC_ALLOC) {
            if (id > T.emitted) break;
            if (id == T.emitted) {
              e = write_alloc(rec, depth);
              if (e && !err) err = e;
              e = marker_if_due(&progress);
              if (e && !err) err = e;
            }
          } else {
            if (id >= T.emitted) break;
            e = cts_mt_writer_collect(T.writer, writer_time(rec[1]), id);
            if (e && !err) err = e;
          }
        }
        tail += kind == REC_ALLOC ? REC_ALLOC_WORDS + depth : REC_COLLECT_WORDS;
      }
      if (tail != start) {
        taken += tail - start;
        atomic_store(&r->tail, tail); /* seq_cst: see ring_wait */
        atomic_store_explicit(&r->wake_sent, false, memory_order_relaxed);
        progress = any = true;
        /* A waiter wants its ring at most half full (its record, unpublished, lies beyond
         * `head`): only then is it worth a wake-up. */
        if (head - tail <= RING_WORDS / 2u) space = true;
      }
      if (tail != head) blocked = true;
    }
    if (space && atomic_load(&T.ctl->waiters)) {
      ctl_lock();
      ctl_wake(&T.ctl->progress, true);
      ctl_unlock();
    }
    if (taken < min_pass) break;
  }
  *progress_out = any;
  *blocked_out = blocked;
  return err;
}

/* An id taken STALL_GIVE_UP_MS ago whose record never came: a loss marker takes its place,
 * so that the ids after it can be written. (Should the record come after all, it is
 * skipped as stale.) */
static int give_up_id(void) {
  T.ctl->gave_up++;
  const loss_t one = {1, 0, 0, 0};
  return write_marker(&one, event_time());
}

/* The writer process: whether the program's end of the watch pipe is closed (it exited,
 * was killed or exec'd; its forked children close their copies). */
static bool owner_is_gone(void) {
  struct pollfd p = {.fd = T.owner_watch_fd, .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

static void *writer_main(void *arg) {
  (void)arg;
  cts__guard_enter(); /* for life: nothing this thread allocates is traced */
  /* No one-off work here: the counter is calibrated at the first event's time
   * (writer_time), the symbolizer made at the first code (resolve_code), each module's
   * debug information read when a code first lies in it. */
  const uint64_t interval = T.cfg.flush_interval_ms ? T.cfg.flush_interval_ms : 1000;
  uint64_t next_flush = monotonic_ms() + interval;
  uint64_t stalled_since = 0; /* ms; 0 = writing goes on */
  bool dirty = false, waiting = false, progress = false;
  unsigned idle_polls = POLL_IDLE_MAX + 1u; /* resting until the first records */
  for (;;) {
    ctl_lock();
    uint64_t now_ms = monotonic_ms();
    const bool asked = T.ctl->stop_requested || T.ctl->flush_requested != T.ctl->flush_done ||
                       T.ctl->wake_requested;
    /* Records waiting for an id on its way, and none written last time: look again soon
     * (also when stopping: no busy loop while the id comes). */
    const bool stalled = waiting && !progress;
    /* Records taken on the last pass, or some left: polled for a while (POLL_IDLE_MAX
     * passes that take nothing), so that a thread that fills its ring wakes nobody. */
    idle_polls = progress ? 0 : idle_polls + 1;
    const bool poll = writer_poll(idle_polls <= POLL_IDLE_MAX && (progress || rings_pending()));
    if ((!asked && now_ms < next_flush) || stalled) {
      uint64_t until = stalled || (waiting && now_ms + STALL_RETRY_MS < next_flush)
                           ? now_ms + STALL_RETRY_MS
                       : poll && now_ms + POLL_MS < next_flush ? now_ms + POLL_MS
                                                               : next_flush;
      /* A writer process looks at the program's pipe this often: the trace's end time is
       * when it sees the program gone (killed, exec'd), so no later than this after. Right
       * before an exec it looks every EXEC_CHECK_MS: `record` and the exec'd image's
       * summary wait for this trace to be finished. */
      const uint64_t owner_check = atomic_load_explicit(&T.ctl->exec_pending, memory_order_relaxed)
                                       ? EXEC_CHECK_MS
                                       : OWNER_CHECK_MS;
      if (T.owner_watch_fd >= 0 && until > now_ms + owner_check) until = now_ms + owner_check;
      const struct timespec ts = deadline_in_ms(until - now_ms);
      ctl_timedwait(&T.ctl->writer_wake, &ts);
    }
    const bool stop_requested = T.ctl->stop_requested;
    const uint64_t flush_target = T.ctl->flush_requested;
    const bool flush_wanted = flush_target != T.ctl->flush_done;
    T.ctl->wake_requested = false;
    ctl_unlock();
    /* A writer process also stops when the program has exited or exec'd (killed, or
     * _exit without stopping): what its rings hold is all there will be. */
    if (T.owner_watch_fd >= 0 && !T.owner_gone && (T.owner_gone = owner_is_gone())) {
      ctl_lock();
      if (!T.ctl->end_time) T.ctl->end_time = event_time();
      ctl_unlock();
    }
    const bool stopping = stop_requested || T.owner_gone;
    T.writer_ending = stopping;

    now_ms = monotonic_ms();
    const bool timed = now_ms >= next_flush;
    bool blocked;
    /* Unless a flush, a stop or the timer asks for everything, a pass that finds little
     * ends the drain: the writer waits for the next wake-up (the rings half full) instead
     * of following the program's writes record by record, which would have the two
     * threads pass the ring's newest cache lines and its head back and forth. */
    const size_t min_pass = stopping || flush_wanted || timed ? 0 : RING_WORDS / 16u;
    int err = drain(min_pass, &progress, &blocked);
    take_losses();
    if (T.pending.present) { /* its id may be next */
      bool more, still;
      const int e = drain(min_pass, &more, &still);
      if (e && !err) err = e;
      progress |= more;
      blocked = still;
    }
    dirty |= progress;
    waiting = blocked || ids_outstanding() || T.pending.present;
    if (!waiting || progress) {
      stalled_since = 0;
    } else if (!stalled_since) {
      stalled_since = now_ms;
    } else if (now_ms - stalled_since >= STALL_GIVE_UP_MS || T.owner_gone) {
      const int e = give_up_id();
      if (e && !err) err = e;
      dirty = true;
      stalled_since = 0;
      continue;
    }
    if (dirty && (timed || flush_wanted || stopping)) {
      const int e = cts_mt_writer_flush(T.writer);
      if (e && !err) err = e;
      dirty = false;
    }
    /* The zstd stage ends a block at each flush: the sink then holds a stream decodable
     * up to here (tracer.h, "Compression"). An asked-for flush (before exec and dlclose,
     * which a writer thread may not survive) ends the frame: the file is then complete. */
    if (T.zsink && (flush_wanted || ((timed || stopping) && cts__zsink_pending(T.zsink)))) {
      const int e = flush_wanted ? cts__zsink_end(T.zsink) : cts__zsink_flush(T.zsink);
      if (e && !err) err = e;
    }
    if (timed) next_flush = monotonic_ms() + interval;

    ctl_lock();
    T.ctl->stats.bytes_written = T.bytes_written;
    if (err && !T.ctl->stats.error) {
      T.ctl->stats.error = err;
      /* The writer is closed after a sink error: stop sampling for nothing. */
      atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
      atomic_store(&T.ctl->failed, true);
    }
    if (flush_wanted) T.ctl->flush_done = flush_target;
    /* A flush done, or sampling ended on an error: whoever waits is told. Threads waiting
     * for ring space are told by drain, once their ring is half empty; waking them at
     * every pass (every POLL_MS) would cost them a system call each time. */
    if (flush_wanted || err) ctl_wake(&T.ctl->progress, true);
    const bool done = stopping && !waiting;
    ctl_unlock();
    if (done) break;
  }

  /* The last packet ends when the program did (or stopped the session), not at its last
   * sampled event: durations then cover the whole run. */
  ctl_lock();
  const uint64_t end = T.ctl->end_time ? T.ctl->end_time : event_time();
  ctl_unlock();
  int e = cts_mt_writer_close_at(T.writer, writer_time(end));
  if (T.zsink) {
    const int ze = cts__zsink_end(T.zsink);
    if (ze && (!e || e == CTS_E_CLOSED)) e = ze;
  }
  /* The writer process exits next: tearing libdw down there only frees memory, through the
   * program's allocator (jemalloc's blocks once made it fault at this point), after the
   * trace is complete but before the program is told. */
  if (T.symbolizer && T.owner_watch_fd < 0) {
    cts__symbolizer_destroy(T.symbolizer);
    T.symbolizer = NULL;
  }
  ctl_lock();
  T.ctl->stats.bytes_written = T.bytes_written;
  if (e && e != CTS_E_CLOSED && !T.ctl->stats.error) T.ctl->stats.error = e;
  T.ctl->thread_running = false;
  ctl_wake(&T.ctl->progress, true);
  ctl_unlock();
  return NULL;
}

/* ---- fork ----------------------------------------------------------------------------------- */

static void atfork_prepare(void) {
  pthread_mutex_lock(&T.side_lock);
  if (ctl_is_local()) ctl_lock();
}

static void atfork_parent(void) {
  if (ctl_is_local()) ctl_unlock();
  pthread_mutex_unlock(&T.side_lock);
}

static void init_control(control_t *c, bool shared) {
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  if (shared) {
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  }
  pthread_mutex_init(&c->lock, &ma);
  pthread_mutexattr_destroy(&ma);
}

static void forget_writer_process(void);

/* The child is not traced: it has no writer, and the trace belongs to the parent. Its
 * copies of the parent's sockets are closed, so that a peer sees the parent's trace end
 * when the parent closes them. With a writer process, the child lets go of the shared
 * mapping and of the pipe the writer process watches, and starts again from a fresh
 * control block of its own. (Forks that make the writer process change nothing.) */
static void atfork_child(void) {
  if (spawning_writer) {
    pthread_mutex_unlock(&T.side_lock);
    if (ctl_is_local()) ctl_unlock();
    return;
  }
  atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
  T.session_running = false;
  if (T.socket_sink && T.fd >= 0) close(T.fd);
  T.fd = -1;
  T.socket_sink = false;
  T.own_fd = false;          /* a file is the parent's; close-on-exec anyway */
  cts__zsink_close(T.zsink); /* a copy of the parent's compressor state */
  T.zsink = NULL;
  T.service_running = T.service_stopping = false;
  cts__service_atfork_child();
  if (!ctl_is_local()) {
    munmap(T.shared, T.shared_size);
    T.shared = NULL;
    T.ctl = &T.local_control; /* first: forget_writer_process() writes into it */
    memset(T.ctl, 0, sizeof *T.ctl);
    init_control(T.ctl, false);
    forget_writer_process();
    T.writer_process = false;
    cts__thread.ring = NULL;
    if (T.ring_key_ok) pthread_setspecific(T.ring_key, NULL);
  } else {
    T.ctl->thread_running = false;
    T.ctl->stop_requested = false;
    /* The other threads' rings have no owner here. */
    for (ring_t *r = atomic_load(&T.ctl->rings); r; r = r->next)
      atomic_store(&r->owned, r == cts__thread.ring);
    atomic_store(&T.ctl->waiters, 0);
    ctl_unlock();
  }
  pthread_mutex_unlock(&T.side_lock);
  pthread_mutex_init(&T.control, NULL);
}

static void init_once(void) {
  init_control(&T.local_control, false);
  T.ring_key_ok = pthread_key_create(&T.ring_key, ring_release) == 0;
  T.ready = pthread_atfork(atfork_prepare, atfork_parent, atfork_child) == 0;
}

/* ---- the writer process ---------------------------------------------------------------- */

_Static_assert(sizeof(control_t) <= SHARED_HEADER, "the control block fits its page");

static void close_sink(void);

/* Whether a session into `sink` can have a writer process: the sinks it can write to
 * alone (a callback, a clock callback or the service's client belong to this process). */
static bool process_writer_fits(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                                int socket_fd) {
  return cfg->writer == CTS_TRACER_WRITER_PROCESS && socket_fd < 0 && !sink->clock &&
         (sink->kind == CTS_TRACER_SINK_FILE || sink->kind == CTS_TRACER_SINK_FD ||
          sink->kind == CTS_TRACER_SINK_TCP_CONNECT);
}

/* The shared mapping, made once: the control block, then RING_SLOTS ring slots (reserved
 * address space; pages are used as rings are). Only while no ring exists: rings made
 * before would be this process's alone. False: a writer thread it is. */
static bool shared_mapping(void) {
  if (T.shared) return true;
  if (atomic_load(&T.ctl->rings)) return false;
  const size_t size = SHARED_HEADER + RING_SLOTS * ring_size();
  void *const p =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  control_t *const c = p;
  init_control(c, true);
  atomic_store(&c->unrecorded, atomic_load(&T.ctl->unrecorded));
  T.shared = p;
  T.shared_size = size;
  T.ctl = c;
  return true;
}

/* Keeps descriptors `a` and `b` (-1: none), points 0-2 at /dev/null otherwise, and closes
 * every other one: the writer process must not hold the program's pipes and sockets open. */
static void keep_only_fds(int a, int b) {
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; fd++)
    if (fd != a && fd != b && null_fd >= 0 && null_fd != fd) dup2(null_fd, fd);
  int keep[2] = {a < b ? a : b, a < b ? b : a};
  unsigned next = 3;
  for (int i = 0; i < 2; i++) {
    if (keep[i] < (int)next) continue;
    if ((unsigned)keep[i] > next) close_range(next, (unsigned)keep[i] - 1u, 0);
    next = (unsigned)keep[i] + 1u;
  }
  close_range(next, ~0u, 0);
}

/* The writer process: the writer loop, on its own, until the program stops the session or
 * is gone. It leaves the program's session and process group (a ^C for the program does
 * not cut its trace short), takes no signals, and samples nothing. */
static _Noreturn void writer_process_main(int watch_fd, pid_t program) {
  atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
  cts__guard_enter();
  spawning_writer = false;
  T.owner_watch_fd = watch_fd;
  T.traced_pid = program;
  keep_only_fds(T.fd, watch_fd);
  writer_main(NULL);
  /* The program is released; `record` still waits for the sink's lock. */
  cts__symbolizer_save(T.symbolizer);
  close_sink();
  _exit(0);
}

/* Forks the writer process, twice, so that it is nobody's child: the program never sees it
 * in wait(), and it lives on when the program dies, to finish the trace. 0, or -errno. */
static int spawn_writer_process(void) {
  int watch[2];
  if (pipe2(watch, O_CLOEXEC) != 0) return -errno;
  const pid_t program = getpid();
  atomic_store(&T.ctl->writer_pid, 0);
  spawning_writer = true;
  const pid_t middle = fork();
  if (middle == 0) {
    close(watch[1]); /* the writer process must see the program's end close */
    /* Its own session, no signals and its name before the program goes on
     * (session_start_locked does not wait for the writer): a Ctrl-C sent to the program's
     * process group at once must not reach it, and `ps` shows it as it is from the start.
     * The mask and the name are inherited; the session is the grandchild's own, and this
     * process waits for it (the pipe's end closed) before it exits. */
    prctl(PR_SET_NAME, "ctfscope-writer");
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    int led[2];
    const bool sync = pipe2(led, O_CLOEXEC) == 0;
    const pid_t pid = fork();
    if (pid == 0) {
      setsid();
      if (sync) close(led[0]), close(led[1]);
      writer_process_main(watch[0], program);
    }
    if (sync) {
      close(led[1]);
      char byte;
      while (pid > 0 && read(led[0], &byte, 1) < 0 && errno == EINTR) {}
    }
    atomic_store(&T.ctl->writer_pid, pid > 0 ? pid : -1);
    _exit(0);
  }
  const int e = middle < 0 ? -errno : 0;
  spawning_writer = false;
  if (middle > 0)
    while (waitpid(middle, NULL, 0) < 0 && errno == EINTR) {}
  close(watch[0]);
  const pid_t pid = atomic_load(&T.ctl->writer_pid);
  if (e || pid <= 0) {
    close(watch[1]);
    return e ? e : -EAGAIN;
  }
  T.owner_fd = watch[1];
  /* Without pidfds (Linux < 5.3), writer_process_gone() uses kill(pid, 0). */
  T.writer_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  return 0;
}

/* After the session: the pipe and the pidfd go. */
static void forget_writer_process(void) {
  if (T.owner_fd >= 0) close(T.owner_fd);
  if (T.writer_pidfd >= 0) close(T.writer_pidfd);
  T.owner_fd = T.writer_pidfd = -1;
  atomic_store(&T.ctl->writer_pid, 0);
}

/* ---- log lines --------------------------------------------------------------------------- */

void cts__tracer_log(const cts_tracer_sink_t *sink, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (sink->log) {
    sink->log(sink->log_user_data, line);
    return;
  }
  char out[sizeof line + 16];
  const int n = snprintf(out, sizeof out, "ctfscope: %s\n", line);
  if (n > 0 && write(STDERR_FILENO, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1) < 0) {
    /* nowhere else to say it */
  }
}

/* ---- public API -------------------------------------------------------------------------- */

void cts_tracer_config_init(cts_tracer_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->sample_rate = 1e-6;
  cfg->unwind = CTS_TRACER_UNWIND_AUTO;
  cfg->max_frames = 256;
  cfg->symbolize = true;
  cfg->flush_interval_ms = 1000;
  cfg->stall_timeout_ms = 5000;
}

void cts_tracer_sink_init(cts_tracer_sink_t *sink, cts_tracer_sink_kind_t kind) {
  memset(sink, 0, sizeof *sink);
  sink->struct_size = sizeof *sink;
  sink->kind = kind;
  sink->fd = -1;
  sink->connect_timeout_ms = CONNECT_TIMEOUT_MS;
}

/* Takes over the connected socket `fd` as the sink (closed by close_sink, or here). */
static int adopt_socket(int fd) {
  const int e = cts_net_set_nonblocking(fd, true);
  if (e) {
    close(fd);
    return e;
  }
  T.fd = fd;
  T.own_fd = true;
  T.socket_sink = true;
  return 0;
}

static int open_sink(const cts_tracer_sink_t *sink, int socket_fd) {
  T.fd = -1;
  T.own_fd = false;
  T.socket_sink = false;
  if (socket_fd >= 0) return adopt_socket(socket_fd);
  switch (sink->kind) {
    case CTS_TRACER_SINK_FILE: {
      if (!sink->path || !sink->path[0]) return CTS_E_INVAL;
      copy_string(T.path, sizeof T.path, sink->path);
      const int fd = open(T.path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      if (fd < 0) return -errno;
      /* As memtrace: refuse a file another process is tracing into, then truncate it
       * (errors ignored so that /dev/null works). */
      if (lockf(fd, F_TLOCK, 0) != 0 && errno != EINVAL) {
        const int e = -errno;
        close(fd);
        return e;
      }
      if (ftruncate(fd, 0) != 0) { /* ignored */
      }
      /* Also an flock, held while any copy of the descriptor is open, the writer
       * process's included: `ctfscope record` waits for it to go before reading the
       * trace of a program that was killed (its writer process finishes the trace). */
      if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* ignored: only a courtesy */
      }
      T.fd = fd;
      T.own_fd = true;
      return 0;
    }
    case CTS_TRACER_SINK_FD:
      if (sink->fd < 0) return CTS_E_INVAL;
      T.fd = sink->fd;
      return 0;
    case CTS_TRACER_SINK_CALLBACK:
      return sink->write ? 0 : CTS_E_INVAL;
    case CTS_TRACER_SINK_TCP_CONNECT: {
      if (!sink->address || !sink->address[0]) return CTS_E_INVAL;
      cts_net_addr_t addr;
      char err[CTS_NET_ERR_LEN];
      int e = cts_net_parse_connect(sink->address, &addr, err, sizeof err);
      if (e) return e;
      int fd;
      e = cts_net_connect(&addr, sink->connect_timeout_ms ? (int)sink->connect_timeout_ms : -1,
                          &fd);
      return e ? e : adopt_socket(fd);
    }
    default:
      return CTS_E_INVAL;
  }
}

static void close_sink(void) {
  cts__zsink_close(T.zsink);
  T.zsink = NULL;
  if (T.own_fd && T.fd >= 0) {
    if (T.socket_sink) {
      /* End the stream with a FIN even if a copy of the descriptor lives on, and read what
       * the peer sent, so that closing does not turn into a reset that could discard the
       * last packet on its way. */
      shutdown(T.fd, SHUT_WR);
      char sink_buf[4096];
      for (int i = 0; i < 256 && cts_net_read(T.fd, sink_buf, sizeof sink_buf) > 0; i++) {}
    }
    close(T.fd);
  }
  T.fd = -1;
  T.own_fd = false;
  T.socket_sink = false;
}

static bool allocate_memory(void) {
  if (!T.writer_mem) {
    cts_mt_writer_config_t wc;
    cts_mt_writer_config_init(&wc);
    wc.max_backtrace_frames = MAX_FRAMES_LIMIT;
    T.writer_mem_size = cts_mt_writer_size(&wc);
    T.writer_mem = map_pages(T.writer_mem_size);
    if (!T.writer_mem) return false;
  }
  pthread_mutex_lock(&T.side_lock);
  bool ok = true;
  if (!T.side) {
    ok = side_rehash(SIDE_INITIAL);
  } else {
    memset(T.side, 0, T.side_cap * sizeof *T.side);
  }
  T.side_count = T.side_tombs = 0;
  pthread_mutex_unlock(&T.side_lock);
  if (!ok) return false;
  for (size_t i = 0; i < CTS__SLOT_COUNT; i++)
    atomic_store_explicit(&cts__sampled_slots[i], 0, memory_order_relaxed);
  return true;
}

static bool config_ok(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink) {
  if (!cfg || !sink || cfg->struct_size < sizeof *cfg || sink->struct_size < sizeof *sink)
    return false;
  /* Compression is for files and callbacks: the collector and `fetch` take plain memtrace. */
  const bool tcp =
      sink->kind == CTS_TRACER_SINK_TCP_CONNECT || sink->kind == CTS_TRACER_SINK_TCP_LISTEN;
  if (cfg->compress_level < 0 || cfg->compress_level > CTS__ZSINK_LEVEL_MAX ||
      (cfg->compress_level && tcp))
    return false;
  return cfg->sample_rate > 0.0 && cfg->sample_rate <= 1.0 && cfg->max_frames <= MAX_FRAMES_LIMIT;
}

/* Starts a session (a trace with its writer thread) into `sink`, or into the connected
 * socket `socket_fd` when it is >= 0 (taken over: closed at the end of the session, or at
 * once on failure). Control lock held. */
static int session_start_locked(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                                int socket_fd) {
  if (!config_ok(cfg, sink) || T.session_running || !T.ready || !allocate_memory()) {
    const int e = !config_ok(cfg, sink) ? CTS_E_INVAL
                  : T.session_running   ? CTS_E_STATE
                  : !T.ready            ? CTS_E_STATE
                                        : CTS_E_NOMEM;
    if (socket_fd >= 0) close(socket_fd);
    return e;
  }

  /* The writer process needs the shared mapping; without it, a writer thread. */
  T.writer_process = process_writer_fits(cfg, sink, socket_fd) && shared_mapping();
  T.cfg = *cfg;
  T.sink = *sink;
  copy_string(T.context, sizeof T.context, cfg->context);
  T.unwind = cfg->unwind;
#ifdef CTS_HAVE_LIBUNWIND
  if (T.unwind == CTS_TRACER_UNWIND_AUTO || T.unwind == CTS_TRACER_UNWIND_MIXED)
    T.unwind =
        cts__unwind_mixed_available() ? CTS_TRACER_UNWIND_MIXED : CTS_TRACER_UNWIND_LIBUNWIND;
#else
  if (T.unwind != CTS_TRACER_UNWIND_NONE) T.unwind = CTS_TRACER_UNWIND_FRAME_POINTER;
#endif
  T.rate = cfg->sample_rate;
  T.every_word = T.rate >= 1.0;
  T.inv_log_miss = 1.0 / log1p(-T.rate);
  T.inv_log_hit = T.rate < 1.0 ? 1.0 / log(T.rate) : 0.0;
  T.clock = sink->clock ? sink->clock : wall_clock_us;
  T.clock_user_data = sink->clock ? sink->clock_user_data : NULL;
  T.tsc_mode = CTS_HAVE_CPU_COUNTER && !sink->clock && cts_os_tsc_usable();
  T.tsc_ok = T.tsc_tried = T.writer_ending = false;
#if CTS_HAVE_CPU_COUNTER
  if (T.tsc_mode) tsc_sample(&T.tsc_start, &T.tsc_start_ns);
#endif
  if (cfg->executable_name) {
    copy_string(T.exe, sizeof T.exe, cfg->executable_name);
  } else {
    const ssize_t n = readlink("/proc/self/exe", T.exe, sizeof T.exe - 1);
    T.exe[n > 0 ? n : 0] = '\0';
  }
  if (gethostname(T.host, sizeof T.host) != 0) T.host[0] = '\0';
  T.host[sizeof T.host - 1] = '\0';

  atomic_store_explicit(&T.ctl->stopping, false, memory_order_relaxed);
  atomic_store(&T.ctl->stalled, false);
  atomic_store(&T.ctl->stall_reported, false);
  int e = open_sink(sink, socket_fd);
  if (e) return e;
  if (cfg->compress_level) {
    T.zsink = cts__zsink_open(cfg->compress_level, raw_write, NULL);
    if (!T.zsink) {
      close_sink();
      return CTS_E_NOMEM;
    }
  }
  cts_mt_writer_config_t wc;
  cts_mt_writer_config_init(&wc);
  wc.version = 2;
  wc.sample_rate = T.rate;
  wc.word_size = 64;
  wc.executable_name = T.exe;
  wc.host_name = T.host;
  wc.runtime_params = "";
  wc.context = T.context;
  wc.pid = (uint64_t)getpid();
  wc.max_backtrace_frames = MAX_FRAMES_LIMIT;
  wc.write = sink_write;
  wc.clock = T.clock;
  wc.clock_user_data = T.clock_user_data;
  wc.resolve = resolve_code;             /* loss markers are named even without libdw */
  wc.encoding = CTS_MT_ENCODING_COMPACT; /* smaller traces; every memtrace reader reads them */
  T.bytes_written = 0;
  const uint64_t start = T.clock(T.clock_user_data);
  wc.start_time_us = start;
  e = cts_mt_writer_init(&T.writer, T.writer_mem, T.writer_mem_size, &wc);
  /* The trace-info packet reaches the file now, as it does uncompressed. */
  if (!e && T.zsink) e = cts__zsink_flush(T.zsink);
  if (e) {
    close_sink();
    return e;
  }

  ctl_lock();
  const unsigned session = T.session % 0x7FFFFFFFu + 1u; /* never 0 */
  T.session_bits = session & CTS__TRACER_SESSION_MASK;
  atomic_store(&T.ctl->next_id, T.session_bits << ID_BITS);
  T.emitted = 0;
  T.ctl->gave_up = 0;
  T.pending.present = false;
  T.lost_taken = ring_losses();
  T.writer_time = start;
  T.ctl->wake_requested = T.ctl->stop_requested = false;
  atomic_store(&T.ctl->writer_polling, false); /* a new writer: threads wake it at first */
  T.ctl->flush_requested = T.ctl->flush_done = 0;
  T.ctl->end_time = 0;
  atomic_store(&T.ctl->failed, false);
  atomic_store(&T.ctl->exec_pending, false);
  memset(&T.ctl->stats, 0, sizeof T.ctl->stats);
  ring_counts(&T.base);
  T.ctl->stats.bytes_written = T.bytes_written;
  T.ctl->thread_running = true;
  ctl_unlock();

  /* A writer process if it fits and can be made, else a writer thread. */
  if (T.writer_process && spawn_writer_process() != 0) T.writer_process = false;
  if (!T.writer_process) {
    /* The writer thread takes no signals: they belong to the program's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    e = pthread_create(&T.thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
      T.ctl->thread_running = false;
      close_sink();
      return -e;
    }
    pthread_setname_np(T.thread, "ctfscope-writer");
  }
  /* Sampling starts at once: the writer's one-off work (calibrating the time-stamp counter,
   * reading the module list) is done when it first needs it, while the program runs; a
   * program that fills a ring meanwhile waits for it there, as it would have here, and one
   * that does not (every program at the default rate) never waits. Waiting here cost every
   * traced image 70-120 ms. A writer process that is already gone is noticed at once. */
  ctl_lock();
  const bool writer_lost = !T.ctl->thread_running || (T.writer_process && writer_process_gone());
  ctl_unlock();
  if (writer_lost) {
    forget_writer_process();
    close_sink();
    return -ESRCH;
  }
  T.session = session;
  atomic_store_explicit(&T.thread_seeds, 0, memory_order_relaxed);
  T.session_running = true;
  atomic_store_explicit(&cts__tracer_active, (int)T.session, memory_order_release);
  return 0;
}

/* Stops the running session: sampling ends, the writer thread writes what is queued,
 * flushes and exits, the sink is closed. Control lock held. */
static int session_stop_locked(void) {
  ctl_lock();
  atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
  atomic_store_explicit(&T.ctl->stopping, true, memory_order_relaxed);
  T.ctl->stop_requested = true;
  T.ctl->end_time = event_time(); /* the trace's end (tracer.h, "Events") */
  ctl_wake(&T.ctl->writer_wake, false);
  ctl_wake(&T.ctl->progress, true); /* threads waiting for queue space give up */
  if (T.writer_process)
    while (T.ctl->thread_running) wait_progress(NULL);
  ctl_unlock();
  if (T.writer_process)
    forget_writer_process();
  else
    pthread_join(T.thread, NULL);
  report_stall();
  close_sink();
  T.session_running = false;
  ctl_lock();
  const int e = T.ctl->stats.error;
  ctl_unlock();
  return e;
}

/* ---- what service.c uses ------------------------------------------------------------------- */

void cts__control_lock(void) {
  pthread_mutex_lock(&T.control);
}

void cts__control_unlock(void) {
  pthread_mutex_unlock(&T.control);
}

int cts__session_start_socket(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int fd) {
  if (T.service_stopping) {
    close(fd);
    return CTS_E_STATE;
  }
  return session_start_locked(cfg, sink, fd);
}

int cts__session_stop(void) {
  return T.session_running ? session_stop_locked() : CTS_E_STATE;
}

int cts__session_error(void) {
  ctl_lock();
  const int e = T.ctl->stats.error;
  ctl_unlock();
  return e;
}

/* ---- public API, continued ------------------------------------------------------------------ */

int cts_tracer_start(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink) {
  cts__guard_enter();
  pthread_mutex_lock(&T.control);
  int e;
  if (!config_ok(cfg, sink)) {
    e = CTS_E_INVAL;
  } else if (T.session_running || T.service_running) {
    e = CTS_E_STATE;
  } else {
    pthread_once(&T.once, init_once);
    if (!T.ready) {
      e = CTS_E_STATE;
    } else if (sink->kind == CTS_TRACER_SINK_TCP_LISTEN) {
      e = cts__service_start(cfg, sink);
      T.service_running = e == 0;
    } else {
      e = session_start_locked(cfg, sink, -1);
    }
  }
  pthread_mutex_unlock(&T.control);
  cts__guard_leave();
  return e;
}

int cts_tracer_stop(void) {
  cts__guard_enter();
  pthread_mutex_lock(&T.control);
  int e = CTS_E_STATE;
  if (T.service_running && !T.service_stopping) {
    /* The service thread ends its client's session itself, under the control lock. */
    T.service_stopping = true;
    pthread_mutex_unlock(&T.control);
    e = cts__service_stop();
    pthread_mutex_lock(&T.control);
    T.service_running = T.service_stopping = false;
  } else if (!T.service_running && T.session_running) {
    e = session_stop_locked();
  }
  pthread_mutex_unlock(&T.control);
  cts__guard_leave();
  return e;
}

bool cts_tracer_is_active(void) {
  pthread_mutex_lock(&T.control);
  const bool running = T.session_running || T.service_running;
  pthread_mutex_unlock(&T.control);
  return running;
}

void cts__tracer_exec_pending(bool pending) {
  ctl_lock();
  if (T.ctl->thread_running) {
    atomic_store_explicit(&T.ctl->exec_pending, pending, memory_order_relaxed);
    if (pending) ctl_wake(&T.ctl->writer_wake, false); /* it recomputes how long it waits */
  }
  ctl_unlock();
}

int cts_tracer_flush(void) {
  ctl_lock();
  if (!T.ctl->thread_running || T.ctl->stop_requested) {
    ctl_unlock();
    return CTS_E_STATE;
  }
  const uint64_t target = ++T.ctl->flush_requested;
  atomic_fetch_add(&T.ctl->module_epoch, 1); /* before dlclose and exec: see the symbolizer */
  ctl_wake(&T.ctl->writer_wake, false);
  const struct timespec deadline = deadline_in_ms(DROP_GIVE_UP_MS);
  int e = 0;
  while (T.ctl->flush_done < target && T.ctl->thread_running) {
    if (!T.cfg.drop_when_full) {
      wait_progress(NULL);
    } else if (wait_progress(&deadline) == ETIMEDOUT) {
      e = -ETIMEDOUT;
      break;
    }
  }
  if (T.ctl->stats.error) e = T.ctl->stats.error;
  ctl_unlock();
  return e;
}

void cts_tracer_track_alloc(const void *ptr, size_t size) {
  cts__tracer_on_alloc(ptr, size, __builtin_frame_address(0));
}

void cts_tracer_track_free(const void *ptr) {
  cts__tracer_on_free(ptr);
}

void cts_tracer_get_stats(cts_tracer_stats_t *out) {
  cts_tracer_stats_t rings;
  ctl_lock();
  *out = T.ctl->stats;
  ring_counts(&rings);
  out->samples += rings.samples - T.base.samples;
  out->collects += rings.collects - T.base.collects;
  out->waits += rings.waits - T.base.waits;
  out->dropped += rings.dropped - T.base.dropped;
  out->lost_allocs += rings.lost_allocs - T.base.lost_allocs;
  out->lost_samples += rings.lost_samples - T.base.lost_samples;
  out->lost_collects += rings.lost_collects - T.base.lost_collects;
  out->lost_allocs += T.ctl->gave_up;
  ctl_unlock();
  cts__service_add_stats(out);
}

uint16_t cts_tracer_listen_port(void) {
  return cts__service_port();
}
