/* SPDX-License-Identifier: MIT */
/**
 * @file mprof.h
 * Reader for mirage-profile CTF traces (docs/formats/mprof.md): rings saved by
 * mirage-profile (Unix mmap'd files, Xen buffer dumps), and the rings and packet streams
 * that ctfscope's task tracer writes (tasks.h). Freestanding: memory comes from an
 * injected allocator, bytes from an injected read_at function.
 *
 * Reading follows §4: the packet headers are checked and collected first, the packets are
 * then put in sequence order (the oldest is the first one "behind" its predecessor) and
 * each is decoded up to its content_size. A malformed event ends its packet with a warning
 * (a crash or a live writer can leave half an event), and reading goes on with the next
 * packet. Memory: 32 bytes per packet plus one packet's content (bounded by the config).
 *
 * @code
 *   cts_mprof_memory_t src = {data, size};
 *   cts_mprof_reader_config_t cfg;
 *   cts_mprof_reader_config_init(&cfg);
 *   cfg.allocator = my_allocator;
 *   cts_mprof_handler_t h = {.user_data = &counts, .on_event = count_event};
 *   char msg[256];
 *   int err = cts_mprof_read(&cfg, cts_mprof_memory_read_at, &src, size, &h, NULL, msg,
 *                            sizeof msg);
 *   if (err) fprintf(stderr, "%s\n", msg);       // e.g. "offset 250880: bad packet magic…"
 * @endcode
 */
#ifndef CTFSCOPE_MPROF_H
#define CTFSCOPE_MPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "errors.h"
#include "tasks.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Reads exactly @p len bytes at @p offset into @p buf. Returns 0 or a negative error, which
 * the reader returns unchanged. The reader never asks beyond the size it was given.
 */
typedef int (*cts_mprof_read_at_cb)(void *user_data, uint64_t offset, void *buf, size_t len);

/** An in-memory input for cts_mprof_memory_read_at(). */
typedef struct cts_mprof_memory {
  const void *data;
  size_t size;
} cts_mprof_memory_t;

/** cts_mprof_read_at_cb over a cts_mprof_memory_t (user_data). */
CTS_API int cts_mprof_memory_read_at(void *user_data, uint64_t offset, void *buf, size_t len);

/** A packet, as reported before its events. */
typedef struct cts_mprof_packet {
  uint64_t offset;       /**< byte offset in the input */
  uint32_t size;         /**< bytes (packet_size / 8) */
  uint32_t content_size; /**< bytes in use, header included (content_size / 8) */
  uint16_t count;        /**< stream_packet_count */
  uint32_t file_index;   /**< position in the input, from 0 */
  bool truncated;        /**< the input ends inside this packet */
} cts_mprof_packet_t;

/**
 * What the reader calls. Every member may be NULL. A callback returning non-zero stops
 * reading: cts_mprof_read() returns that value. If cts_mprof_read() fails before decoding
 * (bad arguments, a corrupt packet header), no event callback is called.
 */
typedef struct cts_mprof_handler {
  void *user_data;
  /** Before the events of each packet, in reading order. */
  int (*on_packet)(void *user_data, const cts_mprof_packet_t *packet);
  /** Each event; everything in @p ev is borrowed for the call only. */
  int (*on_event)(void *user_data, const cts_mprof_event_t *ev);
  /** Something was skipped and reading goes on (malformed tail, trailing bytes…). */
  void (*on_warning)(void *user_data, int code, uint64_t offset, const char *message);
} cts_mprof_handler_t;

/** Reader options. Initialise with cts_mprof_reader_config_init(); new fields go at the end. */
typedef struct cts_mprof_reader_config {
  uint32_t struct_size;
  cts_allocator_t allocator; /**< required */
  /** Most packets accepted (default 1 Mi; 32 bytes of memory each). */
  uint32_t max_packets;
  /** Largest packet accepted, in bytes (default 256 MiB): the one buffer the reader uses. */
  uint32_t max_packet_size;
  /** Decode packets in file order instead of sequence order (streams are in file order;
   *  more than 32768 packets are read in file order anyway, as counts wrap at 2^16). */
  bool file_order;
} cts_mprof_reader_config_t;

/** What a read found. */
typedef struct cts_mprof_summary {
  uint64_t packets;  /**< packets in the input */
  uint64_t events;   /**< events decoded */
  uint64_t warnings; /**< warnings reported */
  uint64_t events_by_id[CTS_MPROF_EVENT_IDS];
  uint32_t first_index;                 /**< file index of the packet read first (the oldest) */
  bool wrapped;                         /**< the oldest packet is not the first in the file */
  bool sequence_order;                  /**< packets were put in sequence order */
  uint64_t first_time_ns, last_time_ns; /**< of the first and last event decoded */
} cts_mprof_summary_t;

CTS_API void cts_mprof_reader_config_init(cts_mprof_reader_config_t *cfg);

/**
 * Reads a whole trace of @p size bytes through @p read_at. Returns 0, a read_at error, a
 * callback's value, or a CTS_E_* code for a corrupt input: CTS_E_BAD_MAGIC (magic or uuid),
 * CTS_E_PACKET_SIZE (packet_size or content_size impossible), CTS_E_PACKET_TOO_LARGE,
 * CTS_E_LIMIT (too many packets), CTS_E_EMPTY (no packet), CTS_E_NOMEM, CTS_E_INVAL. Then
 * @p errbuf (if not NULL) holds a message naming the byte offset. @p summary may be NULL.
 */
CTS_API int cts_mprof_read(const cts_mprof_reader_config_t *cfg, cts_mprof_read_at_cb read_at,
                           void *read_user_data, uint64_t size, const cts_mprof_handler_t *h,
                           cts_mprof_summary_t *summary, char *errbuf, size_t errlen);

/** Whether @p data (at least 20 bytes) starts like a mirage-profile CTF packet: magic
 *  c1 1f fc c1 followed by the mirage-profile uuid. (memtrace packets share the magic.) */
CTS_API bool cts_mprof_is_trace(const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_MPROF_H */
