/* SPDX-License-Identifier: MIT */
/* The example unikernel's allocator: size classes of 16 bytes up to 4 KiB with one free
 * list each, larger blocks first-fit from a list, all carved from one static arena. Each
 * block has a 16-byte header: its size and, when the tracer sampled it, its memtrace
 * object id, so that kfree() can report the collection. Single CPU, no interrupts: not
 * reentrant. */
#ifndef UNIKERNEL_KALLOC_H
#define UNIKERNEL_KALLOC_H

#include <stddef.h>
#include <stdint.h>

/** The kernel's own allocation counters, printed on COM3 at the end of a run. */
typedef struct kalloc_stats {
  uint64_t allocs, frees, bytes, failed;
  uint64_t live_bytes, peak_bytes;
} kalloc_stats_t;

/**
 * Called after each allocation with the block's size and the frame pointer of kmalloc()
 * (where its caller's backtrace starts); returns a memtrace object id to remember, or 0
 * (not sampled). NULL: no tracing.
 */
typedef uint64_t (*kalloc_alloc_hook)(size_t size, void *frame);
/** Called when a block whose hook returned a non-zero id is freed. */
typedef void (*kalloc_free_hook)(uint64_t obj_id);

void kalloc_set_hooks(kalloc_alloc_hook on_alloc, kalloc_free_hook on_free);
/** NULL when the arena is exhausted (counted in failed). */
void *kmalloc(size_t size);
void kfree(void *p);
const kalloc_stats_t *kalloc_stats(void);

#endif /* UNIKERNEL_KALLOC_H */
