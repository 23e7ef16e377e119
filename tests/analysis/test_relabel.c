/* SPDX-License-Identifier: MIT */
/* Relabelled tries (siterows.h): nodes whose frames get the same label merge, in the order
 * their first node comes, and the nodes-only variant (folded stacks) gives none of them
 * figures, so a view that prints one figure does not pay 64 bytes a node for all of them. */
#include "../../src/analysis/siterows.h"

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

CTS_TEST_MAIN()
