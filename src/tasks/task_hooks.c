/* SPDX-License-Identifier: MIT */
/* The process-wide task hooks of tasks.h (cts_task_start(), cts_task_*()): a thread-local
 * writer per OS thread, attached to the one started ring. This is the hosted half of task
 * tracing: it needs process globals and thread-local storage, which the freestanding ring
 * writer in src/core/ must not have (tests/core/check_freestanding.cmake), so it lives here
 * and reaches the writer's inline encoder through src/core/mprof_writer.h. It makes no
 * system call and never allocates. */
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

static void task_write(cts_mprof_writer_t *w, unsigned id, int64_t thread, uint64_t arg,
                       int64_t value, uint8_t type, const char *str) {
  cts__mprof_encode(w, CTS_TIME_NOW, id, thread, arg, value, type, str);
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
  return 0;
}

void cts_task_stop(void) {
  cts_mprof_writer_t *w = thread_writer();
  __atomic_store_n(&cts__task_on, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&hooks.ring, NULL, __ATOMIC_RELEASE);
  bump_epoch();
  if (w) cts__mprof_writer_release(w);
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
  if (CTS_UNLIKELY(!w || id >= CTS_MPROF_EVENT_IDS)) return;
  /* Resolutions and counters are attributed to whoever runs (§7.2). */
  switch (id) {
    case CTS_MPROF_FULFILLS: /* the hot ones get a specialised encoder */
      encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_FULFILLS, w->current, arg, 0);
      return;
    case CTS_MPROF_BECOMES:
      encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_BECOMES, thread, arg, 0);
      return;
    case CTS_MPROF_GC:
      encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_GC, thread, arg, 0);
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
  if (CTS_LIKELY(w != NULL))
    encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_FULFILLS, w->current, (uint64_t)task, 0);
}

void cts__task_created(cts_task_id_t child, cts_task_type_t type) {
  cts_mprof_writer_t *w = thread_writer();
  if (w)
    encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_CREATES, w->current, (uint64_t)child, wire_type(type));
}

cts_task_id_t cts__task_create(cts_task_type_t type, const char *label) {
  const cts_task_id_t id = cts_task_new_id();
  cts_mprof_writer_t *w = thread_writer();
  if (!w) return id;
  encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_CREATES, w->current, (uint64_t)id, wire_type(type));
  if (label) task_write(w, CTS_MPROF_LABEL, id, 0, 0, 0, label);
  return id;
}

void cts__task_read(unsigned id, cts_task_id_t reader, cts_task_id_t source) {
  cts_mprof_writer_t *w = thread_writer();
  if (!w) return;
  switch (id) {
    case CTS_MPROF_READ:
      w->current = reader; /* a read is an implicit switch (§7.3) */
      if (reader != source)
        encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_READ, reader, (uint64_t)source, 0);
      return;
    case CTS_MPROF_TRY_READ:
      encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_TRY_READ, reader, (uint64_t)source, 0);
      return;
    default:
      task_write(w, id, reader, (uint64_t)source, 0, 0, NULL);
  }
}

void cts__task_switch(cts_task_id_t task, bool always) {
  cts_mprof_writer_t *w = thread_writer();
  if (!w || (!always && w->current == task)) return;
  w->current = task;
  encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_SWITCH, task, 0, 0);
}

void cts__task_signal(unsigned id, cts_task_id_t receiver, cts_task_id_t sender) {
  cts_mprof_writer_t *w = thread_writer();
  if (!w) return;
  if (id == CTS_MPROF_SIGNAL) {
    w->current = receiver;
    encode_fixed(w, CTS_TIME_NOW, CTS_MPROF_SIGNAL, receiver, (uint64_t)sender, 0);
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
