/* SPDX-License-Identifier: MIT */
/* The LTTng-UST side of bench_tasks (built only when lttng-ust is found): the tracepoint
 * provider, and the loop that fires it. lttng-ust's generated code is not warning-clean
 * under the project's flags, so this file is compiled on its own with them relaxed. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "bench_lttng_tp.h"

#include "bench_lttng.h"

void bench_lttng_events(uint64_t n) {
  for (uint64_t i = 0; i < n; i++) lttng_ust_tracepoint(cts_bench, event, (int)i, (long)i);
}

bool bench_lttng_enabled(void) {
  return lttng_ust_tracepoint_enabled(cts_bench, event);
}
