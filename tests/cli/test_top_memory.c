/* SPDX-License-Identifier: MIT */
/* `top --tree` as text relabels the profile's trie in place and holds two figures a node
 * (issue 20): on a trace of 2^18 distinct stack nodes its peak RSS beyond the flat table's
 * is ~54 bytes a node. A second, relabelled trie with its own table and 64-byte records
 * took ~130; every inclusive figure (88 bytes a node) and 64-byte records where 24 do, 240. */
#include <stdio.h>

#include "../mt_file_writer.h"
#include "../test.h"
#include "peak_rss.h"
#include "scratch_dir.h"

#define LEVELS 17

/* Codes 100 + 2 k + b: level k's frame, one of two; each its own function. */
static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static char name[32];
  (void)ud;
  if (!max) return 1;
  snprintf(name, sizeof name, "f%llu", (unsigned long long)code);
  out[0] = (cts_mt_location_t){
      .line = 1, .start_char = 1, .end_char = 2, .filename = "t.ml", .defname = name};
  return 1;
}

/* 2^LEVELS allocations, one per leaf of a binary tree of stacks LEVELS frames deep (2^(LEVELS
 * + 1) - 1 nodes with the root), every other one collected at once. */
static int write_tree(const char *path) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, 1.0, resolve);
  if (e) return e;
  for (uint64_t i = 0; !e && i < (1u << LEVELS); i++) {
    uint64_t bt[LEVELS], id;
    for (unsigned k = 0; k < LEVELS; k++) bt[k] = 100 + 2 * k + (i >> k & 1u);
    const uint64_t t = MT_FILE_WRITER_START_US + i;
    e = cts_mt_writer_alloc(fw.w, t, 2, 2, CTS_MT_SOURCE_MAJOR, bt, LEVELS, &id);
    if (!e && i % 2) e = cts_mt_writer_collect(fw.w, t, id);
  }
  return mt_file_writer_close(&fw, e);
}

CTS_TEST(text_tree_holds_at_most_80_bytes_a_node_beyond_the_flat_table) {
  CTS_SKIP_UNDER_ASAN();
  char path[128];
  scratch_file("cts-top-mem", "tree.ctf", path, sizeof path);
  CTS_ASSERT_EQ_INT(write_tree(path), 0);
  const long flat = peak_kib((char *[]){"ctfscope", "top", "-q", "--threads", "1", path, NULL});
  const long tree = peak_kib((char *[]){"ctfscope", "top", "-q", "--threads", "1", "--tree",
                                        "--min-percent", "0", "--depth", "2", path, NULL});
  CTS_ASSERT(flat > 0 && tree > 0);
  const long nodes = (2l << LEVELS) - 1;
  fprintf(stderr, "  peak RSS: flat %ld KiB, tree %ld KiB, %ld bytes a node beyond\n", flat, tree,
          (tree - flat) * 1024 / nodes);
  CTS_ASSERT_MSG((tree - flat) * 1024 <= 80 * nodes, "the tree held %ld KiB more for %ld nodes",
                 tree - flat, nodes);
}

/* JSON prints every figure of a node, but only the nodes over the threshold need them all:
 * the others hold their sort key and est_allocs (16 bytes) and a 4-byte index. Every
 * inclusive figure of every node (88 bytes) took ~240 bytes a node beyond the flat table. */
CTS_TEST(json_tree_holds_at_most_1000_bytes_a_node_beyond_the_flat_table) {
  CTS_SKIP_UNDER_ASAN();
  char path[128];
  scratch_file("cts-top-mem", "json.ctf", path, sizeof path);
  CTS_ASSERT_EQ_INT(write_tree(path), 0);
  const long flat =
      peak_kib((char *[]){"ctfscope", "top", "-q", "--json", "--threads", "1", path, NULL});
  const long tree = peak_kib((char *[]){"ctfscope", "top", "-q", "--json", "--threads", "1",
                                        "--tree", "--depth", "2", path, NULL});
  CTS_ASSERT(flat > 0 && tree > 0);
  const long nodes = (2l << LEVELS) - 1;
  fprintf(stderr, "  peak RSS: flat %ld KiB, json tree %ld KiB, %ld bytes a node beyond\n", flat,
          tree, (tree - flat) * 1024 / nodes);
  CTS_ASSERT_MSG((tree - flat) * 1024 <= 1000 * nodes, "the tree held %ld KiB more for %ld nodes",
                 tree - flat, nodes);
}

CTS_TEST_MAIN()
