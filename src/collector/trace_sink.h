/* SPDX-License-Identifier: MIT */
/* A trace sink: takes the bytes of one trace stream as they arrive from a socket, in pieces
 * of any size, and turns them into one finished file. Used by the collector (one sink per
 * connection) and by `ctfscope fetch`.
 *
 *  - The format is detected from the first bytes: a memtrace trace (packet magic c1 1f fc c1
 *    followed by a memtrace header) or a mirage-profile task-trace packet stream (the same
 *    magic followed by the mirage-profile uuid). Anything else is refused.
 *  - The bytes are written through to a temporary file in the output directory, and
 *    validated as they arrive, to the level the configuration asks (cts_sink_validate_t):
 *    memtrace streams packet by packet (every packet header checked, the trace-info packet
 *    decoded by the streaming reader), or every event decoded by the streaming reader, with
 *    or without its backtrace; task traces always packet by packet (magic, uuid, sizes).
 *  - Finishing keeps everything up to the end of the last complete, valid packet (a stream
 *    cut mid-packet, or corrupt after some point, leaves a valid file), names the file from
 *    the trace's own info (program, pid, start time) plus a tag (the peer), and renames it.
 *    A stream with no complete trace-info packet leaves no file.
 *
 * Names built from the trace are sanitised: only [A-Za-z0-9._+-] survive, they never
 * start with '.', and each part is length-limited, so no string from a peer can name a
 * path outside the directory. Files are created with openat() relative to a directory
 * descriptor and never replace an existing file (a numeric suffix makes names unique). */
#ifndef CTS_COLLECTOR_TRACE_SINK_H
#define CTS_COLLECTOR_TRACE_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cts_sink_format {
  CTS_SINK_FORMAT_UNKNOWN = 0, /* not enough bytes yet */
  CTS_SINK_FORMAT_MEMTRACE,
  CTS_SINK_FORMAT_MPROF,
} cts_sink_format_t;

/* How deeply a memtrace stream is checked as it arrives. Every level keeps the file valid
 * at packet granularity (framing, sizes, versions, id ranges); the deeper ones also catch a
 * writer that put corrupt events inside well-formed packets, at the cost of decoding every
 * event (the collector then receives at the reader's speed, not the network's). */
typedef enum cts_sink_validate {
  CTS_SINK_VALIDATE_PACKETS = 0, /* packet headers; the trace-info packet decoded */
  CTS_SINK_VALIDATE_EVENTS,      /* and every event, backtraces skipped */
  CTS_SINK_VALIDATE_FULL,        /* and every backtrace through the backtrace cache */
} cts_sink_validate_t;

/* "packets", "events", "full"; parse returns false for anything else. */
const char *cts_sink_validate_name(cts_sink_validate_t v);
bool cts_sink_validate_parse(const char *name, cts_sink_validate_t *out);

typedef struct cts_sink_config {
  /* Directory the files go into (not owned; must stay open while the sink lives). */
  int dir_fd;
  /* Appended to the file name to tell traces apart, e.g. the peer "127.0.0.1-4242".
   * Sanitised. NULL: none. */
  const char *tag;
  /* When set, the exact name of the finished file inside dir_fd, chosen by the user (it
   * replaces an existing file); the name is then not derived from the trace. */
  const char *fixed_name;
  /* Largest packet accepted, in bytes (a memory bound: one packet is buffered). */
  uint32_t max_packet_size;
  /* How deeply memtrace streams are checked. */
  cts_sink_validate_t validate;
  /* Unique among the sinks of this process: names the temporary file. */
  uint64_t serial;
} cts_sink_config_t;

typedef struct cts_sink cts_sink_t;

/* Fills cfg with defaults: dir_fd = AT_FDCWD, 1 MiB packets, CTS_SINK_VALIDATE_FULL. */
void cts_sink_config_init(cts_sink_config_t *cfg);

/* Creates a sink; no file exists until the format is recognised. Returns 0 or -ENOMEM. */
int cts_sink_create(cts_sink_t **out, const cts_sink_config_t *cfg);

/* Takes the next len bytes of the stream. Returns 0; a CTS_E_* code when the stream is
 * invalid (not a trace, or corrupt: see cts_sink_message()); or -errno when the file cannot
 * be written. After an error the sink takes no more bytes (every later call returns the
 * same error) but can still be finished, keeping the valid part. */
int cts_sink_feed(cts_sink_t *s, const void *data, size_t len);

/* Zero-copy receiving. Once a memtrace stream checked packet by packet has its trace info
 * (cts_sink_can_take_pipe()), its bytes need not pass through the caller's memory: the
 * caller splices them from the socket into a pipe, and cts_sink_feed_pipe() splices len
 * bytes from the pipe into the file, then checks the packet headers among them by reading
 * them back. Same returns as cts_sink_feed(); on an error the pipe may still hold bytes,
 * which the caller must drain. Linux only (splice(2)). */
bool cts_sink_can_take_pipe(const cts_sink_t *s);
int cts_sink_feed_pipe(cts_sink_t *s, int pipe_rd, size_t len);

/* Finishes: truncates the file to the last complete packet, names it and renames it. Sets
 * *saved_name (borrowed, valid until cts_sink_destroy) to the file's name inside the
 * directory, or NULL when nothing valid was received (no file is left then). Returns 0 or
 * -errno when the file cannot be finished (it is removed). Call once. */
int cts_sink_finish(cts_sink_t *s, const char **saved_name);

/* Removes the temporary file of an unfinished sink, and frees everything. Accepts NULL. */
void cts_sink_destroy(cts_sink_t *s);

cts_sink_format_t cts_sink_format(const cts_sink_t *s);
/* Bytes taken so far. */
uint64_t cts_sink_received(const cts_sink_t *s);
/* Bytes up to the end of the last complete, valid packet: what a finished file keeps. */
uint64_t cts_sink_complete_bytes(const cts_sink_t *s);
/* Alloc, promote and collect events in complete packets (memtrace streams validated to
 * the events level or deeper; 0 otherwise). */
uint64_t cts_sink_events(const cts_sink_t *s);
/* Allocations in complete event packets, from their headers' object-id ranges (memtrace,
 * every level). */
uint64_t cts_sink_allocations(const cts_sink_t *s);
/* What a log line or progress display counts: the events when they are decoded (memtrace
 * at the events level or deeper; task traces, whose events are not counted, say 0 events),
 * else the allocations. Sets *n and returns "events" or "allocations". */
const char *cts_sink_count(const cts_sink_t *s, uint64_t *n);
/* Complete packets. */
uint64_t cts_sink_packets(const cts_sink_t *s);
/* True once the trace-info packet (memtrace) or a first packet (task trace) is complete. */
bool cts_sink_has_info(const cts_sink_t *s);
/* The error cts_sink_feed() returned, or 0. */
int cts_sink_error(const cts_sink_t *s);
/* A one-line description of that error, naming the stream offset; "" if none. */
const char *cts_sink_message(const cts_sink_t *s);

#endif /* CTS_COLLECTOR_TRACE_SINK_H */
