/* SPDX-License-Identifier: MIT */
/* Writes the traces the report browser tests open, with the project's own writers:
 *   gen_report_traces DIR NTASKS
 * DIR/hostile.mt.ctf   memtrace trace whose function and file names are HTML and script
 * DIR/hostile.tasks.ctf task trace (NTASKS tasks) with hostile labels, every arrow kind,
 *                      counters, GC, idle periods, a `becomes` chain and a should_resolve
 *                      task that never resolves; same run as the memtrace (shared clock).
 * DIR/pair.mt.ctf     memtrace trace of 300 allocations (pid 4343), and
 * DIR/pair.tasks.ctf  the task trace of the same process written by two threads (two
 *                      writers: two lanes), anchored to it, naming the task of most sampled
 *                      allocations (ctfscope_alloc): a third each for "worker-a" (lane 0)
 *                      and "worker-b" (lane 1), a sixth outside tasks, a sixth not named
 *                      (unattributed); the tracer says it lost 5 events (ctfscope_lost).
 * With a large NTASKS (1 000 000) the task trace is the frame-time benchmark input. */
#include <ctfscope/memtrace.h>
#include <ctfscope/tasks.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mprof_gen.h"

/* Names a report must show as text, never as markup. */
static const char *const hostile_names[] = {
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "caml<b>Bold</b>&amp;__fn",
    "normal_function",
    "deep \xe2\x80\xa8 line\xe2\x80\xa9sep \"quoted\" \\back",
};
#define NNAMES (sizeof hostile_names / sizeof *hostile_names)

static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  if (max < 1 || code < 1 || code > NNAMES) return 0;
  out[0] =
      (cts_mt_location_t){(uint32_t)(10 * code), 1, 9, code == 2 ? "<i>file</i>.ml" : "hostile.ml",
                          hostile_names[code - 1]};
  return 1;
}

static int write_file(void *ud, const void *p, size_t n) {
  return fwrite(p, 1, n, ud) == n ? 0 : -5;
}

/* A memtrace writer into a file (rate 1). */
typedef struct mt_file {
  FILE *f;
  void *mem;
  cts_mt_writer_t *w;
} mt_file_t;

/* Opens path with cfg's names (the rest set here); 0 or 1 (then mt_close it all the same). */
static int mt_open(mt_file_t *o, const char *path, cts_mt_writer_config_t *cfg, int64_t pid,
                   uint64_t start_us) {
  *o = (mt_file_t){.f = fopen(path, "wb")};
  if (!o->f) return 1;
  cfg->sample_rate = 1.0;
  cfg->pid = pid;
  cfg->start_time_us = start_us;
  cfg->write = write_file;
  cfg->write_user_data = o->f;
  cfg->resolve = resolve;
  const size_t size = cts_mt_writer_size(cfg);
  o->mem = aligned_alloc(8, (size + 7) & ~(size_t)7);
  return !o->mem || cts_mt_writer_init(&o->w, o->mem, size, cfg);
}

/* Closes the trace (unless err); 0 when everything was written. */
static int mt_close(mt_file_t *o, int err) {
  if (!err && o->w) err = cts_mt_writer_close(o->w);
  free(o->mem);
  return (o->f && fclose(o->f)) || err || !o->f;
}

static int write_memtrace(const char *path, uint64_t start_us) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.executable_name = "<b>hostile</b>.exe";
  cfg.host_name = "<script>host</script>";
  cfg.context = "ctx & <context>";
  mt_file_t mf;
  int err = mt_open(&mf, path, &cfg, 4242, start_us);
  cts_mt_writer_t *w = mf.w;
  uint64_t ids[64] = {0};
  for (unsigned i = 0; i < 2000 && !err; i++) {
    const uint64_t bt[3] = {4, 1 + i % 3, i % 5 == 0 ? 5 : 2};
    uint64_t id;
    err = cts_mt_writer_alloc(w, start_us + 100 + i * 50, 2 + i % 40, 3 + i % 40,
                              CTS_MT_SOURCE_MAJOR, bt, 3, &id);
    if (!err && ids[i % 64]) err = cts_mt_writer_collect(w, start_us + 120 + i * 50, ids[i % 64]);
    ids[i % 64] = i % 7 == 0 ? 0 : id; /* every 7th block leaks */
  }
  return mt_close(&mf, err);
}

/* The events of the task trace, as mprof_gen.h writes them. */
static void ev(gen_t *g, unsigned id, int64_t thread, uint64_t arg, int64_t value, const char *str,
               uint8_t type) {
  gen_ev(g, id, thread, arg, value, str, type);
}

static int write_tasks(const char *path, uint64_t start_ns, long ntasks) {
  const size_t size = (size_t)ntasks * 200 + (1u << 20);
  const uint32_t packets = 256;
  uint8_t *buf = calloc(1, size);
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(256) / 8];
  if (!buf) return 1;
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buf;
  cfg.buffer_size = size;
  cfg.packets = packets;
  cfg.clock = gen_no_clock;
  cts_mprof_ring_t *ring;
  if (cts_mprof_ring_init(&ring, state, sizeof state, &cfg)) return 1;
  gen_t g = {.now = start_ns};
  cts_mprof_writer_init(&g.w, ring);
  ev(&g, CTS_MPROF_SWITCH, 0, 0, 0, NULL, 0);
  /* The memory trace's process, and the shared epoch (docs/formats/mprof.md §14.2). */
  ev(&g, CTS_MPROF_ANCHOR, 4242, g.now + 1000, 0, NULL, 0);
  /* A condition, a chain of becomes, a should_resolve task that never resolves. */
  ev(&g, CTS_MPROF_CREATES, 0, 1, 0, NULL, CTS_TASK_CONDITION);
  ev(&g, CTS_MPROF_LABEL, 1, 0, 0, "</script><script>alert(3)</script>", 0);
  ev(&g, CTS_MPROF_CREATES, 0, 2, 0, NULL, CTS_TASK_BIND);
  ev(&g, CTS_MPROF_CREATES, 0, 3, 0, NULL, CTS_TASK_BIND);
  ev(&g, CTS_MPROF_LABEL, 2, 0, 0, "chain-start", 0);
  ev(&g, CTS_MPROF_BECOMES, 2, 3, 0, NULL, 0);
  ev(&g, CTS_MPROF_CREATES, 0, 4, 0, NULL, CTS_TASK_WAIT);
  ev(&g, CTS_MPROF_BECOMES, 3, 4, 0, NULL, 0);
  ev(&g, CTS_MPROF_LABEL, 4, 0, 0, "chain-end <b>not bold</b>", 0);
  ev(&g, CTS_MPROF_CREATES, 0, 5, 0, NULL, CTS_TASK_TASK);
  ev(&g, CTS_MPROF_LABEL, 5, 0, 0, "__should_resolve", 0);
  ev(&g, CTS_MPROF_LABEL, 5, 0, 0, "never-resolves", 0);
  int64_t next = 6;
  char label[64];
  for (long i = 0; i < ntasks && !g.err; i++) {
    const int64_t t = next++;
    ev(&g, CTS_MPROF_CREATES, 0, (uint64_t)t, 0, NULL, (uint8_t)(i % 15));
    if (i % 4 == 0) {
      snprintf(label, sizeof label, i % 8 == 0 ? "rx-%ld <img src=x>" : "tx-%ld & co", i);
      ev(&g, CTS_MPROF_LABEL, t, 0, 0, label, 0);
    }
    ev(&g, CTS_MPROF_TRY_READ, 0, (uint64_t)t, 0, NULL, 0);
    if (i % 10 == 0) {
      ev(&g, CTS_MPROF_SWITCH, -1, 0, 0, NULL, 0); /* idle */
      g.now += 20000;
      ev(&g, CTS_MPROF_SWITCH, 0, 0, 0, NULL, 0);
    }
    if (i % 3 == 0)
      ev(&g, CTS_MPROF_SIGNAL, t, 1, 0, NULL, 0);
    else
      ev(&g, CTS_MPROF_SWITCH, t, 0, 0, NULL, 0);
    if (i % 50 == 7)
      ev(&g, CTS_MPROF_FAILS, t, (uint64_t)t, 0, "Failure(\"<oops>\")", 0);
    else
      ev(&g, CTS_MPROF_FULFILLS, t, (uint64_t)t, 0, NULL, 0);
    ev(&g, CTS_MPROF_READ, 0, (uint64_t)t, 0, NULL, 0);
    if (i % 5 == 0) ev(&g, CTS_MPROF_COUNTER, 0, 0, (int64_t)(i % 97), "queue<len>", 0);
    if (i % 7 == 0) ev(&g, CTS_MPROF_INCREASE, 0, 0, i % 2 ? 1 : -1, "conns#1", 0);
    if (i % 500 == 250) ev(&g, CTS_MPROF_GC, -1, 15000, 0, NULL, 0);
  }
  ev(&g, CTS_MPROF_FULFILLS, 0, 4, 0, NULL, 0);
  ev(&g, CTS_MPROF_SWITCH, -1, 0, 0, NULL, 0);
  cts_mprof_writer_fini(&g.w);
  if (g.err) {
    fprintf(stderr, "gen_report_traces: task writer error %d\n", g.err);
    return 1;
  }
  FILE *f = fopen(path, "wb");
  const int bad = !f || fwrite(buf, 1, size, f) != size;
  free(buf);
  return (f && fclose(f)) || bad;
}

/* The pair: both traces of one process, with memory by task (docs/formats/mprof.md §14). */
#define PAIR_ALLOCS 300
static int write_pair(const char *mem_path, const char *task_path, uint64_t start_us) {
  cts_mt_writer_config_t mc;
  cts_mt_writer_config_init(&mc);
  mc.executable_name = "pair";
  mt_file_t mf;
  int err = mt_open(&mf, mem_path, &mc, 4343, start_us);
  cts_mt_writer_t *mw = mf.w;
  uint64_t ids[PAIR_ALLOCS];
  for (unsigned i = 0; i < PAIR_ALLOCS && !err; i++) {
    const uint64_t bt[2] = {4, 1 + i % 3};
    err = cts_mt_writer_alloc(mw, start_us + 100 + i * 10, 1 + i % 50, 1 + i % 50,
                              CTS_MT_SOURCE_MAJOR, bt, 2, &ids[i]);
    if (!err && i % 4 == 3) err = cts_mt_writer_collect(mw, start_us + 105 + i * 10, ids[i - 1]);
  }
  if (mt_close(&mf, err)) return 1;

  static uint8_t buf[1 << 16];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(8) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buf;
  cfg.buffer_size = sizeof buf;
  cfg.packets = 8;
  cfg.clock = gen_no_clock;
  cts_mprof_ring_t *ring;
  if (cts_mprof_ring_init(&ring, state, sizeof state, &cfg)) return 1;
  const uint64_t t0 = start_us * 1000; /* the same clock: the anchor says so */
  gen_t a = {.now = t0}, b = {.now = t0};
  cts_mprof_writer_init(&a.w, ring);
  cts_mprof_writer_init(&b.w, ring);
  ev(&a, CTS_MPROF_SWITCH, 0, 0, 0, NULL, 0);
  ev(&a, CTS_MPROF_ANCHOR, 4343, a.now + 1000, 0, NULL, 0);
  ev(&a, CTS_MPROF_LABEL, 0, 0, 0, "main", 0);
  ev(&a, CTS_MPROF_CREATES, 0, 1, 0, NULL, CTS_TASK_TASK);
  ev(&a, CTS_MPROF_LABEL, 1, 0, 0, "worker-a", 0);
  ev(&a, CTS_MPROF_CREATES, 0, 2, 0, NULL, CTS_TASK_TASK);
  ev(&a, CTS_MPROF_LABEL, 2, 0, 0, "worker-b", 0);
  ev(&a, CTS_MPROF_SWITCH, 1, 0, 0, NULL, 0);
  b.now = a.now;
  ev(&b, CTS_MPROF_SWITCH, 2, 0, 0, NULL, 0);
  for (unsigned i = 0; i < PAIR_ALLOCS; i++) {
    gen_t *g = i % 3 == 0 ? &a : &b;
    const int64_t task = i % 3 == 2 ? -1 : i % 3 == 0 ? 1 : 2;
    if (i % 6 == 5) continue;                         /* not named: unattributed */
    g->now = t0 + (100 + i * 10) * 1000 + 200 - 1000; /* 200 ns after its memtrace time */
    ev(g, CTS_MPROF_ALLOC, task, ids[i], 0, NULL, 0);
    if (i % 30 == 29) ev(g, CTS_MPROF_SWITCH, g == &a ? 1 : 2, 0, 0, NULL, 0);
  }
  ev(&b, CTS_MPROF_SWITCH, -1, 0, 0, NULL, 0);
  ev(&a, CTS_MPROF_FULFILLS, 1, 1, 0, NULL, 0);
  ev(&a, CTS_MPROF_LOST, 1, 5, 0, NULL, 0);
  ev(&a, CTS_MPROF_SWITCH, -1, 0, 0, NULL, 0);
  cts_mprof_writer_fini(&a.w);
  cts_mprof_writer_fini(&b.w);
  if (a.err || b.err) return 1;
  FILE *f = fopen(task_path, "wb");
  const int bad = !f || fwrite(buf, 1, sizeof buf, f) != sizeof buf;
  return (f && fclose(f)) || bad;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: gen_report_traces DIR NTASKS\n");
    return 2;
  }
  const long ntasks = strtol(argv[2], NULL, 10);
  char path[4096];
  /* One run: the task clock (ns) and the memtrace clock (µs) share an epoch here. */
  const uint64_t start_us = 1790000000000000ull;
  snprintf(path, sizeof path, "%s/hostile.mt.ctf", argv[1]);
  if (write_memtrace(path, start_us)) {
    fprintf(stderr, "gen_report_traces: cannot write %s\n", path);
    return 1;
  }
  snprintf(path, sizeof path, "%s/hostile.tasks.ctf", argv[1]);
  if (write_tasks(path, start_us * 1000, ntasks)) {
    fprintf(stderr, "gen_report_traces: cannot write %s\n", path);
    return 1;
  }
  char tpath[4096];
  snprintf(path, sizeof path, "%s/pair.mt.ctf", argv[1]);
  snprintf(tpath, sizeof tpath, "%s/pair.tasks.ctf", argv[1]);
  if (write_pair(path, tpath, start_us)) {
    fprintf(stderr, "gen_report_traces: cannot write %s or %s\n", path, tpath);
    return 1;
  }
  return 0;
}
