/* SPDX-License-Identifier: MIT */
/* Guard: the memtrace writer's first events take few page faults. The writer's tables
 * (~440 KB, fresh from mmap) are untouched by its start; an event's backtrace then touches
 * cache buckets all over them (hashes of its codes), and before the tables were mapped in
 * one call at the first event (writer.c, map_event_memory) the first few dozen events took
 * a fault on most of their pages: 147 in sqlite3's run at the default rate (37 samples),
 * 2-3 us each on a VM. Counted, not timed: the page faults this process traps (the perf
 * software counter, which a mapping made by madvise does not raise) while a writer thread
 * encodes 64 allocations from 32 call sites. */
#define _GNU_SOURCE
#include <ctfscope/tracer.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../test.h"
#include "decoded.h"

/* At most this many page faults while 64 events are encoded: 32 with the tables mapped at
 * the first event (the ring's pages and the rest of the session's own), 131-132 with the
 * tables faulted in page by page (gcc 12, dev build). */
#define EVENT_FAULTS_MAX 50

/* A counter of the page faults this process (its threads included) traps from now on, or
 * -1 when the kernel offers none (perf_event_paranoid, a sandbox). */
static int open_fault_counter(void) {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  attr.inherit = 1;
  attr.disabled = 1;
  return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

/* The counter's value; 0 if it cannot be read (then the test fails on its other reads). */
static uint64_t read_counter(int fd) {
  uint64_t n = 0;
  return read(fd, &n, sizeof n) == (ssize_t)sizeof n ? n : 0;
}

/* 32 call sites: each allocation's innermost code is its own. */
#define SITE(i)                                                                   \
  static __attribute__((noinline)) void site_##i(const void *p) {                 \
    cts_tracer_track_alloc(p, 64 + (i));                                          \
    __asm__ volatile("" ::: "memory"); /* the call is not a tail call: a frame */ \
  }
#define SITES8(a, b, c, d, e, f, g, h) \
  SITE(a) SITE(b) SITE(c) SITE(d) SITE(e) SITE(f) SITE(g) SITE(h)
SITES8(0, 1, 2, 3, 4, 5, 6, 7)
SITES8(8, 9, 10, 11, 12, 13, 14, 15)
SITES8(16, 17, 18, 19, 20, 21, 22, 23)
SITES8(24, 25, 26, 27, 28, 29, 30, 31)
#define REF8(a, b, c, d, e, f, g, h) \
  site_##a, site_##b, site_##c, site_##d, site_##e, site_##f, site_##g, site_##h
static void (*const sites[32])(const void *) = {
    REF8(0, 1, 2, 3, 4, 5, 6, 7), REF8(8, 9, 10, 11, 12, 13, 14, 15),
    REF8(16, 17, 18, 19, 20, 21, 22, 23), REF8(24, 25, 26, 27, 28, 29, 30, 31)};

CTS_TEST(writer_first_events_take_few_page_faults) {
  const int counter = open_fault_counter();
  if (counter < 0) CTS_SKIP("no perf software counter for page faults here");
  char path[256];
  snprintf(path, sizeof path, "/tmp/cts_writer_event_faults_%d.ctf", (int)getpid());
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.unwind = CTS_TRACER_UNWIND_FRAME_POINTER;
  cfg.symbolize = false; /* the symbolizer's reads are not the writer's tables */
  cfg.writer = CTS_TRACER_WRITER_THREAD;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = path;
  CTS_ASSERT_EQ_INT(cts_tracer_start(&cfg, &sink), 0);
  /* A first event and a flush: the ring, the clock, the first packet's pages. */
  cts_tracer_track_alloc((const void *)(uintptr_t)0x300000000ull, 8);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), 0);
  CTS_ASSERT_EQ_INT(ioctl(counter, PERF_EVENT_IOC_ENABLE, 0), 0);
  const uint64_t before = read_counter(counter);
  CTS_ASSERT(before < 1000000u); /* readable (a count of a few at most) */
  for (unsigned i = 0; i < 64; i++)
    sites[(i * 7u) % 32u]((const void *)(uintptr_t)(0x300001000ull + i * 64u));
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), 0);
  const uint64_t faults = read_counter(counter) - before;
  close(counter);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_EQ_U64(d.nallocs, 65); /* not vacuous: every event was written */
  decoded_fini(&d);
  unlink(path);
  printf("%llu page faults while 64 events were encoded (at most %d)\n", (unsigned long long)faults,
         EVENT_FAULTS_MAX);
  CTS_ASSERT_MSG(faults <= EVENT_FAULTS_MAX, "%llu page faults while 64 events were encoded",
                 (unsigned long long)faults);
}

CTS_TEST_MAIN()
