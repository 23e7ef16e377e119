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
 *    removal leaves a tombstone; tombstones are swept once they are 1/5 of the chunk, except
 *    in the drain, below);
 *    a sparse chunk of CTS_LIVE_INDEX_MIN entries or more also has an index (a bitmap of
 *    its offsets and a count per bitmap word, 640 bytes) that finds an entry in O(1);
 *  - a chunk with no live id is freed;
 *  - one sparse chunk past its 1/5, the drain (the last to pass it), keeps its tombstones
 *    until another passes it: a chunk emptied at one go is freed without a sweep (a rate-1
 *    trace's teardown empties its chunks one after another; each sweep moved ~4 records a
 *    removal), and what waits is one chunk's entries at most.
 * So a live record costs at most rec_size * 8/7 in a dense chunk, (rec_size + 2) * 5/4 in a
 * sparse one, whatever the trace's length, plus the window (CTS_LIVE_WINDOW dense chunks),
 * the drain's tombstones and a header per chunk.
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
#include <string.h>

#include "common/compiler.h"
#include "u64map.h"

#define CTS_LIVE_CHUNK_BITS 12u
#define CTS_LIVE_CHUNK      (1u << CTS_LIVE_CHUNK_BITS)
#define CTS_LIVE_WINDOW     4u   /* dense chunks kept whatever their density */
#define CTS_LIVE_INDEX_MIN  256u /* sparse entries from which a chunk has an index */

/* A chunk (live_table.c manages it; in this header only for the inline fast paths below). */
typedef struct cts_live_chunk {
  uint64_t number; /* id >> CTS_LIVE_CHUNK_BITS */
  uint32_t live;
  uint32_t n, cap; /* sparse: entries (live and dead) and their capacity */
  bool dense;
  bool arena;        /* sparse: recs is a block of the table's arena (live_table.c) */
  uint64_t *present; /* dense: which offsets are live */
  uint16_t *offs;    /* sparse: offsets in increasing order, DEAD when removed */
  unsigned char *recs;
  /* sparse with many entries: which offsets have an entry (dead or not), a bitmap, then
   * per bitmap word how many entries lie below it (uint16_t): an entry's index is found
   * with a popcount instead of a binary search (live_table.c, "the index"). */
  uint64_t *index;
} cts_live_chunk_t;

typedef struct cts_live_table {
  size_t rec_size;
  cts_u64map_t chunks;                       /* chunk number -> cts_live_chunk_t * */
  cts_live_chunk_t *window[CTS_LIVE_WINDOW]; /* the dense recent chunks, by number % W */
  cts_live_chunk_t *head;                    /* chunk of the highest id inserted */
  cts_live_chunk_t *last;                    /* the chunk last looked up (a cache) */
  cts_live_chunk_t *drain; /* the sparse chunk whose tombstones wait (see above), or NULL */
  uint64_t sweeps;         /* sparse chunks swept so far (tests: what the drain spares) */
  uint64_t count;          /* live ids */
  size_t bytes;            /* memory held by chunks, headers included */
  uint64_t sparse_chunks, dense_chunks;
  /* A dense chunk's records, kept from a chunk thinned or freed for the next dense chunk
   * (live_table.c, new_chunk); counted in bytes. NULL if none. */
  unsigned char *spare_recs;
  /* The arena of the records of chunks thinned to sparse: 2 MiB slabs on huge pages where
   * the kernel gives them (live_table.c, "the arena"). bytes counts the blocks handed out
   * as it would the same arrays from malloc; arena_bytes is the slabs mapped and
   * arena_live the blocks in use: the first slab is mapped once the table holds 4 MiB, a
   * later one only while arena_bytes is at most 5/4 of arena_live, and a slab is unmapped
   * when its last block is freed. */
  struct cts_live_slab *slabs; /* every slab, the one blocks are cut from first */
  size_t arena_bytes, arena_live;
} cts_live_table_t;

/* rec_size: a multiple of 8 in [8, 256]. Returns 0 or -EINVAL. Allocates nothing. */
int cts_live_init(cts_live_table_t *t, size_t rec_size);
void cts_live_fini(cts_live_table_t *t);
/* The record of id, or NULL. */
static inline void *cts_live_find(cts_live_table_t *t, uint64_t id);
/* The record of id, added (zeroed, *added = true) if absent; NULL = no memory. */
static inline void *cts_live_insert(cts_live_table_t *t, uint64_t id, bool *added);
static inline void *cts_live_insert_unset(cts_live_table_t *t, uint64_t id, bool *added);
/* Removes id, copying its record to out (rec_size bytes); false if absent. */
static inline bool cts_live_take(cts_live_table_t *t, uint64_t id, void *out);

/* The general paths (any chunk, any state); the inline functions below handle a dense
 * chunk of the window themselves: on a rate-1 trace nearly every allocation goes to the
 * head chunk and most promotions and collections to a recent one, so these calls, the
 * chunk look-up and libc's memset/memcpy of a size unknown at compile time are skipped. */
void *cts_live_find_slow(cts_live_table_t *t, uint64_t id);
void *cts_live_insert_slow(cts_live_table_t *t, uint64_t id, bool *added);
bool cts_live_take_slow(cts_live_table_t *t, uint64_t id, void *out);

/* The dense chunk of the window that holds id's chunk number, or NULL. */
static inline cts_live_chunk_t *cts_live_window_chunk(const cts_live_table_t *t, uint64_t id) {
  const uint64_t number = id >> CTS_LIVE_CHUNK_BITS;
  cts_live_chunk_t *c = t->window[number % CTS_LIVE_WINDOW];
  return c && c->number == number && c->dense ? c : NULL;
}

/* Records of the usual sizes are cleared with fixed-size stores the compiler inlines (a
 * loop over a size known only at run time costs ~20 instructions a record, a libc call
 * more); other sizes call libc. (Copies out stay memcpy calls: with the size unknown at
 * the call site, gcc would warn about the other cases' bounds.) */
static inline void cts_live_rec_zero(void *dst, size_t size) {
  switch (size) {
    case 8:
      memset(dst, 0, 8);
      break;
    case 16:
      memset(dst, 0, 16);
      break;
    case 24:
      memset(dst, 0, 24);
      break;
    case 32:
      memset(dst, 0, 32);
      break;
    default:
      memset(dst, 0, size);
  }
}

static inline void *cts_live_find(cts_live_table_t *t, uint64_t id) {
  cts_live_chunk_t *c = cts_live_window_chunk(t, id);
  if (!c) return cts_live_find_slow(t, id);
  const uint32_t off = (uint32_t)id & (CTS_LIVE_CHUNK - 1u);
  return c->present[off / 64u] >> (off % 64u) & 1u ? c->recs + (size_t)off * t->rec_size : NULL;
}

/* cts_live_insert and cts_live_insert_unset: whether a record added is zeroed. */
static CTS_FORCE_INLINE void *cts__live_insert(cts_live_table_t *t, uint64_t id, bool *added,
                                               bool zero) {
  cts_live_chunk_t *c = t->head;
  if (!c || c->number != id >> CTS_LIVE_CHUNK_BITS || !c->dense)
    return cts_live_insert_slow(t, id, added);
  const uint32_t off = (uint32_t)id & (CTS_LIVE_CHUNK - 1u);
  uint64_t *w = &c->present[off / 64u];
  const uint64_t bit = 1ull << (off % 64u);
  unsigned char *rec = c->recs + (size_t)off * t->rec_size;
  *added = !(*w & bit);
  if (!*added) return rec;
  *w |= bit;
  if (zero) cts_live_rec_zero(rec, t->rec_size);
  c->live++;
  t->count++;
  return rec;
}

static inline void *cts_live_insert(cts_live_table_t *t, uint64_t id, bool *added) {
  return cts__live_insert(t, id, added, true);
}

/* cts_live_insert for a caller that writes every byte of a record it adds: the record is
 * zeroed or left as it was (the head chunk's, on most allocations), not cleared first. */
static inline void *cts_live_insert_unset(cts_live_table_t *t, uint64_t id, bool *added) {
  return cts__live_insert(t, id, added, false);
}

/* Removes id from its dense chunk c (copying its record, size bytes, t->rec_size, to out);
 * false if absent. The caller thins c if it must (live_table.c). Inline with a constant
 * size, the copy is a few moves, not a libc call. */
static CTS_FORCE_INLINE bool cts_live_take_dense_n(cts_live_table_t *t, cts_live_chunk_t *c,
                                                   uint64_t id, void *out, size_t size) {
  const uint32_t off = (uint32_t)id & (CTS_LIVE_CHUNK - 1u);
  uint64_t *w = &c->present[off / 64u];
  const uint64_t bit = 1ull << (off % 64u);
  if (!(*w & bit)) return false;
  memcpy(out, c->recs + (size_t)off * size, size);
  *w &= ~bit;
  c->live--;
  t->count--;
  return true;
}

static inline bool cts_live_take_dense(cts_live_table_t *t, cts_live_chunk_t *c, uint64_t id,
                                       void *out) {
  return cts_live_take_dense_n(t, c, id, out, t->rec_size);
}

static inline bool cts_live_take(cts_live_table_t *t, uint64_t id, void *out) {
  cts_live_chunk_t *c = cts_live_window_chunk(t, id);
  /* A chunk of the window stays dense whatever its density: nothing to thin here. */
  return c ? cts_live_take_dense(t, c, id, out) : cts_live_take_slow(t, id, out);
}

/* cts_live_take for a caller whose records are size bytes, a constant that must equal
 * t->rec_size: the copy of a record taken from the window (most collections) is inlined. */
static CTS_FORCE_INLINE bool cts_live_take_n(cts_live_table_t *t, uint64_t id, void *out,
                                             size_t size) {
  cts_live_chunk_t *c = cts_live_window_chunk(t, id);
  return c ? cts_live_take_dense_n(t, c, id, out, size) : cts_live_take_slow(t, id, out);
}

/* A sparse entry's offset flag: removed (a tombstone). */
#define CTS_LIVE_DEAD 0x8000u

/* Calls visit(ud, rec) for every live record, in no particular order; the table must not
 * change meanwhile. Inline with a constant visit, the call is inlined too: a pass over
 * every survivor costs a few instructions a record, where cts_live_next took ~40. */
static CTS_FORCE_INLINE void cts_live_each(const cts_live_table_t *t,
                                           void (*visit)(void *ud, void *rec), void *ud) {
  uint64_t key, val;
  for (size_t pos = 0; cts_u64map_next(&t->chunks, &pos, &key, &val);) {
    const cts_live_chunk_t *c = (const cts_live_chunk_t *)(uintptr_t)val;
    if (c->dense) {
      for (uint32_t w = 0; w < CTS_LIVE_CHUNK / 64u; w++)
        for (uint64_t bits = c->present[w]; bits; bits &= bits - 1)
          visit(ud, c->recs + (size_t)(w * 64u + (uint32_t)__builtin_ctzll(bits)) * t->rec_size);
    } else {
      for (uint32_t i = 0; i < c->n; i++)
        if (!(c->offs[i] & CTS_LIVE_DEAD)) visit(ud, c->recs + (size_t)i * t->rec_size);
    }
  }
}

/* Iteration over every live id, in no particular order; the table must not change
 * meanwhile. Start with a zeroed cursor. */
typedef struct cts_live_cursor {
  size_t map_pos;
  cts_live_chunk_t *chunk;
  uint32_t i;
} cts_live_cursor_t;
bool cts_live_next(const cts_live_table_t *t, cts_live_cursor_t *c, uint64_t *id, void **rec);

#endif /* CTS_LIVE_TABLE_H */
