/* SPDX-License-Identifier: MIT */
/* A small deterministic memtrace trace with known truth, for the analysis commands' tests:
 * five allocation sites with simple, hand-checkable behaviour (short-lived blocks, a leak
 * growing linearly, two big major-heap blocks, promoted blocks under an inlined frame, an
 * external buffer), written with ctfscope's own writer. The event list stays available, so
 * tests compute the truth by brute force, independently of the analysis code. */
#ifndef CTS_ANALYSIS_TRACE_H
#define CTS_ANALYSIS_TRACE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctfscope/memtrace.h>

#include "os/os.h"

enum { SITE_TEMP, SITE_LEAK, SITE_BIG, SITE_PROM, SITE_EXT, NSITES };
enum { EV_ALLOC, EV_PROMOTE, EV_COLLECT };

#define AT_START_US 1700000000000000ull

typedef struct at_event {
  uint64_t t; /* µs after the start */
  int kind;
  int site; /* allocations */
  uint64_t len, ns;
  int source;
  int ref;     /* promote/collect: index of the allocation event */
  uint64_t id; /* object id given by the writer (allocations) */
} at_event_t;

typedef struct at_trace {
  at_event_t ev[512];
  size_t n;
  double rate;
} at_trace_t;

static const uint64_t at_codes_main = 0x10, at_codes_loop = 0x11, at_codes_inl = 0x25;
static const uint64_t at_leaf_code[NSITES] = {0x20, 0x21, 0x22, 0x23, 0x24};
static const char *const at_site_function[NSITES] = {"Temp.make", "Leak.add", "Big.alloc",
                                                     "Prom.keep", "Ext.buffer"};
static const char *const at_site_file[NSITES] = {"temp.ml", "leak.ml", "big.ml", "prom.ml",
                                                 "ext.ml"};
static const uint32_t at_site_line[NSITES] = {20, 10, 30, 40, 50};

static size_t at_backtrace(int site, uint64_t *bt) {
  switch (site) {
    case SITE_TEMP:
      bt[0] = at_codes_main, bt[1] = at_codes_loop, bt[2] = at_leaf_code[site];
      return 3;
    case SITE_BIG:
      bt[0] = at_codes_main, bt[1] = at_codes_loop, bt[2] = at_leaf_code[site];
      return 3;
    case SITE_PROM:
      bt[0] = at_codes_main, bt[1] = at_codes_loop, bt[2] = at_codes_inl,
      bt[3] = at_leaf_code[site];
      return 4;
    default:
      bt[0] = at_codes_main, bt[1] = at_leaf_code[site];
      return 2;
  }
}

static size_t at_resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  if (max < 2) return 0;
  if (code == at_codes_main) {
    out[0] = (cts_mt_location_t){1, 0, 10, "main.ml", "Main.run"};
    return 1;
  }
  if (code == at_codes_loop) {
    out[0] = (cts_mt_location_t){5, 2, 20, "main.ml", "Main.loop"};
    return 1;
  }
  if (code == at_codes_inl) { /* an inlined frame: outermost first */
    out[0] = (cts_mt_location_t){60, 0, 8, "inl.ml", "Inl.outer"};
    out[1] = (cts_mt_location_t){61, 4, 12, "inl.ml", "Inl.inner"};
    return 2;
  }
  for (int s = 0; s < NSITES; s++)
    if (code == at_leaf_code[s]) {
      out[0] = (cts_mt_location_t){at_site_line[s], 1, 9, at_site_file[s], at_site_function[s]};
      return 1;
    }
  return 0;
}

static int at_add(at_trace_t *tr, at_event_t e) {
  tr->ev[tr->n] = e;
  return (int)tr->n++;
}

/* ns_of(len) at rate 1 is len + 1 (every word and the header sampled); at lower rates the
 * tests pick sample counts themselves. */
static void at_build(at_trace_t *tr, double rate) {
  memset(tr, 0, sizeof *tr);
  tr->rate = rate;
  const bool full = rate >= 1.0;
  for (int i = 0; i < 100; i++) { /* short-lived: 50 µs each */
    const int a = at_add(tr, (at_event_t){1000 + 100 * (uint64_t)i, EV_ALLOC, SITE_TEMP, 3,
                                          full ? 4 : 1, CTS_MT_SOURCE_MINOR, -1, 0});
    at_add(tr, (at_event_t){1050 + 100 * (uint64_t)i, EV_COLLECT, 0, 0, 0, 0, a, 0});
  }
  for (int i = 0; i < 40; i++) /* the leak: never collected, grows linearly */
    at_add(tr, (at_event_t){1007 + 250 * (uint64_t)i, EV_ALLOC, SITE_LEAK, 7, full ? 8 : 2,
                            CTS_MT_SOURCE_MAJOR, -1, 0});
  const int big = at_add(tr, (at_event_t){3000, EV_ALLOC, SITE_BIG, 1024, full ? 1025 : 10,
                                          CTS_MT_SOURCE_MAJOR, -1, 0});
  at_add(tr, (at_event_t){3000 + 4096, EV_COLLECT, 0, 0, 0, 0, big, 0});
  at_add(tr, (at_event_t){9000, EV_ALLOC, SITE_BIG, 1024, full ? 1025 : 10, CTS_MT_SOURCE_MAJOR, -1,
                          0});
  for (int i = 0; i < 10; i++) { /* promoted, collected 1 ms later */
    const int a = at_add(tr, (at_event_t){1503 + 100 * (uint64_t)i, EV_ALLOC, SITE_PROM, 5,
                                          full ? 6 : 1, CTS_MT_SOURCE_MINOR, -1, 0});
    at_add(tr, (at_event_t){1523 + 100 * (uint64_t)i, EV_PROMOTE, 0, 0, 0, 0, a, 0});
    at_add(tr, (at_event_t){2503 + 100 * (uint64_t)i, EV_COLLECT, 0, 0, 0, 0, a, 0});
  }
  const int ext = at_add(tr, (at_event_t){2001, EV_ALLOC, SITE_EXT, 99, full ? 100 : 3,
                                          CTS_MT_SOURCE_EXTERNAL, -1, 0});
  at_add(tr, (at_event_t){2501, EV_COLLECT, 0, 0, 0, 0, ext, 0});
}

/* Events in time order (stable: allocations keep their order, which gives their ids). */
static size_t *at_order(const at_trace_t *tr) {
  size_t *order = malloc(tr->n * sizeof *order);
  for (size_t i = 0; i < tr->n; i++) order[i] = i;
  for (size_t i = 1; i < tr->n; i++) /* insertion sort: small and stable */
    for (size_t j = i; j > 0 && tr->ev[order[j - 1]].t > tr->ev[order[j]].t; j--) {
      const size_t x = order[j];
      order[j] = order[j - 1];
      order[j - 1] = x;
    }
  return order;
}

/* Writes the trace to path; returns 0 or an error. */
static int at_write(at_trace_t *tr, const char *path) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = tr->rate;
  cfg.executable_name = "/opt/test/analysis.exe";
  cfg.host_name = "testhost";
  cfg.pid = 4242;
  cfg.start_time_us = AT_START_US;
  cfg.context = "ctfscope analysis test";
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  cfg.write = cts_os_fd_write;
  cfg.write_user_data = (void *)(intptr_t)fd;
  cfg.resolve = at_resolve;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  cts_mt_writer_t *w;
  int e = cts_mt_writer_init(&w, mem, size, &cfg);
  size_t *order = at_order(tr);
  for (size_t k = 0; k < tr->n && !e; k++) {
    at_event_t *ev = &tr->ev[order[k]];
    const uint64_t t = AT_START_US + ev->t;
    if (ev->kind == EV_ALLOC) {
      uint64_t bt[8];
      const size_t depth = at_backtrace(ev->site, bt);
      e = cts_mt_writer_alloc(w, t, ev->len, ev->ns, (cts_mt_source_t)ev->source, bt, depth,
                              &ev->id);
    } else if (ev->kind == EV_PROMOTE) {
      e = cts_mt_writer_promote(w, t, tr->ev[ev->ref].id);
    } else {
      e = cts_mt_writer_collect(w, t, tr->ev[ev->ref].id);
    }
  }
  if (!e) e = cts_mt_writer_close(w);
  free(order);
  free(mem);
  close(fd);
  return e;
}

/* Brute-force truth. */
typedef struct at_truth {
  uint64_t samples[NSITES], allocs[NSITES], live_end[NSITES], peak_live[NSITES];
  uint64_t total_samples, peak_total, peak_t, end_t;
} at_truth_t;

static bool at_collected_before(const at_trace_t *tr, size_t alloc, uint64_t t, bool inclusive) {
  for (size_t i = 0; i < tr->n; i++)
    if (tr->ev[i].kind == EV_COLLECT && tr->ev[i].ref == (int)alloc &&
        (inclusive ? tr->ev[i].t <= t : tr->ev[i].t < t))
      return true;
  return false;
}

/* Live samples of site at time t (events at t included). */
static uint64_t at_live_at(const at_trace_t *tr, int site, uint64_t t) {
  uint64_t live = 0;
  for (size_t i = 0; i < tr->n; i++)
    if (tr->ev[i].kind == EV_ALLOC && tr->ev[i].site == site && tr->ev[i].t <= t &&
        !at_collected_before(tr, i, t, true))
      live += tr->ev[i].ns;
  return live;
}

static inline void at_truth(const at_trace_t *tr, at_truth_t *out) {
  memset(out, 0, sizeof *out);
  size_t *order = at_order(tr);
  uint64_t live = 0;
  for (size_t k = 0; k < tr->n; k++) {
    const at_event_t *ev = &tr->ev[order[k]];
    if (ev->t > out->end_t) out->end_t = ev->t;
    if (ev->kind == EV_ALLOC) {
      out->samples[ev->site] += ev->ns;
      out->allocs[ev->site]++;
      out->total_samples += ev->ns;
      live += ev->ns;
      if (live > out->peak_total) {
        out->peak_total = live;
        out->peak_t = ev->t;
        /* the per-site figures at this instant, events up to this one in file order */
        for (int s = 0; s < NSITES; s++) out->peak_live[s] = 0;
        for (size_t j = 0; j <= k; j++) {
          const at_event_t *a = &tr->ev[order[j]];
          if (a->kind != EV_ALLOC) continue;
          bool gone = false;
          for (size_t m = 0; m <= k; m++)
            if (tr->ev[order[m]].kind == EV_COLLECT && tr->ev[order[m]].ref == (int)order[j])
              gone = true;
          if (!gone) out->peak_live[a->site] += a->ns;
        }
      }
    } else if (ev->kind == EV_COLLECT) {
      live -= tr->ev[ev->ref].ns;
    }
  }
  for (int s = 0; s < NSITES; s++) out->live_end[s] = at_live_at(tr, s, out->end_t);
  free(order);
}

#endif /* CTS_ANALYSIS_TRACE_H */
