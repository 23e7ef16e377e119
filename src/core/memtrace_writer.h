/* SPDX-License-Identifier: MIT */
/* The memtrace writer's entry points internal to ctfscope (not installed). */
#ifndef CTS_CORE_MEMTRACE_WRITER_H
#define CTS_CORE_MEMTRACE_WRITER_H

#include <ctfscope/memtrace.h>

/* cts_mt_writer_init for `mem` that the caller knows holds only zero bytes (pages fresh from
 * mmap, or dropped with MADV_DONTNEED): the writer's state is not cleared first. Clearing
 * it (440 KB) wrote every page, one page fault each: 0.25-0.8 ms on this kind of machine,
 * paid by every traced image at its session's start, for pages most images never use. Same
 * errors and outputs as cts_mt_writer_init; undefined if a byte of `mem` is not zero. */
int cts__mt_writer_init_zeroed(cts_mt_writer_t **out, void *mem, size_t mem_size,
                               const cts_mt_writer_config_t *cfg);

#endif /* CTS_CORE_MEMTRACE_WRITER_H */
