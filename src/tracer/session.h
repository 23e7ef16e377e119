/* SPDX-License-Identifier: MIT */
/* What the TCP_LISTEN service (service.c) may use of the tracer: the control mutex, a
 * session into a connected socket, stopping it, its error, and the tracer's log line. The
 * one interface in that direction: service.c includes this and tracer_internal.h (for the
 * thread guard), never tracer_state.h. The API (tracer.c) calls the service (service.h);
 * the sessions never call it. */
#ifndef CTS_TRACER_SESSION_H
#define CTS_TRACER_SESSION_H

#include <ctfscope/tracer.h>

/* The tracer's one log helper: a line through the sink's log callback, or to stderr
 * ("ctfscope: LINE"), formatted in a stack buffer (cut at 512 bytes). Any thread. */
void cts__tracer_log(const cts_tracer_sink_t *sink, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The control mutex serialises starting and stopping sessions. */
void cts__control_lock(void);
void cts__control_unlock(void);
/* Control lock held: starts a session streaming to the connected socket fd, which it takes
 * over (closed when the session ends, or at once on failure). CTS_E_STATE when
 * cts_tracer_stop() is stopping the service. */
int cts__session_start_socket(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int fd);
/* Control lock held: stops the running session (CTS_E_STATE if none); returns its error. */
int cts__session_stop(void);
/* The running session's sink error, 0 if none. Any thread. */
int cts__session_error(void);

#endif /* CTS_TRACER_SESSION_H */
