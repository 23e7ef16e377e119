/* SPDX-License-Identifier: MIT */
/* Stacks at scale (issue #20): a trie node and its table slot stay within 64 bytes, growth
 * slack included, so the default budget holds 10 M distinct stack nodes; a profile with more
 * distinct stacks than the old 512 Ki-node budget keeps every frame of every one; past a
 * budget, stacks fall back to their allocation point under the overflow node, counted. */
#include "../../src/analysis/alloc_profile.h"

#include "../test.h"

/* Stack k: three frames, 100 × 100 × WIDTH distinct stacks (codes are never 0). */
enum { WIDTH = 120 };

static void stack_of(uint64_t k, uint64_t bt[3]) {
  bt[0] = 1 + k / (100u * WIDTH);
  bt[1] = 1000 + (k / WIDTH) % 100u;
  bt[2] = 100000 + k % WIDTH;
}

/* Allocates one block per stack 0..n-1, each with its own object id. */
static void feed(cts_alloc_profile_t *p, uint64_t n) {
  uint64_t bt[3], prev[3] = {0};
  for (uint64_t k = 0; k < n; k++) {
    stack_of(k, bt);
    uint64_t common = 0;
    while (k && common < 3 && bt[common] == prev[common]) common++;
    const cts_mt_event_t ev = {.kind = CTS_MT_ALLOC,
                               .source = CTS_MT_SOURCE_MINOR,
                               .time_us = 1000 + k,
                               .obj_id = k,
                               .length = 2,
                               .nsamples = 1,
                               .common_prefix = common,
                               .backtrace_len = 3,
                               .backtrace = bt};
    CTS_ASSERT_EQ_INT(cts_alloc_profile_add_event(p, &ev), 0);
    memcpy(prev, bt, sizeof prev);
  }
  cts_alloc_profile_finish(p);
}

/* Bytes the trie holds for its nodes: the node array and the (parent, code) table. */
static size_t trie_bytes(const cts_stacks_t *s) {
  return (size_t)s->cap * sizeof *s->nodes + (size_t)s->table_cap * sizeof *s->table;
}

CTS_TEST(a_node_and_its_slot_fit_in_32_bytes) {
  CTS_ASSERT_EQ_U64(sizeof(cts_stack_node_t), 24);
  CTS_ASSERT_EQ_U64(sizeof(cts_stack_tslot_t), 8);
  /* 10 M nodes at the default budget: a table of 2^24 slots (load ≤ 0.7) and the node
   * array clamped to the budget stay within 64 bytes a node. */
  CTS_ASSERT(CTS_STACKS_DEFAULT_MAX_NODES >= 10000000u);
  const uint64_t bytes = (uint64_t)CTS_STACKS_DEFAULT_MAX_NODES * sizeof(cts_stack_node_t) +
                         (1ull << 24) * sizeof(cts_stack_tslot_t);
  CTS_ASSERT(bytes <= (uint64_t)CTS_STACKS_DEFAULT_MAX_NODES * 64u);
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
    if (s->nodes[i].depth != 3) {
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
  CTS_ASSERT(s->stat_cap * sizeof *s->stats <= (s->stat_count * 3 / 2 + 1024) * 88u);
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

CTS_TEST_MAIN()
