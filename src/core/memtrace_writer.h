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

/* The part of writer `w`'s memory that its start leaves untouched and its events use: the
 * tables (move-to-front, pending codes, resolved locations, the backtrace cache, the
 * location packet) and the previous backtrace, from the returned address to the end of the
 * memory given at init; *size receives its length. The cache's buckets are picked by
 * hashing each code (§8.4), so a few events touch pages all over these tables: a caller
 * whose memory comes fresh from mmap may map them in one call at the first event (one
 * page fault per page otherwise, most of them taken by the first few dozen events). Reads
 * w only. */
void *cts__mt_writer_event_memory(cts_mt_writer_t *w, size_t *size);

/* cts_mt_writer_alloc for a backtrace stored innermost first (allocation point at
 * frames[0]), as a stack walk fills it: same bytes as cts_mt_writer_alloc on the reversed
 * array, without the caller's reversal (the writer reverses only the frames past the
 * common prefix, into its own copy of the previous backtrace). depth must be at most the
 * writer's max_backtrace_frames (CTS_E_INVAL otherwise). Same errors and thread-safety as
 * cts_mt_writer_alloc; `frames` is only read during the call. */
int cts__mt_writer_alloc_innermost_first(cts_mt_writer_t *w, uint64_t time_us, uint64_t length,
                                         uint64_t nsamples, cts_mt_source_t source,
                                         const uint64_t *frames, size_t depth, uint64_t *obj_id);

#endif /* CTS_CORE_MEMTRACE_WRITER_H */
