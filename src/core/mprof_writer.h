/* SPDX-License-Identifier: MIT */
/* The mirage-profile ring's layout and the inline event encoder (docs/formats/mprof.md §3),
 * private to the ring writer (src/core/mprof_writer.c) and the task hooks
 * (src/tasks/task_hooks.c), which must inline the encoder to keep an event at a handful of
 * instructions. Everything here works on caller memory only: no global or thread state. */
#ifndef CTS_CORE_MPROF_WRITER_H
#define CTS_CORE_MPROF_WRITER_H

#include <ctfscope/errors.h>
#include <ctfscope/tasks.h>

#include "../common/check.h"
#include "../common/compiler.h"
#include "../common/cpu_counter.h"
#include "mprof_wire.h"

#define RING_MAGIC         0x4d50524eu
#define CONTENT_EMPTY_BITS (MPROF_HEADER * 8u)

struct cts_mprof_ring {
  uint32_t magic;
  uint32_t npackets;
  uint32_t packet_len; /* P = floor(size / npackets) */
  uint32_t last_len;   /* the last packet takes the remainder */
  uint8_t *buffer;
  size_t size;
  cts_clock_ns_cb clock;
  void *clock_user_data;
  cts_tsc_clock_t tsc; /* mult != 0: read the CPU counter inline (x86-64) */
  /* Called by cts_mprof_ring_flush() after it took packets back from their writers, so that
   * whoever caches "this writer still owns its packet" checks again (the task hooks' epoch).
   * NULL when nobody does. Set through cts__mprof_ring_on_flush(). */
  void (*on_flush)(void);
  cts_write_cb sink;
  void *sink_user_data;
  /* Written by any thread; kept away from the read-mostly fields above. */
  CTS_UNUSED uint8_t pad0[64];
  uint64_t next_seq;
  uint64_t dropped;
  uint32_t tokens;       /* the last explicit writer token handed out (cts_mprof_writer_init) */
  uint32_t held;         /* packets owned by writers */
  uint32_t shared_token; /* the shared writer's token, 0 if none (cts__mprof_ring_share) */
  int sink_err;
  CTS_UNUSED uint8_t pad1[64];
  /* npackets owner tokens (0 = free) then npackets sequence numbers */
  uint64_t tail[];
};

static inline uint32_t *ring_owner(cts_mprof_ring_t *r) {
  return (uint32_t *)(void *)r->tail;
}
static inline uint64_t *ring_seq(cts_mprof_ring_t *r) {
  return r->tail + (r->npackets + 1) / 2;
}

/* Writer tokens (the owner word of a taken packet): explicit writers count up from 1 in
 * their ring (unique among that ring's writers); writers attached with a token of their own
 * (the task hooks, whose tokens must stay unique across rings that reuse the same memory)
 * use the upper half, so the two never collide in one ring. */
#define CTS__MPROF_TOKEN_HOSTED 0x80000000u

/* Counts an event that was dropped (cts_mprof_ring_dropped()). A writer with a hosted
 * token is not counted by the ring when it finds no packet: its caller may still place
 * the event elsewhere, and counts it through this when it cannot. */
static inline void cts__mprof_ring_count_drop(cts_mprof_ring_t *r) {
  __atomic_fetch_add(&r->dropped, 1, __ATOMIC_RELAXED);
}

/* Attaches @p w to @p ring with owner token @p token (non-zero). */
void cts__mprof_writer_attach(cts_mprof_writer_t *w, cts_mprof_ring_t *ring, uint32_t token);
/* Sends the writer's packet to the sink and gives it back (no-op without one). */
void cts__mprof_writer_release(cts_mprof_writer_t *w);
/* Names the writer with @p token (hosted) as the ring's shared writer (0: none): other
 * hosted writers then leave one packet free for it, so that when they find no packet of
 * their own it still has one to write their events into (task_hooks.c). */
void cts__mprof_ring_share(cts_mprof_ring_t *ring, uint32_t token);
/* Registers @p fn to be called at the end of every cts_mprof_ring_flush() of @p ring. */
void cts__mprof_ring_on_flush(cts_mprof_ring_t *ring, void (*fn)(void));
/* Any event kind, with strings; the fixed-size kinds are faster through encode_fixed(). */
int cts__mprof_encode(cts_mprof_writer_t *w, uint64_t time_ns, unsigned id, int64_t thread,
                      uint64_t arg, int64_t value, uint8_t type, const char *str);

/* Where an event goes: the packet and the offset in it, kept in registers from reserve()
 * to commit() (stores through the event's byte pointer may alias the writer, so a field
 * read after them would be read from memory again). */
typedef struct slot {
  uint8_t *packet;
  uint32_t pos;
} slot_t;

/* Takes a new packet when the event of @p size bytes does not fit (§3.3: an event must
 * leave one byte free, the test is >=); packet NULL when the event is dropped. Returned by
 * value: two registers, nothing spilled on the fast path. */
CTS_NOINLINE slot_t cts__mprof_reserve_slow(cts_mprof_writer_t *w, uint32_t size);

static CTS_FORCE_INLINE slot_t reserve(cts_mprof_writer_t *w, uint32_t size) {
  const slot_t s = {w->packet, w->pos};
  if (CTS_LIKELY(s.pos + size < w->len)) return s; /* len is 0 without a packet */
  return cts__mprof_reserve_slow(w, size);
}

/* Publishes the event after its bytes: a live reader or a crash never exposes half an
 * event (mirage-profile publishes first; the final bytes are the same). */
static CTS_FORCE_INLINE void commit(cts_mprof_writer_t *w, const slot_t *s, uint32_t size) {
  const uint32_t end = s->pos + size;
  /* The event lies in the writer's own packet and leaves its last byte free (§3.3). */
  CTS_ASSERT(s->packet == w->packet && s->pos >= MPROF_HEADER && end < w->len);
  w->pos = end;
  __atomic_thread_fence(__ATOMIC_RELEASE);
  cts_st_le32(s->packet + MPROF_OFF_CONTENT_SIZE, end * 8u);
}

static CTS_FORCE_INLINE uint64_t ring_now(const cts_mprof_ring_t *r) {
#if CTS_HAVE_CPU_COUNTER
  if (CTS_LIKELY(r->tsc.mult != 0)) return cts__tsc_to_ns(&r->tsc, cts__cpu_counter());
#endif
  return r->clock(r->clock_user_data);
}

static CTS_FORCE_INLINE uint64_t event_time(const cts_mprof_writer_t *w, uint64_t time_ns) {
  return time_ns == CTS_TIME_NOW ? ring_now(w->ring) : time_ns;
}

/* Writes the event header (§2.4: timestamp, id) at the slot; returns where the rest goes.
 * Called once the event has a slot, so a dropped event costs no clock read. */
static CTS_FORCE_INLINE uint8_t *event_header(const cts_mprof_writer_t *w, const slot_t *s,
                                              uint64_t time_ns, unsigned id) {
  const uint64_t now = event_time(w, time_ns);
  uint8_t *p = s->packet + s->pos;
  cts_st_le64(p, now);
  p[8] = (uint8_t)id;
  return p + MPROF_EVENT_HEADER;
}

/* The fixed-size kinds, specialised when @p id is a constant (§2.5). */
static CTS_FORCE_INLINE int encode_fixed(cts_mprof_writer_t *w, uint64_t time_ns, unsigned id,
                                         int64_t thread, uint64_t word, uint8_t type) {
  const cts__mprof_layout_t l = cts__mprof_layouts[id];
  const uint32_t size = cts__mprof_fixed_size(id);
  const slot_t s = reserve(w, size);
  if (CTS_UNLIKELY(!s.packet)) return CTS_E_LIMIT;
  uint8_t *p = event_header(w, &s, time_ns, id);
  if (l.context) {
    cts_st_le64(p, (uint64_t)thread);
    p += 8;
  }
  if (l.word) {
    cts_st_le64(p, word);
    p += 8;
  }
  if (l.type_byte) *p = type;
  commit(w, &s, size);
  return 0;
}

/* A thread type as written by the hooks: above 17 it becomes Unknown (99), as in
 * mirage-profile. */
static inline uint8_t wire_type(unsigned type) {
  return type <= CTS_TASK_SWITCH ? (uint8_t)type : (uint8_t)CTS_TASK_UNKNOWN;
}

#endif /* CTS_CORE_MPROF_WRITER_H */
