/* SPDX-License-Identifier: MIT */
/* A trace sink: takes the bytes of one trace stream as they arrive from a socket, in pieces
 * of any size, and turns them into one finished file. Used by the collector (one sink per
 * connection) and by `ctfscope fetch`.
 *
 *  - The format is detected from the first bytes: a memtrace trace (packet magic c1 1f fc c1
 *    followed by a memtrace header) or a mirage-profile task-trace packet stream (the same
 *    magic followed by the mirage-profile uuid). Anything else is refused.
 *  - The bytes are written through to a temporary file in the output directory, and
 *    validated as they arrive: memtrace streams by the streaming reader (every event is
 *    decoded), task traces packet by packet (magic, uuid, sizes).
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
  /* Decode every backtrace (slower, checks the backtrace cache too). */
  bool decode_backtraces;
  /* Unique among the sinks of this process: names the temporary file. */
  uint64_t serial;
} cts_sink_config_t;

typedef struct cts_sink cts_sink_t;

/* Fills cfg with defaults: dir_fd = AT_FDCWD, 1 MiB packets, backtraces decoded. */
void cts_sink_config_init(cts_sink_config_t *cfg);

/* Creates a sink; no file exists until the format is recognised. Returns 0 or -ENOMEM. */
int cts_sink_create(cts_sink_t **out, const cts_sink_config_t *cfg);

/* Takes the next len bytes of the stream. Returns 0; a CTS_E_* code when the stream is
 * invalid (not a trace, or corrupt: see cts_sink_message()); or -errno when the file cannot
 * be written. After an error the sink takes no more bytes (every later call returns the
 * same error) but can still be finished, keeping the valid part. */
int cts_sink_feed(cts_sink_t *s, const void *data, size_t len);

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
/* Alloc, promote and collect events in complete packets (memtrace only). */
uint64_t cts_sink_events(const cts_sink_t *s);
/* Complete packets. */
uint64_t cts_sink_packets(const cts_sink_t *s);
/* True once the trace-info packet (memtrace) or a first packet (task trace) is complete. */
bool cts_sink_has_info(const cts_sink_t *s);
/* The error cts_sink_feed() returned, or 0. */
int cts_sink_error(const cts_sink_t *s);
/* A one-line description of that error, naming the stream offset; "" if none. */
const char *cts_sink_message(const cts_sink_t *s);

#endif /* CTS_COLLECTOR_TRACE_SINK_H */
