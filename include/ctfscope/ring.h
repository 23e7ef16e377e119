/* SPDX-License-Identifier: MIT */
/**
 * @file ring.h
 * Hosted outputs for the task tracer of tasks.h, in libctfscope (POSIX; not freestanding):
 *  - a **file-backed ring**: a mirage-profile ring in a file mapped shared, what
 *    mirage-profile's `MProf_unix.mmap_buffer` does. The trace survives a crash of the
 *    program and can be read while it runs (docs/formats/mprof.md §3.1);
 *  - a **stream sink**: a ring in anonymous memory whose finished packets are written, cut
 *    to their content, to a file descriptor (a file, a pipe, a socket), or to a TCP
 *    connection this library opens (`ctfscope collect` receives such streams).
 *
 * Both stamp events in CLOCK_MONOTONIC nanoseconds, read through the CPU's time-stamp
 * counter when it is usable (calibrated once per process, which takes about 10 ms), else
 * with clock_gettime; CTFSCOPE_CLOCK=monotonic in the environment forces the latter.
 *
 * @code
 *   cts_os_mprof_ring_t *ring;
 *   int err = cts_os_mprof_ring_open(&ring, "trace.ctf", 16u << 20, 0);
 *   if (err) fprintf(stderr, "trace.ctf: %s\n", cts_strerror(err));
 *   else cts_task_start(cts_os_mprof_ring_borrow(ring));
 *   ...                                     // the program, calling the hooks of tasks.h
 *   cts_task_stop();
 *   cts_os_mprof_ring_close(ring);
 * @endcode
 *
 * Ownership: *_open() and cts_os_mprof_stream_connect() create a ring the caller owns and
 * releases with cts_os_mprof_ring_close(); cts_os_mprof_ring_borrow() lends the ring inside
 * it. Errors: every int function returns 0, a negative errno (-ENOENT, -ENOSPC…) or a
 * CTS_E_* code (errors.h; cts_strerror() describes both). Thread safety: any number of
 * threads may write into a ring at once through the task hooks (each thread owns its
 * packet, tasks.h); opening and closing are not thread-safe: close a ring only after
 * cts_task_stop(), once no thread writes into it any more. Nothing here raises SIGPIPE
 * for a connection this library opened.
 */
#ifndef CTFSCOPE_RING_H
#define CTFSCOPE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "errors.h"
#include "mprof.h"
#include "tasks.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A ring with its memory and output; opaque. */
typedef struct cts_os_mprof_ring cts_os_mprof_ring_t;

/** CLOCK_MONOTONIC in nanoseconds (a cts_clock_ns_cb; @p user_data is unused). */
CTS_API uint64_t cts_os_clock_ns(void *user_data);

/**
 * Creates (or truncates) @p path to @p size bytes, maps it shared and writes the headers of
 * @p packets packets (0: mirage-profile's 4; at least the number of threads that write at
 * once). The file's blocks are reserved first, so a full file system is an error here
 * (-ENOSPC; the file is then removed), not a SIGBUS at a later write. The descriptor is
 * closed: the mapping keeps the data, and the file stays after close. Returns 0, -errno
 * or CTS_E_INVAL (size 0, or too small for the packets).
 */
CTS_API int cts_os_mprof_ring_open(cts_os_mprof_ring_t **out, const char *path, size_t size,
                                   uint32_t packets);

/**
 * A ring in anonymous memory whose finished packets are written to @p fd as a stream, each
 * cut to its content: @p packet_size bytes per packet, @p packets of them (0: 256; at least
 * the number of threads that write at once). The caller keeps owning @p fd and closes it
 * after cts_os_mprof_ring_close(). A packet is written by the thread that fills it, with
 * write(2): a pipe or socket whose reader is gone raises SIGPIPE unless the program ignores
 * it (cts_os_mprof_stream_connect() avoids that). Returns 0, -errno or CTS_E_INVAL.
 */
CTS_API int cts_os_mprof_stream_open(cts_os_mprof_ring_t **out, int fd, size_t packet_size,
                                     uint32_t packets);

/**
 * Connects to a collector at @p address ("HOST:PORT", "[IPV6]:PORT"; `ctfscope collect`
 * listens for it) within @p timeout_ms (negative: the system's timeout) and opens a stream
 * ring on the connection as cts_os_mprof_stream_open() does. The ring owns the socket and
 * closes it at cts_os_mprof_ring_close(). Packets are sent without SIGPIPE, waiting at most
 * @p timeout_ms for room (negative: forever); a failed send is returned by the next flush
 * and close. Returns 0, -errno (-ECONNREFUSED, -ETIMEDOUT…) or CTS_E_INVAL; then @p errbuf
 * (if not NULL) holds a message naming the address.
 */
CTS_API int cts_os_mprof_stream_connect(cts_os_mprof_ring_t **out, const char *address,
                                        int timeout_ms, size_t packet_size, uint32_t packets,
                                        char *errbuf, size_t errlen);

/** The ring to pass to cts_task_start() (borrowed: valid until the close). */
CTS_API cts_mprof_ring_t *cts_os_mprof_ring_borrow(cts_os_mprof_ring_t *r);

/**
 * Stops using the ring: call after cts_task_stop() once no thread writes. A stream sends
 * its partly filled packets first. Unmaps and frees everything (a socket opened by
 * cts_os_mprof_stream_connect() is closed); returns 0 or the first write error. Accepts
 * NULL.
 */
CTS_API int cts_os_mprof_ring_close(cts_os_mprof_ring_t *r);

/**
 * Writes the CTF metadata (cts_mprof_metadata()) to @p dir/metadata, which babeltrace2
 * needs next to a trace. Written aside and renamed: a failure keeps an existing file.
 * Returns 0 or -errno.
 */
CTS_API int cts_os_mprof_write_metadata(const char *dir);

/**
 * Reads the mirage-profile trace file @p path (a regular file; "-": standard input, which
 * must be a file too) with cts_mprof_read() and malloc. Returns 0, an error opening or
 * reading the file (then *@p input_error is true and @p errbuf names the file), or the
 * reader's result (then @p errbuf holds its message).
 */
CTS_API int cts_os_mprof_read_file(const char *path, const cts_mprof_handler_t *h, bool file_order,
                                   cts_mprof_summary_t *summary, char *errbuf, size_t errlen,
                                   bool *input_error);

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_RING_H */
