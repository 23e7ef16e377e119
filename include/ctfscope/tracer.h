/* SPDX-License-Identifier: MIT */
/**
 * @file tracer.h
 * The allocation-tracing runtime: samples a running program's heap allocations and
 * writes them as a memtrace trace (docs/formats/memtrace.md), like Jane Street's
 * `memtrace` (file sink) and `memtrace-mirage` (write callback + injected clock).
 *
 * Two ways to use it:
 *  - Unmodified programs: `LD_PRELOAD=libctfscope-preload.so MEMTRACE=trace.ctf prog`
 *    (or `ctfscope record -- prog`). The preload library interposes malloc and friends
 *    and calls cts_tracer_start() from its constructor (environment: MEMTRACE,
 *    MEMTRACE_RATE, MEMTRACE_CONTEXT, CTFSCOPE_UNWIND).
 *  - Linked: a program linked against libctfscope-preload.so (placed before libc, as
 *    with any malloc replacement) calls cts_tracer_start()/cts_tracer_stop() itself.
 *    Custom allocators report their blocks with cts_tracer_track_alloc()/_free().
 *
 * ## Sampling (memtrace §8.1, §13)
 * Every 8-byte word allocated is sampled independently with probability λ
 * (`sample_rate`). A block of n bytes is `length = ceil(n / 8)` words and gets
 * `nsamples ~ Binomial(length, λ)`; blocks with nsamples ≥ 1 are recorded with
 * source = major. `nsamples / λ × 8` is an unbiased estimate of the bytes allocated,
 * which is what memtrace's tools compute. Each thread keeps a countdown of words to its
 * next sampled word, drawn from a geometric distribution with a per-thread xorshift
 * generator, so an unsampled allocation costs one thread-local compare and subtract.
 * When a block is hit, its further samples are drawn as a binomial over the rest of the
 * block (exact for small counts, a normal approximation past 1000 expected samples).
 *
 * ## Events
 * - malloc-like allocation, sampled: alloc(length, nsamples, backtrace).
 * - free of a sampled block: collect. Frees of unsampled blocks are not recorded.
 * - realloc: collect of the old block if it was sampled, then a new allocation of the
 *   new size, sampled independently (as if free + malloc), even when the block did not
 *   move. So realloc chains count every step's full size as allocated.
 * Object ids are the writer's (0, 1, 2… in alloc-event order): the tracer assigns them
 * under its lock in the same order it queues the events, so it knows the id of a block
 * when the block is freed, long before the writer thread has written the alloc.
 *
 * ## Is this block sampled? (the free path)
 * Sampled blocks are NOT over-allocated or tagged in place, so malloc_usable_size(),
 * realloc and frees by code outside the tracer keep working untouched. Instead:
 *  - a 64 KiB table of 8-bit counters indexed by address bits 4…19 (bloom-like) counts
 *    the live sampled blocks per slot; a free whose slot is 0 (the overwhelming case: a
 *    few thousand live samples against 65 536 slots) costs one shift, mask and byte load;
 *  - only when the slot is non-zero, the side table (open addressing, address → object
 *    id, in mmap'd memory that grows as needed) is probed under the tracer lock.
 * A free is recorded before the real free runs, so an address reused by another thread
 * can never be confused with the dead block.
 *
 * ## Hand-off and the writer thread
 * The memtrace writer is not thread-safe and its flushes call the location resolver, so
 * writer calls happen only on a dedicated writer thread. The rare sampled path (alloc of
 * a hit block, free of a sampled block) takes one mutex, assigns the id and timestamp,
 * and appends a small record (time, id, length, nsamples, backtrace) to the active one of
 * two 1 MiB queue buffers. The writer thread swaps the buffers, encodes the records, and
 * flushes the trace at least every `flush_interval_ms` (default 1000 ms) when something
 * was written, so a killed program leaves a trace readable up to about its last second.
 * When the active buffer is full the sampling thread waits for the writer thread (the
 * trace is never silently thinned). The unsampled fast path takes no lock.
 *
 * ## Backtraces
 * Location codes are return addresses (innermost: the return address of the malloc
 * call). They are captured without malloc or locks by frame-pointer walking (bounded by
 * the thread's stack, never faulting; stops at the first frame built without frame
 * pointers) or with libunwind's unw_backtrace (CTS_TRACER_UNWIND_LIBUNWIND, the default
 * when available: correct through code built without frame pointers). Codes are
 * resolved to file, line and function (with inlined frames, outermost first) with
 * elfutils libdw on the writer thread, when the writer first sends them.
 *
 * ## Processes
 * fork(): the child is not traced (as in memtrace, whose writer stops in a child). Its
 * allocations and frees run untouched; it never writes to the parent's trace.
 * exec(): the preload library clears MEMTRACE at start-up, as memtrace does, so children
 * and exec'd images are not traced into the same file. Its execve/execv/execvp/execvpe
 * flush the trace first, so the trace is complete up to the exec; a program started
 * through a wrapper that execs it (env, `exec` in a shell script, pyenv shims) is thus
 * traced only as far as the wrapper. dlclose() also flushes first, so that the codes of
 * the library being unloaded are resolved while it is still mapped. A return address
 * reused by a library loaded later at the same place keeps its first meaning.
 *
 * Thread-safety: every function here may be called from any thread. Only one tracer
 * runs per process.
 */
#ifndef CTFSCOPE_TRACER_H
#define CTFSCOPE_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Where the trace goes. */
typedef enum cts_tracer_sink_kind {
  CTS_TRACER_SINK_FILE = 1,        /**< `path`: created 0600, locked (lockf), truncated */
  CTS_TRACER_SINK_FD = 2,          /**< `fd`: written as is, never closed by the tracer */
  CTS_TRACER_SINK_CALLBACK = 3,    /**< `write` + `clock` (the Memtrace.Make(Pclock)(Flow) shape) */
  CTS_TRACER_SINK_TCP_CONNECT = 4, /**< reserved: tcp://HOST:PORT, not implemented yet */
  CTS_TRACER_SINK_TCP_LISTEN = 5,  /**< reserved: listen://[ADDR:]PORT, not implemented yet */
} cts_tracer_sink_kind_t;

/** A sink. Initialise with cts_tracer_sink_init(); new fields go at the end. */
typedef struct cts_tracer_sink {
  uint32_t struct_size;
  cts_tracer_sink_kind_t kind;
  const char *path; /**< FILE: copied at start */
  int fd;           /**< FD */
  /** CALLBACK: receives each finished packet, always on the writer thread. */
  cts_write_cb write;
  void *write_user_data;
  /** Any kind: event clock in µs since the epoch; NULL = gettimeofday-like wall clock.
   *  Called with the tracer lock held, from allocating threads: it must not allocate. */
  cts_clock_us_cb clock;
  void *clock_user_data;
} cts_tracer_sink_t;

/** Backtrace capture methods. */
typedef enum cts_tracer_unwind {
  CTS_TRACER_UNWIND_AUTO = 0,      /**< libunwind when built with it, else frame pointers */
  CTS_TRACER_UNWIND_FRAME_POINTER, /**< walk the frame-pointer chain */
  CTS_TRACER_UNWIND_LIBUNWIND,     /**< unw_backtrace() */
  CTS_TRACER_UNWIND_NONE,          /**< no backtraces */
} cts_tracer_unwind_t;

/** Tracer options. Initialise with cts_tracer_config_init(); new fields go at the end. */
typedef struct cts_tracer_config {
  uint32_t struct_size;
  /** λ, sampling probability per 8-byte word, 0 < λ ≤ 1 (default 1e-6, memtrace's). */
  double sample_rate;
  const char *context;         /**< free text stored in the trace; NULL = none */
  const char *executable_name; /**< NULL = /proc/self/exe */
  cts_tracer_unwind_t unwind;
  /** Deepest backtrace captured, in frames (default 256, at most 1024). */
  uint32_t max_frames;
  /** Resolve location codes with libdw (default true when built with libdw). */
  bool symbolize;
  /** The writer thread flushes at least this often when events are waiting (default 1000). */
  uint32_t flush_interval_ms;
  /** Seed of the sampling generators; 0 (default) = from the clock and thread. Tests only. */
  uint64_t seed;
} cts_tracer_config_t;

/** Fills @p cfg with defaults. */
CTS_API void cts_tracer_config_init(cts_tracer_config_t *cfg);
/** Fills @p sink with defaults for @p kind. */
CTS_API void cts_tracer_sink_init(cts_tracer_sink_t *sink, cts_tracer_sink_kind_t kind);

/**
 * Starts tracing into @p sink: writes the trace-info packet and starts the writer thread.
 * Returns 0; CTS_E_INVAL (bad rate, missing path/callback, unsupported sink kind);
 * CTS_E_STATE (already tracing); -errno from opening or locking the file (-EAGAIN or
 * -EACCES: another process holds its lock); or the sink's write error. On failure nothing
 * is traced and nothing stays open. @p cfg and @p sink are copied.
 */
CTS_API int cts_tracer_start(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink);

/**
 * Stops tracing: later allocations are not recorded, the writer thread writes what is
 * queued, flushes, closes the writer (and a FILE sink's file) and exits. Returns 0, the
 * first error the sink reported, or CTS_E_STATE when not tracing. Safe to call from an
 * atexit handler. Blocks were sampled by this session keep no state after it.
 */
CTS_API int cts_tracer_stop(void);

/** Whether a tracing session is running in this process. */
CTS_API bool cts_tracer_is_active(void);

/**
 * Asks the writer thread to write everything queued so far and flush the trace, and
 * waits until it did. Returns 0, the sink's error, or CTS_E_STATE when not tracing.
 */
CTS_API int cts_tracer_flush(void);

/**
 * Reports an allocation of @p size bytes at @p ptr made by an allocator the tracer does
 * not interpose (or by a test). Sampled like a malloc; the backtrace starts at the caller.
 */
CTS_API void cts_tracer_track_alloc(const void *ptr, size_t size);
/** Reports that the block at @p ptr is freed (recorded if it was sampled). */
CTS_API void cts_tracer_track_free(const void *ptr);

/** Counters of the current or last session. */
typedef struct cts_tracer_stats {
  uint64_t samples;       /**< sampled blocks recorded (alloc events) */
  uint64_t collects;      /**< collect events */
  uint64_t waits;         /**< times an allocating thread waited for queue space */
  uint64_t dropped;       /**< sampled blocks whose free cannot be recorded (no memory
                               for the side table) */
  uint64_t bytes_written; /**< trace bytes handed to the sink */
  int error;              /**< first sink error, 0 if none */
} cts_tracer_stats_t;

/** Copies the counters into @p out. */
CTS_API void cts_tracer_get_stats(cts_tracer_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_TRACER_H */
