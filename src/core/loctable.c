/* SPDX-License-Identifier: MIT */
#include "loctable.h"

#include <string.h>

#define CHUNK_SIZE (64u * 1024u)

struct cts__arena_chunk {
  cts__arena_chunk_t *next;
  size_t size; /* whole allocation, header included */
};

static void *raw_alloc(cts__loctable_t *t, size_t size, int *err) {
  if (t->used + size > t->limit) {
    *err = CTS_E_LIMIT;
    return NULL;
  }
  void *p = t->allocator.alloc(t->allocator.user_data, size);
  if (!p) {
    *err = CTS_E_NOMEM;
    return NULL;
  }
  t->used += size;
  return p;
}

static void raw_free(cts__loctable_t *t, void *p, size_t size) {
  if (!p) return;
  t->allocator.free(t->allocator.user_data, p, size);
  t->used -= size;
}

static void *arena_alloc(cts__loctable_t *t, size_t size, int *err) {
  size = (size + 7u) & ~(size_t)7u;
  if ((size_t)(t->end - t->cur) < size) {
    const size_t header = (sizeof(cts__arena_chunk_t) + 7u) & ~(size_t)7u;
    const size_t want = size + header > CHUNK_SIZE ? size + header : CHUNK_SIZE;
    cts__arena_chunk_t *c = raw_alloc(t, want, err);
    if (!c) return NULL;
    c->size = want;
    c->next = t->chunks;
    t->chunks = c;
    t->cur = (uint8_t *)c + header;
    t->end = (uint8_t *)c + want;
  }
  void *p = t->cur;
  t->cur += size;
  return p;
}

void cts__loctable_init(cts__loctable_t *t, cts_allocator_t allocator, uint64_t limit) {
  memset(t, 0, sizeof *t);
  t->allocator = allocator;
  t->limit = limit;
}

void cts__loctable_fini(cts__loctable_t *t) {
  for (cts__arena_chunk_t *c = t->chunks; c;) {
    cts__arena_chunk_t *next = c->next;
    raw_free(t, c, c->size);
    c = next;
  }
  raw_free(t, t->strings, t->strings_cap * sizeof *t->strings);
  raw_free(t, t->entries, t->entries_cap * sizeof *t->entries);
  memset(t, 0, sizeof *t);
}

static int grow_strings(cts__loctable_t *t) {
  const size_t cap = t->strings_cap ? t->strings_cap * 2 : 256;
  int err = 0;
  cts__intern_entry_t *n = raw_alloc(t, cap * sizeof *n, &err);
  if (!n) return err;
  memset(n, 0, cap * sizeof *n);
  for (size_t i = 0; i < t->strings_cap; i++) {
    const cts__intern_entry_t *e = &t->strings[i];
    if (!e->str) continue;
    size_t j = e->hash & (cap - 1);
    while (n[j].str) j = (j + 1) & (cap - 1);
    n[j] = *e;
  }
  raw_free(t, t->strings, t->strings_cap * sizeof *t->strings);
  t->strings = n;
  t->strings_cap = cap;
  return 0;
}

const char *cts__loctable_intern(cts__loctable_t *t, const char *s, size_t len, int *err) {
  if ((t->strings_count + 1) * 4 > t->strings_cap * 3) {
    const int e = grow_strings(t);
    if (e) {
      *err = e;
      return NULL;
    }
  }
  const uint64_t h = cts__hash_bytes(s, len, 0);
  size_t j = h & (t->strings_cap - 1);
  for (; t->strings[j].str; j = (j + 1) & (t->strings_cap - 1)) {
    const cts__intern_entry_t *e = &t->strings[j];
    if (e->hash == h && e->len == len && memcmp(e->str, s, len) == 0) return e->str;
  }
  char *copy = arena_alloc(t, len + 1, err);
  if (!copy) return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  t->strings[j] = (cts__intern_entry_t){h, copy, len};
  t->strings_count++;
  return copy;
}

const cts__loc_entry_t *cts__loctable_find(const cts__loctable_t *t, uint64_t code) {
  if (!t->entries_cap || code == 0) return NULL;
  for (size_t j = cts_mix64(code) & (t->entries_cap - 1);; j = (j + 1) & (t->entries_cap - 1)) {
    const cts__loc_entry_t *e = &t->entries[j];
    if (e->code == code) return e;
    if (e->code == 0) return NULL;
  }
}

static int grow_entries(cts__loctable_t *t) {
  const size_t cap = t->entries_cap ? t->entries_cap * 2 : 1024;
  int err = 0;
  cts__loc_entry_t *n = raw_alloc(t, cap * sizeof *n, &err);
  if (!n) return err;
  memset(n, 0, cap * sizeof *n);
  for (size_t i = 0; i < t->entries_cap; i++) {
    const cts__loc_entry_t *e = &t->entries[i];
    if (!e->code) continue;
    size_t j = cts_mix64(e->code) & (cap - 1);
    while (n[j].code) j = (j + 1) & (cap - 1);
    n[j] = *e;
  }
  raw_free(t, t->entries, t->entries_cap * sizeof *t->entries);
  t->entries = n;
  t->entries_cap = cap;
  return 0;
}

static bool same_locations(const cts_mt_location_t *a, const cts_mt_location_t *b, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    /* Interned strings compare by pointer. */
    if (a[i].line != b[i].line || a[i].start_char != b[i].start_char ||
        a[i].end_char != b[i].end_char || a[i].filename != b[i].filename ||
        a[i].defname != b[i].defname)
      return false;
  }
  return true;
}

int cts__loctable_define(cts__loctable_t *t, uint64_t code, const cts_mt_location_t *locs,
                         uint32_t n, const cts__loc_entry_t **entry) {
  const cts__loc_entry_t *old = cts__loctable_find(t, code);
  if (old) {
    *entry = old;
    return old->n == n && same_locations(old->locs, locs, n) ? 0 : CTS_E_LOCATION_CONFLICT;
  }
  if ((t->entries_count + 1) * 4 > t->entries_cap * 3) {
    const int e = grow_entries(t);
    if (e) return e;
  }
  int err = 0;
  cts_mt_location_t *copy = NULL;
  if (n) {
    copy = arena_alloc(t, n * sizeof *copy, &err);
    if (!copy) return err;
    memcpy(copy, locs, n * sizeof *copy);
  }
  size_t j = cts_mix64(code) & (t->entries_cap - 1);
  while (t->entries[j].code) j = (j + 1) & (t->entries_cap - 1);
  t->entries[j] = (cts__loc_entry_t){code, copy, n};
  t->entries_count++;
  *entry = &t->entries[j];
  return 0;
}
