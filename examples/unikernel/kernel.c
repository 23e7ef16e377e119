/* SPDX-License-Identifier: MIT */
/* The example unikernel: the ARP race of examples/arp_race/arp_race.c (the MirageOS tracing
 * tutorial), grown into an event loop with several connections, a buffer allocated per
 * packet and a promise, a waiter and a queue entry allocated per step, all from the kernel's
 * own allocator (kalloc.c), traced by ktrace.c. Booted by QEMU (run.sh):
 *
 *   COM1  the memtrace allocation trace (binary)
 *   COM2  the mirage-profile task trace, packet by packet (binary)
 *   COM3  the kernel's own counters, "name value" lines (text)
 *
 * Kernel command line (-append), words separated by spaces:
 *   bad        connection 0 sees the ARP reply before its probe leaves: it never connects
 *              and the should_resolve task "main" stays unresolved
 *   rate=X     memtrace sampling rate per word (default 0.01; 1 records every allocation)
 *   conns=N    connections (1..64, default 4)      segs=N  segments each (default 50)
 *   seed=N     sampler seed                        fault   page fault halfway through
 *   triple     like fault, with no exception handler left: a triple fault resets the
 *              machine (QEMU -no-reboot exits 0) and only ktrace_poll()'s flushes remain
 *   halt       halt at the end instead of exiting QEMU, so that the host can dump the
 *              task ring from the kernel's memory (run.sh --dump; ring_addr on COM3)
 *
 * Exit status through isa-debug-exit: 0 → QEMU 1 (main resolved), 2 → 5 (main not
 * resolved), 3 → 7 (fault), 4 → 9 (tracing could not start). */
#include "hw.h"
#include "kalloc.h"
#include "klib.h"
#include "ktrace.h"

static serial_t com1, com2, com3;

/* ---- command line ----------------------------------------------------------------------- */

static struct {
  bool bad, fault, triple, halt;
  double rate;
  uint64_t conns, segs, seed;
} opt = {.rate = 0.01, .conns = 4, .segs = 50, .seed = 1};

static bool word_is(const char *w, size_t n, const char *name) {
  return strlen(name) == n && memcmp(w, name, n) == 0;
}

static uint64_t parse_u64(const char *s, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++) v = v * 10 + (uint64_t)(s[i] - '0');
  return v;
}

/* A decimal such as 1, 0.5 or 1e-4. */
static double parse_double(const char *s, size_t n) {
  double v = 0, scale = 1;
  size_t i = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) v = v * 10 + (s[i] - '0');
  if (i < n && s[i] == '.')
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) v += (s[i] - '0') * (scale /= 10);
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    const bool neg = i + 1 < n && s[i + 1] == '-';
    i += neg ? 2 : 1;
    for (uint64_t e = parse_u64(s + i, n - i); e; e--) v = neg ? v / 10 : v * 10;
  }
  return v;
}

static void parse_cmdline(const char *s) {
  while (*s) {
    while (*s == ' ') s++;
    size_t n = 0;
    while (s[n] && s[n] != ' ') n++;
    if (word_is(s, n, "bad")) opt.bad = true;
    if (word_is(s, n, "fault")) opt.fault = true;
    if (word_is(s, n, "halt")) opt.halt = true;
    if (word_is(s, n, "triple")) opt.fault = opt.triple = true;
    if (n > 5 && memcmp(s, "rate=", 5) == 0) opt.rate = parse_double(s + 5, n - 5);
    if (n > 6 && memcmp(s, "conns=", 6) == 0) opt.conns = parse_u64(s + 6, n - 6);
    if (n > 5 && memcmp(s, "segs=", 5) == 0) opt.segs = parse_u64(s + 5, n - 5);
    if (n > 5 && memcmp(s, "seed=", 5) == 0) opt.seed = parse_u64(s + 5, n - 5);
    s += n;
  }
  if (!(opt.rate > 0) || opt.rate > 1) opt.rate = 0.01;
  if (opt.conns < 1 || opt.conns > 64) opt.conns = 4;
}

/* The arena is exhausted: say so on COM3 and stop (defined with the counters below). */
__attribute__((noreturn)) static void out_of_memory(void);

/* ---- a tiny promise library (as in arp_race.c, with allocated promises) ------------------ */

typedef struct promise promise_t;
typedef void (*callback_t)(promise_t *resolved, void *arg);

typedef struct waiter {
  struct waiter *next;
  callback_t fn;
  void *arg;
  cts_task_id_t bind; /* the Bind task that runs the callback */
} waiter_t;

struct promise {
  cts_task_id_t id;
  bool resolved;
  waiter_t *waiters;
};

static promise_t *promise_new(cts_task_type_t type, const char *name) {
  promise_t *p = kmalloc(sizeof *p);
  if (!p) out_of_memory();
  *p = (promise_t){.id = kt_create(type, name)};
  return p;
}

/* p >>= fn: a Bind task that waits for p (try_read) and runs fn once p is resolved. */
static void bind(promise_t *p, callback_t fn, void *arg) {
  const cts_task_id_t b = kt_create(CTS_TASK_BIND, NULL);
  if (p->resolved) {
    kt_read(b, p->id);
    fn(p, arg);
    return;
  }
  kt_try_read(b, p->id);
  waiter_t *w = kmalloc(sizeof *w);
  if (!w) out_of_memory();
  *w = (waiter_t){.next = p->waiters, .fn = fn, .arg = arg, .bind = b};
  p->waiters = w;
}

/* Lwt.wakeup: the current task resolves p; its callbacks run now, each in its Bind task. */
static void resolve(promise_t *p) {
  const cts_task_id_t resolver = kt_current();
  kt_resolved(p->id);
  p->resolved = true;
  while (p->waiters) {
    waiter_t *w = p->waiters;
    p->waiters = w->next;
    kt_read(w->bind, p->id);
    w->fn(p, w->arg);
    kfree(w);
  }
  kt_switch(resolver);
}

/* Lwt_condition: a notification with no waiter is lost. */
typedef struct condition {
  cts_task_id_t id;
  promise_t *waiter;
} condition_t;

static void condition_broadcast(condition_t *c) {
  const cts_task_id_t sender = kt_current();
  kt_signal(c->id, sender);
  promise_t *w = c->waiter;
  c->waiter = NULL;
  if (w) resolve(w);
  kt_switch(sender);
}

/* ---- the network: a FIFO of events, each carrying a packet buffer ------------------------ */

typedef enum net_kind { PROBE_SENT, ARP_REPLY, SYN_ACK, TX_DONE } net_kind_t;

typedef struct net_event {
  struct net_event *next;
  net_kind_t kind;
  unsigned conn;
  uint8_t *buf; /* the frame, freed once handled */
  size_t len;
} net_event_t;

static net_event_t *queue_head, *queue_tail;
static uint64_t frames, frame_bytes;

static uint8_t *frame_new(size_t len, uint8_t fill) {
  uint8_t *b = kmalloc(len);
  if (!b) out_of_memory();
  memset(b, fill, len);
  frames++;
  frame_bytes += len;
  return b;
}

static void net_deliver_later(net_kind_t kind, unsigned conn, size_t len) {
  net_event_t *e = kmalloc(sizeof *e);
  if (!e) out_of_memory();
  *e = (net_event_t){.kind = kind, .conn = conn, .buf = frame_new(len, (uint8_t)kind), .len = len};
  if (queue_tail)
    queue_tail->next = e;
  else
    queue_head = e;
  queue_tail = e;
}

/* ---- the unikernel ------------------------------------------------------------------------ */

typedef struct conn {
  unsigned index;
  condition_t arp_response; /* the pending ARP query */
  promise_t *ring_write;    /* the probe being transmitted */
  promise_t *connect_done;  /* "TCP connect" */
  uint64_t segs_sent, segs_acked;
} conn_t;

static conn_t *conns[64];
static promise_t *main_done;
static uint64_t connected_count, bytes_out;

static void send_segment(conn_t *c) {
  /* Sizes vary with the segment, as a real stream's do. */
  const size_t len = 64 + (size_t)((c->segs_sent * 397 + c->index * 131) % 1400);
  c->segs_sent++;
  net_deliver_later(TX_DONE, c->index, len);
  bytes_out += len;
}

static void connected(promise_t *p, void *arg) {
  (void)p;
  conn_t *c = arg;
  if (++connected_count == opt.conns) resolve(main_done);
  if (opt.segs) send_segment(c);
}

static void got_mac(promise_t *p, void *arg) {
  (void)p;
  conn_t *c = arg;
  net_deliver_later(SYN_ACK, c->index, 60);
}

/* The ARP query's continuation once the probe is on the wire: wait for the response. The
 * bug: the response may have come (and its notification gone) already. */
static void probe_sent(promise_t *p, void *arg) {
  (void)p;
  conn_t *c = arg;
  kt_label(kt_current(), "Wait for ARP response");
  c->arp_response.waiter = promise_new(CTS_TASK_TASK, "ARP response");
  bind(c->arp_response.waiter, got_mac, c);
}

static void conn_start(unsigned i) {
  conn_t *c = kmalloc(sizeof *c);
  if (!c) out_of_memory();
  *c = (conn_t){.index = i};
  conns[i] = c;
  c->connect_done = promise_new(CTS_TASK_WAIT, "TCP connect");
  bind(c->connect_done, connected, c);
  c->arp_response.id = kt_create(CTS_TASK_CONDITION, "ARP response");
  c->ring_write = promise_new(CTS_TASK_TASK, "ring.write");
  bind(c->ring_write, probe_sent, c);
  /* The race: which of the two arrives first depends on the host's timing. */
  const bool reversed = opt.bad && i == 0;
  net_deliver_later(reversed ? ARP_REPLY : PROBE_SENT, i, 42);
  net_deliver_later(reversed ? PROBE_SENT : ARP_REPLY, i, 42);
}

static cts_task_id_t port4; /* the driver's event channel: every event arrives as port-4 */

static void handle(net_event_t *ev) {
  kt_switch(port4);
  conn_t *c = conns[ev->conn];
  switch (ev->kind) {
    case PROBE_SENT:
      resolve(c->ring_write);
      break;
    case ARP_REPLY:
      condition_broadcast(&c->arp_response);
      break;
    case SYN_ACK:
      resolve(c->connect_done);
      break;
    case TX_DONE:
      c->segs_acked++;
      kt_counter("bytes-out", (int64_t)bytes_out);
      if (opt.fault && c->index == 0 && c->segs_acked == opt.segs / 2) {
        if (opt.triple) { /* an empty IDT: the fault cannot be delivered, nor the next */
          const struct __attribute__((packed)) {
            uint16_t limit;
            uint64_t base;
          } none = {0, 0};
          __asm__ volatile("lidt %0" : : "m"(none));
        }
        /* Above the identity-mapped GiB: a page fault, handled by kfault(). */
        (void)*(volatile uint64_t *)0x80000000ull;
      }
      if (c->segs_sent < opt.segs) send_segment(c);
      break;
  }
}

/* Runs the event loop until nothing is left; returns whether main resolved. */
static bool run(void) {
  kt_label(CTS_TASK_MAIN, "unikernel");
  port4 = kt_create(CTS_TASK_TASK, "port-4");
  main_done = promise_new(CTS_TASK_WAIT, "main");
  kt_label(main_done->id, "__should_resolve");
  for (unsigned i = 0; i < opt.conns; i++) conn_start(i);
  while (queue_head) {
    kt_idle(); /* blocked in the event loop's poll */
    net_event_t *ev = queue_head;
    queue_head = ev->next;
    if (!queue_head) queue_tail = NULL;
    handle(ev);
    kfree(ev->buf);
    kfree(ev);
    ktrace_poll();
  }
  kt_idle();
  return main_done->resolved;
}

/* ---- counters, faults, entry ---------------------------------------------------------------- */

static void put(const char *name, uint64_t v) {
  serial_puts(&com3, name);
  serial_puts(&com3, " ");
  serial_putu(&com3, v);
  serial_puts(&com3, "\n");
}

/* Ends the run with @p code, or with "halt" stops the CPU and leaves the machine to the
 * host's monitor (the "end" line on COM3 comes last, so the host knows when to dump). */
__attribute__((noreturn)) static void finish(const char *end, uint8_t code) {
  put("exit_code", code);
  serial_puts(&com3, "end ");
  serial_puts(&com3, end);
  serial_puts(&com3, "\n");
  if (!opt.halt) machine_exit(code);
  for (;;) __asm__ volatile("cli; hlt");
}

static void report(void) {
  const kalloc_stats_t *a = kalloc_stats();
  const ktrace_stats_t *t = ktrace_stats();
  put("allocs", a->allocs);
  put("frees", a->frees);
  put("alloc_bytes", a->bytes);
  put("alloc_failed", a->failed);
  put("peak_bytes", a->peak_bytes);
  put("frames", frames);
  put("frame_bytes", frame_bytes);
  put("sampled", t->sampled);
  put("samples", t->samples);
  put("collects", t->collects);
  put("memtrace_error", t->mt_error);
  put("hook_calls", t->hook_calls);
  put("hook_cycles", t->hook_cycles);
  put("sampled_cycles", t->sampled_cycles);
  put("task_events", t->task_events);
  put("task_cycles", t->task_cycles);
  put("task_dropped", t->task_dropped);
  put("ring_addr", t->ring_addr);
  put("ring_size", t->ring_size);
  put("tsc_per_us", clock_tsc_per_us());
  put("run_us", clock_ns() / 1000u);
  put("com1_sent", com1.sent);
  put("com1_lost", com1.lost);
  put("com1_waits", com1.waits);
  put("com1_cycles", com1.cycles);
  put("com2_sent", com2.sent);
  put("com2_lost", com2.lost);
  put("com2_waits", com2.waits);
  put("com2_cycles", com2.cycles);
  put("main_resolved", main_done && main_done->resolved);
}

static void out_of_memory(void) {
  report();
  finish("out-of-memory", 4);
}

typedef struct idt_entry {
  uint16_t off_lo, sel;
  uint8_t ist, flags;
  uint16_t off_mid;
  uint32_t off_hi, zero;
} idt_entry_t;

extern const uint64_t isr_table[32]; /* boot.S */
static idt_entry_t idt[32];

static void idt_init(void) {
  for (int i = 0; i < 32; i++) {
    const uint64_t a = isr_table[i];
    idt[i] = (idt_entry_t){.off_lo = (uint16_t)a,
                           .sel = 0x08,
                           .flags = 0x8E, /* present, ring 0, interrupt gate */
                           .off_mid = (uint16_t)(a >> 16),
                           .off_hi = (uint32_t)(a >> 32)};
  }
  struct __attribute__((packed)) {
    uint16_t limit;
    uint64_t base;
  } idtr = {sizeof idt - 1, (uintptr_t)idt};
  __asm__ volatile("lidt %0" : : "m"(idtr));
}

/* A CPU exception (boot.S passes [vector, error, rip, ...]): end the traces so that
 * everything up to here is readable, say what happened on COM3, and stop. */
void kfault(const uint64_t *frame);
void kfault(const uint64_t *frame) {
  static bool faulting; /* a fault inside this handler must not loop */
  if (!faulting) {
    faulting = true;
    const bool flushed = ktrace_fault();
    put("fault_vector", frame[0]);
    put("fault_error", frame[1]);
    put("fault_rip", frame[2]);
    put("traces_closed", flushed);
    report();
    finish("fault", 3);
  }
  machine_exit(3);
}

/* Multiboot v1 information: flags bit 2 says cmdline (offset 16) is valid. */
void kmain(const uint32_t *mbi, uint32_t magic);
void kmain(const uint32_t *mbi, uint32_t magic) {
  /* The ports first: the fault handler reports on COM3. */
  serial_init(&com1, COM1);
  serial_init(&com2, COM2);
  serial_init(&com3, COM3);
  idt_init();
  clock_init();
  if (magic == 0x2BADB002 && mbi && (mbi[0] & 4)) parse_cmdline((const char *)(uintptr_t)mbi[4]);
  put("conns", opt.conns);
  put("segs", opt.segs);
  put("rate_ppm", (uint64_t)(opt.rate * 1e6));
  if (ktrace_start(opt.rate, opt.seed, &com1, &com2) != 0) {
    report();
    finish("trace-start-failed", 4);
  }
  const bool ok = run();
  ktrace_stop();
  report();
  finish(ok ? "resolved" : "unresolved", ok ? 0 : 2);
}
