/* SPDX-License-Identifier: MIT */
/**
 * @file tracer.h
 * The allocation-tracing runtime: samples a running program's heap allocations and
 * writes them as a memtrace trace (docs/formats/memtrace.md), like Jane Street's
 * `memtrace` (file sink) and `memtrace-mirage` (write callback + injected clock).
 * How it works, and why, is in docs/tracing.md ("How the tracer works"), under the same
 * section names as below; this header says what a caller can rely on.
 *
 * Two ways to use it:
 *  - Unmodified programs: `LD_PRELOAD=libctfscope-preload.so MEMTRACE=trace.ctf prog`
 *    (or `ctfscope record -- prog`). The preload library interposes malloc and friends
 *    and calls cts_tracer_start() from its constructor (environment: docs/tracing.md).
 *  - Linked: a program linked against libctfscope-preload.so (placed before libc, as
 *    with any malloc replacement) calls cts_tracer_start()/cts_tracer_stop() itself.
 *    Custom allocators report their blocks with cts_tracer_track_alloc()/_free().
 *
 * ## Sampling
 * Each 8-byte word allocated is sampled with probability `sample_rate` (λ); a block with
 * at least one sample is recorded (alloc event, source major) with its sample count, and
 * nsamples / λ × 8 estimates the bytes allocated without bias.
 *
 * ## Events
 * Sampled allocation: alloc; free of a sampled block: collect (frees of unsampled blocks
 * are not recorded); realloc: collect of the old block if sampled, then a new allocation
 * sampled on its own, even when the block did not move. Object ids count from 0 in alloc
 * order. The trace ends when the session stops (or the writer process saw the program
 * end), not at the last sampled event.
 *
 * ## Is this block sampled? (the free path)
 * The preload library gives sampled blocks a 16-byte header before the address the
 * program gets; the real allocator must keep the 16 bytes before its blocks readable
 * (glibc does). Blocks reported with cts_tracer_track_alloc() are not touched.
 *
 * ## Hand-off and the writer thread
 * Only the writer (a thread, or a process: below) calls the sink and the location
 * resolver. A thread whose ring of records is full waits for the writer (a slow sink
 * slows the program) unless drop mode is on. The writer flushes at least every
 * `flush_interval_ms` when something was written.
 *
 * ## The writer process (`writer` = CTS_TRACER_WRITER_PROCESS; the preload's default)
 * The writer runs in a forked process that is nobody's child. Only for FILE, FD and
 * TCP_CONNECT sinks without a `clock` callback, and only when no thread has sampled yet:
 * start tracing early, before sampling anything and ideally single-threaded. If the
 * mapping or the fork fails, or the sink does not allow it, the session uses a thread,
 * silently. A program that is PID 1 (of its pid namespace) or a child subreaper gets a
 * writer thread instead, automatically: an orphaned writer would be its child. If the
 * writer process is killed, tracing stops (stats.error -ESRCH) and
 * the program runs on.
 *
 * ## Drop mode (`drop_when_full`; MEMTRACE_DROP=1; `ctfscope record --drop`)
 * Allocating threads never wait for the writer. What finds no room is not recorded and
 * is counted in cts_tracer_stats_t and in loss markers in the trace (an alloc + collect
 * whose one location code is CTS_TRACER_LOST_CODE_BASE with the counts, see the macros
 * below). On a TCP sink, stopping gives up after 2 s on a peer that takes nothing; any
 * cts_tracer_flush() waits at most 2 s.
 *
 * ## TCP sinks (memtrace-mirage semantics)
 *  - CTS_TRACER_SINK_TCP_CONNECT: cts_tracer_start() connects (at most
 *    `connect_timeout_ms`) and fails if it cannot. If the peer goes away, tracing stops
 *    (the error stays in the stats) and the program runs on.
 *  - CTS_TRACER_SINK_TCP_LISTEN: cts_tracer_start() binds and returns; a service thread
 *    serves one client at a time, each with a fresh trace, sampling only while a client
 *    is connected. cts_tracer_is_active() is true from start to stop, client or not.
 * Lossless by default, but a peer that takes nothing for `stall_timeout_ms` while the
 * writer has a packet for it ends tracing (stats.error -ETIMEDOUT, one log line; the
 * program runs on). Sockets are close-on-exec and never raise SIGPIPE.
 *
 * ## Compression (`compress_level`; CTFSCOPE_COMPRESS=zstd[:LEVEL]; `record --compress`)
 * The writer writes zstd frames, decodable up to the last flush; every ctfscope command
 * reads them, OCaml's memtrace reader does not. Not for TCP sinks.
 *
 * ## Backtraces
 * Location codes are return addresses (the innermost one: the malloc call's), captured
 * without malloc or locks, and resolved (file, line, function, inlined frames outermost
 * first) with libdw on the writer when first sent. MIXED, the default on x86-64 with
 * glibc 2.35+ and libunwind, gives libunwind's backtraces at about the cost of a
 * frame-pointer walk in code built with frame pointers; FRAME_POINTER stays within the
 * thread's stack and never faults, but loses the frames of code built without them;
 * LIBUNWIND always calls unw_backtrace().
 *
 * ## Processes
 * A forked child is not traced. When the traced process execs, its trace is finished (by
 * the writer process after the exec, from the module list the preload hands it; a writer
 * thread is flushed first) and the new image traces into a new file (trace.ctf,
 * trace.exec1.ctf, ...; TCP sinks: a new connection). dlclose() flushes first.
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
  CTS_TRACER_SINK_TCP_CONNECT = 4, /**< `address` "HOST:PORT": stream to that peer */
  CTS_TRACER_SINK_TCP_LISTEN = 5,  /**< `address` "[ADDR:]PORT": serve one client at a time */
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
  /** Any kind: event clock in µs since the epoch; NULL = the wall clock (read as the
   *  CPU's time-stamp counter when it is usable). Called with the tracer lock held, from
   *  allocating threads: it must not allocate. */
  cts_clock_us_cb clock;
  void *clock_user_data;
  /** TCP_CONNECT: "HOST:PORT" or "[IPV6]:PORT". TCP_LISTEN: "[ADDR:]PORT" (no ADDR:
   *  127.0.0.1 only; port 0: a free port, see cts_tracer_listen_port()). Copied. */
  const char *address;
  /** TCP_CONNECT: how long cts_tracer_start() waits for the connection (default 3000). */
  uint32_t connect_timeout_ms;
  /** Log lines (a TCP sink's refused second client, a writer process that died...),
   *  without a newline, from the tracer's threads or a thread waiting for the writer;
   *  must not call the tracer nor allocate. NULL: stderr, prefixed "ctfscope: ". */
  void (*log)(void *user_data, const char *line);
  void *log_user_data;
} cts_tracer_sink_t;

/** Backtrace capture methods. */
typedef enum cts_tracer_unwind {
  CTS_TRACER_UNWIND_AUTO = 0,      /**< MIXED where available, else libunwind, else frame
                                        pointers */
  CTS_TRACER_UNWIND_FRAME_POINTER, /**< walk the frame-pointer chain */
  CTS_TRACER_UNWIND_LIBUNWIND,     /**< unw_backtrace() */
  CTS_TRACER_UNWIND_NONE,          /**< no backtraces */
  CTS_TRACER_UNWIND_MIXED,         /**< frame pointers where the code keeps them, the rest
                                        from libunwind (see "Backtraces") */
} cts_tracer_unwind_t;

/** Where the writer runs (see "The writer process"). */
typedef enum cts_tracer_writer {
  CTS_TRACER_WRITER_THREAD = 0,  /**< a thread of this process (default) */
  CTS_TRACER_WRITER_PROCESS = 1, /**< a process forked at start, where the sink allows it */
} cts_tracer_writer_t;

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
  /** Drop mode: allocating threads never wait for the writer; what finds no room is
   *  counted and marked in the trace (see "Drop mode"). Default false: lossless. */
  bool drop_when_full;
  /** The writer's home: THREAD (default) or PROCESS (the preload library's default for
   *  files and TCP_CONNECT; see "The writer process"). */
  cts_tracer_writer_t writer;
  /** zstd level (1-19) of the trace written (see "Compression"); 0 (default): plain
   *  memtrace, which Jane Street's readers read. FILE, FD and CALLBACK sinks only: a TCP
   *  sink with a level is refused (CTS_E_INVAL). */
  int compress_level;
  /** TCP sinks, lossless mode: how long the writer waits for a peer that takes nothing
   *  before tracing stops (see "TCP sinks"); 0 = for ever. Default 5000 ms. */
  uint32_t stall_timeout_ms;
} cts_tracer_config_t;

/** Location codes of drop mode's loss markers: this bit set, none above it. */
#define CTS_TRACER_LOST_CODE_BASE (UINT64_C(1) << 61)
/** The function name of a loss marker's location starts with this. */
#define CTS_TRACER_LOST_NAME_PREFIX "ctfscope: lost "
/** The function name of the marker frame that ends a backtrace cut at the frame limit
 *  (cts_tracer_config_t.max_frames) starts with this; the rest is "--max-frames N]". */
#define CTS_TRACER_CUT_NAME_PREFIX "[deeper frames not recorded: "
/** Lost sampled allocations counted by loss-marker code @p c. */
#define CTS_TRACER_LOST_ALLOCS_OF(c) (((c) >> 30) & UINT64_C(0x7FFFFFFF))
/** Lost frees counted by loss-marker code @p c. */
#define CTS_TRACER_LOST_FREES_OF(c) ((c)&UINT64_C(0x3FFFFFFF))

/** Fills @p cfg with defaults. */
CTS_API void cts_tracer_config_init(cts_tracer_config_t *cfg);
/** Fills @p sink with defaults for @p kind. */
CTS_API void cts_tracer_sink_init(cts_tracer_sink_t *sink, cts_tracer_sink_kind_t kind);

/**
 * Starts tracing into @p sink: writes the trace-info packet and starts the writer thread
 * (TCP_LISTEN: binds and starts serving; each client then starts a trace). Returns 0;
 * CTS_E_INVAL (bad rate, missing path/callback/address, unknown sink kind); for TCP
 * sinks -EINVAL (address does not parse or resolve) or the -errno of connecting
 * (-ECONNREFUSED, -ETIMEDOUT...) or binding (-EADDRINUSE...);
 * CTS_E_STATE (already tracing); -errno from opening or locking the file (-EAGAIN or
 * -EACCES: another process holds its lock); or the sink's write error. On failure nothing
 * is traced and nothing stays open. @p cfg and @p sink are copied.
 */
CTS_API int cts_tracer_start(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink);

/**
 * Stops tracing: later allocations are not recorded, the writer thread writes what is
 * recorded, flushes, closes the writer (and a FILE sink's file) and exits. Returns 0, the
 * first error the sink reported, or CTS_E_STATE when not tracing. Safe to call from an
 * atexit handler. Blocks were sampled by this session keep no state after it.
 */
CTS_API int cts_tracer_stop(void);

/** Whether a tracer is started in this process (TCP_LISTEN: with or without a client). */
CTS_API bool cts_tracer_is_active(void);

/**
 * Asks the writer thread to write everything recorded so far and flush the trace, and
 * waits until it did (drop mode: at most 2 s, then -ETIMEDOUT). Returns 0, the sink's
 * error, or CTS_E_STATE when no trace is being written (TCP_LISTEN: no client).
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
  uint64_t waits;         /**< times an allocating thread waited for room in its ring */
  uint64_t dropped;       /**< sampled blocks whose free cannot be recorded (no memory
                               for the side table) */
  uint64_t bytes_written; /**< trace bytes handed to the sink */
  int error;              /**< first sink error, 0 if none */
  uint64_t lost_allocs;   /**< drop mode: sampled blocks not recorded (ring full) */
  uint64_t lost_samples;  /**< drop mode: their samples */
  uint64_t lost_collects; /**< drop mode: frees of recorded blocks not recorded */
  uint64_t loss_markers;  /**< drop mode: loss markers written */
  uint64_t clients;       /**< TCP_LISTEN: clients served since start (with the current one) */
  uint64_t refused;       /**< TCP_LISTEN: clients refused while another was served */
  bool serving;           /**< TCP_LISTEN: a client is being served now */
} cts_tracer_stats_t;

/** Copies the counters into @p out (TCP_LISTEN: the session counters are the current or
 *  last client's). */
CTS_API void cts_tracer_get_stats(cts_tracer_stats_t *out);

/** The port a TCP_LISTEN tracer listens on (the kernel's pick for port 0), else 0. */
CTS_API uint16_t cts_tracer_listen_port(void);

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_TRACER_H */
