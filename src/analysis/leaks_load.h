/* SPDX-License-Identifier: MIT */
/* Reading a memtrace trace for `leaks`, which shows full backtraces only of the blocks
 * still live at the end but needs every allocation's site (live bytes over time, bytes
 * allocated per site).
 *
 * One pass (cts_mem_trace_load) interns every allocation's full stack: on a trace whose
 * blocks mostly die young, that trie is most of the time and memory (gen_trace's default
 * shape at 160 MB: 8.5 M nodes, 520 MB). When the trace is a regular uncompressed file,
 * two passes do the same work with only the stacks that are shown:
 *
 *  1. the events are read with backtraces skipped (the reader's cheaper mode) and the
 *     object ids still live at the end are marked in a bitmap (ids are dense and mostly
 *     increasing; a trace whose ids are sparse, decreasing below the first one or too far
 *     apart for the bitmap's bound falls back to one pass);
 *  2. the trace is read again into the profile: a marked block interns its full stack, any
 *     other only its allocation point (cts_alloc_profile_add_alloc, leaf_only), which is
 *     the node's last frame, so every site figure, sum and history is the same as one pass
 *     gives.
 *
 * What differs is the trie's node numbering, which decides between stacks of a row that
 * hold the same live bytes (the first made wins): cts_leaks_settle_ties() puts back the
 * choice one pass makes where it shows, by reading the trace a third time up to where the
 * tie is decided (only when a shown backtrace depends on it).
 *
 * Pass 1 is given up for one pass early (1/8 into the file) when over a quarter of the blocks
 * read so far are live: pass 2 would then save too little. One pass is also used for
 * pipes, standard input, compressed files, traces pass 1 finds a defect or a warning in,
 * and when pass 2 fails (its messages but the warnings are dropped, and the one pass
 * reports the trace as it always did).
 *
 * Not thread-safe (one load per object at a time); the trace may be decoded on a second
 * thread in pass 2 as cts_mem_trace_load does (opts->threads). */
#ifndef CTS_ANALYSIS_LEAKS_LOAD_H
#define CTS_ANALYSIS_LEAKS_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "leaks_marks.h"
#include "load.h"
#include "siterows.h"

typedef enum cts_leaks_passes {
  CTS_LEAKS_PASSES_AUTO = 0, /* two passes where they pay (above), else one */
  CTS_LEAKS_PASSES_ONE,      /* always one pass (as every other command reads) */
  CTS_LEAKS_PASSES_TWO,      /* two passes wherever possible, never given up early */
} cts_leaks_passes_t;

/* What a load did, for the tests (pass 2 interns full stacks only for marked blocks: full
 * == marked) and for benchmarks. Strings are static. */
typedef struct cts_leaks_load_stats {
  unsigned passes;     /* 1 or 2 (a third, for ties, is counted in ties_read) */
  const char *one_why; /* with passes 1: why ("a pipe or standard input", ...), else NULL */
  uint64_t marked;     /* pass 1: blocks live at the end */
  uint64_t allocs;     /* pass 2: allocations */
  uint64_t full;       /* pass 2: allocations whose full stack was interned */
  uint64_t tie_rows;   /* cts_leaks_settle_ties: rows whose tie it settled */
  uint64_t ties_read;  /* bytes it read for them (0: no third read) */
} cts_leaks_load_stats_t;

/* Reads path into t->prof as cts_mem_trace_load(t, path, cfg, opts, NULL, NULL) does, in
 * one or two passes (above; cfg must ask for stacks, without leaf_only). Progress
 * (opts->progress) covers both passes: the total is twice the file's size. Returns and
 * logs as cts_mem_trace_load. st (may be NULL) gets what was done. */
int cts_leaks_trace_load(cts_mem_trace_t *t, const char *path,
                         const cts_alloc_profile_config_t *cfg, const cts_load_opts_t *opts,
                         cts_leaks_passes_t passes, cts_leaks_load_stats_t *st);

/* After a load by two passes: for each of rows[0..shown) whose heaviest stack (by live
 * samples at the end) is tied with another of the same row and prints differently within
 * depth frames, sets first_node to the stack one pass would choose (the one whose stack
 * came first in the trace). Rows are as cts_rows_build(..., by, CTS_SORT_LIVE, ...) made
 * them from t->prof.stacks. Does nothing after a load by one pass (st->passes 1) or when
 * depth is 0. progress (may be NULL) gets the bytes read of the file while it is read again.
 * Returns 0, -ENOMEM, or an error reading the trace again (then the rows are as
 * they were: the output is right but for those ties). */
int cts_leaks_settle_ties(cts_mem_trace_t *t, cts_rows_t *rows, size_t shown, cts_group_t by,
                          long depth, cts_leaks_load_stats_t *st, cts_os_progress_cb progress,
                          void *progress_user_data);

#endif /* CTS_ANALYSIS_LEAKS_LOAD_H */
