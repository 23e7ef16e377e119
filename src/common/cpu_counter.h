/* SPDX-License-Identifier: MIT */
/* The CPU cycle counter as a clock (include/ctfscope/tasks.h, cts_tsc_clock_t): reading it
 * and converting counts to nanoseconds. x86-64 only (rdtsc); elsewhere
 * CTS_HAVE_CPU_COUNTER is 0 and callers use a clock function instead. No OS calls: the
 * freestanding core uses this. */
#ifndef CTS_CPU_COUNTER_H
#define CTS_CPU_COUNTER_H

#include <stdint.h>

#include <ctfscope/tasks.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define CTS_HAVE_CPU_COUNTER 1

/* rdtsc, not rdtscp: no ordering is needed, and it is the cheaper of the two (about 20
 * cycles on recent Intel cores, which is most of the cost of an event). */
static inline uint64_t cts__cpu_counter(void) {
  uint32_t lo, hi;
  __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
  return ((uint64_t)hi << 32) | lo;
}

/* A count read on another CPU just after calibration may be a few cycles below the base:
 * the difference is signed, so that it gives a time a few ns before base_ns, not 2^64. */
static inline uint64_t cts__tsc_to_ns(const cts_tsc_clock_t *c, uint64_t counter) {
  __extension__ typedef __int128 wide_t;
  const int64_t delta = (int64_t)(counter - c->base_counter);
  return c->base_ns + (uint64_t)(int64_t)(((wide_t)delta * (wide_t)c->mult) >> 32);
}
#else
#define CTS_HAVE_CPU_COUNTER 0
#endif

#endif /* CTS_CPU_COUNTER_H */
