/* SPDX-License-Identifier: MIT */
/* The TCP_LISTEN service (service.c), as the tracer's API (tracer.c) drives it. */
#ifndef CTS_TRACER_SERVICE_H
#define CTS_TRACER_SERVICE_H

#include <stdint.h>

#include <ctfscope/tracer.h>

/* Control lock held: binds sink->address and starts the service thread. 0 or an error
 * code (nothing left open then). */
int cts__service_start(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink);
/* Control lock NOT held: stops the service thread (which ends its client's session) and
 * closes the listening socket. Returns the last session's error. */
int cts__service_stop(void);
/* In a forked child: forget the parent's service, closing the child's copies of its
 * descriptors. Async-signal-safe. */
void cts__service_atfork_child(void);
/* The bound port, 0 when no service listens. */
uint16_t cts__service_port(void);
/* Adds the service's counters to a copy of the session's. Any thread. */
void cts__service_add_stats(cts_tracer_stats_t *out);

#endif /* CTS_TRACER_SERVICE_H */
