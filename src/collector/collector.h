/* SPDX-License-Identifier: MIT */
/* The trace collector behind `ctfscope collect`: one thread, one poll() loop, many traced
 * programs streaming their traces over TCP at once.
 *
 * Each connection gets a trace sink (trace_sink.h): the stream's format is detected from
 * its first bytes, the bytes are written through to a temporary file and validated as they
 * arrive, and when the connection ends the file is cut at its last complete packet and
 * renamed after the trace. One receive buffer serves every connection (each read is written
 * and validated before the next), so memory per connection is the reader's state plus at
 * most one partial packet, whatever the traces' lengths.
 *
 * A connection is dropped, without disturbing the others, when its stream is not a trace or
 * turns corrupt, when it exceeds max_bytes, when it sends nothing for idle_timeout_ms, or
 * when one packet (the first one included) takes longer than packet_timeout_ms to arrive:
 * the last rule catches clients that never send, or trickle bytes, even when idle
 * connections are allowed (a traced program that allocates nothing sends nothing for as long
 * as it likes, but never stops half-way through a packet: writers send packets whole).
 *
 * Streams are checked packet by packet by default, which keeps up with the loopback; the
 * events and full levels decode every event as well (trace_sink.h), and the collector then
 * receives at the reader's speed.
 *
 * Every connection ends with exactly one log line:
 *   PEER: closed by peer: saved FILE (B bytes, A allocations, P packets, T s)
 *         (with "E events" in place of the allocations when events are decoded)
 *   PEER: closed by peer mid-packet: saved FILE (...); dropped the last N bytes (a packet cut
 *         at offset O)
 *   PEER: dropped (WHY): nothing saved (B bytes received)
 * and a connection over max_clients gets "PEER: refused: too many clients (max N)". */
#ifndef CTS_COLLECTOR_H
#define CTS_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "os/net.h"
#include "trace_sink.h"

/* Receives each log line (no trailing newline). */
typedef void (*cts_collector_log_cb)(void *user_data, const char *line);

typedef struct cts_collector_config {
  cts_net_addr_t listen_addr;   /* required */
  const char *dir;              /* required: where traces are written (must exist) */
  unsigned max_clients;         /* connections at once (default 256) */
  uint64_t max_bytes;           /* per trace; 0 = no limit (default) */
  uint32_t idle_timeout_ms;     /* 0 = connections may stay silent forever (default) */
  uint32_t packet_timeout_ms;   /* 0 = none; default 10 000 */
  uint32_t max_packet_size;     /* bytes (default 1 MiB; writers make at most 32 KiB) */
  size_t recv_buffer_size;      /* the shared receive buffer (default 1 MiB) */
  cts_sink_validate_t validate; /* how deeply streams are checked (default: packets) */
  bool log_connects;            /* also log a line when a connection opens */
  cts_collector_log_cb log;     /* NULL: lines go to stderr */
  void *log_user_data;
} cts_collector_config_t;

/* Totals since the collector started. */
typedef struct cts_collector_stats {
  uint64_t accepted, refused, saved, dropped;
  uint64_t bytes, events, allocations;
  unsigned active;
} cts_collector_stats_t;

typedef struct cts_collector cts_collector_t;

void cts_collector_config_init(cts_collector_config_t *cfg);

/* Opens the directory and binds the listening socket. Returns 0 or -errno, with a message
 * in err. */
int cts_collector_create(cts_collector_t **out, const cts_collector_config_t *cfg, char *err,
                         size_t err_size);

/* The address actually bound (with the kernel's port when port 0 was asked for). */
const cts_net_addr_t *cts_collector_address(const cts_collector_t *c);

/* Runs the loop until cts_collector_stop() is called, then stops accepting, reads what the
 * connections had already sent, finishes every file and returns 0 (or -errno if the loop
 * itself failed). */
int cts_collector_run(cts_collector_t *c);

/* Asks the loop to stop. Async-signal-safe (it writes one byte to a pipe); callable from
 * any thread. */
void cts_collector_stop(cts_collector_t *c);

void cts_collector_get_stats(const cts_collector_t *c, cts_collector_stats_t *out);

/* Closes everything; unfinished temporary files are removed. Accepts NULL. */
void cts_collector_destroy(cts_collector_t *c);

#endif /* CTS_COLLECTOR_H */
