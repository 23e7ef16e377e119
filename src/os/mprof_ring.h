/* SPDX-License-Identifier: MIT */
/* Hosted outputs of the task tracer: the public part (the mmap'd file ring, the fd and TCP
 * stream sinks, reading a file) is declared in include/ctfscope/ring.h and exported by
 * libctfscope; what follows is what only ctfscope's own tools use. */
#ifndef CTS_OS_MPROF_RING_H
#define CTS_OS_MPROF_RING_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include <ctfscope/mprof.h>
#include <ctfscope/ring.h>
#include <ctfscope/tasks.h>

/* Sizes the file open on @p fd (read-write) to @p size bytes with every block reserved
 * (posix_fallocate, or zeros written where the file system has no fallocate) and maps it
 * shared into *map. A file system with less than @p size free is an error here (-ENOSPC),
 * not a SIGBUS at the first write into an unbacked page. Returns 0 or -errno / CTS_E_INVAL.
 * Allocates nothing (the preload library calls it before tracing starts). */
int cts_os_map_file_reserved(int fd, size_t size, void **map);

/* Whether the file at @p path starts like a mirage-profile trace (false if unreadable). */
bool cts_os_is_mprof_file(const char *path);

#endif /* CTS_OS_MPROF_RING_H */
