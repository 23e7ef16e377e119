/* SPDX-License-Identifier: MIT */
#include "kalloc.h"

#define ARENA_SIZE (8u << 20)
#define CLASS_STEP 16u
#define CLASSES    256u /* 16 … 4096 bytes */

typedef struct header {
  uint64_t size;   /* usable bytes, a multiple of 16 */
  uint64_t obj_id; /* memtrace object id, 0 if not sampled */
} header_t;

typedef struct free_block {
  struct free_block *next;
} free_block_t;

static _Alignas(16) uint8_t arena[ARENA_SIZE];
static size_t arena_used;
static free_block_t *classes[CLASSES];
static free_block_t *large; /* freed blocks above 4 KiB; size in their header */
static kalloc_stats_t stats;
static kalloc_alloc_hook alloc_hook;
static kalloc_free_hook free_hook;

void kalloc_set_hooks(kalloc_alloc_hook on_alloc, kalloc_free_hook on_free) {
  alloc_hook = on_alloc;
  free_hook = on_free;
}

static header_t *carve(size_t size) {
  if (ARENA_SIZE - arena_used < sizeof(header_t) + size) return NULL;
  header_t *h = (header_t *)(arena + arena_used);
  arena_used += sizeof(header_t) + size;
  h->size = size;
  return h;
}

static header_t *take(size_t size) {
  if (size <= CLASS_STEP * CLASSES) {
    free_block_t **list = &classes[size / CLASS_STEP - 1];
    if (*list) {
      free_block_t *b = *list;
      *list = b->next;
      return (header_t *)b - 1;
    }
    return carve(size);
  }
  for (free_block_t **pp = &large; *pp; pp = &(*pp)->next) {
    header_t *h = (header_t *)*pp - 1;
    if (h->size >= size) {
      *pp = (*pp)->next;
      return h;
    }
  }
  return carve(size);
}

/* Not inlined: the tracer's backtrace starts at this function's frame, whose return
 * address is in the caller. */
__attribute__((noinline)) void *kmalloc(size_t size) {
  const size_t rounded = size ? (size + CLASS_STEP - 1) & ~(size_t)(CLASS_STEP - 1) : CLASS_STEP;
  header_t *h = take(rounded);
  if (!h) {
    stats.failed++;
    return NULL;
  }
  stats.allocs++;
  stats.bytes += size;
  stats.live_bytes += h->size;
  if (stats.live_bytes > stats.peak_bytes) stats.peak_bytes = stats.live_bytes;
  h->obj_id = alloc_hook ? alloc_hook(size, __builtin_frame_address(0)) : 0;
  return h + 1;
}

void kfree(void *p) {
  if (!p) return;
  header_t *h = (header_t *)p - 1;
  stats.frees++;
  stats.live_bytes -= h->size;
  if (h->obj_id && free_hook) free_hook(h->obj_id);
  h->obj_id = 0;
  free_block_t *b = p;
  if (h->size <= CLASS_STEP * CLASSES) {
    free_block_t **list = &classes[h->size / CLASS_STEP - 1];
    b->next = *list;
    *list = b;
  } else {
    b->next = large;
    large = b;
  }
}

const kalloc_stats_t *kalloc_stats(void) {
  return &stats;
}
