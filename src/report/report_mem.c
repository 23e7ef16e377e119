/* SPDX-License-Identifier: MIT */
/* The memory part of a report. One streaming pass (the same profile `top` builds, so the
 * figures are the same) plus, per event:
 *  - the live heap over time, as the largest value in each of at most HEAP_BUCKETS buckets;
 *  - allocation records for the viewer's filters: blocks grouped by (call-tree node,
 *    allocation time bucket, collection time bucket, size class, heap), with their samples
 *    and counts. Time buckets start at 1 µs (or as wide as opts.time_floor_us needs: a
 *    file's span, read from its packet headers first) and double (merging records)
 *    whenever the trace outgrows RECORD_BUCKETS of them or the records outgrow their
 *    budget; over the budget, size classes first become powers of two (the viewer's size
 *    filter then has that resolution). So the record count is bounded by the trace's
 *    shape, not by its length;
 *  - allocation times, for marks on the task timeline (merged in pairs when they outgrow
 *    their budget; not kept with opts.no_marks). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../analysis/alloc_profile_live.h"
#include "../analysis/hist.h"
#include "../common/check.h"
#include "../common/compiler.h"
#include "../analysis/load.h"
#include "../analysis/units.h"
#include "report.h"

#define HEAP_BUCKETS       4096u
#define RECORD_BUCKETS     1024u
#define MIN_RECORD_BUCKETS 32u        /* the budget never makes times coarser than this */
#define NEVER              UINT16_MAX /* collection bucket of a block still live at the end */
#define MAX_MARKS          (1u << 22) /* allocation times kept for the task timeline */
#define FRONT_BITS         12u        /* 4096 front slots of 32 bytes: 128 KiB, in L2 */
#define FRONT_RECORDS      (1u << 17) /* records from which collected blocks skip the front */
#define BURST              1024u      /* collected blocks held back, added together (burst_flush) */

_Static_assert(RECORD_BUCKETS < NEVER, "time buckets fit in 16 bits, below NEVER");
_Static_assert(CTS_HIST_BUCKETS <= UINT16_MAX, "size classes fit in 16 bits");

/* 32 bytes: the key (node, time buckets, size class, heap) and its figures. Time buckets
 * stay below RECORD_BUCKETS: on_event coarsens before any time reaches it. */
typedef struct record {
  uint32_t node;
  uint16_t ta, tf, size_class;
  uint8_t source;
  uint32_t page_node; /* (write_tree only: the page's node, by which records are sorted) */
  uint64_t samples, blocks;
} record_t;
_Static_assert(sizeof(record_t) == 32, "a record is 32 bytes (page_node in its padding)");

/* The index of the records of one allocation time bucket: open addressing, record index + 1
 * (0: empty). One table per bucket because blocks finish roughly in time order (the live
 * blocks at the end, by id; collected ones soon after they were made): the few KiB of the
 * current bucket's table stay in cache, where one table of every record missed on nearly
 * every probe (record_find was a third of the report's time on gen_trace --shape
 * survivors; keeping the keys in one table's slots, to spare the look at the record, did
 * not help: those records are recent, so in cache already). */
typedef struct ta_table {
  uint32_t *slot;
  uint32_t cap, n;
} ta_table_t;

/* A front slot: figures added to one key since the slot took it, not yet in recs[index]
 * (blocks 0: empty). A record's key and figures with the index in its padding: 32 bytes,
 * so that a slot is one cache line's half, never across two (at 40 bytes, half the slots
 * were: the slot's load is where finish_block waits most). */
typedef struct front_slot {
  uint32_t node;
  uint16_t ta, tf, size_class;
  uint8_t source;
  uint32_t index;
  uint64_t samples, blocks;
} front_slot_t;
_Static_assert(sizeof(front_slot_t) == 32, "a front slot is half a cache line");

struct report_mem {
  cts_mem_trace_t t;
  report_mem_opts_t opts;
  uint64_t origin_us;
  /* heap curve */
  uint64_t heap_w; /* µs per bucket: 2^heap_shift (a shift, not a division, per event) */
  unsigned heap_shift;
  uint64_t heap_max[HEAP_BUCKETS];
  bool heap_set[HEAP_BUCKETS];
  /* records */
  uint64_t rec_w; /* 2^rec_shift µs per record time bucket */
  unsigned rec_shift;
  record_t *recs;
  size_t nrecs, cap_recs;
  /* The records' index, one table per allocation time bucket (ta_table_t), NULL until the
   * first record. */
  ta_table_t *tables;
  uint32_t coarsenings;
  uint32_t remaps;           /* remap_records calls (tests) */
  uint32_t time_remaps;      /* those because the trace outgrew the time buckets (tests) */
  bool read_again;           /* opts.time_floor_us was not reached: read without it (tests) */
  uint32_t lent_coarsenings; /* coarsen_nodes made its figures in the trie's table (tests) */
  /* coarsen_nodes calls, and those that found the profile's figures held back (tests) */
  uint32_t tree_coarsenings, held_coarsenings;
  uint64_t remap_rehashes; /* keys a table's growth moved during a remap (tests) */
  uint64_t map_prefetches; /* allocations whose map entry prefetch_map_entry fetched (tests) */
  bool in_remap;
  bool size_octaves;    /* size classes by power of two (over the budget) */
  uint64_t tree_min;    /* page_tree's threshold (samples) */
  uint32_t tree_pruned; /* profile nodes drawn as part of their caller */
  /* Over the budget with times as coarse as they may get, records are by a coarser call
   * tree: rnode[n] is the node whose records stand for node n's (n itself, or its nearest
   * ancestor that allocated at least rec_min_samples so far when the map was made; nodes
   * created since map to their parent's). NULL: every node stands for itself. 4 bytes a
   * node, or 2 when at most 65536 nodes stand for others (as with the budget's default:
   * then 2-byte indexes into rtarget, the nodes that stand for others; 17 MB less at the
   * peak of gen_trace --mb 160's 8.46 M nodes). rnode_at reads it. */
  void *rnode;
  uint32_t *rtarget; /* NULL: rnode holds 4-byte nodes */
  size_t rnode_n, rnode_cap;
  uint64_t rec_min_samples;
  bool coarse_tree; /* rnode was ever set: the records are by a coarser tree */
  uint32_t key_gen; /* bumped whenever records are remapped: how keys are made changed */
  /* The time bucket of the last block finish_live_blocks read + 1, at key_gen warm_gen, and
   * how many blocks in a row it has had; the last run's length (warm_bucket). */
  uint32_t warm_ta, warm_gen;
  uint64_t warm_run, warm_last_run;
  size_t rec_max_nodes; /* nodes kept by the next pass that the budget asks for */
  /* A direct-mapped cache of recent keys in front of the table. Finished blocks come in
   * runs of a few keys (allocation order, nearby times), while the table and the records
   * (tens of MB on a large trace) miss the CPU caches on nearly every look: 48 % of the
   * report's time on gen_trace --shape survivors before it. */
  front_slot_t *front;
  /* From opts.burst_records (FRONT_RECORDS) on, the records of collected blocks held back
   * (nburst of them, in their order), added together by burst_flush before anything else adds,
   * reads or remaps a record: one at a time, between two collections, the decoder, the trie and the
   * profile pushed the bucket's index and records out of the caches, and each look-up waited on two
   * misses in turn (record_find and finish_block: ~8 % of the report's time on gen_trace's 1
   * GB default shape); together, their misses overlap. Only while every one of them could be
   * a new key within the budget, so that no budget decision falls among them (keep_budget
   * would do nothing after any of them): the records and every decision are the same. */
  record_t *burst;
  uint32_t nburst;
  uint64_t bursts; /* burst_flush calls that added records (tests) */
  /* allocation marks */
  report_alloc_mark_t *marks;
  size_t nmarks, cap_marks;
  unsigned live_passes; /* how the blocks never collected were finished (0: none) */
  uint64_t live_calls;  /* the profile's calls that gave them (tests) */
  uint64_t live_ranks;  /* keys' ranks the second of two passes made (tests) */
  uint64_t finds;       /* record_find calls (tests) */
  /* No task trace to join and no marks: an event only raises the heap curve and finishes
   * the block it ended (on_event). */
  bool heap_only;
  uint64_t full_events; /* events through on_event_full */
  /* on_event's fast path takes an event of rel = time_us - origin_us when rel - 1 is below
   * it (fast_bound_set; 0: none does). */
  uint64_t fast_limit;
  int err;
};

static uint64_t rel_us(const report_mem_t *m, uint64_t t) {
  return t > m->origin_us ? t - m->origin_us : 0;
}

static uint64_t record_hash(const record_t *r) {
  uint64_t h = r->node * 0x9e3779b97f4a7c15ull;
  h ^= (r->ta + 0x1234567ull * r->tf) * 0xc2b2ae3d27d4eb4full;
  h ^= ((uint64_t)r->size_class << 8 | r->source) * 0x165667b19e3779f9ull;
  return h ^ (h >> 29);
}

static bool record_same(const record_t *a, const record_t *b) {
  return a->node == b->node && a->ta == b->ta && a->tf == b->tf && a->size_class == b->size_class &&
         a->source == b->source;
}

/* table_room's growth: t's capacity doubled (or made), its keys put again. */
static CTS_NOINLINE int table_grow(report_mem_t *m, ta_table_t *t) {
  const uint32_t cap = t->cap ? t->cap * 2 : 16;
  uint32_t *slot = calloc(cap, sizeof *slot);
  if (!slot) return -ENOMEM;
  if (m->in_remap) m->remap_rehashes += t->n;
  for (uint32_t k = 0; k < t->cap; k++) {
    if (!t->slot[k]) continue;
    size_t j = record_hash(&m->recs[t->slot[k] - 1]) & (cap - 1);
    while (slot[j]) j = (j + 1) & (cap - 1);
    slot[j] = t->slot[k];
  }
  free(t->slot);
  t->slot = slot;
  t->cap = cap;
  return 0;
}

/* Makes room in t for one more key: 0 or -ENOMEM. Inline: asked at every look-up, it was a
 * call each (table_room: 0.8-1.4 % of report's samples on gen_trace's traces), where a
 * growth comes once in thousands. */
static CTS_FORCE_INLINE int table_room(report_mem_t *m, ta_table_t *t) {
  return CTS_LIKELY((t->n + 1) * (size_t)2 <= t->cap) ? 0 : table_grow(m, t);
}

/* The slot of t for r's key (h its hash): the one holding its record, or the empty one where
 * it goes. */
static inline size_t table_slot(const report_mem_t *m, const ta_table_t *t, const record_t *r,
                                uint64_t h) {
  size_t j = h & (t->cap - 1);
  while (t->slot[j] && !record_same(&m->recs[t->slot[j] - 1], r)) j = (j + 1) & (t->cap - 1);
  return j;
}

/* The records' index, made empty if it was not: false when out of memory. */
static bool tables_made(report_mem_t *m) {
  return m->tables || (m->tables = calloc(RECORD_BUCKETS, sizeof *m->tables)) != NULL;
}

/* Room in recs for one more record: 0 or -ENOMEM. */
static int records_room(report_mem_t *m) {
  if (m->nrecs < m->cap_recs) return 0;
  const size_t cap = m->cap_recs ? m->cap_recs * 2 : 4096;
  record_t *recs = realloc(m->recs, cap * sizeof *recs);
  if (!recs) return -ENOMEM;
  m->recs = recs;
  m->cap_recs = cap;
  return 0;
}

/* The index of the record of r's key (h its hash) in recs, added with zero figures if new;
 * -ENOMEM. */
static int64_t record_find(report_mem_t *m, const record_t *r, uint64_t h) {
  if (!tables_made(m)) return -ENOMEM;
  m->finds++;
  CTS_ASSERT(r->ta < RECORD_BUCKETS);
  ta_table_t *t = &m->tables[r->ta % RECORD_BUCKETS];
  const int room = table_room(m, t);
  if (room) return room;
  const size_t j = table_slot(m, t, r, h);
  if (t->slot[j]) return t->slot[j] - 1;
  const int e = records_room(m);
  if (e) return e;
  m->recs[m->nrecs] = *r;
  m->recs[m->nrecs].samples = m->recs[m->nrecs].blocks = 0;
  t->slot[j] = (uint32_t)++m->nrecs;
  t->n++;
  return (int64_t)m->nrecs - 1;
}

/* Adds r's figures to the record of its key, straight to the table. */
static int record_add_direct(report_mem_t *m, const record_t *r) {
  const int64_t i = record_find(m, r, record_hash(r));
  if (i < 0) return (int)i;
  m->recs[i].samples += r->samples;
  m->recs[i].blocks += r->blocks;
  return 0;
}

/* Adds the held-back records (m->burst) to the records, in their order: their table slots
 * fetched first, then the records those name, then each added as record_add_direct would,
 * with the same look-ups and growths. The index may change meanwhile (a table grown, a record
 * added): the fetches are hints. 0 or -ENOMEM (the figures not yet added are lost: the load
 * fails). */
static CTS_NOINLINE int burst_flush(report_mem_t *m) {
  const uint32_t n = m->nburst;
  m->nburst = 0;
  if (!n) return 0;
  if (!tables_made(m)) return -ENOMEM;
  m->bursts++;
  const record_t *b = m->burst;
  uint64_t h[BURST];
  for (uint32_t i = 0; i < n; i++) {
    h[i] = record_hash(&b[i]);
    const ta_table_t *t = &m->tables[b[i].ta % RECORD_BUCKETS];
    if (t->cap) __builtin_prefetch(&t->slot[h[i] & (t->cap - 1)]);
  }
  for (uint32_t i = 0; i < n; i++) {
    const ta_table_t *t = &m->tables[b[i].ta % RECORD_BUCKETS];
    const uint32_t k = t->cap ? t->slot[h[i] & (t->cap - 1)] : 0;
    if (k) __builtin_prefetch(&m->recs[k - 1]);
  }
  for (uint32_t i = 0; i < n; i++) {
    const int64_t k = record_find(m, &b[i], h[i]);
    if (k < 0) return (int)k;
    m->recs[k].samples += b[i].samples;
    m->recs[k].blocks += b[i].blocks;
  }
  return 0;
}

static void front_flush(report_mem_t *m) {
  if (!m->front) return;
  for (size_t k = 0; k < (size_t)1 << FRONT_BITS; k++) {
    front_slot_t *s = &m->front[k];
    if (!s->blocks) continue;
    m->recs[s->index].samples += s->samples;
    m->recs[s->index].blocks += s->blocks;
    s->blocks = 0;
  }
}

/* Adds r's figures (r->blocks > 0; h its hash) to the record of its key, through the front slots.
 * The records and their count are at every step what adding to the table directly gives (a new key
 * is never in a slot, so it reaches the table at once): budget decisions do not change. */
static CTS_FORCE_INLINE int record_add(report_mem_t *m, const record_t *r, uint64_t h) {
  if (!m->front) {
    const size_t bytes = sizeof *m->front << FRONT_BITS;
    if (!(m->front = aligned_alloc(64, bytes))) return -ENOMEM;
    memset(m->front, 0, bytes);
  }
  front_slot_t *s = &m->front[h >> (64 - FRONT_BITS)];
  if (s->blocks && s->node == r->node && s->ta == r->ta && s->tf == r->tf &&
      s->size_class == r->size_class && s->source == r->source) {
    s->samples += r->samples;
    s->blocks += r->blocks;
    return 0;
  }
  const int64_t i = record_find(m, r, h);
  if (i < 0) return (int)i;
  if (s->blocks) {
    m->recs[s->index].samples += s->samples;
    m->recs[s->index].blocks += s->blocks;
  }
  *s = (front_slot_t){.node = r->node,
                      .ta = r->ta,
                      .tf = r->tf,
                      .size_class = r->size_class,
                      .source = r->source,
                      .index = (uint32_t)i,
                      .samples = r->samples,
                      .blocks = r->blocks};
  return 0;
}

/* The size class that stands for class c once sizes are coarse: the first of its power of
 * two (CTS_HIST_SUB classes), so that its size_low is the power of two. */
static uint16_t size_octave(unsigned c) {
  if (c < CTS_HIST_EXACT) /* exact values: 0, 1, 2-3, 4-7, 8-15, 16-31: the power of two */
    return (uint16_t)(c ? 1u << (31 - __builtin_clz(c)) : 0);
  return (uint16_t)(CTS_HIST_EXACT + (c - CTS_HIST_EXACT) / CTS_HIST_SUB * CTS_HIST_SUB);
}

typedef enum coarser { COARSER_TIME, COARSER_SIZE, COARSER_NODE } coarser_t;

/* rnode[n] (n < rnode_n). */
static inline uint32_t rnode_at(const report_mem_t *m, size_t n) {
  if (m->rtarget) {
    uint16_t v;
    memcpy(&v, (const char *)m->rnode + n * sizeof v, sizeof v);
    return m->rtarget[v];
  }
  uint32_t v;
  memcpy(&v, (const char *)m->rnode + n * sizeof v, sizeof v);
  return v;
}

/* Merges the records that fall together once their keys are coarser: time buckets twice as
 * wide, sizes by power of two, or nodes by m->rnode (set by the caller). */
static int remap_records(report_mem_t *m, coarser_t how) {
  /* (records appended with no index, by finish_live_two_passes, may come before any) */
  if (!tables_made(m)) return -ENOMEM;
  const int held = burst_flush(m); /* (keys of the old coarseness) */
  if (held) return held;
  m->key_gen++; /* keys computed before are stale */
  m->remaps++;
  front_flush(m);
  record_t *recs = m->recs;
  const size_t n = m->nrecs;
  /* In place, one new time bucket after another: the records are first put in the order of
   * their new bucket (in place, a cycle of swaps at a time), then added again from the
   * start of the same array. Merging only removes records, so the one added is never past
   * the one read. A bucket's table and records stay in the caches while it fills (in the
   * records' own order, each addition missed on a table of another bucket: remaps were 6 %
   * of report's cycles on gen_trace --shape survivors), and no second array is made (a
   * new one per remap: its pages faulted in each time). The records' order is not the
   * report's: write_tree sorts them by their whole key. */
  const unsigned shift = how == COARSER_TIME;
  size_t next[RECORD_BUCKETS], end[RECORD_BUCKETS] = {0};
  for (size_t i = 0; i < n; i++) end[recs[i].ta >> shift]++;
  /* Each table emptied, with room for every record its bucket may get (those put in it, as
   * if none merged): grown one doubling at a time as they came, the tables' rehashes were
   * three fifths of remap_records's instructions. */
  for (size_t b = 0; m->tables && b < RECORD_BUCKETS; b++) {
    ta_table_t *t = &m->tables[b];
    uint32_t cap = t->cap;
    if (end[b] && (size_t)cap < 2 * end[b]) {
      cap = 16;
      while ((size_t)cap < 2 * end[b]) cap *= 2;
      uint32_t *slot = calloc(cap, sizeof *slot);
      if (slot) { /* (else the table grows as the records come, as ever) */
        free(t->slot);
        t->slot = slot;
        t->cap = cap;
        t->n = 0;
        continue;
      }
    }
    if (t->n) memset(t->slot, 0, t->cap * sizeof *t->slot);
    t->n = 0;
  }
  for (size_t b = 0, at = 0; b < RECORD_BUCKETS; b++) {
    next[b] = at;
    at += end[b];
    end[b] = at;
  }
  for (size_t b = 0; b < RECORD_BUCKETS; b++)
    for (size_t i = next[b]; i < end[b]; i = ++next[b]) {
      unsigned to;
      while ((to = recs[i].ta >> shift) != b) {
        const record_t x = recs[i];
        recs[i] = recs[next[to]];
        recs[next[to]++] = x;
      }
    }
  m->nrecs = 0;
  m->in_remap = true;
  int e = 0;
  for (size_t i = 0; i < n && !e; i++) {
    record_t r = recs[i];
    if (how == COARSER_TIME) {
      r.ta /= 2;
      if (r.tf != NEVER) r.tf /= 2;
    } else if (how == COARSER_SIZE) {
      r.size_class = size_octave(r.size_class);
    } else {
      r.node = r.node < m->rnode_n ? rnode_at(m, r.node) : 0;
    }
    /* record_add_direct, in place: recs has room (merging only removes records), and a new
     * key's record is r itself, figures included (the re-adds were ~17 % of report's
     * instructions on gen_trace --mb 16, through two calls each). */
    CTS_ASSERT(m->nrecs <= i && m->tables && r.ta < RECORD_BUCKETS);
    ta_table_t *t = &m->tables[r.ta % RECORD_BUCKETS];
    if ((e = table_room(m, t)) != 0) break;
    const size_t j = table_slot(m, t, &r, record_hash(&r));
    if (t->slot[j]) {
      record_t *const x = &recs[t->slot[j] - 1];
      x->samples += r.samples;
      x->blocks += r.blocks;
    } else {
      recs[m->nrecs] = r;
      t->slot[j] = (uint32_t)++m->nrecs;
      t->n++;
    }
  }
  m->in_remap = false;
  /* The tables of buckets left empty go (twice as wide times empty the upper half): kept,
   * every bucket's largest table stayed to the end, 19 MB at the peak of gen_trace --mb
   * 160 for ~6 MB in use. */
  for (size_t b = 0; m->tables && b < RECORD_BUCKETS; b++) {
    ta_table_t *t = &m->tables[b];
    if (t->n || !t->slot) continue;
    free(t->slot);
    t->slot = NULL;
    t->cap = 0;
  }
  return e;
}

/* Twice as wide time buckets (time) or sizes by power of two (else). */
static int coarsen_records(report_mem_t *m, bool time) {
  if (!time) {
    m->size_octaves = true;
    return remap_records(m, COARSER_SIZE);
  }
  /* Every time is already in one bucket: halving again merges nothing and would overflow. */
  if (m->rec_w >= (UINT64_C(1) << 62)) {
    m->coarsenings = 64;
    return 0;
  }
  m->rec_w *= 2;
  m->rec_shift++;
  m->coarsenings++;
  return remap_records(m, COARSER_TIME);
}

static void heap_note(report_mem_t *m, uint64_t t_us, uint64_t live) {
  uint64_t b = rel_us(m, t_us) >> m->heap_shift;
  while (b >= HEAP_BUCKETS) {
    for (unsigned i = 0; i < HEAP_BUCKETS / 2; i++) {
      const bool s0 = m->heap_set[2 * i], s1 = m->heap_set[2 * i + 1];
      uint64_t v = s0 ? m->heap_max[2 * i] : 0;
      if (s1 && m->heap_max[2 * i + 1] > v) v = m->heap_max[2 * i + 1];
      m->heap_max[i] = v;
      m->heap_set[i] = s0 || s1;
    }
    memset(m->heap_set + HEAP_BUCKETS / 2, 0, HEAP_BUCKETS / 2 * sizeof *m->heap_set);
    m->heap_w *= 2;
    m->heap_shift++;
    b = rel_us(m, t_us) >> m->heap_shift;
  }
  if (!m->heap_set[b] || live > m->heap_max[b]) m->heap_max[b] = live;
  m->heap_set[b] = true;
}

static int mark_add(report_mem_t *m, uint64_t t_us, uint64_t samples) {
  if (m->nmarks && m->marks[m->nmarks - 1].time_us == t_us) {
    m->marks[m->nmarks - 1].samples += samples;
    return 0;
  }
  if (m->nmarks == MAX_MARKS) { /* merge neighbours: half the resolution, same totals */
    for (size_t i = 0; i < m->nmarks / 2; i++) {
      m->marks[i].time_us = m->marks[2 * i].time_us;
      m->marks[i].samples = m->marks[2 * i].samples + m->marks[2 * i + 1].samples;
    }
    m->nmarks /= 2;
  }
  if (m->nmarks == m->cap_marks) {
    const size_t cap = m->cap_marks ? m->cap_marks * 2 : 4096;
    report_alloc_mark_t *marks = realloc(m->marks, cap * sizeof *marks);
    if (!marks) return -ENOMEM;
    m->marks = marks;
    m->cap_marks = cap;
  }
  m->marks[m->nmarks++] = (report_alloc_mark_t){t_us, samples};
  return 0;
}

static int mark_by_time(const void *a, const void *b) {
  const uint64_t x = ((const report_alloc_mark_t *)a)->time_us;
  const uint64_t y = ((const report_alloc_mark_t *)b)->time_us;
  return (x > y) - (x < y);
}

/* The marks in time order, as report.h promises: a v3 trace's domains interleave in time,
 * so file order is not always time order. Equal times are merged. */
static void marks_sort(report_mem_t *m) {
  size_t i = 1;
  while (i < m->nmarks && m->marks[i - 1].time_us <= m->marks[i].time_us) i++;
  if (i >= m->nmarks) return;
  qsort(m->marks, m->nmarks, sizeof *m->marks, mark_by_time);
  size_t k = 0;
  for (i = 1; i < m->nmarks; i++) {
    if (m->marks[i].time_us == m->marks[k].time_us)
      m->marks[k].samples += m->marks[i].samples;
    else
      m->marks[++k] = m->marks[i];
  }
  m->nmarks = k + 1;
}

/* Per-node arrays in one buffer: first the allocated samples of every node with all it
 * calls (incl_t), then, computed in node order from them, a map of nodes (map_get,
 * map_put: 4 bytes a node) written over them: node i's entry overlaps only figures of nodes
 * up to i, read by the time node i is mapped, so the map needs no second array. The
 * figures are 4 bytes a node, saturated at UINT32_MAX, which decides every comparison with
 * a threshold up to that; only where one beyond it is needed (a trace of more than 2^31
 * samples on more nodes than kept) are they 8 bytes. At 8.46 M nodes (gen_trace --mb 160)
 * each of the 8 bytes a node is 8.5 MB of peak. Accessed through memcpy, so each entry's type
 * is that of its last store; the map may then be read as a uint32_t array. */
typedef struct incl {
  void *buf;
  bool wide;     /* 8-byte exact figures, else 4-byte saturated ones */
  bool borrowed; /* buf is memory lent by the caller, not its own */
} incl_t;

static uint64_t incl_get(const incl_t *x, size_t i) {
  if (x->wide) {
    uint64_t v;
    memcpy(&v, (const char *)x->buf + i * sizeof v, sizeof v);
    return v;
  }
  uint32_t v;
  memcpy(&v, (const char *)x->buf + i * sizeof v, sizeof v);
  return v;
}

static void incl_put(incl_t *x, size_t i, uint64_t v) {
  if (x->wide) {
    memcpy((char *)x->buf + i * sizeof v, &v, sizeof v);
    return;
  }
  const uint32_t n = v < UINT32_MAX ? (uint32_t)v : UINT32_MAX;
  memcpy((char *)x->buf + i * sizeof n, &n, sizeof n);
}

static uint32_t map_get(const void *buf, size_t i) {
  uint32_t v;
  memcpy(&v, (const char *)buf + i * sizeof v, sizeof v);
  return v;
}

static void map_put(void *buf, size_t i, uint32_t v) {
  memcpy((char *)buf + i * sizeof v, &v, sizeof v);
}

/* The samples node allocated with exactly its stack (the profile's records are lean: see
 * report_mem_load). */
static inline uint64_t node_samples(const cts_stacks_t *st, uint32_t node) {
  const uint32_t stat = st->nodes[node].stat;
  return st->lean ? st->lean[stat].samples : st->stats[stat].samples;
}

/* Every node's inclusive samples into x (wide or not), in scratch (scratch_bytes) when they
 * fit there, else in memory of its own; -ENOMEM. */
static int inclusive_samples(incl_t *x, const cts_stacks_t *st, bool wide, void *scratch,
                             size_t scratch_bytes) {
  const size_t bytes = (st->count ? st->count : 1) * (wide ? sizeof(uint64_t) : sizeof(uint32_t));
  x->wide = wide;
  x->borrowed = scratch && bytes <= scratch_bytes;
  x->buf = x->borrowed ? scratch : malloc(bytes);
  if (!x->buf) return -ENOMEM;
  for (uint32_t i = 0; i < st->count; i++) incl_put(x, i, node_samples(st, i));
  for (uint32_t i = st->count; i-- > 1;) { /* saturated sums are the sums, saturated */
    const uint32_t parent = st->nodes[i].parent;
    const uint64_t a = incl_get(x, parent), b = incl_get(x, i);
    incl_put(x, parent, a + b < a ? UINT64_MAX : a + b);
  }
  return 0;
}

/* The smallest T, 0 or a power of two, such that at most max_nodes nodes have incl >= T
 * (as a node's incl is at most its parent's, those nodes form a tree with the root), or
 * UINT64_MAX; false when T is past 2^31 and x's figures are saturated (no T then). */
static bool share_threshold(const incl_t *x, uint32_t count, size_t max_nodes, uint64_t *t) {
  *t = 0;
  if (count <= max_nodes) return true;
  size_t at_least[65] = {0}; /* at_least[k]: nodes with incl >= 2^k, once summed */
  for (uint32_t i = 0; i < count; i++) {
    const uint64_t v = incl_get(x, i);
    if (v) at_least[63 - __builtin_clzll(v)]++;
  }
  for (unsigned k = 63; k-- > 0;) at_least[k] += at_least[k + 1];
  for (unsigned k = 0; k < 64; k++)
    if (at_least[k] <= max_nodes) {
      *t = UINT64_C(1) << k;
      return x->wide || k < 32;
    }
  *t = UINT64_MAX;
  return x->wide;
}

/* Makes the map of count nodes in buf (4-byte nodes, each its own when it stands for
 * itself) 2-byte indexes into m->rtarget, in place, when at most 65536 nodes stand for
 * themselves; false (buf unchanged) if not, or without memory for rtarget, or with
 * opts.reference. A node's entry is read before any 2-byte entry overlaps it (entry i's
 * 2 bytes lie below byte 4i), and the node it maps to, an ancestor, comes before it. */
static bool narrow_map(report_mem_t *m, void *buf, uint32_t count) {
  uint32_t targets = 0;
  for (uint32_t i = 0; i < count; i++) targets += map_get(buf, i) == i;
  if (m->opts.reference || targets > 65536u || !(m->rtarget = malloc(targets * sizeof(uint32_t))))
    return false;
  uint16_t k = 0;
  for (uint32_t i = 0; i < count; i++) {
    const uint32_t to = map_get(buf, i);
    uint16_t v;
    if (to == i) {
      m->rtarget[k] = i;
      v = k++; /* wraps after the 65536th, the last */
    } else {
      CTS_ASSERT(to < i);
      memcpy(&v, (const char *)buf + to * sizeof v, sizeof v);
    }
    memcpy((char *)buf + i * sizeof v, &v, sizeof v);
  }
  return true;
}

/* Remaps the records to a coarser call tree: each node stands for itself when it and its
 * descendants allocated at least T samples so far, else for its nearest ancestor that did
 * (the root always stands for itself). T keeps at most m->rec_max_nodes nodes; with
 * progress, T is at least twice the last one. */
static int coarsen_nodes(report_mem_t *m, bool progress) {
  /* (made non-const only to lend its table) */
  cts_stacks_t *st = &m->t.prof.stacks;
  if (!st->count) return 0;
  /* The nodes' samples are read below: the figures held back first. */
  m->tree_coarsenings++;
  if (m->t.prof.held_count) m->held_coarsenings++;
  cts_alloc_profile_settle(&m->t.prof);
  /* The map is made anew, in the figures' buffer: the old one goes first (on failure the
   * load ends with -ENOMEM). */
  free(m->rnode);
  free(m->rtarget);
  m->rnode = NULL;
  m->rtarget = NULL;
  m->rnode_n = m->rnode_cap = 0;
  /* Once the trie is at its node budget (it grows no more), the figures go in its look-up
   * table's memory, lent for the while: their 4 bytes a node came on top of the largest
   * trie, the report's peak (20 MiB over the rest at gen_trace's 1 GB default shape, whose
   * last coarser tree is made at 10.5 M nodes). Not before: the table's refill (one pass
   * over the nodes, put_all) took 1 % of the report's time there, and 3 % on the 160 MB
   * shape (8.5 M nodes, under the budget), whose peak it did not lower. */
  size_t lent_bytes = 0;
  void *lent =
      st->max_nodes && st->count >= st->max_nodes ? cts_stacks_lend_table(st, &lent_bytes) : NULL;
  incl_t x;
  uint64_t min = 0;
  for (bool wide = false;; wide = true) {
    if (inclusive_samples(&x, st, wide, lent, lent_bytes)) {
      cts_stacks_restore_table(st, lent, lent_bytes);
      return -ENOMEM;
    }
    /* T never decreases: a node that grows heavier gets its own records again. */
    const bool known = share_threshold(&x, st->count, m->rec_max_nodes, &min);
    if (min < m->rec_min_samples) min = m->rec_min_samples;
    if (progress && min == m->rec_min_samples) min = min ? min * 2 : 1;
    if (wide || (known && min <= UINT32_MAX)) break; /* saturated figures decide it */
    if (!x.borrowed) free(x.buf);
  }
  if (min > incl_get(&x, 0)) min = UINT64_MAX; /* the root stands for every node: no coarser tree */
  map_put(x.buf, 0, 0);
  for (uint32_t i = 1; i < st->count; i++) {
    const uint32_t parent = st->nodes[i].parent, rp = map_get(x.buf, parent);
    map_put(x.buf, i, incl_get(&x, i) >= min && rp == parent ? i : rp);
  }
  /* 2-byte entries when they do, else 4; 8-byte figures' spent half goes back (record_node
   * grows the map when nodes come). */
  const size_t size = narrow_map(m, x.buf, st->count) ? sizeof(uint16_t) : sizeof(uint32_t);
  if (x.borrowed) { /* the map into memory of its own, and the table back */
    m->lent_coarsenings++;
    void *own = malloc((size_t)st->count * size);
    if (own) memcpy(own, x.buf, (size_t)st->count * size);
    cts_stacks_restore_table(st, lent, lent_bytes);
    if (!own) {
      free(m->rtarget);
      m->rtarget = NULL;
      return -ENOMEM;
    }
    x.buf = own;
  } else if (lent) {
    cts_stacks_restore_table(st, lent, lent_bytes);
  }
  void *shrunk = !x.borrowed && (x.wide || size < sizeof(uint32_t))
                     ? realloc(x.buf, (size_t)st->count * size)
                     : NULL;
  m->rnode = shrunk ? shrunk : x.buf;
  m->rnode_n = m->rnode_cap = st->count;
  m->coarse_tree = true;
  m->rec_min_samples = min;
  return remap_records(m, COARSER_NODE);
}

/* record_node once there is a coarser tree. */
static CTS_NOINLINE uint32_t record_node_mapped(report_mem_t *m, uint32_t node) {
  const cts_stacks_t *st = &m->t.prof.stacks;
  if (node >= m->rnode_n) {
    if (node >= st->count) return 0; /* not a node: the root, as write_tree does */
    const size_t size = m->rtarget ? sizeof(uint16_t) : sizeof(uint32_t);
    if (st->count > m->rnode_cap) {
      const size_t cap = st->count * (size_t)2;
      void *r = realloc(m->rnode, cap * size);
      if (!r) return 0; /* out of memory: the root (the report's figures stay right) */
      m->rnode = r;
      m->rnode_cap = cap;
    }
    char *map = m->rnode; /* a new node's entry: its parent's (the same index or node) */
    for (size_t i = m->rnode_n; i < st->count; i++)
      memcpy(map + i * size, map + (size_t)st->nodes[i].parent * size, size);
    m->rnode_n = st->count;
  }
  return rnode_at(m, node);
}

/* The node whose records stand for node's (see rnode). Inline: asked for every block,
 * mostly with no coarser tree (a call was ~16 instructions a block never collected). */
static inline uint32_t record_node(report_mem_t *m, uint32_t node) {
  return m->rnode ? record_node_mapped(m, node) : node;
}

/* Whether keep_budget may choose a coarser call tree: while its figures are unchanged (no
 * coarser tree made, no node added), so is the answer. */
static bool tree_may_coarsen(const report_mem_t *m) {
  return m->rec_min_samples != UINT64_MAX &&
         m->t.prof.stacks.count > (m->rnode ? m->rec_max_nodes / 2 : m->opts.max_records / 16);
}

/* After block p's record was added. Over the budget, sizes by power of two merge records
 * first (16 classes in each: the fine classes made 1.5 M records on gen_trace --shape
 * survivors --mb 160, for 384 stacks), then coarser times, but only while the trace so far
 * keeps at least MIN_RECORD_BUCKETS buckets: the time filters must stay useful; then a
 * coarser call tree for the records (the 8.4 M nodes of gen_trace --mb 160 made 7.8 M
 * records). Past that the budget is exceeded (records are compact columns in the report). */
static CTS_FORCE_INLINE int keep_budget(report_mem_t *m, const cts_alloc_profile_live_t *p) {
  int e = 0;
  while (!e && m->nrecs > m->opts.max_records) {
    if (!m->size_octaves)
      e = coarsen_records(m, false);
    else if (m->coarsenings < 64 && rel_us(m, p->time_us) >> m->rec_shift >= 2 * MIN_RECORD_BUCKETS)
      e = coarsen_records(m, true);
    else if (tree_may_coarsen(m)) {
      /* A coarser call tree, with half the nodes of the last one, when there are more nodes
       * than that (few nodes are not what makes many records). */
      m->rec_max_nodes = m->rnode ? m->rec_max_nodes / 2 : m->opts.max_records / 16;
      e = coarsen_nodes(m, true);
    } else {
      break;
    }
  }
  return e;
}

/* A block's size class in the records: its histogram bucket, or that bucket's power of two
 * once sizes were merged (size_octaves). */
static inline uint16_t size_class_of(const report_mem_t *m, uint64_t length) {
  return m->size_octaves ? size_octave(cts_hist_bucket(length)) : (uint16_t)cts_hist_bucket(length);
}

/* A block's record once it is collected (freed_us) or known never to be (UINT64_MAX). The
 * blocks not yet collected are the profile's (cts_alloc_profile_ended,
 * cts_alloc_profile_next_live). */
static int finish_block(report_mem_t *m, const cts_alloc_profile_live_t *p, uint64_t freed_us) {
  /* Below RECORD_BUCKETS: the block's time was an event's, which on_event kept below it, and
   * buckets only widen since. The clamp only keeps a broken promise in bounds. */
  const uint64_t ta = rel_us(m, p->time_us) >> m->rec_shift;
  const uint64_t tf = freed_us == UINT64_MAX ? NEVER : rel_us(m, freed_us) >> m->rec_shift;
  CTS_ASSERT(ta < RECORD_BUCKETS && (tf < RECORD_BUCKETS || tf == NEVER));
  /* Nodes made since the last coarser tree stand for their parent's until the next one, which
   * comes when the tree has doubled (a stack that became heavy gets its own records). */
  if (m->rnode && m->t.prof.stacks.count >= 2 * m->rnode_n) {
    const int e = coarsen_nodes(m, false);
    if (e) return e;
  }
  record_t r = {.node = record_node(m, p->node),
                .ta = (uint16_t)(ta < RECORD_BUCKETS ? ta : RECORD_BUCKETS - 1),
                .tf = (uint16_t)(tf < RECORD_BUCKETS || tf == NEVER ? tf : RECORD_BUCKETS - 1),
                .size_class = size_class_of(m, p->length),
                .source = p->source,
                .samples = p->samples,
                .blocks = 1};
  /* A block collected during the pass goes straight to its record once the records are
   * many (4 MiB of them and more): between two collections the decoder and the profile push
   * the front out of the caches, and its slot was a miss before the record's (finish_block
   * and record_find: 17.5 % of report's cycles on gen_trace --mb 160 through the front, 9.3 %
   * without). Fewer stay in the caches with the front, which then spares most look-ups (a
   * rate-1 trace of sqlite3, 35 882 records: +6 % instructions without it). */
  const bool collected = freed_us != UINT64_MAX;
  if (collected && m->nrecs >= m->opts.burst_records && !m->opts.reference &&
      m->nrecs + m->nburst < m->opts.max_records &&
      (m->burst || (m->burst = malloc(BURST * sizeof *m->burst)))) {
    /* Field by field (then keep_budget would do nothing): a copy of r's 32 bytes, 16 at a
     * time, waited on its narrower stores just made (half of finish_block's samples). */
    record_t *d = &m->burst[m->nburst++];
    d->node = r.node;
    d->ta = r.ta;
    d->tf = r.tf;
    d->size_class = r.size_class;
    d->source = r.source;
    d->samples = r.samples;
    d->blocks = 1;
    return m->nburst == BURST ? burst_flush(m) : 0;
  }
  int e = m->nburst ? burst_flush(m) : 0;
  if (!e)
    e = collected && m->nrecs >= FRONT_RECORDS ? record_add_direct(m, &r)
                                               : record_add(m, &r, record_hash(&r));
  return e ? e : keep_budget(m, p);
}

/* A block never collected, read ahead of its finish, with the key finish_block would give
 * it (keyed) as the records were made at key_gen: computed once, for the prefetches and the
 * finish (three times over, it was a tenth of the report's instructions on gen_trace --shape
 * survivors). */
typedef struct pending {
  cts_alloc_profile_live_t p;
  record_t r;
  uint64_t h;
  uint32_t gen;
  bool keyed;
} pending_t;

/* Reads q's key, unless it cannot be told without changing anything (a coarser tree's map
 * to grow, no table yet): then q is finished by finish_block alone. */
static void live_key(const report_mem_t *m, pending_t *q) {
  const cts_alloc_profile_live_t *p = &q->p;
  const uint64_t ta = rel_us(m, p->time_us) >> m->rec_shift;
  q->keyed = false;
  if (!m->front || !m->tables || ta >= RECORD_BUCKETS) return;
  uint32_t node = p->node;
  if (m->rnode) {
    if (node >= m->rnode_n) return;
    node = rnode_at(m, node);
  }
  q->r = (record_t){.node = node,
                    .ta = (uint16_t)ta,
                    .tf = NEVER,
                    .size_class = size_class_of(m, p->length),
                    .source = p->source,
                    .samples = p->samples,
                    .blocks = 1};
  q->h = record_hash(&q->r);
  q->gen = m->key_gen;
  q->keyed = true;
}

/* finish_block(m, &q->p, UINT64_MAX), with q's key when it still holds: the records were not
 * remapped since, and finish_block would not remap them first (a tree that doubled). */
static int finish_live(report_mem_t *m, const pending_t *q) {
  if (!q->keyed || q->gen != m->key_gen || (m->rnode && m->t.prof.stacks.count >= 2 * m->rnode_n))
    return finish_block(m, &q->p, UINT64_MAX);
  const int e = record_add(m, &q->r, q->h);
  return e ? e : keep_budget(m, &q->p);
}

/* Prefetches the whole index of time bucket ta and every record it names. The profile gives
 * the blocks never collected chunk by chunk, a chunk's blocks in one or two time buckets, the
 * chunks in no time order: a bucket's records, ~1000 on gen_trace --shape survivors, have
 * left the caches since its last chunk. Looked up one block at a time, each missed in turn
 * (the slot, then the record it names: record_find was a quarter of the report's time);
 * asked for all at once as the chunk starts, the misses overlap. Only when the last bucket's
 * run of blocks was at least a quarter of the index's slots (runs are alike: a dense chunk's
 * thousands, or a sparse one's few): on gen_trace's default shape, a few dozen live blocks a
 * chunk, warming every bucket cost ~3700 instructions a block. */
static void warm_bucket(report_mem_t *m, uint16_t ta) {
  m->warm_ta = ta + 1u;
  m->warm_gen = m->key_gen;
  m->warm_last_run = m->warm_run;
  m->warm_run = 0;
  const ta_table_t *t = &m->tables[ta];
  if (m->warm_last_run < t->cap / 4u) return;
  for (uint32_t k = 0; k < t->cap; k += 64u / sizeof *t->slot) __builtin_prefetch(&t->slot[k]);
  for (uint32_t k = 0; k < t->cap; k++)
    if (t->slot[k]) __builtin_prefetch(&m->recs[t->slot[k] - 1]);
}

/* Prefetches, well before q is finished: its front slot and the first slot of its table. */
static void prefetch_slots(report_mem_t *m, const pending_t *q) {
  if (!q->keyed) return;
  if (m->warm_ta != q->r.ta + 1u || m->warm_gen != q->gen) warm_bucket(m, q->r.ta);
  m->warm_run++;
  __builtin_prefetch(&m->front[q->h >> (64 - FRONT_BITS)]);
  const ta_table_t *t = &m->tables[q->r.ta];
  if (t->cap) __builtin_prefetch(&t->slot[q->h & (t->cap - 1)]);
}

/* Then, closer to it, unless the front holds the key: the record the front slot's figures go
 * to when the block takes the slot, and the record its table's slot names. */
static CTS_FORCE_INLINE void prefetch_record(const report_mem_t *m, const pending_t *q) {
  if (!q->keyed || q->gen != m->key_gen) return;
  const record_t *r = &q->r;
  const front_slot_t *s = &m->front[q->h >> (64 - FRONT_BITS)];
  if (s->blocks) {
    if (s->node == r->node && s->ta == r->ta && s->tf == r->tf && s->size_class == r->size_class &&
        s->source == r->source)
      return;
    __builtin_prefetch(&m->recs[s->index]);
  }
  const ta_table_t *t = &m->tables[r->ta];
  const uint32_t i = t->cap ? t->slot[q->h & (t->cap - 1)] : 0;
  if (i) __builtin_prefetch(&m->recs[i - 1]);
}

/* The blocks never collected, in the order the profile gives them, each finished as it
 * comes. They come by chunks of consecutive ids, the chunks in no time order, so a chunk
 * often opens a time bucket whose table and records are out of the caches (on gen_trace
 * --shape survivors, 10 M such blocks, most of the report's own time waited on those two
 * loads): the blocks are read AHEAD before they are finished, their slots prefetched at
 * once and the record a slot names half-way. Only hints: what finish_block does, and in
 * which order, is unchanged (the order decides when the budget is exceeded, and so which
 * coarser keys the records get). */
#define AHEAD 8u

/* Blocks never collected read from the profile at a time in the one-pass end (one at a time,
 * the calls were ~80 instructions a block, 12 % of the report's on gen_trace --shape
 * survivors; the two-pass end reads them in place: cts_alloc_profile_each_live). 10 KiB on
 * the stack. */
#define LIVE_BATCH 256u

static int finish_live_one_pass(report_mem_t *m) {
  pending_t ring[AHEAD];
  /* Read LIVE_BATCH at a time (cts_alloc_profile_next_lives: a dense chunk's bitmap walked
   * inline, ~30 instructions a block, where one block a call took ~82). 10 KiB. */
  cts_alloc_profile_live_t batch[LIVE_BATCH];
  size_t got = 0, at = 0;
  cts_live_cursor_t cur = {0};
  size_t read = 0, done = 0;
  bool more = true;
  for (;;) {
    if (more && read - done < AHEAD) {
      pending_t *q = &ring[read % AHEAD];
      if (at == got) {
        got = cts_alloc_profile_next_lives(&m->t.prof, &cur, batch, LIVE_BATCH);
        at = 0;
        m->live_calls++;
      }
      more = at < got;
      if (more) {
        q->p = batch[at++];
        live_key(m, q);
        prefetch_slots(m, q);
        read++;
        if (read - done > AHEAD / 2) prefetch_record(m, &ring[(read - 1 - AHEAD / 2) % AHEAD]);
        continue;
      }
    }
    if (done == read) return 0;
    const int e = finish_live(m, &ring[done % AHEAD]);
    if (e) return e;
    done++;
  }
}

/* The blocks never collected in two passes, with the records one pass in the table's order
 * gives (finish_live_one_pass), byte for byte, at a fraction of its cache misses.
 *
 * What the order decides is only when the records go over their budget and which block is
 * then finished (keep_budget: coarser sizes, or times if that block is late enough, or
 * nothing yet); the figures are sums, the same in any order. And when the budget is checked
 * depends only on which blocks bring a key the records do not have yet. So the first pass
 * walks the table's order with only the set of keys of blocks never collected that the
 * records hold (a bitmap, a few KiB a time bucket: a block tests one bit where one pass
 * looked up its record, ~1000 records of a bucket that the table's order, chunk by chunk in
 * hash order, had let leave the caches), adds a new key's record with no figures and checks
 * the budget as one pass does; the second adds every block's figures to the record of its
 * key as the first pass left the keys, chunk by chunk in id order (allocation order: one
 * time bucket's records after another, warm).
 *
 * A record added at one coarseness and merged by later remaps holds what the block's key at
 * the last coarseness names: twice as wide times and sizes by power of two compose (a time
 * bucket halved k times is the time shifted k more; a power of two's class is its own). A
 * coarser call tree does not (a node's record made by an earlier tree's map, remapped by the
 * next, need not be the one the next map gives the node itself): the two passes run only
 * where no coarser tree can be chosen during the finish, which tree_may_coarsen tells before
 * it (no node is added and no tree made meanwhile). */

/* The first pass's set: bit ((node * classes + class) * 4 + source) of time bucket ta's
 * bitmap (allocated when first set) says the records hold (node, ta, NEVER, class,
 * source). Classes are size_octave's when sizes are by power of two (65 of them), else the
 * histogram's buckets. */
#define LIVE_SET_BUCKET_BITS (UINT64_C(1) << 17) /* 16 KiB a time bucket at most */

typedef struct live_set {
  uint64_t *bucket[RECORD_BUCKETS];
  size_t words; /* per bucket */
  uint32_t nodes;
  bool octaves; /* classes as size_octave's */
} live_set_t;

/* Class c's place in the bitmap: c itself, or its power of two's rank (0, 1-5 below
 * CTS_HIST_EXACT, then one per CTS_HIST_SUB classes). */
static unsigned live_set_class(const live_set_t *s, unsigned c) {
  if (!s->octaves) return c;
  if (c < CTS_HIST_EXACT) return c ? 32u - (unsigned)__builtin_clz(c) : 0u;
  return 6u + (c - CTS_HIST_EXACT) / CTS_HIST_SUB;
}

static unsigned live_set_classes(bool octaves) {
  return octaves ? 6u + (CTS_HIST_BUCKETS - CTS_HIST_EXACT) / CTS_HIST_SUB : CTS_HIST_BUCKETS;
}

static CTS_FORCE_INLINE uint64_t live_set_bit(const live_set_t *s, const record_t *r) {
  CTS_ASSERT(r->node < s->nodes && r->source < 4);
  return ((uint64_t)r->node * live_set_classes(s->octaves) + live_set_class(s, r->size_class)) *
             4u +
         (r->source & 3u);
}

/* Sets r's bit; whether it was set. -ENOMEM as a negative value. */
static CTS_FORCE_INLINE int live_set_test_set(live_set_t *s, const record_t *r) {
  uint64_t *b = s->bucket[r->ta];
  if (!b && !(b = s->bucket[r->ta] = calloc(s->words, sizeof *b))) return -ENOMEM;
  const uint64_t bit = live_set_bit(s, r), mask = UINT64_C(1) << (bit % 64u);
  if (b[bit / 64u] & mask) return 1;
  b[bit / 64u] |= mask;
  return 0;
}

/* The set as the records are now (after a remap: coarser keys, fewer of them). */
static int live_set_fill(live_set_t *s, const report_mem_t *m) {
  s->octaves = m->size_octaves;
  for (size_t b = 0; b < RECORD_BUCKETS; b++)
    if (s->bucket[b]) memset(s->bucket[b], 0, s->words * sizeof *s->bucket[b]);
  for (size_t i = 0; i < m->nrecs; i++)
    if (m->recs[i].tf == NEVER && live_set_test_set(s, &m->recs[i]) < 0) return -ENOMEM;
  return 0;
}

static void live_set_free(live_set_t *s) {
  for (size_t b = 0; b < RECORD_BUCKETS; b++) free(s->bucket[b]);
}

/* Block p's key as finish_block makes it now (and no coarser tree is made meanwhile). */
static CTS_FORCE_INLINE record_t live_record(report_mem_t *m, const cts_alloc_profile_live_t *p) {
  const uint64_t ta = rel_us(m, p->time_us) >> m->rec_shift;
  CTS_ASSERT(ta < RECORD_BUCKETS);
  return (record_t){.node = record_node(m, p->node),
                    .ta = (uint16_t)(ta < RECORD_BUCKETS ? ta : RECORD_BUCKETS - 1),
                    .tf = NEVER,
                    .size_class = size_class_of(m, p->length),
                    .source = p->source,
                    .samples = p->samples,
                    .blocks = 1};
}

/* Block p's time bucket and bit in the set, as live_set_bit(s, live_record(m, p)) gives
 * them, straight from the block: with classes by power of two, a length's class is its bit
 * length (size_octave of its histogram bucket, ranked by live_set_class), so neither the
 * record nor the histogram's bucket is made (~20 instructions a block and pass, 10 M
 * blocks twice on gen_trace --shape survivors). s->octaves must be m->size_octaves. */
static CTS_FORCE_INLINE uint64_t live_bit(report_mem_t *m, const live_set_t *s,
                                          const cts_alloc_profile_live_t *p, uint16_t *ta) {
  const uint64_t t = rel_us(m, p->time_us) >> m->rec_shift;
  *ta = (uint16_t)(t < RECORD_BUCKETS ? t : RECORD_BUCKETS - 1);
  const unsigned c = !s->octaves ? cts_hist_bucket(p->length)
                     : p->length ? 64u - (unsigned)__builtin_clzll(p->length)
                                 : 0u;
  const uint64_t bit = ((uint64_t)record_node(m, p->node) * live_set_classes(s->octaves) + c) * 4u +
                       (p->source & 3u);
#if CTS_CHECKS
  const record_t r = live_record(m, p);
  CTS_ASSERT(s->octaves == m->size_octaves && r.ta == *ta && live_set_bit(s, &r) == bit);
#endif
  return bit;
}

/* Bits set in x, inline (the baseline x86-64 build has no popcnt instruction; libgcc's is a
 * call, which was a tenth of the second pass). */
static inline uint32_t ones(uint64_t x) {
  x -= x >> 1 & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + (x >> 2 & 0x3333333333333333ull);
  return (uint32_t)(((x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full) * 0x0101010101010101ull >> 56);
}

static int chunk_by_number(const void *a, const void *b) {
  const uint64_t x = (*(const cts_live_chunk_t *const *)a)->number;
  const uint64_t y = (*(const cts_live_chunk_t *const *)b)->number;
  return (x > y) - (x < y);
}

/* A figure of the second pass: what the blocks of one key never collected add. */
typedef struct live_sum {
  uint64_t samples, blocks;
} live_sum_t;

/* The sums of bucket ta's keys (dirty: their bits) to their records, each found by the key's
 * rank among the bucket's keys (rank[w]: the keys before word w; base: of the buckets
 * before ta; rec_of: the records by bucket and rank), and zeroed. */
static void live_sums_flush(report_mem_t *m, const live_set_t *s, uint32_t ta, const uint32_t *rank,
                            uint32_t base, const uint32_t *rec_of, live_sum_t *sum,
                            const uint32_t *dirty, uint32_t ndirty) {
  for (uint32_t d = 0; d < ndirty; d++) {
    const uint32_t bit = dirty[d];
    const uint64_t below = s->bucket[ta][bit / 64u] & ((UINT64_C(1) << (bit % 64u)) - 1u);
    record_t *to = &m->recs[rec_of[base + rank[bit / 64u] + ones(below)]];
    m->live_ranks++;
    live_sum_t *x = &sum[bit];
    to->samples += x->samples;
    to->blocks += x->blocks;
    *x = (live_sum_t){0};
  }
}

/* The second pass's sums (add_live_figures): those of time bucket ta, the bits of its keys
 * with a sum (dirty, ndirty of them), and what live_sums_flush finds their records by. */
typedef struct live_sums {
  report_mem_t *m;
  const live_set_t *s;
  uint32_t *const *rank;
  const uint32_t *base, *rec_of;
  live_sum_t *sum;
  uint32_t *dirty;
  uint32_t ta, ndirty;
} live_sums_t;

/* Block p's figures to the sum of its key's bit; the last bucket's sums to their records
 * when p is of another. Inlined into the profile's walk (cts_alloc_profile_each_live_in):
 * each block's fields are read where they lie, not copied out first. */
static CTS_FORCE_INLINE int add_sum(void *user_data, const cts_alloc_profile_live_t *p) {
  live_sums_t *x = user_data;
  uint16_t bta;
  const uint64_t bit = live_bit(x->m, x->s, p, &bta);
  if (bta != x->ta) { /* to the records, the sums of the last bucket */
    live_sums_flush(x->m, x->s, x->ta, x->rank[x->ta], x->base[x->ta], x->rec_of, x->sum, x->dirty,
                    x->ndirty);
    x->ndirty = 0;
    x->ta = bta;
  }
  CTS_ASSERT(x->s->bucket[bta][bit / 64u] >> (bit % 64u) & 1u); /* the first pass added it */
  live_sum_t *sum = &x->sum[bit];
  if (!sum->blocks) x->dirty[x->ndirty++] = (uint32_t)bit;
  sum->samples += p->samples;
  sum->blocks++;
  return 0;
}

/* The second pass. Every key is in the set and has its record: the blocks' figures go to
 * sums by the key's bit in its time bucket's bitmap, kept for one time bucket at a time
 * (blocks in id order come one time bucket after another), each added to its record, found
 * by the key's rank among its bucket's keys, when the blocks move to another bucket. No
 * record is looked up: the records' index and the front go first. Sums by bit, not by rank:
 * a bucket's bits are at most LIVE_SET_BUCKET_BITS (2 MiB of sums), of which the keys of one
 * bucket touch a few hundred lines, and the rank (a software popcount, the baseline x86-64
 * has none) is then made once a key and bucket, not once a block (~25 of the pass's ~110
 * instructions a block on gen_trace --shape survivors). */
static int add_live_figures(report_mem_t *m, const live_set_t *s) {
  front_flush(m);
  for (size_t b = 0; m->tables && b < RECORD_BUCKETS; b++) free(m->tables[b].slot);
  free(m->tables);
  free(m->front);
  m->tables = NULL;
  m->front = NULL;
  /* rank[b][w]: the keys before word w of bucket b's bitmap; base[b]: of the buckets before
   * b; rec_of[base[b] + k]: the record of bucket b's key k. */
  size_t nb = 0;
  for (size_t b = 0; b < RECORD_BUCKETS; b++) nb += s->bucket[b] != NULL;
  uint32_t *ranks = malloc((nb ? nb : 1) * s->words * sizeof *ranks);
  uint32_t *rank[RECORD_BUCKETS] = {0}, base[RECORD_BUCKETS] = {0};
  const cts_u64map_t *map = &m->t.prof.live.chunks;
  cts_live_chunk_t **chunks = malloc((map->count + 1) * sizeof *chunks);
  live_sum_t *sum = NULL;
  uint32_t *rec_of = NULL, *dirty = NULL;
  int e = -ENOMEM;
  if (!ranks || !chunks) goto out;
  uint32_t keys = 0, widest = 0;
  for (size_t b = 0, k = 0; b < RECORD_BUCKETS; b++) {
    if (!s->bucket[b]) continue;
    rank[b] = ranks + k++ * s->words;
    base[b] = keys;
    uint32_t n = 0;
    for (size_t w = 0; w < s->words; w++) {
      rank[b][w] = n;
      n += ones(s->bucket[b][w]);
    }
    keys += n;
    if (n > widest) widest = n;
  }
  sum = calloc(s->words * 64u, sizeof *sum);
  dirty = malloc((widest ? widest : 1) * sizeof *dirty);
  rec_of = malloc((keys ? keys : 1) * sizeof *rec_of);
  if (!sum || !dirty || !rec_of) goto out;
  for (size_t i = 0; i < m->nrecs; i++) {
    const record_t *r = &m->recs[i];
    if (r->tf != NEVER) continue;
    const uint64_t bit = live_set_bit(s, r);
    const uint64_t below = s->bucket[r->ta][bit / 64u] & ((UINT64_C(1) << (bit % 64u)) - 1u);
    rec_of[base[r->ta] + rank[r->ta][bit / 64u] + ones(below)] = (uint32_t)i;
  }
  size_t n = 0, pos = 0;
  uint64_t number, val;
  while (cts_u64map_next(map, &pos, &number, &val))
    chunks[n++] = (cts_live_chunk_t *)(uintptr_t)val;
  qsort(chunks, n, sizeof *chunks, chunk_by_number);
  live_sums_t x = {
      .m = m, .s = s, .rank = rank, .base = base, .rec_of = rec_of, .sum = sum, .dirty = dirty};
  for (size_t c = 0; c < n; c++) cts_alloc_profile_each_live_in(&m->t.prof, chunks[c], add_sum, &x);
  live_sums_flush(m, s, x.ta, rank[x.ta], base[x.ta], rec_of, sum, dirty, x.ndirty);
  e = 0;
out:
  free(rec_of);
  free(dirty);
  free(sum);
  free(chunks);
  free(ranks);
  return e;
}

/* The first pass's state for its visit (first_pass_visit). */
typedef struct first_pass {
  report_mem_t *m;
  live_set_t *s;
} first_pass_t;

/* A key the records lack (bit of bucket ta's bitmap words, not set): its record, no
 * figures, appended to recs alone (no look-up: the set holds every key of the records never
 * collected). The records' index no longer holds every record: nothing looks one up until a
 * remap, which makes the index anew from recs, or add_live_figures, which frees it. Out of
 * line: one block in fifty on gen_trace --shape survivors. */
static CTS_NOINLINE int add_live_key(report_mem_t *m, uint64_t *words, uint64_t bit,
                                     const cts_alloc_profile_live_t *p) {
  words[bit / 64u] |= UINT64_C(1) << (bit % 64u);
  const int e = records_room(m);
  if (e) return e;
  m->recs[m->nrecs] = live_record(m, p);
  m->recs[m->nrecs].samples = m->recs[m->nrecs].blocks = 0;
  m->nrecs++;
  return 0;
}

/* The first pass's visit of block p (inlined into the profile's walk, as add_sum): its key's
 * bit set, a record for a new key, the budget checked as one pass checks it. */
static CTS_FORCE_INLINE int first_pass_visit(void *user_data, const cts_alloc_profile_live_t *p) {
  first_pass_t *f = user_data;
  report_mem_t *m = f->m;
  live_set_t *s = f->s;
  uint16_t ta;
  const uint64_t bit = live_bit(m, s, p, &ta);
  uint64_t *words = s->bucket[ta];
  if (!words && !(words = s->bucket[ta] = calloc(s->words, sizeof *words))) return -ENOMEM;
  if (!(words[bit / 64u] >> (bit % 64u) & 1u)) {
    const int e = add_live_key(m, words, bit, p);
    if (e) return e;
  }
  if (m->nrecs > m->opts.max_records) {
    const uint32_t gen = m->key_gen;
    int e = keep_budget(m, p);
    CTS_ASSERT(e || !m->rnode || m->rnode_n == m->t.prof.stacks.count);
    if (!e && gen != m->key_gen) e = live_set_fill(s, m);
    return e;
  }
  return 0;
}

static int finish_live_two_passes(report_mem_t *m, live_set_t *s) {
  int e = live_set_fill(s, m);
  first_pass_t f = {.m = m, .s = s};
  if (!e) e = cts_alloc_profile_each_live(&m->t.prof, first_pass_visit, &f);
  return e ? e : add_live_figures(m, s);
}

/* The blocks never collected: two passes where they give one pass's records, else one. */
static int finish_live_blocks(report_mem_t *m) {
  if (!m->t.prof.live.count) return 0;
  /* What finish_block does first for the first block (stacks.count no longer changes). */
  if (m->rnode && m->t.prof.stacks.count >= 2 * m->rnode_n) {
    const int e = coarsen_nodes(m, false);
    if (e) return e;
  }
  const uint32_t nodes = m->t.prof.stacks.count ? m->t.prof.stacks.count : 1;
  /* The widest classes the finish may see: the fine ones unless sizes are coarse already. */
  const uint64_t bits = (uint64_t)nodes * live_set_classes(m->size_octaves) * 4u;
  if (m->opts.reference || tree_may_coarsen(m) || bits > LIVE_SET_BUCKET_BITS) {
    m->live_passes = 1;
    return finish_live_one_pass(m);
  }
  live_set_t s = {.words = (size_t)(bits + 63u) / 64u, .nodes = nodes};
  m->live_passes = 2;
  const int e = finish_live_two_passes(m, &s);
  live_set_free(&s);
  return e;
}

/* Frees what only aggregating needs: the records' index, the front, the coarser tree's map
 * (4 bytes a node). */
static void free_aggregation(report_mem_t *m) {
  for (size_t b = 0; m->tables && b < RECORD_BUCKETS; b++) free(m->tables[b].slot);
  free(m->tables);
  free(m->front);
  free(m->rnode);
  free(m->rtarget);
  free(m->burst);
  m->burst = NULL;
  m->tables = NULL;
  m->front = NULL;
  m->rnode = NULL;
  m->rtarget = NULL;
  m->rnode_n = m->rnode_cap = 0;
}

/* Before the first event, with the origin set: the heap curve's and the records' time
 * buckets as wide as opts.time_floor_us needs, as the doublings for time alone would make
 * them by then (with no record yet, none to remap; the heap curve's pairs merged by a
 * doubling are the same maxima as one wide bucket's). The records' budget then sees fewer,
 * coarser records early on: it may coarsen later or not at all (never earlier). */
static void widen_time_buckets(report_mem_t *m) {
  const uint64_t rel = rel_us(m, m->opts.time_floor_us);
  m->opts.time_floor_us = 0;
  CTS_ASSERT(m->nrecs == 0);
  while (rel >> m->heap_shift >= HEAP_BUCKETS) m->heap_w *= 2, m->heap_shift++;
  while (rel >> m->rec_shift >= RECORD_BUCKETS && m->rec_w < (UINT64_C(1) << 62))
    m->rec_w *= 2, m->rec_shift++, m->coarsenings++;
}

/* At a block's allocation, the coarser tree's map entry of its node: most blocks are
 * collected a few allocations later (gen_trace's default shape: 85 % after ~6), and their
 * finish (record_node) then finds the entry in the caches. Looked up at the collection
 * alone, it missed on nearly every block (record_node_mapped: 5.4 % of report's samples on
 * gen_trace --mb 1000, 79 % of them on that load; the map is 2 bytes a node, 20 MiB
 * there). A hint only. Forced inline and counted: gcc 12 takes a function that only
 * prefetches for a pure one, and drops its call. */
static CTS_FORCE_INLINE void prefetch_map_entry(report_mem_t *m, uint32_t node) {
  if (!m->rnode || node >= m->rnode_n) return; /* (a node made since: its parent's, later) */
  __builtin_prefetch((const char *)m->rnode +
                     node * (m->rtarget ? sizeof(uint16_t) : sizeof(uint32_t)));
  m->map_prefetches++;
}

/* Every event, whatever it asks for. */
static CTS_NOINLINE int on_event_full(report_mem_t *m, cts_mem_trace_t *t,
                                      const cts_mt_event_t *ev) {
  m->full_events++;
  if (m->opts.attribute) { /* memory by task: the task trace's join */
    const int e =
        report_tasks_mem_event(m->opts.attribute, cts_mt_reader_borrow_info(t->reader), ev);
    if (e) return e;
  }
  if (!m->origin_us && t->prof.have_info) m->origin_us = t->prof.start_time_us;
  if (m->opts.time_floor_us) widen_time_buckets(m);
  while (rel_us(m, ev->time_us) >> m->rec_shift >= RECORD_BUCKETS) {
    m->time_remaps++;
    const int e = coarsen_records(m, true);
    if (e) return e;
  }
  heap_note(m, ev->time_us, t->prof.stacks.live_samples);
  if (ev->kind == CTS_MT_ALLOC) {
    cts_alloc_profile_live_t gone;
    if (cts_alloc_profile_ended(&t->prof, &gone)) {
      /* a reused id: the old block was never collected; keep it as live */
      const int e = finish_block(m, &gone, UINT64_MAX);
      if (e) return e;
    }
    return m->opts.no_marks ? 0 : mark_add(m, ev->time_us, ev->nsamples);
  }
  if (ev->kind == CTS_MT_COLLECT) {
    cts_alloc_profile_live_t gone;
    return cts_alloc_profile_ended(&t->prof, &gone) ? finish_block(m, &gone, ev->time_us) : 0;
  }
  return 0;
}

/* The fast path's bound: rel = time_us - origin_us with 1 <= rel (the origin is untrusted:
 * an event may come before it, and rel then wraps) and rel in the records' and the heap
 * curve's buckets, i.e. rel - 1 < fast_limit, one compare where the five tests took ~17
 * instructions an event. Set after each on_event_full, which alone sets the origin and
 * rescales the heap curve. The records' buckets also widen in the fast path (keep_budget),
 * which only raises the bound: until the next on_event_full a stale one sends the events
 * past it there, which does for them what the fast path does. */
static void fast_bound_set(report_mem_t *m) {
  if (!m->heap_only || !m->origin_us || m->opts.time_floor_us) {
    m->fast_limit = 0;
    return;
  }
  const unsigned rec_bits = (unsigned)__builtin_ctz(RECORD_BUCKETS);
  const unsigned heap_bits = (unsigned)__builtin_ctz(HEAP_BUCKETS);
  /* Past these shifts every rel is in range: the bucket counts shifted would overflow. */
  const uint64_t rec =
      m->rec_shift >= 64u - rec_bits ? UINT64_MAX : (uint64_t)RECORD_BUCKETS << m->rec_shift;
  const uint64_t heap =
      m->heap_shift >= 64u - heap_bits ? UINT64_MAX : (uint64_t)HEAP_BUCKETS << m->heap_shift;
  const uint64_t span = rec < heap ? rec : heap; /* rel < span: both buckets in range */
  /* rel <= UINT64_MAX - origin_us: an event before the origin wraps past it */
  m->fast_limit = span - 1u < UINT64_MAX - m->origin_us ? span - 1u : UINT64_MAX - m->origin_us;
}

static int on_event(void *ud, cts_mem_trace_t *t, const cts_mt_event_t *ev) {
  report_mem_t *m = ud;
  /* Without a task trace or marks, an event raises the heap curve's bucket and finishes the
   * block it ended, if any: that case here, the block's figures read in place (through
   * on_event_full, ~60 instructions and a frame an event: 7 % of the report's on gen_trace
   * --shape survivors, whose allocations end no block, and ~8 % on a rate-1 trace of
   * sqlite3, whose blocks all die). What on_event_full does first (the origin set, times
   * coarsened, the heap curve rescaled) must have nothing left to do. */
  const uint64_t rel = ev->time_us - m->origin_us;
  if (CTS_LIKELY(rel - 1u < m->fast_limit)) {
    CTS_ASSERT(m->heap_only && m->origin_us && ev->time_us > m->origin_us &&
               rel >> m->rec_shift < RECORD_BUCKETS && rel >> m->heap_shift < HEAP_BUCKETS);
    const uint64_t b = rel >> m->heap_shift, live = t->prof.stacks.live_samples;
    if (!m->heap_set[b] || live > m->heap_max[b]) m->heap_max[b] = live;
    m->heap_set[b] = true;
    if (ev->kind == CTS_MT_ALLOC) prefetch_map_entry(m, t->prof.last_node);
    if (CTS_LIKELY(!t->prof.have_ended)) return 0;
    /* A collection, or an allocation of an id still live (the old block never collected).
     * Read in place, field by field: a copy's 16-byte loads of the fields the profile has just
     * stored one by one could not be forwarded from the stores and waited for them (two
     * thirds of on_event's samples on gen_trace's 1 GB default shape). finish_block does not
     * change the profile. */
    const cts_alloc_profile_live_t *gone = &t->prof.ended;
    return ev->kind == CTS_MT_COLLECT ? finish_block(m, gone, ev->time_us)
           : ev->kind == CTS_MT_ALLOC ? finish_block(m, gone, UINT64_MAX)
                                      : 0;
  }
  const int e = on_event_full(m, t, ev);
  fast_bound_set(m);
  return e;
}

int report_mem_load(report_mem_t **out, const report_mem_opts_t *opts) {
  *out = NULL;
  report_mem_t *m = calloc(1, sizeof *m);
  if (!m) {
    cts_logf(&opts->log, CTS_LOG_ERROR, "out of memory");
    return CTS_E_NOMEM;
  }
  m->opts = *opts;
  if (!m->opts.max_records) m->opts.max_records = 400000;
  if (!m->opts.burst_records) m->opts.burst_records = FRONT_RECORDS;
  if (!m->opts.top_sites) m->opts.top_sites = 50;
  if (!m->opts.max_tree_nodes) m->opts.max_tree_nodes = 256u << 10;
  m->heap_w = m->rec_w = 1;
  const uint64_t time_floor_us = opts->attribute ? 0 : opts->time_floor_us;
  m->opts.time_floor_us = time_floor_us;
  m->heap_only = !m->opts.attribute && m->opts.no_marks;
  /* Every stack, as the CLI keeps them (stacks beyond the bound are kept by allocation point,
   * with a warning); the page draws the light ones as part of their callers (page_tree).
   * Live and peak figures by site: the page shows them only in its table of sites
   * (write_sites, whose rows sum a site's nodes), so a node's record is 24 bytes, not 64
   * (3.1 M records on gen_trace --mb 160: 124 MB less at the peak, which is the end of the
   * pass, when the trie's look-up table is still there). */
  const cts_alloc_profile_config_t cfg = {
      .stacks = true,
      .max_nodes = opts->max_nodes ? opts->max_nodes : CTS_STACKS_DEFAULT_MAX_NODES,
      .live_by_site = true,
      .skip_life_samples = true,
      /* The page prints the size and lifetime histograms' buckets alone (write_hist). */
      .histogram_buckets_only = true,
      /* (The reference paths add each allocation's figures as it comes.) */
      .add_at_once = opts->reference,
      .held_from_records = opts->held_from_records};
  const cts_load_opts_t lo = {.log = opts->log,
                              .quiet = opts->quiet,
                              .progress = opts->progress,
                              .progress_user_data = opts->progress_user_data,
                              .fold = opts->fold};
  const int err = cts_mem_trace_load(&m->t, opts->path, &cfg, &lo, on_event, m);
  if (err && m->t.hook_err && err == m->t.hook_err) { /* the aggregation's own: out of memory */
    cts_logf(&opts->log, CTS_LOG_ERROR, "%s: out of memory while aggregating", opts->path);
    report_mem_free(m);
    return CTS_E_NOMEM;
  }
  if (err && !m->t.kept) {
    report_mem_free(m);
    return err;
  }
  /* The records held back, before anything reads the records (the end, the page of a load
   * cut short, or a read again's). */
  if (burst_flush(m)) {
    cts_logf(&opts->log, CTS_LOG_ERROR, "%s: out of memory while aggregating", opts->path);
    report_mem_free(m);
    return CTS_E_NOMEM;
  }
  /* The buckets were made wide for a time no event reached (a packet header said more than
   * its body held, or the events stopped early): read again as if the span were unknown,
   * for the page that gives (finer buckets). */
  if (time_floor_us && !(m->t.prof.have_events && m->t.prof.last_event_us >= time_floor_us)) {
    report_mem_free(m);
    report_mem_opts_t again = *opts;
    again.time_floor_us = 0;
    const int e = report_mem_load(out, &again);
    if (*out) (*out)->read_again = true;
    return e;
  }
  /* Blocks never collected. */
  if (finish_live_blocks(m)) {
    cts_logf(&opts->log, CTS_LOG_ERROR, "%s: out of memory while aggregating", opts->path);
    report_mem_free(m);
    return CTS_E_NOMEM;
  }
  front_flush(m);
  free_aggregation(m); /* before the page's own per-node arrays (write_tree) */
  marks_sort(m);
  /* The caller's, for this call only. */
  m->opts.log = (cts_log_t){0};
  m->opts.progress = NULL;
  m->opts.progress_user_data = NULL;
  m->opts.attribute = NULL;
  *out = m;
  return err;
}

void report_mem_span(const report_mem_t *m, uint64_t *start_us, uint64_t *end_us) {
  *start_us = m->origin_us;
  *end_us = m->t.prof.have_events && m->t.prof.last_event_us > m->origin_us
                ? m->t.prof.last_event_us
                : m->origin_us;
}

const report_alloc_mark_t *report_mem_marks(const report_mem_t *m, size_t *n) {
  *n = m->nmarks;
  return m->marks;
}

unsigned report_mem_live_passes(const report_mem_t *m) {
  return m->live_passes;
}

uint64_t report_mem_live_calls(const report_mem_t *m, uint64_t *ranks) {
  *ranks = m->live_ranks;
  return m->live_calls;
}

uint64_t report_mem_bursts(const report_mem_t *m) {
  return m->bursts;
}

uint64_t report_mem_record_finds(const report_mem_t *m) {
  return m->finds;
}

uint64_t report_mem_full_events(const report_mem_t *m) {
  return m->full_events;
}

uint64_t report_mem_map_prefetches(const report_mem_t *m) {
  return m->map_prefetches;
}

uint32_t report_mem_tree_coarsenings(const report_mem_t *m, uint32_t *with_held) {
  *with_held = m->held_coarsenings;
  return m->tree_coarsenings;
}

uint32_t report_mem_lent_coarsenings(const report_mem_t *m) {
  return m->lent_coarsenings;
}

uint64_t report_mem_remap_rehashes(const report_mem_t *m, uint32_t *remaps) {
  *remaps = m->remaps;
  return m->remap_rehashes;
}

uint32_t report_mem_time_remaps(const report_mem_t *m, bool *read_again) {
  *read_again = m->read_again;
  return m->time_remaps;
}

double report_mem_bytes_per_sample(const report_mem_t *m) {
  return cts_alloc_profile_bytes_per_sample(&m->t.prof);
}

const cts_alloc_profile_t *report_mem_profile(const report_mem_t *m) {
  return &m->t.prof;
}

const cts_mt_info_t *report_mem_info(const report_mem_t *m) {
  return m->t.info;
}

void report_mem_free(report_mem_t *m) {
  if (!m) return;
  cts_mem_trace_free(&m->t);
  free(m->recs);
  free_aggregation(m);
  free(m->marks);
  free(m);
}

/* ----------------------------------------------------------------------------------- */

static void write_info(cts_out_t *o, const report_mem_t *m) {
  const cts_mt_info_t *in = m->t.info;
  const cts_alloc_profile_t *p = &m->t.prof;
  char a[96];
  cts_out_str(o, "\"file\":");
  report_json_str(o, cts_basename(m->opts.path));
  cts_out_printf(o, ",\"file_size\":%llu", (unsigned long long)m->t.file_size);
  cts_out_str(o, ",\"result\":");
  if (m->t.err) {
    snprintf(a, sizeof a, "error: %s", cts_err_name(m->t.err));
    report_json_str(o, a);
  } else {
    report_json_str(o, "ok");
  }
  if (in) {
    cts_out_printf(o, ",\"version\":%u,\"executable\":", in->version);
    report_json_str(o, in->executable_name);
    cts_out_str(o, ",\"host\":");
    report_json_str(o, in->host_name);
    cts_out_printf(o, ",\"pid\":%lld,\"start_us\":%llu,\"word_size\":%u,\"sample_rate\":%s",
                   (long long)in->pid, (unsigned long long)in->start_time_us, in->word_size,
                   cts_shortest_double(in->sample_rate, a, sizeof a));
    cts_out_str(o, ",\"runtime_params\":");
    report_json_str(o, in->runtime_params);
    cts_out_str(o, ",\"context\":");
    if (in->context)
      report_json_str(o, in->context);
    else
      cts_out_str(o, "null");
    const time_t secs = (time_t)(in->start_time_us / 1000000u);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char d[64];
    strftime(d, sizeof d, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(a, sizeof a, "%s.%06llu UTC", d, (unsigned long long)(in->start_time_us % 1000000u));
    cts_out_str(o, ",\"started\":");
    report_json_str(o, a);
  }
  /* The same figures, formatted as `ctfscope top` prints them. */
  cts_out_printf(o, ",\"samples\":%llu,\"allocs\":%llu,\"allocs_est\":%.1f",
                 (unsigned long long)cts_alloc_profile_samples(p),
                 (unsigned long long)cts_alloc_profile_allocs(p), p->est_allocs_total);
  cts_out_printf(o, ",\"bytes_per_sample\":%.17g,\"peak_samples\":%llu,\"peak_time_us\":%llu",
                 cts_alloc_profile_bytes_per_sample(p), (unsigned long long)p->stacks.peak_samples,
                 (unsigned long long)rel_us(m, p->stacks.peak_time_us));
  cts_out_printf(o, ",\"live_end_samples\":%llu,\"duration_s\":%.6f",
                 (unsigned long long)p->stacks.live_samples, cts_alloc_profile_duration_s(p));
  cts_out_printf(o,
                 ",\"events\":{\"alloc\":%llu,\"alloc_major\":%llu,\"alloc_ext\":%llu,"
                 "\"promote\":%llu,\"collect\":%llu}",
                 (unsigned long long)p->allocs_by_source[0],
                 (unsigned long long)p->allocs_by_source[1],
                 (unsigned long long)p->allocs_by_source[2], (unsigned long long)p->promoted_allocs,
                 (unsigned long long)p->collected_allocs);
  cts_out_str(o, ",\"text\":{\"allocated\":");
  report_json_str(o, cts_est_bytes(p, cts_alloc_profile_samples(p), true, a, sizeof a));
  cts_out_str(o, ",\"peak\":");
  report_json_str(o, cts_est_bytes(p, p->stacks.peak_samples, true, a, sizeof a));
  cts_out_str(o, ",\"live_end\":");
  report_json_str(o, cts_est_bytes(p, p->stacks.live_samples, true, a, sizeof a));
  cts_out_str(o, ",\"samples\":");
  report_json_str(o, cts_grouped(cts_alloc_profile_samples(p), a, sizeof a));
  cts_out_str(o, ",\"allocs\":");
  report_json_str(o, cts_grouped(cts_alloc_profile_allocs(p), a, sizeof a));
  cts_out_str(o, ",\"allocs_est\":");
  report_json_str(o, cts_grouped(cts_est_round(p->est_allocs_total), a, sizeof a));
  cts_out_str(o, "}");
}

static void write_sites(cts_out_t *o, report_mem_t *m) {
  cts_rows_t rows;
  const cts_frames_t frames = cts_mem_trace_frames(&m->t);
  const cts_alloc_profile_t *p = &m->t.prof;
  cts_out_str(o, ",\"sites\":[");
  if (cts_rows_build(&rows, &p->stacks, &frames, CTS_GROUP_LINE, CTS_SORT_BYTES, 0, 0)) {
    m->err = -ENOMEM;
    cts_out_str(o, "]");
    return;
  }
  cts_rows_sort(&rows, CTS_SORT_BYTES);
  const uint64_t total = cts_alloc_profile_samples(p);
  const size_t shown = rows.n < m->opts.top_sites ? rows.n : m->opts.top_sites;
  for (size_t i = 0; i < shown; i++) {
    const cts_row_t *r = &rows.rows[i];
    char site[1024], a[64], b[64], c[64], d[64];
    cts_row_name(r, site, sizeof site);
    cts_out_str(o, i ? ",\n[" : "\n[");
    report_json_str(o, site);
    cts_out_printf(o, ",%llu,%.1f,%llu,%llu,", (unsigned long long)r->st.samples, r->st.est_allocs,
                   (unsigned long long)r->st.peak_samples, (unsigned long long)r->st.live_samples);
    report_json_str(o, cts_est_bytes(p, r->st.samples, false, a, sizeof a));
    snprintf(b, sizeof b, "%.1f%%", total ? 100.0 * (double)r->st.samples / (double)total : 0.0);
    cts_out_char(o, ',');
    report_json_str(o, b);
    cts_out_char(o, ',');
    report_json_str(o, cts_grouped(cts_est_round(r->st.est_allocs), b, sizeof b));
    cts_out_char(o, ',');
    report_json_str(o, cts_est_bytes(p, r->st.peak_samples, false, c, sizeof c));
    cts_out_char(o, ',');
    report_json_str(o, cts_est_bytes(p, r->st.live_samples, false, d, sizeof d));
    cts_out_char(o, ']');
  }
  cts_out_printf(o, "],\"sites_total\":%zu", rows.n);
  cts_rows_fini(&rows);
}

static void write_hist(cts_out_t *o, const char *name, const cts_hist_t *h) {
  cts_out_printf(o, ",\"%s\":[", name);
  bool first = true;
  for (unsigned b = 0; b < CTS_HIST_BUCKETS; b++) {
    if (!h->blocks[b]) continue;
    cts_out_printf(o, "%s%llu,%llu,%llu", first ? "" : ",",
                   (unsigned long long)cts_hist_bucket_low(b), (unsigned long long)h->blocks[b],
                   (unsigned long long)h->samples[b]);
    first = false;
  }
  cts_out_char(o, ']');
}

/* Whether record a goes before b in the page: by the page's node, then the rest of the key
 * (which two records never share), then the profile's node. */
static CTS_FORCE_INLINE bool record_before(const record_t *a, const record_t *b) {
  const uint64_t ha = (uint64_t)a->page_node << 32 | (uint32_t)a->ta << 16 | a->tf;
  const uint64_t hb = (uint64_t)b->page_node << 32 | (uint32_t)b->ta << 16 | b->tf;
  if (ha != hb) return ha < hb;
  return ((uint64_t)a->size_class << 40 | (uint64_t)a->source << 32 | a->node) <
         ((uint64_t)b->size_class << 40 | (uint64_t)b->source << 32 | b->node);
}

static int record_by_node(const void *a, const void *b) {
  const record_t *x = a, *y = b;
  return record_before(x, y) ? -1 : record_before(y, x);
}

/* Sorts r[0..n) by record_before, stable (as glibc's qsort was here: a merge sort), with a
 * copy of n records as glibc's took; qsort itself without memory for it. Inline compares
 * (qsort's calls through a pointer, each loading two nodes' map entries, were 2.6 % of the
 * report's instructions on gen_trace --shape survivors). */
static void sort_records(record_t *r, size_t n) {
  enum { RUN = 16 };
  record_t *tmp = n > RUN ? malloc(n * sizeof *tmp) : NULL;
  if (n > RUN && !tmp) {
    qsort(r, n, sizeof *r, record_by_node);
    return;
  }
  for (size_t lo = 0; lo < n; lo += RUN) { /* runs of RUN by insertion, stable */
    const size_t hi = lo + RUN < n ? lo + RUN : n;
    for (size_t i = lo + 1; i < hi; i++) {
      const record_t x = r[i];
      size_t j = i;
      for (; j > lo && record_before(&x, &r[j - 1]); j--) r[j] = r[j - 1];
      r[j] = x;
    }
  }
  record_t *from = r, *to = tmp;
  for (size_t w = RUN; w < n; w *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * w) {
      const size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      size_t i = lo, j = mid, k = lo;
      /* The left run's record first when neither goes before the other: stable. */
      while (i < mid && j < hi) to[k++] = record_before(&from[j], &from[i]) ? from[j++] : from[i++];
      while (i < mid) to[k++] = from[i++];
      while (j < hi) to[k++] = from[j++];
    }
    record_t *t = from;
    from = to;
    to = t;
  }
  if (from != r) memcpy(r, from, n * sizeof *r);
  free(tmp);
}

/* The call tree, relabelled "function (file:line)" so that codes of one line are one node,
 * and pruned to at most opts.max_tree_nodes nodes: a node whose stacks allocated fewer than
 * tree_min samples (0 or a power of two, the smallest that keeps the bound) is drawn as
 * part of its caller, in the page only, not in the analysis. map[n]: the page's node of
 * profile node n. */
static int page_tree(report_mem_t *m, cts_labels_t *labels, cts_stacks_t *dst, uint32_t **map) {
  const cts_stacks_t *src = &m->t.prof.stacks;
  int e = cts_stacks_init(dst, false, 0);
  if (e) return e;
  incl_t x; /* then the map, over it */
  for (bool wide = false;; wide = true) {
    if (inclusive_samples(&x, src, wide, NULL, 0)) return -ENOMEM;
    if (share_threshold(&x, src->count, m->opts.max_tree_nodes, &m->tree_min)) break;
    free(x.buf);
  }
  m->tree_pruned = 0;
  map_put(x.buf, 0, 0);
  /* Parents come before children (as cts_stacks_relabel, which this is with the pruning). */
  for (uint32_t i = 1; i < src->count && !e; i++) {
    const uint32_t parent = map_get(x.buf, src->nodes[i].parent);
    if (incl_get(&x, i) < m->tree_min) {
      map_put(x.buf, i, parent);
      m->tree_pruned++;
      continue;
    }
    const uint64_t id = cts_labels_id(labels, src->nodes[i].code);
    uint32_t node = 0;
    e = id ? cts_stacks_intern_child(dst, parent, id, &node) : -ENOMEM;
    map_put(x.buf, i, node);
  }
  /* 8-byte figures: their spent half goes back (the map is 4 bytes a node). */
  void *shrunk = x.wide ? realloc(x.buf, (src->count ? src->count : 1) * sizeof(uint32_t)) : NULL;
  *map = shrunk ? shrunk : x.buf;
  return e;
}

static void write_tree(cts_out_t *o, report_mem_t *m) {
  const cts_stacks_t *src = &m->t.prof.stacks;
  const cts_frames_t frames = cts_mem_trace_frames(&m->t);
  cts_labels_t labels;
  cts_labels_init(&labels, &frames, CTS_LABEL_LINE);
  cts_stacks_t dst;
  uint32_t *map = NULL;
  if (page_tree(m, &labels, &dst, &map)) {
    m->err = -ENOMEM;
    cts_out_str(o, ",\"frames\":[],\"parent\":[],\"frame\":[]");
    free(map);
    cts_stacks_fini(&dst);
    cts_labels_fini(&labels);
    return;
  }
  /* The tree and the records as compact columns (report_col_t). */
  cts_out_char(o, ',');
  report_strs_write(o, "frames", (const char *const *)labels.names, labels.n);
  report_col_t col;
  report_col_init(&col, true);
  for (uint32_t i = 0; i < dst.count; i++) report_col_put(&col, i ? dst.nodes[i].parent : 0);
  cts_out_char(o, ',');
  report_col_write(o, "parent", &col);
  report_col_init(&col, false);
  for (uint32_t i = 0; i < dst.count; i++) report_col_put(&col, dst.nodes[i].code); /* 0: root */
  cts_out_char(o, ',');
  report_col_write(o, "frame", &col);
  /* Records sorted by tree node (then the other fields), so that the node column is mostly
   * zero differences and compresses to almost nothing. Sorting in place keeps writing the
   * document twice (serve) the same. */
  for (size_t i = 0; i < m->nrecs; i++)
    if (m->recs[i].node >= src->count) m->recs[i].node = 0;
  for (size_t i = 0; i < m->nrecs; i++) m->recs[i].page_node = map[m->recs[i].node];
  sort_records(m->recs, m->nrecs);
  /* The figures of the unfiltered view, so that the viewer can draw it before it has decoded
   * the records (which it does after the first frame): samples per node and the live heap
   * at the records' time resolution (as differences per bucket). */
  const uint64_t end = m->t.prof.have_events && m->t.prof.last_event_us > m->origin_us
                           ? m->t.prof.last_event_us - m->origin_us
                           : 0;
  const size_t nbuckets = (size_t)((end > 1 ? end : 1) + m->rec_w - 1) / m->rec_w + 2;
  uint64_t *self = calloc(dst.count + 1, sizeof *self);
  int64_t *heap = calloc(nbuckets, sizeof *heap);
  uint64_t blocks = 0;
  if (!self || !heap) {
    m->err = -ENOMEM;
  } else {
    /* From the profile's nodes, not the records: those may be by a coarser tree. */
    for (uint32_t i = 0; i < src->count; i++) self[map[i]] += node_samples(src, i);
    for (size_t i = 0; i < m->nrecs; i++) {
      const record_t *r = &m->recs[i];
      blocks += r->blocks;
      if (r->ta < nbuckets) heap[r->ta] += (int64_t)r->samples;
      if (r->tf != NEVER && r->tf < nbuckets) heap[r->tf] -= (int64_t)r->samples;
    }
  }
  report_col_init(&col, false);
  for (uint32_t i = 0; self && i < dst.count; i++) report_col_put(&col, (int64_t)self[i]);
  cts_out_char(o, ',');
  report_col_write(o, "self", &col);
  report_col_init(&col, false);
  for (size_t i = 0; heap && i < nbuckets; i++) report_col_put(&col, heap[i]);
  cts_out_char(o, ',');
  report_col_write(o, "heap_delta", &col);
  free(self);
  free(heap);
  /* The records are decoded by the viewer when a filter first needs them ("lazy"). */
  static const char *const cols[] = {"node", "ta", "tf", "size", "src", "samples", "blocks"};
  /* The rules by which the page is coarser than the analysis, for the viewer to state. */
  cts_out_printf(o, ",\"tree_nodes\":%u,\"tree_pruned\":%u,\"tree_min\":%llu", src->count,
                 m->tree_pruned, (unsigned long long)m->tree_min);
  /* UINT64_MAX (every stack counted as the root's) as one more than every sample: JSON
   * numbers beyond 2^53 are not exact in the viewer. */
  const uint64_t all = cts_alloc_profile_samples(&m->t.prof);
  const uint64_t rec_min = !m->coarse_tree            ? 0
                           : m->rec_min_samples > all ? all + 1
                                                      : m->rec_min_samples;
  cts_out_printf(o, ",\"rec_size_octaves\":%d,\"rec_min_samples\":%llu", m->size_octaves ? 1 : 0,
                 (unsigned long long)rec_min);
  cts_out_printf(o, ",\"rec_us\":%llu,\"rec_blocks\":%llu,\"records\":{\"lazy\":1,\"n\":%zu",
                 (unsigned long long)m->rec_w, (unsigned long long)blocks, m->nrecs);
  cts_out_str(o, ",\"size_low\":[");
  for (unsigned b = 0; b < CTS_HIST_BUCKETS; b++)
    cts_out_printf(o, b ? ",%llu" : "%llu", (unsigned long long)cts_hist_bucket_low(b));
  cts_out_char(o, ']');
  for (unsigned c = 0; c < 7; c++) {
    report_col_init(&col, c <= 1);
    for (size_t i = 0; i < m->nrecs; i++) {
      const record_t *r = &m->recs[i];
      int64_t v;
      switch (c) {
        case 0:
          v = map[r->node];
          break;
        case 1:
          v = r->ta;
          break;
        case 2:
          v = r->tf == NEVER ? -1 : (int64_t)r->tf;
          break;
        case 3:
          v = (int64_t)r->size_class; /* an index into size_low */
          break;
        case 4:
          v = r->source;
          break;
        case 5:
          v = (int64_t)r->samples;
          break;
        default:
          v = (int64_t)r->blocks;
          break;
      }
      report_col_put(&col, v);
    }
    cts_out_char(o, ',');
    report_col_write(o, cols[c], &col);
  }
  cts_out_char(o, '}');
  free(map);
  cts_stacks_fini(&dst);
  cts_labels_fini(&labels);
}

void report_mem_write(cts_out_t *o, report_mem_t *m) {
  const cts_alloc_profile_t *p = &m->t.prof;
  cts_out_char(o, '{');
  write_info(o, m);
  uint64_t start, end;
  report_mem_span(m, &start, &end);
  cts_out_printf(o, ",\n\"end_us\":%llu,\"heap_us\":%llu,\"heap\":[",
                 (unsigned long long)(end - start), (unsigned long long)m->heap_w);
  const uint64_t nb = (end - start) / m->heap_w + 1;
  for (uint64_t b = 0; b < nb && b < HEAP_BUCKETS; b++) {
    if (b) cts_out_char(o, ',');
    if (m->heap_set[b])
      cts_out_u64(o, m->heap_max[b]);
    else
      cts_out_str(o, "-1");
  }
  cts_out_char(o, ']');
  write_sites(o, m);
  write_hist(o, "size_hist", &p->size_words);
  write_hist(o, "life_hist", &p->life_us);
  cts_out_char(o, '\n');
  write_tree(o, m);
  cts_out_char(o, '}');
}
