/* SPDX-License-Identifier: MIT */
#include "sites.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <ctfscope/errors.h>

#include "common/check.h"
#include "common/grow.h"
#include "common/hash.h"

#define FIRST_SPACING_US 1u /* doubles as needed: at most 1/32 of the trace */
#define MAX_SPACING_US   (1ull << 56)

static inline uint64_t hash_of(uint32_t parent, uint64_t code) {
  /* Probed once per frame of every allocation: one multiply folds the parent in. */
  return cts_mix64(code ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull));
}

/* A node's tag is the hash's high half: its home slot is the tag's low bits (the table has
 * at most 2^31 slots). */
static inline uint32_t tag_of(uint64_t h) {
  return (uint32_t)(h >> 32);
}

/* The tag of the node with code under a node whose key is parent_key: the parent's index, or
 * with path_keys its path's tag (the root's is 0 either way). Chained down a path, each
 * frame's tag follows from the codes alone. */
static inline uint32_t child_tag(uint32_t parent_key, uint64_t code) {
  return tag_of(hash_of(parent_key, code));
}

/* Nodes whose path tags path_tag_of makes in one walk up. */
#define PATH_TAG_CHUNK 64u

/* Path tags of nodes met lately, by the node's low bits (node 0 = empty: the root's tag is
 * 0). */
#define PATH_TAG_MEMO (1u << 16)
typedef struct path_tag_memo {
  uint32_t node, tag;
} path_tag_memo_t;

/* The tag of node's path (path_keys): a walk up to the root or to a node in memo (if any),
 * the last PATH_TAG_CHUNK nodes met (the highest) kept and their tags made downwards (and
 * put in memo); again from node up to the lowest of them while it is not node. O(depth), and
 * more only for stacks over PATH_TAG_CHUNK deep. */
static uint32_t path_tag_of(const cts_stacks_t *s, uint32_t node, path_tag_memo_t *memo,
                            uint64_t *walked, uint64_t walk_budget) {
  uint32_t known = 0, known_tag = 0; /* the root */
  while (known != node) {
    uint32_t chain[PATH_TAG_CHUNK];
    uint32_t met = 0;
    for (uint32_t n = node; n != known; n = s->nodes[n].parent) {
      if (walked && ++*walked > walk_budget) return 0; /* the caller gives up */
      const path_tag_memo_t *m = memo ? &memo[n & (PATH_TAG_MEMO - 1u)] : NULL;
      if (m && m->node == n) {
        known = n;
        known_tag = m->tag;
        break;
      }
      chain[met++ % PATH_TAG_CHUNK] = n;
    }
    /* chain holds the last min(met, CHUNK) met, the highest last. */
    const uint32_t kept = met < PATH_TAG_CHUNK ? met : PATH_TAG_CHUNK;
    for (uint32_t k = 0; k < kept; k++) {
      const uint32_t n = chain[(met - 1 - k) % PATH_TAG_CHUNK];
      known_tag = child_tag(known_tag, s->nodes[n].code);
      known = n;
      if (memo) memo[n & (PATH_TAG_MEMO - 1u)] = (path_tag_memo_t){n, known_tag};
    }
  }
  return known_tag;
}

/* The tag of parent's child with code in s's table. */
static inline uint32_t key_tag(const cts_stacks_t *s, uint32_t parent, uint64_t code) {
  /* (A parent that is no node has no child: any tag finds none.) */
  return child_tag(
      s->path_keys && parent < s->count ? path_tag_of(s, parent, NULL, NULL, 0) : parent, code);
}

/* A table slot is 4 bytes: the node's index in its low bits (as many as the table has slots:
 * a node's index is below the count, which stays below the table's size), the tag's bits
 * above those (the ones its home slot does not give) in the rest, so that most probes of a
 * node that is not the one sought compare the slot alone and load no node. 0 = empty (node 0,
 * the root, is never in the table). On gen_trace's 1 GB default shape, 2^24 slots: 64 MiB
 * rather than the 128 MiB of 8-byte (node, tag) slots. */
static inline uint32_t slot_of(uint32_t node, uint32_t tag, uint32_t cap) {
  return node | (tag & ~(cap - 1u));
}
static inline bool slot_has_tag(uint32_t slot, uint32_t tag, uint32_t cap) {
  return ((slot ^ tag) & ~(cap - 1u)) == 0;
}

int cts_stacks_init(cts_stacks_t *s, bool history, uint64_t origin_us) {
  memset(s, 0, sizeof *s);
  cts_u64map_init(&s->site_of_code);
  s->history = history;
  s->history_origin_us = origin_us;
  s->history_spacing_us = FIRST_SPACING_US;
  s->cap = 1024;
  s->nodes = calloc(s->cap, sizeof *s->nodes);
  s->table_cap = 2048;
  s->table = calloc(s->table_cap, sizeof *s->table);
  s->memo = calloc(CTS_STACKS_MEMO, sizeof *s->memo);
  s->hint = calloc(CTS_STACKS_HINTS, sizeof *s->hint);
  s->site_memo = calloc(CTS_STACKS_SITE_MEMO, sizeof *s->site_memo);
  s->stat_cap = 1024;
  s->stats = calloc(s->stat_cap, sizeof *s->stats);
  if (!s->nodes || !s->table || !s->memo || !s->hint || !s->site_memo || !s->stats) {
    cts_stacks_fini(s);
    return -ENOMEM;
  }
  s->count = 1;      /* the root */
  s->stat_count = 1; /* the shared all-zero figures */
  /* The root's own figures: allocations without stacks (cts_alloc_profile without them). */
  s->nodes[0].stat = 1;
  s->stat_count = 2;
  return 0;
}

void cts_stacks_fini(cts_stacks_t *s) {
  for (uint32_t i = 0; i < s->site_count; i++) free(s->sites[i].history);
  free(s->sites);
  free(s->nodes);
  free(s->stats);
  free(s->lean);
  free(s->wide);
  free(s->table);
  free(s->memo);
  free(s->site_memo);
  free(s->hint);
  free(s->prev_nodes);
  free(s->prev_tags);
  cts_u64map_fini(&s->site_of_code);
  memset(s, 0, sizeof *s);
}

void cts_stacks_key_by_path(cts_stacks_t *s) {
  CTS_ASSERT(s->count == 1);
  s->path_keys = true;
}

/* Parent's child with code, whose tag in the table is tag, or UINT32_MAX. */
static uint32_t find_tagged(const cts_stacks_t *s, uint32_t parent, uint64_t code, uint32_t tag) {
  const uint32_t cap = s->table_cap;
  for (size_t i = tag & (cap - 1u);; i = (i + 1) & (cap - 1u)) {
    const uint32_t slot = s->table[i];
    if (!slot) break;
    if (!slot_has_tag(slot, tag, cap)) continue;
    const uint32_t node = slot & (cap - 1u);
    const cts_stack_node_t *n = &s->nodes[node];
    if (n->code == code && n->parent == parent) return node;
  }
  /* Not in the table: maybe one of the newest nodes, whose slots are not written yet (their
   * records are at the end of the nodes, in cache). */
  for (uint32_t k = 0; k < s->pending_count; k++) {
    const cts_stack_tslot_t *p = &s->pending[(s->pending_head + k) % CTS_STACKS_PENDING];
    if (p->tag != tag) continue;
    const cts_stack_node_t *n = &s->nodes[p->node];
    if (n->code == code && n->parent == parent) return p->node;
  }
  return UINT32_MAX;
}

uint32_t cts_stacks_find_child(const cts_stacks_t *s, uint32_t parent, uint64_t code) {
  if (CTS_UNLIKELY(!s->table)) {
    /* Dropped: a const look-up cannot rebuild it, so it reads the nodes (rare: views that
     * dropped the table do not look up). */
    for (uint32_t i = 1; i < s->count; i++)
      if (s->nodes[i].code == code && s->nodes[i].parent == parent) return i;
    return UINT32_MAX;
  }
  return find_tagged(s, parent, code, key_tag(s, parent, code));
}

uint32_t cts_stacks_find_child_down(const cts_stacks_t *s, uint32_t parent, uint64_t code,
                                    uint32_t *path_tag) {
  const uint32_t tag = child_tag(s->path_keys ? *path_tag : parent, code);
  *path_tag = tag;
  if (CTS_UNLIKELY(!s->table)) return cts_stacks_find_child(s, parent, code);
  return find_tagged(s, parent, code, tag);
}

void *cts_table_alloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  const size_t huge = (size_t)2 << 20;
  size_t bytes = n * size;
  if (bytes < 4 * huge) return calloc(n ? n : 1, size ? size : 1);
  bytes = (bytes + huge - 1) / huge * huge; /* aligned_alloc: a multiple of the alignment */
  void *t = aligned_alloc(huge, bytes);
  if (!t) return NULL;
  (void)madvise(t, bytes, MADV_HUGEPAGE); /* only advice: fine if refused */
  memset(t, 0, bytes);
  return t;
}

/* A zeroed table of cap slots. A large one is probed at random once per new frame: on 2 MiB
 * pages (where the kernel allows them on request) those probes miss the TLB far less. */
static uint32_t *alloc_table(uint32_t cap) {
  return cts_table_alloc(cap, sizeof(uint32_t));
}

/* Puts node (of that tag, below cap) in table t of cap slots. */
static inline void put_slot(uint32_t *t, uint32_t cap, uint32_t node, uint32_t tag) {
  size_t j = tag & (cap - 1u);
  while (t[j]) j = (j + 1) & (cap - 1u);
  t[j] = slot_of(node, tag, cap);
}

/* Nodes whose home slots put_all fetches before it writes the first of them. */
#define PUT_AHEAD 16u

/* Puts nodes 1..count-1 in table t of cap slots (cap above count): their slots keep too few
 * of the tag's bits to find their home in a larger table, so each node's hash is made again
 * from the node (read in order; with path_keys from its parent's path tag: the node before,
 * mostly, else through memo, not an array of every node's, which at the report's node budget
 * would be 40 MiB over its peak). The slots are written at random, each a cache miss in a
 * large table: a node's is fetched PUT_AHEAD nodes before it is written. */
static bool put_all(const cts_stacks_t *s, uint32_t *t, uint32_t cap, path_tag_memo_t *memo,
                    uint32_t *path_tags, uint64_t *walked, uint64_t walk_budget) {
  uint32_t tags[PUT_AHEAD];
  uint32_t last_tag = 0; /* node n - 1's path tag */
  for (uint32_t n = 1; n < s->count; n++) {
    const cts_stack_node_t *node = &s->nodes[n];
    uint32_t key = node->parent;
    if (path_tags) {
      key = path_tags[node->parent];
    } else if (memo) {
      key = node->parent == n - 1 ? last_tag
                                  : path_tag_of(s, node->parent, memo, walked, walk_budget);
      if (CTS_UNLIKELY(*walked > walk_budget)) return false;
    }
    const uint32_t tag = child_tag(key, node->code);
    if (path_tags) path_tags[n] = tag;
    if (memo) {
      memo[n & (PATH_TAG_MEMO - 1u)] = (path_tag_memo_t){n, tag};
      last_tag = tag;
    }
    __builtin_prefetch(&t[tag & (cap - 1u)], 1);
    if (n > PUT_AHEAD) put_slot(t, cap, n - PUT_AHEAD, tags[n % PUT_AHEAD]);
    tags[n % PUT_AHEAD] = tag;
  }
  const uint32_t first = s->count > PUT_AHEAD ? s->count - PUT_AHEAD : 1u;
  for (uint32_t n = first; n < s->count; n++) put_slot(t, cap, n, tags[n % PUT_AHEAD]);
  return true;
}

/* Nodes put_all may walk up per node through the memo before fill_table gives up on it. */
#define PATH_WALK_PER_NODE 16u

/* Fills table t of cap slots (all empty) with every node (put_all): false if out of memory.
 * With path_keys, the memo's walks up are bounded: deep stacks whose branches' parents have
 * left the memo (a branch under the bottom of a long spine, met after 64 Ki other nodes, or
 * two spines taking turns at one memo entry, which a trace can aim for) cost a walk to the
 * root each, so past PATH_WALK_PER_NODE nodes walked per node the table is made again from
 * an array of every node's tag (4 bytes a node, freed at once): linear, whatever the depth.
 * s->rehash_walked counts the nodes walked (tests). */
static bool fill_table(cts_stacks_t *s, uint32_t *t, uint32_t cap) {
  if (!s->path_keys) return put_all(s, t, cap, NULL, NULL, NULL, 0);
  path_tag_memo_t *memo = calloc(PATH_TAG_MEMO, sizeof *memo);
  if (!memo) return false;
  uint64_t walked = 0;
  const bool done = put_all(s, t, cap, memo, NULL, &walked,
                            (uint64_t)s->count * PATH_WALK_PER_NODE + PATH_TAG_MEMO);
  free(memo);
  s->rehash_walked += walked;
  if (done) return true;
  memset(t, 0, (size_t)cap * sizeof *t);
  uint32_t *path_tags = malloc((size_t)s->count * sizeof *path_tags);
  if (!path_tags) return false;
  path_tags[0] = 0; /* the root's */
  put_all(s, t, cap, NULL, path_tags, NULL, 0);
  free(path_tags);
  return true;
}

/* Node n (of that tag) into the table later: its slot is fetched now and written once
 * CTS_STACKS_PENDING more nodes came this way. A node made under a node just made (the
 * frames of a new stack past its first new one) is otherwise a cache miss on the spot in a
 * large trie (~5.4 M of the 8.5 M nodes of gen_trace's default shape), while its slot is
 * not read until the path is asked for again, mostly through the hints or the memo. */
static void put_later(cts_stacks_t *s, uint32_t n, uint32_t tag) {
  __builtin_prefetch(&s->table[tag & (s->table_cap - 1u)], 1);
  if (s->pending_count < CTS_STACKS_PENDING) {
    s->pending[(s->pending_head + s->pending_count++) % CTS_STACKS_PENDING] =
        (cts_stack_tslot_t){n, tag};
    return;
  }
  cts_stack_tslot_t *oldest = &s->pending[s->pending_head];
  put_slot(s->table, s->table_cap, oldest->node, oldest->tag);
  *oldest = (cts_stack_tslot_t){n, tag};
  s->pending_head = (s->pending_head + 1) % CTS_STACKS_PENDING;
}

static bool grow_table(cts_stacks_t *s) {
  if (s->table_cap >= (1u << 31)) return false;
  const uint32_t cap = s->table_cap * 2;
  /* The new table is made from the nodes, not the old one: that goes first, so that the
   * peak holds one table, not both (on gen_trace's 1 GB default shape 64 + 32 MiB at the
   * last doubling). Out of memory, the trie is left as after cts_stacks_drop_table. */
  cts_stacks_drop_table(s);
  uint32_t *t = alloc_table(cap);
  if (!t) return false;
  if (!fill_table(s, t, cap)) {
    free(t);
    return false;
  }
  s->table = t;
  s->table_cap = cap;
  return true;
}

void cts_stacks_drop_table(cts_stacks_t *s) {
  s->pending_head = s->pending_count = 0; /* a rebuilt table has every node */
  /* Without the table the nodes may be renumbered (cts_stacks_relabel_merge_in_place). */
  s->absent_valid = false;
  s->overflow_node = 0;
  free(s->table);
  s->table = NULL;
  s->table_cap = 0;
}

void *cts_stacks_lend_table(cts_stacks_t *s, size_t *bytes) {
  uint32_t *t = s->table;
  *bytes = (size_t)s->table_cap * sizeof *t;
  s->pending_head = s->pending_count = 0; /* the table given back gets every node */
  s->table = NULL;
  s->table_cap = 0;
  return t;
}

void cts_stacks_restore_table(cts_stacks_t *s, void *table, size_t bytes) {
  const uint32_t cap = (uint32_t)(bytes / sizeof *s->table);
  if (!table) return;
  /* A table made again meanwhile (nodes came) stays; the lent one would be too full. */
  if (s->table || (uint64_t)s->count * 10 > (uint64_t)cap * 7) {
    free(table);
    return;
  }
  memset(table, 0, bytes);
  if (!fill_table(s, table, cap)) {
    free(table); /* made again when a node is interned (rebuild_table) */
    return;
  }
  s->table = table;
  s->table_cap = cap;
}

/* Makes the table again after cts_stacks_drop_table: false if out of memory. */
static bool rebuild_table(cts_stacks_t *s) {
  uint32_t cap = 2048;
  while ((uint64_t)s->count * 10 > (uint64_t)cap * 5) cap *= 2; /* load at most 0.5 */
  uint32_t *t = alloc_table(cap);
  if (!t) return false;
  if (!fill_table(s, t, cap)) {
    free(t);
    return false;
  }
  s->table = t;
  s->table_cap = cap;
  return true;
}

/* The site of code, made for node if new. */
static int site_for_code(cts_stacks_t *s, uint64_t code, uint32_t node, uint32_t *site) {
  bool added;
  uint64_t *v = cts_u64map_insert(&s->site_of_code, code, s->site_count, &added);
  if (!v) return -ENOMEM;
  if (!added) {
    *site = (uint32_t)*v;
    return 0;
  }
  if (cts_grow((void **)&s->sites, &s->site_cap, s->site_count, sizeof *s->sites)) goto nomem;
  cts_site_t *st = &s->sites[s->site_count];
  memset(st, 0, sizeof *st);
  st->code = code;
  st->first_node = node;
  st->peak_epoch = s->peak_epoch; /* it held nothing at any earlier peak */
  if (s->history) {
    st->history = calloc(CTS_SITE_CHECKPOINTS, sizeof *st->history);
    if (!st->history) goto nomem;
    /* A new site was empty at every checkpoint already passed. */
    st->checkpoints_done = s->checkpoints_passed;
  }
  *site = s->site_count++;
  return 0;
nomem:
  cts_u64map_remove(&s->site_of_code, code);
  return -ENOMEM;
}

/* A new node, child of parent with code, of that tag in the table (key_tag): its slot written
 * now, or with put_later if later. */
static int new_node(cts_stacks_t *s, uint32_t parent, uint64_t code, uint32_t tag, bool later,
                    uint32_t *out) {
  if (s->count >= UINT32_MAX / 2) return CTS_E_LIMIT;
  if ((uint64_t)(s->count + 1) * 10 > (uint64_t)s->table_cap * 7 && !grow_table(s)) return -ENOMEM;
  if (s->count == s->cap) {
    /* Grow by half: with millions of nodes, doubling would overshoot memory by far; and
     * never past the budget (+ the few overflow nodes per site), which is likely reached. */
    uint32_t cap = s->cap + s->cap / 2;
    if (s->max_nodes && cap > s->max_nodes && s->count < s->max_nodes) cap = (uint32_t)s->max_nodes;
    cts_stack_node_t *nodes = realloc(s->nodes, cap * sizeof *nodes);
    if (!nodes) return -ENOMEM;
    s->nodes = nodes;
    s->cap = cap;
  }
  /* The frame known absent has a node now. */
  if (CTS_UNLIKELY(s->absent_valid) && parent == s->absent_parent && code == s->absent_code)
    s->absent_valid = false;
  const uint32_t n = s->count++;
  cts_stack_node_t *node = &s->nodes[n];
  memset(node, 0, sizeof *node);
  node->code = code;
  node->parent = parent;
  if (later)
    put_later(s, n, tag);
  else
    put_slot(s->table, s->table_cap, n, tag);
  *out = n;
  return 0;
}

_Static_assert(sizeof(cts_stack_lean_t) <= 24, "a lean record is 20 bytes (24 unpacked)");

int cts_stacks_set_lean(cts_stacks_t *s) {
  CTS_ASSERT(s->count == 1 && s->stat_count == 2 && !s->lean);
  cts_stack_lean_t *lean = calloc(s->stat_cap, sizeof *lean);
  if (!lean) return -ENOMEM;
  /* Records 0 (the shared zero) and 1 (the root's) are zero in both forms. */
  free(s->stats);
  s->stats = NULL;
  s->lean = lean;
  return 0;
}

int cts_stacks_set_live_by_site(cts_stacks_t *s) {
  CTS_ASSERT(!s->no_sites);
  const int e = cts_stacks_set_lean(s);
  if (!e) s->live_by_site = true;
  return e;
}

/* Room for one more node record in *v (s->stat_cap records of size bytes), grown by half as
 * the nodes are: millions of them, where doubling would overshoot by hundreds of MB. False
 * if out of memory (s->stat_cap unchanged). */
static bool grow_records(cts_stacks_t *s, void **v, size_t size) {
  const size_t c = s->stat_cap + s->stat_cap / 2;
  void *p = realloc(*v, c * size);
  if (!p) return false;
  *v = p;
  s->stat_cap = c;
  return true;
}

/* Gives node its own lean record (zero), the trie's stat_count below its cap. */
static bool own_lean(cts_stacks_t *s, uint32_t node) {
  if (s->stat_count == s->stat_cap && !grow_records(s, (void **)&s->lean, sizeof *s->lean))
    return false;
  s->lean[s->stat_count] = (cts_stack_lean_t){0};
  s->nodes[node].stat = (uint32_t)s->stat_count++;
  return true;
}

/* Gives node its own figures (zero) if it has none: false if out of memory. */
static bool own_stat(cts_stacks_t *s, uint32_t node) {
  if (s->nodes[node].stat) return true;
  if (s->stat_count >= UINT32_MAX / 2) return false;
  if (s->lean) return own_lean(s, node);
  if (s->stat_count == s->stat_cap && !grow_records(s, (void **)&s->stats, sizeof *s->stats))
    return false;
  cts_stack_stat_t *st = &s->stats[s->stat_count];
  memset(st, 0, sizeof *st);
  st->peak_epoch = s->peak_epoch; /* it held nothing at any earlier peak */
  s->nodes[node].stat = (uint32_t)s->stat_count++;
  return true;
}

uint32_t *cts_stacks_depths(const cts_stacks_t *s) {
  uint32_t *depths = malloc((size_t)(s->count ? s->count : 1) * sizeof *depths);
  if (!depths) return NULL;
  depths[0] = 0;
  for (uint32_t i = 1; i < s->count; i++) depths[i] = depths[s->nodes[i].parent] + 1;
  return depths;
}

cts_stack_wide_t *cts_stacks_wide(const cts_stacks_t *s, uint32_t stat) {
  for (uint32_t i = 0; i < s->wide_count; i++)
    if (s->wide[i].stat == stat) return &s->wide[i];
  return NULL;
}

cts_stack_wide_t *cts__stacks_widen(cts_stacks_t *s, uint32_t stat) {
  cts_stack_wide_t *w = cts_stacks_wide(s, stat);
  if (w) return w;
  if (cts_grow((void **)&s->wide, &s->wide_cap, s->wide_count, sizeof *s->wide)) return NULL;
  w = &s->wide[s->wide_count++];
  *w = (cts_stack_wide_t){.stat = stat};
  return w;
}

void cts__stacks_restart_epochs(cts_stacks_t *s) {
  /* The heap is at a new peak now: every record's (or by site, every site's) live figures
   * are its peak ones. */
  for (size_t i = 1; !s->lean && i < s->stat_count; i++) {
    cts_stacks_save_peak(s, (uint32_t)i);
    s->stats[i].peak_epoch = 0;
  }
  for (uint32_t i = 0; s->live_by_site && i < s->site_count; i++) {
    s->sites[i].peak_samples = s->sites[i].live_samples;
    s->sites[i].peak_epoch = 0;
  }
  s->peak_epoch = 0;
}

int cts_stacks_add_self(cts_stacks_t *s, uint32_t node, const cts_site_stats_t *add) {
  CTS_ASSERT(!s->lean);
  if (!own_stat(s, node)) return -ENOMEM;
  const uint32_t stat = s->nodes[node].stat;
  const cts_site_stats_t old = cts_stacks_self(s, node);
  const uint64_t allocs = old.allocs + add->allocs, live = old.live_allocs + add->live_allocs,
                 peak = old.peak_allocs + add->peak_allocs;
  cts_stack_wide_t *w = cts_stacks_wide(s, stat);
  if (!w && (allocs | live | peak) >> 32 && !(w = cts__stacks_widen(s, stat))) return -ENOMEM;
  cts_stack_stat_t *f = &s->stats[stat];
  f->allocs = (uint32_t)allocs;
  f->live_allocs = (uint32_t)live;
  f->peak_allocs = (uint32_t)peak;
  if (w)
    *w = (cts_stack_wide_t){stat, (uint32_t)(allocs >> 32), (uint32_t)(live >> 32),
                            (uint32_t)(peak >> 32)};
  f->samples += add->samples;
  f->est_allocs += add->est_allocs;
  f->live_samples += add->live_samples;
  f->live_est_allocs += add->live_est_allocs;
  f->peak_samples += add->peak_samples;
  f->peak_est_allocs += add->peak_est_allocs;
  return 0;
}

/* Gives node (of that code) its site, then its own figures if it has none: 0 or -ENOMEM. In
 * that order, so that a node with figures has its site (cts_stacks_site, the memo's fast
 * path) even when memory ran out between the two. */
static int own_sited_stat(cts_stacks_t *s, uint32_t node, uint64_t code) {
  if (!s->no_sites) {
    uint32_t site;
    const int e = site_for_code(s, code, node, &site);
    if (e) return e;
  }
  return own_stat(s, node) ? 0 : -ENOMEM;
}

static int intern_tagged(cts_stacks_t *s, uint32_t parent, uint64_t code, uint32_t tag,
                         uint32_t *node);

/* A stack past the node budget: root → overflow → last frame (a few nodes per site). */
static int intern_overflow(cts_stacks_t *s, uint64_t leaf, uint32_t *node) {
  /* The overflow node's tag and key are known without a walk up (the root's child). */
  const uint32_t over_tag = child_tag(0, CTS_STACKS_OVERFLOW_CODE);
  uint32_t over = s->overflow_node, n;
  int e = over ? 0 : intern_tagged(s, 0, CTS_STACKS_OVERFLOW_CODE, over_tag, &over);
  if (!e) {
    s->overflow_node = over;
    e = intern_tagged(s, over, leaf, child_tag(s->path_keys ? over_tag : over, leaf), &n);
  }
  if (e) return e;
  if (!s->nodes[n].stat && (e = own_sited_stat(s, n, leaf)) != 0) return e;
  s->overflowed++;
  *node = n;
  return 0;
}

int cts_stacks_intern_child(cts_stacks_t *s, uint32_t parent, uint64_t code, uint32_t *node) {
  return intern_tagged(s, parent, code, key_tag(s, parent, code), node);
}

/* cts_stacks_intern_child of a child whose tag in the table is tag (key_tag). */
static int intern_tagged(cts_stacks_t *s, uint32_t parent, uint64_t code, uint32_t tag,
                         uint32_t *node) {
  if (CTS_UNLIKELY(!s->table) && !rebuild_table(s)) return -ENOMEM;
  /* The node made last has no child yet (a child's index is above its parent's): a tree
   * copied parents first (cts_stacks_relabel, the report's call tree) makes most of its
   * nodes under it, with no look-up and their slots written later. */
  if (parent == s->count - 1) return new_node(s, parent, code, tag, true, node);
  const uint32_t found = find_tagged(s, parent, code, tag);
  if (found != UINT32_MAX) {
    *node = found;
    return 0;
  }
  return new_node(s, parent, code, tag, false, node);
}

int cts_stacks_intern(cts_stacks_t *s, const uint64_t *bt, size_t n, uint32_t *node) {
  return cts_stacks_intern_shared(s, bt, n, 0, node);
}

/* Whether hint h is parent's child with code (node 0, the root, is nobody's: an empty
 * hint). Its key, kept in it, answers without a look at the node: a deep stack's frames
 * past the shared prefix went one after another through a load of their node, a cache
 * miss in a trie of ~0.5 MB (python3's), where the hints' 64 KiB stay in cache. */
static inline bool is_child(const cts_stack_slot_t *h, uint32_t parent, uint64_t code) {
  return h->code == code && h->parent == parent && h->node;
}

/* Keeps node, cur's child with code, where the next backtraces look first. */
static void remember(cts_stacks_t *s, uint32_t cur, uint64_t code, uint32_t node) {
  s->memo[cts_stacks_memo_slot(cur, code)] =
      (cts_stack_slot_t){.code = code, .parent = cur, .node = node};
  cts_stack_slot_t *h = &s->hint[2 * (cur & (CTS_STACKS_HINTS / 2 - 1u))];
  h[1] = h[0];
  h[0] = (cts_stack_slot_t){.code = code, .parent = cur, .node = node};
}

/* The table's tag of frame i of bt, whose parent is node cur: with path_keys, the tags of
 * bt's path are made down to frame i (in s->prev_tags). */
static inline uint32_t frame_tag(cts_stacks_t *s, const uint64_t *bt, size_t i, uint32_t cur) {
  if (!s->path_keys) return child_tag(cur, bt[i]);
  uint32_t *tags = s->prev_tags;
  for (size_t k = s->prev_tagged; k <= i; k++) tags[k] = child_tag(k ? tags[k - 1] : 0, bt[k]);
  if (s->prev_tagged <= i) s->prev_tagged = i + 1;
  return tags[i];
}

/* Frames past a look-up's whose table slots are fetched before their own look-ups. */
#define FETCH_AHEAD 4u

/* With path_keys: the table slots of frames up to i + FETCH_AHEAD of bt (n frames), those not
 * fetched yet (from *fetched on), fetched now. */
static inline void fetch_ahead(cts_stacks_t *s, const uint64_t *bt, size_t i, size_t n,
                               size_t *fetched) {
  const size_t end = i + FETCH_AHEAD < n ? i + FETCH_AHEAD + 1 : n;
  if (*fetched < i) *fetched = i;
  for (; *fetched < end; ++*fetched)
    __builtin_prefetch(&s->table[frame_tag(s, bt, *fetched, 0) & (s->table_cap - 1u)]);
}

/* What child_slow did: the node of frame next, the last frame it interned (0 and an error
 * -ENOMEM or CTS_E_LIMIT, the node budget spent, if it failed). 16 bytes: returned in two
 * registers, so the caller's loop variables need no address. */
typedef struct slow_step {
  uint32_t node;
  int err;
  size_t next;
} slow_step_t;

/* Frame i of bt under cur when neither the hints nor the memo had it: through the table; or,
 * if it is new, it and every deeper frame as new nodes (a node made here has no child yet,
 * so the hints, the memo and the table, whose probes miss the cache in a large trie, are not
 * asked). Each is remembered for the next backtraces and its node put in prev_nodes. */
static CTS_NOINLINE slow_step_t child_slow(cts_stacks_t *s, const uint64_t *bt, size_t i, size_t n,
                                           uint32_t cur) {
  s->lookups++;
  uint32_t c = find_tagged(s, cur, bt[i], frame_tag(s, bt, i, cur));
  if (c != UINT32_MAX) {
    remember(s, cur, bt[i], c);
    s->prev_nodes[i] = c;
    return (slow_step_t){.node = c, .next = i};
  }
  /* The first new node's slot was just probed (in cache): written now; the deeper ones',
   * under a node just made, later. */
  for (bool later = false;; cur = c, later = true) {
    const bool spent = s->max_nodes && s->count >= s->max_nodes;
    const int e =
        spent ? CTS_E_LIMIT : new_node(s, cur, bt[i], frame_tag(s, bt, i, cur), later, &c);
    if (e) {
      if (spent) {
        s->absent_parent = cur;
        s->absent_code = bt[i];
        s->absent_valid = true;
      }
      s->prev_len = i; /* what is cached stays consistent */
      return (slow_step_t){.err = e, .next = i};
    }
    remember(s, cur, bt[i], c);
    s->prev_nodes[i] = c;
    if (++i == n) return (slow_step_t){.node = c, .next = n - 1};
  }
}

int cts_stacks_intern_shared(cts_stacks_t *s, const uint64_t *bt, size_t n, size_t shared,
                             uint32_t *node) {
  if (CTS_UNLIKELY(!s->table) && !rebuild_table(s)) return -ENOMEM;
  if (CTS_UNLIKELY(n > s->prev_cap)) {
    size_t cap = s->prev_cap ? s->prev_cap : 64;
    while (cap < n) cap *= 2;
    uint32_t *nodes = realloc(s->prev_nodes, cap * sizeof *nodes);
    if (!nodes) return -ENOMEM;
    s->prev_nodes = nodes;
    uint32_t *tags = realloc(s->prev_tags, cap * sizeof *tags);
    if (!tags) return -ENOMEM;
    s->prev_tags = tags;
    s->prev_cap = cap;
  }
  /* Locals: the stores below through uint32_t pointers could otherwise be taken for
   * changes of the trie's own fields, reloaded on every frame. nodes moves only when the
   * slow path makes a node. */
  const cts_stack_node_t *nodes = s->nodes;
  cts_stack_slot_t *hints = s->hint;
  uint32_t *prev = s->prev_nodes;
  const size_t limit = n < s->prev_len ? n : s->prev_len;
  size_t common = shared < limit ? shared : limit;
  /* Past the reader's prefix, frames may still match the previous path: the code of its
   * node at depth i is that backtrace's frame i. */
  while (common < limit && bt[common] == nodes[prev[common]].code) common++;
  uint32_t cur = common ? prev[common - 1] : 0;
  /* The previous path's tags stand for bt's up to common. */
  if (s->prev_tagged > common) s->prev_tagged = common;
  size_t fetched = 0; /* frames whose slots were fetched (fetch_ahead) */
  for (size_t i = common; i < n; i++) {
    const uint64_t code = bt[i];
    /* A stack goes down the paths earlier ones took: the child last found under this parent
     * is usually the one sought, checked against the node itself (code and parent in one
     * record) with no hash. Node 0 (the root) is no one's child: an empty hint. */
    cts_stack_slot_t *h = &hints[2 * (cur & (CTS_STACKS_HINTS / 2 - 1u))];
    uint32_t child = is_child(&h[0], cur, code)   ? h[0].node
                     : is_child(&h[1], cur, code) ? h[1].node
                                                  : 0;
    if (!child) {
      /* The memo next (a first frame past the shared prefix under a parent of many children
       * misses the hints), here rather than in a call: on some traces that is most
       * allocations. A large trie's table misses the cache on every probe, while the frames
       * allocations go through again and again (hot call paths) fit in the small
       * direct-mapped memo. Nodes are never removed, so a memo entry never goes stale. */
      s->memo_probes++;
      const cts_stack_slot_t *m = &s->memo[cts_stacks_memo_slot(cur, code)];
      child = m->code == code && m->parent == cur ? m->node : 0;
      if (child) h[0] = *m;
    }
    if (CTS_UNLIKELY(!child)) {
      /* Where the last stack cut for the budget stopped: cut there again, as child_slow
       * would after its look-up (the budget still spent: no node can be made). */
      if (s->absent_valid && cur == s->absent_parent && code == s->absent_code && s->max_nodes &&
          s->count >= s->max_nodes) {
        s->prev_len = i;
        return intern_overflow(s, bt[n - 1], node);
      }
      if (s->path_keys) {
        s->lookups_fetched_ahead += fetched > i;
        fetch_ahead(s, bt, i, n, &fetched);
      }
      const slow_step_t st = child_slow(s, bt, i, n, cur);
      if (st.err) return st.err != CTS_E_LIMIT ? st.err : intern_overflow(s, bt[n - 1], node);
      nodes = s->nodes;
      i = st.next;
      child = st.node;
    }
    cur = child;
    prev[i] = cur;
  }
  s->prev_len = n;
  /* The root has figures from the start (allocations without stacks), and its site only
   * once one comes: asked again for each (rare). */
  if (CTS_UNLIKELY(!nodes[cur].stat || !cur)) {
    const int e = own_sited_stat(s, cur, n ? bt[n - 1] : 0);
    if (e) return e;
  }
  *node = cur;
  return 0;
}

int cts__stacks_intern_leaf(cts_stacks_t *s, uint64_t code, uint32_t *node) {
  /* The inline path missed: the general one makes or completes the node. */
  return cts_stacks_intern_shared(s, &code, 1, 0, node);
}

static void halve_checkpoints(cts_stacks_t *s) {
  for (uint32_t i = 0; i < s->site_count; i++) {
    cts_site_t *st = &s->sites[i];
    cts_stacks_settle_site(s, st);
    /* Checkpoint j at (j + 1) × 2d is the old checkpoint 2j + 1 at (2j + 2) × d. */
    for (uint32_t j = 0; j < CTS_SITE_CHECKPOINTS / 2; j++) st->history[j] = st->history[2 * j + 1];
    st->checkpoints_done = CTS_SITE_CHECKPOINTS / 2;
  }
  s->checkpoints_passed = CTS_SITE_CHECKPOINTS / 2;
  s->history_spacing_us *= 2;
}

void cts_stacks_advance_time(cts_stacks_t *s, uint64_t time_us) {
  if (!s->history) return;
  const uint64_t rel = time_us > s->history_origin_us ? time_us - s->history_origin_us : 0;
  while (rel > (uint64_t)(s->checkpoints_passed + 1) * s->history_spacing_us) {
    if (s->checkpoints_passed + 1 == CTS_SITE_CHECKPOINTS) {
      if (s->history_spacing_us >= MAX_SPACING_US) return;
      s->checkpoints_passed++;
      halve_checkpoints(s);
    } else {
      s->checkpoints_passed++;
    }
  }
  /* Up to the next checkpoint, a call has nothing to do; past 2^64, never. */
  const uint64_t next = (uint64_t)(s->checkpoints_passed + 1) * s->history_spacing_us;
  if (__builtin_add_overflow(s->history_origin_us, next, &s->history_next_us))
    s->history_next_us = UINT64_MAX;
}

void cts_stacks_finish(cts_stacks_t *s) {
  if (!s->no_node_peaks && !s->lean) /* (else no record has anything to settle) */
    for (size_t i = 1; i < s->stat_count; i++) cts_stacks_settle_peak(s, (uint32_t)i);
  if (s->history)
    for (uint32_t i = 0; i < s->site_count; i++) cts_stacks_settle_site(s, &s->sites[i]);
  if (s->live_by_site)
    for (uint32_t i = 0; i < s->site_count; i++) cts_stacks_settle_site_peak(s, &s->sites[i]);
}

uint64_t cts_site_live_at(const cts_stacks_t *s, uint32_t site, uint64_t t_us, uint64_t end_us) {
  const cts_site_t *st = &s->sites[site];
  if (t_us >= end_us || !s->history) return st->live_samples;
  const uint64_t rel = t_us > s->history_origin_us ? t_us - s->history_origin_us : 0;
  uint64_t k = rel / s->history_spacing_us; /* checkpoints at or before t: 0..k-1 */
  if (k > s->checkpoints_passed) k = s->checkpoints_passed;
  if (k == 0) return 0;
  return k - 1 < st->checkpoints_done ? st->history[k - 1] : st->live_samples;
}

void cts_site_stats_add(cts_site_stats_t *a, const cts_site_stats_t *b) {
  a->allocs += b->allocs;
  a->samples += b->samples;
  a->est_allocs += b->est_allocs;
  a->live_allocs += b->live_allocs;
  a->live_samples += b->live_samples;
  a->live_est_allocs += b->live_est_allocs;
  a->peak_allocs += b->peak_allocs;
  a->peak_samples += b->peak_samples;
  a->peak_est_allocs += b->peak_est_allocs;
  a->collected_allocs += b->collected_allocs;
  a->collected_samples += b->collected_samples;
}

void cts_stacks_inclusive(const cts_stacks_t *s, cts_site_stats_t *incl) {
  for (uint32_t i = 0; i < s->count; i++) incl[i] = cts_stacks_self(s, i);
  for (uint32_t i = s->count; i-- > 1;) cts_site_stats_add(&incl[s->nodes[i].parent], &incl[i]);
}
