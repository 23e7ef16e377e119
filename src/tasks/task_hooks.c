/* SPDX-License-Identifier: MIT */
/* The process-wide task hooks of tasks.h (cts_task_start(), cts_task_*()): a thread-local
 * writer per OS thread, attached to the one started ring. This is the hosted half of task
 * tracing: it needs process globals and thread-local storage, which the freestanding ring
 * writer in src/core/ must not have (tests/core/check_freestanding.cmake), so it lives here
 * and reaches the writer's inline encoder through src/core/mprof_writer.h. It makes no
 * system call and never allocates.
 *
 * Nothing is dropped while packets can be shared: a thread that finds no free packet (more
 * threads alive than packets) writes through one shared writer, under a spin lock, into the
 * packet the other hook writers leave free for it (cts__mprof_ring_share). Before an event of
 * another thread's, the shared packet gets a switch to that thread's current task, so that its lane
 * always runs the task of the thread that wrote last (docs/formats/mprof.md §14.4). What even that
 * cannot place is counted in the ring's dropped count, which cts_task_stop() writes into the trace
 * (ctfscope_lost). */
#include <stdbool.h>
#include <string.h>

#include "../core/mprof_writer.h"

#if defined(__GNUC__)
#define TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define TLS_IE
#endif

int cts__task_on;
static uint64_t task_ids;

/* What every event reads, on a line of its own that only start, stop and flush write. A
 * thread whose cached epoch equals `epoch` knows that its writer belongs to the started
 * ring and still owns its packet, so the event path makes one comparison. */
static struct {
  cts_mprof_ring_t *ring;
  uint32_t epoch;  /* bumped by start, stop and flush; never 0 (a thread's initial value) */
  uint32_t starts; /* bumped by start: threads reset their current task */
} hooks __attribute__((aligned(64))) = {NULL, 1, 0};

static __thread cts_mprof_writer_t tls_writer TLS_IE;
static __thread uint32_t tls_epoch TLS_IE;
static __thread uint32_t tls_starts TLS_IE;

/* Hook writers' owner tokens: unique across every ring of the process, so a writer left
 * attached to a ring whose memory was reused for a new ring at the same address cannot
 * mistake a packet of the new ring for its own. Upper half of the token space
 * (mprof_writer.h). */
static uint32_t writer_tokens;

static uint32_t next_writer_token(void) {
  const uint32_t t = __atomic_add_fetch(&writer_tokens, 1, __ATOMIC_RELAXED);
  const uint32_t token = CTS__MPROF_TOKEN_HOSTED | (t & (CTS__MPROF_TOKEN_HOSTED - 1u));
  CTS_ASSERT(token & CTS__MPROF_TOKEN_HOSTED); /* never an explicit writer's, never 0 */
  return token;
}

static void bump_epoch(void) {
  uint32_t e = __atomic_load_n(&hooks.epoch, __ATOMIC_RELAXED), next;
  do next = e + 1 == 0 ? 1 : e + 1;
  while (!__atomic_compare_exchange_n(&hooks.epoch, &e, next, false, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED));
}

cts_task_id_t cts_task_new_id(void) {
  return (cts_task_id_t)__atomic_add_fetch(&task_ids, 1, __ATOMIC_RELAXED);
}

/* The epoch moved (or this is the thread's first event): check the writer against the
 * started ring. A packet still held in this same ring from an earlier start is given back;
 * one of another ring is forgotten (that memory may be gone); one a flush took back is
 * dropped. Stopped: NULL, and the epoch is not cached, so every hook comes back here. */
static CTS_NOINLINE cts_mprof_writer_t *thread_writer_slow(void) {
  const uint32_t epoch = __atomic_load_n(&hooks.epoch, __ATOMIC_ACQUIRE);
  cts_mprof_ring_t *ring = __atomic_load_n(&hooks.ring, __ATOMIC_ACQUIRE);
  const uint32_t starts = __atomic_load_n(&hooks.starts, __ATOMIC_ACQUIRE);
  CTS_ASSERT(epoch != 0); /* a thread's initial cached epoch must never look current */
  if (!ring) return NULL;
  CTS_ASSERT(ring->magic == RING_MAGIC);
  cts_mprof_writer_t *w = &tls_writer;
  const bool owned =
      w->ring == ring && w->packet &&
      __atomic_load_n(&ring_owner(ring)[w->index], __ATOMIC_RELAXED) == w->generation;
  if (w->ring != ring || tls_starts != starts) {
    if (owned) cts__mprof_writer_release(w);
    cts__mprof_writer_attach(w, ring, next_writer_token());
    tls_starts = starts;
  } else if (!owned) {
    w->packet = NULL; /* flushed away */
    w->len = 0;
  }
  /* Attached to the started ring with a hook token; no packet unless still its own. */
  CTS_ASSERT(w->ring == ring && (w->generation & CTS__MPROF_TOKEN_HOSTED) != 0);
  CTS_ASSERT(w->packet ? w->index < ring->npackets && w->pos < w->len : w->len == 0);
  tls_epoch = epoch;
  return w;
}

/* The calling thread's writer for the started ring, or NULL when stopped. */
static CTS_FORCE_INLINE cts_mprof_writer_t *thread_writer(void) {
  if (CTS_LIKELY(tls_epoch == __atomic_load_n(&hooks.epoch, __ATOMIC_RELAXED))) return &tls_writer;
  return thread_writer_slow();
}

/* The shared writer of the threads that found no packet, and the task its packet's lane
 * runs as written so far (CTS_TASK_NONE: none yet). Both under shared_lock. */
static int shared_lock;
static cts_mprof_writer_t shared;
static int64_t shared_current;

static void shared_acquire(void) {
  while (__atomic_exchange_n(&shared_lock, 1, __ATOMIC_ACQUIRE))
    while (__atomic_load_n(&shared_lock, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
}

static void shared_release(void) {
  __atomic_store_n(&shared_lock, 0, __ATOMIC_RELEASE);
}

/* Whether an event of this kind makes its thread (context) the lane's current task. */
static bool switches(unsigned id) {
  return id == CTS_MPROF_SWITCH || id == CTS_MPROF_READ || id == CTS_MPROF_SIGNAL;
}

/* The event did not find a packet of w's own: it goes to the shared packet. Shared lock
 * held. Returns 0 or CTS_E_LIMIT. */
static int shared_write(const cts_mprof_writer_t *w, unsigned id, int64_t thread, uint64_t arg,
                        int64_t value, uint8_t type, const char *str) {
  cts_mprof_writer_t *const s = &shared;
  if (s->ring != w->ring) return CTS_E_LIMIT; /* no shared packet for this ring */
  if (s->packet &&
      __atomic_load_n(&ring_owner(s->ring)[s->index], __ATOMIC_RELAXED) != s->generation) {
    s->packet = NULL; /* a flush took it back */
    s->len = 0;
  }
  if (!switches(id) && shared_current != w->current) {
    if (encode_fixed(s, CTS_TIME_NOW, CTS_MPROF_SWITCH, w->current, 0, 0) != 0) return CTS_E_LIMIT;
    shared_current = w->current;
  }
  const int e = cts__mprof_encode(s, CTS_TIME_NOW, id, thread, arg, value, type, str);
  if (e == 0 && switches(id)) shared_current = thread;
  return e;
}

static CTS_NOINLINE void overflow(cts_mprof_writer_t *w, unsigned id, int64_t thread, uint64_t arg,
                                  int64_t value, uint8_t type, const char *str) {
  shared_acquire();
  const int e = shared_write(w, id, thread, arg, value, type, str);
  shared_release();
  if (e) cts__mprof_ring_count_drop(w->ring);
}

/* Every hook writes through these two: the thread's own packet, else the shared one. */
static CTS_FORCE_INLINE void put_fixed(cts_mprof_writer_t *w, unsigned id, int64_t thread,
                                       uint64_t word, uint8_t type) {
  if (CTS_UNLIKELY(encode_fixed(w, CTS_TIME_NOW, id, thread, word, type) != 0))
    overflow(w, id, thread, cts__mprof_word_is_value(id) ? 0 : word,
             cts__mprof_word_is_value(id) ? (int64_t)word : 0, type, NULL);
}

static void task_write(cts_mprof_writer_t *w, unsigned id, int64_t thread, uint64_t arg,
                       int64_t value, uint8_t type, const char *str) {
  if (CTS_UNLIKELY(cts__mprof_encode(w, CTS_TIME_NOW, id, thread, arg, value, type, str) != 0))
    overflow(w, id, thread, arg, value, type, str);
}

/* Sets up the shared writer of a newly started ring (the previous one's packet, if still
 * held in that ring, is given back first). It takes a packet only when a thread finds
 * none, from the one the other hook writers leave free. */
static void shared_start(cts_mprof_ring_t *ring) {
  shared_acquire();
  cts_mprof_writer_t *const s = &shared;
  if (s->ring == ring && s->packet &&
      __atomic_load_n(&ring_owner(ring)[s->index], __ATOMIC_RELAXED) == s->generation)
    cts__mprof_writer_release(s);
  cts__mprof_writer_attach(s, ring, next_writer_token());
  shared_current = CTS_TASK_NONE;
  cts__mprof_ring_share(ring, s->generation); /* the others leave it a packet */
  shared_release();
}

/* Gives the shared packet back (to the sink, if any) when tracing stops. */
static void shared_stop(cts_mprof_ring_t *ring) {
  shared_acquire();
  cts_mprof_writer_t *const s = &shared;
  if (ring && s->ring == ring && s->packet &&
      __atomic_load_n(&ring_owner(ring)[s->index], __ATOMIC_RELAXED) == s->generation)
    cts__mprof_writer_release(s);
  if (ring && s->ring == ring) cts__mprof_ring_share(ring, 0);
  s->ring = NULL;
  s->packet = NULL;
  s->len = 0;
  shared_release();
}

int cts_task_start(cts_mprof_ring_t *ring) {
  if (!ring || ring->magic != RING_MAGIC) return CTS_E_INVAL;
  cts__mprof_ring_on_flush(ring, bump_epoch); /* a flush takes packets from hook writers */
  __atomic_add_fetch(&hooks.starts, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&hooks.ring, ring, __ATOMIC_RELEASE);
  bump_epoch();
  __atomic_store_n(&cts__task_on, 1, __ATOMIC_RELEASE);
  cts_mprof_writer_t *w = thread_writer();
  w->current = CTS_TASK_MAIN;
  task_write(w, CTS_MPROF_SWITCH, CTS_TASK_MAIN, 0, 0, 0, NULL);
  shared_start(ring);
  return 0;
}

/* The last anchor's source, written again at stop when the ring may have wrapped over
 * it. Set and read by whoever starts and stops tracing. */
static struct {
  cts_clock_ns_cb clock;
  void *user_data;
  int64_t pid;
} anchor_source;

void cts_task_stop(void) {
  cts_mprof_writer_t *w = thread_writer();
  cts_mprof_ring_t *const ring = __atomic_load_n(&hooks.ring, __ATOMIC_ACQUIRE);
  /* The count goes into the trace, so that its readers say events are missing. */
  const uint64_t dropped = ring ? cts_mprof_ring_dropped(ring) : 0;
  /* A ring (no sink keeps every packet) that reused packets may have overwritten the
   * anchor: another one, among the last events, survives. */
  if (w && anchor_source.clock && ring && !ring->sink &&
      cts_mprof_ring_packets_started(ring) > ring->npackets)
    cts_task_clock_anchor(anchor_source.pid, anchor_source.clock, anchor_source.user_data);
  anchor_source.clock = NULL; /* a later start anchors again */
  if (w && dropped) put_fixed(w, CTS_MPROF_LOST, w->current, dropped, 0);
  __atomic_store_n(&cts__task_on, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&hooks.ring, NULL, __ATOMIC_RELEASE);
  bump_epoch();
  if (w) cts__mprof_writer_release(w);
  shared_stop(ring);
}

int cts_task_clock_anchor(int64_t pid, cts_clock_ns_cb clock, void *user_data) {
  cts_mprof_writer_t *w = thread_writer();
  if (!w || !clock) return CTS_E_INVAL;
  anchor_source.clock = clock;
  anchor_source.user_data = user_data;
  anchor_source.pid = pid;
  /* The other clock read between two of the ring's: its value belongs to the midpoint, to
   * within half the bracket (a few tens of ns). */
  const uint64_t t0 = ring_now(w->ring);
  const uint64_t other = clock(user_data);
  const uint64_t t1 = ring_now(w->ring);
  const uint64_t mid = t0 + (t1 >= t0 ? (t1 - t0) / 2 : 0);
  if (encode_fixed(w, mid, CTS_MPROF_ANCHOR, pid, other, 0) == 0) return 0;
  overflow(w, CTS_MPROF_ANCHOR, pid, other, 0, 0, NULL); /* at the time of writing */
  return 0;
}

void cts__task_alloc(uint64_t object_id) {
  cts_mprof_writer_t *w = thread_writer();
  if (w) put_fixed(w, CTS_MPROF_ALLOC, w->current, object_id, 0);
}

void cts_task_thread_exit(void) {
  cts_mprof_writer_t *w = thread_writer();
  if (w) cts__mprof_writer_release(w);
}

cts_task_id_t cts__task_current(void) {
  const cts_mprof_writer_t *w = thread_writer();
  return w ? w->current : CTS_TASK_NONE;
}

void cts__task_event(unsigned id, int64_t thread, uint64_t arg, int64_t value, const char *str) {
  cts_mprof_writer_t *w = thread_writer();
  if (CTS_UNLIKELY(!w || id >= CTS_MPROF_MIRAGE_IDS)) return;
  /* Resolutions and counters are attributed to whoever runs (§7.2). */
  switch (id) {
    case CTS_MPROF_FULFILLS: /* the hot ones get a specialised encoder */
      put_fixed(w, CTS_MPROF_FULFILLS, w->current, arg, 0);
      return;
    case CTS_MPROF_BECOMES:
      put_fixed(w, CTS_MPROF_BECOMES, thread, arg, 0);
      return;
    case CTS_MPROF_GC:
      put_fixed(w, CTS_MPROF_GC, thread, arg, 0);
      return;
    case CTS_MPROF_FAILS:
    case CTS_MPROF_INCREASE:
    case CTS_MPROF_COUNTER:
      thread = w->current;
      break;
  }
  task_write(w, id, thread, arg, value, 0, str);
}

void cts__task_resolved(cts_task_id_t task) {
  cts_mprof_writer_t *w = thread_writer();
  if (CTS_LIKELY(w != NULL)) put_fixed(w, CTS_MPROF_FULFILLS, w->current, (uint64_t)task, 0);
}

void cts__task_created(cts_task_id_t child, cts_task_type_t type) {
  cts_mprof_writer_t *w = thread_writer();
  if (w) put_fixed(w, CTS_MPROF_CREATES, w->current, (uint64_t)child, wire_type(type));
}

cts_task_id_t cts__task_create(cts_task_type_t type, const char *label) {
  const cts_task_id_t id = cts_task_new_id();
  cts_mprof_writer_t *w = thread_writer();
  if (!w) return id;
  put_fixed(w, CTS_MPROF_CREATES, w->current, (uint64_t)id, wire_type(type));
  if (label) task_write(w, CTS_MPROF_LABEL, id, 0, 0, 0, label);
  return id;
}

void cts__task_read(unsigned id, cts_task_id_t reader, cts_task_id_t source) {
  cts_mprof_writer_t *w = thread_writer();
  if (!w) return;
  switch (id) {
    case CTS_MPROF_READ:
      w->current = reader; /* a read is an implicit switch (§7.3) */
      if (reader != source) put_fixed(w, CTS_MPROF_READ, reader, (uint64_t)source, 0);
      return;
    case CTS_MPROF_TRY_READ:
      put_fixed(w, CTS_MPROF_TRY_READ, reader, (uint64_t)source, 0);
      return;
    default:
      task_write(w, id, reader, (uint64_t)source, 0, 0, NULL);
  }
}

void cts__task_switch(cts_task_id_t task, bool always) {
  cts_mprof_writer_t *w = thread_writer();
  if (!w || (!always && w->current == task)) return;
  w->current = task;
  put_fixed(w, CTS_MPROF_SWITCH, task, 0, 0);
}

void cts__task_signal(unsigned id, cts_task_id_t receiver, cts_task_id_t sender) {
  cts_mprof_writer_t *w = thread_writer();
  if (!w) return;
  if (id == CTS_MPROF_SIGNAL) {
    w->current = receiver;
    put_fixed(w, CTS_MPROF_SIGNAL, receiver, (uint64_t)sender, 0);
    return;
  }
  task_write(w, id, receiver, (uint64_t)sender, 0, 0, NULL);
}

void cts__task_label(cts_task_id_t task, const char *label) {
  cts_mprof_writer_t *w = thread_writer();
  if (w) task_write(w, CTS_MPROF_LABEL, task, 0, 0, 0, label ? label : "");
}

void cts__task_counter(const char *name, int64_t value) {
  cts_mprof_writer_t *w = thread_writer();
  if (w) task_write(w, CTS_MPROF_COUNTER, w->current, 0, value, 0, name ? name : "");
}
