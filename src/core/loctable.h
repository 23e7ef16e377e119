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

#include "../common/endian.h"
#include "../common/hash.h"

typedef struct cts__arena_chunk cts__arena_chunk_t;

typedef struct cts__loc_entry {
  uint64_t code; /* 0 = empty slot (code 0 is never a valid location code, §7.3) */
  const cts_mt_location_t *locs;
  uint32_t n;
} cts__loc_entry_t;

typedef struct cts__intern_entry {
  uint64_t hash;
  const char *str; /* NULL = empty slot */
  size_t len;
} cts__intern_entry_t;

typedef struct cts__loctable {
  cts_allocator_t allocator;
  uint64_t used, limit;
  cts__arena_chunk_t *chunks;
  uint8_t *cur, *end;
  cts__intern_entry_t *strings;
  size_t strings_cap, strings_count;
  cts__loc_entry_t *entries;
  size_t entries_cap, entries_count;
} cts__loctable_t;

void cts__loctable_init(cts__loctable_t *t, cts_allocator_t allocator, uint64_t limit);
void cts__loctable_fini(cts__loctable_t *t);

/* Returns the interned copy of s[0..len) (NUL-terminated), or NULL with *err set. */
const char *cts__loctable_intern(cts__loctable_t *t, const char *s, size_t len, int *err);

/* Looks a code up; NULL if undefined. */
const cts__loc_entry_t *cts__loctable_find(const cts__loctable_t *t, uint64_t code);

/* Defines code with a copy of locs[0..n) (strings must already be interned). Returns 0,
 * CTS_E_LOCATION_CONFLICT if it was defined differently, or an allocation error. *entry
 * receives the stored definition. */
int cts__loctable_define(cts__loctable_t *t, uint64_t code, const cts_mt_location_t *locs,
                         uint32_t n, const cts__loc_entry_t **entry);

/* A 64-bit hash of s[0..len), folding 8 bytes at a time through cts_hash_combine (the one
 * mixer, common/hash.h); different seeds give independent hashes. Pure: any thread. */
static inline uint64_t cts__hash_bytes(const char *s, size_t len, uint64_t seed) {
  const uint8_t *p = (const uint8_t *)s;
  uint64_t h = cts_hash_combine(seed, len);
  for (; len >= 8; p += 8, len -= 8) h = cts_hash_combine(h, cts_ld_le64(p));
  if (!len) return h;
  uint64_t tail = 0;
  for (size_t i = 0; i < len; i++) tail |= (uint64_t)p[i] << (8 * i);
  return cts_hash_combine(h, tail);
}

#endif /* CTS_LOCTABLE_H */
