/* SPDX-License-Identifier: MIT */
/* The one monotonic clock helper of the hosted code (not the freestanding core, whose
 * clock is injected). CLOCK_MONOTONIC: never jumps with the wall clock. Thread-safe and
 * async-signal-safe (clock_gettime is on the POSIX list). */
#ifndef CTS_CLOCK_H
#define CTS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t cts_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t cts_mono_ms(void) {
  return cts_mono_ns() / 1000000ull;
}

#endif /* CTS_CLOCK_H */
