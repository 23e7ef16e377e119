/* SPDX-License-Identifier: MIT */
/* The marks of `leaks`' first pass (leaks_load.h): which object ids are live at the end of
 * a trace, one bit an id from the first one allocated. Here rather than in leaks_load.h so
 * that the loader (load.c) can ask, inline, for every allocation of the second pass whether
 * its full stack is wanted (cts_load_opts_t.full_stacks).
 *
 * Zero-initialise; cts_leaks_marks_fini() frees. Not thread-safe. */
#ifndef CTS_ANALYSIS_LEAKS_MARKS_H
#define CTS_ANALYSIS_LEAKS_MARKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cts_leaks_marks {
  uint64_t *bits; /* bit i: the block of id base + i is live */
  size_t words;
  uint64_t base;
  bool have_base;
  uint64_t allocs, live; /* allocations marked; ids live now */
} cts_leaks_marks_t;

/* id was allocated: 0; -ENOMEM; or CTS_E_LIMIT (nothing marked) for an id below the first
 * one or further past it than 2 ids an allocation marked + 2^20, which bounds the bitmap to
 * ~2 bits an allocation and 128 KiB (sparse or hostile ids: the caller reads once). An id
 * allocated again while live stays one live block. */
int cts_leaks_mark_alloc(cts_leaks_marks_t *m, uint64_t id);
/* id was collected (an id not live is ignored, as the profile ignores it). */
void cts_leaks_mark_collect(cts_leaks_marks_t *m, uint64_t id);
void cts_leaks_marks_fini(cts_leaks_marks_t *m);

/* Whether id is marked live. Inline: both passes ask for every allocation (as calls, the
 * marks were ~10 % of leaks on a rate-1 trace of sqlite3). One bound test: an id below the
 * base wraps past the bitmap, and without a base the bitmap is empty (words 0); the tests
 * of both that it replaces were ~5 of its ~16 instructions. */
static inline bool cts_leaks_marked(const cts_leaks_marks_t *m, uint64_t id) {
  const uint64_t i = id - m->base;
  return i / 64 < m->words && (m->bits[i / 64] >> (i % 64) & 1u);
}

#endif /* CTS_ANALYSIS_LEAKS_MARKS_H */
