/* SPDX-License-Identifier: MIT */
/* Guard for `ctfscope info` on a trace whose stacks ctfscope's tracer cut at its frame limit
 * (issue 20 point 6; the marker of wip/h45cut: the outermost frame, code 0x800 + N, named
 * "[deeper frames not recorded: --max-frames N]"). info counts the cut stacks; counting them
 * must not cost every allocation its whole delivery (main's code: +92 instructions an
 * allocation where every stack is cut, against the same trace without the marker). The
 * figures are cachegrind's instruction counts (the same every run): of `info` on a trace of
 * MANY cut allocations less FEW, against the same difference on the traces whose marker is
 * an ordinary frame, per allocation. */
#include <ctfscope/memtrace.h>
#include <ctfscope/tracer.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/os.h"

#include "../test.h"
#include "../cachegrind.h"
#include "scratch_dir.h"

enum { FEW = 20000, MANY = 120000, LIMIT = 256 };

/* Frame codes: the marker of the tracer's limit, an ordinary outermost frame in its place,
 * and the frames below (the leaf one of 8, so consecutive stacks share all but it). */
#define MARKER_CODE (0x800u + LIMIT)
#define ROOT_CODE   0x7000u
#define FRAME_CODE  0x10000u

static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  static char marker_name[64];
  if (max < 1) return 0;
  if (code == MARKER_CODE) {
    snprintf(marker_name, sizeof marker_name, CTS_TRACER_CUT_NAME_PREFIX "--max-frames %u]", LIMIT);
    out[0] = (cts_mt_location_t){0, 0, 0, "<ctfscope>", marker_name};
  } else if (code == ROOT_CODE) {
    out[0] = (cts_mt_location_t){1, 0, 4, "root.c", "root"};
  } else {
    out[0] = (cts_mt_location_t){(uint32_t)(code - FRAME_CODE), 0, 4, "deep.c", "recurse"};
  }
  return 1;
}

/* A trace of n allocations of LIMIT + 1 frames, the outermost the marker when cut, else an
 * ordinary frame; each block collected by the next allocation. */
static bool write_trace(const char *path, unsigned n, bool cut) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.executable_name = "/opt/test/deep";
  cfg.pid = 77;
  cfg.start_time_us = 1700000000000000ull;
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  cfg.write = cts_os_fd_write;
  cfg.write_user_data = (void *)(intptr_t)fd;
  cfg.resolve = resolve;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  cts_mt_writer_t *w;
  int e = mem ? cts_mt_writer_init(&w, mem, size, &cfg) : -1;
  uint64_t bt[LIMIT + 1], prev = 0;
  bt[0] = cut ? MARKER_CODE : ROOT_CODE;
  for (size_t k = 1; k <= LIMIT; k++) bt[k] = FRAME_CODE + k;
  for (unsigned i = 0; i < n && !e; i++) {
    bt[LIMIT] = FRAME_CODE + 1000 + i % 8;
    uint64_t id;
    const uint64_t t = cfg.start_time_us + 10 * (uint64_t)i;
    e = cts_mt_writer_alloc(w, t, 4, 5, CTS_MT_SOURCE_MINOR, bt, LIMIT + 1, &id);
    if (!e && i) e = cts_mt_writer_collect(w, t, prev);
    prev = id;
  }
  if (!e) e = cts_mt_writer_close(w);
  free(mem);
  close(fd);
  return e == 0;
}

/* `info`'s instructions on a trace of n allocations (0 after a failure). */
static void info_instructions(unsigned n, bool cut, uint64_t *ir) {
  char trace[160], out[160], name[32];
  *ir = 0;
  snprintf(name, sizeof name, "%s%u.ctf", cut ? "cut" : "whole", n);
  scratch_file("cts-info-cut", name, trace, sizeof trace);
  scratch_file("cts-info-cut", "cachegrind.out", out, sizeof out);
  CTS_ASSERT(write_trace(trace, n, cut));
  uint64_t counts[5] = {0};
  if (cts_test_state.failed) return;
  cachegrind_counts((char *[]){CTS_TEST_CTFSCOPE, "info", trace, NULL}, false, out, counts);
  *ir = counts[0];
}

CTS_TEST(info_counts_cut_stacks_exactly) {
  char trace[160];
  scratch_file("cts-info-cut", "count.ctf", trace, sizeof trace);
  CTS_ASSERT(write_trace(trace, 5000, true));
  run_result_t r;
  CTS_ASSERT(run_cmd((char *[]){CTS_TEST_CTFSCOPE, "info", "--json", trace, NULL}, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  CTS_ASSERT_MSG(strstr(r.out, "\"cut_stacks\": 5000") != NULL, "info --json: %s", r.out);
  run_result_free(&r);
  CTS_ASSERT(write_trace(trace, 5000, false));
  CTS_ASSERT(run_cmd((char *[]){CTS_TEST_CTFSCOPE, "info", "--json", trace, NULL}, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  CTS_ASSERT_MSG(strstr(r.out, "cut_stacks") == NULL, "info --json: %s", r.out);
  run_result_free(&r);
}

/* At most this many instructions an allocation more than where no stack is cut: every
 * allocation is delivered to the summary once a marker is known (the reader has no way to
 * count them by their outermost frame), whose own sums are the floor. Release 56 (main's
 * code: 86, the check in the summary's out-of-line rare path), debug 154. */
#ifdef NDEBUG
#define CUT_BOUND 62.0
#else
#define CUT_BOUND 170.0
#endif

CTS_TEST(info_on_cut_stacks_costs_little_more_than_on_whole_ones) {
  const char *const unusable = cachegrind_unusable();
  if (unusable) CTS_SKIP("%s", unusable);
  uint64_t cut_many, cut_few, whole_many, whole_few;
  info_instructions(MANY, true, &cut_many);
  info_instructions(FEW, true, &cut_few);
  info_instructions(MANY, false, &whole_many);
  info_instructions(FEW, false, &whole_few);
  if (cts_test_state.failed) return;
  const double cut = ((double)cut_many - (double)cut_few) / (MANY - FEW);
  const double whole = ((double)whole_many - (double)whole_few) / (MANY - FEW);
  fprintf(stderr, "  per allocation: %.1f instructions with cut stacks, %.1f without\n", cut,
          whole);
  CTS_ASSERT_MSG(whole > 20.0, "%.1f instructions an allocation: not decoded?", whole);
  CTS_ASSERT_MSG(cut - whole <= CUT_BOUND, "cut stacks cost %.1f instructions an allocation more",
                 cut - whole);
}

CTS_TEST_MAIN()
