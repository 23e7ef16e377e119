/* SPDX-License-Identifier: MIT */
/* The floor of any LD_PRELOAD allocation tracer at a sampling rate of zero: a library that
 * interposes the allocation functions libctfscope-preload.so interposes (malloc, free,
 * calloc, realloc, reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 * malloc_usable_size, free_sized, free_aligned_sized) and only forwards each call to the
 * next definition, resolved once with dlsym(RTLD_NEXT) in its constructor (or at the first
 * call, if an earlier constructor allocates). bench/real/run.sh builds it and runs it as
 * the configuration floor-forward: what the program pays for the interposition itself
 * (the calls through the PLT into the preload and on to libc, the loader's work for one
 * more library), with no sampling, no session, no writer. The difference between
 * default-rate and floor-forward is ctfscope's own cost.
 *
 * Left out on purpose: jemalloc's, tcmalloc's and mimalloc's own entry points, which the
 * preload interposes only to recognise its tagged blocks (none of the suite's programs
 * calls them: interposing them here would add nothing to the floor), and the thread and
 * exec hooks, which are not per allocation.
 *
 * dlsym allocates (its error buffer) before the real functions are known: a static
 * bootstrap buffer serves those calls, and free and realloc recognise its blocks. A bench
 * helper: a function missing from the next definitions (free_sized before glibc 2.39)
 * falls back to its nearest equivalent (free). Linux, glibc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static size_t (*real_malloc_usable_size)(void *);
static void (*real_free_sized)(void *, size_t);
static void (*real_free_aligned_sized)(void *, size_t, size_t);

static _Alignas(16) unsigned char bootstrap[16 << 10];
static size_t bootstrap_used;
static int resolving;

/* One comparison: free's and realloc's only work besides the call. */
static int from_bootstrap(const void *p) {
  return (uintptr_t)p - (uintptr_t)bootstrap < sizeof bootstrap;
}

/* A zeroed block of the bootstrap buffer, never reused (dlsym's few allocations); NULL when
 * full. Sizes are not kept: a realloc copies up to the buffer's end instead. */
static void *bootstrap_alloc(size_t size) {
  const size_t need = (size + 15) & ~(size_t)15;
  if (size > sizeof bootstrap || need > sizeof bootstrap - bootstrap_used) return NULL;
  void *const p = bootstrap + bootstrap_used;
  bootstrap_used += need;
  return p;
}

/* A function pointer from dlsym's object pointer (POSIX guarantees the conversion). */
#define NEXT(var, name)                       \
  do {                                        \
    void *const sym = dlsym(RTLD_NEXT, name); \
    memcpy(&(var), &sym, sizeof(var));        \
  } while (0)

static void resolve(void) {
  resolving = 1;
  NEXT(real_malloc, "malloc");
  NEXT(real_free, "free");
  NEXT(real_calloc, "calloc");
  NEXT(real_realloc, "realloc");
  NEXT(real_reallocarray, "reallocarray");
  NEXT(real_posix_memalign, "posix_memalign");
  NEXT(real_aligned_alloc, "aligned_alloc");
  NEXT(real_memalign, "memalign");
  NEXT(real_valloc, "valloc");
  NEXT(real_pvalloc, "pvalloc");
  NEXT(real_malloc_usable_size, "malloc_usable_size");
  NEXT(real_free_sized, "free_sized");
  NEXT(real_free_aligned_sized, "free_aligned_sized");
  resolving = 0;
}

__attribute__((constructor)) static void forward_init(void) {
  if (real_malloc == NULL) resolve();
}

/* Resolved, or an allocation of dlsym's own while resolving (from the bootstrap buffer). */
#define READY_OR(bootstrap_result)                  \
  do {                                              \
    if (__builtin_expect(real_malloc == NULL, 0)) { \
      if (resolving) return bootstrap_result;       \
      resolve();                                    \
    }                                               \
  } while (0)

EXPORT void *malloc(size_t size) {
  READY_OR(bootstrap_alloc(size));
  return real_malloc(size);
}

EXPORT void free(void *p) {
  if (__builtin_expect(from_bootstrap(p), 0)) return;
  READY_OR();
  real_free(p);
}

EXPORT void *calloc(size_t n, size_t size) {
  /* The bootstrap buffer is zero and never reused. */
  READY_OR(n && size > SIZE_MAX / n ? NULL : bootstrap_alloc(n * size));
  return real_calloc(n, size);
}

EXPORT void *realloc(void *p, size_t size) {
  if (__builtin_expect(from_bootstrap(p), 0)) {
    READY_OR(NULL);
    void *const q = real_malloc(size);
    const size_t room = (size_t)(bootstrap + sizeof bootstrap - (unsigned char *)p);
    if (q) memcpy(q, p, room < size ? room : size);
    return q;
  }
  READY_OR(NULL);
  return real_realloc(p, size);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size) {
  if (__builtin_expect(from_bootstrap(p), 0) || real_reallocarray == NULL) {
    if (n && size > SIZE_MAX / n) {
      errno = ENOMEM;
      return NULL;
    }
    return realloc(p, n * size);
  }
  return real_reallocarray(p, n, size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  READY_OR(ENOMEM);
  return real_posix_memalign(out, align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size) {
  READY_OR(NULL);
  return real_aligned_alloc(align, size);
}

EXPORT void *memalign(size_t align, size_t size) {
  READY_OR(NULL);
  return real_memalign(align, size);
}

EXPORT void *valloc(size_t size) {
  READY_OR(NULL);
  return real_valloc(size);
}

EXPORT void *pvalloc(size_t size) {
  READY_OR(NULL);
  return real_pvalloc(size);
}

EXPORT size_t malloc_usable_size(void *p) {
  if (__builtin_expect(from_bootstrap(p), 0)) return 0; /* dlsym's: never asked */
  READY_OR(0);
  return real_malloc_usable_size(p);
}

EXPORT void free_sized(void *p, size_t size) {
  if (__builtin_expect(from_bootstrap(p), 0)) return;
  READY_OR();
  if (real_free_sized)
    real_free_sized(p, size);
  else
    real_free(p);
}

EXPORT void free_aligned_sized(void *p, size_t align, size_t size) {
  if (__builtin_expect(from_bootstrap(p), 0)) return;
  READY_OR();
  if (real_free_aligned_sized)
    real_free_aligned_sized(p, align, size);
  else
    real_free(p);
}
