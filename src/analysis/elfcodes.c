/* SPDX-License-Identifier: MIT */
#include "elfcodes.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"

void cts_elfcodes_init(cts_elfcodes_t *c, cts_elfsym_t *const *elves, size_t nelves,
                       const cts_mt_reader_t *source) {
  memset(c, 0, sizeof *c);
  c->elves = elves;
  c->nelves = nelves;
  c->source = source;
  cts_u64map_init(&c->index);
}

static void free_locs(cts_mt_location_t *locs, size_t n) {
  for (size_t i = 0; locs && i < n; i++) {
    free((char *)locs[i].filename);
    free((char *)locs[i].defname);
  }
  free(locs);
}

/* A copy of locs[0..n) with its own strings; NULL without memory. */
static cts_mt_location_t *copy_locs(const cts_mt_location_t *locs, size_t n) {
  cts_mt_location_t *const copy = calloc(n, sizeof *copy);
  if (!copy) return NULL;
  for (size_t i = 0; i < n; i++) {
    copy[i] = locs[i];
    copy[i].filename = strdup(locs[i].filename ? locs[i].filename : "");
    copy[i].defname = strdup(locs[i].defname ? locs[i].defname : "");
    if (!copy[i].filename || !copy[i].defname) {
      free_locs(copy, i + 1);
      return NULL;
    }
  }
  return copy;
}

/* Where the locations of a code not seen before come from, counted. */
static size_t lookup(cts_elfcodes_t *c, uint64_t code, const cts_mt_location_t **locs) {
  size_t n = 0;
  if (c->source && cts_mt_reader_lookup_location(c->source, code, locs, &n) == 0 && n) {
    c->stats.kept++;
    return n;
  }
  static cts_mt_location_t buf[CTS_MT_MAX_LOCATIONS];
  for (size_t i = 0; i < c->nelves; i++) {
    const cts_elfsym_result_t r =
        cts_elfsym_resolve(c->elves[i], code, buf, CTS_MT_MAX_LOCATIONS, &n);
    if (r == CTS_ELFSYM_OUTSIDE) continue;
    c->stats.line += r == CTS_ELFSYM_LINE;
    c->stats.symbol += r == CTS_ELFSYM_SYMBOL;
    c->stats.offset += r == CTS_ELFSYM_OFFSET;
    *locs = buf;
    return n;
  }
  c->stats.outside++;
  return 0;
}

size_t cts_elfcodes_resolve(void *elfcodes, uint64_t code, cts_mt_location_t *out, size_t max) {
  cts_elfcodes_t *const c = elfcodes;
  const uint64_t *const at = cts_u64map_find(&c->index, code);
  cts_elfcodes_entry_t entry = {0, NULL};
  if (at) {
    entry = c->entries[*at];
  } else {
    c->stats.codes++;
    const cts_mt_location_t *locs = NULL;
    const size_t n = lookup(c, code, &locs);
    bool added;
    if (cts_grow((void **)&c->entries, &c->cap, c->nentries, sizeof *c->entries) ||
        (n && !(entry.locs = copy_locs(locs, n))) ||
        !cts_u64map_insert(&c->index, code, c->nentries, &added)) {
      free_locs(entry.locs, n);
      c->stats.failed++;
      return 0;
    }
    entry.n = n;
    c->entries[c->nentries++] = entry;
  }
  const size_t k = entry.n < max ? entry.n : max;
  if (k) memcpy(out, entry.locs, k * sizeof *out);
  return entry.n;
}

void cts_elfcodes_fini(cts_elfcodes_t *c) {
  for (size_t i = 0; i < c->nentries; i++) free_locs(c->entries[i].locs, c->entries[i].n);
  free(c->entries);
  cts_u64map_fini(&c->index);
  memset(c, 0, sizeof *c);
}
