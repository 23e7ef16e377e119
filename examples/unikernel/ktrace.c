/* SPDX-License-Identifier: MIT */
#include "ktrace.h"

#include <ctfscope/memtrace.h>

#include "kalloc.h"
#include "klib.h"
#include "ksyms.h"

#define MAX_FRAMES    64u  /* backtrace depth recorded */
#define WRITER_FRAMES 256u /* frames the writer remembers for common prefixes */
#define RING_SIZE     (256u * 1024u)
#define RING_PACKETS  16u
#define PID           1u
#define FLUSH_NS      100000000u /* ktrace_poll(): most time an event waits in the writer */
#define FLUSH_EVENTS  1024u      /* ktrace_poll(): most events waiting, whatever the time */

extern char boot_stack[], boot_stack_top[]; /* boot.S: the only stack */

static _Alignas(8) uint8_t writer_mem[CTS_MT_WRITER_MIN_SIZE + 10u * WRITER_FRAMES + 4096u];
static _Alignas(8) uint8_t ring_buf[RING_SIZE];
static uint64_t ring_state[CTS_MPROF_RING_STATE_SIZE(RING_PACKETS) / 8];

static struct {
  cts_mt_writer_t *mt; /* NULL when stopped or failed */
  cts_mprof_ring_t *ring;
  cts_mprof_writer_t tw;
  bool tasks_on;
  bool busy; /* inside the tracer: a fault now must not touch its state */
  double rate;
  uint64_t rng;
  uint64_t countdown; /* words up to and including the next sampled one */
  cts_task_id_t next_id;
  uint64_t epoch_us; /* the RTC at boot */
  serial_t *mt_port, *task_port;
  uint64_t flushed_at_ns, flushed_events; /* the last ktrace_poll() flush */
  ktrace_stats_t st;
} kt;

const ktrace_stats_t *ktrace_stats(void) {
  kt.st.task_dropped = kt.ring ? cts_mprof_ring_dropped(kt.ring) : 0;
  return &kt.st;
}

/* ---- clocks --------------------------------------------------------------------------- */

static uint64_t now_us(void *unused) {
  (void)unused;
  return kt.epoch_us + clock_ns() / 1000u;
}

static uint64_t now_ns(void *unused) {
  (void)unused;
  return clock_ns();
}

/* TSC cycles spent so far sending bytes: subtracted from the hooks' own cost, since a
 * packet that fills during a hook is sent from inside it. */
static uint64_t io_cycles(void) {
  return kt.mt_port->cycles + kt.task_port->cycles;
}

/* ---- sampling --------------------------------------------------------------------------- */

static uint64_t rand64(void) { /* xorshift64* */
  kt.rng ^= kt.rng >> 12;
  kt.rng ^= kt.rng << 25;
  kt.rng ^= kt.rng >> 27;
  return kt.rng * 0x2545F4914F6CDD1Dull;
}

/* Natural logarithm for 0 < x ≤ 1 (no libm here): x = m·2^e with m in [1, 2), and
 * ln m = 2·atanh((m-1)/(m+1)), whose series converges fast for (m-1)/(m+1) ≤ 1/3. */
static double ln(double x) {
  union {
    double d;
    uint64_t u;
  } v = {.d = x};
  const int e = (int)((v.u >> 52) & 0x7FF) - 1023;
  v.u = (v.u & ~(0x7FFull << 52)) | (1023ull << 52);
  const double s = (v.d - 1) / (v.d + 1), s2 = s * s;
  double term = s, sum = 0;
  for (int k = 1; k < 40; k += 2) {
    sum += term / k;
    term *= s2;
  }
  return 2 * sum + e * 0.69314718055994530942;
}

/* Words to the next sample, ≥ 1: geometric with p = λ, as Poisson sampling per word. */
static uint64_t draw(void) {
  if (kt.rate >= 1) return 1;
  const double u = ((double)(rand64() >> 11) + 1) / 9007199254740993.0; /* (0, 1] */
  const double d = ln(u) / ln(1 - kt.rate);
  return d >= 1e18 ? (uint64_t)1e18 : 1 + (uint64_t)d;
}

/* Samples falling in a block of @p words. */
static uint64_t samples_in(uint64_t words) {
  if (words < kt.countdown) {
    kt.countdown -= words;
    return 0;
  }
  uint64_t n = 1, rest = words - kt.countdown, d = draw();
  while (d <= rest) {
    n++;
    rest -= d;
    d = draw();
  }
  kt.countdown = d - rest;
  return n;
}

/* ---- locations -------------------------------------------------------------------------- */

/* Index of the last of @p n entries of @p stride bytes whose address (first member) is at
 * most @p addr, or n when there is none. */
static size_t last_at_or_below(const void *table, size_t n, size_t stride, uint64_t addr) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (*(const uint64_t *)((const char *)table + mid * stride) <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? lo - 1 : n;
}

/* The function containing @p code - 1 (a return address points after its call), and the
 * line of the call from the line table; the function's own line if the table has none. */
static size_t resolve(void *unused, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)unused;
  const uint64_t at = code - 1;
  const size_t si = last_at_or_below(ksyms, ksyms_count, sizeof ksyms[0], at);
  if (si == ksyms_count || max == 0) return 0;
  const ksym_t *s = &ksyms[si];
  out[0] = (cts_mt_location_t){.line = s->line, .filename = s->file, .defname = s->name};
  const size_t li = last_at_or_below(klines, klines_count, sizeof klines[0], at);
  if (li != klines_count && klines[li].addr >= s->addr) {
    out[0].line = klines[li].line;
    out[0].filename = kfiles[klines[li].file];
  }
  return 1;
}

/* ---- allocation hooks ------------------------------------------------------------------- */

static void mt_failed(int err) {
  if (!kt.st.mt_error) kt.st.mt_error = (uint64_t)(-(int64_t)err);
  kt.mt = NULL; /* the writer closed itself; the trace ends at its last whole packet */
}

/* Return addresses from @p frame outwards, stored outermost first. Frame pointers are
 * followed only while they stay inside the kernel's stack and go up it, so a corrupt
 * chain ends the backtrace instead of faulting. */
static size_t backtrace(void *frame, uint64_t *bt) {
  uint64_t inner[MAX_FRAMES];
  size_t n = 0;
  const uint64_t *fp = frame;
  while (n < MAX_FRAMES && (const char *)fp >= boot_stack &&
         (const char *)(fp + 2) <= boot_stack_top && ((uintptr_t)fp & 7) == 0) {
    if (fp[1] == 0) break;
    inner[n++] = fp[1];
    const uint64_t *next = (const uint64_t *)fp[0];
    if (next <= fp) break;
    fp = next;
  }
  for (size_t i = 0; i < n; i++) bt[i] = inner[n - 1 - i];
  return n;
}

static uint64_t on_alloc(size_t size, void *frame) {
  if (!kt.mt) return 0;
  const uint64_t t0 = rdtsc(), io0 = io_cycles();
  kt.st.hook_calls++;
  const uint64_t words = (size + 7) / 8;
  const uint64_t n = samples_in(words ? words : 1);
  uint64_t id = 0;
  if (n) {
    kt.busy = true;
    uint64_t bt[MAX_FRAMES];
    const size_t depth = backtrace(frame, bt);
    const int err =
        cts_mt_writer_alloc(kt.mt, CTS_TIME_NOW, words, n, CTS_MT_SOURCE_MAJOR, bt, depth, &id);
    if (err) {
      mt_failed(err);
      id = 0;
    } else {
      kt.st.sampled++;
      kt.st.samples += n;
      /* Ties the sample to the running task (docs/formats/mprof.md §14.1). Ids start at 0
       * in memtrace; 0 means "not sampled" to the allocator, so it keeps id + 1. */
      if (kt.tasks_on) {
        const cts_mprof_event_t ev = {
            .time_ns = CTS_TIME_NOW, .id = CTS_MPROF_ALLOC, .thread = kt.tw.current, .arg = id};
        cts_mprof_writer_write(&kt.tw, &ev);
      }
      id++;
    }
    kt.busy = false;
    kt.st.sampled_cycles += rdtsc() - t0 - (io_cycles() - io0);
  }
  kt.st.hook_cycles += rdtsc() - t0 - (io_cycles() - io0);
  return id;
}

static void on_free(uint64_t id) {
  if (!kt.mt) return;
  kt.busy = true;
  const int err = cts_mt_writer_collect(kt.mt, CTS_TIME_NOW, id - 1);
  kt.busy = false;
  if (err)
    mt_failed(err);
  else
    kt.st.collects++;
}

/* ---- task hooks ------------------------------------------------------------------------- */

static void task_event(uint8_t id, int64_t thread, uint64_t arg, int64_t value, uint8_t type,
                       const char *str) {
  if (!kt.tasks_on) return;
  const uint64_t t0 = rdtsc(), io0 = io_cycles();
  kt.busy = true;
  const cts_mprof_event_t ev = {.time_ns = CTS_TIME_NOW,
                                .id = id,
                                .thread_type = type,
                                .thread = thread,
                                .arg = arg,
                                .value = value,
                                .str = str,
                                .str_len = str ? strlen(str) : 0};
  if (cts_mprof_writer_write(&kt.tw, &ev) == 0) kt.st.task_events++;
  kt.busy = false;
  kt.st.task_cycles += rdtsc() - t0 - (io_cycles() - io0);
}

cts_task_id_t kt_create(cts_task_type_t type, const char *label) {
  const cts_task_id_t id = kt.next_id++;
  task_event(CTS_MPROF_CREATES, kt.tw.current, (uint64_t)id, 0, (uint8_t)type, NULL);
  if (label) task_event(CTS_MPROF_LABEL, id, 0, 0, 0, label);
  return id;
}

cts_task_id_t kt_current(void) {
  return kt.tw.current;
}

void kt_read(cts_task_id_t reader, cts_task_id_t source) {
  kt.tw.current = reader; /* a read is an implicit switch (§7.3) */
  if (reader != source) task_event(CTS_MPROF_READ, reader, (uint64_t)source, 0, 0, NULL);
}

void kt_try_read(cts_task_id_t waiter, cts_task_id_t source) {
  task_event(CTS_MPROF_TRY_READ, waiter, (uint64_t)source, 0, 0, NULL);
}

void kt_resolved(cts_task_id_t task) {
  task_event(CTS_MPROF_FULFILLS, kt.tw.current, (uint64_t)task, 0, 0, NULL);
}

void kt_switch(cts_task_id_t task) {
  if (kt.tw.current == task) return;
  kt.tw.current = task;
  task_event(CTS_MPROF_SWITCH, task, 0, 0, 0, NULL);
}

void kt_idle(void) {
  kt.tw.current = CTS_TASK_NONE;
  task_event(CTS_MPROF_SWITCH, CTS_TASK_NONE, 0, 0, 0, NULL);
}

void kt_signal(cts_task_id_t receiver, cts_task_id_t sender) {
  kt.tw.current = receiver;
  task_event(CTS_MPROF_SIGNAL, receiver, (uint64_t)sender, 0, 0, NULL);
}

void kt_label(cts_task_id_t task, const char *label) {
  task_event(CTS_MPROF_LABEL, task, 0, 0, 0, label);
}

void kt_counter(const char *name, int64_t value) {
  task_event(CTS_MPROF_COUNTER, kt.tw.current, 0, value, 0, name);
}

/* ---- start and stop --------------------------------------------------------------------- */

int ktrace_start(double rate, uint64_t seed, serial_t *memtrace_port, serial_t *task_port) {
  kt.rate = rate;
  kt.rng = seed ? seed : 0x9E3779B97F4A7C15ull;
  kt.next_id = 1;
  kt.epoch_us = clock_boot_epoch_s() * 1000000u;
  kt.countdown = draw();
  kt.mt_port = memtrace_port;
  kt.task_port = task_port;

  cts_mprof_ring_config_t rc;
  cts_mprof_ring_config_init(&rc);
  rc.buffer = ring_buf;
  rc.buffer_size = sizeof ring_buf;
  rc.packets = RING_PACKETS;
  rc.clock = now_ns;
  rc.sink = serial_write;
  rc.sink_user_data = task_port;
  int err = cts_mprof_ring_init(&kt.ring, ring_state, sizeof ring_state, &rc);
  if (err) return err;
  kt.st.ring_addr = (uintptr_t)ring_buf;
  kt.st.ring_size = sizeof ring_buf;
  cts_mprof_writer_init(&kt.tw, kt.ring);
  kt.tw.current = CTS_TASK_MAIN;
  kt.tasks_on = true;
  task_event(CTS_MPROF_SWITCH, CTS_TASK_MAIN, 0, 0, 0, NULL);
  /* The clock anchor (§14.2): the memtrace trace's epoch time for this ring time, so that
   * the report lines the two traces up. */
  const uint64_t t = clock_ns();
  task_event(CTS_MPROF_ANCHOR, PID, kt.epoch_us * 1000u + t, 0, 0, NULL);

  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = rate;
  cfg.executable_name = "ctfscope-unikernel";
  cfg.host_name = "qemu";
  cfg.runtime_params = "freestanding x86-64 kernel (examples/unikernel)";
  cfg.pid = PID;
  cfg.max_backtrace_frames = WRITER_FRAMES;
  cfg.write = serial_write;
  cfg.write_user_data = memtrace_port;
  cfg.clock = now_us;
  /* The default kernel links empty tables (ksyms_empty.c): its codes go out without
   * locations, and the host names them from the kernel's ELF file (`ctfscope symbolize`).
   * unikernel_embedded names them here, from the tables linked into it. */
  cfg.resolve = ksyms_count ? resolve : NULL;
  if (cts_mt_writer_size(&cfg) > sizeof writer_mem) return CTS_E_NOMEM;
  err = cts_mt_writer_init(&kt.mt, writer_mem, sizeof writer_mem, &cfg);
  if (err) {
    mt_failed(err);
    return err;
  }
  kalloc_set_hooks(on_alloc, on_free);
  return 0;
}

void ktrace_poll(void) {
  if (!kt.mt) return;
  const uint64_t now = clock_ns(), events = kt.st.sampled + kt.st.collects;
  /* By time, so that an idle kernel's last events reach the host; by count too, so that
   * what a crash loses does not depend on how fast the machine ran (a run that faulted
   * within its first 100 ms lost every event). */
  if (events == kt.flushed_events ||
      (now - kt.flushed_at_ns < FLUSH_NS && events - kt.flushed_events < FLUSH_EVENTS))
    return;
  kt.flushed_at_ns = now;
  kt.flushed_events = events;
  kt.busy = true;
  const int err = cts_mt_writer_flush(kt.mt);
  kt.busy = false;
  if (err) mt_failed(err);
}

static void stop_tasks(void) {
  if (!kt.tasks_on) return;
  /* What the serial ports could not send, so that a reader of either trace (this one read
   * from memory if its own port died) learns that bytes are missing. */
  kt_counter("memtrace-port-lost-bytes", (int64_t)kt.mt_port->lost);
  kt_counter("task-port-lost-bytes", (int64_t)kt.task_port->lost);
  const uint64_t dropped = cts_mprof_ring_dropped(kt.ring);
  if (dropped) task_event(CTS_MPROF_LOST, kt.tw.current, dropped, 0, 0, NULL);
  kt.tasks_on = false;
  cts_mprof_writer_fini(&kt.tw);
  cts_mprof_ring_flush(kt.ring);
}

void ktrace_stop(void) {
  kalloc_set_hooks(NULL, NULL);
  if (kt.mt) {
    const int err = cts_mt_writer_close(kt.mt);
    if (err) mt_failed(err);
    kt.mt = NULL;
  }
  stop_tasks();
}

bool ktrace_fault(void) {
  if (kt.busy) return false;
  ktrace_stop();
  return true;
}
