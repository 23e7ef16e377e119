/* SPDX-License-Identifier: MIT */
/* `top --tree` relabels the profile's trie in place (issue 20): as text it holds two figures
 * a node, on a trace of 2^18 distinct stack nodes ~50 bytes a node beyond the flat table's
 * peak RSS. A second, relabelled trie with its own table and 64-byte records took ~130;
 * every inclusive figure (88 bytes a node) and 64-byte records where 24 do, 240. JSON and
 * the callers view keep the records, merged in place, and their printed nodes alone get
 * every figure. */
#include <stdbool.h>
#include <stdio.h>

#include "../mt_file_writer.h"
#include "../test.h"
#include "peak_rss.h"
#include "scratch_dir.h"

#define LEVELS 17

/* 2^LEVELS allocations, one per leaf of a binary tree of stacks LEVELS frames deep (2^(LEVELS
 * + 1) - 1 nodes with the root), every other one collected at once. */
static int write_tree(const char *path) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, 1.0, mt_file_writer_name_by_code);
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

/* *bytes: bytes a node that `top` with args (after "--tree") holds beyond the flat table's
 * peak, flat with --json when json is set (left as is if a run failed). */
static void bytes_a_node_beyond_flat(const char *name, bool json, char *const *args, long *bytes) {
  char path[128];
  scratch_file("cts-top-mem", name, path, sizeof path);
  CTS_ASSERT_EQ_INT(write_tree(path), 0);
  char *flat_args[] = {"ctfscope", "top", "-q", "--threads", "1", json ? "--json" : "-q",
                       path,       NULL};
  const long flat = peak_kib(flat_args);
  char *tree_args[16] = {"ctfscope", "top", "-q", "--threads", "1", "--tree"};
  size_t n = 6;
  for (size_t i = 0; args[i] && n < 14; i++) tree_args[n++] = args[i];
  tree_args[n++] = path;
  tree_args[n] = NULL;
  const long tree = peak_kib(tree_args);
  CTS_ASSERT(flat > 0 && tree > 0);
  const long nodes = (2l << LEVELS) - 1;
  fprintf(stderr, "  peak RSS: flat %ld KiB, %s %ld KiB, %ld bytes a node beyond\n", flat, name,
          tree, (tree - flat) * 1024 / nodes);
  *bytes = (tree - flat) * 1024 / nodes;
}

/* JSON prints every figure of a node, but only the nodes it prints need them all: the
 * profile's trie is relabelled in place with its records, and each node holds its
 * inclusive sort key and the index of the printed node its figures go to (12 bytes), then
 * its est_allocs (8). A second, relabelled trie with its own records took ~154 bytes a node
 * beyond the flat table; every inclusive figure of every node (88 bytes), ~240. */
CTS_TEST(json_tree_holds_at_most_100_bytes_a_node_beyond_the_flat_table) {
  CTS_SKIP_UNDER_ASAN();
  long b = -1;
  bytes_a_node_beyond_flat("json.ctf", true, (char *[]){"--json", "--depth", "2", NULL}, &b);
  CTS_ASSERT_MSG(b >= 0 && b <= 100, "the JSON tree held %ld bytes a node", b);
}

/* The callers view walks the stacks of the profile's trie, relabelled in place, reversed,
 * without making their trie (here as many nodes as the profile's): ~50 bytes a node (as
 * JSON ~70), where a second relabelled trie, the reversed stacks' trie with its records
 * and every node's figures took ~182 (~203). */
CTS_TEST(inverted_tree_holds_at_most_100_bytes_a_node_beyond_the_flat_table) {
  CTS_SKIP_UNDER_ASAN();
  long b = -1;
  bytes_a_node_beyond_flat("inverted.ctf", false, (char *[]){"--inverted", NULL}, &b);
  CTS_ASSERT_MSG(b >= 0 && b <= 100, "the callers view held %ld bytes a node", b);
}

CTS_TEST(inverted_json_tree_holds_at_most_100_bytes_a_node_beyond_the_flat_table) {
  CTS_SKIP_UNDER_ASAN();
  long b = -1;
  bytes_a_node_beyond_flat("invjson.ctf", true, (char *[]){"--inverted", "--json", NULL}, &b);
  CTS_ASSERT_MSG(b >= 0 && b <= 100, "the callers view as JSON held %ld bytes a node", b);
}

CTS_TEST_MAIN()
