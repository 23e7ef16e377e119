/* SPDX-License-Identifier: MIT */
/* A persistent cache of one module's resolved locations, shared by every traced image and
 * session of a user: what symbolize.c derived for an address (module-relative) is kept in
 * a file named by the module's build-id and path, so that a later image asks libdw nothing
 * for it. Opening a separate debug file costs ~50 ms per image (libc6-dbg's compressed
 * DWARF, which libdw inflates whole); a warm cache costs a read of one small file.
 *
 * Where: $CTFSCOPE_CACHE if it is an absolute directory, "off" (or "0", "no") disables the
 * cache, otherwise $XDG_CACHE_HOME/ctfscope, else $HOME/.cache/ctfscope (created 0700).
 *
 * Files are untrusted: one is used only if it is a regular file owned by this user, no
 * larger than CTS__SYMCACHE_FILE_MAX, with the right magic and checksum, and if the module
 * file and its separate debug file (/usr/lib/debug/.build-id/...) are still the ones
 * (device, inode, size, mtime) it was made from; every length is checked against the
 * file. Otherwise it is ignored, and replaced when the session has something to add.
 * Writes go to a temporary file renamed over the old one: concurrent writers lose each
 * other's additions, never a reader's consistency. The directory is kept under
 * CTS__SYMCACHE_DIR_MAX (the oldest cache files go first).
 *
 * Memory through malloc: the writer's side only (symbolize.c). Not thread-safe. */
#ifndef CTS_TRACER_SYMCACHE_H
#define CTS_TRACER_SYMCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctfscope/memtrace.h"

#define CTS__SYMCACHE_FILE_MAX (8u << 20)  /* bytes per module */
#define CTS__SYMCACHE_DIR_MAX  (64u << 20) /* bytes in the directory */

typedef struct cts__symcache cts__symcache_t;

/* The cache directory from the environment (see above): a malloc'd path, or NULL when
 * disabled or when no directory can be named. */
char *cts__symcache_dir(void);

/* The cache of the module at `path` with `build_id` (1 to 64 bytes) in directory `dir`,
 * its file read if valid. NULL when `dir` is NULL, the module has no build-id or cannot
 * be stat'ed (deleted, "[vdso]"), or without memory. */
cts__symcache_t *cts__symcache_open(const char *dir, const char *path, const void *build_id,
                                    size_t build_id_len);

/* The locations cached for `offset` (an address minus the module's start): true and up
 * to `max` of them in `out`, *n set, if present. The strings belong to the cache and stay
 * valid until cts__symcache_close. */
bool cts__symcache_find(cts__symcache_t *c, uint64_t offset, cts_mt_location_t *out, size_t max,
                        size_t *n);

/* Remembers `n` locations for `offset` (strings copied), to be written by close. */
void cts__symcache_add(cts__symcache_t *c, uint64_t offset, const cts_mt_location_t *locs,
                       size_t n);

/* Writes the file back if something was added since the last save (temporary file, then
 * rename; errors are ignored: the cache is an optimisation). Frees nothing it kept, so it
 * may run where tearing down is unwelcome (the writer process's end). Accepts NULL. */
void cts__symcache_save(cts__symcache_t *c);

/* Saves, then frees `c`. Accepts NULL. */
void cts__symcache_close(cts__symcache_t *c);

#endif /* CTS_TRACER_SYMCACHE_H */
