/* SPDX-License-Identifier: MIT */
#include "u64map.h"

#include <stdlib.h>

static inline size_t slot_of(uint64_t k, size_t cap) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)k & (cap - 1);
}

void cts_u64map_init(cts_u64map_t *m) {
  *m = (cts_u64map_t){0};
}

void cts_u64map_fini(cts_u64map_t *m) {
  free(m->keys);
  free(m->vals);
  *m = (cts_u64map_t){0};
}

uint64_t *cts_u64map_find(const cts_u64map_t *m, uint64_t key) {
  if (key == 0) return m->has_zero ? (uint64_t *)&m->zero_val : NULL;
  if (!m->cap) return NULL;
  for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) return &m->vals[i];
    if (m->keys[i] == 0) return NULL;
  }
}

static bool grow(cts_u64map_t *m) {
  const size_t cap = m->cap ? m->cap * 2 : 1024;
  uint64_t *keys = calloc(cap, sizeof *keys), *vals = malloc(cap * sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = slot_of(m->keys[i], cap);
    while (keys[j]) j = (j + 1) & (cap - 1);
    keys[j] = m->keys[i];
    vals[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  return true;
}

uint64_t *cts_u64map_insert(cts_u64map_t *m, uint64_t key, uint64_t val, bool *added) {
  if (key == 0) {
    *added = !m->has_zero;
    if (!m->has_zero) m->has_zero = true, m->zero_val = val;
    return &m->zero_val;
  }
  if ((m->count + 1) * 4 > m->cap * 3 && !grow(m)) return NULL;
  size_t i = slot_of(key, m->cap);
  for (; m->keys[i]; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) {
      *added = false;
      return &m->vals[i];
    }
  }
  m->keys[i] = key;
  m->vals[i] = val;
  m->count++;
  *added = true;
  return &m->vals[i];
}

bool cts_u64map_remove(cts_u64map_t *m, uint64_t key) {
  if (key == 0) {
    const bool had = m->has_zero;
    m->has_zero = false;
    return had;
  }
  if (!m->cap) return false;
  size_t i = slot_of(key, m->cap);
  while (m->keys[i] != key) {
    if (!m->keys[i]) return false;
    i = (i + 1) & (m->cap - 1);
  }
  /* Backward-shift deletion keeps probe chains intact without tombstones. */
  size_t j = i;
  for (;;) {
    j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) break;
    const size_t home = slot_of(m->keys[j], m->cap);
    if (((j - home) & (m->cap - 1)) >= ((j - i) & (m->cap - 1))) {
      m->keys[i] = m->keys[j];
      m->vals[i] = m->vals[j];
      i = j;
    }
  }
  m->keys[i] = 0;
  m->count--;
  return true;
}
