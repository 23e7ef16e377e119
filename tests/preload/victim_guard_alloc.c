/* SPDX-License-Identifier: MIT */
/* A real allocator for the tests, preloaded after libctfscope-preload.so (as `ctfscope
 * record` orders a user's LD_PRELOAD allocator): the worst neighbour a block can have, made
 * deterministic. Every other block starts a page that follows an inaccessible page (reading
 * one byte before it faults, as jemalloc's page-aligned blocks may); the others start 16
 * bytes before the end of a page (the preload's header would then land at the start of the
 * next page). Each block has its own mapping: [meta page][guard page][block's pages], the
 * meta page holding the mapping and the block's size. Slow (two system calls a block), for
 * small victims only. Thread-safe (no shared state but an atomic counter). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096u

typedef struct meta {
  void *base;
  size_t length;
  size_t size;
} meta_t;

static unsigned long count;

static meta_t *meta_of(void *p) {
  const uintptr_t page = (uintptr_t)p & ~(uintptr_t)(PAGE - 1);
  return (meta_t *)(page - 2 * PAGE);
}

static void *guarded(size_t align, size_t size) {
  if (align < 16) align = 16;
  if ((align & (align - 1)) != 0 || size > SIZE_MAX / 2 - 4 * (size_t)PAGE - align) {
    errno = align & (align - 1) ? EINVAL : ENOMEM;
    return NULL;
  }
  const bool page_start = align > 16 || __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED) % 2 == 0;
  const size_t slack = align > PAGE ? align : 0;
  const size_t length = 3 * PAGE + slack + ((size + PAGE - 1) & ~(size_t)(PAGE - 1));
  unsigned char *const base =
      mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  uintptr_t p = (uintptr_t)base + 2 * PAGE;
  if (slack) p = (p + align - 1) & ~(uintptr_t)(align - 1);
  if (!page_start) p += PAGE - 16; /* the page before p is then the block's own */
  meta_t *const m = meta_of((void *)p);
  m->base = base;
  m->length = length;
  m->size = size;
  mprotect((unsigned char *)m + PAGE, PAGE, PROT_NONE);
  return (void *)p;
}

void *malloc(size_t size) {
  return guarded(16, size);
}

void free(void *p) {
  if (!p) return;
  const meta_t *const m = meta_of(p);
  munmap(m->base, m->length);
}

void *calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return guarded(16, total); /* fresh mappings are zero */
}

size_t malloc_usable_size(void *p) {
  return p ? meta_of(p)->size : 0;
}

void *realloc(void *old, size_t size) {
  if (!old) return malloc(size);
  if (size == 0) {
    free(old);
    return NULL;
  }
  void *const p = malloc(size);
  if (!p) return NULL;
  const size_t keep = meta_of(old)->size;
  memcpy(p, old, keep < size ? keep : size);
  free(old);
  return p;
}

void *memalign(size_t align, size_t size) {
  return guarded(align, size);
}

void *aligned_alloc(size_t align, size_t size) {
  return guarded(align, size);
}

int posix_memalign(void **out, size_t align, size_t size) {
  void *const p = guarded(align, size);
  if (!p) return errno;
  *out = p;
  return 0;
}

void *valloc(size_t size) {
  return guarded(PAGE, size);
}

void *pvalloc(size_t size) {
  return guarded(PAGE, (size + PAGE - 1) & ~(size_t)(PAGE - 1));
}
