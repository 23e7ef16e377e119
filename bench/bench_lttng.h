/* SPDX-License-Identifier: MIT */
/* bench_lttng.c: an LTTng-UST tracepoint with an int and a long, for comparison. */
#ifndef CTS_BENCH_LTTNG_H
#define CTS_BENCH_LTTNG_H

#include <stdbool.h>
#include <stdint.h>

/* Fires the tracepoint @p n times. */
void bench_lttng_events(uint64_t n);

/* Whether an LTTng session has enabled it (otherwise each call is a load and a branch). */
bool bench_lttng_enabled(void);

#endif /* CTS_BENCH_LTTNG_H */
