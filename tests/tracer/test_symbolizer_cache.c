/* SPDX-License-Identifier: MIT */
/* The symbolizer with its persistent cache (symcache.h): a warm cache gives the locations
 * a cold one (and no cache) gives, and, warm, the symbolizer opens no separate debug file:
 * that open, and libdw's inflating of its compressed DWARF, is the ~50 ms per traced image
 * the cache exists to remove (issue #16). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/tracer/tracer_internal.h"
#include "../test.h"

#define MAX_LOCS 64
#define NCODES   3

typedef struct resolved {
  size_t n;
  uint32_t line[MAX_LOCS];
  char text[MAX_LOCS][2][256]; /* file, function */
} resolved_t;

#ifdef CTS_TEST_HAVE_LIBDW /* the helpers of the tests below (else unused: -Werror) */
/* Return addresses to resolve: in libc (its debug information separate, from libc6-dbg
 * when installed) and in this program (its own DWARF). */
static void codes(uint64_t out[NCODES]) {
  /* libc's own functions, from its handle: under ASan, RTLD_DEFAULT finds the sanitizer's
   * interceptors of qsort and fopen, linked into this program. */
  void *const libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *const from = libc ? libc : RTLD_DEFAULT;
  out[0] = (uint64_t)(uintptr_t)dlsym(from, "qsort") + 9u;
  out[1] = (uint64_t)(uintptr_t)dlsym(from, "fopen") + 17u;
  out[2] = (uint64_t)(uintptr_t)&codes + 5u;
}

/* Whether this process has a file under /usr/lib/debug open. */
static bool debug_file_open(void) {
  DIR *const d = opendir("/proc/self/fd");
  bool found = false;
  for (struct dirent *e; d && (e = readdir(d));) {
    char link[300], target[512];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
      target[n] = '\0';
      if (!strncmp(target, "/usr/lib/debug/", 15)) found = true;
    }
  }
  if (d) closedir(d);
  return found;
}

/* Resolves codes() with a fresh symbolizer (the cache as the environment says), then
 * destroys it (which writes the cache). */
static bool resolve_all(resolved_t out[NCODES], bool *opened_debug) {
  cts__symbolizer_t *const s = cts__symbolizer_create(0, NULL);
  if (!s) return false;
  uint64_t c[NCODES];
  codes(c);
  for (int i = 0; i < NCODES; i++) {
    cts_mt_location_t locs[MAX_LOCS];
    out[i].n = cts__symbolizer_resolve(s, c[i], locs, MAX_LOCS);
    for (size_t j = 0; j < out[i].n; j++) {
      out[i].line[j] = locs[j].line;
      snprintf(out[i].text[j][0], 256, "%s", locs[j].filename);
      snprintf(out[i].text[j][1], 256, "%s", locs[j].defname);
    }
  }
  *opened_debug = debug_file_open();
  cts__symbolizer_destroy(s);
  return true;
}

/* Removes cache directory `dir`; the number of files it held. */
static int remove_cache_dir(const char *dir) {
  int files = 0;
  DIR *const d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.' && unlinkat(dirfd(d), e->d_name, 0) == 0) files++;
  if (d) closedir(d);
  rmdir(dir);
  return files;
}

static bool same(const resolved_t *a, const resolved_t *b) {
  for (int i = 0; i < NCODES; i++) {
    if (a[i].n != b[i].n) return false;
    for (size_t j = 0; j < a[i].n; j++)
      if (a[i].line[j] != b[i].line[j] || strcmp(a[i].text[j][0], b[i].text[j][0]) ||
          strcmp(a[i].text[j][1], b[i].text[j][1]))
        return false;
  }
  return true;
}

#endif

CTS_TEST(warm_cache_gives_the_same_locations_without_the_debug_file) {
#ifndef CTS_TEST_HAVE_LIBDW
  CTS_SKIP("built without libdw");
#else
  char dir[] = "/tmp/cts-symcache-XXXXXX";
  CTS_ASSERT(mkdtemp(dir));
  static resolved_t none[NCODES], cold[NCODES], warm[NCODES];
  bool none_debug, cold_debug, warm_debug;
  setenv("CTFSCOPE_CACHE", "off", 1);
  const bool ok_none = resolve_all(none, &none_debug);
  setenv("CTFSCOPE_CACHE", dir, 1);
  const bool ok_cold = resolve_all(cold, &cold_debug);
  const bool ok_warm = resolve_all(warm, &warm_debug);
  unsetenv("CTFSCOPE_CACHE");
  const int files = remove_cache_dir(dir);
  CTS_ASSERT(ok_none && ok_cold && ok_warm);
  CTS_ASSERT(cold[2].n > 0 && strstr(cold[2].text[cold[2].n - 1][1], "codes"));
  CTS_ASSERT(same(none, cold));
  CTS_ASSERT(same(cold, warm));
  CTS_ASSERT(files >= 2); /* libc's and this program's */
  CTS_ASSERT(!warm_debug);
  if (!cold_debug) CTS_SKIP("no separate debug file for libc here (libc6-dbg)");
#endif
}

/* A library unloaded after one of its addresses was resolved: the symbolizer drops the
 * module's state (dwfl_report_end's callback gets the address of the module's user data;
 * freeing that address as the state made the writer crash on python3 and redis). */
CTS_TEST(an_unloaded_librarys_module_state_is_freed_safely) {
#ifndef CTS_TEST_HAVE_LIBDW
  CTS_SKIP("built without libdw");
#else
  void *const lib = dlopen("libresolv.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) CTS_SKIP("libresolv.so.2 cannot be loaded");
  void *const fn = dlsym(lib, "__b64_ntop");
  char dir[] = "/tmp/cts-symcache-XXXXXX";
  CTS_ASSERT(mkdtemp(dir));
  setenv("CTFSCOPE_CACHE", dir, 1);
  cts__symbolizer_t *const s = cts__symbolizer_create(0, NULL);
  cts_mt_location_t locs[MAX_LOCS];
  const size_t in_lib =
      s && fn ? cts__symbolizer_resolve(s, (uint64_t)(uintptr_t)fn + 7u, locs, MAX_LOCS) : 0;
  dlclose(lib);
  uint64_t c[NCODES];
  codes(c);
  /* The loader's counters changed: the module list is read again, libresolv's removed. */
  const size_t after = s ? cts__symbolizer_resolve(s, c[1], locs, MAX_LOCS) : 0;
  cts__symbolizer_destroy(s);
  unsetenv("CTFSCOPE_CACHE");
  const int files = remove_cache_dir(dir);
  CTS_ASSERT(s != NULL);
  CTS_ASSERT(in_lib > 0 && after > 0);
  CTS_ASSERT_EQ_INT(files, 2); /* libresolv's, saved when it was removed, and libc's */
#endif
}

CTS_TEST_MAIN()
