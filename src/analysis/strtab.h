/* SPDX-License-Identifier: MIT */
/* The string table of the hosted code: strings interned by content, each with an id (0, 1,
 * ... in order of first appearance), for grouping keys, frame labels, task names and the
 * string sections of exports. Strings are copied (or handed over) and owned by the table
 * until cts_strtab_fini() or cts_strtab_release(). Not thread-safe: one table per thread
 * at a time. Errors: -ENOMEM, with the table unchanged. */
#ifndef CTS_STRTAB_H
#define CTS_STRTAB_H

#include <stddef.h>

#include "u64map.h"

typedef struct cts_strtab {
  char **strs; /* id -> NUL-terminated string (owned) */
  size_t n, cap;
  cts_u64map_t by_key; /* string key (moved on on a collision) -> id + 1 */
} cts_strtab_t;

void cts_strtab_init(cts_strtab_t *t);
/* Frees the strings and the table. */
void cts_strtab_fini(cts_strtab_t *t);
/* Hands the strings over: returns the array of *n strings (the caller frees each, then the
 * array; NULL when empty) and leaves the table empty, as after cts_strtab_init(). */
char **cts_strtab_release(cts_strtab_t *t, size_t *n);

/* Sets *id to the id of s[0..len), adding a copy when new. A NUL ends the string early
 * (only what is before it counts). Returns 1 when added, 0 when found, or -ENOMEM. */
int cts_strtab_add(cts_strtab_t *t, const char *s, size_t len, size_t *id);
/* The same for a NUL-terminated string from malloc(), which the table takes: kept when new,
 * freed when found or on -ENOMEM. */
int cts_strtab_add_owned(cts_strtab_t *t, char *s, size_t *id);

/* The id of s[0..len) (up to a NUL), or SIZE_MAX when absent. */
size_t cts_strtab_find(const cts_strtab_t *t, const char *s, size_t len);

static inline const char *cts_strtab_get(const cts_strtab_t *t, size_t id) {
  return t->strs[id];
}

#endif /* CTS_STRTAB_H */
