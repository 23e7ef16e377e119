/* SPDX-License-Identifier: MIT */
/* The writer's zstd stage (tracer.h, "Compression"; docs/formats/memtrace-zstd.md): the
 * memtrace packets the writer produces are split into columns (os/mtcols.h) and go through
 * zstd frames on their way to the sink, after a skippable frame that names the transform.
 * The writer's periodic flushes end a column group and a zstd block (ZSTD_e_flush), so
 * what reached the sink is always decodable up to the last flush; a flush the program asks
 * for (before exec, dlclose) and the end of the session end the frame (ZSTD_e_end), and
 * the transform starts afresh in the next one.
 *
 * Memory: one mmap'd region (the compression context, fixed-size, ZSTD_initStaticCCtx, the
 * output buffer and the column encoder's ~18 MiB, touched as used); nothing goes through
 * malloc, so it may run in the traced program's writer thread as in the writer process.
 * Not thread-safe: the writer's alone. */
#ifndef CTS_TRACER_ZSINK_H
#define CTS_TRACER_ZSINK_H

#include <stdbool.h>
#include <stddef.h>

/* Compression levels accepted (zstd's own: 1 fastest; past 19 the context needs far more
 * memory for little gain on traces). */
#define CTS__ZSINK_LEVEL_MIN     1
#define CTS__ZSINK_LEVEL_MAX     19
#define CTS__ZSINK_LEVEL_DEFAULT 3

typedef struct cts__zsink cts__zsink_t;
/* Where compressed bytes go: 0 or a negative error. */
typedef int (*cts__zsink_write_cb)(void *user_data, const void *buf, size_t len);

/* Maps and sets up a stage at `level` (clamped to the range above) writing through
 * `write`. NULL when the memory cannot be had, libzstd cannot be loaded (it is bound on
 * the first call, lazylib.h) or zstd refuses. */
cts__zsink_t *cts__zsink_open(int level, cts__zsink_write_cb write, void *user_data);
/* Compresses `len` bytes (output goes to the sink as zstd's buffer fills). 0 or the
 * sink's error (the stage is then failed: every later call returns it). */
int cts__zsink_write(cts__zsink_t *z, const void *buf, size_t len);
/* Whether bytes were taken since the last flush or end. */
bool cts__zsink_pending(const cts__zsink_t *z);
/* Ends the current block: everything written so far reaches the sink, decodable. */
int cts__zsink_flush(cts__zsink_t *z);
/* Ends the frame, if bytes were taken since the last end (a reader then knows that what
 * it has is complete); later bytes start a new frame. */
int cts__zsink_end(cts__zsink_t *z);
/* Unmaps the stage. Accepts NULL. */
void cts__zsink_close(cts__zsink_t *z);

#endif /* CTS_TRACER_ZSINK_H */
