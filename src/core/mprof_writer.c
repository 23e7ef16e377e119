/* SPDX-License-Identifier: MIT */
/* mirage-profile ring writer (docs/formats/mprof.md §3) and the task-tracing hooks.
 *
 * Concurrency design (see tasks.h): every writer owns one packet at a time. A packet is
 * taken by a fetch-add on the ring's sequence counter and a compare-and-swap of the
 * packet's owner word, and given back by a release store; between the two only its owner
 * touches the packet's bytes, so the event path has no atomic read-modify-write. Nothing
 * here allocates or calls the OS. */
#include <ctfscope/errors.h>
#include <ctfscope/tasks.h>

#include <string.h>

#include "../common/compiler.h"
#include "../common/cpu_counter.h"
#include "mprof_wire.h"

#define RING_MAGIC         0x4d50524eu
#define CONTENT_EMPTY_BITS (MPROF_HEADER * 8u)

#if defined(__GNUC__)
#define TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define TLS_IE
#endif

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
  cts_write_cb sink;
  void *sink_user_data;
  /* Written by any thread; kept away from the read-mostly fields above. */
  CTS_UNUSED uint8_t pad0[64];
  uint64_t next_seq;
  uint64_t dropped;
  int sink_err;
  CTS_UNUSED uint8_t pad1[64];
  /* npackets owner tokens (0 = free) then npackets sequence numbers */
  uint64_t tail[];
};

static uint32_t *ring_owner(cts_mprof_ring_t *r) {
  return (uint32_t *)(void *)r->tail;
}
static uint64_t *ring_seq(cts_mprof_ring_t *r) {
  return r->tail + (r->npackets + 1) / 2;
}

static const char *const event_names[CTS_MPROF_EVENT_IDS] = {
    "creates", "read", "fulfills", "fails",    "becomes", "label",      "increase",
    "switch",  "gc",   "signal",   "try_read", "counter", "read_later", "signal_noswitch"};

static const char *const type_names[] = {
    "Wait",   "Task",          "Bind",      "Try",        "Choose",     "Pick",
    "Join",   "Map",           "Condition", "On_success", "On_failure", "On_termination",
    "On_any", "Ignore_result", "Async",     "Promise",    "Semaphore",  "Switch"};

const char *cts_mprof_event_name(unsigned id) {
  return id < CTS_MPROF_EVENT_IDS ? event_names[id] : NULL;
}

const char *cts_task_type_name(unsigned type) {
  return type < CTS_ARRAY_SIZE(type_names) ? type_names[type] : "Unknown";
}

void cts_mprof_ring_config_init(cts_mprof_ring_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->packets = CTS_MPROF_DEFAULT_PACKETS;
}

static size_t state_size(uint32_t packets) {
  return sizeof(struct cts_mprof_ring) + 4u * ((size_t)packets + 1) + 8u * (size_t)packets;
}

static void write_header(uint8_t *p, uint32_t len, uint16_t count) {
  mprof_st32(p + MPROF_OFF_MAGIC, MPROF_MAGIC);
  memcpy(p + MPROF_OFF_UUID, mprof_uuid, sizeof mprof_uuid);
  mprof_st32(p + MPROF_OFF_PACKET_SIZE, len * 8u);
  mprof_st16(p + MPROF_OFF_COUNT, count);
  mprof_st32(p + MPROF_OFF_CONTENT_SIZE, CONTENT_EMPTY_BITS);
}

int cts_mprof_ring_init(cts_mprof_ring_t **out, void *state, size_t state_bytes,
                        const cts_mprof_ring_config_t *cfg) {
  if (!out || !state || !cfg || cfg->struct_size < sizeof *cfg || !cfg->buffer || !cfg->clock ||
      cfg->packets == 0 || cfg->packets > CTS_MPROF_MAX_PACKETS || ((uintptr_t)state & 7u) != 0 ||
      state_bytes < state_size(cfg->packets))
    return CTS_E_INVAL;
  const size_t packet_len = cfg->buffer_size / cfg->packets;
  const size_t last_len = cfg->buffer_size - packet_len * (cfg->packets - 1);
  /* packet_size is a u32 count of bits */
  if (packet_len < CTS_MPROF_MIN_PACKET_SIZE || last_len > UINT32_MAX / 8u) return CTS_E_INVAL;
  memset(state, 0, state_size(cfg->packets));
  cts_mprof_ring_t *r = state;
  r->magic = RING_MAGIC;
  r->npackets = cfg->packets;
  r->packet_len = (uint32_t)packet_len;
  r->last_len = (uint32_t)last_len;
  r->buffer = cfg->buffer;
  r->size = cfg->buffer_size;
  r->clock = cfg->clock;
  r->clock_user_data = cfg->clock_user_data;
#if CTS_HAVE_CPU_COUNTER
  r->tsc = cfg->tsc;
#endif
  r->sink = cfg->sink;
  r->sink_user_data = cfg->sink_user_data;
  for (uint32_t i = 0; i < r->npackets; i++) {
    write_header(r->buffer + (size_t)i * packet_len,
                 i + 1 == r->npackets ? r->last_len : r->packet_len, (uint16_t)i);
    ring_seq(r)[i] = i;
  }
  *out = r;
  return 0;
}

uint64_t cts_mprof_ring_dropped(const cts_mprof_ring_t *ring) {
  return __atomic_load_n(&ring->dropped, __ATOMIC_RELAXED);
}

uint64_t cts_mprof_ring_packets_started(const cts_mprof_ring_t *ring) {
  return __atomic_load_n(&ring->next_seq, __ATOMIC_RELAXED);
}

/* Hands a finished packet to the sink as a packet of exactly its content. The owner is
 * the only one touching it, so the header can be patched and restored in place. */
static void send_packet(cts_mprof_ring_t *r, uint8_t *p, uint32_t len, uint32_t used) {
  if (!r->sink || used <= MPROF_HEADER) return;
  if (__atomic_load_n(&r->sink_err, __ATOMIC_RELAXED)) return;
  mprof_st32(p + MPROF_OFF_PACKET_SIZE, used * 8u);
  const int err = r->sink(r->sink_user_data, p, used);
  mprof_st32(p + MPROF_OFF_PACKET_SIZE, len * 8u);
  if (err) {
    int none = 0;
    __atomic_compare_exchange_n(&r->sink_err, &none, err, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
  }
}

static void release_packet(cts_mprof_writer_t *w) {
  cts_mprof_ring_t *r = w->ring;
  if (!w->packet) return;
  send_packet(r, w->packet, w->len, w->pos);
  uint32_t mine = w->generation;
  /* A flush may have taken the packet back already: then it is not ours to free. */
  __atomic_compare_exchange_n(&ring_owner(r)[w->index], &mine, 0, false, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
  w->packet = NULL;
  w->len = 0; /* invariant: len is 0 without a packet, so reserve() needs one test */
}

/* Takes the next packet in sequence that no other writer holds (§3.3: it gets the next
 * count and an empty content). Returns 0 or CTS_E_LIMIT when all are taken. */
static CTS_NOINLINE int acquire_packet(cts_mprof_writer_t *w) {
  cts_mprof_ring_t *r = w->ring;
  release_packet(w);
  uint32_t *owner = ring_owner(r);
  for (uint32_t tries = 0; tries < r->npackets; tries++) {
    /* Peek first so that a full ring does not burn sequence numbers on every event. */
    const uint64_t peek = __atomic_load_n(&r->next_seq, __ATOMIC_RELAXED);
    if (__atomic_load_n(&owner[peek % r->npackets], __ATOMIC_RELAXED) != 0) {
      bool any_free = false;
      for (uint32_t i = 0; i < r->npackets && !any_free; i++)
        any_free = __atomic_load_n(&owner[i], __ATOMIC_RELAXED) == 0;
      if (!any_free) break;
    }
    const uint64_t seq = __atomic_fetch_add(&r->next_seq, 1, __ATOMIC_RELAXED);
    const uint32_t index = (uint32_t)(seq % r->npackets);
    uint32_t expected = 0;
    if (!__atomic_compare_exchange_n(&owner[index], &expected, w->generation, false,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      continue;
    uint8_t *p = r->buffer + (size_t)index * r->packet_len;
    __atomic_store_n(&ring_seq(r)[index], seq, __ATOMIC_RELAXED);
    mprof_st16(p + MPROF_OFF_COUNT, (uint16_t)seq);
    mprof_st32(p + MPROF_OFF_CONTENT_SIZE, CONTENT_EMPTY_BITS);
    w->packet = p;
    w->index = index;
    w->len = index + 1 == r->npackets ? r->last_len : r->packet_len;
    w->pos = MPROF_HEADER;
    return 0;
  }
  return CTS_E_LIMIT;
}

static uint32_t next_writer_token(void) {
  static uint32_t tokens;
  uint32_t t;
  do t = __atomic_add_fetch(&tokens, 1, __ATOMIC_RELAXED);
  while (t == 0);
  return t;
}

void cts_mprof_writer_init(cts_mprof_writer_t *w, cts_mprof_ring_t *ring) {
  memset(w, 0, sizeof *w);
  w->ring = ring;
  w->generation = next_writer_token();
  w->current = CTS_TASK_NONE;
}

void cts_mprof_writer_fini(cts_mprof_writer_t *w) {
  if (w->ring) release_packet(w);
}

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
static CTS_NOINLINE slot_t reserve_slow(cts_mprof_writer_t *w, uint32_t size) {
  if (acquire_packet(w) != 0 || w->pos + size >= w->len) {
    __atomic_fetch_add(&w->ring->dropped, 1, __ATOMIC_RELAXED);
    return (slot_t){NULL, 0};
  }
  return (slot_t){w->packet, w->pos};
}

static CTS_FORCE_INLINE slot_t reserve(cts_mprof_writer_t *w, uint32_t size) {
  const slot_t s = {w->packet, w->pos};
  if (CTS_LIKELY(s.pos + size < w->len)) return s; /* len is 0 without a packet */
  return reserve_slow(w, size);
}

/* Publishes the event after its bytes: a live reader or a crash never exposes half an
 * event (mirage-profile publishes first; the final bytes are the same). */
static CTS_FORCE_INLINE void commit(cts_mprof_writer_t *w, const slot_t *s, uint32_t size) {
  const uint32_t end = s->pos + size;
  w->pos = end;
  __atomic_thread_fence(__ATOMIC_RELEASE);
  mprof_st32(s->packet + MPROF_OFF_CONTENT_SIZE, end * 8u);
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

/* The fixed-size kinds, specialised when @p id is a constant (§2.5). */
static CTS_FORCE_INLINE int encode_fixed(cts_mprof_writer_t *w, uint64_t time_ns, unsigned id,
                                         int64_t thread, uint64_t word, uint8_t type) {
  const mprof_layout_t l = mprof_layouts[id];
  const uint32_t size = mprof_fixed_size(id);
  const slot_t s = reserve(w, size);
  if (CTS_UNLIKELY(!s.packet)) return CTS_E_LIMIT;
  const uint64_t now = event_time(w, time_ns);
  uint8_t *p = s.packet + s.pos;
  mprof_st64(p, now);
  p[8] = (uint8_t)id;
  p += MPROF_EVENT_HEADER;
  if (l.context) {
    mprof_st64(p, (uint64_t)thread);
    p += 8;
  }
  if (l.word) {
    mprof_st64(p, word);
    p += 8;
  }
  if (l.type_byte) *p = type;
  commit(w, &s, size);
  return 0;
}

/* Any kind. A string that would not fit even an empty packet is cut short rather than
 * dropped: a label is worth more than nothing. */
static int encode(cts_mprof_writer_t *w, uint64_t time_ns, unsigned id, int64_t thread,
                  uint64_t arg, int64_t value, uint8_t type, const char *str) {
  const mprof_layout_t l = mprof_layouts[id];
  const uint64_t word = mprof_word_is_value(id) ? (uint64_t)value : arg;
  if (!l.string) return encode_fixed(w, time_ns, id, thread, word, type);
  size_t slen = str ? strlen(str) : 0;
  const uint32_t fixed = mprof_fixed_size(id);
  const uint32_t room = w->ring->packet_len - MPROF_HEADER - 1; /* the smallest packet */
  if (fixed + slen > room) slen = room - fixed;
  const uint32_t size = fixed + (uint32_t)slen;
  const slot_t s = reserve(w, size);
  if (CTS_UNLIKELY(!s.packet)) return CTS_E_LIMIT;
  const uint64_t now = event_time(w, time_ns);
  uint8_t *p = s.packet + s.pos;
  mprof_st64(p, now);
  p[8] = (uint8_t)id;
  p += MPROF_EVENT_HEADER;
  mprof_st64(p, (uint64_t)thread);
  p += 8;
  if (l.word) {
    mprof_st64(p, word);
    p += 8;
  }
  if (slen && str) memcpy(p, str, slen);
  p[slen] = 0;
  commit(w, &s, size);
  return 0;
}

static uint8_t wire_type(unsigned type) {
  return type <= CTS_TASK_SWITCH ? (uint8_t)type : (uint8_t)CTS_TASK_UNKNOWN;
}

int cts_mprof_writer_write(cts_mprof_writer_t *w, const cts_mprof_event_t *ev) {
  if (!w || !w->ring || !ev || ev->id >= CTS_MPROF_EVENT_IDS) return CTS_E_INVAL;
  /* Written as given (99 stays 99): the converter must reproduce what it read. */
  return encode(w, ev->time_ns, ev->id, ev->thread, ev->arg, ev->value, ev->thread_type, ev->str);
}

static void bump_epoch(void);

/* Sends the owned packets in sequence order and frees them; writers that still think they
 * own one notice through the owner word (explicit writers must be re-initialised). */
int cts_mprof_ring_flush(cts_mprof_ring_t *r) {
  if (!r || r->magic != RING_MAGIC) return CTS_E_INVAL;
  uint32_t *owner = ring_owner(r);
  const uint64_t *seqs = ring_seq(r);
  uint64_t done_below = 0;
  for (;;) { /* selection by smallest sequence: flush is rare and rings are small */
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < r->npackets; i++) {
      if (__atomic_load_n(&owner[i], __ATOMIC_ACQUIRE) == 0 || seqs[i] < done_below) continue;
      if (best == UINT32_MAX || seqs[i] < seqs[best]) best = i;
    }
    if (best == UINT32_MAX) break;
    uint8_t *p = r->buffer + (size_t)best * r->packet_len;
    const uint32_t len = best + 1 == r->npackets ? r->last_len : r->packet_len;
    send_packet(r, p, len, mprof_ld32(p + MPROF_OFF_CONTENT_SIZE) / 8u);
    done_below = seqs[best] + 1;
    __atomic_store_n(&owner[best], 0, __ATOMIC_RELEASE);
  }
  bump_epoch(); /* hook threads re-check which packets they still own */
  return __atomic_load_n(&r->sink_err, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------------------ */
/* Process-wide task hooks: a thread-local writer attached to the started ring.          */

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
  if (!ring) return NULL;
  cts_mprof_writer_t *w = &tls_writer;
  const bool owned =
      w->ring == ring && w->packet &&
      __atomic_load_n(&ring_owner(ring)[w->index], __ATOMIC_RELAXED) == w->generation;
  if (w->ring != ring || tls_starts != starts) {
    if (owned) release_packet(w);
    cts_mprof_writer_init(w, ring);
    tls_starts = starts;
  } else if (!owned) {
    w->packet = NULL; /* flushed away */
    w->len = 0;
  }
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
  encode(w, CTS_TIME_NOW, id, thread, arg, value, type, str);
}

int cts_task_start(cts_mprof_ring_t *ring) {
  if (!ring || ring->magic != RING_MAGIC) return CTS_E_INVAL;
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
  if (w) release_packet(w);
}

void cts_task_thread_exit(void) {
  cts_mprof_writer_t *w = thread_writer();
  if (w) release_packet(w);
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

/* ------------------------------------------------------------------------------------ */
/* Metadata (§2, §12): mirage-profile's with version 1.8, a declared clock, the sequence
 * field under its CTF name, and the 2021 extensions. */

static const char metadata[] =
    "/* CTF 1.8 */\n"
    "/* mirage-profile task trace, as written by ctfscope (byte layout of mirage-profile\n"
    "   e6da34d; ids 12-13 and thread types 15-17 from mirage-trace-viewer/eio). */\n"
    "typealias integer { size = 8; align = 8; signed = false; base = 10; } := uint8_t;\n"
    "typealias integer { size = 16; align = 8; signed = false; base = 10; } := uint16_t;\n"
    "typealias integer { size = 32; align = 8; signed = false; base = 10; } := uint32_t;\n"
    "typealias integer { size = 64; align = 8; signed = false; base = hex; } := uint64_t;\n"
    "typealias integer { size = 64; align = 8; signed = true; base = 10; } := int64_t;\n"
    "\n"
    "trace {\n"
    "\tmajor = 1;\n"
    "\tminor = 8;\n"
    "\tuuid = \"05883b8d-521a-487b-b397-456ab150680c\";\n"
    "\tbyte_order = le;\n"
    "\tpacket.header := struct {\n"
    "\t\tuint32_t magic;\n"
    "\t\tuint8_t  uuid[16];\n"
    "\t};\n"
    "};\n"
    "\n"
    "clock {\n"
    "\tname = monotonic;\n"
    "\tdescription = \"monotonic clock, nanoseconds, arbitrary epoch\";\n"
    "\tfreq = 1000000000;\n"
    "\toffset = 0;\n"
    "};\n"
    "\n"
    "typealias integer { size = 64; align = 8; signed = false; base = 10;\n"
    "\tmap = clock.monotonic.value; } := uint64_clock_monotonic_t;\n"
    "\n"
    "enum thread_type : uint8_t {\n"
    "\tWait = 0,\n\tTask = 1,\n\tBind = 2,\n\tTry = 3,\n\tChoose = 4,\n\tPick = 5,\n"
    "\tJoin = 6,\n\tMap = 7,\n\tCondition = 8,\n\tOn_success = 9,\n\tOn_failure = 10,\n"
    "\tOn_termination = 11,\n\tOn_any = 12,\n\tIgnore_result = 13,\n\tAsync = 14,\n"
    "\tPromise = 15,\n\tSemaphore = 16,\n\tSwitch = 17,\n\tUnknown = 99,\n"
    "};\n"
    "\n"
    "struct event_header {\n"
    "\tuint64_clock_monotonic_t timestamp;\n"
    "\tenum : uint8_t {\n"
    "\t\tcreates = 0,\n\t\tread = 1,\n\t\tfulfills = 2,\n\t\tfails = 3,\n\t\tbecomes = 4,\n"
    "\t\tlabel = 5,\n\t\tincrease = 6,\n\t\tswitch = 7,\n\t\tgc = 8,\n\t\tsignal = 9,\n"
    "\t\ttry_read = 10,\n\t\tcounter = 11,\n\t\tread_later = 12,\n"
    "\t\tsignal_noswitch = 13,\n"
    "\t} id;\n"
    "} align (8);\n"
    "\n"
    "struct thread_context {\n"
    "\tuint64_t thread;\n"
    "} align (8);\n"
    "\n"
    "stream {\n"
    "\tpacket.context := struct {\n"
    "\t\tuint32_t packet_size;\n"
    "\t\tuint16_t packet_seq_num;\n"
    "\t\tuint32_t content_size;\n"
    "\t};\n"
    "\tevent.header := struct event_header;\n"
    "};\n"
    "\n"
    "event {\n\tname = creates;\n\tid = 0;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t child;\n\t\tenum thread_type thread_type;\n\t};\n};\n\n"
    "event {\n\tname = read;\n\tid = 1;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t source;\n\t};\n};\n\n"
    "event {\n\tname = fulfills;\n\tid = 2;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t resolvee;\n\t};\n};\n\n"
    "event {\n\tname = fails;\n\tid = 3;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t resolvee;\n\t\tstring exn;\n\t};\n};\n\n"
    "event {\n\tname = becomes;\n\tid = 4;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t sleeper;\n\t};\n};\n\n"
    "event {\n\tname = label;\n\tid = 5;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tstring label;\n\t};\n};\n\n"
    "event {\n\tname = increase;\n\tid = 6;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tint64_t amount;\n\t\tstring counter;\n\t};\n};\n\n"
    "event {\n\tname = switch;\n\tid = 7;\n\tcontext := struct thread_context;\n};\n\n"
    "event {\n\tname = gc;\n\tid = 8;\n"
    "\tfields := struct {\n\t\tuint64_t duration_ns;\n\t};\n};\n\n"
    "event {\n\tname = signal;\n\tid = 9;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t source;\n\t};\n};\n\n"
    "event {\n\tname = try_read;\n\tid = 10;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t source;\n\t};\n};\n\n"
    "event {\n\tname = counter;\n\tid = 11;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tint64_t value;\n\t\tstring counter;\n\t};\n};\n\n"
    "event {\n\tname = read_later;\n\tid = 12;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t source;\n\t};\n};\n\n"
    "event {\n\tname = signal_noswitch;\n\tid = 13;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t source;\n\t};\n};\n";

const char *cts_mprof_metadata(void) {
  return metadata;
}
