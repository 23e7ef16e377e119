/* SPDX-License-Identifier: MIT */
/**
 * @file memtrace.h
 * Reader and writer for the memtrace trace format (versions 1, 2 and 3), the format
 * of Jane Street's OCaml `memtrace` library. Traces written here are read by
 * memtrace's OCaml reader and memtrace_viewer, and traces written by them are read
 * here. Format reference: docs/formats/memtrace.md (section numbers cited as §N).
 *
 * Both codecs are freestanding: no OS calls, no global or thread-local state (the object
 * code is checked: tests/core/check_freestanding.cmake). The reader takes an
 * injected allocator; the writer works entirely in caller-provided memory with an
 * injected write function and clock, and never allocates.
 *
 * Reading, in a hosted program (cts_os_* helpers do the file part for you):
 * @code
 *   static int on_event(void *ud, const cts_mt_event_t *ev) {
 *     if (ev->kind == CTS_MT_ALLOC) ((uint64_t *)ud)[0] += ev->nsamples;
 *     return 0;
 *   }
 *   cts_mt_handler_t h = {.user_data = &samples, .on_event = on_event};
 *   cts_mt_reader_config_t cfg;
 *   cts_mt_reader_config_init(&cfg);
 *   cfg.allocator = my_allocator;
 *   cts_mt_reader_t *r;
 *   int err = cts_mt_reader_create(&r, &cfg, &h);
 *   while (!err && (n = read(fd, buf, sizeof buf)) > 0) err = cts_mt_reader_feed(r, buf, n);
 *   if (!err) err = cts_mt_reader_finish(r);
 *   if (err) fprintf(stderr, "%s\n", cts_mt_reader_error_message(r));
 *   cts_mt_reader_destroy(r);
 * @endcode
 *
 * Writing, with no OS at all:
 * @code
 *   static uint8_t mem[CTS_MT_WRITER_MIN_SIZE + 4096 * 10];   // or cts_mt_writer_size(&cfg)
 *   cts_mt_writer_config_t cfg;
 *   cts_mt_writer_config_init(&cfg);
 *   cfg.sample_rate = 1e-4;
 *   cfg.executable_name = "unikernel";
 *   cfg.write = send_to_flow;    cfg.write_user_data = flow;
 *   cfg.clock = pclock_us;       cfg.clock_user_data = NULL;
 *   cfg.resolve = my_symbolizer; cfg.resolve_user_data = NULL;
 *   cfg.max_backtrace_frames = 4096;
 *   cts_mt_writer_t *w;
 *   cts_mt_writer_init(&w, mem, sizeof mem, &cfg);         // writes the trace-info packet
 *   uint64_t id;
 *   cts_mt_writer_alloc(w, CTS_TIME_NOW, words, nsamples, CTS_MT_SOURCE_MAJOR, bt, depth, &id);
 *   cts_mt_writer_collect(w, CTS_TIME_NOW, id);
 *   cts_mt_writer_close(w);                                   // final flush
 * @endcode
 */
#ifndef CTFSCOPE_MEMTRACE_H
#define CTFSCOPE_MEMTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest packet the OCaml reader can read, and so the largest this writer makes (§3). */
#define CTS_MT_MAX_WRITTEN_PACKET 32768u
/** Packet header sizes (§4). */
#define CTS_MT_HEADER_SIZE_V2 66u
#define CTS_MT_HEADER_SIZE_V3 68u
/** Locations per code that the format can carry (§7). */
#define CTS_MT_MAX_LOCATIONS 255u

/** Where an allocation was made (§8.1). */
typedef enum cts_mt_source {
  CTS_MT_SOURCE_MINOR = 0,    /**< OCaml minor heap (short-lived by construction) */
  CTS_MT_SOURCE_MAJOR = 1,    /**< major heap; what ctfscope's malloc tracer uses */
  CTS_MT_SOURCE_EXTERNAL = 2, /**< external (e.g. mmap-backed) memory */
} cts_mt_source_t;

/** Kinds of events delivered by the reader. */
typedef enum cts_mt_event_kind {
  CTS_MT_ALLOC = 1,
  CTS_MT_PROMOTE = 2,
  CTS_MT_COLLECT = 3,
} cts_mt_event_kind_t;

/** The trace-info record (§6). Strings are borrowed from the reader. */
typedef struct cts_mt_info {
  uint16_t version;   /**< format version of the file: 1, 2 or 3 */
  double sample_rate; /**< λ, probability per word, 0 < λ ≤ 1 */
  uint8_t word_size;  /**< in bits: 64 (or 32) */
  const char *executable_name;
  const char *host_name;
  const char *runtime_params; /**< "ocaml_runtime_params": free text for non-OCaml writers */
  uint64_t pid;
  uint64_t start_time_us; /**< µs since the Unix epoch */
  const char *context;    /**< NULL if none: v1 has no field, and memtrace writes none as "" */
} cts_mt_info_t;

/** One source location; several per code mean inlining, outermost first (§7). */
typedef struct cts_mt_location {
  uint32_t line;       /**< 20 bits in the format */
  uint32_t start_char; /**< 8 bits */
  uint32_t end_char;   /**< 10 bits */
  const char *filename;
  const char *defname; /**< function name */
} cts_mt_location_t;

/** One allocation, promotion or collection. Everything is borrowed for the callback only. */
typedef struct cts_mt_event {
  cts_mt_event_kind_t kind;
  uint16_t domain;   /**< v3 domain of the packet, 0 otherwise */
  uint8_t source;    /**< cts_mt_source_t, allocations only */
  bool short_form;   /**< allocation was written in the short form (ids 101…116) */
  uint64_t time_us;  /**< µs since the Unix epoch */
  uint64_t obj_id;   /**< object id (allocation order in v2) */
  uint64_t length;   /**< block length in words, allocations only */
  uint64_t nsamples; /**< samples in the block, allocations only */
  /**
   * Frames shared with the previous backtrace, as encoded. Guarantee for consumers: the first
   * min(common_prefix, backtrace_len) frames equal those of the previous allocation of the
   * same domain, so per-frame work (interning, lookups) can start after them.
   */
  uint64_t common_prefix;
  size_t backtrace_len;      /**< 0 when the reader skips backtraces */
  const uint64_t *backtrace; /**< location codes, outermost first, allocation point last */
  uint64_t offset;           /**< byte offset of the event in the trace */
} cts_mt_event_t;

/** Packet kinds, as reported to cts_mt_handler_t.on_packet. */
typedef enum cts_mt_packet_kind {
  CTS_MT_PACKET_TRACE_INFO = 0,
  CTS_MT_PACKET_LOCATIONS, /**< only location events */
  CTS_MT_PACKET_EVENTS,    /**< alloc/promote/collect events (and maybe locations) */
  CTS_MT_PACKET_EMPTY,     /**< no events at all */
  CTS_MT_PACKET_TRUNCATED, /**< header complete, content cut off by the end of the trace */
  CTS_MT_PACKET_SKIPPED,   /**< skipped: wrong pid, or out of sequence (v1/v2) */
} cts_mt_packet_kind_t;

/** A packet header (§4) with where it was found. */
typedef struct cts_mt_packet {
  cts_mt_packet_kind_t kind;
  uint64_t offset; /**< byte offset of the packet in the trace */
  uint32_t size;   /**< in bytes, header included */
  uint16_t version;
  uint16_t domain;
  uint64_t pid;
  uint64_t time_begin_us, time_end_us;
  uint64_t alloc_id_begin, alloc_id_end;
  uint16_t verify_ix, verify_pred;
  uint64_t verify_val;
  uint32_t nevents; /**< events decoded from it */
} cts_mt_packet_t;

/**
 * What the reader calls. Every member may be NULL. A callback returning non-zero stops
 * decoding: cts_mt_reader_feed() then returns that value (use CTS_E_STOPPED or your own
 * negative code). If a function that takes these callbacks fails before decoding, no
 * callback is called.
 */
typedef struct cts_mt_handler {
  void *user_data;
  /** The trace-info event, once, before anything else. */
  int (*on_info)(void *user_data, const cts_mt_info_t *info);
  /** A location event: what @p code means (@p n may be 0: no debug info). */
  int (*on_location)(void *user_data, uint64_t code, const cts_mt_location_t *locs, size_t n);
  /** An alloc, promote or collect event, in file order. */
  int (*on_event)(void *user_data, const cts_mt_event_t *ev);
  /** After each packet is decoded (or found truncated or skipped). */
  int (*on_packet)(void *user_data, const cts_mt_packet_t *packet);
  /** Something was skipped but reading goes on (truncated last packet, wrong pid…). */
  void (*on_warning)(void *user_data, int code, uint64_t offset, const char *message);
} cts_mt_handler_t;

/** Reader options. Initialise with cts_mt_reader_config_init(); new fields go at the end. */
typedef struct cts_mt_reader_config {
  uint32_t struct_size;
  /** Required: where the reader's own memory comes from. */
  cts_allocator_t allocator;
  /** Decode backtraces (default true). When false they are skipped, which is faster. */
  bool decode_backtraces;
  /** Largest packet accepted, in bytes (default 16 MiB; the OCaml writer makes ≤ 32 KiB). */
  uint32_t max_packet_size;
  /** Longest backtrace accepted, in frames (default 1 Mi). */
  uint32_t max_backtrace_frames;
  /** Most v3 domains accepted (default 64; each costs ~200 KiB of decoder state). */
  uint32_t max_domains;
  /** Bound on memory for location definitions, in bytes (default 512 MiB). */
  uint64_t max_location_bytes;
} cts_mt_reader_config_t;

typedef struct cts_mt_reader cts_mt_reader_t;

/** Fills @p cfg with defaults (no allocator: the caller must set one). */
CTS_API void cts_mt_reader_config_init(cts_mt_reader_config_t *cfg);

/**
 * Creates a streaming reader. @p handler is copied. Returns 0, CTS_E_INVAL (no allocator,
 * bad limits) or CTS_E_NOMEM. The caller owns *@p out and must call cts_mt_reader_destroy().
 * Memory use is bounded by the limits above and independent of the trace's length.
 */
CTS_API int cts_mt_reader_create(cts_mt_reader_t **out, const cts_mt_reader_config_t *cfg,
                                 const cts_mt_handler_t *handler);

/** Frees the reader. Accepts NULL. */
CTS_API void cts_mt_reader_destroy(cts_mt_reader_t *reader);

/**
 * Feeds the next @p len bytes of the trace; they may split packets anywhere. Complete
 * packets are decoded and delivered before it returns. Returns 0, a callback's non-zero
 * value, or a negative error for a corrupt trace, after which the reader stays failed
 * (every later call returns the same error). Events before the error were delivered.
 */
CTS_API int cts_mt_reader_feed(cts_mt_reader_t *reader, const void *data, size_t len);

/**
 * Signals the end of the trace. A trailing packet whose header is complete but whose
 * content is cut off is skipped with a warning (on_warning with CTS_E_TRUNCATED_PACKET)
 * and 0 is returned, as memtrace's reader does; a trace ending inside a packet header
 * returns CTS_E_TRUNCATED_HEADER; a trace with no trace-info packet returns CTS_E_EMPTY.
 */
CTS_API int cts_mt_reader_finish(cts_mt_reader_t *reader);

/** The trace info, or NULL before it was read. Borrowed. */
CTS_API const cts_mt_info_t *cts_mt_reader_borrow_info(const cts_mt_reader_t *reader);

/**
 * Looks up the definition of a location code. Returns 0 and sets *@p locs (borrowed, valid
 * until the reader is destroyed) and *@p n, or CTS_E_LOCATION_UNDEFINED.
 */
CTS_API int cts_mt_reader_lookup_location(const cts_mt_reader_t *reader, uint64_t code,
                                          const cts_mt_location_t **locs, size_t *n);

/**
 * Passes a warning found by the caller about the trace's bytes (e.g. its compressed
 * container was cut off) to the handler's on_warning, at the current offset, so that it
 * reaches the user as the reader's own warnings do. Does not change the reader's state.
 */
CTS_API void cts_mt_reader_warn(cts_mt_reader_t *reader, int code, const char *message);

/**
 * Called for each literal codeword of a decoded backtrace (§8.4), once its code is checked
 * (non-zero, defined) and stored in the domain's backtrace cache, before the event it belongs
 * to is delivered. A literal is the only way a code enters the cache; every other frame comes
 * from the cache or from the previous backtrace's common prefix. So each code in a delivered
 * backtrace was reported here at that event or an earlier one of the same domain, and a
 * consumer that wants each code once (distinct codes, interning) can work here, per literal,
 * rather than per frame.
 * @p in_backtrace is false when the writer truncated the previous backtrace (the prefix is
 * longer than it): the suffix is decoded only to keep the cache in step and the event carries
 * the previous backtrace, so @p code is in no delivered backtrace yet, though later hits on
 * the cache can bring it into one without another literal. An event that fails after some of
 * its literals were reported is not delivered (the reader stops there with an error).
 * Must not call the reader.
 */
typedef void (*cts_mt_literal_cb)(void *user_data, uint64_t code, bool in_backtrace);

/**
 * Installs @p cb (NULL: none, the default) with @p user_data as the reader's literal hook,
 * for the packets decoded from now on. Nothing is reported while backtraces are skipped
 * (decode_backtraces false).
 */
CTS_API void cts_mt_reader_set_literal_hook(cts_mt_reader_t *reader, cts_mt_literal_cb cb,
                                            void *user_data);

/** What the reader counted instead of delivering (cts_mt_reader_count_frees()). */
typedef struct cts_mt_free_counts {
  uint64_t promote, collect; /**< events counted */
  /** Time and byte offset of the first and of the last of them, in file order (set when
   * promote + collect > 0). */
  uint64_t first_time_us, first_offset, last_time_us, last_offset;
} cts_mt_free_counts_t;

/**
 * With @p count true, promotions and collections of the packets decoded from then on are
 * decoded and checked as before but counted instead of delivered to on_event: a consumer
 * that only counts them is spared a call per event (half the events of a typical trace).
 * False (the default) delivers them again. cts_mt_reader_free_counts() reads the counts,
 * which cover every such event decoded before an error too.
 */
CTS_API void cts_mt_reader_count_frees(cts_mt_reader_t *reader, bool count);
/** The counts so far (all zero when nothing was counted). */
CTS_API void cts_mt_reader_free_counts(const cts_mt_reader_t *reader, cts_mt_free_counts_t *out);

/** What the reader counted of the allocations it did not deliver (cts_mt_reader_count_allocs()).
 * Sums wrap modulo 2^64, as a consumer's own sums of the same fields would. */
typedef struct cts_mt_alloc_counts {
  uint64_t allocs[3];  /**< allocations counted, by source (cts_mt_source_t) */
  uint64_t samples[3]; /**< their samples, by source */
  uint64_t sum_length_words, sum_length_x_nsamples, max_length_words;
  /** Those the writer's short form would take (§8.1): 1-16 words, minor heap, one sample and
   * fewer than 256 frames after the common prefix. */
  uint64_t short_form_eligible;
  uint64_t frames_total, frames_max; /**< sum and largest of their backtrace lengths */
  /** Time and byte offset of the first and of the last counted allocation, in file order
   * (set when any was counted). */
  uint64_t first_time_us, first_offset, last_time_us, last_offset;
} cts_mt_alloc_counts_t;

/**
 * With @p count true, and while promotions and collections are counted too
 * (cts_mt_reader_count_frees()) and backtraces decoded, the reader also counts the
 * allocations it decodes on its fast path (all but the last few of each packet) into
 * cts_mt_alloc_counts_t instead of delivering them, decoded and checked as before. It still
 * delivers to on_event every allocation whose backtrace has exactly one frame (where
 * ctfscope's drop-mode loss markers are, include/ctfscope/tracer.h), every one during whose
 * decoding the literal hook was called, and every one it does not count: a consumer treats
 * each delivered allocation as usual, and delivered plus counted are all of them. For a
 * consumer of whole-trace figures (`ctfscope info`) this spares a call and the event's
 * fields for nearly every event. False (the default) delivers every allocation again, from
 * the event after the one being delivered when called from on_event. Errors stop the
 * reader as before; the counts cover every allocation counted before one.
 */
CTS_API void cts_mt_reader_count_allocs(cts_mt_reader_t *reader, bool count);
/** The allocation counts so far (all zero when nothing was counted). */
CTS_API void cts_mt_reader_alloc_counts(const cts_mt_reader_t *reader, cts_mt_alloc_counts_t *out);

/** Bytes consumed so far (the offset of the next byte to be fed). */
CTS_API uint64_t cts_mt_reader_offset(const cts_mt_reader_t *reader);

/** The last error's code (0 if none). */
CTS_API int cts_mt_reader_error(const cts_mt_reader_t *reader);
/** Byte offset in the trace where the last error was found. */
CTS_API uint64_t cts_mt_reader_error_offset(const cts_mt_reader_t *reader);
/**
 * A one-line description of the last error with its offset and details, e.g.
 * "at offset 848: event header: unknown event code 77". Borrowed; "" if none.
 */
CTS_API const char *cts_mt_reader_error_message(const cts_mt_reader_t *reader);

/* ------------------------------------------------------------------------------------- */
/* Writer                                                                                 */
/* ------------------------------------------------------------------------------------- */

/**
 * Resolves a location code to its source locations, called by the writer when it first
 * needs to send the code (at a flush, never in the middle of an event). Fill at most
 * @p max entries of @p out (outermost inlined frame first) and return the real count
 * (0 = no debug info; more than CTS_MT_MAX_LOCATIONS makes the writer send memtrace's
 * "<unknown>" sentinel). Strings must stay valid until the callback is called again or
 * the writer call returns.
 */
typedef size_t (*cts_mt_resolve_cb)(void *user_data, uint64_t code, cts_mt_location_t *out,
                                    size_t max);

/** Backtrace encodings of the writer. */
typedef enum cts_mt_encoding {
  /**
   * Memtrace's own bucket choices (default): re-writing a memtrace trace reproduces its
   * bytes exactly.
   */
  CTS_MT_ENCODING_MEMTRACE = 0,
  /**
   * Smaller traces when the same backtraces recur: a backtrace seen a few times gets its
   * own chain of cache buckets, so that later allocations from it cost one codeword
   * instead of one per place where it parts from other backtraces, and a location is sent
   * once rather than each time its code re-enters the cache. Falls back to memtrace's
   * choices where they are cheaper (deep recursion, backtraces seen once).
   */
  CTS_MT_ENCODING_COMPACT = 1,
} cts_mt_encoding_t;

/** Writer options. Initialise with cts_mt_writer_config_init(); new fields go at the end. */
typedef struct cts_mt_writer_config {
  uint32_t struct_size;
  /** Format version to write: 2 (default; read by every memtrace release) or 3. */
  uint16_t version;
  /** v3 only: the domain written in every packet header. */
  uint16_t domain;
  /** λ, sampling probability per word (default 1e-6, memtrace's default). */
  double sample_rate;
  /** Word size in bits (default 64). */
  uint8_t word_size;
  const char *executable_name; /**< NULL = "" */
  const char *host_name;       /**< NULL = "" */
  const char *runtime_params;  /**< NULL = "" */
  const char *context;         /**< NULL = "" (no context) */
  uint64_t pid;
  /** Trace start time, µs since the epoch; CTS_TIME_NOW (default) reads the clock. */
  uint64_t start_time_us;
  /**
   * How much of the previous backtrace the writer remembers to find common prefixes
   * (default 4096 frames; memory: 10 bytes a frame). Longer backtraces are still written
   * whole; they only compress less.
   */
  uint32_t max_backtrace_frames;
  cts_write_cb write; /**< required: receives each finished packet in one call */
  void *write_user_data;
  cts_clock_us_cb clock; /**< required if any time argument is CTS_TIME_NOW */
  void *clock_user_data;
  /** NULL: every code is sent with no locations (`ctfscope symbolize` names them later). */
  cts_mt_resolve_cb resolve;
  void *resolve_user_data;
  /**
   * How backtraces are encoded. Every memtrace reader decodes both the same way; only the
   * writer's choice of cache buckets differs (docs/formats/memtrace.md §8.5).
   */
  cts_mt_encoding_t encoding;
} cts_mt_writer_config_t;

typedef struct cts_mt_writer cts_mt_writer_t;

/** Minimum writer memory, excluding the remembered backtrace. */
#define CTS_MT_WRITER_MIN_SIZE (448u * 1024u)

/** Fills @p cfg with defaults. */
CTS_API void cts_mt_writer_config_init(cts_mt_writer_config_t *cfg);

/** Bytes of memory cts_mt_writer_init() needs for @p cfg (about 430 KiB + 10 × frames). */
CTS_API size_t cts_mt_writer_size(const cts_mt_writer_config_t *cfg);

/**
 * Initialises a writer in caller-provided memory (@p mem, at least cts_mt_writer_size()
 * bytes, 8-byte aligned; it must outlive the writer) and writes the trace-info packet.
 * Returns 0, CTS_E_INVAL (bad config or memory), or the write callback's error.
 * No allocation happens in this or any other writer call.
 */
CTS_API int cts_mt_writer_init(cts_mt_writer_t **out, void *mem, size_t mem_size,
                               const cts_mt_writer_config_t *cfg);

/**
 * Records an allocation of @p length words with @p nsamples samples and backtrace
 * @p backtrace[0..depth) (outermost frame first; codes must be non-zero and below 2^62,
 * and mean the same location for the whole trace). Sets *@p obj_id to the new object's
 * id. Times must not go backwards; an earlier time is clamped to the last one.
 * Returns 0, CTS_E_INVAL, or the write callback's error (the writer is then closed).
 */
CTS_API int cts_mt_writer_alloc(cts_mt_writer_t *w, uint64_t time_us, uint64_t length,
                                uint64_t nsamples, cts_mt_source_t source,
                                const uint64_t *backtrace, size_t depth, uint64_t *obj_id);

/** Records that object @p obj_id moved to the major heap (OCaml only; C never needs it). */
CTS_API int cts_mt_writer_promote(cts_mt_writer_t *w, uint64_t time_us, uint64_t obj_id);

/** Records that object @p obj_id was freed. */
CTS_API int cts_mt_writer_collect(cts_mt_writer_t *w, uint64_t time_us, uint64_t obj_id);

/** Writes what is buffered (locations, then the event packet) and starts a new packet. */
CTS_API int cts_mt_writer_flush(cts_mt_writer_t *w);

/** Flushes and closes; later calls return CTS_E_CLOSED. The memory stays the caller's. */
CTS_API int cts_mt_writer_close(cts_mt_writer_t *w);

/**
 * Closes like cts_mt_writer_close(), with the last packet's end time at least @p end_us
 * (µs since the epoch): the trace then records when the traced program ended, even long
 * after its last event. The packet stays one that memtrace's readers accept (its events
 * lie between its begin and end times; it may have none).
 */
CTS_API int cts_mt_writer_close_at(cts_mt_writer_t *w, uint64_t end_us);

/** Next object id the writer will assign. */
CTS_API uint64_t cts_mt_writer_next_id(const cts_mt_writer_t *w);

/** Bytes handed to the write callback so far. */
CTS_API uint64_t cts_mt_writer_bytes_written(const cts_mt_writer_t *w);

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_MEMTRACE_H */
