/* SPDX-License-Identifier: MIT */
/* The writer (a thread, or the writer process's only thread): it drains the rings in
 * object-id order, encodes the records with the memtrace writer, writes loss markers,
 * converts time-stamp counter values, flushes, and stops. Part cts__writer. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "core/memtrace_writer.h"
#include "tracer_state.h"

/* How long the writer thread waits for an object id that was taken but whose record was
 * never published (its thread stopped in between), before writing a loss marker in its
 * place; and how soon it looks again while it waits. */
#define STALL_GIVE_UP_MS 2000u
#define STALL_RETRY_MS   1u
/* While the program writes records, the writer looks at the rings every POLL_MS instead of
 * being woken at each half ring (a futex call on the allocating thread); it stops polling
 * after POLL_IDLE_MAX looks that find nothing. A 1 MiB ring takes 2 ms or more to fill
 * half at rate 1. */
#define POLL_MS               1u
#define POLL_IDLE_MAX         50u
#define TSC_WINDOW_NS         10000000u /* calibrating the counter: 10 ms, about 10 ppm */
#define OWNER_CHECK_MS        50u       /* how often the writer process checks the program exists */
#define OWNER_CHECK_AGE_SHARE 16u       /* ... at most once per this share of the program's age */
#define EXEC_CHECK_MS         1u        /* ... while the program is about to exec (exec_pending) */

cts__writer_state_t cts__writer;

static bool is_marker_code(uint64_t code) {
  return (code & ~(CTS_TRACER_LOST_CODE_BASE - 1u)) == CTS_TRACER_LOST_CODE_BASE;
}

/* The location of one of ctfscope's own markers (a loss, a cut stack), named
 * cts__writer.marker_name: one location, if out has room for it. */
static size_t marker_location(cts_mt_location_t *out, size_t max) {
  if (max >= 1)
    out[0] = (cts_mt_location_t){.line = 1,
                                 .start_char = 0,
                                 .end_char = 0,
                                 .filename = "<ctfscope>",
                                 .defname = cts__writer.marker_name};
  return 1;
}

size_t cts__resolve_code(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)user_data;
  if (is_marker_code(code)) {
    snprintf(cts__writer.marker_name, sizeof cts__writer.marker_name,
             CTS_TRACER_LOST_NAME_PREFIX
             "%llu sampled allocations and %llu frees (trace "
             "reader too slow)",
             (unsigned long long)CTS_TRACER_LOST_ALLOCS_OF(code),
             (unsigned long long)CTS_TRACER_LOST_FREES_OF(code));
    return marker_location(out, max);
  }
  if (code - CUT_CODE_BASE <= MAX_FRAMES_LIMIT) { /* tracer_state.h, CUT_CODE_BASE */
    snprintf(cts__writer.marker_name, sizeof cts__writer.marker_name,
             CTS_TRACER_CUT_NAME_PREFIX "--max-frames %u]", (unsigned)(code - CUT_CODE_BASE));
    return marker_location(out, max);
  }
  if (!cts__session.cfg.symbolize)
    return 0; /* (and without libdw the symbolizer resolves nothing) */
  if (!cts__writer.symbolizer)
    cts__writer.symbolizer = cts__symbolizer_create(cts__wproc.traced_pid, &cts__ctl->module_epoch);
  return cts__writer.symbolizer ? cts__symbolizer_resolve(cts__writer.symbolizer, code, out, max)
                                : 0;
}

#if CTS_HAVE_CPU_COUNTER
/* The counter and CLOCK_MONOTONIC read together: the closest pair of 9. */
void cts__tsc_sample(uint64_t *counter, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 9; i++) {
    const uint64_t before = cts__cpu_counter();
    const uint64_t mono = cts_mono_ns();
    const uint64_t after = cts__cpu_counter();
    if (after - before < best) {
      best = after - before;
      *counter = before + (after - before) / 2u;
      *ns = mono;
    }
  }
}
#endif

/* tracer_state.h. Not under the control lock: no writer runs. */
void cts__writer_clock_start(void) {
  cts__writer.tsc_ok = cts__writer.tsc_tried = cts__writer.writer_ending = false;
#if CTS_HAVE_CPU_COUNTER
  if (cts__session.tsc_mode) cts__tsc_sample(&cts__writer.tsc_start, &cts__writer.tsc_start_ns);
#endif
}

/* Calibrates the time-stamp counter on the writer thread when the first event's time is
 * written, so that no allocating thread waits for it: against the pair read when the
 * session started (tsc_start), over TSC_WINDOW_NS at least. A session that has run that
 * long needs no sleep, and one without events (a short program at the default rate) no
 * calibration at all. */
static CTS_NOINLINE void calibrate_tsc(void) {
  cts__writer.tsc_tried = true;
#if CTS_HAVE_CPU_COUNTER
  uint64_t c1, n1;
  cts__tsc_sample(&c1, &n1);
  /* A session that ends inside the window has no later times to place: the window it had
   * covers every time written, so its calibration is as exact as the run needs, and the
   * program (which waits for its writer at exit) is not held up by a sleep. */
  if (!cts__writer.writer_ending && n1 - cts__writer.tsc_start_ns < TSC_WINDOW_NS) {
    const uint64_t left = TSC_WINDOW_NS - (n1 - cts__writer.tsc_start_ns);
    struct timespec wait = {0, (long)left};
    while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {}
    cts__tsc_sample(&c1, &n1);
  }
  const uint64_t c0 = cts__writer.tsc_start, n0 = cts__writer.tsc_start_ns;
  /* (n1 - n0) < 2^34 for sessions under 17 s; a longer one drops its low bits first. */
  uint64_t dn = n1 - n0, dc = c1 - c0;
  while (dn >= (UINT64_C(1) << 34)) dn >>= 1, dc >>= 1;
  const uint64_t mult = c1 > c0 && n1 > n0 && dc ? (dn << 30) / dc << 2 : 0;
  cts__writer.tsc = (cts_tsc_clock_t){.base_counter = c1, .base_ns = n1, .mult = mult};
  cts__writer.tsc_ok = mult != 0;
#endif
  /* The counter maps to CLOCK_MONOTONIC; the offset to the wall clock is read between two
   * monotonic readings, the closest pair of 8 (a preemption between them would skew it). */
  int64_t best = INT64_MAX;
  for (int i = 0; i < 8; i++) {
    struct timespec real;
    const int64_t a = (int64_t)cts_mono_ns();
    clock_gettime(CLOCK_REALTIME, &real);
    const int64_t b = (int64_t)cts_mono_ns();
    if (b - a < best) {
      best = b - a;
      cts__writer.real_minus_mono =
          ((int64_t)real.tv_sec * 1000000000 + real.tv_nsec) - a - (b - a) / 2;
    }
  }
}

/* An event's time in µs from what cts__event_time() stored, never below the previous one
 * written (counters read on different CPUs may be a few cycles apart). */
static CTS_FORCE_INLINE uint64_t writer_time(uint64_t raw) {
  uint64_t us = raw;
#if CTS_HAVE_CPU_COUNTER
  if (cts__session.tsc_mode && !cts__writer.tsc_tried) calibrate_tsc();
  if (cts__session.tsc_mode)
    us = cts__writer.tsc_ok
             ? (uint64_t)((int64_t)cts__tsc_to_ns(&cts__writer.tsc, raw) +
                          cts__writer.real_minus_mono) /
                   1000u
             : cts__writer.writer_time; /* not calibrated: no better time than the last */
#endif
  if (us < cts__writer.writer_time) us = cts__writer.writer_time;
  cts__writer.writer_time = us;
  return us;
}

/* tracer_state.h. */
bool cts__writer_memory(void) {
  if (!cts__writer.writer_mem) {
    cts_mt_writer_config_t wc;
    cts_mt_writer_config_init(&wc);
    wc.max_backtrace_frames = REC_FRAMES_MAX;
    cts__writer.writer_mem_size = cts_mt_writer_size(&wc);
    cts__writer.writer_mem = cts__map_pages(cts__writer.writer_mem_size);
    if (!cts__writer.writer_mem) return false;
  }
  return true;
}

/* tracer_state.h. */
int cts__writer_init(const cts_mt_writer_config_t *wc) {
  if (cts__writer.writer_mem_used &&
      madvise(cts__writer.writer_mem, cts__writer.writer_mem_size, MADV_DONTNEED) != 0)
    memset(cts__writer.writer_mem, 0, cts__writer.writer_mem_size);
  cts__writer.writer_mem_used = true;
  cts__writer.event_memory_mapped = false;
  return cts__mt_writer_init_zeroed(&cts__writer.writer, cts__writer.writer_mem,
                                    cts__writer.writer_mem_size, wc);
}

/* tracer_state.h. Control lock held. */
void cts__writer_reset(uint64_t start) {
  cts__writer.emitted = 0;
  cts__writer.ring_visits = 0;
  cts__writer.pending.present = false;
  cts__writer.lost_taken = cts__ring_losses();
  cts__writer.writer_time = start;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it (EINVAL): ignored */
#endif

/* Before the session's first event: the memtrace writer's tables, fresh from mmap, are
 * mapped in one call. An event's backtrace touches cache buckets all over them (hashes of
 * its codes), so the first few dozen events took a page fault each on most of their ~110
 * pages: sqlite3's 37 samples at the default rate, 147 faults, 2-3 us each on this kind of
 * machine (a VM), against ~1 us a page mapped in one madvise. A session without events
 * (most images of an exec chain) maps none of it. Failure only costs the faults. */
static void map_event_memory(void) {
  cts__writer.event_memory_mapped = true;
  size_t size;
  uint8_t *const start = cts__mt_writer_event_memory(cts__writer.writer, &size);
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t first = (uintptr_t)start & ~(page - 1u);
  (void)madvise((void *)first, (uintptr_t)start + size - first, MADV_POPULATE_WRITE);
}

/* A loss marker: one alloc of the lost words and samples at a code that counts the lost
 * events, collected at once (tracer.h, "Drop mode"). Takes the object id cts__writer.emitted. */
static int write_marker(const cts__loss_t *loss, uint64_t raw_time) {
  const uint64_t allocs = loss->allocs < 0x7FFFFFFFu ? loss->allocs : 0x7FFFFFFFu;
  const uint64_t frees = loss->collects < 0x3FFFFFFFu ? loss->collects : 0x3FFFFFFFu;
  const uint64_t code = CTS_TRACER_LOST_CODE_BASE | allocs << 30 | frees;
  uint64_t id;
  const uint64_t time = writer_time(raw_time);
  if (CTS_UNLIKELY(!cts__writer.event_memory_mapped)) map_event_memory();
  int e = cts_mt_writer_alloc(cts__writer.writer, time, loss->words, loss->samples,
                              CTS_MT_SOURCE_MAJOR, &code, 1, &id);
  if (!e) e = cts_mt_writer_collect(cts__writer.writer, time, cts__writer.emitted);
  cts__writer.emitted++;
  cts__ctl->stats.loss_markers++;
  return e;
}

/* The pending loss marker, if its id is next. */
static int marker_if_due(bool *progress) {
  if (!cts__writer.pending.present || (cts__writer.pending.id & ID_MASK) != cts__writer.emitted)
    return 0;
  cts__writer.pending.present = false;
  *progress = true;
  return write_marker(&cts__writer.pending.loss, cts__writer.pending.time);
}

/* Turns the losses since the last marker into a pending marker, with a fresh object id
 * and the current time. */
static void take_losses(void) {
  if (cts__writer.pending.present) return;
  const cts__loss_t now = cts__ring_losses();
  const cts__loss_t d = {
      now.allocs - cts__writer.lost_taken.allocs, now.collects - cts__writer.lost_taken.collects,
      now.words - cts__writer.lost_taken.words, now.samples - cts__writer.lost_taken.samples};
  if (!d.allocs && !d.collects) return;
  cts__writer.lost_taken = now;
  cts__writer.pending.loss = d;
  cts__writer.pending.time = cts__event_time();
  cts__writer.pending.id = atomic_fetch_add(&cts__ctl->next_id, 1);
  cts__writer.pending.present = true;
}

/* An alloc record: its frames are innermost first in the ring (so that the sampling
 * thread walks the stack straight into it); memtrace wants them outermost first, and the
 * encoder reverses only the frames past the common prefix with the previous backtrace
 * (reversing all of them here took 84-108 instructions per allocation: bench/README.md,
 * "The memtrace encoder per event"). */
static int write_alloc(const uint64_t *rec, size_t depth) {
  const uint64_t *const frames = rec + REC_ALLOC_WORDS;
  CTS_ASSERT((rec[2] & ID_MASK) == cts__writer.emitted && depth <= REC_FRAMES_MAX);
  /* A walk that found a frame past the limit was cut: that frame, the outermost, becomes
   * the marker that says so (tracer_state.h, CUT_CODE_BASE). Written in the record, which
   * is the writer's until it moves the tail past it. (Beyond one more: a thread that
   * walked with the previous session's limit.) */
  const size_t max_frames = cts__session.cfg.max_frames;
  if (CTS_UNLIKELY(depth > max_frames)) {
    ((uint64_t *)frames)[max_frames] = CUT_CODE_BASE + max_frames;
    depth = max_frames + 1u;
  }
  uint64_t id;
  if (CTS_UNLIKELY(!cts__writer.event_memory_mapped)) map_event_memory();
  const int e =
      cts__mt_writer_alloc_innermost_first(cts__writer.writer, writer_time(rec[1]), rec[3], rec[4],
                                           CTS_MT_SOURCE_MAJOR, frames, depth, &id);
  cts__writer.emitted++;
  return e;
}

/* Ids taken in this session that are not written yet. */
static bool ids_outstanding(void) {
  const uint64_t next = atomic_load(&cts__ctl->next_id);
  /* Only ids taken are written (give_up_id writes in place of one taken). */
  CTS_ASSERT((next >> ID_BITS) != cts__session.session_bits ||
             (next & ID_MASK) >= cts__writer.emitted);
  return (next >> ID_BITS) == cts__session.session_bits && (next & ID_MASK) > cts__writer.emitted;
}

/* The writer's choice before it waits: poll again within POLL_MS while the program writes
 * records (`busy`), or rest until a thread wakes it (a ring half full), a flush or a stop.
 * Resting, it says so first and then looks at the rings once more (the fence pairs with
 * cts__ring_wake's): a record published meanwhile is seen here, or its thread sees the writer
 * resting and wakes it. Whether to poll. */
static bool writer_poll(bool busy) {
  if (busy) {
    atomic_store_explicit(&cts__ctl->writer_polling, true, memory_order_relaxed);
    return true;
  }
  atomic_store_explicit(&cts__ctl->writer_polling, false, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  return cts__rings_pending();
}

/* What a ring's first unwritten record waits for: the object id `emitted` must reach (an
 * allocation's own id; a collect's id + 1), or NO_WAIT when the ring holds nothing more. */
#define NO_WAIT UINT64_MAX

/* One pass's bookkeeping over the rings (drain). */
typedef struct {
  uint64_t taken; /* words consumed */
  bool progress;  /* some record consumed */
  bool space;     /* some ring left at most half full: waiters may go on */
  int err;        /* the first error */
} drain_pass_t;

/* Writes ring r's records from its tail while they can be written now (or are to be
 * skipped), up to the head as loaded here, and returns what the next one waits for. */
static uint64_t drain_ring(cts__ring_t *r, drain_pass_t *pass) {
  cts__writer.ring_visits++;
  const uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  const uint64_t start = atomic_load_explicit(&r->tail, memory_order_relaxed);
  /* Read after `head`: its size when the owner published it. Where a larger size puts a
   * record, a smaller one put it too (cts__ring_wrap), so a size newer than `head` is as
   * good. */
  const size_t size = cts__ring_words(r);
  uint64_t tail = start, waits_for = NO_WAIT;
  int e;
  while (tail != head) {
    const uint64_t *const rec = r->words + (tail & (size - 1u));
    const unsigned kind = (unsigned)(rec[0] & 0xFFu);
    if (kind == REC_PAD) {
      /* A pad runs to the end of the ring. */
      CTS_ASSERT((tail & (size - 1u)) + (rec[0] >> 8) == size);
      tail += rec[0] >> 8;
      continue;
    }
    CTS_ASSERT(kind == REC_ALLOC || kind == REC_COLLECT);
    const size_t depth = kind == REC_ALLOC ? (size_t)(rec[0] >> 8) : 0;
    const uint64_t full = rec[2], id = full & ID_MASK;
    if ((full >> ID_BITS) == cts__session.session_bits) {
      if (kind == REC_ALLOC) {
        if (id > cts__writer.emitted) {
          waits_for = id;
          break;
        }
        if (id == cts__writer.emitted) {
          e = write_alloc(rec, depth);
          if (e && !pass->err) pass->err = e;
          bool marked = false;
          e = marker_if_due(&marked);
          if (e && !pass->err) pass->err = e;
        }
      } else {
        if (id >= cts__writer.emitted) {
          waits_for = id + 1u;
          break;
        }
        e = cts_mt_writer_collect(cts__writer.writer, writer_time(rec[1]), id);
        if (e && !pass->err) pass->err = e;
      }
    }
    tail += kind == REC_ALLOC ? REC_ALLOC_WORDS + depth : REC_COLLECT_WORDS;
  }
  CTS_ASSERT(tail - start <= head - start && head - start <= size); /* in bounds */
  if (tail != start) {
    pass->taken += tail - start;
    atomic_store(&r->tail, tail); /* seq_cst: see cts__ring_wait */
    atomic_store_explicit(&r->wake_sent, false, memory_order_relaxed);
    pass->progress = true;
    /* A waiter wants its ring at most half full (its record, unpublished, lies beyond
     * `head`): only then is it worth a wake-up. */
    if (head - tail <= size / 2u) pass->space = true;
  }
  return waits_for;
}

/* The rings that wait, as a binary min-heap on what they wait for (drain). Grown by the
 * writer as threads add rings; the writer's own memory (it runs guarded). */
typedef struct {
  uint64_t waits_for;
  cts__ring_t *ring;
} waiting_ring_t;
static waiting_ring_t *waiting_rings;
static size_t waiting_count, waiting_cap;

static bool waiting_push(uint64_t waits_for, cts__ring_t *r) {
  if (waiting_count == waiting_cap) {
    const size_t cap = waiting_cap ? 2u * waiting_cap : 64u;
    waiting_ring_t *const grown = realloc(waiting_rings, cap * sizeof *grown);
    if (!grown) return false;
    waiting_rings = grown, waiting_cap = cap;
  }
  size_t i = waiting_count++;
  for (; i > 0 && waiting_rings[(i - 1u) / 2u].waits_for > waits_for; i = (i - 1u) / 2u)
    waiting_rings[i] = waiting_rings[(i - 1u) / 2u];
  waiting_rings[i] = (waiting_ring_t){waits_for, r};
  return true;
}

static cts__ring_t *waiting_pop(void) {
  cts__ring_t *const top = waiting_rings[0].ring;
  const waiting_ring_t last = waiting_rings[--waiting_count];
  size_t i = 0;
  for (;;) {
    size_t c = 2u * i + 1u;
    if (c >= waiting_count) break;
    if (c + 1u < waiting_count && waiting_rings[c + 1u].waits_for < waiting_rings[c].waits_for) c++;
    if (waiting_rings[c].waits_for >= last.waits_for) break;
    waiting_rings[i] = waiting_rings[c];
    i = c;
  }
  if (waiting_count) waiting_rings[i] = last;
  return top;
}

/* Writes every record that can be written: allocations in object-id order, each collect
 * once its allocation is written. Ids grow along each ring and a collect follows its
 * allocation's publication, so the head record of some ring can always go unless the next
 * id is still on its way (*blocked then says that records wait). Records of another session
 * (published by a thread after its session ended) and of ids given up are skipped.
 *
 * Each pass looks at every ring once, then takes the rings in the order of what they wait
 * for (a heap), each as soon as the ids written reach it. Going round the rings in list
 * order instead wrote a few records per ring visited: with many threads allocating at once,
 * whose ids interleave, every record cost a visit to most rings (1 000 threads: the writer
 * spent 71 % of its time there, and the program waited for it). */
static int drain(size_t min_pass, bool *progress_out, bool *blocked_out) {
  bool any = false, blocked = false;
  int err = 0;
  cts__ring_t *const rings = atomic_load_explicit(&cts__ctl->rings, memory_order_acquire);
  for (bool again = true; again;) {
    drain_pass_t pass = {0};
    int e = marker_if_due(&pass.progress);
    if (e) pass.err = e;
    waiting_count = 0;
    bool unlisted = false; /* a ring that waits but found no room in the heap */
    for (cts__ring_t *r = rings; r; r = r->next) {
      const uint64_t waits_for = drain_ring(r, &pass);
      if (waits_for != NO_WAIT && !waiting_push(waits_for, r)) unlisted = true;
    }
    while (waiting_count) {
      if (waiting_rings[0].waits_for <= cts__writer.emitted) {
        cts__ring_t *const r = waiting_pop();
        const uint64_t waits_for = drain_ring(r, &pass);
        if (waits_for != NO_WAIT && !waiting_push(waits_for, r)) unlisted = true;
        continue;
      }
      bool marked = false;
      e = marker_if_due(&marked);
      if (e && !pass.err) pass.err = e;
      if (!marked) break;
      pass.progress = true;
    }
    /* Without room to list every ring, the next pass goes round again (as it would for
     * records published meanwhile). */
    blocked = waiting_count > 0 || unlisted;
    if (pass.err && !err) err = pass.err;
    any |= pass.progress;
    if (pass.space && atomic_load(&cts__ctl->waiters)) {
      cts__ctl_lock();
      cts__ctl_wake(&cts__ctl->progress, true);
      cts__ctl_unlock();
    }
    again = pass.progress && pass.taken >= min_pass;
  }
  *progress_out = any;
  *blocked_out = blocked;
  return err;
}

/* An id taken STALL_GIVE_UP_MS ago whose record never came: a loss marker takes its place,
 * so that the ids after it can be written. (Should the record come after all, it is
 * skipped as stale.) */
static int give_up_id(void) {
  cts__ctl->gave_up++;
  const cts__loss_t one = {1, 0, 0, 0};
  return write_marker(&one, cts__event_time());
}

/* How long a writer process may go without looking whether the program is gone, the
 * program being `age_ms` old. A program that ends by _exit (dash and other shells, most
 * forked children), a signal or an exec does not wake the writer: it is seen gone at the
 * next look, and `record` (and the trace's end time) wait for that look. A flat
 * OWNER_CHECK_MS made every such short run up to 50 ms longer (a 20-image exec chain,
 * 15 ms untraced: 80-90 ms traced); looking at most once per sixteenth of the age keeps
 * that wait under ~6 % of the run for a few dozen more looks in its first second. */
uint64_t cts__owner_check_ms(uint64_t age_ms) {
  const uint64_t share = age_ms / OWNER_CHECK_AGE_SHARE;
  return share < EXEC_CHECK_MS ? EXEC_CHECK_MS : share > OWNER_CHECK_MS ? OWNER_CHECK_MS : share;
}

/* A write into the trace file failed (`e`, a sink error): `record` is told now, through its
 * notes pipe, by whichever side holds it: a writer process still does when the program has
 * closed its own copy (closefrom(3) at its start), and a writer stopped between two packets
 * leaves a shorter trace that cannot tell by itself. */
static void note_sink_error(int e) {
  if (e && e != CTS_E_CLOSED && cts__sink.sink.kind == CTS_TRACER_SINK_FILE)
    cts__tracer_note_loss(cts__sink.path, e);
}

/* The trace is closed (`e`: the close's error): its length and error are told, and that no
 * writer runs any more. */
static void tell_writer_ended(int e) {
  note_sink_error(e);
  cts__ctl_lock();
  cts__ctl->stats.bytes_written = cts__sink.bytes_written;
  if (e && e != CTS_E_CLOSED && !cts__ctl->stats.error) cts__ctl->stats.error = e;
  cts__ctl->thread_running = false;
  cts__ctl_wake(&cts__ctl->progress, true);
  cts__ctl_unlock();
}

void *cts__writer_main(void *arg) {
  (void)arg;
  cts__guard_enter(); /* for life: nothing this thread allocates is traced */
  /* No one-off work here: the counter is calibrated at the first event's time
   * (writer_time), the symbolizer made at the first code (cts__resolve_code), each module's
   * debug information read when a code first lies in it. */
  const uint64_t interval =
      cts__session.cfg.flush_interval_ms ? cts__session.cfg.flush_interval_ms : 1000;
  const uint64_t started_ms = cts_mono_ms(); /* about when the program started */
  uint64_t next_flush = started_ms + interval;
  uint64_t stalled_since = 0; /* ms; 0 = writing goes on */
  bool dirty = false, waiting = false, progress = false;
  unsigned idle_polls = POLL_IDLE_MAX + 1u; /* resting until the first records */
  for (;;) {
    cts__ctl_lock();
    uint64_t now_ms = cts_mono_ms();
    const bool asked = cts__ctl->stop_requested ||
                       cts__ctl->flush_requested != cts__ctl->flush_done ||
                       cts__ctl->wake_requested;
    /* Records waiting for an id on its way, and none written last time: look again soon
     * (also when stopping: no busy loop while the id comes). */
    const bool stalled = waiting && !progress;
    /* Records taken on the last pass, or some left: polled for a while (POLL_IDLE_MAX
     * passes that take nothing), so that a thread that fills its ring wakes nobody. */
    idle_polls = progress ? 0 : idle_polls + 1;
    const bool poll =
        writer_poll(idle_polls <= POLL_IDLE_MAX && (progress || cts__rings_pending()));
    if ((!asked && now_ms < next_flush) || stalled) {
      uint64_t until = stalled || (waiting && now_ms + STALL_RETRY_MS < next_flush)
                           ? now_ms + STALL_RETRY_MS
                       : poll && now_ms + POLL_MS < next_flush ? now_ms + POLL_MS
                                                               : next_flush;
      /* A writer process looks at the program's pipe this often: the trace's end time is
       * when it sees the program gone (killed, exec'd), so no later than this after. Right
       * before an exec it looks every EXEC_CHECK_MS: `record` and the exec'd image's
       * summary wait for this trace to be finished. Not while its watcher thread is woken by
       * the pipe closing (writer_process.c): an idle writer then sleeps until the flush. */
      const uint64_t owner_check =
          atomic_load_explicit(&cts__ctl->exec_pending, memory_order_relaxed)
              ? EXEC_CHECK_MS
              : cts__owner_check_ms(now_ms - started_ms);
      if (cts__wproc.owner_watch_fd >= 0 && !cts__owner_watched() && until > now_ms + owner_check)
        until = now_ms + owner_check;
      const struct timespec ts = cts__deadline_in_ms(until - now_ms);
      cts__ctl_timedwait(&cts__ctl->writer_wake, &ts);
    }
    const bool stop_requested = cts__ctl->stop_requested;
    const uint64_t flush_target = cts__ctl->flush_requested;
    const bool flush_wanted = flush_target != cts__ctl->flush_done;
    cts__ctl->wake_requested = false;
    cts__ctl_unlock();
    /* A writer process also stops when the program has exited or exec'd (killed, or
     * _exit without stopping): what its rings hold is all there will be. */
    if (cts__wproc.owner_watch_fd >= 0 && !cts__writer.owner_gone &&
        (cts__writer.owner_gone = cts__owner_is_gone())) {
      cts__ctl_lock();
      if (!cts__ctl->end_time) cts__ctl->end_time = cts__event_time();
      cts__ctl_unlock();
    }
    const bool stopping = stop_requested || cts__writer.owner_gone;
    cts__writer.writer_ending = stopping;

    now_ms = cts_mono_ms();
    const bool timed = now_ms >= next_flush;
    bool blocked;
    /* Unless a flush, a stop or the timer asks for everything, a pass that finds little
     * ends the drain: the writer waits for the next wake-up (the rings half full) instead
     * of following the program's writes record by record, which would have the two
     * threads pass the ring's newest cache lines and its head back and forth. */
    const size_t min_pass = stopping || flush_wanted || timed ? 0 : RING_WORDS / 16u;
    int err = drain(min_pass, &progress, &blocked);
    take_losses();
    if (cts__writer.pending.present) { /* its id may be next */
      bool more, still;
      const int e = drain(min_pass, &more, &still);
      if (e && !err) err = e;
      progress |= more;
      blocked = still;
    }
    dirty |= progress;
    waiting = blocked || ids_outstanding() || cts__writer.pending.present;
    if (!waiting || progress) {
      stalled_since = 0;
    } else if (!stalled_since) {
      stalled_since = now_ms;
    } else if (now_ms - stalled_since >= STALL_GIVE_UP_MS || cts__writer.owner_gone) {
      const int e = give_up_id();
      if (e && !err) err = e;
      dirty = true;
      stalled_since = 0;
      continue;
    }
    if (dirty && (timed || flush_wanted || stopping)) {
      const int e = cts_mt_writer_flush(cts__writer.writer);
      if (e && !err) err = e;
      dirty = false;
    }
    /* The zstd stage ends a block at each flush: the sink then holds a stream decodable
     * up to here (tracer.h, "Compression"). An asked-for flush (before exec and dlclose,
     * which a writer thread may not survive) ends the frame: the file is then complete. */
    if (cts__sink.zsink &&
        (flush_wanted || ((timed || stopping) && cts__zsink_pending(cts__sink.zsink)))) {
      const int e =
          flush_wanted ? cts__zsink_end(cts__sink.zsink) : cts__zsink_flush(cts__sink.zsink);
      if (e && !err) err = e;
    }
    if (timed) next_flush = cts_mono_ms() + interval;

    cts__ctl_lock();
    cts__ctl->stats.bytes_written = cts__sink.bytes_written;
    const bool first_error = err && !cts__ctl->stats.error; /* told once, below */
    if (first_error) {
      cts__ctl->stats.error = err;
      /* The writer is closed after a sink error: stop sampling for nothing. */
      atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
      atomic_store(&cts__ctl->failed, true);
    }
    if (flush_wanted) cts__ctl->flush_done = flush_target;
    CTS_ASSERT(cts__ctl->flush_done <= cts__ctl->flush_requested);
    /* A flush done, or sampling ended on an error: whoever waits is told. Threads waiting
     * for ring space are told by drain, once their ring is half empty; waking them at
     * every pass (every POLL_MS) would cost them a system call each time. */
    if (flush_wanted || err) cts__ctl_wake(&cts__ctl->progress, true);
    const bool done = stopping && !waiting;
    cts__ctl_unlock();
    if (first_error) note_sink_error(err);
    if (done) break;
  }

  /* The last packet ends when the program did (or stopped the session), not at its last
   * sampled event: durations then cover the whole run. */
  cts__ctl_lock();
  const uint64_t end = cts__ctl->end_time ? cts__ctl->end_time : cts__event_time();
  cts__ctl_unlock();
  int e = cts_mt_writer_close_at(cts__writer.writer, writer_time(end));
  if (cts__sink.zsink) {
    const int ze = cts__zsink_end(cts__sink.zsink);
    if (ze && (!e || e == CTS_E_CLOSED)) e = ze;
  }
  /* The writer process exits next: tearing libdw down there only frees memory, through the
   * program's allocator (jemalloc's blocks once made it fault at this point), after the
   * trace is complete but before the program is told. */
  if (cts__writer.symbolizer && cts__wproc.owner_watch_fd < 0) {
    cts__symbolizer_destroy(cts__writer.symbolizer);
    cts__writer.symbolizer = NULL;
  }
  tell_writer_ended(e);
  return NULL;
}

/* tracer_state.h. The program, without a writer process (the lazy writer): what the writer
 * writes at its end, the last packet ending at `raw_end`, the time-stamp counter converted
 * against the session's start pair with no calibration sleep (as a writer that ends within
 * its window does). Nothing else was ever written but the header. */
int cts__writer_close_alone(uint64_t raw_end) {
  cts__writer.writer_ending = true;
  const int e = cts_mt_writer_close_at(cts__writer.writer, writer_time(raw_end));
  tell_writer_ended(e);
  return e;
}
