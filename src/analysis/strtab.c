/* SPDX-License-Identifier: MIT */
#include "strtab.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

void cts_strtab_init(cts_strtab_t *t) {
  memset(t, 0, sizeof *t);
  cts_u64map_init(&t->by_key);
}

void cts_strtab_fini(cts_strtab_t *t) {
  for (size_t i = 0; i < t->n; i++) free(t->strs[i]);
  free(t->strs);
  cts_u64map_fini(&t->by_key);
  memset(t, 0, sizeof *t);
}

char **cts_strtab_release(cts_strtab_t *t, size_t *n) {
  char **strs = t->strs;
  *n = t->n;
  cts_u64map_fini(&t->by_key);
  cts_strtab_init(t);
  return strs;
}

/* The id of s[0..len) (no NUL inside), or SIZE_MAX with *key set to the free key where it
 * would go: keys are string hashes, moved on by one past a collision. */
static size_t lookup(const cts_strtab_t *t, const char *s, size_t len, uint64_t *key) {
  for (uint64_t k = cts_u64map_str_key_n(s, len);; k++) {
    const uint64_t *v = cts_u64map_find(&t->by_key, k);
    if (!v) {
      *key = k;
      return SIZE_MAX;
    }
    /* Equal when e holds s's len bytes (none is NUL) and ends there. */
    const char *e = t->strs[*v - 1];
    if (strncmp(e, s, len) == 0 && e[len] == '\0') return (size_t)(*v - 1);
  }
}

/* Adds copy (owned; freed on failure) under key. */
static int insert(cts_strtab_t *t, char *copy, uint64_t key, size_t *id) {
  bool added;
  if (cts_grow((void **)&t->strs, &t->cap, t->n, sizeof *t->strs) != 0 ||
      !cts_u64map_insert(&t->by_key, key, t->n + 1, &added)) {
    free(copy);
    return -ENOMEM;
  }
  t->strs[t->n] = copy;
  *id = t->n++;
  return 1;
}

size_t cts_strtab_find(const cts_strtab_t *t, const char *s, size_t len) {
  uint64_t key;
  return lookup(t, s, strnlen(s, len), &key);
}

int cts_strtab_add(cts_strtab_t *t, const char *s, size_t len, size_t *id) {
  len = strnlen(s, len);
  uint64_t key;
  const size_t found = lookup(t, s, len, &key);
  if (found != SIZE_MAX) {
    *id = found;
    return 0;
  }
  char *copy = malloc(len + 1);
  if (!copy) return -ENOMEM;
  memcpy(copy, s, len);
  copy[len] = '\0';
  return insert(t, copy, key, id);
}

int cts_strtab_add_owned(cts_strtab_t *t, char *s, size_t *id) {
  uint64_t key;
  const size_t found = lookup(t, s, strlen(s), &key);
  if (found != SIZE_MAX) {
    free(s);
    *id = found;
    return 0;
  }
  return insert(t, s, key, id);
}
