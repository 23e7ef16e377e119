/* SPDX-License-Identifier: MIT */
/* mirage-profile ring writer (docs/formats/mprof.md §3).
 *
 * Concurrency design (see tasks.h): every writer owns one packet at a time. A packet is
 * taken by a fetch-add on the ring's sequence counter and a compare-and-swap of the
 * packet's owner word, and given back by a release store; between the two only its owner
 * touches the packet's bytes, so the event path has no atomic read-modify-write. Nothing
 * here allocates, calls the OS or keeps state outside the caller's ring memory: the
 * process-wide task hooks built on it live in src/tasks/. */
#include "mprof_writer.h"

#include <string.h>

_Static_assert(sizeof(struct cts_mprof_ring) + 4u <= CTS_MPROF_RING_STATE_SIZE(0),
               "CTS_MPROF_RING_STATE_SIZE must cover the ring state");

static const char *const event_names[CTS_MPROF_EVENT_IDS] = {"creates",
                                                             "read",
                                                             "fulfills",
                                                             "fails",
                                                             "becomes",
                                                             "label",
                                                             "increase",
                                                             "switch",
                                                             "gc",
                                                             "signal",
                                                             "try_read",
                                                             "counter",
                                                             "read_later",
                                                             "signal_noswitch",
                                                             "ctfscope_alloc",
                                                             "ctfscope_anchor",
                                                             "ctfscope_lost"};

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
  cts_st_le32(p + MPROF_OFF_MAGIC, MPROF_MAGIC);
  memcpy(p + MPROF_OFF_UUID, cts__mprof_uuid, sizeof cts__mprof_uuid);
  cts_st_le32(p + MPROF_OFF_PACKET_SIZE, len * 8u);
  cts_st_le16(p + MPROF_OFF_COUNT, count);
  cts_st_le32(p + MPROF_OFF_CONTENT_SIZE, CONTENT_EMPTY_BITS);
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
  CTS_ASSERT(used <= len && (len == r->packet_len || len == r->last_len));
  if (!r->sink || used <= MPROF_HEADER) return;
  if (__atomic_load_n(&r->sink_err, __ATOMIC_RELAXED)) return;
  cts_st_le32(p + MPROF_OFF_PACKET_SIZE, used * 8u);
  const int err = r->sink(r->sink_user_data, p, used);
  cts_st_le32(p + MPROF_OFF_PACKET_SIZE, len * 8u);
  if (err) {
    int none = 0;
    __atomic_compare_exchange_n(&r->sink_err, &none, err, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
  }
}

void cts__mprof_writer_release(cts_mprof_writer_t *w) {
  cts_mprof_ring_t *r = w->ring;
  if (!w->packet) return;
  CTS_ASSERT(w->index < r->npackets && w->pos < w->len && w->generation != 0);
  CTS_ASSERT(w->packet == r->buffer + (size_t)w->index * r->packet_len);
  send_packet(r, w->packet, w->len, w->pos);
  uint32_t mine = w->generation;
  /* A flush may have taken the packet back already: then it is not ours to free. */
  if (__atomic_compare_exchange_n(&ring_owner(r)[w->index], &mine, 0, false, __ATOMIC_RELEASE,
                                  __ATOMIC_RELAXED))
    __atomic_sub_fetch(&r->held, 1, __ATOMIC_RELAXED);
  w->packet = NULL;
  w->len = 0; /* invariant: len is 0 without a packet, so reserve() needs one test */
}

/* Takes the next packet in sequence that no other writer holds (§3.3: it gets the next
 * count and an empty content). Returns 0 or CTS_E_LIMIT when all are taken. */
static CTS_NOINLINE int acquire_packet(cts_mprof_writer_t *w) {
  cts_mprof_ring_t *r = w->ring;
  cts__mprof_writer_release(w);
  uint32_t *owner = ring_owner(r);
  /* With a shared writer (cts__mprof_ring_share), the other hosted writers leave it one
   * packet: they count themselves in first, so that no race takes the last one. */
  const uint32_t shared = __atomic_load_n(&r->shared_token, __ATOMIC_RELAXED);
  const uint32_t limit =
      shared && (w->generation & CTS__MPROF_TOKEN_HOSTED) && w->generation != shared
          ? r->npackets - 1
          : r->npackets;
  if (__atomic_add_fetch(&r->held, 1, __ATOMIC_RELAXED) > limit) {
    __atomic_sub_fetch(&r->held, 1, __ATOMIC_RELAXED);
    return CTS_E_LIMIT;
  }
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
    /* Won the packet: no one else touches it until it is given back. */
    CTS_ASSERT(index < r->npackets && w->generation != 0);
    uint8_t *p = r->buffer + (size_t)index * r->packet_len;
    __atomic_store_n(&ring_seq(r)[index], seq, __ATOMIC_RELAXED);
    cts_st_le16(p + MPROF_OFF_COUNT, (uint16_t)seq);
    cts_st_le32(p + MPROF_OFF_CONTENT_SIZE, CONTENT_EMPTY_BITS);
    w->packet = p;
    w->index = index;
    w->len = index + 1 == r->npackets ? r->last_len : r->packet_len;
    w->pos = MPROF_HEADER;
    return 0;
  }
  __atomic_sub_fetch(&r->held, 1, __ATOMIC_RELAXED);
  return CTS_E_LIMIT;
}

void cts__mprof_ring_share(cts_mprof_ring_t *ring, uint32_t token) {
  __atomic_store_n(&ring->shared_token, token, __ATOMIC_RELAXED);
}

/* A token unique among this ring's explicit writers: the lower half of the token space,
 * skipping 0 (a free packet). */
static uint32_t next_writer_token(cts_mprof_ring_t *r) {
  uint32_t t;
  do t = __atomic_add_fetch(&r->tokens, 1, __ATOMIC_RELAXED) & (CTS__MPROF_TOKEN_HOSTED - 1u);
  while (t == 0);
  CTS_ASSERT(t != 0 && (t & CTS__MPROF_TOKEN_HOSTED) == 0);
  return t;
}

void cts__mprof_writer_attach(cts_mprof_writer_t *w, cts_mprof_ring_t *ring, uint32_t token) {
  CTS_ASSERT(token != 0); /* 0 marks a free packet */
  memset(w, 0, sizeof *w);
  w->ring = ring;
  w->generation = token;
  w->current = CTS_TASK_NONE;
}

void cts_mprof_writer_init(cts_mprof_writer_t *w, cts_mprof_ring_t *ring) {
  cts__mprof_writer_attach(w, ring, ring ? next_writer_token(ring) : 1u);
}

void cts_mprof_writer_fini(cts_mprof_writer_t *w) {
  if (w->ring) cts__mprof_writer_release(w);
}

CTS_NOINLINE slot_t cts__mprof_reserve_slow(cts_mprof_writer_t *w, uint32_t size) {
  if (acquire_packet(w) != 0 || w->pos + size >= w->len) {
    /* The task hooks' writers fall back on a shared packet and count only what that
     * cannot take either (task_hooks.c, overflow()). */
    if (!(w->generation & CTS__MPROF_TOKEN_HOSTED))
      __atomic_fetch_add(&w->ring->dropped, 1, __ATOMIC_RELAXED);
    return (slot_t){NULL, 0};
  }
  return (slot_t){w->packet, w->pos};
}

/* Any kind. A string that would not fit even an empty packet is cut short rather than
 * dropped: a label is worth more than nothing. */
int cts__mprof_encode(cts_mprof_writer_t *w, uint64_t time_ns, unsigned id, int64_t thread,
                      uint64_t arg, int64_t value, uint8_t type, const char *str) {
  const cts__mprof_layout_t l = cts__mprof_layouts[id];
  const uint64_t word = cts__mprof_word_is_value(id) ? (uint64_t)value : arg;
  if (!l.string) return encode_fixed(w, time_ns, id, thread, word, type);
  size_t slen = str ? strlen(str) : 0;
  const uint32_t fixed = cts__mprof_fixed_size(id);
  const uint32_t room = w->ring->packet_len - MPROF_HEADER - 1; /* the smallest packet */
  if (fixed + slen > room) slen = room - fixed;
  const uint32_t size = fixed + (uint32_t)slen;
  CTS_ASSERT(size + MPROF_HEADER < w->ring->packet_len); /* fits any empty packet */
  const slot_t s = reserve(w, size);
  if (CTS_UNLIKELY(!s.packet)) return CTS_E_LIMIT;
  uint8_t *p = event_header(w, &s, time_ns, id);
  cts_st_le64(p, (uint64_t)thread);
  p += 8;
  if (l.word) {
    cts_st_le64(p, word);
    p += 8;
  }
  if (slen && str) memcpy(p, str, slen);
  p[slen] = 0;
  commit(w, &s, size);
  return 0;
}

int cts_mprof_writer_write(cts_mprof_writer_t *w, const cts_mprof_event_t *ev) {
  if (!w || !w->ring || !ev || ev->id >= CTS_MPROF_EVENT_IDS) return CTS_E_INVAL;
  /* Written as given (99 stays 99): the converter must reproduce what it read. */
  return cts__mprof_encode(w, ev->time_ns, ev->id, ev->thread, ev->arg, ev->value, ev->thread_type,
                           ev->str);
}

void cts__mprof_ring_on_flush(cts_mprof_ring_t *ring, void (*fn)(void)) {
  __atomic_store_n(&ring->on_flush, fn, __ATOMIC_RELEASE);
}

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
    CTS_ASSERT(best < r->npackets && seqs[best] >= done_below);
    uint8_t *p = r->buffer + (size_t)best * r->packet_len;
    const uint32_t len = best + 1 == r->npackets ? r->last_len : r->packet_len;
    send_packet(r, p, len, cts_ld_le32(p + MPROF_OFF_CONTENT_SIZE) / 8u);
    done_below = seqs[best] + 1;
    __atomic_store_n(&owner[best], 0, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&r->held, 1, __ATOMIC_RELAXED);
  }
  void (*on_flush)(void) = __atomic_load_n(&r->on_flush, __ATOMIC_ACQUIRE);
  if (on_flush) on_flush(); /* e.g. hook threads re-check which packets they still own */
  return __atomic_load_n(&r->sink_err, __ATOMIC_RELAXED);
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
    "\t\tctfscope_alloc = 14,\n\t\tctfscope_anchor = 15,\n\t\tctfscope_lost = 16,\n"
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
    "\tfields := struct {\n\t\tuint64_t source;\n\t};\n};\n\n"
    /* ctfscope's extensions (docs/formats/mprof.md §14): readers that go by the metadata
     * (babeltrace2) read them; mirage-trace-viewer does not know these ids. */
    "event {\n\tname = ctfscope_alloc;\n\tid = 14;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t object_id;\n\t};\n};\n\n"
    "event {\n\tname = ctfscope_anchor;\n\tid = 15;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t realtime_ns;\n\t};\n};\n\n"
    "event {\n\tname = ctfscope_lost;\n\tid = 16;\n\tcontext := struct thread_context;\n"
    "\tfields := struct {\n\t\tuint64_t dropped;\n\t};\n};\n";

const char *cts_mprof_metadata(void) {
  return metadata;
}
