/* SPDX-License-Identifier: MIT */
/* Open-addressing map from u64 keys to u64 values: location codes, object ids. Memory
 * grows with distinct keys only.
 *
 * Linear probing over key/value pairs (one cache line holds both), at most half full: the
 * live-block maps of the analysis commands are large and probed once per event, so a probe
 * sequence must stay short and touch one line. */
#ifndef CTS_U64MAP_H
#define CTS_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cts_u64map_entry {
  uint64_t key; /* 0 = empty */
  uint64_t val;
} cts_u64map_entry_t;

typedef struct cts_u64map {
  cts_u64map_entry_t *slots;
  size_t cap, count;
  bool has_zero; /* key 0 is kept aside */
  uint64_t zero_val;
} cts_u64map_t;

void cts_u64map_init(cts_u64map_t *m);
void cts_u64map_fini(cts_u64map_t *m);
/* A key for a string of n bytes: FNV-1a, never 0. Different strings may share a key, so a
 * hit still needs the strings compared. */
static inline uint64_t cts_u64map_str_key_n(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h ? h : 1;
}

/* The same for a NUL-terminated string. */
static inline uint64_t cts_u64map_str_key(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h ? h : 1;
}

/* Key k's home slot in a table of cap slots. Not common/hash.h's cts_mix64 (whose first
 * half this is), on purpose: cts_u64map_next() walks the slots in this hash's order, and
 * report_mem.c finishes the blocks still live at the end in that order: whether it
 * coarsens its records when over their budget depends on it, so another hash could change
 * a report. */
static inline size_t cts_u64map_slot_of(uint64_t k, size_t cap) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)k & (cap - 1);
}

/* cts_u64map_find, inline: for a small map asked once an event (sites.h's sites by code). */
static inline const uint64_t *cts_u64map_get(const cts_u64map_t *m, uint64_t key) {
  if (key == 0) return m->has_zero ? &m->zero_val : NULL;
  if (!m->cap) return NULL;
  for (size_t i = cts_u64map_slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    const cts_u64map_entry_t *e = &m->slots[i];
    if (e->key == key) return &e->val;
    if (e->key == 0) return NULL;
  }
}

/* Returns a pointer to the value of key, or NULL. */
uint64_t *cts_u64map_find(const cts_u64map_t *m, uint64_t key);
/* Inserts key with val if absent; returns the value slot and sets *added. NULL = no memory. */
uint64_t *cts_u64map_insert(cts_u64map_t *m, uint64_t key, uint64_t val, bool *added);
bool cts_u64map_remove(cts_u64map_t *m, uint64_t key);
/* Removes key and sets *val to its value: one probe where find + remove take two. */
bool cts_u64map_take(cts_u64map_t *m, uint64_t key, uint64_t *val);
/* Iterates over every entry, key 0 included, in no particular order: start with *pos = 0;
 * returns false after the last. The map must not change meanwhile. */
bool cts_u64map_next(const cts_u64map_t *m, size_t *pos, uint64_t *key, uint64_t *val);

/* A map from object ids to u64 values, for the table of live blocks. Object ids come in
 * allocation order and most blocks die young, so the recent ids live in a ring indexed by
 * the id itself (sequential, cache-friendly, one probe), and a block that outlives the
 * ring's window moves to a cts_u64map. Any ids work (corrupt traces, v3 id chunks): the
 * ring only decides where an id is kept, never whether it is found. Memory: the ring
 * (CTS_IDMAP_RING entries, 1 MiB) plus the survivors. */
#define CTS_IDMAP_RING (1u << 16)

typedef struct cts_idmap {
  cts_u64map_entry_t *ring; /* key = id + 1, 0 = empty */
  cts_u64map_t old;         /* survivors, and id UINT64_MAX */
  uint64_t old_max;         /* every id in old is <= old_max */
  size_t count;
} cts_idmap_t;

/* Returns 0 or -ENOMEM. */
int cts_idmap_init(cts_idmap_t *m);
void cts_idmap_fini(cts_idmap_t *m);
uint64_t *cts_idmap_find(cts_idmap_t *m, uint64_t id);
/* As cts_u64map_insert. */
uint64_t *cts_idmap_insert(cts_idmap_t *m, uint64_t id, uint64_t val, bool *added);
/* As cts_u64map_take. */
bool cts_idmap_take(cts_idmap_t *m, uint64_t id, uint64_t *val);

#endif /* CTS_U64MAP_H */
