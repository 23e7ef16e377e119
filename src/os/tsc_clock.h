/* SPDX-License-Identifier: MIT */
/* The CPU's time-stamp counter as the task tracer's clock (cts_tsc_clock_t, tasks.h): an
 * event then reads the counter inline (rdtsc, about 8 ns on the 2.5 GHz development VM)
 * instead of calling clock_gettime (about 22 ns there, through the vDSO). Nothing here
 * allocates: the preload library calls it from its constructor. */
#ifndef CTS_OS_TSC_CLOCK_H
#define CTS_OS_TSC_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include <ctfscope/tasks.h>

/* Whether the counter can serve as a clock: x86-64, /proc/cpuinfo lists constant_tsc and
 * nonstop_tsc (it ticks at one rate, also in deep sleep states), and the kernel's current
 * clocksource, when it can be read, is "tsc" (the kernel has not found the counters of
 * different CPUs out of step). */
bool cts_os_tsc_usable(void);

/* Measures the counter against CLOCK_MONOTONIC over @p window_ns (the calling thread
 * sleeps that long; 10 ms gives a rate within about 10 ppm). Returns 0, or CTS_E_STATE
 * when the counter is not usable or did not advance. The result maps counter values to
 * CLOCK_MONOTONIC nanoseconds. */
int cts_os_tsc_calibrate(cts_tsc_clock_t *out, uint64_t window_ns);

/* The process-wide calibration (10 ms, made on the first call; thread-safe). Returns 0 or
 * CTS_E_STATE (then the caller reads CLOCK_MONOTONIC instead). */
int cts_os_tsc_clock(cts_tsc_clock_t *out);

#endif /* CTS_OS_TSC_CLOCK_H */
