/* SPDX-License-Identifier: MIT */
/* The tracer's state, in named parts, and what its files call in each other. Private to
 * the files of src/tracer that implement the tracer (not service.c, which uses session.h,
 * nor the preload library, which uses tracer_internal.h).
 *
 *   part             owner file        what it holds; who else uses it
 *   cts__ctl         control.c         the control block: its lock, futex words, flags,
 *                                      counters; every part (it is what they share)
 *   cts__ring_state  ring.c            the writer process's shared mapping, the ring key;
 *                                      session.c (fork reset), tracer.c (key creation)
 *   cts__sampler     sample.c          the session's sampling parameters; session.c
 *   cts__side        sample.c          the linked API's sampled blocks (side table); the
 *                                      fork handlers
 *   cts__sink        sink.c            where the trace's bytes go; writer.c (flushes the
 *                                      zstd stage), writer_process.c (keeps its fd),
 *                                      control.c and session.c (the log callback)
 *   cts__writer      writer.c          the encoder, id order, loss markers, TSC times;
 *                                      session.c (its thread and encoder)
 *   cts__wproc       writer_process.c  the writer process: pidfd, watch pipe, the lazy
 *                                      writer's spawn and its hand-over (the shared
 *                                      header; writer_exec.c's main); writer.c
 *   cts__session     session.c         the running session: configuration, numbers, clock;
 *                                      read by all (fixed while the session runs)
 *
 * Thread-safety: the session's fields are written under its `control` mutex while no
 * session runs, and only read while one does; the writer's and the sink's are the writer's
 * (thread or process) while a session runs; the control block's are under its lock or
 * atomic, as marked; the side table is under its lock. Nothing here allocates through
 * malloc (tracer_internal.h). */
#ifndef CTS_TRACER_STATE_H
#define CTS_TRACER_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>

#include "common/check.h"
#include "common/cpu_counter.h"
#include "common/held_fd.h"
#include "common/held_fd.h"
#include "os/tsc_clock.h"
#include "session.h"
#include "tracer_internal.h"
#include "zsink.h"

#define CTS__HIDDEN __attribute__((visibility("hidden")))

/* Each thread that samples gets a ring of records, mapped at its first sample (its pages
 * only as the records reach them) and handed on to a later thread when it exits. A thread
 * waits whenever its ring fills before the writer takes from it, and the writer, which
 * needs a seventh of the CPU time the program spends making the records, is mostly waiting
 * for a CPU when that happens: on a loaded machine the scheduler leaves it 1-6 ms between
 * being woken and running, now and then 25 ms. cc1 at rate 1 writes ~150 MB of records a
 * second, 1 MiB in ~7 ms: per run it waited 52 ms with 1 MiB rings, 10 with 2 MiB, 2.3
 * with 4 MiB (medians of 7, load 5-7 on 2 CPUs; bench/JOURNAL.md, "Issue 16: cc1's wall
 * after exit"). bench_alloc at rate 1: 187 ns per malloc+free pair with 256 KiB, 165 with
 * 512 KiB, 159 with 1 MiB, 154 with 2 MiB.
 *
 * Memory: a ring's pages stay resident once its thread reached them, shared with the
 * writer process, so a ring of 4 MiB for every thread made a program of 1 000 allocating
 * threads 1.76 GB larger at rate 1. The first RING_FULL_RINGS rings of a process get
 * RING_WORDS (4 MiB) at once, which is all a program with few threads ever uses; later
 * rings start at RING_MIN_WORDS (64 KiB) and double, up to RING_WORDS, each time their
 * thread found the writer half a ring behind or waited for it, while the rings' sizes sum
 * to at most RING_BUDGET_WORDS (64 MiB). The rings' words thus take at most 64 MiB, or
 * 16 MiB plus 64 KiB for each ring after the fourth when that is more (beyond 772 rings;
 * RING_SLOTS of them: 80 MiB); each ring's header and its thread's outer-frame cache come
 * on top. The price: many busy threads wait for the writer where 4 MiB rings let them run
 * ahead (100 threads: 1.2 x the CPU time; bench/JOURNAL.md, "Issue 16: the rings' memory
 * with many threads"). */
#define RING_WORDS        (512u * 1024u) /* the largest ring: a slot of the shared mapping */
#define RING_MIN_WORDS    (8u * 1024u)
#define RING_MAX_SHIFT    6u /* RING_WORDS >> RING_MAX_SHIFT == RING_MIN_WORDS */
#define RING_FULL_RINGS   4u
#define RING_BUDGET_WORDS (RING_WORDS * 16u)
/* Drop mode: allocations may fill this much of a ring, the rest is for frees. Limits are
 * given for a ring of RING_WORDS: cts__ring_reserve scales them to the ring's size. */
#define RING_ALLOC_LIMIT (RING_WORDS / 4u * 3u)
/* Drop mode: how long a stopping writer thread, or cts_tracer_flush(), waits for a peer
 * that takes nothing. */
#define DROP_GIVE_UP_MS 2000u
/* Rings in a writer process's shared mapping: 4.2 GiB of address space, reserved with
 * MAP_NORESERVE; only the pages the threads reach are memory. */
#define RING_SLOTS        1024u
#define SHARED_HEADER     65536u /* the shared mapping's control block, before the rings */
#define MAX_FRAMES_LIMIT  CTS__MAX_FRAMES_LIMIT
#define REC_ALLOC         1u
#define REC_COLLECT       2u
#define REC_PAD           3u /* the rest of the ring up to its end is unused */
#define REC_ALLOC_WORDS   5u /* header, time, full id, length, nsamples; then the frames */
#define REC_COLLECT_WORDS 3u /* header, time, full id */
/* A full id is the session's low bits above the object id: a record that a thread publishes
 * after its session ended can never pass for one of the next session. */
#define ID_BITS 40u
#define ID_MASK ((UINT64_C(1) << ID_BITS) - 1u)

/* A backtrace cut at max_frames with frames left beyond the limit ends, outermost, with
 * one more frame: the code CUT_CODE_BASE + max_frames, which no return address can be (it
 * lies in the first page: bad_return, unwind.c), and which the writer names
 * CTS_TRACER_CUT_NAME_PREFIX "--max-frames N]" (cts__resolve_code), so that every memtrace reader
 * shows the cut. The sampling thread walks max_frames + 1 frames into the record; the
 * writer turns a frame past max_frames into the marker (write_alloc), so that the
 * allocating thread pays nothing for it. The analysis finds the marker by its name
 * (src/analysis/summary.c). */
#define CUT_CODE_BASE 0x800u
/* The frames of a record: max_frames, and the cut's marker. */
#define REC_FRAMES_MAX (MAX_FRAMES_LIMIT + 1u)

_Static_assert(CTS__TRACER_NO_ID == ID_MASK && CTS__TRACER_ID_BITS == ID_BITS,
               "object ids fill the low ID_BITS bits");
_Static_assert(REC_ALLOC_WORDS + REC_FRAMES_MAX + CTS__OWN_FRAMES <= RING_MIN_WORDS / 4u,
               "a record fits the smallest ring");
_Static_assert(RING_WORDS >> RING_MAX_SHIFT == RING_MIN_WORDS, "RING_MAX_SHIFT");

/* The shared mapping's last part: what the program hands its writer process right before
 * an exec (its module list; writer_process.c), address space only until then. */
#define CTS__HANDOVER_BYTES ((size_t)4 << 20)

/* ---- the rings (ring.c) ----------------------------------------------------------------- */

/* A thread's records, in publication order: single producer (the owning thread), single
 * consumer (the writer thread). Records never wrap: one that does not fit before the end
 * of the ring is preceded by a REC_PAD record. Counters are written by the owner only
 * (relaxed load and store, no locked instruction) and summed by cts_tracer_get_stats().
 * The ring's size is RING_WORDS >> shift words; only the owner changes it (cts__ring_wrap),
 * before the release store of `head` that publishes a record at the new size, and only when
 * every record the writer has not taken lies where both sizes put it.
 * Invariant: tail <= head <= tail + (RING_WORDS >> shift). */
typedef struct cts__ring {
  _Alignas(64) _Atomic uint64_t head; /* words published (owner) */
  uint64_t tail_seen;                 /* the owner's last reading of `tail` */
  uint64_t wake_check;                /* the owner looks at `tail` again past this head */
  _Atomic uint32_t shift;             /* the ring has RING_WORDS >> shift words (owner) */
  bool grow;                          /* the owner saw the writer half a ring behind */
  _Atomic uint64_t samples, collects, waits, dropped;
  _Atomic uint64_t lost_allocs, lost_collects, lost_words, lost_samples;
  _Alignas(64) _Atomic uint64_t tail; /* words consumed (writer thread) */
  _Atomic bool wake_sent;             /* the owner woke the writer thread; it clears this */
  _Alignas(64) _Atomic int owned;     /* a live thread writes into it (0 or 1) */
  struct cts__ring *next;             /* set before the ring is published, then fixed */
  uint64_t *words;
  cts__bottom_t *bottom; /* the owner's outer-frame cache (unwind.c), content-checked */
} cts__ring_t;

/* Drop mode: what was lost (tracer.h, "Drop mode"). */
typedef struct cts__loss {
  uint64_t allocs, collects, words, samples;
} cts__loss_t;

typedef struct cts__ring_state {
  /* The writer process's shared mapping: the control block, then ring slots, then the
   * hand-over area (cts__shared_handover). Made at the first session with a writer
   * process, kept for the life of this process image. */
  unsigned char *shared;
  size_t shared_size;
  /* The memfd the shared mapping was made from (a writer executable maps it again: the
   * lazy writer, writer_process.c), or -1 for an anonymous one; what it named when made. */
  int shared_fd;
  cts_fd_ident_t shared_fd_ident;
  pthread_key_t ring_key; /* hands a thread's ring back when the thread exits */
  bool ring_key_ok;
  /* The sizes of the rings made in this process, summed (RING_BUDGET_WORDS). Reset with
   * the rings when a forked child lets go of the shared mapping. */
  _Atomic size_t ring_words;
} cts__ring_state_t;

extern cts__ring_state_t cts__ring_state CTS__HIDDEN;

/* The ring key's destructor: the thread's ring goes to the next thread that needs one. */
void cts__ring_release(void *p);
/* This thread's first record: a ring left by an exited thread, else a new one. NULL if
 * there is no memory for one. Guard raised. */
CTS_NOINLINE cts__ring_t *cts__ring_claim(cts__thread_t *t);
/* The shared mapping's hand-over area (CTS__HANDOVER_BYTES, zero until written), NULL
 * without a shared mapping. */
void *cts__shared_handover(void);
/* Ring r's record of `n` words does not fit before its end (cts__ring_reserve): it goes at
 * the start of the ring, after a REC_PAD record, or the ring grows first. */
CTS_NOINLINE uint64_t *cts__ring_wrap(cts__ring_t *r, size_t n, size_t limit, size_t *skip);
/* Wakes the writer once ring r is more than half full at `head`. */
CTS_NOINLINE void cts__ring_wake(cts__ring_t *r, uint64_t head);
/* Waits until r, once written up to `end`, is at most `limit` words full (false: sampling
 * stopped, or drop mode). */
CTS_NOINLINE bool cts__ring_wait(cts__ring_t *r, uint64_t end, size_t limit);
/* What the rings lost so far (drop mode), and their counters summed. */
cts__loss_t cts__ring_losses(void);
void cts__ring_counts(cts_tracer_stats_t *s);
/* Whether some ring holds records the writer has not taken. */
bool cts__rings_pending(void);
/* The writer process's shared mapping, made once (only while no ring exists), from a memfd
 * if `memfd` (kept in cts__ring_state.shared_fd). False: a writer thread it is (or, with
 * `memfd`, an existing mapping that is anonymous). The memfd is set aside in `aside`, the
 * session start's batch (the caller ends it). */
bool cts__shared_mapping(bool memfd, cts_fd_aside_t *aside);

/* ---- the control block (control.c) --------------------------------------------------- */

/* What the program's threads and the writer share. With a writer process (tracer.h,
 * "The writer process") it lives at the start of a shared mapping made before the fork, at
 * the same address in both processes, so the ring pointers in it hold in both; its mutex
 * is then process-shared and robust (either side may die holding it). Otherwise it is
 * cts__local_control. */
typedef struct cts__control {
  pthread_mutex_t lock; /* the writer's wake-ups and waits for it */
  /* Futex words, not condition variables: a process killed while waiting on a
   * process-shared condition variable leaves it blocking every later signal for ever. A
   * waiter reads the word under `lock` and sleeps while it is unchanged; a waker changes
   * it (under `lock`, after the state) and wakes. */
  _Atomic uint32_t writer_wake;
  _Atomic uint32_t progress; /* ring space freed, flush done, error, writer exited */

  /* Lock-free, shared by the sampling threads. */
  _Alignas(64) _Atomic uint64_t next_id;     /* the next full id */
  _Alignas(64) _Atomic(cts__ring_t *) rings; /* every ring ever made, newest first */
  atomic_uint waiters;                       /* threads waiting for ring space */
  atomic_uint_fast64_t unrecorded;           /* samples with no ring (no memory for one) */
  _Atomic size_t ring_slots_used;            /* rings carved from the shared mapping */
  atomic_bool stopping;                      /* read by the writer while it waits on a socket */
  atomic_bool failed;                        /* the writer stopped on a sink error */
  atomic_bool stalled;           /* ... because the peer took nothing (stall_timeout_ms) */
  atomic_bool exec_pending;      /* the program has flushed to exec (cts__tracer_exec_pending) */
  atomic_bool stall_reported;    /* the log line about it was written */
  atomic_bool loss_noted;        /* record was told of this trace's loss (its notes pipe) */
  _Atomic uint64_t module_epoch; /* bumped by each flush (the symbolizer looks) */
  _Atomic int writer_pid;        /* the writer process, once forked */
  /* The writer looks at the rings again within POLL_MS: no thread needs to wake it. */
  _Alignas(64) atomic_bool writer_polling;

  /* Under `lock`. */
  _Alignas(64) bool wake_requested;
  bool thread_running;
  bool stop_requested;
  uint64_t flush_requested, flush_done; /* flush_done <= flush_requested */
  uint64_t end_time; /* cts__event_time() when the session was stopped or the program seen gone */
  cts_tracer_stats_t stats; /* what the writer counts; the rings count the rest */
  uint64_t gave_up;         /* ids whose record never came (STALL_GIVE_UP_MS) */
} cts__control_t;

_Static_assert(sizeof(cts__control_t) <= SHARED_HEADER, "the control block fits its page");

/* &cts__local_control, or the shared mapping's (writer process). */
extern cts__control_t *cts__ctl CTS__HIDDEN;
extern cts__control_t cts__local_control CTS__HIDDEN;

bool cts__ctl_is_local(void);
void cts__ctl_lock(void);
void cts__ctl_unlock(void);
/* Wakes one waiter on `word` (or all). Lock held. */
void cts__ctl_wake(_Atomic uint32_t *word, bool all);
/* Waits (lock held; released meanwhile) until `word` is changed or it is `deadline`
 * (CLOCK_MONOTONIC; NULL: none): 0, or ETIMEDOUT. */
int cts__ctl_timedwait(_Atomic uint32_t *word, const struct timespec *deadline);
struct timespec cts__deadline_in_ms(uint64_t ms);
/* Waits (lock held) for `progress` until `deadline` (NULL: none); ETIMEDOUT once past it. */
int cts__wait_progress(const struct timespec *deadline);
void cts__init_control(cts__control_t *c, bool shared);

/* ---- sampling and the side table (sample.c) -------------------------------------------- */

/* The sampler's settings. A session's start writes them (control lock held) while a thread
 * of the session that just stopped may still be reading them in its sample path: every
 * access is a relaxed atomic one (SAMPLER_GET/SAMPLER_SET, plain moves on x86-64), so that
 * no read tears and the race is a declared one. Such a thread may draw with the next
 * session's settings; its record is dropped by its session bits anyway. */
typedef struct cts__sampler {
  cts_tracer_unwind_t unwind;
  double rate;
  double inv_log_miss; /* 1 / log(1 − λ): geometric gaps between sampled words */
  double inv_log_hit;  /* 1 / log(λ): gaps between unsampled words, when λ > 1/2 */
  uint64_t seed;       /* the session's cfg.seed: 0, from the clock */
  /* The session's cfg.max_frames + 1 (the frames a walk looks for: one more says it was
   * cut, which the writer marks) and cfg.drop_when_full, for the record path: the
   * session's `cfg` itself is rewritten as a whole by the next session's start. */
  uint32_t walk_frames;
  bool drop_when_full;
  atomic_uint_fast64_t thread_seeds;
} cts__sampler_t;
#define SAMPLER_GET(field)                                         \
  __extension__({                                                  \
    __typeof__(cts__sampler.field) value_;                         \
    __atomic_load(&cts__sampler.field, &value_, __ATOMIC_RELAXED); \
    value_;                                                        \
  })
#define SAMPLER_SET(field, value)                                   \
  do {                                                              \
    __typeof__(cts__sampler.field) value_ = (value);                \
    __atomic_store(&cts__sampler.field, &value_, __ATOMIC_RELAXED); \
  } while (0)

typedef struct cts__side_entry {
  uintptr_t addr;
  uint64_t id; /* full id */
} cts__side_entry_t;

typedef struct cts__side_table {
  pthread_mutex_t side_lock; /* the side table (the linked API's blocks) */
  /* Under `side_lock`. */
  cts__side_entry_t *side;
  size_t side_cap, side_count, side_tombs;
} cts__side_table_t;

extern cts__sampler_t cts__sampler CTS__HIDDEN;
extern cts__side_table_t cts__side CTS__HIDDEN;

/* The default clock: CLOCK_REALTIME in µs. */
uint64_t cts__wall_clock_us(void *user_data);
/* A new session's sampling parameters and unwinder, from cfg. */
void cts__sampler_configure(const cts_tracer_config_t *cfg);
/* Empties the side table, making it at first use. False: no memory. */
bool cts__side_reset(void);

/* ---- the sink (sink.c) ------------------------------------------------------------------ */

typedef struct cts__sink_state {
  cts_tracer_sink_t sink;
  int fd;
  cts_fd_ident_t fd_ident; /* what fd named when taken (common/held_fd.h) */
  bool own_fd;
  bool socket_sink;    /* fd is a non-blocking socket of ours */
  cts__zsink_t *zsink; /* compress_level: the zstd stage in front of the sink, else NULL */
  uint64_t bytes_written;
  /* Bytes of the next writes that are dropped: they are in the file already (the writer
   * executable re-encodes the header the program wrote, writer_exec.c). */
  uint64_t discard;
  char path[4096];
} cts__sink_state_t;

extern cts__sink_state_t cts__sink CTS__HIDDEN;

/* Opens `sink`, or takes over the connected socket `socket_fd` when >= 0; its descriptor is
 * set aside in `aside`, the session start's batch (the caller ends it). */
int cts__open_sink(const cts_tracer_sink_t *sink, int socket_fd, cts_fd_aside_t *aside);
void cts__close_sink(void);
/* Where the trace's bytes go, after the zstd stage (a cts__zsink_write_fn). */
int cts__raw_write(void *user_data, const void *buf, size_t len);
/* The memtrace writer's output. */
int cts__sink_write(void *user_data, const void *buf, size_t len);
/* Whether the sink's descriptor is still the trace file, reopening it by its path if the
 * program closed it: 0, or -EBADF. */
int cts__sink_check(void);
/* In a forked child: forget the parent's sink (closing our sockets' copies). */
void cts__sink_atfork_child(void);
/* Says once per session, on the program's side, that a peer stalled the trace. */
void cts__report_stall(void);

/* ---- the writer (writer.c) -------------------------------------------------------------- */

/* A loss marker the writer thread writes at its object id. */
typedef struct cts__marker {
  bool present;
  cts__loss_t loss;
  uint64_t id, time;
} cts__marker_t;

typedef struct cts__writer_state {
  pthread_t thread;
  void *writer_mem;
  size_t writer_mem_size;
  bool writer_mem_used;     /* a session wrote into writer_mem: it is not all zero */
  bool event_memory_mapped; /* the writer's event tables were mapped (writer.c, first event) */
  cts_mt_writer_t *writer;
  uint64_t emitted;       /* object ids written: the next alloc written has this id */
  uint64_t ring_visits;   /* this session's looks at a ring by drain (tests: its cost per record) */
  cts__marker_t pending;  /* a loss marker waiting for its id's turn */
  cts__loss_t lost_taken; /* the rings' losses already in markers */
  bool owner_gone;        /* the writer process: the program exited or exec'd */
  cts__symbolizer_t *symbolizer;
  char marker_name[160];            /* the last loss or cut marker's name (writer thread) */
  cts_tsc_clock_t tsc;              /* tsc_mode: the calibration (writer thread) */
  bool tsc_ok;                      /* tsc_mode: calibrated */
  bool tsc_tried;                   /* tsc_mode: calibrate_tsc() ran this session */
  bool writer_ending;               /* the writer drains for the last time: no later events */
  uint64_t tsc_start, tsc_start_ns; /* tsc_mode: counter and CLOCK_MONOTONIC at the start */
  int64_t real_minus_mono;          /* tsc_mode: CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
  uint64_t writer_time;             /* the last event time written, µs */
} cts__writer_state_t;

extern cts__writer_state_t cts__writer CTS__HIDDEN;

/* The writer loop (a pthread start routine): until the session stops or, in a writer
 * process, the program is gone. */
void *cts__writer_main(void *arg);
/* How long the writer process may go without looking whether the program, `age_ms` old,
 * is gone: from 1 ms for a program that just started up to 50 ms (writer.c). */
uint64_t cts__owner_check_ms(uint64_t age_ms);
/* The memtrace writer's memory, mapped at the first session. False: no memory. */
bool cts__writer_memory(void);
/* Control lock held: cts_mt_writer_init into the writer's memory, which is all zero bytes
 * first (fresh pages, or a used session's dropped with MADV_DONTNEED), so that the writer
 * need not clear it: only the pages a session writes to are ever touched. */
int cts__writer_init(const cts_mt_writer_config_t *wc);
/* A new session: the counter's calibration is to be redone from now (tsc_mode). */
void cts__writer_clock_start(void);
/* A new session starting at `start` (µs): no id written, no loss taken. Control lock held. */
void cts__writer_reset(uint64_t start);
/* A cts_mt_resolve_cb: loss markers' names, else the symbolizer's. */
size_t cts__resolve_code(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max);
#if CTS_HAVE_CPU_COUNTER
/* The counter and CLOCK_MONOTONIC read together. */
void cts__tsc_sample(uint64_t *counter, uint64_t *ns);
#endif

/* ---- the writer process (writer_process.c) -------------------------------------------- */

typedef struct cts__writer_proc {
  int writer_pidfd;   /* the writer process (pidfd), or -1 */
  int owner_fd;       /* the program: write end of a pipe the writer process watches */
  int owner_watch_fd; /* in the writer process (only): the read end; a hang-up says the
                       * program is gone. Or, once the program closed its end while it
                       * lived on (closefrom...), a pidfd of the program (owner_by_pidfd):
                       * readable when it has exited. */
  bool owner_by_pidfd;
  /* What writer_pidfd and owner_fd named when made: the program may close them and take
   * their numbers for files of its own (common/held_fd.h). */
  cts_fd_ident_t writer_pidfd_ident, owner_fd_ident;
  pid_t traced_pid; /* the writer process: the program it writes for */
  /* `ctfscope record`'s notes pipe (tracer_internal.h, cts__tracer_notes_set), or -1: the
   * program's, and a copy of it in the writer process, which tells `record` of a loss
   * itself when the program closed its own (closefrom at its start). */
  int notes_fd;
  cts_fd_ident_t notes_fd_ident;
} cts__writer_proc_t;

extern cts__writer_proc_t cts__wproc CTS__HIDDEN;

/* The lazy writer: what the writer executable needs of the session, written by the program
 * into the shared mapping's header (past the control block) before it spawns the writer,
 * read by the writer once at its start. */
typedef struct cts__writer_handover {
  uint64_t magic; /* CTS__HANDOVER_MAGIC: made by the same build's tracer */
  uint32_t struct_size;
  int32_t program_pid;
  int32_t sink_fd, watch_fd, notes_fd; /* notes_fd: -1 if none (or no longer record's) */
  cts_fd_ident_t sink_fd_ident, notes_fd_ident;
  uint64_t header_bytes;   /* the file's length when the program wrote the header */
  uint64_t start_us;       /* the trace's start */
  cts_tracer_config_t cfg; /* its pointers cleared */
  cts__sampler_t sampler;
  unsigned session;
  uint64_t session_bits;
  bool tsc_mode;
  uint64_t tsc_start, tsc_start_ns;
  cts__loss_t lost_taken;
  cts_tracer_stats_t base;
  char exe[4096], host[256], context[4096], path[4096];
} cts__writer_handover_t;
#define CTS__HANDOVER_MAGIC  UINT64_C(0x637473777269746B) /* "ctswritk" */
#define CTS__HANDOVER_OFFSET 32768u
_Static_assert(sizeof(cts__control_t) <= CTS__HANDOVER_OFFSET &&
                   CTS__HANDOVER_OFFSET + sizeof(cts__writer_handover_t) <= SHARED_HEADER,
               "the control block and the hand-over fit the shared header");

/* The writer process's life after it has its state (a fork of the program, or the writer
 * executable): the writer loop, on its own, until the program stops the session or is
 * gone; then it exits. */
_Noreturn void cts__writer_process_run(int watch_fd, pid_t program);
/* This thread is forking the writer process: the fork handlers stand aside. Per thread, so
 * that a fork the program makes meanwhile on another thread is handled as any other. */
extern CTS__TLS bool cts__spawning_writer CTS__HIDDEN;

/* Whether a session into `sink` can have a writer process; pid: the program's (getpid). */
bool cts__process_writer_fits(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int socket_fd, pid_t pid);
/* Forks the writer process: 0, or -errno. */
int cts__spawn_writer_process(void);
/* After the session: the pipe and the pidfd go. */
void cts__forget_writer_process(void);
/* Whether this session's writer process has exited. */
bool cts__writer_process_gone(void);
/* The writer process: whether the program's end of the watch pipe is closed. */
bool cts__owner_is_gone(void);
/* The writer process: whether a thread watches the pipe and wakes the writer when it closes. */
bool cts__owner_watched(void);

/* ---- the session (session.c) ---------------------------------------------------------- */

typedef struct cts__session {
  pthread_mutex_t control; /* serialises start/stop (cts__control_lock) */
  pthread_once_t once;
  bool ready; /* the fork handlers and the ring key are set up */
  /* Fixed while active. */
  bool session_running;
  bool service_running;      /* a TCP_LISTEN service is started (service.c) */
  bool service_stopping;     /* cts_tracer_stop() is joining the service thread */
  bool writer_process;       /* this session's writer is a process */
  uint64_t header_bytes;     /* the trace's length after its header (a lazy session) */
  cts_mt_writer_config_t wc; /* the memtrace writer's configuration (pointers into here) */
  unsigned session;          /* the running (or last) session's number, as in cts__tracer_active */
  uint64_t session_bits;     /* its low CTS__TRACER_SESSION_BITS: the top of its full ids */
  cts_tracer_config_t cfg;
  cts_clock_us_cb clock;
  void *clock_user_data;
  /* The default clock on a usable time-stamp counter: events store raw counts (one rdtsc
   * on the sampling path) and the writer thread converts them (writer_time). */
  bool tsc_mode;
  cts_tracer_stats_t base; /* the rings' counts when the session started */
  char exe[4096];
  char host[256];
  char context[4096];
} cts__session_t;

extern cts__session_t cts__session CTS__HIDDEN;

/* Whether cfg and sink make a valid session. */
bool cts__config_ok(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink);
/* Control lock held: starts a session into `sink`, or into the connected socket
 * `socket_fd` when it is >= 0 (taken over). */
int cts__session_start_locked(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int socket_fd);
/* Control lock held: stops the running session; returns its error. */
int cts__session_stop_locked(void);
/* In a forked child (fork handler, control block locked if local): forget the parent's
 * session, sink and writer. */
void cts__session_atfork_child(void);

/* The memtrace writer's configuration for this session (cts__session's strings, the
 * sampler's rate, the program's pid), starting at `start_us`. */
void cts__session_writer_config(cts_mt_writer_config_t *wc, uint64_t start_us, uint64_t pid);
/* The first ring's claim, in any thread, from inside the allocator: makes the writer
 * process if the session waits for one. Guard raised. */
void cts__lazy_writer_start(void);
/* The program ends its trace itself (no writer process was made): the last packet at
 * `raw_end` (a cts__event_time value). The sink stays open. Control lock not held. */
int cts__writer_close_alone(uint64_t raw_end);
/* The lazy writer: whether the writer executable was found (at the session's start) and
 * this session can wait for its first sample to make it. */
bool cts__lazy_writer_fits(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink);
/* Makes the writer process by exec'ing the writer executable: 0, or -errno. */
int cts__spawn_writer_exec(void);

/* ---- small helpers shared by the files ------------------------------------------------ */

static inline void *cts__map_pages(size_t size) {
  void *const p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static inline void cts__copy_string(char *dst, size_t size, const char *src) {
  size_t n = src ? __builtin_strlen(src) : 0;
  if (n >= size) n = size - 1;
  if (n) __builtin_memcpy(dst, src, n);
  dst[n] = '\0';
}

static inline bool cts__sampling_on(void) {
  return atomic_load_explicit(&cts__tracer_active, memory_order_relaxed) != 0;
}

/* Owner-only counter update: no locked instruction on the sampling path. */
static inline void cts__bump(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* Ring r's size in words. */
static CTS_FORCE_INLINE size_t cts__ring_words(const cts__ring_t *r) {
  return (size_t)RING_WORDS >> atomic_load_explicit(&r->shift, memory_order_relaxed);
}

/* Room for an `n`-word record in ring r filled to at most `limit` words (given for a ring
 * of RING_WORDS, scaled to r's size): where it goes, or NULL. *skip gets the words of the
 * REC_PAD record written before it, if it had to go to the start of the ring. */
static CTS_FORCE_INLINE uint64_t *cts__ring_reserve(cts__ring_t *r, size_t n, size_t limit,
                                                    size_t *skip) {
  const uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  const unsigned shift = atomic_load_explicit(&r->shift, memory_order_relaxed);
  const size_t size = (size_t)RING_WORDS >> shift;
  const size_t off = (size_t)head & (size - 1u);
  CTS_ASSERT(n <= size / 4u && limit <= RING_WORDS);
  CTS_ASSERT(head - r->tail_seen <= size);
  if (CTS_UNLIKELY(off + n > size)) return cts__ring_wrap(r, n, limit, skip);
  limit >>= shift;
  if (CTS_UNLIKELY(head + n - r->tail_seen > limit) && !cts__ring_wait(r, head + n, limit))
    return NULL;
  CTS_ASSERT(head + n - r->tail_seen <= size);
  *skip = 0;
  return r->words + off;
}

/* cts__ring_reserve's common case: room for an `n`-word record before the ring's end and
 * within its size, else NULL (then cts__ring_reserve decides: wrap, wait or drop). Calls
 * nothing. */
static CTS_FORCE_INLINE uint64_t *cts__ring_reserve_fast(cts__ring_t *r, size_t n) {
  const uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  const size_t size = cts__ring_words(r);
  const size_t off = (size_t)head & (size - 1u);
  if (CTS_UNLIKELY(off + n > size || head + n - r->tail_seen > size)) return NULL;
  return r->words + off;
}

/* Publishes `total` words (the record and the padding before it) without waking the
 * writer: returns the new head, for the caller to check against r->wake_check. */
static CTS_FORCE_INLINE uint64_t cts__ring_advance(cts__ring_t *r, size_t total) {
  const uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed) + total;
  CTS_ASSERT(atomic_load_explicit(&r->owned, memory_order_relaxed) == 1);
  atomic_store_explicit(&r->head, head, memory_order_release);
  return head;
}

/* Publishes `total` words (the record and the padding before it). */
static CTS_FORCE_INLINE void cts__ring_publish(cts__ring_t *r, size_t total) {
  const uint64_t head = cts__ring_advance(r, total);
  if (CTS_UNLIKELY(head > r->wake_check)) cts__ring_wake(r, head);
}

static CTS_FORCE_INLINE cts__ring_t *cts__thread_ring(cts__thread_t *t) {
  return CTS_LIKELY(t->ring != NULL) ? t->ring : cts__ring_claim(t);
}

/* An event's time: a raw counter value in tsc_mode, else µs from the clock (writer_time
 * converts it and keeps times non-decreasing). Relaxed atomic loads: a thread of the
 * previous session still freeing may read these while the next session's start sets them
 * (its event is dropped as the old session's); plain moves on x86-64. */
/* Whether events are timed by the CPU's counter (cts__cpu_counter()), read as the next
 * cts__event_time() would. */
static CTS_FORCE_INLINE bool cts__event_time_is_tsc(void) {
#if CTS_HAVE_CPU_COUNTER
  return __atomic_load_n(&cts__session.tsc_mode, __ATOMIC_RELAXED);
#else
  return false;
#endif
}

static inline uint64_t cts__event_time(void) {
#if CTS_HAVE_CPU_COUNTER
  if (__atomic_load_n(&cts__session.tsc_mode, __ATOMIC_RELAXED)) return cts__cpu_counter();
#endif
  const cts_clock_us_cb clock = __atomic_load_n(&cts__session.clock, __ATOMIC_RELAXED);
  return clock(__atomic_load_n(&cts__session.clock_user_data, __ATOMIC_RELAXED));
}

#endif /* CTS_TRACER_STATE_H */
