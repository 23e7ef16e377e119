/* SPDX-License-Identifier: MIT */
/* Hosted outputs of the task tracer (include/ctfscope/tasks.h): the mirage-profile ring as
 * an mmap'd file (it survives a crash of the program and can be read while it runs, §3.1),
 * and a stream of finished packets to a file descriptor (a file, a pipe or a TCP socket).
 * Both stamp events in CLOCK_MONOTONIC nanoseconds: read through the CPU's time-stamp
 * counter when it is usable (tsc_clock.h; calibrated once per process, which takes 10 ms),
 * else with clock_gettime. CTFSCOPE_CLOCK=monotonic in the environment forces the latter. */
#ifndef CTS_OS_MPROF_RING_H
#define CTS_OS_MPROF_RING_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

typedef struct cts_os_mprof_ring cts_os_mprof_ring_t;

/* CLOCK_MONOTONIC in ns (a cts_clock_ns_cb). */
uint64_t cts_os_clock_ns(void *user_data);

/* Sizes the file open on @p fd (read-write) to @p size bytes with every block reserved
 * (posix_fallocate, or zeros written where the file system has no fallocate) and maps it
 * shared into *map. A file system with less than @p size free is an error here (-ENOSPC),
 * not a SIGBUS at the first write into an unbacked page. Returns 0 or -errno / CTS_E_INVAL.
 * Allocates nothing (the preload library calls it before tracing starts). */
int cts_os_map_file_reserved(int fd, size_t size, void **map);

/* Creates (or truncates) @p path to @p size bytes, maps it shared and writes the headers of
 * @p packets packets (0: mirage-profile's 4). The descriptor is closed: the mapping keeps
 * the data. The file's blocks are reserved first (cts_os_map_file_reserved); when that fails
 * the file is removed. Returns 0 or -errno / CTS_E_INVAL. */
int cts_os_mprof_ring_open(cts_os_mprof_ring_t **out, const char *path, size_t size,
                           uint32_t packets);

/* A ring in anonymous memory whose finished packets are written to @p fd (which the caller
 * keeps owning) as a stream: each packet is cut to its content. @p packet_size bytes per
 * packet, @p packets of them (at least the number of threads writing at once). */
int cts_os_mprof_stream_open(cts_os_mprof_ring_t **out, int fd, size_t packet_size,
                             uint32_t packets);

/* The ring to pass to cts_task_start() (borrowed). */
cts_mprof_ring_t *cts_os_mprof_ring_borrow(cts_os_mprof_ring_t *r);

/* Stops using the ring: call after cts_task_stop() once no thread writes. A stream sends
 * its partly filled packets first. Unmaps/frees everything; returns 0 or the first write
 * error. Accepts NULL. */
int cts_os_mprof_ring_close(cts_os_mprof_ring_t *r);

/* Writes the metadata (cts_mprof_metadata()) to @p dir/metadata. Returns 0 or -errno. */
int cts_os_mprof_write_metadata(const char *dir);

/* Reads the mirage-profile trace file @p path (a regular file: packets are read with
 * pread) with cts_mprof_read() and the malloc allocator. Returns 0, an error opening or
 * reading the file (then *input_error is true and errbuf names the file), or the reader's
 * result. */
int cts_os_mprof_read_file(const char *path, const cts_mprof_handler_t *h, bool file_order,
                           cts_mprof_summary_t *summary, char *errbuf, size_t errlen,
                           bool *input_error);

/* Whether the file at @p path starts like a mirage-profile trace (false if unreadable). */
bool cts_os_is_mprof_file(const char *path);

#endif /* CTS_OS_MPROF_RING_H */
