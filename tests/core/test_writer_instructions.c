/* SPDX-License-Identifier: MIT */
/* Guard for the compact encoding's choice per allocation (memtrace_writer.c, use_chain;
 * issue #16): its instructions per allocation, as valgrind counts them (the same every run),
 * on a stream of deep backtraces that recur, as a program's allocation sites do. There
 * memtrace's buckets write each suffix as one hit and its predictions (3 bytes), so no chain
 * is ever built, and the choice is settled by the first frame whose chain link is missing:
 * the innermost here. Resolving the whole chain and pricing both encodings frame by frame
 * (66ae254) cost 2 466 instructions an allocation in the release build, 7 441 in the debug
 * build; resolving it only up to that frame, and pricing the chain in the same walk, 1 093
 * and 2 887 (the rest is memtrace's price and the encoding, 32 frames each). The per-allocation
 * figure is the difference between two stream lengths, which takes out the process's start.
 *
 * The stream runs in this same executable, started again under valgrind with
 * CTS_WRITER_STREAM set to the number of allocations (see stream_then_exit). */
#include <ctfscope/memtrace.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "../test.h"
#include "../cachegrind.h"
#include "../cli/scratch_dir.h"

/* Instructions per allocation at most. */
#ifdef NDEBUG
#define IR_BOUND 1500.0
#else
#define IR_BOUND 4500.0
#endif

#define SITES       8u  /* allocation sites: backtraces that recur */
#define SHARED      16u /* outer frames every backtrace shares */
#define SITE_FRAMES 32u /* inner frames of a site's own */
#define DEPTH       (SHARED + SITE_FRAMES)

static int discard(void *user_data, const void *buf, size_t len) {
  (void)user_data;
  (void)buf;
  (void)len;
  return 0;
}

/* Writes `allocs` allocations, the sites in a pseudo-random order (the previous backtrace
 * shares the SHARED outer frames with the next, or all of them), through a compact writer. */
static int write_stream(unsigned long allocs) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.encoding = CTS_MT_ENCODING_COMPACT;
  cfg.start_time_us = 1000;
  cfg.max_backtrace_frames = DEPTH;
  cfg.write = discard;
  const size_t size = cts_mt_writer_size(&cfg);
  void *const mem = malloc(size);
  if (!mem) return 1;
  cts_mt_writer_t *w;
  if (cts_mt_writer_init(&w, mem, size, &cfg) != 0) return 1;
  static uint64_t backtraces[SITES][DEPTH];
  for (unsigned s = 0; s < SITES; s++)
    for (unsigned i = 0; i < DEPTH; i++)
      backtraces[s][i] = i < SHARED ? 0x400000u + 16u * i : 0x500000u + 4096u * s + 16u * i;
  uint32_t rng = 12345;
  for (unsigned long n = 0; n < allocs; n++) {
    rng = rng * 1103515245u + 12345u;
    const unsigned site = (rng >> 16) % SITES;
    if (cts_mt_writer_alloc(w, 1000 + n, 4, 1, CTS_MT_SOURCE_MINOR, backtraces[site], DEPTH,
                            NULL) != 0)
      return 1;
  }
  const int e = cts_mt_writer_close(w);
  free(mem);
  return e != 0;
}

/* Under valgrind the test's own executable only writes the stream. */
__attribute__((constructor)) static void stream_then_exit(void) {
  const char *const allocs = getenv("CTS_WRITER_STREAM");
  if (allocs) _exit(write_stream(strtoul(allocs, NULL, 10)));
}

/* Instructions of this executable writing a stream of `allocs` allocations under cachegrind
 * into *ir. */
static void stream_instructions(unsigned long allocs, uint64_t *ir) {
  char out[160], allocs_arg[32], self[4096];
  *ir = 0;
  const ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
  CTS_ASSERT(self_len > 0);
  self[self_len] = 0;
  scratch_file("cts-writer-instructions", "cachegrind.out", out, sizeof out);
  snprintf(allocs_arg, sizeof allocs_arg, "%lu", allocs);
  uint64_t counts[5];
  setenv("CTS_WRITER_STREAM", allocs_arg, 1); /* for the child only: read at its start */
  cachegrind_counts((char *[]){self, NULL}, false, out, counts);
  unsetenv("CTS_WRITER_STREAM");
  *ir = counts[0];
}

CTS_TEST(compact_choice_instructions_per_allocation) {
  const char *const unusable = cachegrind_unusable();
  if (unusable) CTS_SKIP("%s", unusable);
  enum { FEW = 20000, MANY = 100000 };
  uint64_t few, many;
  stream_instructions(FEW, &few);
  if (cts_test_state.failed) return;
  stream_instructions(MANY, &many);
  if (cts_test_state.failed) return;
  const double ir = ((double)many - (double)few) / (MANY - FEW);
  fprintf(stderr, "  %.1f instructions per allocation\n", ir);
  /* Not vacuous: the backtraces were encoded (a suffix of 32 frames predicted costs some). */
  CTS_ASSERT_MSG(ir > 200.0, "%.1f instructions per allocation", ir);
  CTS_ASSERT_MSG(ir <= IR_BOUND, "%.1f instructions per allocation (at most %.0f)", ir,
                 (double)IR_BOUND);
}

CTS_TEST_MAIN()
