/* SPDX-License-Identifier: MIT */
/**
 * @file tasks.h
 * Task tracing in the mirage-profile model: an event loop, promise or coroutine library
 * calls these hooks, and the events go into a mirage-profile CTF ring (the format read by
 * mirage-trace-viewer and, with our metadata, by babeltrace2). Format reference:
 * docs/formats/mprof.md (section numbers cited as §N). How the ring and the hooks work,
 * and why, with an example: docs/tasks.md.
 *
 * Tasks: anything that can wait and be resolved (a promise, a future, a coroutine). Ids
 * are signed 64-bit: 0 is the initial context, -1 (CTS_TASK_NONE) means "nothing running"
 * (idle); cts_task_new_id() hands out 1, 2, 3..., never reused.
 *
 * Cost: with CTS_TASKS_DISABLE defined before this header, every hook expands to nothing
 * (arguments unevaluated; counters still keep their values) and the object references no
 * cts symbol. Compiled in but not started, a hook is one relaxed atomic load and an
 * unlikely branch.
 *
 * Threads: every hook is thread-safe. Each OS thread writes into a packet of the ring it
 * owns exclusively and has its own current task. When no packet is free, the cts_task_*
 * hooks write through the ring's one shared packet (under a lock, each event preceded by a
 * switch to the thread's task); what cannot be written even there is counted and recorded
 * as a ctfscope_lost event at stop (docs/formats/mprof.md §14). The explicit writers have
 * no shared packet: a writer that finds no free packet drops its events (counted by
 * cts_mprof_ring_dropped()). Packets of different threads overlap in time; with one
 * thread the bytes are those mirage-profile writes (§3.3).
 *
 * Live reading: a packet's content_size is published after its event bytes (release
 * store), so a reader of the buffer never sees half an event.
 *
 * Ownership: see common.h. Nothing here allocates; the ring lives in caller memory and
 * reads an injected clock. Libraries: the ring and the explicit writers are in cts_core
 * (no OS calls, no global or thread-local state); the cts_task_* hooks keep process-wide
 * state and are in cts_tasks (installed as part of libctfscope, docs/library.md). Hosted helpers (a
 * ring in an mmap'd file, streaming to a descriptor or TCP) are in ctfscope/ring.h.
 */
#ifndef CTFSCOPE_TASKS_H
#define CTFSCOPE_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A task (promise) id. */
typedef int64_t cts_task_id_t;
/** "No task": the idle state, or the parent of a task created outside any task. */
#define CTS_TASK_NONE ((cts_task_id_t)-1)
/** The initial context (Lwt's id 0); cts_task_start() makes it current. */
#define CTS_TASK_MAIN ((cts_task_id_t)0)

/** How a task was made (§8): the `thread_type` of a `creates` event. */
typedef enum cts_task_type {
  CTS_TASK_WAIT = 0,
  CTS_TASK_TASK = 1,
  CTS_TASK_BIND = 2,
  CTS_TASK_TRY = 3,
  CTS_TASK_CHOOSE = 4,
  CTS_TASK_PICK = 5,
  CTS_TASK_JOIN = 6,
  CTS_TASK_MAP = 7,
  CTS_TASK_CONDITION = 8,
  CTS_TASK_ON_SUCCESS = 9,
  CTS_TASK_ON_FAILURE = 10,
  CTS_TASK_ON_TERMINATION = 11,
  CTS_TASK_ON_ANY = 12,
  CTS_TASK_IGNORE_RESULT = 13,
  CTS_TASK_ASYNC = 14,
  CTS_TASK_PROMISE = 15,   /**< eio's extension */
  CTS_TASK_SEMAPHORE = 16, /**< eio's extension */
  CTS_TASK_SWITCH = 17,    /**< eio's extension */
  CTS_TASK_UNKNOWN = 99,   /**< written for any value above 17, as mirage-profile does */
} cts_task_type_t;

/** Event ids (§2.5). 12 and 13 are the 2021 extensions (eio, the viewer). */
typedef enum cts_mprof_event_id {
  CTS_MPROF_CREATES = 0,
  CTS_MPROF_READ = 1,
  CTS_MPROF_FULFILLS = 2,
  CTS_MPROF_FAILS = 3,
  CTS_MPROF_BECOMES = 4,
  CTS_MPROF_LABEL = 5,
  CTS_MPROF_INCREASE = 6,
  CTS_MPROF_SWITCH = 7,
  CTS_MPROF_GC = 8,
  CTS_MPROF_SIGNAL = 9,
  CTS_MPROF_TRY_READ = 10,
  CTS_MPROF_COUNTER = 11,
  CTS_MPROF_READ_LATER = 12,
  CTS_MPROF_SIGNAL_NOSWITCH = 13,
  /** ctfscope's extensions (docs/formats/mprof.md §14), declared in the metadata: */
  CTS_MPROF_ALLOC = 14,  /**< thread = task running, word = memtrace object id sampled */
  CTS_MPROF_ANCHOR = 15, /**< thread = process id, word = CLOCK_REALTIME ns at the time */
  CTS_MPROF_LOST = 16,   /**< thread = task running, word = events dropped so far */
} cts_mprof_event_id_t;

/** Number of event ids (0…16). */
#define CTS_MPROF_EVENT_IDS 17u
/** The ids of mirage-profile itself (0…13); ctfscope's extensions follow. */
#define CTS_MPROF_MIRAGE_IDS 14u
/** Packet header + context: magic, uuid, packet_size, stream_packet_count, content_size. */
#define CTS_MPROF_HEADER_SIZE 30u
/** mirage-profile cuts its buffer into 4 packets (§3.2). */
#define CTS_MPROF_DEFAULT_PACKETS 4u
/** Most packets a ring can have. */
#define CTS_MPROF_MAX_PACKETS 65536u
/** Smallest packet a ring accepts: room for the header and a few events. */
#define CTS_MPROF_MIN_PACKET_SIZE 256u

/**
 * One event as written or read. Fields a kind does not use are 0 (str: NULL).
 * `arg` holds child (creates), source (read, signal, try_read, 12, 13), resolvee
 * (fulfills, fails), sleeper (becomes) or duration_ns (gc); `value` holds amount
 * (increase) or value (counter); `str` holds exn (fails), label, or the counter name.
 */
typedef struct cts_mprof_event {
  uint64_t time_ns;      /**< monotonic ns, arbitrary epoch (§6) */
  uint8_t id;            /**< cts_mprof_event_id_t */
  uint8_t thread_type;   /**< creates only (cts_task_type_t) */
  int64_t thread;        /**< the context `thread`; CTS_TASK_NONE for gc (which has none) */
  uint64_t arg;          /**< see above */
  int64_t value;         /**< see above */
  const char *str;       /**< borrowed; NUL-terminated */
  size_t str_len;        /**< strlen(str) */
  uint64_t offset;       /**< reader: byte offset of the event in the input */
  uint16_t packet_count; /**< reader: stream_packet_count of its packet */
} cts_mprof_event_t;

/** Name of an event id as in the metadata ("creates", …, "read_later", "signal_noswitch"),
 *  or NULL for an id above 13. */
CTS_API const char *cts_mprof_event_name(unsigned id);
/** Name of a thread type as in the metadata ("Wait", …, "Switch"), "Unknown" otherwise. */
CTS_API const char *cts_task_type_name(unsigned type);

/**
 * The TSDL metadata of every trace we write: CTF 1.8, the mirage-profile uuid, a declared
 * 1 GHz monotonic clock mapped by the event timestamp, ids 0…13 and thread types 0…17 and
 * 99. Byte layout is unchanged from mirage-profile's own metadata, so either describes our
 * packets. Returns a static NUL-terminated string.
 */
CTS_API const char *cts_mprof_metadata(void);

/* ------------------------------------------------------------------------------------ */
/* The ring                                                                             */

/** Returns the current time in nanoseconds from a monotonic clock. */
typedef uint64_t (*cts_clock_ns_cb)(void *user_data);

/**
 * A CPU cycle counter (x86-64: the time-stamp counter, read with rdtsc) converted to
 * nanoseconds: ns = base_ns + ((counter - base_counter) × mult) / 2^32. Reading it inline
 * costs one instruction instead of a call to the clock (a vDSO clock_gettime is 3-4 times
 * dearer). Only valid when the counter runs at a constant rate on every CPU (Linux: cpuinfo
 * flags constant_tsc and nonstop_tsc); the OS layer calibrates it against CLOCK_MONOTONIC
 * (src/os/tsc_clock.h). mult == 0 means "not set".
 */
typedef struct cts_tsc_clock {
  uint64_t base_counter;
  uint64_t base_ns;
  uint64_t mult; /**< ns per count × 2^32 */
} cts_tsc_clock_t;

/** Ring options. Initialise with cts_mprof_ring_config_init(); new fields go at the end. */
typedef struct cts_mprof_ring_config {
  uint32_t struct_size;
  /** The trace memory (required): it becomes the trace file, byte for byte. */
  void *buffer;
  size_t buffer_size;
  /** Packets to cut the buffer into (default 4, like mirage-profile; at least the number of
   *  threads writing at once). Packet i starts at i × floor(size / packets); the last one
   *  takes the remainder. */
  uint32_t packets;
  /** The clock (required). */
  cts_clock_ns_cb clock;
  void *clock_user_data;
  /**
   * Optional stream sink: receives every packet a thread has finished with (and, from
   * cts_mprof_ring_flush(), the partly filled ones) as one call of content_size bytes whose
   * header says packet_size = content_size. Called on the writing thread, outside any lock,
   * never concurrently for the same packet. An error makes later packets go unsent and is
   * returned by cts_mprof_ring_flush().
   */
  cts_write_cb sink;
  void *sink_user_data;
  /** Optional: read the CPU counter inline instead of calling `clock` (x86-64 only;
   *  elsewhere, or when tsc.mult is 0, `clock` is used). */
  cts_tsc_clock_t tsc;
} cts_mprof_ring_config_t;

typedef struct cts_mprof_ring cts_mprof_ring_t;

/** Bytes of state memory a ring of @p packets needs (8-byte aligned); an upper bound usable
 *  in array sizes. */
#define CTS_MPROF_RING_STATE_SIZE(packets) (512u + 16u * (size_t)(packets))

CTS_API void cts_mprof_ring_config_init(cts_mprof_ring_config_t *cfg);

/**
 * Initialises a ring in caller memory @p state (CTS_MPROF_RING_STATE_SIZE(packets) bytes,
 * 8-byte aligned, outliving the ring) over cfg->buffer, and writes every packet header
 * (§3.2): packet i gets count i and an empty content. The buffer's event area is not
 * cleared. Returns 0 or CTS_E_INVAL (buffer too small for the packets, bad config).
 */
CTS_API int cts_mprof_ring_init(cts_mprof_ring_t **out, void *state, size_t state_size,
                                const cts_mprof_ring_config_t *cfg);

/** Events dropped so far: no free packet, or an event larger than an empty packet. */
CTS_API uint64_t cts_mprof_ring_dropped(const cts_mprof_ring_t *ring);

/** Packets started so far (the next stream_packet_count, before wrapping at 2^16). */
CTS_API uint64_t cts_mprof_ring_packets_started(const cts_mprof_ring_t *ring);

/**
 * Sends every packet still owned by a writer with events in it to the sink (in sequence
 * order) and releases it. Only call when no thread is writing (after cts_task_stop() and
 * once other threads are done). Returns 0 or the first sink error. Without a sink: 0.
 */
CTS_API int cts_mprof_ring_flush(cts_mprof_ring_t *ring);

/* ------------------------------------------------------------------------------------ */
/* Explicit writers: one per thread, for callers that manage their own state (tests,    */
/* converters, single-threaded unikernels). The cts_task_* hooks (cts_tasks) use a      */
/* thread-local one.                                                                    */

/** A writer's state. Caller-allocated; treat the fields as private. */
typedef struct cts_mprof_writer {
  cts_mprof_ring_t *ring;
  uint8_t *packet; /* start of the owned packet, NULL when none */
  uint32_t pos;    /* offset of the next event in the packet */
  uint32_t len;    /* packet length */
  uint32_t index;  /* packet index in the ring */
  uint32_t generation;
  int64_t current; /* this thread's current task */
} cts_mprof_writer_t;

/** Attaches @p w to @p ring (no packet is taken until the first event). The writer's
 *  owner token is unique among the writers of this ring: re-initialising the ring's state
 *  memory invalidates its writers (initialise them again). */
CTS_API void cts_mprof_writer_init(cts_mprof_writer_t *w, cts_mprof_ring_t *ring);

/** Gives the writer's packet back to the ring (sending it to the sink, if any). */
CTS_API void cts_mprof_writer_fini(cts_mprof_writer_t *w);

/**
 * Writes @p ev as it is (offset and packet_count are ignored; str may be NULL for ""). A
 * time of CTS_TIME_NOW reads the ring's clock. Returns 0, CTS_E_INVAL (id above 16),
 * CTS_E_LIMIT (dropped: no free packet, or the event does not fit an empty packet).
 */
CTS_API int cts_mprof_writer_write(cts_mprof_writer_t *w, const cts_mprof_event_t *ev);

/* ------------------------------------------------------------------------------------ */
/* Task tracing hooks (process-wide, thread-safe; in cts_tasks, src/tasks/)             */

/**
 * Starts tracing into @p ring (replacing any ring started before), makes CTS_TASK_MAIN the
 * calling thread's current task and writes switch(0) (§7.1). Other threads start idle (-1).
 * Returns 0 or CTS_E_INVAL.
 */
CTS_API int cts_task_start(cts_mprof_ring_t *ring);

/**
 * Stops tracing: hooks do nothing from now on. The calling thread's packet is released (and
 * sent to the sink); other threads release theirs on their next hook call, or call
 * cts_mprof_ring_flush() once they are done. The ring memory must stay valid until no
 * thread can be inside a hook.
 */
CTS_API void cts_task_stop(void);

/**
 * Gives the calling thread's packet back to the ring (sending it to the sink, if any).
 * Call it when an OS thread that traced is about to exit (e.g. from a pthread key
 * destructor): otherwise its packet stays taken until cts_mprof_ring_flush(). The thread
 * may trace again later; it then takes a new packet.
 */
CTS_API void cts_task_thread_exit(void);

/**
 * Writes a clock anchor (ctfscope_anchor, docs/formats/mprof.md §14.2): @p clock's value,
 * read between two reads of the ring's clock, paired with their midpoint, and @p pid. With
 * CLOCK_REALTIME in nanoseconds and the process id, it lets a memtrace trace of the same
 * process be aligned with this task trace exactly. The preload library writes one at
 * start; a program using the linked APIs calls it once both are started. Returns 0, or
 * CTS_E_INVAL when tracing is stopped or @p clock is NULL.
 */
CTS_API int cts_task_clock_anchor(int64_t pid, cts_clock_ns_cb clock, void *user_data);

/** A fresh task id (1, 2, 3…; thread-safe; works also when tracing is stopped). */
CTS_API cts_task_id_t cts_task_new_id(void);

/** Out-of-line bodies: call the hooks below instead. */
extern CTS_API int cts__task_on;
CTS_API void cts__task_event(unsigned id, int64_t thread, uint64_t arg, int64_t value,
                             const char *str);
CTS_API void cts__task_created(cts_task_id_t child, cts_task_type_t type);
CTS_API void cts__task_resolved(cts_task_id_t task);
CTS_API void cts__task_read(unsigned id, cts_task_id_t reader, cts_task_id_t source);
CTS_API void cts__task_switch(cts_task_id_t task, bool always);
CTS_API void cts__task_signal(unsigned id, cts_task_id_t receiver, cts_task_id_t sender);
CTS_API void cts__task_label(cts_task_id_t task, const char *label);
CTS_API void cts__task_counter(const char *name, int64_t value);
CTS_API cts_task_id_t cts__task_create(cts_task_type_t type, const char *label);
CTS_API cts_task_id_t cts__task_current(void);
/** The allocation tracer sampled memtrace object @p object_id on this thread:
 *  ctfscope_alloc(current task, object_id) (§14.1). */
CTS_API void cts__task_alloc(uint64_t object_id);

/** A counter (MProf.Counter): a name and an absolute value. The value is kept even when
 *  tracing is stopped or compiled out. */
typedef struct cts_task_counter {
  const char *name; /**< borrowed: must outlive the counter */
  int64_t value;
} cts_task_counter_t;

/** Static initialiser: `cts_task_counter_t c = CTS_TASK_COUNTER_INIT("rx-bytes", 0);` */
#define CTS_TASK_COUNTER_INIT(name, init) \
  { (name), (init) }

#if defined(__GNUC__)
#define CTS__TASK_ON() __builtin_expect(__atomic_load_n(&cts__task_on, __ATOMIC_RELAXED), 0)
#else
#define CTS__TASK_ON() (cts__task_on)
#endif

#ifndef CTS_TASKS_DISABLE

/** A task @p child was created by the current task, made by @p type (`creates`). */
static inline void cts_task_created(cts_task_id_t child, cts_task_type_t type) {
  if (CTS__TASK_ON()) cts__task_created(child, type);
}
/** New id + `creates` event: the common case of cts_task_new_id() + cts_task_created(). */
static inline cts_task_id_t cts_task_create(cts_task_type_t type) {
  return CTS__TASK_ON() ? cts__task_create(type, NULL) : cts_task_new_id();
}
/** @p reader now runs because @p source resolved: `read`, an implicit switch (skipped
 *  when reader == source). */
static inline void cts_task_read(cts_task_id_t reader, cts_task_id_t source) {
  if (CTS__TASK_ON()) cts__task_read(CTS_MPROF_READ, reader, source);
}
/** @p reader consumed @p source's result but runs later (id 12, no switch). */
static inline void cts_task_read_later(cts_task_id_t reader, cts_task_id_t source) {
  if (CTS__TASK_ON()) cts__task_read(CTS_MPROF_READ_LATER, reader, source);
}
/** @p waiter found @p source still pending and waits for it (`try_read`). */
static inline void cts_task_try_read(cts_task_id_t waiter, cts_task_id_t source) {
  if (CTS__TASK_ON()) cts__task_read(CTS_MPROF_TRY_READ, waiter, source);
}
/** The current task resolved @p task successfully (`fulfills`). */
static inline void cts_task_resolved(cts_task_id_t task) {
  if (CTS__TASK_ON()) cts__task_resolved(task);
}
/** The current task failed @p task with @p message (`fails`; NULL means ""). */
static inline void cts_task_failed(cts_task_id_t task, const char *message) {
  if (CTS__TASK_ON())
    cts__task_event(CTS_MPROF_FAILS, CTS_TASK_NONE, (uint64_t)task, 0, message ? message : "");
}
/** Pending @p task is from now on represented by @p successor (`becomes`; skipped if equal). */
static inline void cts_task_becomes(cts_task_id_t task, cts_task_id_t successor) {
  if (CTS__TASK_ON() && task != successor)
    cts__task_event(CTS_MPROF_BECOMES, task, (uint64_t)successor, 0, 0);
}
/** Attaches @p label to any @p task (`label`). */
static inline void cts_task_label(cts_task_id_t task, const char *label) {
  if (CTS__TASK_ON()) cts__task_label(task, label);
}
/** Labels the calling thread's current task (MProf.Trace.label). */
static inline void cts_task_label_current(const char *label) {
  if (CTS__TASK_ON()) cts__task_label(cts__task_current(), label);
}
/** @p task now runs on this OS thread (`switch`, written only when it changes). */
static inline void cts_task_switch(cts_task_id_t task) {
  if (CTS__TASK_ON()) cts__task_switch(task, false);
}
/** @p sender signalled @p receiver, which now runs (`signal`, an implicit switch). */
static inline void cts_task_signal(cts_task_id_t receiver, cts_task_id_t sender) {
  if (CTS__TASK_ON()) cts__task_signal(CTS_MPROF_SIGNAL, receiver, sender);
}
/** @p sender signalled @p receiver, which does not run yet (id 13). */
static inline void cts_task_signal_noswitch(cts_task_id_t receiver, cts_task_id_t sender) {
  if (CTS__TASK_ON()) cts__task_signal(CTS_MPROF_SIGNAL_NOSWITCH, receiver, sender);
}
/** A garbage-collection pause of @p duration_ns ended now (`gc`). */
static inline void cts_task_gc(uint64_t duration_ns) {
  if (CTS__TASK_ON()) cts__task_event(CTS_MPROF_GC, CTS_TASK_NONE, duration_ns, 0, 0);
}
/** The thread is about to block (note_hiatus / note_suspend): `switch(-1)`, always written. */
static inline void cts_task_idle(void) {
  if (CTS__TASK_ON()) cts__task_switch(CTS_TASK_NONE, true);
}
/** The thread woke up and runs @p task (note_resume): `switch(task)` if it changed. */
static inline void cts_task_resume(cts_task_id_t task) {
  if (CTS__TASK_ON()) cts__task_switch(task, false);
}
/** This OS thread's current task as far as the tracer knows (-1 when stopped). */
static inline cts_task_id_t cts_task_current(void) {
  return CTS__TASK_ON() ? cts__task_current() : CTS_TASK_NONE;
}
/** A new Wait task labelled @p name (MProf.Trace.named_wait): creates + label. */
static inline cts_task_id_t cts_task_named_wait(const char *name) {
  return CTS__TASK_ON() ? cts__task_create(CTS_TASK_WAIT, name) : cts_task_new_id();
}
/** A new Task task labelled @p name (named_task). */
static inline cts_task_id_t cts_task_named_task(const char *name) {
  return CTS__TASK_ON() ? cts__task_create(CTS_TASK_TASK, name) : cts_task_new_id();
}
/** A condition's dummy task labelled @p name (named_condition); label its waiters with
 *  the same name and signal through it with cts_task_signal(). */
static inline cts_task_id_t cts_task_named_condition(const char *name) {
  return CTS__TASK_ON() ? cts__task_create(CTS_TASK_CONDITION, name) : cts_task_new_id();
}
/** Marks @p task as one that must resolve: label "__should_resolve" (§9). */
static inline void cts_task_should_resolve(cts_task_id_t task) {
  if (CTS__TASK_ON()) cts__task_label(task, "__should_resolve");
}
/** Deprecated relative counter change (`increase`), for old viewers' sake. */
static inline void cts_task_note_increase(const char *counter, int64_t amount) {
  if (CTS__TASK_ON()) cts__task_event(CTS_MPROF_INCREASE, CTS_TASK_NONE, 0, amount, counter);
}
/** Initialises @p c (name borrowed) with value @p init; writes nothing. */
static inline void cts_task_counter_init(cts_task_counter_t *c, const char *name, int64_t init) {
  c->name = name;
  c->value = init;
}
/** Sets the counter (atomically) and writes `counter` with the absolute value. */
static inline void cts_task_counter_set(cts_task_counter_t *c, int64_t value) {
  __atomic_store_n(&c->value, value, __ATOMIC_RELAXED);
  if (CTS__TASK_ON()) cts__task_counter(c->name, value);
}
/** Adds @p delta (may be negative; atomic) and writes `counter` with the new value. */
static inline void cts_task_counter_increase(cts_task_counter_t *c, int64_t delta) {
  const int64_t value = __atomic_add_fetch(&c->value, delta, __ATOMIC_RELAXED);
  if (CTS__TASK_ON()) cts__task_counter(c->name, value);
}
/** The counter's value. */
static inline int64_t cts_task_counter_value(const cts_task_counter_t *c) {
  return __atomic_load_n(&c->value, __ATOMIC_RELAXED);
}

#else /* CTS_TASKS_DISABLE: everything compiles to nothing (sizeof keeps arguments "used" \
         for -Wunused without evaluating them). */

#define CTS__TASK_NOP1(a)                          ((void)sizeof(a))
#define CTS__TASK_NOP2(a, b)                       ((void)sizeof(a), (void)sizeof(b))
#define cts_task_created(child, type)              CTS__TASK_NOP2(child, type)
#define cts_task_create(type)                      (CTS__TASK_NOP1(type), CTS_TASK_NONE)
#define cts_task_read(reader, source)              CTS__TASK_NOP2(reader, source)
#define cts_task_read_later(reader, source)        CTS__TASK_NOP2(reader, source)
#define cts_task_try_read(waiter, source)          CTS__TASK_NOP2(waiter, source)
#define cts_task_resolved(task)                    CTS__TASK_NOP1(task)
#define cts_task_failed(task, message)             CTS__TASK_NOP2(task, message)
#define cts_task_becomes(task, successor)          CTS__TASK_NOP2(task, successor)
#define cts_task_label(task, label)                CTS__TASK_NOP2(task, label)
#define cts_task_label_current(label)              CTS__TASK_NOP1(label)
#define cts_task_switch(task)                      CTS__TASK_NOP1(task)
#define cts_task_signal(receiver, sender)          CTS__TASK_NOP2(receiver, sender)
#define cts_task_signal_noswitch(receiver, sender) CTS__TASK_NOP2(receiver, sender)
#define cts_task_gc(duration_ns)                   CTS__TASK_NOP1(duration_ns)
#define cts_task_idle()                            ((void)0)
#define cts_task_resume(task)                      CTS__TASK_NOP1(task)
#define cts_task_current()                         CTS_TASK_NONE
#define cts_task_named_wait(name)                  (CTS__TASK_NOP1(name), CTS_TASK_NONE)
#define cts_task_named_task(name)                  (CTS__TASK_NOP1(name), CTS_TASK_NONE)
#define cts_task_named_condition(name)             (CTS__TASK_NOP1(name), CTS_TASK_NONE)
#define cts_task_should_resolve(task)              CTS__TASK_NOP1(task)
#define cts_task_note_increase(counter, amount)    CTS__TASK_NOP2(counter, amount)
#define cts_task_counter_init(c, n, init)          ((void)((c)->name = (n), (c)->value = (init)))
#define cts_task_counter_set(c, v)                 ((void)((c)->value = (v)))
#define cts_task_counter_increase(c, d)            ((void)((c)->value += (d)))
#define cts_task_counter_value(c)                  ((c)->value)

#endif /* CTS_TASKS_DISABLE */

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_TASKS_H */
