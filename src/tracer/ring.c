/* SPDX-License-Identifier: MIT */
/* The per-thread record rings (lock-free; each thread writes its own, the writer takes
 * from all): their memory, claiming and handing them on, waking and waiting for the
 * writer, and their counters. The inline reserve and publish are in tracer_state.h. Part
 * cts__ring_state. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"

#include "side_stack.h"
#include "tracer_state.h"

cts__ring_state_t cts__ring_state = {.shared_fd = -1};

/* The ring key's destructor: the thread exits, its ring (and what it still holds for the
 * writer thread) goes to the next thread that needs one. */
void cts__ring_release(void *p) {
  cts__ring_t *const r = p;
  if (cts__thread.ring == r) cts__thread.ring = NULL;
  CTS_ASSERT(atomic_load_explicit(&r->owned, memory_order_relaxed) == 1);
  atomic_store_explicit(&r->owned, 0, memory_order_release);
}

/* The owner reads `tail` (the writer thread's: a cache miss) and looks at it again once the
 * ring is half full from there. */
static void ring_read_tail(cts__ring_t *r) {
  r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
  r->wake_check = r->tail_seen + cts__ring_words(r) / 2u;
}

/* Takes `words` more of the rings' memory if their sizes then sum to at most `cap`. */
static bool ring_take_words(size_t words, size_t cap) {
  size_t used = atomic_load_explicit(&cts__ring_state.ring_words, memory_order_relaxed);
  do
    if (used + words > cap) return false;
  while (!atomic_compare_exchange_weak_explicit(&cts__ring_state.ring_words, &used, used + words,
                                                memory_order_relaxed, memory_order_relaxed));
  return true;
}

/* A ring's memory: its header, then the owner's outer-frame cache, then its words, each
 * on its own cache lines; the whole in pages. */
static size_t ring_cache_offset(void) {
  return (sizeof(cts__ring_t) + 63u) & ~(size_t)63u;
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
  if (!cts__ring_state.shared) return cts__map_pages(ring_size());
  const size_t slot = atomic_fetch_add(&cts__ctl->ring_slots_used, 1);
  if (slot >= RING_SLOTS) return NULL;
  return cts__ring_state.shared + SHARED_HEADER + slot * ring_size();
}

/* cts__ring_claim's work, on the side stack. */
static cts__ring_t *ring_claim(cts__thread_t *t) {
  /* The session's first sample: its writer process is made now (the lazy writer). */
  if (CTS_UNLIKELY(atomic_load_explicit(&cts__lazy_writer, memory_order_acquire) ==
                   CTS__LAZY_WAITING))
    cts__lazy_writer_start();
  cts__ring_t *r = atomic_load_explicit(&cts__ctl->rings, memory_order_acquire);
  for (; r; r = r->next) {
    int unowned = 0;
    if (atomic_load_explicit(&r->owned, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong(&r->owned, &unowned, 1))
      break;
  }
  if (!r) {
    unsigned char *const mem = ring_memory();
    if (!mem) return NULL;
    r = (cts__ring_t *)mem; /* mapped zero-filled: all counters 0, the cache empty */
    /* The first rings at their largest: a program with few threads never waits for a
     * ring to grow. */
    if (!ring_take_words(RING_WORDS, (size_t)RING_WORDS * RING_FULL_RINGS)) {
      atomic_fetch_add_explicit(&cts__ring_state.ring_words, RING_MIN_WORDS, memory_order_relaxed);
      atomic_init(&r->shift, RING_MAX_SHIFT);
    }
    r->bottom = (cts__bottom_t *)(mem + ring_cache_offset());
    r->words = (uint64_t *)(mem + ring_words_offset());
    atomic_init(&r->owned, 1);
    cts__ring_t *old = atomic_load_explicit(&cts__ctl->rings, memory_order_relaxed);
    do r->next = old;
    while (!atomic_compare_exchange_weak_explicit(&cts__ctl->rings, &old, r, memory_order_release,
                                                  memory_order_relaxed));
  }
  CTS_ASSERT(atomic_load_explicit(&r->owned, memory_order_relaxed) == 1);
  ring_read_tail(r);
  if (cts__ring_state.ring_key_ok) pthread_setspecific(cts__ring_state.ring_key, r);
  t->ring = r;
  return r;
}

typedef struct {
  cts__thread_t *thread;
  cts__ring_t *ring;
} ring_claim_call_t;

static void ring_claim_on_side_stack(void *call) {
  ring_claim_call_t *const c = call;
  c->ring = ring_claim(c->thread);
}

/* This thread's first record: a ring left by an exited thread, else a new one. NULL if
 * there is no memory for one. Guard raised (pthread_setspecific may allocate). On the side
 * stack (side_stack.h): the session's first claim makes the writer process (~9 KB of
 * stack), and each thread's first calls functions the loader binds then (its
 * _dl_runtime_resolve saves the vector registers: ~1-3 KB), on whatever stack the program
 * allocated from. */
CTS_NOINLINE cts__ring_t *cts__ring_claim(cts__thread_t *t) {
  ring_claim_call_t call = {.thread = t};
  cts__call_on_side_stack(ring_claim_on_side_stack, &call);
  return call.ring;
}

/* tracer_state.h: the record goes at the start of the ring after a REC_PAD record to its
 * end, or the ring grows first and it stays where it is. */
CTS_NOINLINE uint64_t *cts__ring_wrap(cts__ring_t *r, size_t n, size_t limit, size_t *skip) {
  const uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  unsigned shift = atomic_load_explicit(&r->shift, memory_order_relaxed);
  size_t size = (size_t)RING_WORDS >> shift;
  const size_t off = (size_t)head & (size - 1u);
  /* The ring grows (doubles) where the record stands, with no padding, when every record
   * the writer has not taken lies where the double size puts it too: at offsets below
   * `size`, that is, in this lap of the ring (the writer took the last one's) and in a lap
   * that starts at a multiple of the double size. Such a lap comes every other lap. The
   * store of the shift is published with the record's `head`. */
  if (r->grow && shift > 0 && !(head & size)) {
    r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (head - r->tail_seen <= off && ring_take_words(size, RING_BUDGET_WORDS)) {
      atomic_store_explicit(&r->shift, --shift, memory_order_relaxed);
      size *= 2u;
      r->wake_check = r->tail_seen + size / 2u;
    }
    r->grow = false; /* asked again at the next look that finds the writer behind */
  }
  limit >>= shift;
  const size_t pad = off + n > size ? size - off : 0;
  if (head + pad + n - r->tail_seen > limit && !cts__ring_wait(r, head + pad + n, limit))
    return NULL;
  CTS_ASSERT(head + pad + n - r->tail_seen <= size);
  *skip = pad;
  if (!pad) return r->words + off;
  r->words[off] = REC_PAD | (uint64_t)pad << 8;
  return r->words;
}

/* Wakes the writer thread once the ring is more than half full (once per filling). `tail`
 * and `wake_sent` are written by the writer thread: reading them costs a cache miss, and
 * while the writer drains the ring (it moves `tail` once per pass) every record would pay
 * it, so they are looked at again only after another sixteenth of the ring. */
CTS_NOINLINE void cts__ring_wake(cts__ring_t *r, uint64_t head) {
  /* A writer process that stopped on a sink error cannot end sampling itself. */
  if (CTS_UNLIKELY(atomic_load_explicit(&cts__ctl->failed, memory_order_relaxed))) {
    atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
    cts__report_stall();
  }
  ring_read_tail(r);
  const size_t size = cts__ring_words(r);
  if (head - r->tail_seen <= size / 2u) return;
  r->grow = true; /* the writer is half a ring behind: a larger ring would wait less */
  r->wake_check = head + size / 16u;
  /* A writer that polls needs no futex wake: while a program allocates steadily, none is
   * made. The fence pairs with the writer's (writer_rest): either it sees this head, or
   * this thread sees it resting. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&cts__ctl->writer_polling, memory_order_relaxed)) return;
  if (atomic_exchange_explicit(&r->wake_sent, true, memory_order_relaxed)) return;
  cts__ctl_lock();
  cts__ctl->wake_requested = true;
  cts__ctl_wake(&cts__ctl->writer_wake, false);
  cts__ctl_unlock();
}

/* Waits until the ring, once written up to `end`, is at most `limit` words full (false:
 * sampling stopped, or drop mode). The writer thread broadcasts `progress` after moving
 * a tail when `waiters` is non-zero; the sequentially consistent waiters/tail accesses on
 * both sides make sure one of them sees the other. */
CTS_NOINLINE bool cts__ring_wait(cts__ring_t *r, uint64_t end, size_t limit) {
  for (;;) {
    r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (end - r->tail_seen <= limit) return true;
    if (!cts__sampling_on()) return false;
    if (SAMPLER_GET(drop_when_full)) {
      cts__ring_wake(r, end);
      return false;
    }
    cts__ctl_lock();
    const bool running = cts__ctl->thread_running;
    if (running) {
      atomic_fetch_add(&cts__ctl->waiters, 1);
      cts__ctl->wake_requested = true;
      if (!atomic_load(&cts__ctl->writer_polling)) cts__ctl_wake(&cts__ctl->writer_wake, false);
      cts__bump(&r->waits, 1);
      r->grow = true;
      /* Until the ring is half empty, not until one record fits: one wait per half ring
       * however slow the writer is, not one per record (drain wakes waiters only then). */
      while (cts__sampling_on() && cts__ctl->thread_running &&
             end - atomic_load(&r->tail) > limit / 2u)
        cts__wait_progress(NULL);
      atomic_fetch_sub(&cts__ctl->waiters, 1);
    }
    cts__ctl_unlock();
    if (!running) return false;
  }
}

/* What the rings lost so far (drop mode). */
cts__loss_t cts__ring_losses(void) {
  cts__loss_t l = {0};
  for (cts__ring_t *r = atomic_load_explicit(&cts__ctl->rings, memory_order_acquire); r;
       r = r->next) {
    l.allocs += atomic_load_explicit(&r->lost_allocs, memory_order_relaxed);
    l.collects += atomic_load_explicit(&r->lost_collects, memory_order_relaxed);
    l.words += atomic_load_explicit(&r->lost_words, memory_order_relaxed);
    l.samples += atomic_load_explicit(&r->lost_samples, memory_order_relaxed);
  }
  return l;
}

/* The rings' counters, summed (cts_tracer_get_stats subtracts the session's start). */
void cts__ring_counts(cts_tracer_stats_t *s) {
  memset(s, 0, sizeof *s);
  for (cts__ring_t *r = atomic_load_explicit(&cts__ctl->rings, memory_order_acquire); r;
       r = r->next) {
    s->samples += atomic_load_explicit(&r->samples, memory_order_relaxed);
    s->collects += atomic_load_explicit(&r->collects, memory_order_relaxed);
    s->waits += atomic_load_explicit(&r->waits, memory_order_relaxed);
    s->dropped += atomic_load_explicit(&r->dropped, memory_order_relaxed);
    s->lost_allocs += atomic_load_explicit(&r->lost_allocs, memory_order_relaxed);
    s->lost_samples += atomic_load_explicit(&r->lost_samples, memory_order_relaxed);
    s->lost_collects += atomic_load_explicit(&r->lost_collects, memory_order_relaxed);
  }
  s->dropped += atomic_load_explicit(&cts__ctl->unrecorded, memory_order_relaxed);
}

/* Whether some ring holds records the writer has not taken. */
bool cts__rings_pending(void) {
  for (cts__ring_t *r = atomic_load_explicit(&cts__ctl->rings, memory_order_acquire); r;
       r = r->next)
    if (atomic_load_explicit(&r->head, memory_order_acquire) !=
        atomic_load_explicit(&r->tail, memory_order_relaxed))
      return true;
  return false;
}

/* Where the rings of a lazy session are mapped (a hint; 0: anywhere). The writer executable
 * maps the memfd again at the program's address (MAP_FIXED_NOREPLACE), in a fresh image of
 * its own: where the kernel put the 4.45 GB mapping in the program, below its libraries,
 * the writer's own libraries or stack sometimes were (its layout is randomised anew): the
 * writer exited, and the trace stopped at the first sample (1 spawn in 150-170 of
 * python3, main 515f10c). A fresh image on x86-64 maps nothing between 16 and 32 TiB: its
 * executable is near 0x5555... (PIE) or 4 MiB, its heap after it, its libraries below its
 * stack, or upwards from 0x2aaa... (42.7 TiB) with an unlimited stack. The hint is a random
 * 2 MiB-aligned place there (the mapping's address keeps its randomness), taken if free.
 * Elsewhere (not x86-64, 32-bit): no hint, as before. */
static void *rings_address_hint(size_t size) {
#if defined(__x86_64__)
  const uint64_t lo = (uint64_t)16 << 40, span = (uint64_t)16 << 40, align = (uint64_t)2 << 20;
  if (size >= span) return NULL;
  /* The stack's address (randomised) and the time: not AT_RANDOM, whose bytes seed glibc's
   * stack and pointer guards (the mapping's address is visible in /proc/PID/maps). */
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t r =
      (uint64_t)(uintptr_t)&now ^ ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
  r = cts_mix64(r ^ 0x5ca1ab1e0ddba11ull);
  return (void *)(uintptr_t)(lo + (r % ((span - size) / align)) * align);
#else
  (void)size;
  return NULL;
#endif
}

/* The shared mapping, made once: the control block, then RING_SLOTS ring slots, then the
 * hand-over area (reserved address space; pages are used as rings are). One mapping for
 * both: a second one cost each traced image an mmap and a munmap (a shmem file each).
 * Only while no ring exists: rings made before would be this process's alone. With
 * `memfd`, from a memfd kept open (close-on-exec): a writer executable maps the same
 * file again at the same address (the lazy writer, writer_process.c); a memfd is a shmem
 * file as the anonymous mapping is, at the cost of its descriptor. False: a writer thread
 * it is. */
bool cts__shared_mapping(bool memfd, cts_fd_aside_t *aside) {
  if (cts__ring_state.shared) return !memfd || cts__ring_state.shared_fd >= 0;
  if (atomic_load(&cts__ctl->rings)) return false;
  const size_t size = SHARED_HEADER + RING_SLOTS * ring_size() + CTS__HANDOVER_BYTES;
  int fd = -1;
  /* A memfd is a file: sizing it past the program's file-size limit (`ulimit -f`,
   * RLIMIT_FSIZE) fails and sends SIGXFSZ, which killed the program at its start. Then no
   * memfd: the writer is made at the start, on an anonymous mapping (no such limit). */
  struct rlimit file_size;
  if (memfd && getrlimit(RLIMIT_FSIZE, &file_size) == 0 && file_size.rlim_cur != RLIM_INFINITY &&
      file_size.rlim_cur < (rlim_t)size)
    return false;
  if (memfd) {
    fd = cts_fd_set_aside_in(aside, memfd_create("ctfscope-rings", MFD_CLOEXEC));
    if (fd < 0) return false;
    if (ftruncate(fd, (off_t)size) != 0) {
      close(fd);
      return false;
    }
  }
  void *const p = mmap(memfd ? rings_address_hint(size) : NULL, size, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_NORESERVE | (memfd ? 0 : MAP_ANONYMOUS), fd, 0);
  if (p == MAP_FAILED) {
    if (fd >= 0) close(fd);
    return false;
  }
  cts__control_t *const c = p;
  cts__init_control(c, true);
  atomic_store(&c->unrecorded, atomic_load(&cts__ctl->unrecorded));
  cts__ring_state.shared = p;
  cts__ring_state.shared_size = size;
  cts__ring_state.shared_fd = fd;
  cts__ring_state.shared_fd_ident = cts_fd_ident(fd);
  cts__ctl = c;
  return true;
}

void *cts__shared_handover(void) {
  return cts__ring_state.shared
             ? cts__ring_state.shared + cts__ring_state.shared_size - CTS__HANDOVER_BYTES
             : NULL;
}

size_t cts__tracer_ring_count(void) {
  size_t n = 0;
  for (cts__ring_t *r = atomic_load_explicit(&cts__ctl->rings, memory_order_acquire); r;
       r = r->next)
    n++;
  return n;
}
