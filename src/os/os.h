/* SPDX-License-Identifier: MIT */
/* The POSIX layer: everything the core must not do itself. All functions return 0 or a
 * negative error (-errno or CTS_E_*), as everywhere in ctfscope. */
#ifndef CTS_OS_H
#define CTS_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ctfscope/ctfscope.h>

/* malloc-backed allocator for the core codecs. */
cts_allocator_t cts_os_allocator(void);

/* Error text for any ctfscope error, with strerror() for -errno values. */
const char *cts_os_strerror(int err);

/* A trace source: a file (plain, gzip- or zstd-compressed, detected from its first bytes;
 * a FIFO too) or standard input ("-"). */
typedef struct cts_os_input cts_os_input_t;

int cts_os_input_open(cts_os_input_t **out, const char *path);

/* Inputs that cannot be opened twice (a FIFO, a pipe's /dev/fd/N from <(...)): the command
 * opens one once, to look at its first bytes, and registers the descriptor (ownership
 * passes; kept until exit): every later opening of `path` (cts_os_open_input, so
 * cts_os_input_open and the task-trace reader) reads through a duplicate of it (a path
 * registered already keeps its first descriptor; fd is closed). Returns 0, or -ENOMEM when
 * the table (8 inputs) is full. */
int cts_os_input_register(const char *path, int fd);
/* open(path, O_RDONLY | O_CLOEXEC), or a duplicate of the descriptor registered for path:
 * a descriptor or -errno. */
int cts_os_open_input(const char *path);
/* Reads up to len bytes; returns the count, 0 at the end, or a negative error. */
ssize_t cts_os_input_read(cts_os_input_t *in, void *buf, size_t len);
/* Size of the underlying file in bytes (compressed size for gzip), 0 if unknown. */
uint64_t cts_os_input_file_size(const cts_os_input_t *in);
/* Bytes consumed from the underlying file so far (for progress on compressed input). */
uint64_t cts_os_input_file_pos(const cts_os_input_t *in);
bool cts_os_input_is_compressed(const cts_os_input_t *in);
/* After the end: whether a zstd frame was cut off (what its complete blocks held was read). */
bool cts_os_input_tail_lost(const cts_os_input_t *in);
void cts_os_input_close(cts_os_input_t *in);

/* Called about every 4 MiB while a trace is read: bytes of the file read, file size. */
typedef void (*cts_os_progress_cb)(void *user_data, uint64_t done, uint64_t total);

/* Reads a whole memtrace trace from path into reader (feed + finish). Returns 0, an input
 * error (then *input_error is true) or the reader's error. */
int cts_os_read_memtrace(const char *path, cts_mt_reader_t *reader, cts_os_progress_cb progress,
                         void *progress_user_data, bool *input_error);

/* What a plain memtrace file's packet headers say of its span, read before its pass: the
 * headers only, one pread() each, the packets' bodies skipped by their length (a 160 MB
 * trace has ~5 600 packets). *start_us: the trace-info packet's time (the trace's start);
 * *floor_us: the latest timestamp_begin among the later packets of the trace's pid that hold
 * allocations (alloc_id_end > alloc_id_begin) and lie wholly in the file, so a time that
 * one of the trace's events reaches when those packets decode (an allocation is never
 * before its packet's start), never past the last event's; start_us when there are none.
 * The walk stops at the first header that is not a memtrace one. A header may still lie
 * about what its body holds: the caller checks the floor against the events it read.
 * Returns true when both are known; false for standard input ("-"), anything that is not a
 * regular file (a FIFO is not opened: opening it would wait for, or take, a writer's data),
 * a compressed or non-memtrace file, or an error. Thread-safe. */
bool cts_os_memtrace_span(const char *path, uint64_t *start_us, uint64_t *floor_us);

/* cts_write_cb for a file descriptor (user_data is the fd cast to intptr_t): writes
 * everything, retrying on EINTR and short writes. */
int cts_os_fd_write(void *user_data, const void *buf, size_t len);
/* Whether `fd` is a regular file that holds something other than a trace: not empty, and
 * starting with neither a memtrace packet's magic nor a zstd frame's. Tracing into it would
 * destroy a user's file (`record -o main.c` by a slip of the hand), so the tracer and
 * `record` refuse it (CTS_E_NOT_A_TRACE). Reads at most 4 bytes (pread: the offset stays);
 * false when it cannot tell (fstat or pread fails: the open's own errors come later). */
bool cts_os_fd_holds_other_data(int fd);

/* Wall-clock µs since the epoch (cts_clock_us_cb). */
uint64_t cts_os_clock_us(void *user_data);

#endif /* CTS_OS_H */
