/* SPDX-License-Identifier: MIT */
/* Hands blocks from malloc to an allocator's own functions, as programs linked with it do
 * (folly frees malloc'd blocks with jemalloc's sdallocx): argv[1] names the allocator
 * (jemalloc, tcmalloc or mimalloc), which the test preloads; its functions are found with
 * dlsym, so that this victim links with none. Each round mallocs blocks, measures them,
 * grows them and frees them through that allocator's functions, checking sizes and bytes.
 * Prints allocs= (malloc calls) and frees= (blocks freed), then checks= and bad=; exits 1
 * on a mismatch, 2 if a function is missing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "victim.h"

static uint64_t checks, bad;

static void check(int ok) {
  checks++;
  bad += !ok;
}

static void *need(const char *name) {
  void *const f = dlsym(RTLD_DEFAULT, name);
  if (!f) {
    printf("missing %s\n", name);
    fflush(stdout);
    exit(2);
  }
  return f;
}

#define FUNCTION(var, type, name) \
  type var;                       \
  do {                            \
    void *const f_ = need(name);  \
    memcpy(&var, &f_, sizeof f_); \
  } while (0)

typedef void (*free1_fn)(void *);
typedef void (*free2_fn)(void *, size_t);
typedef void (*flags_free_fn)(void *, int);
typedef void (*sized_flags_free_fn)(void *, size_t, int);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*flags_realloc_fn)(void *, size_t, int);
typedef size_t (*size_fn)(void *);
typedef size_t (*flags_size_fn)(const void *, int);
typedef size_t (*xallocx_fn)(void *, size_t, size_t, int);

static void fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 13 + 5);
}

static int same(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 13 + 5)) return 0;
  return 1;
}

/* tcmalloc's and mimalloc's functions: measure p and q, grow p, free all three. */
static void simple_api(unsigned char *p, unsigned char *q, unsigned char *r, size_t a, size_t b,
                       const char *free_sized_name, const char *free_name, const char *realloc_name,
                       const char *size_name) {
  FUNCTION(free_sized, free2_fn, free_sized_name);
  FUNCTION(free1, free1_fn, free_name);
  FUNCTION(resize, realloc_fn, realloc_name);
  FUNCTION(usable, size_fn, size_name); /* mimalloc's takes a const void *: the same call */
  check(usable(p) >= a && usable(q) >= b);
  p = resize(p, a + b);
  check(p && same(p, a));
  free_sized(q, b);
  free1(p);
  free1(r);
}

int main(int argc, char **argv) {
  victim_quiet_stdio();
  const char *const which = argc > 1 ? argv[1] : "";
  uint64_t state = 11, allocs = 0, frees = 0;
  for (int round = 0; round < 500; round++) {
    const size_t a = 1 + victim_next(&state) % 3000, b = 1 + victim_next(&state) % 70000;
    unsigned char *p = malloc(a), *q = malloc(b), *r = malloc(a);
    allocs += 3;
    check(p && q && r);
    fill(p, a);
    fill(q, b);

    if (strcmp(which, "jemalloc") == 0) {
      FUNCTION(sdallocx, sized_flags_free_fn, "sdallocx");
      FUNCTION(dallocx, flags_free_fn, "dallocx");
      FUNCTION(rallocx, flags_realloc_fn, "rallocx");
      FUNCTION(sallocx, flags_size_fn, "sallocx");
      FUNCTION(xallocx, xallocx_fn, "xallocx");
      check(sallocx(p, 0) >= a && xallocx(q, b, 0, 0) >= b);
      p = rallocx(p, a + b, 0);
      check(p && same(p, a));
      memset(r, 0, sallocx(r, 0)); /* MALLOCX_ZERO zeroes what comes past the usable size */
      r = rallocx(r, b, 0x40 /* MALLOCX_ZERO */);
      check(r && r[b - 1] == 0);
      sdallocx(q, b, 0);
      dallocx(p, 0);
      dallocx(r, 0);
    } else if (strcmp(which, "tcmalloc") == 0) {
      simple_api(p, q, r, a, b, "tc_free_sized", "tc_free", "tc_realloc", "tc_malloc_size");
    } else if (strcmp(which, "mimalloc") == 0) {
      simple_api(p, q, r, a, b, "mi_free_size", "mi_free", "mi_realloc", "mi_usable_size");
    } else {
      printf("unknown allocator %s\n", which);
      return 2;
    }
    frees += 3;
  }
  printf("allocs=%llu frees=%llu checks=%llu bad=%llu\n", (unsigned long long)allocs,
         (unsigned long long)frees, (unsigned long long)checks, (unsigned long long)bad);
  return bad ? 1 : 0;
}
