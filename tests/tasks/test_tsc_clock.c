/* SPDX-License-Identifier: MIT */
/* The time-stamp-counter clock (src/os/tsc_clock.h) and the ring reading it inline: its
 * nanoseconds are CLOCK_MONOTONIC's, within the calibration's error. Skipped where the
 * counter is not usable (not x86-64, no invariant TSC, another kernel clocksource). */
#include <time.h>

#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#include "../test.h"
#include "common/cpu_counter.h"
#include "mprof_test_util.h"
#include "os/tsc_clock.h"

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

CTS_TEST(tsc_clock_follows_clock_monotonic) {
  if (!cts_os_tsc_usable()) CTS_SKIP("no invariant time-stamp counter on this machine");
#if CTS_HAVE_CPU_COUNTER
  cts_tsc_clock_t c;
  CTS_ASSERT_EQ_INT(cts_os_tsc_calibrate(&c, 5000000), 0);
  CTS_ASSERT(c.mult != 0);
  uint64_t last = 0;
  for (int i = 0; i < 5; i++) {
    const uint64_t before = monotonic_ns();
    const uint64_t tsc_ns = cts__tsc_to_ns(&c, cts__cpu_counter());
    const uint64_t after = monotonic_ns();
    /* Within 1 ms either side: the 5 ms calibration is good to a few ppm, and a preempted
     * reading can only widen [before, after]. */
    CTS_ASSERT_MSG(tsc_ns + 1000000 >= before && tsc_ns <= after + 1000000,
                   "tsc says %llu, CLOCK_MONOTONIC %llu..%llu", (unsigned long long)tsc_ns,
                   (unsigned long long)before, (unsigned long long)after);
    CTS_ASSERT(tsc_ns >= last);
    last = tsc_ns;
    const struct timespec ms = {0, 2000000};
    nanosleep(&ms, NULL);
  }
  /* a count a little before the base gives a time a little before it, not 2^64 */
  CTS_ASSERT(cts__tsc_to_ns(&c, c.base_counter - 1000) < c.base_ns);
  CTS_ASSERT(cts__tsc_to_ns(&c, c.base_counter - 1000) + 10000 > c.base_ns);
  /* the process-wide calibration is made once */
  cts_tsc_clock_t a, b;
  CTS_ASSERT_EQ_INT(cts_os_tsc_clock(&a), 0);
  CTS_ASSERT_EQ_INT(cts_os_tsc_clock(&b), 0);
  CTS_ASSERT(memcmp(&a, &b, sizeof a) == 0);
#endif
}

static uint64_t clock_must_not_be_called(void *ud) {
  (*(int *)ud)++;
  return 0;
}

CTS_TEST(ring_with_tsc_reads_the_counter_inline) {
  if (!cts_os_tsc_usable()) CTS_SKIP("no invariant time-stamp counter on this machine");
  static uint8_t buffer[4 * 4096];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(4) / 8];
  int calls = 0;
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buffer;
  cfg.buffer_size = sizeof buffer;
  cfg.clock = clock_must_not_be_called;
  cfg.clock_user_data = &calls;
  CTS_ASSERT_EQ_INT(cts_os_tsc_clock(&cfg.tsc), 0);
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, sizeof state, &cfg), 0);
  const uint64_t before = monotonic_ns();
  CTS_ASSERT_EQ_INT(cts_task_start(ring), 0);
  for (int i = 0; i < 100; i++) cts_task_resolved(i);
  cts_task_stop();
  const uint64_t after = monotonic_ns();
  CTS_ASSERT_EQ_INT(calls, 0);
  tu_events_t t = {0};
  CTS_ASSERT_EQ_INT(tu_read(buffer, sizeof buffer, &t, false, NULL, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(t.n, 101);
  for (size_t i = 0; i < t.n; i++) {
    CTS_ASSERT(t.ev[i].time_ns + 1000000 >= before && t.ev[i].time_ns <= after + 1000000);
    if (i) CTS_ASSERT(t.ev[i].time_ns >= t.ev[i - 1].time_ns);
  }
  tu_events_free(&t);
}

CTS_TEST_MAIN()
