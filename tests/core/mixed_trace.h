/* SPDX-License-Identifier: MIT */
/* A generated memtrace trace for the reader's counting tests (test_count_frees,
 * test_summary_counted): many packets, every event kind, every source, short and long
 * forms, backtraces of 0-24 frames from a few dozen codes, one-frame backtraces and
 * ctfscope's drop-mode loss markers. Test-only: asserts with the harness of tests/test.h. */
#ifndef CTS_TESTS_MIXED_TRACE_H
#define CTS_TESTS_MIXED_TRACE_H

#include <stdlib.h>

#include <ctfscope/ctfscope.h>
#include <ctfscope/tracer.h>

#include "../../src/common/hash.h"
#include "../test.h"
#include "../test_buf.h"
#include "buf_writer.h"

/* Loss-marker codes get the tracer's marker name; others an ordinary one. */
static size_t mixed_resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  const bool marker = code >> 61 == 1;
  if (max)
    out[0] = (cts_mt_location_t){(uint32_t)(code & 0xFFFFF), 0, 0, "f.c",
                                 marker ? CTS_TRACER_LOST_NAME_PREFIX "events" : "fn"};
  return 1;
}

static uint64_t mixed_now_us;
static uint64_t mixed_clock(void *ud) {
  (void)ud;
  return mixed_now_us;
}

/* n allocations of every source and size (short and long forms), backtraces of 0-24 frames
 * from a few dozen codes, some of one frame and some loss markers; frees a few later. */
static void make_mixed_trace(buf_t *out, uint16_t version, uint32_t n, uint64_t seed) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.version = version;
  cfg.sample_rate = 1e-3;
  cfg.clock = mixed_clock;
  cfg.resolve = mixed_resolve;
  mixed_now_us = 1700000000000000ull;
  cfg.start_time_us = mixed_now_us;
  cts_mt_writer_t *w;
  void *mem;
  open_buf_writer(&cfg, out, &w, &mem);
  if (cts_test_state.failed) return;
  uint64_t rng = seed, ids[8] = {0};
  bool live[8] = {0};
  for (uint32_t i = 0; i < n; i++) {
    uint64_t bt[24];
    const uint64_t r = cts_splitmix64(&rng);
    size_t depth = r % 25;
    if (r % 7 == 0) depth = 1;
    for (size_t k = 0; k < depth; k++) bt[k] = 0x1000 + (k * 7 + cts_splitmix64(&rng) % 5) % 40;
    if (r % 97 == 0) depth = 1, bt[0] = CTS_TRACER_LOST_CODE_BASE | (3u << 30) | (r % 5);
    const uint64_t words = r % 3 ? 1 + (r >> 8) % 16 : 1 + (r >> 8) % 5000;
    const uint64_t nsamples = r % 5 ? 1 : 1 + (r >> 20) % 4;
    const cts_mt_source_t source = (cts_mt_source_t)(r % 4 ? 0 : (r >> 30) % 3);
    const size_t slot = i % 8;
    if (live[slot]) {
      if (cts_splitmix64(&rng) % 3 == 0)
        CTS_ASSERT_EQ_INT(cts_mt_writer_promote(w, CTS_TIME_NOW, ids[slot]), 0);
      mixed_now_us += cts_splitmix64(&rng) % 4;
      CTS_ASSERT_EQ_INT(cts_mt_writer_collect(w, CTS_TIME_NOW, ids[slot]), 0);
    }
    mixed_now_us += cts_splitmix64(&rng) % 4;
    CTS_ASSERT_EQ_INT(
        cts_mt_writer_alloc(w, CTS_TIME_NOW, words, nsamples, source, bt, depth, &ids[slot]), 0);
    live[slot] = true;
  }
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(w), 0);
  free(mem);
}

#endif /* CTS_TESTS_MIXED_TRACE_H */
