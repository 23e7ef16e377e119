/* SPDX-License-Identifier: MIT */
/* Allocation sites, aggregated in one streaming pass, independent of the trace format.
 *
 * A stack is interned in a trie of frames (cts_stacks_t): node = (parent, frame code), the
 * root (node 0) is the empty stack, and a backtrace (outermost frame first) maps to the
 * node of its last frame. A node that ends a stack which allocated carries the figures of
 * the allocations made with exactly that stack ("self", cts_stacks_self), so one structure
 * serves the flat table (group nodes by their last frame), the call tree ("top --tree"),
 * the callers view, folded stacks and pprof. Node indices only grow and a parent's index is
 * below its children's, so summing children into parents is one backward loop.
 *
 * Size: a trie node is 16 bytes and its slot in the (parent, code) table 4 bytes at a load
 * of 0.35..0.7, so a node costs at most ~36 bytes with the arrays' growth slack (checked by
 * tests/analysis/test_stacks_scale.c). The figures (cts_stack_stat_t, 64 bytes) live in a
 * side array, only for nodes that end an allocating stack (a node's site is its code's):
 * interior frames, usually most of a trie, carry none (on gen_trace's default shape 37 % of
 * the nodes have figures, so a node costs ~42 bytes with them). Their counts are 32-bit: the rare
 * one that passes 2^32 keeps its high half in a side list (cts_stack_wide_t), so no count is ever
 * cut. A trie that keeps allocated figures alone (cts_stacks_set_lean) has 20-byte records instead.
 *
 * Live-at-peak figures use a lazy snapshot: when the total live heap reaches a new
 * maximum, the peak epoch advances; a node saves its live figures the first time it changes
 * after that, so the peak costs O(1) per event instead of a copy of every node.
 *
 * Sites (cts_site_t) are the distinct allocation points (last-frame codes). With history
 * enabled, each keeps its live samples at up to CTS_SITE_CHECKPOINTS evenly spaced times,
 * the spacing doubling as the trace gets longer, for "growth over time" in leak reports.
 *
 * Memory is bounded by distinct stacks and sites, never by the number of events. */
#ifndef CTS_SITES_H
#define CTS_SITES_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "u64map.h"

/* Figures of a set of allocations. Counts are sampled blocks; samples × (word size /
 * rate) estimate bytes; est_allocs (Σ 1 / sampling probability) estimates allocations. */
typedef struct cts_site_stats {
  uint64_t allocs, samples; /* allocated */
  double est_allocs;
  uint64_t live_allocs, live_samples; /* live now (at the end once the trace is read) */
  double live_est_allocs;
  uint64_t peak_allocs, peak_samples; /* live when the whole heap was at its peak */
  double peak_est_allocs;
  uint64_t collected_allocs, collected_samples;
} cts_site_stats_t;

/* 16 bytes. A node's depth is not kept (cts_stacks_depth walks the parents, and
 * cts_stacks_depths makes an array for the views that read many), nor its site: only a node
 * with figures has one, its code's (cts_stacks_site looks it up in site_of_code). */
typedef struct cts_stack_node {
  uint64_t code;   /* frame code (0 for the root) */
  uint32_t parent; /* the root is its own parent */
  uint32_t stat;   /* its figures: index in cts_stacks_t.stats, 0 = none (all zero) */
} cts_stack_node_t;

/* A node's own figures as stored: cts_site_stats_t without the collected ones, which are
 * allocated − live (every free moves one allocation from live to collected). 64 bytes, one
 * cache line: the three counts of allocations are their low 32 bits, the high ones in a
 * cts_stack_wide_t once a count passed 2^32 (a node that allocated 4 G times); samples may
 * grow by a block's length per allocation, so they stay 64-bit. */
typedef struct cts_stack_stat {
  uint64_t samples, live_samples, peak_samples;
  double est_allocs, live_est_allocs, peak_est_allocs;
  uint32_t allocs, live_allocs, peak_allocs; /* low halves */
  uint32_t peak_epoch; /* epoch of the last peak whose figures are saved in peak_* */
} cts_stack_stat_t;

/* A node's allocated figures alone, for a trie that keeps no others (cts_stacks_t.lean):
 * 20 bytes in place of cts_stack_stat_t's 64, so that an allocation-only profile (folded)
 * holds under a third of the figures' memory and each allocation loads its record from a
 * smaller array. The same types as cts_stack_stat_t's, so the sums are the same bit for bit;
 * allocs is the low half, its high one in a cts_stack_wide_t as there. Packed to 4-byte
 * alignment (24 bytes with the padding of an 8-byte one): 3.85 M records on gen_trace's 1 GB
 * default shape, 15 MB less in the report's peak. No field's address is taken. */
#if defined(__GNUC__)
#define CTS_STACK_LEAN_PACKED __attribute__((packed, aligned(4)))
#else
#define CTS_STACK_LEAN_PACKED /* 24 bytes then */
#endif
typedef struct CTS_STACK_LEAN_PACKED cts_stack_lean {
  uint64_t samples;
  double est_allocs;
  uint32_t allocs;
} cts_stack_lean_t;

/* The high halves of one record's counts of allocations (cts_stacks_t.wide). */
typedef struct cts_stack_wide {
  uint32_t stat; /* index of the record in cts_stacks_t.stats */
  uint32_t allocs, live_allocs, peak_allocs;
} cts_stack_wide_t;

#define CTS_SITE_CHECKPOINTS 64u

typedef struct cts_site {
  uint64_t code;
  uint64_t live_samples;
  uint32_t checkpoints_done; /* history[0..checkpoints_done) is filled */
  uint64_t *history;         /* CTS_SITE_CHECKPOINTS entries when history is enabled */
  /* With cts_stacks_t.live_by_site only: the live samples when the heap was at its peak
   * (saved lazily, as a record's: peak_epoch is the last peak saved), and the node that made
   * the site, on which cts_stacks_self gives the site's live and peak samples. */
  uint64_t peak_samples;
  uint32_t peak_epoch;
  uint32_t first_node;
} cts_site_t;

/* Frame code of the node under which stacks beyond the node budget are kept, by their last
 * frame only (memtrace codes are below 2^62, so this never clashes with a real one). */
#define CTS_STACKS_OVERFLOW_CODE (1ull << 63)

/* A memo entry: the key is kept so a hit costs no look at the nodes. */
typedef struct cts_stack_slot {
  uint64_t code;
  uint32_t parent;
  uint32_t node; /* 0 = empty */
} cts_stack_slot_t;

/* A node and its tag (the hash's high half), as a node waits to be put in the table (and as
 * derived views' own tables keep them): the tag spares most probes a look at a node that is
 * not the one sought. */
typedef struct cts_stack_tslot {
  uint32_t node; /* 0 = empty */
  uint32_t tag;
} cts_stack_tslot_t;

/* Nodes made under a node just made, whose table slots are written this many such nodes
 * later (see sites.c): the slot's cache line is fetched meanwhile. */
#define CTS_STACKS_PENDING 16u

/* Entries of the direct-mapped memo in front of the table (64 KiB: stays in cache). */
#define CTS_STACKS_MEMO 4096u

/* Entries of the child hints in front of the memo (64 KiB): indexed by the parent's number
 * alone, so a hit costs no hash; each keeps its key, so a hit costs no look at the nodes
 * (see sites.c). */
#define CTS_STACKS_HINTS 4096u

typedef struct cts_stacks {
  cts_stack_node_t *nodes;
  uint32_t count, cap;
  cts_stack_stat_t *stats; /* stats[0] is the all-zero figures of nodes without their own */
  /* Non-NULL after cts_stacks_set_lean: the records are these (same indices, lean[0] all
   * zero) and stats is NULL. */
  cts_stack_lean_t *lean;
  size_t stat_count, stat_cap; /* of stats, or of lean */
  /* Records with a count past 2^32, in the order they got there: each takes 4 G events, so
   * the list stays a few entries long and is searched in order. */
  cts_stack_wide_t *wide;
  uint32_t wide_count;
  size_t wide_cap;
  /* Open addressing over (parent, code), 4-byte slots (the node and part of its tag, see
   * sites.c); NULL once dropped. */
  uint32_t *table;
  uint32_t table_cap;
  /* Nodes not in the table yet, their slots being fetched: a ring of pending_count from
   * pending_head, oldest first. cts_stacks_find_child looks here when the table has no
   * match. */
  cts_stack_tslot_t pending[CTS_STACKS_PENDING];
  uint32_t pending_head, pending_count;
  cts_stack_slot_t *memo; /* recent finds, CTS_STACKS_MEMO entries (see sites.c) */
  cts_stack_slot_t *hint; /* the children last found under a parent, CTS_STACKS_HINTS entries */
  uint64_t overflowed;    /* allocations whose stack was cut for the node budget */
  /* Past the node budget, the (parent, code) of the last frame that had no node (valid while
   * absent_valid; made invalid when that node is made, and by cts_stacks_drop_table): a stack
   * that reaches it again is cut at once, with no look-up. A stack past the budget mostly
   * stops where the one before it stopped (consecutive backtraces share their prefix: 84 %
   * of the 23.8 M cut on gen_trace's 1 GB default shape), and each such stop cost the
   * table's probes, the pending nodes' scan and the overflow's two look-ups. */
  uint64_t absent_code;
  uint32_t absent_parent;
  bool absent_valid;
  uint32_t overflow_node; /* the root's CTS_STACKS_OVERFLOW_CODE child once made, else 0 */
  uint64_t lookups;       /* interning's look-ups past the memo (each a likely cache miss) */
  uint64_t memo_probes;   /* interning's frames the hints did not have (each a hash) */
  /* Of lookups, those whose table slot was fetched while a frame above was looked up
   * (path_keys only): the rest each wait for their slot. */
  uint64_t lookups_fetched_ahead;
  /* Nodes the table's refills walked up through to find path tags (path_keys; tests). */
  uint64_t rehash_walked;
  cts_site_t *sites;
  uint32_t site_count;
  size_t site_cap;
  /* The site of each code that allocated. A node's site is its code's, once it has figures
   * (interning gives a node its site before its record: cts_stacks_site): where a site by
   * record took 4 bytes a record (15 MiB of the report's peak on gen_trace's 1 GB default
   * shape), this map takes 32 bytes a site (a few thousand). */
  cts_u64map_t site_of_code;
  /* The sites of nodes asked lately (cts_stacks_site_memo): node << 32 | site, by the
   * node's low bits, CTS_STACKS_SITE_MEMO entries; 0 = none (the root is never kept). */
  uint64_t *site_memo;
  /* The nodes stand for no site any more (cts_stacks_relabel_merge_in_place and
   * cts_stacks_relabel_in_place merged them across codes): cts_stacks_site gives none. */
  bool sites_detached;
  /* The nodes of the previous backtrace (its frames are their codes): consecutive
   * backtraces share long prefixes. */
  uint32_t *prev_nodes;
  size_t prev_len, prev_cap;
  /* Set by cts_stacks_key_by_path: a node's table slot is homed on its path's tag (a hash of
   * its frames from the root) rather than its (parent, code) key's, and prev_tags[i] is the
   * tag of the previous backtrace's path to depth i, for i < prev_tagged (prev_cap entries). */
  bool path_keys;
  uint32_t *prev_tags;
  size_t prev_tagged;
  /* Peak tracking. The epoch wraps to 0 after 2^32 peaks, every record settled then. */
  uint32_t peak_epoch;
  /* Set after init, before the first stack is interned. no_node_peaks: the epoch never
   * advances, so no record saves its figures at a peak (peak_* stay 0; the heap's own
   * peak_samples and peak_time_us are kept). no_sites: no node is given a site (site stays
   * UINT32_MAX, sites empty): a new allocating node spares its look-up by code, and every
   * allocation and free the site's update. For views that show neither. */
  bool no_node_peaks, no_sites;
  /* Set by cts_stacks_set_live_by_site: lean records, live and peak samples by site. */
  bool live_by_site;
  uint64_t live_samples, peak_samples;
  uint64_t peak_time_us;
  /* History (growth over time). */
  bool history;
  uint64_t history_origin_us; /* checkpoint k is at origin + (k + 1) × spacing */
  uint64_t history_spacing_us;
  /* cts_stacks_advance_time has nothing to do up to this time (0 before its first call):
   * callers test it on every event rather than call. Set by that call; 0 again whenever
   * history_origin_us changes. */
  uint64_t history_next_us;
  uint32_t checkpoints_passed;
  /* Node budget of cts_stacks_intern (0 = unlimited): past it, a new stack is kept as
   * root → CTS_STACKS_OVERFLOW_CODE → its last frame, so sites stay exact and memory stays
   * bounded; only those stacks' middle frames are lost. */
  uint64_t max_nodes;
} cts_stacks_t;

/* Default node budget of an allocation profile: at least 10 M distinct stack nodes, in
 * about 470 MB with their figures when one node in three ends an allocating stack. */
#define CTS_STACKS_DEFAULT_MAX_NODES (10u << 20)

/* The high halves of record stat's counts, or NULL while they are all below 2^32. */
cts_stack_wide_t *cts_stacks_wide(const cts_stacks_t *s, uint32_t stat);
/* The same, made (zero) if missing: NULL only when out of memory. */
cts_stack_wide_t *cts__stacks_widen(cts_stacks_t *s, uint32_t stat);
/* Saves every record's live figures as its peak ones and restarts the epochs at 0: when
 * the epoch would wrap (the heap peaked 2^32 times). */
void cts__stacks_restart_epochs(cts_stacks_t *s);

/* The site of code (UINT32_MAX: none yet). Inline: asked once an allocation by the views
 * that keep live figures by site; the map is small (a few thousand sites), so in cache. */
static inline uint32_t cts_stacks_code_site(const cts_stacks_t *s, uint64_t code) {
  const uint64_t *v = cts_u64map_get(&s->site_of_code, code);
  return v ? (uint32_t)*v : UINT32_MAX;
}

/* Entries of the memo of nodes' sites (16 KiB). */
#define CTS_STACKS_SITE_MEMO 2048u

/* The site of node's code once the node allocated (has figures), else UINT32_MAX. */
static inline uint32_t cts_stacks_site(const cts_stacks_t *s, uint32_t node) {
  if (s->no_sites || s->sites_detached) return UINT32_MAX; /* (the node not loaded) */
  const cts_stack_node_t *n = &s->nodes[node];
  return n->stat ? cts_stacks_code_site(s, n->code) : UINT32_MAX;
}

/* cts_stacks_site through the memo of nodes' sites, for the callers that ask once an
 * allocation or a free (the profiles' updates): the map's look-up took ~30 instructions an
 * allocation (callgrind, report on a rate-1 trace of python3: +2.9 %, +0.5 % with the
 * memo). A node's site never changes once it has one, so an entry stays true. */
static inline uint32_t cts_stacks_site_memo(cts_stacks_t *s, uint32_t node) {
  uint64_t *m = &s->site_memo[node & (CTS_STACKS_SITE_MEMO - 1u)];
  if (CTS_LIKELY((uint32_t)(*m >> 32) == node && node)) return (uint32_t)*m;
  const uint32_t site = cts_stacks_site(s, node);
  if (site != UINT32_MAX) *m = (uint64_t)node << 32 | site;
  return site;
}

/* Frames from the root to node (the root has depth 0): one step a frame. */
static inline uint32_t cts_stacks_depth(const cts_stacks_t *s, uint32_t node) {
  uint32_t depth = 0;
  for (; node; node = s->nodes[node].parent) depth++;
  return depth;
}

/* The depth of every node (s->count entries, one pass: a parent comes before its children),
 * for a view that reads many; the caller frees it. NULL when out of memory. */
uint32_t *cts_stacks_depths(const cts_stacks_t *s);

/* The figures of the allocations made with exactly node's stack (all zero if none). */
static inline cts_site_stats_t cts_stacks_self(const cts_stacks_t *s, uint32_t node) {
  const uint32_t stat = s->nodes[node].stat;
  if (s->lean) {
    const cts_stack_lean_t *l = &s->lean[stat];
    uint64_t allocs = l->allocs;
    const cts_stack_wide_t *w = CTS_UNLIKELY(s->wide_count) ? cts_stacks_wide(s, stat) : NULL;
    if (w) allocs |= (uint64_t)w->allocs << 32;
    uint64_t live = 0, peak = 0;
    if (CTS_UNLIKELY(s->live_by_site)) {
      const uint32_t site = cts_stacks_site(s, node);
      if (site != UINT32_MAX && s->sites[site].first_node == node) {
        live = s->sites[site].live_samples;
        peak = s->sites[site].peak_samples;
      }
    }
    /* (By site, collected_samples is allocated - live mod 2^64: a site's sum is exact.) */
    return (cts_site_stats_t){.allocs = allocs,
                              .samples = l->samples,
                              .est_allocs = l->est_allocs,
                              .live_samples = live,
                              .peak_samples = peak,
                              .collected_allocs = allocs,
                              .collected_samples = l->samples - live};
  }
  const cts_stack_stat_t *f = &s->stats[stat];
  uint64_t allocs = f->allocs, live = f->live_allocs, peak = f->peak_allocs;
  const cts_stack_wide_t *w = CTS_UNLIKELY(s->wide_count) ? cts_stacks_wide(s, stat) : NULL;
  if (w) {
    allocs |= (uint64_t)w->allocs << 32;
    live |= (uint64_t)w->live_allocs << 32;
    peak |= (uint64_t)w->peak_allocs << 32;
  }
  return (cts_site_stats_t){.allocs = allocs,
                            .samples = f->samples,
                            .est_allocs = f->est_allocs,
                            .live_allocs = live,
                            .live_samples = f->live_samples,
                            .live_est_allocs = f->live_est_allocs,
                            .peak_allocs = peak,
                            .peak_samples = f->peak_samples,
                            .peak_est_allocs = f->peak_est_allocs,
                            .collected_allocs = allocs - live,
                            .collected_samples = f->samples - f->live_samples};
}
/* Adds add (whose collected figures are its allocated − live ones, as any node's or sum of
 * nodes' are) to node's own figures, giving it some if it had none: 0 or -ENOMEM. Only for
 * tries built outside cts_stacks_alloc/free (derived views), never lean ones. */
int cts_stacks_add_self(cts_stacks_t *s, uint32_t node, const cts_site_stats_t *add);

/* history: keep live samples per site over time (leaks). origin_us: time of checkpoint 0's
 * start (the trace's start). Returns 0 or -ENOMEM. */
int cts_stacks_init(cts_stacks_t *s, bool history, uint64_t origin_us);
void cts_stacks_fini(cts_stacks_t *s);
/* Keeps only allocated figures from now on, in 20-byte records (cts_stack_lean_t): for a
 * profile that counts allocations with cts_stacks_alloc_allocated alone. Call after init,
 * before the first stack is interned; cts_stacks_alloc, cts_stacks_free and
 * cts_stacks_add_self are not for a lean trie, and its live and peak figures read 0 (its
 * collected ones, allocated − live, the allocated ones). Returns 0 or -ENOMEM. */
int cts_stacks_set_lean(cts_stacks_t *s);
/* cts_stacks_set_lean, and live and peak samples kept by site rather than by node, for a
 * view that reads them only summed by allocation point (the report's table of sites): an
 * allocation counts with cts_stacks_alloc_by_site, a free with cts_stacks_free_at_end.
 * cts_stacks_self then gives a site's live and peak samples on its first node (the one
 * that made it) and 0 on the others, so that any sum over all of a site's nodes is the
 * site's; live and peak counts of allocations and estimates read 0. A node's record is 20
 * bytes where cts_stacks_alloc's is 64: on gen_trace's default shape (3.1 M records) the
 * report's peak RSS 555 -> ~440 MiB. Needs sites (no_sites false). Returns 0 or -ENOMEM. */
int cts_stacks_set_live_by_site(cts_stacks_t *s);

/* The node of backtrace bt[0..n) (outermost first), interning new frames (within the node
 * budget, see max_nodes): returns 0 and sets *node, or -ENOMEM. n = 0 gives the root. */
int cts_stacks_intern(cts_stacks_t *s, const uint64_t *bt, size_t n, uint32_t *node);
/* The same, told that the first `shared` frames of bt equal those of the backtrace interned
 * just before (the reader's common prefix): they are not compared again. */
int cts_stacks_intern_shared(cts_stacks_t *s, const uint64_t *bt, size_t n, size_t shared,
                             uint32_t *node);

/* cts_stacks_intern_shared for a caller that sees most backtraces repeat the one before: a
 * backtrace wholly shared with the previous one (shared >= n), whose path was interned to
 * its end (prev_len == n: a cut or a failure leaves it shorter), ends at the previous path's
 * last node. That node is taken here, with what cts_stacks_intern_shared would change (the
 * path's tags kept to depth n), when it has its figures; every other case goes to the call.
 * Inline: on gen_trace's survivors shape, 81 % of allocations repeat the backtrace before
 * them, and the call cost ~83 instructions an allocation. */
static inline int cts_stacks_intern_repeat(cts_stacks_t *s, const uint64_t *bt, size_t n,
                                           size_t shared, uint32_t *node) {
  if (shared >= n && n && n == s->prev_len && s->table) {
    const uint32_t last = s->prev_nodes[n - 1];
    if (CTS_LIKELY(last && s->nodes[last].stat)) {
      if (s->prev_tagged > n) s->prev_tagged = n;
      *node = last;
      return 0;
    }
  }
  return cts_stacks_intern_shared(s, bt, n, shared, node);
}

/* Homes the table's slots on the nodes' paths (cts_stacks_t.path_keys), for a trie that
 * cts_stacks_intern_shared fills, before the first node is made. A backtrace's frames past
 * the previous one's then have their slots fetched a few frames before their look-up, where
 * a (parent, code) slot cannot be found before the parent's look-up names the parent: one
 * cache miss after another down a branch of a large trie. cts_stacks_find_child and
 * cts_stacks_intern_child cost a walk to the root then (cts_stacks_relabel's copies, built
 * with them, keep (parent, code) slots). */
void cts_stacks_key_by_path(cts_stacks_t *s);

/* The memo's entry of (parent, code): one multiply-shift. The same product as
 * cts_fold_memo_slot's for the root's children, so an allocation's two look-ups of its leaf
 * (the fold's, then the trie's) share it when both are inline. */
static inline size_t cts_stacks_memo_slot(uint32_t parent, uint64_t code) {
  _Static_assert(CTS_STACKS_MEMO == 1u << 12, "the memo has 2^12 entries");
  return (size_t)(((code ^ (uint64_t)parent << 32 ^ parent) * 0x9e3779b97f4a7c15ull) >> 52);
}

int cts__stacks_intern_leaf(cts_stacks_t *s, uint64_t code, uint32_t *node);

/* cts_stacks_intern of the one-frame backtrace {code} (a stack kept by its allocation point
 * alone), faster when that node is known. */
static inline int cts_stacks_intern_leaf(cts_stacks_t *s, uint64_t code, uint32_t *node) {
  /* The root's child through the memo alone, when it already has its site and figures:
   * the general path's set-up (the previous path, the hints of a root of many children)
   * cost ~70 instructions an allocation for top and leaks; inline, the call and a second
   * hash of the leaf go too. */
  const cts_stack_slot_t *m = &s->memo[cts_stacks_memo_slot(0, code)];
  const uint32_t n = m->node;
  if (n && m->code == code && m->parent == 0 && s->prev_cap && s->nodes[n].stat) {
    s->prev_nodes[0] = n; /* as the general path leaves it */
    s->prev_len = 1;
    s->prev_tagged = 0; /* (its tag is made when asked) */
    *node = n;
    return 0;
  }
  return cts__stacks_intern_leaf(s, code, node);
}

/* The child of parent with frame code, created if needed: returns 0 and sets *node, or
 * -ENOMEM / CTS_E_LIMIT. */
int cts_stacks_intern_child(cts_stacks_t *s, uint32_t parent, uint64_t code, uint32_t *node);

/* Child of parent with frame code, or UINT32_MAX. On a trie keyed by path
 * (cts_stacks_key_by_path) it first walks from parent up to the root for the parent's tag:
 * a caller going down a backtrace frame by frame uses cts_stacks_find_child_down. */
uint32_t cts_stacks_find_child(const cts_stacks_t *s, uint32_t parent, uint64_t code);

/* cts_stacks_find_child for a walk down from the root that carries *path_tag: the parent's
 * on entry (0 for the root), the child's on return (whether or not it exists), so that each
 * frame costs a look-up and no walk up, whatever the depth. */
uint32_t cts_stacks_find_child_down(const cts_stacks_t *s, uint32_t parent, uint64_t code,
                                    uint32_t *path_tag);

/* Frees the (parent, code) table of a trie that is done growing (on gen_trace's default
 * shape, ~8 bytes a node: 32 MiB), for a view that builds a second trie from it. Walking
 * the nodes, their figures and cts_stacks_alloc/free work as before; cts_stacks_find_child
 * and the interning functions rebuild the table first (one pass over the nodes), and fail
 * with -ENOMEM if they cannot. */
void cts_stacks_drop_table(cts_stacks_t *s);

/* The (parent, code) table's memory (*bytes: 4 bytes a slot, above 1.4 a node), lent to the
 * caller as scratch, or NULL if there is none: a view that needs a large array for a while
 * in the middle of the pass (the report's coarser call tree, 4 bytes a node) uses it rather
 * than more memory at the peak. Until cts_stacks_restore_table the trie has no table, as
 * after cts_stacks_drop_table (an interning makes one again, the lent one is then freed). */
void *cts_stacks_lend_table(cts_stacks_t *s, size_t *bytes);
/* Takes back the table lent (any content): every node put in it again (one pass over the
 * nodes, the slots written at random), or freed if the trie made another meanwhile. */
void cts_stacks_restore_table(cts_stacks_t *s, void *table, size_t bytes);

/* n zeroed elements of size bytes for a hash table probed at random, NULL when out of memory
 * or overflowing; free() frees it. A large one (8 MiB or more) is on 2 MiB pages where the
 * kernel allows them on request (madvise), so that random probes miss the TLB far less; its
 * pages are all written at once then (counted in the peak RSS, as any table that fills). */
void *cts_table_alloc(size_t n, size_t size);

/* Advances time: checkpoints before time_us are taken (history only). Call with each
 * event's time, before the event's own changes; or only with those past history_next_us,
 * the same. */
void cts_stacks_advance_time(cts_stacks_t *s, uint64_t time_us);

/* Inline below (once or twice per event): */
/* Fills a site's checkpoints passed since its last change with its current value. */
static inline void cts_stacks_settle_site(cts_stacks_t *s, cts_site_t *st) {
  while (st->checkpoints_done < s->checkpoints_passed)
    st->history[st->checkpoints_done++] = st->live_samples;
}

/* Saves record stat's live figures as its peak figures. */
static inline void cts_stacks_save_peak(cts_stacks_t *s, uint32_t stat) {
  cts_stack_stat_t *st = &s->stats[stat];
  st->peak_allocs = st->live_allocs;
  st->peak_samples = st->live_samples;
  st->peak_est_allocs = st->live_est_allocs;
  cts_stack_wide_t *w = CTS_UNLIKELY(s->wide_count) ? cts_stacks_wide(s, stat) : NULL;
  if (w) w->peak_allocs = w->live_allocs;
}

/* Saves record stat's live figures as its peak figures if the heap peaked since it last
 * changed. */
static inline void cts_stacks_settle_peak(cts_stacks_t *s, uint32_t stat) {
  if (s->stats[stat].peak_epoch == s->peak_epoch) return;
  cts_stacks_save_peak(s, stat);
  s->stats[stat].peak_epoch = s->peak_epoch;
}

/* A block of samples allocated at a node of that site (UINT32_MAX: none) is live: into the
 * site's live samples and the heap's live total. Returns whether the heap peaked (its peak
 * is then time_us). */
/* Saves a site's live samples as its peak ones if the heap peaked since it last changed
 * (live_by_site). */
static inline void cts_stacks_settle_site_peak(cts_stacks_t *s, cts_site_t *st) {
  if (st->peak_epoch == s->peak_epoch) return;
  st->peak_samples = st->live_samples;
  st->peak_epoch = s->peak_epoch;
}

static inline bool cts__stacks_heap_add(cts_stacks_t *s, uint32_t site, uint64_t samples,
                                        uint64_t time_us) {
  if (site != UINT32_MAX) {
    cts_site_t *st = &s->sites[site];
    if (s->history) cts_stacks_settle_site(s, st);
    if (s->live_by_site) cts_stacks_settle_site_peak(s, st);
    st->live_samples += samples;
  }
  s->live_samples += samples;
  if (s->live_samples <= s->peak_samples) return false;
  s->peak_samples = s->live_samples;
  s->peak_time_us = time_us;
  return true;
}

/* The same block was freed: out of the site's live samples and the heap's live total. */
static inline void cts__stacks_heap_sub(cts_stacks_t *s, uint32_t site, uint64_t samples) {
  if (site != UINT32_MAX) {
    cts_site_t *st = &s->sites[site];
    if (s->history) cts_stacks_settle_site(s, st);
    if (s->live_by_site) cts_stacks_settle_site_peak(s, st);
    st->live_samples -= samples;
  }
  s->live_samples -= samples;
}

/* The heap reached a new peak: the figures saved lazily (records', or sites' by site) are
 * for the next epoch. */
static inline void cts__stacks_next_epoch(cts_stacks_t *s) {
  if (CTS_UNLIKELY(s->peak_epoch == UINT32_MAX))
    cts__stacks_restart_epochs(s);
  else
    s->peak_epoch++;
}

/* Makes sure an allocation at node can be counted: 0, or -ENOMEM when its count of
 * allocations is about to pass 2^32 and the record of its high half cannot be made. After
 * 0, the next cts_stacks_alloc at node cannot fail. */
static inline int cts_stacks_reserve(cts_stacks_t *s, uint32_t node_index) {
  const uint32_t stat = s->nodes[node_index].stat;
  const uint32_t allocs = s->lean ? s->lean[stat].allocs : s->stats[stat].allocs;
  if (CTS_LIKELY(allocs != UINT32_MAX)) return 0;
  return cts__stacks_widen(s, stat) ? 0 : -ENOMEM;
}

/* An allocation of samples with weight est (1 / sampling probability) at node: 0, or
 * -ENOMEM (nothing counted) only when cts_stacks_reserve would fail. */
static inline int cts_stacks_alloc(cts_stacks_t *s, uint32_t node_index, uint64_t samples,
                                   double est, uint64_t time_us) {
  const cts_stack_node_t *node = &s->nodes[node_index];
  const uint32_t stat = node->stat;
  cts_stack_stat_t *fig = &s->stats[stat];
  cts_stack_wide_t *wide = NULL;
  /* The count of allocations is the largest (live and peak are at most it): only its
   * carry makes the high halves' record. */
  if (CTS_UNLIKELY(fig->allocs == UINT32_MAX) && !(wide = cts__stacks_widen(s, stat)))
    return -ENOMEM;
  cts_stacks_settle_peak(s, stat);
  if (CTS_UNLIKELY(++fig->allocs == 0)) wide->allocs++;
  if (CTS_UNLIKELY(++fig->live_allocs == 0)) cts_stacks_wide(s, stat)->live_allocs++;
  fig->samples += samples;
  fig->est_allocs += est;
  fig->live_samples += samples;
  fig->live_est_allocs += est;
  /* Without node peaks the epoch stays: no record saves its figures at a peak. */
  if (cts__stacks_heap_add(s, cts_stacks_site_memo(s, node_index), samples, time_us) &&
      !s->no_node_peaks)
    cts__stacks_next_epoch(s);
  return 0;
}

/* An allocation of samples with weight est at node of a lean trie (cts_stacks_set_lean),
 * counted in its allocated figures (allocs, samples, est_allocs; sites untouched), for a
 * profile that keeps no live figures (cts_alloc_profile_config_t.allocated_only): 0, or
 * -ENOMEM (nothing counted) when the count is about to pass 2^32 and the record of its high
 * half cannot be made. No cts_stacks_reserve needed: one load of the record does both. */
static inline int cts_stacks_alloc_allocated(cts_stacks_t *s, uint32_t node_index, uint64_t samples,
                                             double est) {
  const uint32_t stat = s->nodes[node_index].stat;
  cts_stack_lean_t *fig = &s->lean[stat];
  if (CTS_UNLIKELY(fig->allocs == UINT32_MAX)) {
    cts_stack_wide_t *w = cts__stacks_widen(s, stat);
    if (!w) return -ENOMEM;
    w->allocs++;
  }
  fig->allocs++;
  fig->samples += samples;
  fig->est_allocs += est;
  return 0;
}

/* An allocation of samples with weight est at node of a trie that keeps live figures by
 * site (cts_stacks_set_live_by_site), site being the node's (cts_stacks_site, asked once by
 * the caller, which keeps it for the free): into the node's allocated figures, its site's
 * live samples (and their peak) and the heap's live total and peak. cts_stacks_reserve
 * first, as for cts_stacks_alloc. */
static inline void cts_stacks_alloc_by_site(cts_stacks_t *s, uint32_t node_index, uint32_t site,
                                            uint64_t samples, double est, uint64_t time_us) {
  (void)cts_stacks_alloc_allocated(s, node_index, samples, est); /* reserved: cannot fail */
  if (cts__stacks_heap_add(s, site, samples, time_us)) cts__stacks_next_epoch(s);
}

/* cts_stacks_reserve for a trie that keeps live figures by site (lean records): the node's
 * record, or NULL (-ENOMEM) when its count of allocations is about to pass 2^32 and the
 * record of its high half cannot be made. With *stat, for cts_stacks_alloc_lean_record: the
 * node and the record's address are loaded once an allocation rather than twice (on
 * gen_trace's default shape each is a likely cache miss, and the reload cost ~8
 * instructions an allocation). */
static inline cts_stack_lean_t *cts_stacks_reserve_lean(cts_stacks_t *s, uint32_t node_index,
                                                        uint32_t *stat) {
  *stat = s->nodes[node_index].stat;
  cts_stack_lean_t *fig = &s->lean[*stat];
  if (CTS_LIKELY(fig->allocs != UINT32_MAX)) return fig;
  return cts__stacks_widen(s, *stat) ? fig : NULL;
}

/* The part of cts_stacks_alloc_lean_record that is not the node's record: the site's live
 * samples (and their peak) and the heap's live total and peak, for a caller that adds the
 * record's figures later (alloc_profile.c's held figures). */
static inline void cts_stacks_alloc_site(cts_stacks_t *s, uint32_t site, uint64_t samples,
                                         uint64_t time_us) {
  if (cts__stacks_heap_add(s, site, samples, time_us)) cts__stacks_next_epoch(s);
}

/* cts_stacks_alloc_by_site with the node's record from cts_stacks_reserve_lean (fig, at
 * index stat): the same figures. Cannot fail. */
static inline void cts_stacks_alloc_lean_record(cts_stacks_t *s, cts_stack_lean_t *fig,
                                                uint32_t stat, uint32_t site, uint64_t samples,
                                                double est, uint64_t time_us) {
  /* Reserved: a carry finds the high halves' record made. */
  if (CTS_UNLIKELY(fig->allocs == UINT32_MAX)) cts_stacks_wide(s, stat)->allocs++;
  fig->allocs++;
  fig->samples += samples;
  fig->est_allocs += est;
  cts_stacks_alloc_site(s, site, samples, time_us);
}

/* The block allocated with those figures at node was freed. */
static inline void cts_stacks_free(cts_stacks_t *s, uint32_t node_index, uint64_t samples,
                                   double est) {
  const cts_stack_node_t *node = &s->nodes[node_index];
  const uint32_t stat = node->stat;
  cts_stack_stat_t *fig = &s->stats[stat];
  cts_stacks_settle_peak(s, stat);
  /* A borrow from the high half: the block was counted, so the high half exists. */
  if (CTS_UNLIKELY(fig->live_allocs-- == 0)) cts_stacks_wide(s, stat)->live_allocs--;
  fig->live_samples -= samples;
  fig->live_est_allocs -= est;
  const cts_stack_wide_t *w = CTS_UNLIKELY(s->wide_count) ? cts_stacks_wide(s, stat) : NULL;
  if (fig->live_allocs == 0 && !(w && w->live_allocs))
    fig->live_est_allocs = 0; /* no rounding residue */
  cts__stacks_heap_sub(s, cts_stacks_site_memo(s, node_index), samples);
}

/* The same two for a trie whose nodes' live figures are made once the trace is read, from
 * the blocks still live then (cts_stacks_add_live), for views that never look at them
 * before (cts_alloc_profile_config_t.live_at_end; no_node_peaks required). An allocation
 * counts in its node's allocated figures, its site's live samples and the heap's live total
 * and peak; a free in the last two only: the free no longer loads its node's record, and
 * the allocation saves the record's live and peak updates. cts_stacks_reserve first, as for
 * cts_stacks_alloc. */
static inline void cts_stacks_alloc_at_end(cts_stacks_t *s, uint32_t node_index, uint64_t samples,
                                           double est, uint64_t time_us) {
  const cts_stack_node_t *node = &s->nodes[node_index];
  const uint32_t stat = node->stat;
  cts_stack_stat_t *fig = &s->stats[stat];
  /* Reserved: a carry finds the high halves' record made. */
  if (CTS_UNLIKELY(++fig->allocs == 0)) cts_stacks_wide(s, stat)->allocs++;
  fig->samples += samples;
  fig->est_allocs += est;
  (void)cts__stacks_heap_add(s, cts_stacks_site_memo(s, node_index), samples, time_us);
}

/* cts_stacks_free_at_end, the node's site known (UINT32_MAX: none). */
static inline void cts_stacks_free_site(cts_stacks_t *s, uint32_t site, uint64_t samples) {
  cts__stacks_heap_sub(s, site, samples);
}

static inline void cts_stacks_free_at_end(cts_stacks_t *s, uint32_t node_index, uint64_t samples) {
  /* Without sites, the free loads nothing of the node (a likely cache miss). */
  cts__stacks_heap_sub(s, cts_stacks_site_memo(s, node_index), samples);
}

/* A block of samples with weight est, allocated at node by cts_stacks_alloc_at_end and live
 * at the end: into the node's live figures. Call for each such block once the trace is
 * read, before cts_stacks_finish. Inline: on a trace whose blocks survive, once a block. */
static inline void cts_stacks_add_live(cts_stacks_t *s, uint32_t node_index, uint64_t samples,
                                       double est) {
  const uint32_t stat = s->nodes[node_index].stat;
  cts_stack_stat_t *fig = &s->stats[stat];
  /* A carry: the node allocated more than 2^32 blocks, so its high halves' record exists. */
  if (CTS_UNLIKELY(++fig->live_allocs == 0)) cts_stacks_wide(s, stat)->live_allocs++;
  fig->live_samples += samples;
  fig->live_est_allocs += est;
}

/* Settles the lazy snapshots: after this, the peak_* figures of every node hold their values at the
 * peak. Call once when the trace is read; no alloc/free afterwards. */
void cts_stacks_finish(cts_stacks_t *s);

/* Live samples of site at time t (origin ≤ t ≤ last time seen), from the checkpoint at or
 * before t (0 before the first checkpoint); at or after the last event, the current value.
 * Its resolution is the checkpoint spacing, at most 1/32 of the trace's duration. */
uint64_t cts_site_live_at(const cts_stacks_t *s, uint32_t site, uint64_t t_us, uint64_t end_us);

/* Sums b into a. */
void cts_site_stats_add(cts_site_stats_t *a, const cts_site_stats_t *b);

/* Fills incl[0..count) with the inclusive figures of each node (self + descendants). */
void cts_stacks_inclusive(const cts_stacks_t *s, cts_site_stats_t *incl);

#endif /* CTS_SITES_H */
