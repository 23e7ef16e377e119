/* SPDX-License-Identifier: MIT */
/* The LTTng-UST tracepoint bench_tasks compares against: an int and a long, the payload of
 * a mirage-profile `fulfills` event. Read twice by lttng-ust's headers (the usual
 * tracepoint-provider pattern), hence the unusual guard. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER cts_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./bench_lttng_tp.h"

#if !defined(CTS_BENCH_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define CTS_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(cts_bench, event, LTTNG_UST_TP_ARGS(int, a, long, b),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(int, a, a)
                                                   lttng_ust_field_integer(long, b, b)))

#endif

#include <lttng/tracepoint-event.h>
