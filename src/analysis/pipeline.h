/* SPDX-License-Identifier: MIT */
/* Reading a memtrace trace on two threads: a decode thread runs the reader over the file
 * and fills batches of decoded events, a small bounded ring of them, while the calling
 * thread takes the batches and calls the consumer's handler for each record, in file
 * order. The consumer sees exactly what a reader created with its handler would have
 * delivered (same records, same order, same fields and backtraces), only from batches.
 *
 * A batch holds up to CTS_PIPE_BATCH_EVENTS events, stored as the consumer gets them with
 * their backtraces copied whole into the batch, so that the consumer passes them on
 * without a copy of its own: the decode thread, the less busy one, does the copying.
 * Locations are passed by code with the reader's own (stable) definitions, and the
 * consumer keeps its own table of them so that lookups during the run never touch the
 * reader's table, which the decode thread grows meanwhile. Memory: CTS_PIPE_BATCHES
 * batches of about 0.45 MiB each (3.6 MiB); a batch holding a backtrace of more than 32 Ki
 * frames grows to hold it (up to the reader's max_backtrace_frames), and shrinks back.
 *
 * Thread-safety: one run per pipe; every function but the decode thread's (internal) is
 * called from the thread that created the pipe, and every consumer callback is made there.
 * Signals are blocked in the decode thread, so handlers run on the calling thread. */
#ifndef CTS_PIPELINE_H
#define CTS_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

#include "../os/os.h"

#define CTS_PIPE_BATCHES      8u
#define CTS_PIPE_BATCH_EVENTS 2048u

typedef struct cts_pipe cts_pipe_t;

/* Creates a pipe that delivers to consumer (copied; its callbacks may be NULL). Returns 0
 * or -ENOMEM. */
int cts_pipe_create(cts_pipe_t **out, const cts_mt_handler_t *consumer);
/* Frees the pipe (after cts_pipe_run returned; accepts NULL). */
void cts_pipe_destroy(cts_pipe_t *p);

/* The handler to create the reader with (cts_mt_reader_create): its callbacks fill the
 * batches on the decode thread. */
cts_mt_handler_t cts_pipe_producer(cts_pipe_t *p);

/* Reads path (as cts_os_read_memtrace) with reader, created with cts_pipe_producer(p), on
 * a decode thread while this one consumes. progress (may be NULL) is called on this
 * thread. Returns what a single-threaded read would have: 0, the decoder's or the
 * input's error (*input_error as cts_os_read_memtrace sets it), or the first non-zero
 * value a consumer callback returned, after which nothing more is delivered
 * (cts_pipe_stopped says where). Every record the reader delivered before an error of
 * its own reaches the consumer first. When the thread cannot be started the read runs on
 * this thread, records going straight to the consumer. Always joins the thread before it
 * returns. */
int cts_pipe_run(cts_pipe_t *p, const char *path, cts_mt_reader_t *reader,
                 cts_os_progress_cb progress, void *progress_user_data, bool *input_error);

/* Whether a consumer callback stopped the run, and the offset of the record it was given. */
bool cts_pipe_stopped(const cts_pipe_t *p, uint64_t *offset);

/* A location code's definition as delivered to the consumer so far (valid during and after
 * the run, until the reader is destroyed): 0, or CTS_E_LOCATION_UNDEFINED. */
int cts_pipe_lookup_location(const cts_pipe_t *p, uint64_t code, const cts_mt_location_t **locs,
                             size_t *n);

/* The smallest trace that the automatic choice decodes on a second thread. Below it the
 * single-threaded read takes under ~0.3 s for `stats` (70-85 MB a second here), where
 * the thread's start (~6 ms of CPU, 3.6 MiB of batches) and its hand-offs cost more than
 * the wait they save (bench/README.md, "Two threads"). */
#define CTS_PIPE_MIN_BYTES (64u << 20)

/* How many threads pay for reading a trace of file_size bytes: 2 when it has at least
 * CTS_PIPE_MIN_BYTES, this process may run on cpus >= 2 CPUs and the 1-minute load average
 * (negative: unknown) leaves one of them idle; else 1. Pure: the rule, for tests. */
unsigned cts_pipe_threads_for(uint64_t file_size, long cpus, double load);

/* cts_pipe_threads_for with this machine's figures now: the CPUs this process may run on
 * (sched_getaffinity) and getloadavg's 1-minute average. */
unsigned cts_pipe_auto_threads(uint64_t file_size);

#endif /* CTS_PIPELINE_H */
