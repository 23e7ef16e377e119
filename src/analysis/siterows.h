/* SPDX-License-Identifier: MIT */
/* Report-time views of cts_stacks_t: frame names, and the flat table of allocation sites
 * grouped by source line, function or file (the stack nodes whose last frame resolves to
 * the same key are summed). Frame descriptions come through a lookup callback, so any trace
 * format that can describe a frame code as cts_mt_location_t entries can use this. */
#ifndef CTS_SITEROWS_H
#define CTS_SITEROWS_H

#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

#include "sites.h"
#include "strtab.h"

/* Sets *locs and *n (outermost inlined frame first, n may be 0) and returns 0, or returns
 * non-zero for an unknown code. */
typedef int (*cts_frame_lookup_cb)(void *user_data, uint64_t code, const cts_mt_location_t **locs,
                                   size_t *n);

typedef struct cts_frames {
  cts_frame_lookup_cb lookup;
  void *user_data;
} cts_frames_t;

/* The innermost location of code (where the allocation is), or NULL without debug info. */
const cts_mt_location_t *cts_frame_innermost(const cts_frames_t *f, uint64_t code);

typedef enum cts_group {
  CTS_GROUP_LINE = 0, /* function, file and line of the allocation point */
  CTS_GROUP_FUNCTION, /* function (and its file) */
  CTS_GROUP_FILE,     /* file */
} cts_group_t;

enum cts_sort {
  CTS_SORT_BYTES = 0, /* allocated samples */
  CTS_SORT_COUNT,     /* sampled allocations */
  CTS_SORT_PEAK,      /* live samples at the peak */
  CTS_SORT_LIVE,      /* live samples at the end */
};

typedef struct cts_row {
  const char *function; /* borrowed from the lookup; "" when unknown */
  const char *file;
  uint32_t line;
  uint64_t code; /* a frame code of the group (the first met), 0 for "no backtrace" */
  char *key;     /* owned: the grouping key as text */
  cts_site_stats_t st;
  uint32_t first_node; /* the group's heaviest stack node by the build's metric */
  uint64_t live_at[4]; /* live samples at 1/4, 1/2, 3/4 of the trace and at its end */
} cts_row_t;

/* A row's name for people: "function (file:line)", "function (file)", "file", its key when
 * it has no debug information, or "(no backtrace)". */
void cts_row_name(const cts_row_t *r, char *buf, size_t size);

typedef struct cts_rows {
  cts_row_t *rows;
  size_t n, cap;
} cts_rows_t;

typedef enum cts_sort cts_sort_t;

/* Groups the nodes' self figures by their last frame; first_node is the heaviest node by
 * `heaviest`. With end_us (history enabled), live_at[] is filled for time quartiles between
 * origin and end_us. Returns 0 or -ENOMEM. */
int cts_rows_build(cts_rows_t *out, const cts_stacks_t *s, const cts_frames_t *f, cts_group_t by,
                   cts_sort_t heaviest, uint64_t origin_us, uint64_t end_us);
void cts_rows_fini(cts_rows_t *r);

/* Sorts by the metric, largest first; ties by key, so the order is deterministic. */
void cts_rows_sort(cts_rows_t *r, cts_sort_t by);
uint64_t cts_site_stats_metric(const cts_site_stats_t *st, cts_sort_t by);

/* A frame's label: "function (file:line)" for its innermost location, "0x<code>" without
 * one; inlined frames are not shown. Writes at most size bytes, NUL included. */
const char *cts_frame_label(const cts_frames_t *f, uint64_t code, char *buf, size_t size);

/* Frame labels for trees and folded stacks: every code gets the label of its innermost
 * location in a style, and codes with the same label are one frame. */
typedef enum cts_label_style {
  CTS_LABEL_LINE = CTS_GROUP_LINE,         /* "function (file:line)" */
  CTS_LABEL_FUNCTION = CTS_GROUP_FUNCTION, /* "function (file)" */
  CTS_LABEL_FILE = CTS_GROUP_FILE,         /* "file" */
  CTS_LABEL_NAME,                          /* "function" */
} cts_label_style_t;

typedef struct cts_labels {
  cts_strtab_t texts; /* label id - 1 → text */
  char *const *names; /* read-only view of texts.strs for the writers of label lists */
  size_t n;           /* texts.n */
  cts_u64map_t by_code;
  cts_label_style_t style;
  const cts_frames_t *frames;
} cts_labels_t;

void cts_labels_init(cts_labels_t *l, const cts_frames_t *f, cts_label_style_t style);
void cts_labels_fini(cts_labels_t *l);
/* The label id (≥ 1) of code, or 0 when out of memory. */
uint64_t cts_labels_id(cts_labels_t *l, uint64_t code);
static inline const char *cts_labels_name(const cts_labels_t *l, uint64_t id) {
  return id && id <= l->n ? l->names[id - 1] : "(all)";
}

/* Builds dst from src with every frame code replaced by its label id (merging the nodes that
 * become equal, their self figures summed). dst is initialised here. Returns 0 or -ENOMEM. */
int cts_stacks_relabel(const cts_stacks_t *src, cts_labels_t *labels, cts_stacks_t *dst);
/* The same nodes without their figures (64 bytes a node that has some, spared for a view
 * that needs one figure): *map (owned by the caller, src->count entries) gives each src
 * node's dst node. Returns 0, or -ENOMEM with dst zeroed and *map NULL. */
int cts_stacks_relabel_nodes(const cts_stacks_t *src, cts_labels_t *labels, cts_stacks_t *dst,
                             uint32_t **map);

/* cts_stacks_relabel done in s itself, for a view that reads one or two figures a node: the
 * same merged nodes, numbered and ordered as cts_stacks_relabel's, replace s's nodes, and
 * each merged node's self figures by `first` and by `second` (the sums of its members'
 * cts_site_stats_metric, integers: the same whatever the order) are put in the arrays
 * *first and *second (s->count entries each, owned by the caller; *second is *first when
 * the two keys are the same). No second trie is made: the peak is s's nodes, its map and a
 * table of ~11 bytes a node while it runs, instead of a whole second trie with 64-byte
 * records (on gen_trace's default shape, 8.46 M nodes: ~990 -> ~480 MiB for top --tree).
 * s is then nodes alone: its (parent, code) table, figures and sites are freed (every
 * node's cts_stacks_self is all zero) and it is for walking only, not for interning nor
 * counting. Returns 0, or -ENOMEM with *first and *second NULL and s fit only for
 * cts_stacks_fini (the caller's view fails then). */
int cts_stacks_relabel_in_place(cts_stacks_t *s, cts_labels_t *labels, cts_sort_t first_key,
                                cts_sort_t second_key, uint64_t **first, uint64_t **second);

/* cts_stacks_relabel done in s itself, keeping every figure: the same merged nodes,
 * numbered and ordered as cts_stacks_relabel's, replace s's nodes, and each merged node's
 * self figures are its first member's record with the others' added in node order (the
 * same sums as cts_stacks_relabel's, doubles included, to the bit); the other members'
 * records stay in s->stats, unused. No second trie, nor a second set of records: the peak
 * is s's nodes and records, a 4-byte map a node and a table of ~11 bytes a node while the
 * pass runs. s's (parent, code) table is freed; s is then for walking and cts_stacks_self
 * only, not for interning nor counting. A trie with live figures by site
 * (cts_stacks_set_live_by_site) keeps its allocated ones alone. Returns 0, or -ENOMEM with
 * s fit only for cts_stacks_fini. */
int cts_stacks_relabel_merge_in_place(cts_stacks_t *s, cts_labels_t *labels);

#endif /* CTS_SITEROWS_H */
