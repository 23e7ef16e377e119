/* SPDX-License-Identifier: MIT */
/* Relabelled tries (siterows.h): nodes whose frames get the same label merge, in the order
 * their first node comes, and the nodes-only variant (folded stacks) gives none of them
 * figures, so a view that prints one figure does not pay 64 bytes a node for all of them. */
#include <string.h>

#include "../../src/analysis/siterows.h"

#include "../../src/common/hash.h"
#include "../test.h"

/* Codes 1 and 2 are two lines of function f, 3 is g: f's two frames get one label. */
static int lookup(void *ud, uint64_t code, const cts_mt_location_t **locs, size_t *n) {
  static const cts_mt_location_t f1 = {.line = 1, .filename = "a.c", .defname = "f"};
  static const cts_mt_location_t f2 = {.line = 2, .filename = "a.c", .defname = "f"};
  static const cts_mt_location_t g = {.line = 9, .filename = "a.c", .defname = "g"};
  (void)ud;
  *locs = code == 1 ? &f1 : code == 2 ? &f2 : &g;
  *n = 1;
  return code >= 1 && code <= 3 ? 0 : -1;
}

static void alloc_at(cts_stacks_t *s, const uint64_t *bt, size_t n, uint64_t samples) {
  uint32_t node;
  CTS_ASSERT_EQ_INT(cts_stacks_intern(s, bt, n, &node), 0);
  cts_stacks_alloc(s, node, samples, 1.0, 1);
}

CTS_TEST(nodes_merge_by_label_with_or_without_figures) {
  cts_stacks_t src;
  CTS_ASSERT_EQ_INT(cts_stacks_init(&src, false, 0), 0);
  const uint64_t a[] = {1, 3}, b[] = {2, 3}, c[] = {3};
  alloc_at(&src, a, 2, 5);
  alloc_at(&src, b, 2, 7);
  alloc_at(&src, c, 1, 11);
  cts_stacks_finish(&src);
  const cts_frames_t frames = {.lookup = lookup};

  cts_labels_t labels;
  cts_labels_init(&labels, &frames, CTS_LABEL_NAME);
  cts_stacks_t full;
  CTS_ASSERT_EQ_INT(cts_stacks_relabel(&src, &labels, &full), 0);
  /* root, f, f;g, g: the two f frames merged, their g children too. */
  CTS_ASSERT_EQ_U64(full.count, 4);
  CTS_ASSERT_EQ_U64(cts_stacks_self(&full, 2).samples, 12);
  CTS_ASSERT_EQ_U64(cts_stacks_self(&full, 3).samples, 11);

  cts_labels_t labels2;
  cts_labels_init(&labels2, &frames, CTS_LABEL_NAME);
  cts_stacks_t bare;
  uint32_t *map;
  CTS_ASSERT_EQ_INT(cts_stacks_relabel_nodes(&src, &labels2, &bare, &map), 0);
  CTS_ASSERT_EQ_U64(bare.count, full.count);
  for (uint32_t i = 0; i < bare.count; i++) {
    CTS_ASSERT_EQ_U64(bare.nodes[i].code, full.nodes[i].code);
    CTS_ASSERT_EQ_U64(bare.nodes[i].parent, full.nodes[i].parent);
  }
  /* Only the shared zero record and the root's: no node got figures of its own. */
  CTS_ASSERT_EQ_U64(bare.stat_count, 2);
  for (uint32_t i = 1; i < src.count; i++)
    CTS_ASSERT_EQ_U64(bare.nodes[map[i]].code, cts_labels_id(&labels2, src.nodes[i].code));
  free(map);
  cts_stacks_fini(&bare);
  cts_labels_fini(&labels2);
  cts_stacks_fini(&full);
  cts_labels_fini(&labels);
  cts_stacks_fini(&src);
}

/* A trie of many stacks over the three codes, some merging at every depth, and an
 * allocation at the root (an empty backtrace). */
static void random_trie(cts_stacks_t *s) {
  CTS_ASSERT_EQ_INT(cts_stacks_init(s, false, 0), 0);
  uint64_t state = 7;
  for (int k = 0; k < 3000; k++) {
    uint64_t bt[12];
    const size_t n = cts_splitmix64(&state) % 13;
    for (size_t j = 0; j < n; j++) bt[j] = 1 + cts_splitmix64(&state) % 3;
    alloc_at(s, bt, n, 1 + cts_splitmix64(&state) % 100);
  }
  cts_stacks_finish(s);
}

CTS_TEST(in_place_relabel_gives_the_relabelled_tries_nodes_and_figures) {
  const cts_frames_t frames = {.lookup = lookup};
  static const cts_sort_t keys[][2] = {{CTS_SORT_COUNT, CTS_SORT_BYTES},
                                       {CTS_SORT_BYTES, CTS_SORT_BYTES},
                                       {CTS_SORT_LIVE, CTS_SORT_PEAK}};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    cts_stacks_t src, in;
    random_trie(&src);
    random_trie(&in);
    cts_labels_t labels, labels2;
    cts_labels_init(&labels, &frames, CTS_LABEL_NAME);
    cts_labels_init(&labels2, &frames, CTS_LABEL_NAME);
    cts_stacks_t full;
    CTS_ASSERT_EQ_INT(cts_stacks_relabel(&src, &labels, &full), 0);
    uint64_t *first, *second;
    CTS_ASSERT_EQ_INT(
        cts_stacks_relabel_in_place(&in, &labels2, keys[k][0], keys[k][1], &first, &second), 0);
    CTS_ASSERT(in.count < src.count); /* nodes did merge */
    CTS_ASSERT_EQ_U64(in.count, full.count);
    CTS_ASSERT((first == second) == (keys[k][0] == keys[k][1]));
    for (uint32_t i = 0; i < in.count; i++) {
      CTS_ASSERT_EQ_U64(in.nodes[i].code, full.nodes[i].code);
      CTS_ASSERT_EQ_U64(in.nodes[i].parent, full.nodes[i].parent);
      CTS_ASSERT_EQ_U64(cts_stacks_depth(&in, i), cts_stacks_depth(&full, i));
      const cts_site_stats_t self = cts_stacks_self(&full, i);
      CTS_ASSERT_EQ_U64(first[i], cts_site_stats_metric(&self, keys[k][0]));
      CTS_ASSERT_EQ_U64(second[i], cts_site_stats_metric(&self, keys[k][1]));
      /* Nodes alone: no figures left on them. */
      CTS_ASSERT_EQ_U64(cts_stacks_self(&in, i).samples, 0);
    }
    CTS_ASSERT(first[0] > 0); /* the root's own allocations */
    if (second != first) free(second);
    free(first);
    cts_stacks_fini(&full);
    cts_stacks_fini(&in);
    cts_stacks_fini(&src);
    cts_labels_fini(&labels);
    cts_labels_fini(&labels2);
  }
}

/* The same figures, to the bit (doubles included), as cts_site_stats_t's. */
static void assert_same_figures(const cts_site_stats_t *a, const cts_site_stats_t *b) {
  CTS_ASSERT_EQ_U64(a->allocs, b->allocs);
  CTS_ASSERT_EQ_U64(a->samples, b->samples);
  CTS_ASSERT_EQ_U64(a->live_allocs, b->live_allocs);
  CTS_ASSERT_EQ_U64(a->live_samples, b->live_samples);
  CTS_ASSERT_EQ_U64(a->peak_allocs, b->peak_allocs);
  CTS_ASSERT_EQ_U64(a->peak_samples, b->peak_samples);
  CTS_ASSERT_EQ_U64(a->collected_allocs, b->collected_allocs);
  CTS_ASSERT_EQ_U64(a->collected_samples, b->collected_samples);
  CTS_ASSERT(memcmp(&a->est_allocs, &b->est_allocs, sizeof(double)) == 0);
  CTS_ASSERT(memcmp(&a->live_est_allocs, &b->live_est_allocs, sizeof(double)) == 0);
  CTS_ASSERT(memcmp(&a->peak_est_allocs, &b->peak_est_allocs, sizeof(double)) == 0);
}

/* Weights that do not add up exactly in every order, and frees, so that the sums of
 * doubles, live and peak figures all depend on the merge keeping cts_stacks_relabel's
 * order and fields. */
static void random_weighted_trie(cts_stacks_t *s) {
  CTS_ASSERT_EQ_INT(cts_stacks_init(s, false, 0), 0);
  uint64_t state = 11;
  uint32_t live[64];
  size_t nlive = 0;
  for (int k = 0; k < 4000; k++) {
    uint64_t bt[12];
    const size_t n = cts_splitmix64(&state) % 13;
    for (size_t j = 0; j < n; j++) bt[j] = 1 + cts_splitmix64(&state) % 3;
    uint32_t node;
    CTS_ASSERT_EQ_INT(cts_stacks_intern(s, bt, n, &node), 0);
    const double est = 1.0 / (double)(1 + cts_splitmix64(&state) % 997);
    cts_stacks_alloc(s, node, 3, est, (uint64_t)k);
    if (nlive < 64) live[nlive++] = node;
    if (cts_splitmix64(&state) % 3 == 0 && nlive) cts_stacks_free(s, live[--nlive], 3, est);
  }
  cts_stacks_finish(s);
}

CTS_TEST(merge_in_place_keeps_the_relabelled_tries_figures_to_the_bit) {
  const cts_frames_t frames = {.lookup = lookup};
  cts_stacks_t src, in;
  random_weighted_trie(&src);
  random_weighted_trie(&in);
  /* Two records that merge, whose counts pass 2^32 together: the sum keeps its high half. */
  uint32_t f1, f2;
  const uint64_t bt1[] = {1}, bt2[] = {2};
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&src, bt1, 1, &f1), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_intern(&src, bt2, 1, &f2), 0);
  src.stats[src.nodes[f1].stat].allocs = UINT32_MAX - 1;
  src.stats[src.nodes[f2].stat].allocs = UINT32_MAX - 2;
  in.stats[in.nodes[f1].stat].allocs = UINT32_MAX - 1;
  in.stats[in.nodes[f2].stat].allocs = UINT32_MAX - 2;
  cts_labels_t labels, labels2;
  cts_labels_init(&labels, &frames, CTS_LABEL_NAME);
  cts_labels_init(&labels2, &frames, CTS_LABEL_NAME);
  cts_stacks_t full;
  CTS_ASSERT_EQ_INT(cts_stacks_relabel(&src, &labels, &full), 0);
  CTS_ASSERT_EQ_INT(cts_stacks_relabel_merge_in_place(&in, &labels2), 0);
  CTS_ASSERT(in.count < src.count); /* nodes did merge */
  CTS_ASSERT_EQ_U64(in.count, full.count);
  CTS_ASSERT(in.table == NULL);
  bool wide = false;
  for (uint32_t i = 0; i < in.count; i++) {
    CTS_ASSERT_EQ_U64(in.nodes[i].code, full.nodes[i].code);
    CTS_ASSERT_EQ_U64(in.nodes[i].parent, full.nodes[i].parent);
    CTS_ASSERT_EQ_U64(cts_stacks_depth(&in, i), cts_stacks_depth(&full, i));
    const cts_site_stats_t a = cts_stacks_self(&in, i), b = cts_stacks_self(&full, i);
    assert_same_figures(&a, &b);
    wide = wide || a.allocs >> 32;
  }
  CTS_ASSERT(wide);
  cts_stacks_fini(&full);
  cts_stacks_fini(&in);
  cts_stacks_fini(&src);
  cts_labels_fini(&labels);
  cts_labels_fini(&labels2);
}

CTS_TEST_MAIN()
