/* SPDX-License-Identifier: MIT */
/* Stacks at scale (issue #20): a trie node and its table slot stay within 64 bytes, growth
 * slack included, so the default budget holds 10 M distinct stack nodes, and within 64 with
 * the figures of the nodes that allocate on a trie shaped like gen_trace's default one (3 in
 * 8 nodes allocate); counts past 2^32 are kept whole; a profile with more
 * distinct stacks than the old 512 Ki-node budget keeps every frame of every one; past a
 * budget, stacks fall back to their allocation point under the overflow node, counted; a
 * trie whose look-up table was dropped (export -f folded) finds and makes nodes as before. */
#include "../../src/analysis/alloc_profile.h"

#include "../test.h"

/* Stack k: three frames, 100 × 100 × WIDTH distinct stacks (codes are never 0). */
enum { WIDTH = 120 };

static void stack_of(uint64_t k, uint64_t bt[3]) {
  bt[0] = 1 + k / (100u * WIDTH);
  bt[1] = 1000 + (k / WIDTH) % 100u;
  bt[2] = 100000 + k % WIDTH;
}

/* Allocation k (object id k, 2 words, one sample, minor heap) of backtrace bt[0..n). */
static void add_alloc(cts_alloc_profile_t *p, uint64_t k, const uint64_t *bt, size_t n,
                      size_t common) {
  const cts_mt_event_t ev = {.kind = CTS_MT_ALLOC,
                             .source = CTS_MT_SOURCE_MINOR,
                             .time_us = 1000 + k,
                             .obj_id = k,
                             .length = 2,
                             .nsamples = 1,
                             .common_prefix = common,
                             .backtrace_len = n,
                             .backtrace = bt};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_add_event(p, &ev), 0);
}

/* Allocates one block per stack 0..n-1, each with its own object id. */
static void feed(cts_alloc_profile_t *p, uint64_t n) {
  uint64_t bt[3], prev[3] = {0};
  for (uint64_t k = 0; k < n; k++) {
    stack_of(k, bt);
    uint64_t common = 0;
    while (k && common < 3 && bt[common] == prev[common]) common++;
    add_alloc(p, k, bt, 3, common);
    memcpy(prev, bt, sizeof prev);
  }
  /* The trie as the trace leaves it, table included (cts_alloc_profile_finish frees it). */
  cts_stacks_finish(&p->stacks);
}

/* Bytes the trie holds for its nodes: the node array and the (parent, code) table. */
static size_t trie_bytes(const cts_stacks_t *s) {
  return (size_t)s->cap * sizeof *s->nodes + (size_t)s->table_cap * sizeof *s->table;
}

CTS_TEST(a_node_and_its_slot_fit_in_32_bytes_and_64_with_figures) {
  /* Code, parent and record: no depth, no site (24 bytes with them, before wip/h31node). */
  CTS_ASSERT_EQ_U64(sizeof(cts_stack_node_t), 16);
  CTS_ASSERT_EQ_U64(sizeof *((cts_stacks_t *)0)->table, 4);
  /* 10 M nodes at the default budget: a table of 2^24 slots (load ≤ 0.7) and the node
   * array clamped to the budget stay within 64 bytes a node. */
  CTS_ASSERT(CTS_STACKS_DEFAULT_MAX_NODES >= 10000000u);
  const uint64_t bytes = (uint64_t)CTS_STACKS_DEFAULT_MAX_NODES * sizeof(cts_stack_node_t) +
                         (1ull << 24) * sizeof(uint32_t);
  CTS_ASSERT(bytes <= (uint64_t)CTS_STACKS_DEFAULT_MAX_NODES * 64u);
  /* With the figures of the 3 nodes in 8 that end an allocating stack on gen_trace's
   * default shape, still within 64 bytes a node. */
  const uint64_t figures =
      (uint64_t)CTS_STACKS_DEFAULT_MAX_NODES * 3 / 8 * sizeof(cts_stack_stat_t);
  CTS_ASSERT(bytes + figures <= (uint64_t)CTS_STACKS_DEFAULT_MAX_NODES * 64u);
}

/* Bytes of the trie and its figures that are resident: the node and figure arrays are
 * large blocks (mapped by malloc, grown in place or by remapping), whose tail past the used
 * part is never written, so their growth slack costs address space, not memory; the table
 * is probed all over. */
static size_t resident_bytes(const cts_stacks_t *s) {
  return (size_t)s->count * sizeof *s->nodes + (size_t)s->table_cap * sizeof *s->table +
         s->stat_count * sizeof *s->stats;
}

/* Group g of three stacks: a chain of five frames of its own, then one of three leaves, so
 * 3 of every 8 nodes end an allocating stack (gen_trace's default shape: 3.1 M of 8.46 M). */
static void feed_groups(cts_alloc_profile_t *p, uint64_t groups) {
  uint64_t bt[6];
  for (uint64_t k = 0; k < groups * 3; k++) {
    const uint64_t g = k / 3;
    for (unsigned d = 0; d < 5; d++) bt[d] = 1 + g * 5 + d;
    bt[5] = (1ull << 40) + k % 3;
    add_alloc(p, k, bt, 6, k % 3 ? 5 : 0);
  }
  cts_stacks_finish(&p->stacks); /* as feed() */
}

CTS_TEST(a_node_with_its_figures_fits_in_64_bytes) {
  CTS_ASSERT_EQ_U64(sizeof(cts_stack_stat_t), 64);
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {.stacks = true, .skip_histograms = true};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  const uint64_t groups = 150000; /* 1.2 M nodes */
  feed_groups(&p, groups);
  const cts_stacks_t *s = &p.stacks;
  CTS_ASSERT_EQ_U64(s->count, 1 + groups * 8);
  CTS_ASSERT_EQ_U64(s->stat_count, 2 + groups * 3);
  /* The table at a load of 0.57 (2^21 slots), as on gen_trace's default shape (8.46 M
   * nodes in 2^24 slots: 0.5) or at the default budget (0.6). Its load goes from 0.35 to 0.7
   * between doublings: at 0.35, nodes cost up to 71 bytes with their figures. */
  CTS_ASSERT_EQ_U64(s->table_cap, 1u << 21);
  const size_t per_node = resident_bytes(s) / s->count;
  CTS_ASSERT_MSG(per_node <= 64, "%zu bytes per node with the figures", per_node);
  cts_alloc_profile_fini(&p);
}

/* The report's profile (lean records, live figures by site) on the same shape: node, table
 * slot, records and sites within 30 bytes a node, so that the 10 Mi nodes kept at the
 * default budget (gen_trace --mb 1000) cost ~300 MiB. 46 bytes with 8-byte table slots and
 * 24-byte records (main before wip/h30big), 39 with 4-byte slots alone, 38 with 24-byte
 * nodes (before wip/h31node), 31 with a site kept by record (4 bytes each, before
 * wip/h32site: a node's site is now its code's, from the map of sites). */
CTS_TEST(a_report_node_with_its_figures_fits_in_30_bytes) {
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {
      .stacks = true, .skip_histograms = true, .live_by_site = true};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  const uint64_t groups = 150000; /* 1.2 M nodes, 2^21 slots as above */
  feed_groups(&p, groups);
  const cts_stacks_t *s = &p.stacks;
  CTS_ASSERT(s->lean != NULL);
  CTS_ASSERT_EQ_U64(s->count, 1 + groups * 8);
  CTS_ASSERT_EQ_U64(s->table_cap, 1u << 21);
  const size_t bytes = (size_t)s->count * sizeof *s->nodes +
                       (size_t)s->table_cap * sizeof *s->table + s->stat_count * sizeof *s->lean +
                       s->site_cap * sizeof *s->sites +
                       s->site_of_code.cap * sizeof *s->site_of_code.slots;
  CTS_ASSERT_MSG(bytes / s->count <= 30, "%zu bytes per node with the figures", bytes / s->count);
  /* Every allocating node's site is its leaf's, found by its code. */
  for (uint32_t n = 1; n < s->count; n++) {
    const uint32_t site = cts_stacks_site(s, n);
    CTS_ASSERT_EQ_U64(site != UINT32_MAX, s->nodes[n].stat != 0);
    if (site != UINT32_MAX) CTS_ASSERT_EQ_U64(s->sites[site].code, s->nodes[n].code);
  }
  cts_alloc_profile_fini(&p);
}

CTS_TEST(more_stacks_than_the_old_budget_keep_every_frame) {
  const uint64_t n = 100u * 100u * WIDTH; /* 1.2 M stacks, 1.21 M nodes > 512 Ki */
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {.stacks = true, .skip_histograms = true};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  feed(&p, n);
  const cts_stacks_t *s = &p.stacks;
  CTS_ASSERT_EQ_U64(s->overflowed, 0);
  CTS_ASSERT_EQ_U64(s->count, 1 + 100 + 100u * 100u + n);
  CTS_ASSERT(s->count > 512u << 10);
  /* Every stack is whole: its leaf holds its one block, three frames below the root. */
  uint64_t leaves = 0;
  for (uint32_t i = 1; i < s->count; i++) {
    const cts_site_stats_t self = cts_stacks_self(s, i);
    if (cts_stacks_depth(s, i) != 3) {
      CTS_ASSERT_EQ_U64(self.allocs, 0);
      continue;
    }
    CTS_ASSERT_EQ_U64(self.allocs, 1);
    CTS_ASSERT_EQ_U64(self.live_samples, 1);
    leaves++;
  }
  CTS_ASSERT_EQ_U64(leaves, n);
  /* Growth slack included: the node array grows by half, the table doubles at 0.7. */
  const size_t per_node = trie_bytes(s) / s->count;
  CTS_ASSERT_MSG(per_node <= 64, "%zu bytes per node", per_node);
  /* Figures exist only for stacks that allocated (+ the zero record and the root's). */
  CTS_ASSERT_EQ_U64(s->stat_count, n + 2);
  CTS_ASSERT(s->stat_cap * sizeof *s->stats <= (s->stat_count * 3 / 2 + 1024) * 64u);
  /* Once the trace is read the table goes (views build their own tries); a stack can still
   * be found, and interned again without a second node. */
  cts_alloc_profile_finish(&p);
  CTS_ASSERT(s->table == NULL && s->table_cap == 0);
  uint64_t bt[3];
  stack_of(12345, bt);
  uint32_t node;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&p.stacks, bt, 3, &node), 0);
  CTS_ASSERT_EQ_U64(cts_stacks_depth(s, node), 3);
  CTS_ASSERT_EQ_U64(cts_stacks_self(s, node).allocs, 1);
  CTS_ASSERT_EQ_U64(s->count, 1 + 100 + 100u * 100u + n);
  cts_alloc_profile_fini(&p);
}

CTS_TEST(past_the_budget_stacks_keep_their_allocation_point) {
  const uint64_t n = 100u * 100u * WIDTH / 10; /* 120 000 stacks */
  cts_alloc_profile_t p;
  const cts_alloc_profile_config_t cfg = {
      .stacks = true, .skip_histograms = true, .max_nodes = 5000};
  CTS_ASSERT_EQ_INT(cts_alloc_profile_init(&p, &cfg), 0);
  feed(&p, n);
  const cts_stacks_t *s = &p.stacks;
  /* The budget plus the overflow node and one node per allocation point under it. */
  CTS_ASSERT(s->count <= 5000u + 1u + WIDTH);
  CTS_ASSERT(s->overflowed > 0);
  const uint32_t over = cts_stacks_find_child(s, 0, CTS_STACKS_OVERFLOW_CODE);
  CTS_ASSERT(over != UINT32_MAX);
  /* Every block is counted once: whole stacks plus cut ones give every allocation. */
  uint64_t whole = 0, cut = 0;
  for (uint32_t i = 1; i < s->count; i++) {
    const uint64_t a = cts_stacks_self(s, i).allocs;
    if (s->nodes[i].parent == over)
      cut += a;
    else
      whole += a;
  }
  CTS_ASSERT_EQ_U64(cut, s->overflowed);
  CTS_ASSERT_EQ_U64(whole + cut, n);
  /* Cut stacks keep their allocation point: one node per leaf code under the overflow. */
  for (uint64_t leaf = 0; leaf < WIDTH; leaf++)
    CTS_ASSERT(cts_stacks_find_child(s, over, 100000 + leaf) != UINT32_MAX);
  cts_alloc_profile_fini(&p);
}

/* Past the budget, consecutive stacks mostly stop at the same missing frame (their shared
 * prefix): after the first, they are cut there with no table look-up (on gen_trace's 1 GB
 * default shape, 84 % of the 23.8 M stacks cut), until that frame gets a node. */
CTS_TEST(stacks_cut_where_the_last_one_stopped_cost_no_lookup) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  const uint64_t whole[3] = {1, 2, 3};
  uint32_t node, first = 0, two;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, whole, 3, &node), 0);
  s.max_nodes = s.count; /* spent */
  enum { CUT = 1000 };
  uint64_t bt[4] = {1, 2, 9, 0};
  for (uint64_t k = 0; k < CUT; k++) {
    bt[3] = 100 + k % 10u;
    uint32_t got;
    CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&s, bt, 4, k ? 2 : 0, &got), 0);
    if (k == 0) first = got;
    if (k % 10u == 0) CTS_ASSERT_EQ_U64(got, first); /* the same leaf, the same node */
  }
  CTS_ASSERT_EQ_U64(s.overflowed, CUT);
  const uint32_t over = cts_stacks_find_child(&s, 0, CTS_STACKS_OVERFLOW_CODE);
  CTS_ASSERT_EQ_U64(s.nodes[first].parent, over);
  CTS_ASSERT_EQ_U64(s.nodes[first].code, 100);
  /* One look-up, by the first stack cut: the others stopped where it did (one each before). */
  CTS_ASSERT_MSG(s.lookups <= 2, "%llu look-ups", (unsigned long long)s.lookups);
  /* The missing frame made (outside the budget, as a derived view may): found again. */
  CTS_ASSERT(cts_stacks_find_child(&s, node - 1, 9) == UINT32_MAX);
  uint32_t nine;
  CTS_ASSERT_EQ_INT(cts_stacks_intern_child(&s, node - 1, 9, &nine), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&s, bt, 3, 0, &two), 0);
  CTS_ASSERT_EQ_U64(two, nine);
  CTS_ASSERT_EQ_U64(s.overflowed, CUT);
  cts_stacks_fini(&s);
}

/* A new branch of the trie is made without asking the table for each of its frames (a node
 * just made has no child), and a stack seen again finds its new frames through the memo:
 * in a large trie every table look-up is a cache miss. */
CTS_TEST(new_frames_cost_one_table_lookup_per_stack) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  enum { DEPTH = 500 };
  uint64_t bt[DEPTH];
  for (unsigned i = 0; i < DEPTH; i++) bt[i] = 7 + i;
  uint32_t node, again;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, DEPTH, &node), 0);
  CTS_ASSERT_EQ_U64(s.count, DEPTH + 1);
  CTS_ASSERT_EQ_U64(s.lookups, 1); /* the first frame; the 499 below it are known new */
  /* The same stack with another leaf, then the first one again, without the prefix cache
   * (interned from scratch): the memo holds every node just made. */
  bt[DEPTH - 1] = 3;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, DEPTH, &again), 0);
  CTS_ASSERT_EQ_U64(s.lookups, 2);
  s.prev_len = 0;
  bt[DEPTH - 1] = 7 + DEPTH - 1;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, DEPTH, &again), 0);
  CTS_ASSERT_EQ_U64(again, node);
  /* Only frames whose memo entry another one took (direct-mapped) go to the table. */
  CTS_ASSERT_MSG(s.lookups - 2 < DEPTH / 8, "%llu look-ups", (unsigned long long)s.lookups);
  /* The nodes are all in the table too: found without the memo. */
  uint32_t cur = 0;
  for (unsigned i = 0; i < DEPTH; i++) cur = cts_stacks_find_child(&s, cur, bt[i]);
  CTS_ASSERT_EQ_U64(cur, node);
  cts_stacks_fini(&s);
}

/* With path keys, a backtrace's frames past its first table look-up have their slots fetched
 * before their own look-ups, while the frames above are looked up: their homes come from the
 * frames' codes, not from the nodes the look-ups above give. Every stack here is met again
 * in another order, its frames under parents of many children or with evicted hints and memo
 * entries: three look-ups a stack, one waited for. */
CTS_TEST(path_keys_fetch_a_stacks_slots_ahead_of_its_lookups) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  cts_stacks_key_by_path(&s);
  enum { STACKS = 20000 };
  uint32_t first[STACKS];
  for (uint64_t k = 0; k < STACKS; k++) {
    const uint64_t bt[3] = {1 + k, 100000 + k, 200000 + k};
    CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 3, &first[k]), 0);
  }
  const uint64_t lookups = s.lookups, ahead = s.lookups_fetched_ahead;
  for (uint64_t j = 0; j < STACKS; j++) {
    const uint64_t k = j * 7919 % STACKS;
    const uint64_t bt[3] = {1 + k, 100000 + k, 200000 + k};
    uint32_t node;
    CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 3, &node), 0);
    CTS_ASSERT_EQ_U64(node, first[k]);
  }
  const uint64_t asked = s.lookups - lookups, fetched = s.lookups_fetched_ahead - ahead;
  CTS_ASSERT_MSG(asked > 2 * STACKS, "%llu look-ups", (unsigned long long)asked);
  CTS_ASSERT_MSG(fetched + STACKS >= asked, "%llu of %llu look-ups fetched ahead",
                 (unsigned long long)fetched, (unsigned long long)asked);
  /* The table agrees, asked from outside (a walk up for each parent's path). */
  for (uint64_t k = 0; k < STACKS; k += 97) {
    uint32_t cur = 0;
    for (uint64_t f = 0; f < 3; f++) cur = cts_stacks_find_child(&s, cur, f * 100000 + !f + k);
    CTS_ASSERT_EQ_U64(cur, first[k]);
    CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, cur, 7), UINT32_MAX);
  }
  cts_stacks_fini(&s);
}

/* A walk down a trie keyed by path, carrying each node's tag (as leaks' tie walk does when
 * its own edge table cannot tell two edges apart), meets the nodes interned for those
 * frames at every depth of stacks far deeper than path_tag_of's chunks, and misses where
 * no node is; cts_stacks_find_child, which walks up for each parent's tag, agrees. */
CTS_TEST(a_walk_down_a_path_keyed_trie_carries_its_tags) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  cts_stacks_key_by_path(&s);
  enum { DEPTH = 3000, BRANCHES = 4 };
  static uint64_t bt[BRANCHES][DEPTH];
  uint32_t leaf[BRANCHES];
  for (uint64_t b = 0; b < BRANCHES; b++) {
    for (uint64_t f = 0; f < DEPTH; f++) bt[b][f] = f < DEPTH / 2 ? 10 + f : (b + 1) * 100000 + f;
    CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt[b], DEPTH, &leaf[b]), 0);
  }
  for (uint64_t b = 0; b < BRANCHES; b++) {
    uint32_t node = 0, tag = 0;
    for (uint64_t f = 0; f < DEPTH; f++) {
      const uint32_t parent = node;
      node = cts_stacks_find_child_down(&s, parent, bt[b][f], &tag);
      CTS_ASSERT_MSG(node != UINT32_MAX, "branch %llu, frame %llu not found", (unsigned long long)b,
                     (unsigned long long)f);
      CTS_ASSERT_EQ_U64(s.nodes[node].parent, parent);
      CTS_ASSERT_EQ_U64(s.nodes[node].code, bt[b][f]);
      if (f % 997 == 0) CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, parent, bt[b][f]), node);
    }
    CTS_ASSERT_EQ_U64(node, leaf[b]);
    uint32_t tag_after = tag;
    CTS_ASSERT_EQ_U64(cts_stacks_find_child_down(&s, node, 7, &tag_after), UINT32_MAX);
  }
  cts_stacks_fini(&s);
}

/* Two spines whose bottoms share a memo entry (their node numbers 2^16 apart), with leaves
 * under each in turn: every leaf's parent has just left the refill's memo, and each walk up
 * would go to the root (~2^16 nodes). The refill stays linear in the nodes, and the table it
 * makes finds every leaf. */
CTS_TEST(a_refill_of_a_path_keyed_trie_is_linear_whatever_the_depth) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  cts_stacks_key_by_path(&s);
  enum { SHORT = 4000, LONG = SHORT + (1 << 16), LEAVES = 20 };
  static uint64_t bt[2][LONG + 1];
  for (uint64_t f = 0; f < LONG; f++) bt[0][f] = 10 + f, bt[1][f] = 1000000 + f;
  uint32_t spine[2];
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt[0], SHORT, &spine[0]), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt[1], LONG - SHORT, &spine[1]), 0);
  CTS_ASSERT_EQ_U64(spine[1] - spine[0], 1u << 16);
  uint32_t leaf[LEAVES];
  for (uint64_t k = 0; k < LEAVES; k++) {
    const size_t which = k % 2, depth = which ? LONG - SHORT : SHORT;
    bt[which][depth] = 5000000 + k;
    CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt[which], depth + 1, &leaf[k]), 0);
  }
  cts_stacks_drop_table(&s);
  const uint64_t before = s.rehash_walked;
  uint32_t node;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt[0], SHORT, &node), 0); /* made again */
  CTS_ASSERT_EQ_U64(node, spine[0]);
  const uint64_t walked = s.rehash_walked - before;
  CTS_ASSERT_MSG(walked <= (uint64_t)s.count * 16 + (1u << 16) + 1, "%llu nodes walked for %u",
                 (unsigned long long)walked, s.count);
  for (uint64_t k = 0; k < LEAVES; k++) {
    const uint32_t parent = spine[k % 2];
    CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, parent, 5000000 + k), leaf[k]);
  }
  cts_stacks_fini(&s);
}

/* Slots in the table, occupied. */
static uint32_t table_nodes(const cts_stacks_t *s) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->table_cap; i++) n += s->table[i] != 0;
  return n;
}

/* The frames of a new branch under its first new one (each a cache miss in a large table)
 * have their slots written CTS_STACKS_PENDING such frames later; meanwhile look-ups find
 * them, a made node is never made twice, and growing or dropping the table loses none. */
CTS_TEST(slots_of_new_deeper_frames_are_written_later) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  enum { DEPTH = 40 };
  uint64_t bt[DEPTH];
  for (unsigned i = 0; i < DEPTH; i++) bt[i] = 7 + i;
  uint32_t node;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, DEPTH, &node), 0);
  /* The first frame's slot now, the 39 below it later: 16 of them still pending. */
  CTS_ASSERT_EQ_U64(s.pending_count, CTS_STACKS_PENDING);
  CTS_ASSERT_EQ_U64(table_nodes(&s), DEPTH - CTS_STACKS_PENDING);
  uint32_t cur = 0;
  for (unsigned i = 0; i < DEPTH; i++) cur = cts_stacks_find_child(&s, cur, bt[i]);
  CTS_ASSERT_EQ_U64(cur, node);
  /* Asked without the memo, the hints or the previous path: the pending nodes again. */
  uint32_t child;
  CTS_ASSERT_EQ_INT(cts_stacks_intern_child(&s, s.nodes[node].parent, bt[DEPTH - 1], &child), 0);
  CTS_ASSERT_EQ_U64(child, node);
  CTS_ASSERT_EQ_U64(s.count, DEPTH + 1);
  /* Growth past the first table's 2048 slots: every node is in the table or pending. */
  for (uint64_t k = 0; k < 3000; k++) {
    const uint64_t b[3] = {1000 + k % 7, 2000 + k, 3000};
    CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, b, 3, &node), 0);
  }
  CTS_ASSERT(s.table_cap > 2048);
  CTS_ASSERT_EQ_U64(table_nodes(&s) + s.pending_count, s.count - 1);
  for (uint64_t k = 0; k < 3000; k++) {
    const uint32_t a = cts_stacks_find_child(&s, 0, 1000 + k % 7);
    const uint32_t b = cts_stacks_find_child(&s, a, 2000 + k);
    CTS_ASSERT(b != UINT32_MAX && cts_stacks_find_child(&s, b, 3000) != UINT32_MAX);
  }
  /* A dropped table is made again with every node, none pending. */
  cts_stacks_drop_table(&s);
  CTS_ASSERT_EQ_U64(s.pending_count, 0);
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, DEPTH, &node), 0);
  CTS_ASSERT_EQ_U64(table_nodes(&s), s.count - 1);
  cts_stacks_fini(&s);
}

/* A tree copied parents first (a relabelled call tree) makes a child of the node made last
 * with no look-up, its slot written later, and finds the others as before: the copy has the
 * source's shape. */
CTS_TEST(a_child_of_the_node_made_last_is_made_without_a_lookup) {
  cts_stacks_t src, dst;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&src, false, 0), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_init(&dst, false, 0), 0);
  for (uint64_t k = 0; k < 5000; k++) {
    const uint64_t bt[4] = {1 + k % 3, 10 + k % 11, 100 + k % 97, 1000 + k};
    uint32_t node;
    CTS_ASSERT_EQ_INT(cts_stacks_intern(&src, bt, 4, &node), 0);
  }
  static uint32_t map[1 + 3 + 33 + 5000 + 5000];
  CTS_ASSERT(src.count <= sizeof map / sizeof *map);
  map[0] = 0;
  for (uint32_t i = 1; i < src.count; i++) {
    const uint32_t parent = map[src.nodes[i].parent];
    const uint32_t before = dst.pending_count;
    CTS_ASSERT_EQ_INT(cts_stacks_intern_child(&dst, parent, src.nodes[i].code, &map[i]), 0);
    /* Made under the node made last: its slot pending (the ring full, or just flushed by
     * the table's growth). */
    if (parent && parent == dst.count - 2)
      CTS_ASSERT(dst.pending_count == (before < CTS_STACKS_PENDING ? before + 1 : before) ||
                 dst.pending_count == 1);
  }
  CTS_ASSERT_EQ_U64(dst.count, src.count);
  CTS_ASSERT(dst.pending_count > 0);
  for (uint32_t i = 1; i < src.count; i++) {
    CTS_ASSERT_EQ_U64(map[i], i); /* made in the same order */
    CTS_ASSERT_EQ_U64(cts_stacks_find_child(&dst, map[src.nodes[i].parent], src.nodes[i].code),
                      map[i]);
    uint32_t again;
    CTS_ASSERT_EQ_INT(
        cts_stacks_intern_child(&dst, map[src.nodes[i].parent], src.nodes[i].code, &again), 0);
    CTS_ASSERT_EQ_U64(again, map[i]);
  }
  CTS_ASSERT_EQ_U64(dst.count, src.count);
  cts_stacks_fini(&src);
  cts_stacks_fini(&dst);
}

/* Allocations that go back and forth between call paths (a loop calling two allocating
 * functions) find the frames past the shared prefix through the hints by parent, with no
 * hash: the memo is probed only for a path the hints lost (a third one under one parent). */
CTS_TEST(alternating_paths_are_found_without_the_memo) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  enum { PREFIX = 10, DEPTH = 15, PATHS = 3 };
  uint64_t bt[PATHS][DEPTH];
  uint32_t first[PATHS];
  for (unsigned p = 0; p < PATHS; p++) {
    for (unsigned i = 0; i < DEPTH; i++) bt[p][i] = i < PREFIX ? 7 + i : 1000 * (p + 1) + i;
    CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&s, bt[p], DEPTH, p ? PREFIX : 0, &first[p]), 0);
  }
  const uint32_t nodes = s.count;
  CTS_ASSERT_EQ_U64(nodes, 1 + PREFIX + PATHS * (DEPTH - PREFIX));
  /* Two paths in turn: each frame's child is one of the last two found under its parent. */
  const uint64_t probes = s.memo_probes;
  for (unsigned k = 0; k < 200; k++) {
    uint32_t node;
    CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&s, bt[k % 2], DEPTH, PREFIX, &node), 0);
    CTS_ASSERT_EQ_U64(node, first[k % 2]);
  }
  CTS_ASSERT_EQ_U64(s.memo_probes - probes, 1); /* path 0's fork, which path 2 had taken */
  /* Three in turn: the fork under the prefix misses the hints (one probe), the frames below
   * it are found by them. */
  const uint64_t before = s.memo_probes;
  for (unsigned k = 0; k < 300; k++) {
    uint32_t node;
    CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&s, bt[k % 3], DEPTH, PREFIX, &node), 0);
    CTS_ASSERT_EQ_U64(node, first[k % 3]);
  }
  CTS_ASSERT_MSG(s.memo_probes - before <= 300, "%llu probes",
                 (unsigned long long)(s.memo_probes - before));
  CTS_ASSERT_EQ_U64(s.count, nodes);
  CTS_ASSERT_EQ_U64(s.lookups, PATHS); /* each path's fork, when it was new */
  cts_stacks_fini(&s);
}

/* Interning through the hints, the memo and the previous path gives the node the table
 * gives, walked from the root, for random stacks of a small alphabet (hints and memo
 * entries taken over by other parents, prefixes told shorter than they are, leaves alone
 * in between). */
CTS_TEST(interning_agrees_with_the_table) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  uint64_t state = 42, bt[12], prev[12];
  size_t prev_n = 0;
  for (unsigned k = 0; k < 200000; k++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned r = (unsigned)(state >> 33);
    const size_t n = 1 + r % 12;
    for (size_t i = 0; i < n; i++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      /* Mostly the previous stack's frame: long shared prefixes, as in real traces. */
      const unsigned q = (unsigned)(state >> 40);
      bt[i] = i < prev_n && q % 8 ? prev[i] : 1 + q % 37;
    }
    size_t shared = 0;
    while (shared < n && shared < prev_n && bt[shared] == prev[shared]) shared++;
    if (r % 5 == 0 && shared) shared /= 2; /* a prefix told shorter is still right */
    uint32_t node;
    if (r % 11 == 0) {
      CTS_ASSERT_EQ_INT(cts_stacks_intern_leaf(&s, bt[n - 1], &node), 0);
      CTS_ASSERT_EQ_U64(node, cts_stacks_find_child(&s, 0, bt[n - 1]));
      prev[0] = bt[n - 1];
      prev_n = 1;
      continue;
    }
    CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&s, bt, n, shared, &node), 0);
    uint32_t walk = 0;
    for (size_t i = 0; i < n; i++) walk = cts_stacks_find_child(&s, walk, bt[i]);
    CTS_ASSERT_EQ_U64(node, walk);
    CTS_ASSERT_EQ_U64(cts_stacks_depth(&s, node), n);
    memcpy(prev, bt, n * sizeof *bt);
    prev_n = n;
  }
  CTS_ASSERT(s.count > CTS_STACKS_HINTS); /* hints shared between parents */
  cts_stacks_fini(&s);
}

/* cts_stacks_intern_repeat takes a backtrace wholly shared with the one before inline: two
 * tries keyed by path as the profile keys them, one interning through it and one through the
 * call, make the same nodes, cuts and caches, over random stacks that mostly repeat the one
 * before, with leaves in between, prefixes told shorter, and a node budget that runs out
 * half-way (stacks cut, whose path ends short). */
CTS_TEST(a_repeated_stack_interned_inline_is_the_calls) {
  cts_stacks_t s, t;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_init(&t, false, 0), 0);
  cts_stacks_key_by_path(&s);
  cts_stacks_key_by_path(&t);
  s.max_nodes = t.max_nodes = 60000;
  uint64_t state = 7, bt[10], prev[10];
  size_t prev_n = 0, repeats = 0;
  for (unsigned k = 0; k < 100000 && !cts_test_state.failed; k++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned r = (unsigned)(state >> 33);
    size_t n = prev_n;
    if (r % 4 != 0 || !prev_n) { /* a new stack one time in four */
      n = 1 + r % 10;
      for (size_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const unsigned q = (unsigned)(state >> 40);
        bt[i] = i < prev_n && q % 4 ? prev[i] : 1 + q % 53;
      }
    } else {
      memcpy(bt, prev, n * sizeof *bt);
    }
    size_t shared = 0;
    while (shared < n && shared < prev_n && bt[shared] == prev[shared]) shared++;
    if (r % 7 == 0 && shared) shared--; /* a prefix told shorter is still right */
    uint32_t a, b;
    if (r % 13 == 0) {
      CTS_ASSERT_EQ_INT(cts_stacks_intern_leaf(&s, bt[n - 1], &a), 0);
      CTS_ASSERT_EQ_INT(cts_stacks_intern_leaf(&t, bt[n - 1], &b), 0);
      prev[0] = bt[n - 1];
      prev_n = 1;
    } else {
      repeats += shared >= n && n == s.prev_len;
      CTS_ASSERT_EQ_INT(cts_stacks_intern_repeat(&s, bt, n, shared, &a), 0);
      CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&t, bt, n, shared, &b), 0);
      memcpy(prev, bt, n * sizeof *bt);
      prev_n = n;
    }
    CTS_ASSERT_EQ_U64(a, b);
    CTS_ASSERT(s.count == t.count && s.overflowed == t.overflowed && s.prev_len == t.prev_len &&
               s.prev_tagged == t.prev_tagged && s.absent_valid == t.absent_valid &&
               s.lookups == t.lookups && s.memo_probes == t.memo_probes);
    CTS_ASSERT(memcmp(s.prev_nodes, t.prev_nodes, s.prev_len * sizeof *s.prev_nodes) == 0);
  }
  fprintf(stderr, "  %zu repeats, %llu cut, %u nodes\n", repeats, (unsigned long long)s.overflowed,
          s.count);
  /* Not vacuous: many repeats took the inline path, and the budget cut stacks. */
  CTS_ASSERT(repeats > 10000 && s.overflowed > 1000 && s.count >= s.max_nodes);
  cts_stacks_fini(&s);
  cts_stacks_fini(&t);
}

/* A stack kept by its allocation point alone (top, leaks) is the one-frame stack, whether
 * its node is known (the memo) or not; the next backtrace may share that frame. */
CTS_TEST(a_leaf_interned_is_the_one_frame_stack) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  for (unsigned round = 0; round < 3; round++)
    for (uint64_t code = 1; code <= 5000; code += 7) {
      uint32_t leaf, one;
      CTS_ASSERT_EQ_INT(cts_stacks_intern_leaf(&s, code, &leaf), 0);
      CTS_ASSERT_EQ_U64(s.nodes[leaf].parent, 0);
      CTS_ASSERT_EQ_U64(s.nodes[leaf].code, code);
      CTS_ASSERT(s.nodes[leaf].stat != 0);
      CTS_ASSERT(cts_stacks_site(&s, leaf) != UINT32_MAX);
      CTS_ASSERT_EQ_U64(s.sites[cts_stacks_site(&s, leaf)].code, code);
      /* A two-frame stack under it, told it shares the leaf's frame. */
      const uint64_t bt[2] = {code, 1u << 20};
      CTS_ASSERT_EQ_INT(cts_stacks_intern_shared(&s, bt, 2, 1, &one), 0);
      CTS_ASSERT_EQ_U64(s.nodes[one].parent, leaf);
      CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 1, &one), 0);
      CTS_ASSERT_EQ_U64(one, leaf);
    }
  CTS_ASSERT_EQ_U64(s.count, 1 + 2 * 715);
  cts_stacks_fini(&s);
}

/* history_next_us is exactly the first time a call to cts_stacks_advance_time passes a
 * checkpoint (leaks calls it only past that time), through the spacing's doublings. */
CTS_TEST(history_next_us_is_where_a_checkpoint_passes) {
  cts_stacks_t s, t;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, true, 5000), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_init(&t, true, 5000), 0);
  const uint64_t bt[1] = {9};
  uint32_t node;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 1, &node), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&t, bt, 1, &node), 0);
  unsigned calls = 0;
  for (uint64_t time = 4000; time < 5000 + 100000; time += 7) {
    const uint32_t passed = s.checkpoints_passed;
    const uint64_t spacing = s.history_spacing_us, mark = s.history_next_us;
    cts_stacks_advance_time(&s, time); /* every event */
    if (time > t.history_next_us) {    /* only past the mark */
      calls++;
      cts_stacks_advance_time(&t, time);
    }
    CTS_ASSERT_EQ_U64(t.checkpoints_passed, s.checkpoints_passed);
    CTS_ASSERT_EQ_U64(t.history_spacing_us, s.history_spacing_us);
    /* A call at or before the mark changes nothing. */
    if (time <= mark) {
      CTS_ASSERT_EQ_U64(s.checkpoints_passed, passed);
      CTS_ASSERT_EQ_U64(s.history_spacing_us, spacing);
    }
    cts_stacks_alloc(&s, node, 1, 1.0, time);
    cts_stacks_alloc(&t, node, 1, 1.0, time);
  }
  /* One call per checkpoint passed at most: 64, then 32 per doubling of the spacing. */
  CTS_ASSERT_MSG(calls <= 64 + 32 * 17, "%u calls for ~14 000 events", calls);
  cts_stacks_finish(&s);
  cts_stacks_finish(&t);
  for (uint64_t q = 5000; q < 105000; q += 1000)
    CTS_ASSERT_EQ_U64(cts_site_live_at(&t, 0, q, 105000), cts_site_live_at(&s, 0, q, 105000));
  cts_stacks_fini(&s);
  cts_stacks_fini(&t);
}

/* Counts of allocations are 32-bit in a node's figures: one that passes 2^32 (a node that
 * allocated 4 G times; set up here by giving the counts their value just below) keeps its
 * high half aside and reads whole, up and back down. */
CTS_TEST(counts_past_2_to_the_32_are_kept_whole) {
  cts_stacks_t s;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&s, false, 0), 0);
  const uint64_t bt[2] = {5, 6};
  uint32_t node, other;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 2, &node), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, bt, 1, &other), 0);
  cts_stack_stat_t *f = &s.stats[s.nodes[node].stat];
  const uint64_t base = UINT32_MAX - 1u; /* 2^32 - 2 blocks allocated and live */
  f->allocs = f->live_allocs = (uint32_t)base;
  for (unsigned i = 0; i < 3; i++) {
    CTS_ASSERT_EQ_INT(cts_stacks_reserve(&s, node), 0);
    CTS_ASSERT_EQ_INT(cts_stacks_alloc(&s, node, 2, 1.5, 10 + i), 0);
  }
  CTS_ASSERT_EQ_U64(s.wide_count, 1);
  cts_site_stats_t self = cts_stacks_self(&s, node);
  CTS_ASSERT_EQ_U64(self.allocs, base + 3);
  CTS_ASSERT_EQ_U64(self.live_allocs, base + 3);
  CTS_ASSERT_EQ_U64(self.collected_allocs, 0);
  /* Another node's figures are not taken for the wide one's. */
  CTS_ASSERT_EQ_INT(cts_stacks_alloc(&s, other, 1, 1.0, 20), 0);
  CTS_ASSERT_EQ_U64(cts_stacks_self(&s, other).allocs, 1);
  CTS_ASSERT_EQ_U64(s.wide_count, 1);
  /* Freed back below 2^32: the borrow from the high half. */
  for (unsigned i = 0; i < 3; i++) cts_stacks_free(&s, node, 2, 1.5);
  cts_stacks_finish(&s);
  self = cts_stacks_self(&s, node);
  CTS_ASSERT_EQ_U64(self.allocs, base + 3);
  CTS_ASSERT_EQ_U64(self.live_allocs, base);
  CTS_ASSERT_EQ_U64(self.collected_allocs, 3);
  CTS_ASSERT_EQ_U64(self.live_samples, 0);
  /* The heap peaked with the other node's block: the wide node's count then, high half
   * included. */
  CTS_ASSERT_EQ_U64(self.peak_allocs, base + 3);
  CTS_ASSERT_EQ_U64(self.peak_samples, 6);
  /* A derived view adds whole counts. */
  const cts_site_stats_t add = {
      .allocs = 5000000000u, .live_allocs = 4300000000u, .peak_allocs = 4400000000u};
  CTS_ASSERT_EQ_INT(cts_stacks_add_self(&s, other, &add), 0);
  const cts_site_stats_t sum = cts_stacks_self(&s, other);
  CTS_ASSERT_EQ_U64(sum.allocs, 5000000001u);
  CTS_ASSERT_EQ_U64(sum.live_allocs, 4300000001u);
  CTS_ASSERT_EQ_U64(sum.peak_allocs, 4400000001u);
  CTS_ASSERT_EQ_U64(sum.collected_allocs, 700000000u);
  cts_stacks_fini(&s);
}

/* The peak epoch is 32-bit in a node's figures: when it would wrap, every node's peak is
 * saved and the epochs restart. A plain wrap would, 2^32 peaks after a node last changed,
 * take the node's old saved peak for the current one: set up here by giving the epochs
 * their values just before the wrap. */
CTS_TEST(the_peak_epoch_wraps_without_losing_a_peak) {
  cts_stacks_t plain, wrapped;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&plain, false, 0), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_init(&wrapped, false, 0), 0);
  wrapped.peak_epoch = UINT32_MAX - 2; /* before the records are made: they start there */
  const uint64_t bt[2] = {8, 9};
  uint32_t na[2], nb[2];
  cts_stacks_t *both[2] = {&plain, &wrapped};
  for (unsigned k = 0; k < 2; k++) {
    cts_stacks_t *s = both[k];
    CTS_ASSERT_EQ_INT(cts_stacks_intern(s, bt, 1, &na[k]), 0);
    CTS_ASSERT_EQ_INT(cts_stacks_intern(s, bt, 2, &nb[k]), 0);
    CTS_ASSERT_EQ_INT(cts_stacks_alloc(s, na[k], 1, 1.0, 1), 0); /* a peak with a's block */
    /* As if a had last changed 2^32 - 3 peaks ago, at epoch 2 (its peak then: 0). */
    if (k) s->stats[s->nodes[na[k]].stat].peak_epoch = 2;
    for (unsigned i = 0; i < 4; i++) /* 4 more peaks: the epoch wraps to 2 */
      CTS_ASSERT_EQ_INT(cts_stacks_alloc(s, nb[k], 1, 1.0, 2 + i), 0);
    cts_stacks_free(s, na[k], 1, 1.0);
    cts_stacks_finish(s);
  }
  CTS_ASSERT(wrapped.peak_epoch < plain.peak_epoch); /* it wrapped */
  const cts_site_stats_t a = cts_stacks_self(&plain, na[0]), w = cts_stacks_self(&wrapped, na[1]);
  CTS_ASSERT_EQ_U64(a.peak_allocs, 1); /* a's block was live at the last peak */
  CTS_ASSERT_EQ_U64(w.peak_allocs, a.peak_allocs);
  CTS_ASSERT_EQ_U64(w.peak_samples, a.peak_samples);
  CTS_ASSERT(w.peak_est_allocs == a.peak_est_allocs);
  CTS_ASSERT_EQ_U64(cts_stacks_self(&wrapped, nb[1]).peak_allocs, 4);
  cts_stacks_fini(&plain);
  cts_stacks_fini(&wrapped);
}

/* Stacks of the table tests: N past the first table's 2048 slots. */
enum { SPREAD_N = 20000 };

/* Interns stack k = {1, 2 + k % 50, 100 + k} of k in [0, SPREAD_N) forwards (node[k] set),
 * or backwards (checked against node[k]: the same nodes, none made twice). */
static void intern_spread(cts_stacks_t *s, uint32_t *node, bool again) {
  for (uint64_t i = 0; i < SPREAD_N; i++) {
    const uint64_t k = again ? SPREAD_N - 1 - i : i;
    const uint64_t bt[3] = {1, 2 + k % 50, 100 + k};
    uint32_t n;
    CTS_ASSERT_EQ_INT(cts_stacks_intern(s, bt, 3, &n), 0);
    if (again)
      CTS_ASSERT_EQ_U64(n, node[k]);
    else
      node[k] = n;
  }
}

/* *s: a trie of the SPREAD_N stacks, interned forwards (node[k]), its slots keyed by path
 * or by (parent, code). */
static void spread_trie(cts_stacks_t *s, uint32_t *node, bool by_path) {
  CTS_ASSERT_EQ_INT(cts_stacks_init(s, false, 0), 0);
  if (by_path) cts_stacks_key_by_path(s);
  intern_spread(s, node, false);
  CTS_ASSERT_EQ_U64(s->count, 1 + 1 + 50 + SPREAD_N);
}

static void check_dropped_table_made_again(bool by_path) {
  enum { N = SPREAD_N };
  cts_stacks_t s;
  static uint32_t node[N];
  spread_trie(&s, node, by_path);
  const uint32_t count = s.count;
  cts_stacks_drop_table(&s);
  CTS_ASSERT(s.table == NULL && s.table_cap == 0); /* its memory is given back */
  /* Look-ups without the table still find every node, and only those. */
  const uint32_t one = cts_stacks_find_child(&s, 0, 1);
  CTS_ASSERT(one != UINT32_MAX);
  CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, s.nodes[node[7]].parent, 107), node[7]);
  CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, one, 99), UINT32_MAX);
  /* Interning again, in another order (the memo and previous path do not answer all):
   * the same nodes, none made twice. */
  intern_spread(&s, node, true);
  CTS_ASSERT_EQ_U64(s.count, count);
  CTS_ASSERT(s.table != NULL);
  const uint64_t fresh[3] = {1, 2, 5};
  uint32_t n;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, fresh, 3, &n), 0);
  CTS_ASSERT_EQ_U64(n, count);
  CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, s.nodes[n].parent, 5), n);
  cts_stacks_drop_table(&s);
  uint32_t child;
  CTS_ASSERT_EQ_INT(cts_stacks_intern_child(&s, 0, 1, &child), 0);
  CTS_ASSERT_EQ_U64(child, one);
  CTS_ASSERT_EQ_U64(s.count, count + 1);
  cts_stacks_fini(&s);
}

CTS_TEST(a_dropped_table_is_made_again_for_new_frames) {
  check_dropped_table_made_again(false);
  check_dropped_table_made_again(true);
}

/* The table lent as scratch (the report's coarser call tree) comes back whole whatever was
 * written in it, at its size; one made again meanwhile (an interning) is kept and the lent
 * one freed. */
static void check_lent_table_given_back(bool by_path) {
  enum { N = SPREAD_N };
  cts_stacks_t s;
  static uint32_t node[N];
  spread_trie(&s, node, by_path);
  const uint32_t count = s.count, cap = s.table_cap;
  size_t bytes;
  void *lent = cts_stacks_lend_table(&s, &bytes);
  CTS_ASSERT(lent != NULL && s.table == NULL);
  CTS_ASSERT_EQ_U64(bytes, (uint64_t)cap * sizeof(uint32_t));
  CTS_ASSERT(bytes >= count * sizeof(uint32_t)); /* room for 4 bytes a node */
  memset(lent, 0xa5, bytes);
  cts_stacks_restore_table(&s, lent, bytes);
  CTS_ASSERT(s.table == lent);
  CTS_ASSERT_EQ_U64(s.table_cap, cap);
  for (uint64_t k = 0; k < N; k++)
    CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, s.nodes[node[k]].parent, 100 + k), node[k]);
  CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, s.nodes[node[0]].parent, 99), UINT32_MAX);
  intern_spread(&s, node, true);
  CTS_ASSERT_EQ_U64(s.count, count);
  /* Lent, then a new frame: the trie makes a table of its own, the lent one is freed. */
  lent = cts_stacks_lend_table(&s, &bytes);
  const uint64_t fresh[3] = {1, 2, 5};
  uint32_t n;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&s, fresh, 3, &n), 0);
  CTS_ASSERT_EQ_U64(n, count);
  cts_stacks_restore_table(&s, lent, bytes);
  CTS_ASSERT(s.table != NULL);
  CTS_ASSERT_EQ_U64(cts_stacks_find_child(&s, s.nodes[node[3]].parent, 103), node[3]);
  cts_stacks_fini(&s);
}

CTS_TEST(a_lent_table_is_given_back_whole) {
  check_lent_table_given_back(false);
  check_lent_table_given_back(true);
}

CTS_TEST_MAIN()
