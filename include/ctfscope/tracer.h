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
 *    and calls cts_tracer_start() from its constructor (environment: MEMTRACE=FILE,
 *    tcp://HOST:PORT or listen://[ADDR:]PORT; MEMTRACE_RATE, MEMTRACE_CONTEXT,
 *    MEMTRACE_DROP, CTFSCOPE_UNWIND; see docs/tracing.md).
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
 * - the end: the trace's last packet ends (timestamp_end) when the session was stopped
 *   (cts_tracer_stop(), the preload's at exit), or when a writer process saw the program
 *   exit, exec or die (it looks every 50 ms), not at the last sampled event, so that a
 *   trace's duration is the program's (memtrace allows a packet's end past its events).
 * Object ids are the writer's (0, 1, 2… in alloc-event order): the tracer takes them from
 * one atomic counter when it records the allocation, and the writer thread writes the
 * allocations in that order, so a block's id is known when the block is freed, long
 * before the writer thread has written the alloc.
 *
 * ## Is this block sampled? (the free path)
 * In the preload library, a sampled block is allocated 16 bytes larger (for alignments
 * above 16, by the alignment) and the program gets the address past a 16-byte header:
 * a tag (a random per-process key XOR the header's own address) and the block's object
 * id and session. A free reads the word before the block (next to glibc's own chunk
 * header, so in a cache line the real free touches anyway) and compares it with the
 * expected tag: one load and compare for unsampled blocks, no table for sampled ones.
 * The tag is cleared before the real block is freed, so stale memory never matches, and
 * the key is random, so no program data matches by chance. malloc_usable_size(),
 * realloc (which moves the header with the data), the aligned allocators and frees of
 * blocks allocated before tracing started or after it stopped all work as without the
 * tracer. The real allocator must keep the 16 bytes before its blocks readable (glibc
 * does). Blocks reported with cts_tracer_track_alloc() are not touched: they go into a
 * side table (open addressing, address -> object id, in mmap'd memory that grows as
 * needed), guarded by a 64 KiB table of 8-bit counters indexed by address bits 4-19, so
 * that cts_tracer_track_free() of an untracked block costs one byte load. A free is
 * recorded before the real free runs, so an address reused by another thread can never
 * be confused with the dead block.
 *
 * ## Hand-off and the writer thread
 * The memtrace writer is not thread-safe and its flushes call the location resolver, so
 * writer calls happen only on a dedicated writer thread. The rare sampled path (alloc of
 * a hit block, free of a sampled block) takes no lock: each thread that samples has its
 * own 1 MiB ring of records (time, object id, length, nsamples, backtrace; mapped at the
 * thread's first sample and handed on to a later thread when it exits). The object id
 * comes from one atomic counter, taken once the ring has room, so the record is published
 * right after. The time is, with the default clock on a usable time-stamp counter, a raw
 * rdtsc count, converted to wall-clock µs (kept non-decreasing) by the writer thread, which
 * calibrates the counter once per process. The writer thread merges the rings: allocations
 * in object-id order (the order memtrace's ids need), each free after its allocation, the
 * rest as published. It wakes when a ring is half full and at least every
 * `flush_interval_ms` (default 1000 ms), and flushes the trace then when something was
 * written, so a killed program leaves a trace readable up to about its last second. Woken
 * by a ring, it drains until a pass finds less than a sixteenth of a ring, and sleeps
 * again: it does not follow a busy thread record by record, which would have the two
 * cores pass the ring's newest cache lines back and forth; the timer's wake-up drains all. When a
 * thread's ring is full the thread waits for the writer thread (the trace is never
 * silently thinned: a slow sink slows the program), unless drop mode is on. (An id taken by
 * a thread that then never publishes its record, e.g. stopped in a debugger, holds the
 * trace back for at most 2 s; a loss marker then takes its place.) All of this holds for
 * a writer process too (below).
 *
 * ## The writer process (`writer` = CTS_TRACER_WRITER_PROCESS; the preload's default)
 * The writer's work (merging the rings, encoding, resolving locations, writing) can run in
 * a process of its own instead of a thread. cts_tracer_start() then maps a shared region
 * (MAP_SHARED, anonymous: about 1 GiB of address space for 1024 rings, used as rings are)
 * holding the control block (a robust, process-shared mutex and futex words) and the
 * rings, and forks twice: the grandchild, named "ctfscope-writer", runs the writer loop
 * and the middle process exits at once, so the writer process is nobody's child (the
 * program never sees it in wait()). It calls setsid() (a ^C for the program's process
 * group does not cut its trace short), blocks every signal, points 0-2 at /dev/null and
 * closes every descriptor but the sink's and the read end of a close-on-exec pipe whose
 * write end only the program holds: when the program exits, is killed or execs, the pipe
 * hangs up, and the writer process writes what the rings hold, closes the trace and
 * exits. So a program killed by SIGKILL leaves a complete trace, once its writer process
 * is done; a file sink also carries an flock(LOCK_EX) for as long as any copy of its
 * descriptor is open, which `ctfscope record` waits for (at most 10 s) before reading the
 * trace. Location codes are resolved from the program's /proc/PID/maps, read again when
 * the program flushed (it does before exec and dlclose) or when a code falls in no known
 * module. Threads waiting for the writer process (a full ring, a flush, the stop) look
 * every 100 ms whether it still exists (pidfd); if it was killed, tracing stops with
 * stats.error -ESRCH and the program runs on.
 * Why: a writer thread shares the program's address space and runs on another CPU; when
 * glibc returns heap to the kernel (a trim) the kernel must interrupt that CPU for a TLB
 * shootdown, which the trimming thread waits for, and a second thread ends glibc's
 * single-thread fast paths. At rate 1 on bench_alloc the process writer is 10-14 ns per
 * malloc+free pair cheaper (bench/JOURNAL.md, "Session 7").
 * When: only for FILE, FD and TCP_CONNECT sinks without a `clock` callback (a callback
 * belongs to this process); TCP_LISTEN sessions and all others use a thread. Only if no
 * record ring exists yet when the first such session starts (rings made before are
 * private): start tracing before sampling anything. fork() copies the process: start it
 * early, while the process is small (later, each page the program writes again costs it
 * a copy-on-write fault) and, ideally, single-threaded. If the region cannot be mapped or
 * the fork fails, the session silently uses a thread. A forked child of the program lets
 * go of the region and the pipe. In a program that is a child subreaper or PID 1, the
 * writer process is reparented to the program itself: use a thread there.
 *
 * ## Drop mode (`drop_when_full`; MEMTRACE_DROP=1; `ctfscope record --drop`)
 * Allocating threads never wait for the writer thread. A sampled allocation that finds
 * its thread's ring full (allocations may fill 3/4 of it; the rest is kept for frees) is
 * not recorded, nor is its free; a free of a recorded block that finds no room at all is
 * not recorded either (that block then looks alive to the end). The loss is recorded in
 * the trace itself, in a form every memtrace reader accepts: the next time the writer
 * thread looks at the rings it writes a *loss marker*, an ordinary alloc event (source
 * major) immediately followed by its collect, whose length and nsamples are the sums of
 * the lost blocks' (so estimates of allocated bytes stay unbiased) and whose backtrace is
 * the single location code CTS_TRACER_LOST_CODE_BASE | lost allocs << 30 | lost frees
 * (each saturated: 31 and 30 bits), resolved to `<ctfscope>:1` in a function named
 * "ctfscope: lost N sampled allocations and M frees (trace reader too slow)". memtrace's
 * tools show it as an allocation site; `ctfscope info` adds the markers up ("lost in drop
 * mode"); cts_tracer_stats_t counts them too. On TCP sinks a writer thread that is
 * stopping in drop mode gives up on a peer that takes nothing for 2 s (the trace ends at
 * the last whole packet the peer took), and cts_tracer_flush() waits at most 2 s.
 *
 * ## TCP sinks (memtrace-mirage semantics)
 *  - CTS_TRACER_SINK_TCP_CONNECT (MEMTRACE=tcp://HOST:PORT): cts_tracer_start() connects,
 *    waiting at most `connect_timeout_ms`, and fails (nothing is traced) if it cannot; the
 *    preload library then prints one warning and runs the program untraced. The trace
 *    streams to the peer (`ctfscope collect`). If the peer goes away, tracing stops (the
 *    error stays in the stats) and the program runs on.
 *  - CTS_TRACER_SINK_TCP_LISTEN (MEMTRACE=listen://[ADDR:]PORT; no ADDR: 127.0.0.1):
 *    cts_tracer_start() binds and returns; a service thread accepts clients (`ctfscope
 *    fetch`). Nothing is sampled until a client connects; each client gets a fresh trace
 *    (a new trace-info packet with its own start time, object ids from 0, new writer
 *    state). When the client half-closes or disconnects, sampling stops, the last packet
 *    is sent and the connection is closed; a later client starts a new trace. A second
 *    client while one is served is accepted and closed at once, with a log line.
 *    cts_tracer_is_active() is true from start to stop, client or not.
 * Both are lossless by default: the writer thread blocks on a full socket, and the
 * program waits for it as for any slow sink, but not for ever: a peer that takes nothing
 * for `stall_timeout_ms` (default 5 s; CTFSCOPE_STALL_TIMEOUT=SECONDS, `record --stall-timeout`)
 * while the writer has a packet for it (a client that connects and never reads, a
 * collector that accepts and never reads) ends tracing: sampling stops, the waiting
 * threads go on, the connection is closed, stats.error is -ETIMEDOUT and one log line
 * says so; the program runs on untraced (TCP_LISTEN: a later client gets a new trace).
 * In drop mode the program never waits; the bound then only ends a stopping writer's
 * wait (2 s). Sockets are close-on-exec, written with
 * MSG_NOSIGNAL (a vanished peer never raises SIGPIPE), and closed in forked children.
 *
 * ## Compression (`compress_level`; CTFSCOPE_COMPRESS=zstd[:LEVEL]; `record --compress`)
 * The writer (thread or process, never the allocating threads) compresses the trace with
 * zstd as it writes it: zstd frames with content checksums, each periodic flush of the
 * trace ending a zstd block, so that the file is decodable up to the last flush whatever
 * happens to the program later; cts_tracer_flush() (before exec and dlclose, which a writer
 * thread may not survive) and the end of the session end the frame (the next bytes start
 * a new one; zstd readers take concatenated frames as one stream). Every ctfscope command reads
 * such a file (or stream on standard input or a FIFO) as it reads a plain one; a frame cut short
 * reads up to its last complete block, with a warning that the tail was lost. OCaml's memtrace
 * reader does not (`zstd -d` first). At level 3, rate 1: 1.3-1.95 bytes per event on real programs
 * against 8.9-9.5 plain (docs/tracing.md), for about 80 ns of the writer's CPU per event. The
 * compressor's memory (4.3 MB of address space at level 3, 94 MB at 19, touched as used) is mmap'd,
 * not malloc'd.
 *
 * ## Backtraces
 * Location codes are return addresses (innermost: the return address of the malloc
 * call). They are captured without malloc or locks. The default (CTS_TRACER_UNWIND_MIXED,
 * x86-64 with glibc 2.35 or later and libunwind) walks frame pointers through code built
 * with them, decided per function from its prologue and its call frame information, and takes the
 * frames beyond (at the latest libc's start-up code) from libunwind, kept per thread with a copy of
 * the stack they depend on, so that they are reused while that stack is unchanged: the same
 * backtraces as libunwind's, at the cost of a frame-pointer walk when the program is built with
 * frame pointers. CTS_TRACER_UNWIND_FRAME_POINTER only walks (bounded by the thread's stack, never
 * faulting; frames of code built without frame pointers go missing); CTS_TRACER_UNWIND_LIBUNWIND
 * always uses libunwind's unw_backtrace. Codes are resolved to file, line and function (with
 * inlined frames, outermost first) with elfutils libdw on the writer thread, when the writer first
 * sends them.
 *
 * ## Processes
 * fork(): the child is not traced (as in memtrace, whose writer stops in a child). Its
 * allocations and frees run untouched; it never writes to the parent's trace.
 * exec(): the preload library clears MEMTRACE at start-up, as memtrace does, so forked
 * children (and what they exec) are not traced. When the traced process itself execs (a
 * wrapper such as env, `exec` in a shell script, a pyenv shim), the preload's execve/
 * execv/execvp/execvpe/execl/execlp/execle flush the trace first, so the file is complete
 * up to the exec, and pass the tracing settings on to the new image, which goes on
 * tracing into a NEW file: the Nth image of the process traces into the first file's
 * name with ".execN" before a ".ctf" suffix (trace.ctf, trace.exec1.ctf,
 * trace.exec2.ctf...; without that suffix ".execN" is appended). Every file is thus one
 * complete, valid memtrace trace of one image (its trace-info names that image's
 * executable); appending to the same file was not an option, as a memtrace trace cannot
 * hold a second trace-info packet. TCP sinks need no new name: the new image connects
 * (or listens) again and the peer sees a new trace. The new image is traced only if its
 * environment still preloads this library (`env -i` ends tracing). If the exec fails,
 * tracing goes on in the same file. dlclose() also flushes first, so that the codes of
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
   *  CPU's time-stamp counter when it is usable, see "Hand-off" above). Called with the
   *  tracer lock held, from allocating threads: it must not allocate. */
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
   *  counted and marked in the trace (see "Drop mode" above). Default false: lossless. */
  bool drop_when_full;
  /** The writer's home: THREAD (default) or PROCESS (the preload library's default for
   *  files and TCP_CONNECT; see "The writer process" above). */
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
