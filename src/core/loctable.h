/* SPDX-License-Identifier: MIT */
/* The reader's memory for names and location definitions: an arena of chunks from the
 * injected allocator, a string intern table and a code → locations map, all bounded by
 * one byte limit so that a hostile trace cannot make the reader grow without end. */
#ifndef CTS_LOCTABLE_H
#define CTS_LOCTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

typedef struct mt_arena_chunk mt_arena_chunk_t;

typedef struct mt_loc_entry {
  uint64_t code; /* 0 = empty slot (code 0 is never a valid location code, §7.3) */
  const cts_mt_location_t *locs;
  uint32_t n;
} mt_loc_entry_t;

typedef struct mt_intern_entry {
  uint64_t hash;
  const char *str; /* NULL = empty slot */
  size_t len;
} mt_intern_entry_t;

typedef struct mt_loctable {
  cts_allocator_t allocator;
  uint64_t used, limit;
  mt_arena_chunk_t *chunks;
  uint8_t *cur, *end;
  mt_intern_entry_t *strings;
  size_t strings_cap, strings_count;
  mt_loc_entry_t *entries;
  size_t entries_cap, entries_count;
} mt_loctable_t;

void mt_loctable_init(mt_loctable_t *t, cts_allocator_t allocator, uint64_t limit);
void mt_loctable_fini(mt_loctable_t *t);

/* Returns the interned copy of s[0..len) (NUL-terminated), or NULL with *err set. */
const char *mt_loctable_intern(mt_loctable_t *t, const char *s, size_t len, int *err);

/* Looks a code up; NULL if undefined. */
const mt_loc_entry_t *mt_loctable_find(const mt_loctable_t *t, uint64_t code);

/* Defines code with a copy of locs[0..n) (strings must already be interned). Returns 0,
 * CTS_E_LOCATION_CONFLICT if it was defined differently, or an allocation error. *entry
 * receives the stored definition. */
int mt_loctable_define(mt_loctable_t *t, uint64_t code, const cts_mt_location_t *locs, uint32_t n,
                       const mt_loc_entry_t **entry);

#endif /* CTS_LOCTABLE_H */
