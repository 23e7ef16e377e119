/* SPDX-License-Identifier: MIT */
/* `top --tree --inverted` keeps every stack the call tree kept (issue 20: no stack lost).
 * The callers view is walked over the tree's sources without making the reversed stacks'
 * trie, so the node budget of a trie (CTS_STACKS_DEFAULT_MAX_NODES, 10 Mi) does not apply
 * to it. Until 2026-11-28 the view still emulated that budget so that its output stayed the
 * old trie's: on a tree of half a million nodes whose reversed stacks would need more than
 * 10 Mi, the last sources went under the budget's node. This trace is such a tree: one
 * chain of CHAIN outer frames under which LEAVES distinct allocation points. */
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../mt_file_writer.h"
#include "../test.h"
#include "scratch_dir.h"

extern char **environ;

#define CHAIN     23u     /* outer frames shared by every stack: codes 10 .. 32 */
#define LEAVES    480000u /* allocation points: codes 1000 .. */
#define LAST_LEAF (1000u + LEAVES - 1u)

/* One allocation per leaf, 16 bytes each but the last leaf's, which is a tenth of all: the
 * view prints it (above --min-percent's 1 %) with its callers, or, where the budget was
 * emulated, its bytes went under the budget's node. */
static int write_trace(const char *path) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, 1.0, mt_file_writer_name_by_code);
  if (e) return e;
  uint64_t bt[CHAIN + 1];
  for (unsigned k = 0; k < CHAIN; k++) bt[k] = 10 + k; /* outermost first */
  for (uint32_t i = 0; !e && i < LEAVES; i++) {
    uint64_t id;
    bt[CHAIN] = 1000 + i;
    const uint64_t words = i == LEAVES - 1 ? 2u * LEAVES / 9u : 2u;
    e = cts_mt_writer_alloc(fw.w, MT_FILE_WRITER_START_US + i, words, words, CTS_MT_SOURCE_MAJOR,
                            bt, CHAIN + 1, &id);
  }
  return mt_file_writer_close(&fw, e);
}

/* Runs ctfscope args... with stdout into out; its exit status, or -1. */
static int run_into(char *const *args, const char *out) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  const int e = posix_spawn(&pid, CTS_TEST_CTFSCOPE, &fa, NULL, args, environ);
  posix_spawn_file_actions_destroy(&fa);
  int st;
  if (e || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 16];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return buf;
}

CTS_TEST(callers_view_keeps_every_stack_beyond_a_reversed_tries_budget) {
  char trace[128], out[128];
  scratch_file("cts-top-inv", "chain.ctf", trace, sizeof trace);
  scratch_file("cts-top-inv", "out.txt", out, sizeof out);
  CTS_ASSERT_EQ_INT(write_trace(trace), 0);
  /* (LEAVES x (CHAIN + 1) = 11.5 M reversed nodes: past the 10 Mi budget.) */
  CTS_ASSERT((uint64_t)LEAVES * (CHAIN + 1) > (10u << 20));
  CTS_ASSERT_EQ_INT(
      run_into((char *[]){"ctfscope", "top", "--tree", "--inverted", trace, NULL}, out), 0);
  const char *text = slurp(out);
  CTS_ASSERT(text != NULL);
  /* Where the budget was emulated, the sources past it went under a second root-level
   * node, labelled "(all)" as the root is. */
  const char *root = strstr(text, "(all)");
  CTS_ASSERT_MSG(root && !strstr(root + 1, "(all)"), "a stack was cut:\n%s", text);
  char leaf[32];
  snprintf(leaf, sizeof leaf, "f%u ", LAST_LEAF);
  const char *at = strstr(text, leaf);
  CTS_ASSERT_MSG(at != NULL, "the last allocation point is not printed:\n%s", text);
  /* Its callers, innermost first, down to the outermost frame: 24 levels. */
  const char *p = at;
  for (unsigned k = CHAIN; k-- > 0;) {
    char caller[16];
    snprintf(caller, sizeof caller, "f%u ", 10 + k);
    p = strstr(p, caller);
    CTS_ASSERT_MSG(p != NULL, "caller f%u of f%u missing:\n%s", 10 + k, LAST_LEAF, text);
  }
}

CTS_TEST_MAIN()
