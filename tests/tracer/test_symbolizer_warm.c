/* SPDX-License-Identifier: MIT */
/* Guard: with a warm persistent cache (symcache.h) the symbolizer answers without libdw.
 * At the default rate an image resolves a few codes, all in the cache after one run;
 * binding libdw for them (a dlopen of libdw, libelf and their compressors) and reporting
 * the modules through it cost the writer more than the lookups. The symbolizer reads the
 * module list and the build-ids itself first; the locations must be those libdw gave. */
#define _GNU_SOURCE
#include <ftw.h>
#include <malloc.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/tracer/tracer_internal.h"
#include "../test.h"

#define MAX_LOCS 64

/* A code in this program (its own DWARF), in a function of its own. */
static __attribute__((noinline)) uint64_t own_code(void) {
  return (uint64_t)(uintptr_t)&own_code + 7u;
}

typedef struct answer {
  size_t n;
  char text[MAX_LOCS][512]; /* "file:line function" */
  bool used_libdw;
  size_t heap_grown; /* the heap in use after the resolve, less before the create */
} answer_t;

/* The bytes the heap has in use (0 where malloc does not say: a sanitizer's). */
static size_t heap_in_use(void) {
  return mallinfo2().uordblks;
}

/* Resolves own_code() with a fresh symbolizer, which then writes its cache. */
static bool resolve_once(answer_t *a) {
  const size_t heap_before = heap_in_use();
  cts__symbolizer_t *const s = cts__symbolizer_create(0, NULL);
  if (!s) return false;
  cts_mt_location_t locs[MAX_LOCS];
  a->n = cts__symbolizer_resolve(s, own_code(), locs, MAX_LOCS);
  for (size_t i = 0; i < a->n; i++)
    snprintf(a->text[i], sizeof a->text[i], "%s:%u %s", locs[i].filename, (unsigned)locs[i].line,
             locs[i].defname);
  a->used_libdw = cts__symbolizer_used_libdw(s);
  const size_t heap_after = heap_in_use();
  a->heap_grown = heap_after > heap_before ? heap_after - heap_before : 0;
  cts__symbolizer_destroy(s);
  return true;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* Resolves own_code() cold, then warm, in a cache directory of its own. */
static void cold_then_warm(answer_t *cold, answer_t *warm, bool *ok) {
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/cts-symwarm-%d", (int)getpid());
  *ok = mkdir(dir, 0700) == 0;
  setenv("CTFSCOPE_CACHE", dir, 1);
  *ok = *ok && resolve_once(cold) && resolve_once(warm);
  unsetenv("CTFSCOPE_CACHE");
  nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

CTS_TEST(a_warm_cache_answers_without_libdw) {
#ifndef CTS_TEST_HAVE_LIBDW
  CTS_SKIP("built without libdw");
#endif
  static answer_t cold, warm;
  bool ok;
  cold_then_warm(&cold, &warm, &ok);
  CTS_ASSERT(ok);
  CTS_ASSERT(cold.n > 0 && strstr(cold.text[cold.n - 1], "own_code"));
  CTS_ASSERT(cold.used_libdw);
  CTS_ASSERT_EQ_U64(warm.n, cold.n);
  for (size_t i = 0; i < cold.n; i++) CTS_ASSERT_STR_EQ(warm.text[i], cold.text[i]);
  CTS_ASSERT_MSG(!warm.used_libdw, "the warm cache's hit went through libdw");
}

/* Guard: a warm hit's symbolizer takes little memory. The writer process of an image at
 * the default rate makes one and resolves a few codes from the cache; the symbolizer held
 * a 64 KiB string buffer (for libdw's names) and its code table started at 1 024 entries
 * (24 KiB), both calloc'd: zeroed, ~22 pages faulted in per image. Counted in the heap's
 * bytes in use (mallinfo2), deterministic: 7 536 now, 96 096 the old way (gcc 12, dev). */
#define WARM_HEAP_MAX 24576u
CTS_TEST(a_warm_hit_takes_little_memory) {
#ifndef CTS_TEST_HAVE_LIBDW
  CTS_SKIP("built without libdw");
#endif
  void *const probe = malloc(4096);
  const size_t with_probe = heap_in_use();
  free(probe);
  if (with_probe == 0) CTS_SKIP("malloc does not count its bytes in use here (a sanitizer's)");
  static answer_t cold, warm;
  bool ok;
  cold_then_warm(&cold, &warm, &ok);
  CTS_ASSERT(ok && !warm.used_libdw);
  fprintf(stderr, "  warm hit: %zu bytes of heap (bound %u)\n", warm.heap_grown, WARM_HEAP_MAX);
  CTS_ASSERT_MSG(warm.heap_grown <= WARM_HEAP_MAX, "the warm hit took %zu bytes of heap",
                 warm.heap_grown);
}

CTS_TEST_MAIN()
