/* SPDX-License-Identifier: MIT */
/* The summary's count of allocations the writer's short form would accept (§8.1: 1 to 16
 * words, minor heap, one sample, fewer than 256 frames after the common prefix), computed
 * without branches in cts_summary_add_event (src/analysis/summary.c): checked against the
 * plain definition at and around every bound, a prefix longer than the backtrace included
 * (the writer truncated the previous one). */
#include "../../src/analysis/summary.h"

#include <ctfscope/ctfscope.h>

#include "../../src/os/os.h"
#include "../test.h"

static bool plain_eligible(uint64_t length, unsigned source, uint64_t nsamples, uint64_t frames,
                           uint64_t prefix) {
  if (length < 1 || length > 16) return false;
  if (source != CTS_MT_SOURCE_MINOR || nsamples != 1) return false;
  if (prefix >= frames) return true;
  return frames - prefix < 256;
}

CTS_TEST(short_form_eligibility_at_its_bounds) {
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {0};
  cts_mt_reader_t *r;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &cfg, &h), 0);
  cts_summary_t s;
  cts_summary_init(&s, r);
  static const uint64_t lengths[] = {0, 1, 2, 15, 16, 17, 1000, UINT64_MAX};
  static const uint64_t samples[] = {0, 1, 2, UINT64_MAX};
  static const uint64_t frame_counts[] = {0, 2, 255, 256, 257, 300, 600};
  static const uint64_t prefixes[] = {0, 1, 44, 45, 300, 1000, UINT64_MAX};
  static uint64_t bt[600]; /* codes 0: no loss marker */
  uint64_t expected = 0, events = 0;
  for (size_t a = 0; a < sizeof lengths / sizeof *lengths; a++)
    for (unsigned source = 0; source < 4; source++)
      for (size_t b = 0; b < sizeof samples / sizeof *samples; b++)
        for (size_t c = 0; c < sizeof frame_counts / sizeof *frame_counts; c++)
          for (size_t d = 0; d < sizeof prefixes / sizeof *prefixes; d++) {
            const cts_mt_event_t ev = {.kind = CTS_MT_ALLOC,
                                       .source = (uint8_t)source,
                                       .length = lengths[a],
                                       .nsamples = samples[b],
                                       .backtrace_len = frame_counts[c],
                                       .common_prefix = prefixes[d],
                                       .backtrace = bt};
            CTS_ASSERT_EQ_INT(cts_summary_add_event(&s, &ev), 0);
            events++;
            if (plain_eligible(ev.length, source, ev.nsamples, ev.backtrace_len, ev.common_prefix))
              expected++;
          }
  CTS_ASSERT_EQ_U64(s.events_total, events);
  CTS_ASSERT_EQ_U64(s.allocs_short_eligible, expected);
  CTS_ASSERT(expected > 0 && expected < events);
  cts_summary_fini(&s);
  cts_mt_reader_destroy(r);
}

CTS_TEST_MAIN()
