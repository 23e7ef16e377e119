/* SPDX-License-Identifier: MIT */
#include "u64map.h"

#include <errno.h>
#include <stdlib.h>

static inline size_t slot_of(uint64_t k, size_t cap) {
  return cts_u64map_slot_of(k, cap);
}

void cts_u64map_init(cts_u64map_t *m) {
  *m = (cts_u64map_t){0};
}

void cts_u64map_fini(cts_u64map_t *m) {
  free(m->slots);
  *m = (cts_u64map_t){0};
}

uint64_t *cts_u64map_find(const cts_u64map_t *m, uint64_t key) {
  return (uint64_t *)cts_u64map_get(m, key);
}

static bool grow(cts_u64map_t *m) {
  const size_t cap = m->cap ? m->cap * 2 : 1024;
  cts_u64map_entry_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->slots[i].key) continue;
    size_t j = slot_of(m->slots[i].key, cap);
    while (slots[j].key) j = (j + 1) & (cap - 1);
    slots[j] = m->slots[i];
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return true;
}

uint64_t *cts_u64map_insert(cts_u64map_t *m, uint64_t key, uint64_t val, bool *added) {
  if (key == 0) {
    *added = !m->has_zero;
    if (!m->has_zero) m->has_zero = true, m->zero_val = val;
    return &m->zero_val;
  }
  if ((m->count + 1) * 2 > m->cap && !grow(m)) return NULL;
  size_t i = slot_of(key, m->cap);
  for (; m->slots[i].key; i = (i + 1) & (m->cap - 1)) {
    if (m->slots[i].key == key) {
      *added = false;
      return &m->slots[i].val;
    }
  }
  m->slots[i] = (cts_u64map_entry_t){key, val};
  m->count++;
  *added = true;
  return &m->slots[i].val;
}

bool cts_u64map_remove(cts_u64map_t *m, uint64_t key) {
  uint64_t val;
  return cts_u64map_take(m, key, &val);
}

bool cts_u64map_take(cts_u64map_t *m, uint64_t key, uint64_t *val) {
  if (key == 0) {
    const bool had = m->has_zero;
    m->has_zero = false;
    *val = m->zero_val;
    return had;
  }
  if (!m->cap) return false;
  size_t i = slot_of(key, m->cap);
  while (m->slots[i].key != key) {
    if (!m->slots[i].key) return false;
    i = (i + 1) & (m->cap - 1);
  }
  *val = m->slots[i].val;
  /* Backward-shift deletion keeps probe chains intact without tombstones. */
  size_t j = i;
  for (;;) {
    j = (j + 1) & (m->cap - 1);
    if (!m->slots[j].key) break;
    const size_t home = slot_of(m->slots[j].key, m->cap);
    if (((j - home) & (m->cap - 1)) >= ((j - i) & (m->cap - 1))) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].key = 0;
  m->count--;
  return true;
}

bool cts_u64map_next(const cts_u64map_t *m, size_t *pos, uint64_t *key, uint64_t *val) {
  /* Position 0 is key 0; position p > 0 is slot p - 1. */
  if (*pos == 0) {
    *pos = 1;
    if (m->has_zero) {
      *key = 0;
      *val = m->zero_val;
      return true;
    }
  }
  for (; *pos - 1 < m->cap; (*pos)++) {
    const cts_u64map_entry_t *e = &m->slots[*pos - 1];
    if (e->key) {
      *key = e->key;
      *val = e->val;
      (*pos)++;
      return true;
    }
  }
  return false;
}

int cts_idmap_init(cts_idmap_t *m) {
  *m = (cts_idmap_t){0};
  cts_u64map_init(&m->old);
  m->ring = calloc(CTS_IDMAP_RING, sizeof *m->ring);
  return m->ring ? 0 : -ENOMEM;
}

void cts_idmap_fini(cts_idmap_t *m) {
  free(m->ring);
  cts_u64map_fini(&m->old);
  *m = (cts_idmap_t){0};
}

/* Whether id may be in old: ids come in increasing order in a sound trace, so a new id is
 * above every survivor and the probe of old is skipped. */
static inline bool maybe_old(const cts_idmap_t *m, uint64_t id) {
  return m->old.count + m->old.has_zero > 0 && id <= m->old_max;
}

uint64_t *cts_idmap_find(cts_idmap_t *m, uint64_t id) {
  cts_u64map_entry_t *e = &m->ring[id & (CTS_IDMAP_RING - 1u)];
  if (id != UINT64_MAX && e->key == id + 1) return &e->val;
  return maybe_old(m, id) ? cts_u64map_find(&m->old, id) : NULL;
}

uint64_t *cts_idmap_insert(cts_idmap_t *m, uint64_t id, uint64_t val, bool *added) {
  cts_u64map_entry_t *e = &m->ring[id & (CTS_IDMAP_RING - 1u)];
  if (id != UINT64_MAX && e->key == id + 1) {
    *added = false;
    return &e->val;
  }
  if (maybe_old(m, id)) {
    uint64_t *v = cts_u64map_find(&m->old, id);
    if (v) {
      *added = false;
      return v;
    }
  }
  if (id == UINT64_MAX || e->key != 0) {
    /* The ring slot is taken by an older block still live (or the id cannot be stored
     * there): one of them moves to old. */
    const uint64_t moved = id == UINT64_MAX ? id : e->key - 1;
    const uint64_t moved_val = id == UINT64_MAX ? val : e->val;
    bool fresh;
    uint64_t *v = cts_u64map_insert(&m->old, moved, moved_val, &fresh);
    if (!v) return NULL;
    if (moved > m->old_max) m->old_max = moved;
    if (id == UINT64_MAX) {
      m->count++;
      *added = true;
      return v;
    }
  }
  *e = (cts_u64map_entry_t){id + 1, val};
  m->count++;
  *added = true;
  return &e->val;
}

bool cts_idmap_take(cts_idmap_t *m, uint64_t id, uint64_t *val) {
  cts_u64map_entry_t *e = &m->ring[id & (CTS_IDMAP_RING - 1u)];
  if (id != UINT64_MAX && e->key == id + 1) {
    *val = e->val;
    e->key = 0;
    m->count--;
    return true;
  }
  if (maybe_old(m, id) && cts_u64map_take(&m->old, id, val)) {
    m->count--;
    return true;
  }
  return false;
}
