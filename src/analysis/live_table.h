/* SPDX-License-Identifier: MIT */
/* The table of live blocks: object id -> a fixed-size record, for traces where most blocks
 * may never be collected.
 *
 * A sound trace numbers its blocks 0, 1, 2, ... in allocation order, so the ids live at one
 * time are the recent ones (blocks that die young) plus the survivors, often most of them
 * (rate-1 traces of programs that keep their data). The ids are cut into chunks of
 * CTS_LIVE_CHUNK consecutive ids:
 *  - the chunk of the highest id inserted and the CTS_LIVE_WINDOW - 1 chunks below it are
 *    dense: records indexed by id - chunk base, a presence bitmap, no key stored;
 *  - an older chunk stays dense while at least 7/8 of its ids are live, and otherwise
 *    becomes sparse: its live ids' offsets, sorted, and their records side by side (a
 *    removal leaves a tombstone; tombstones are swept once they are 1/8 of the chunk);
 *  - a chunk with no live id is freed.
 * So a live record costs at most rec_size * 8/7 + a few bytes, whatever the trace's length,
 * plus the window (CTS_LIVE_WINDOW dense chunks) and a header per chunk.
 *
 * Any ids work (corrupt or hostile traces): ids below the newest chunk go to sparse chunks
 * (inserting there is O(chunk) but memory stays proportional to the live ids), huge gaps
 * cost one chunk header per live id at worst, and an id inserted twice is reported
 * (*added = false) rather than stored twice. Records are rec_size bytes, 8-aligned, zeroed
 * when added; a pointer to one stays valid until the next insert or take.
 *
 * Not thread-safe: one table per analysis pass. */
#ifndef CTS_LIVE_TABLE_H
#define CTS_LIVE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "u64map.h"

#define CTS_LIVE_CHUNK_BITS 12u
#define CTS_LIVE_CHUNK      (1u << CTS_LIVE_CHUNK_BITS)
#define CTS_LIVE_WINDOW     4u /* dense chunks kept whatever their density */

typedef struct cts_live_chunk cts_live_chunk_t;

typedef struct cts_live_table {
  size_t rec_size;
  cts_u64map_t chunks;                       /* chunk number -> cts_live_chunk_t * */
  cts_live_chunk_t *window[CTS_LIVE_WINDOW]; /* the dense recent chunks, by number % W */
  cts_live_chunk_t *head;                    /* chunk of the highest id inserted */
  cts_live_chunk_t *last;                    /* the chunk last looked up (a cache) */
  uint64_t count;                            /* live ids */
  size_t bytes;                              /* memory held by chunks, headers included */
  uint64_t sparse_chunks, dense_chunks;
} cts_live_table_t;

/* rec_size: a multiple of 8 in [8, 256]. Returns 0 or -EINVAL. Allocates nothing. */
int cts_live_init(cts_live_table_t *t, size_t rec_size);
void cts_live_fini(cts_live_table_t *t);
/* The record of id, or NULL. */
void *cts_live_find(cts_live_table_t *t, uint64_t id);
/* The record of id, added (zeroed, *added = true) if absent; NULL = no memory. */
void *cts_live_insert(cts_live_table_t *t, uint64_t id, bool *added);
/* Removes id, copying its record to out (rec_size bytes); false if absent. */
bool cts_live_take(cts_live_table_t *t, uint64_t id, void *out);

/* Iteration over every live id, in no particular order; the table must not change
 * meanwhile. Start with a zeroed cursor. */
typedef struct cts_live_cursor {
  size_t map_pos;
  cts_live_chunk_t *chunk;
  uint32_t i;
} cts_live_cursor_t;
bool cts_live_next(const cts_live_table_t *t, cts_live_cursor_t *c, uint64_t *id, void **rec);

#endif /* CTS_LIVE_TABLE_H */
