/* SPDX-License-Identifier: MIT */
/* A real allocator for the tests, preloaded after libctfscope-preload.so: free lists that are
 * last in, first out per size, as glibc's tcache and fast bins are, over blocks carved in
 * order from one region, each behind 16 bytes of its own (its size), so that some blocks'
 * address + 16 is the start of a page (the preload cannot put its header in page there).
 * Deterministic: the same calls give the same addresses relative to the region. At exit it
 * writes "lifo_alloc mallocs=N" on stderr: the blocks it was asked for (malloc, calloc,
 * realloc to a new block, the aligned ones), so that a test can count what the preload asks
 * of the real allocator for each of the program's blocks. Thread-safe (one spin lock). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REGION  ((size_t)1 << 30) /* reserved, touched as used */
#define CLASSES 256u              /* sizes 16 .. 4096 by 16; larger ones are not reused */

static unsigned char *region;
static size_t used;
static void *lists[CLASSES]; /* by size / 16 - 1: the last freed first */
static unsigned long mallocs;
static int lock;

static void take(void) {
  while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) continue;
}

static void give(void) {
  __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

static size_t *size_of(void *p) {
  return (size_t *)((unsigned char *)p - 16);
}

/* A block of `size` bytes aligned to `align` (a power of two, at least 16). Lock held. */
static void *carve(size_t align, size_t size) {
  const size_t rounded = (size + 15u) & ~(size_t)15u;
  const size_t cls = rounded / 16u - 1u;
  mallocs++;
  if (align == 16 && rounded && cls < CLASSES && lists[cls]) {
    void *const p = lists[cls];
    memcpy(&lists[cls], p, sizeof(void *));
    return p;
  }
  if (!region) {
    region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0);
    if (region == MAP_FAILED) region = NULL;
  }
  const size_t start = (used + 16u + align - 1u) & ~(align - 1u);
  if (!region || size > REGION || start > REGION - (rounded ? rounded : 16u)) {
    errno = ENOMEM;
    return NULL;
  }
  used = start + (rounded ? rounded : 16u);
  unsigned char *const p = region + start;
  *size_of(p) = rounded ? rounded : 16u;
  return p;
}

static void *allocate(size_t align, size_t size) {
  take();
  void *const p = carve(align, size);
  give();
  return p;
}

void free(void *p) {
  if (!p) return;
  take();
  const size_t cls = *size_of(p) / 16u - 1u;
  if (cls < CLASSES) {
    memcpy(p, &lists[cls], sizeof(void *));
    lists[cls] = p;
  }
  give();
}

void *malloc(size_t size) {
  return allocate(16, size);
}

void *calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *const p = allocate(16, total);
  if (p) memset(p, 0, total); /* a reused block is not */
  return p;
}

size_t malloc_usable_size(void *p) {
  return p ? *size_of(p) : 0;
}

void *realloc(void *old, size_t size) {
  if (!old) return malloc(size);
  if (size == 0) {
    free(old);
    return NULL;
  }
  if (size <= *size_of(old)) return old;
  void *const p = malloc(size);
  if (!p) return NULL;
  memcpy(p, old, *size_of(old));
  free(old);
  return p;
}

static void *aligned(size_t align, size_t size) {
  if (align < 16) align = 16;
  if (align & (align - 1)) {
    errno = EINVAL;
    return NULL;
  }
  return allocate(align, size);
}

void *memalign(size_t align, size_t size) {
  return aligned(align, size);
}

void *aligned_alloc(size_t align, size_t size) {
  return aligned(align, size);
}

int posix_memalign(void **out, size_t align, size_t size) {
  void *const p = aligned(align, size);
  if (!p) return errno;
  *out = p;
  return 0;
}

void *valloc(size_t size) {
  return aligned(4096, size);
}

void *pvalloc(size_t size) {
  return aligned(4096, (size + 4095u) & ~(size_t)4095u);
}

__attribute__((destructor)) static void report(void) {
  char line[64];
  const int n = snprintf(line, sizeof line, "lifo_alloc mallocs=%lu\n", mallocs);
  if (n > 0 && write(2, line, (size_t)n) < 0) return;
}
