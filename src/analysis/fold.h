/* SPDX-License-Identifier: MIT */
/* Which frames of a backtrace people see: names demangled (names.h), the allocator's own
 * frames folded into the allocation, and the user's --drop-frames / --keep-frames. One
 * implementation for every command and export; the trace itself is never changed.
 *
 * Built-in fold list (CTS_FOLD_ALLOCATOR_RE, matched on the function's demangled name
 * without parameters): the malloc family and common wrappers (xmalloc, g_malloc, strdup,
 * ...), operator new / new[] in every form (nothrow, aligned), the C++ standard library
 * (std::, __gnu_cxx::: std::allocator, new_allocator, _M_create, _M_realloc_insert,
 * _M_construct, make_shared, ...), and Rust's allocation paths (alloc::, core::, std::,
 * __rust_alloc, __rdl_alloc, RawVec growth). Only the innermost run of such frames is
 * folded: the allocation's site becomes the first frame, from the allocation point
 * outwards, that is not on the list, so a standard-library frame that calls back into
 * the program (std::thread, std::sort with a comparator) never hides the program's frames.
 * Inlined locations of a frame that are on the list, at its inner end, are hidden too.
 *
 * --drop-frames REGEX works as pprof's: scanning from the outermost frame, past the first
 * frame that does not match, the first frame that matches is removed with every frame it
 * called (a frame whose inlined locations match only from the k-th on keeps the k outer
 * ones). --keep-frames REGEX exempts frames from both. User expressions are POSIX
 * extended, unanchored, and match if they match the name shown, the mangled name or the
 * name without parameters. A backtrace made only of folded frames is kept whole.
 *
 * Ownership: cts_fold_t owns its caches and copies of locations; the frames it returns are
 * valid until cts_fold_fini. Not thread-safe. */
#ifndef CTS_FOLD_H
#define CTS_FOLD_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

#include "common/hash.h"
#include "names.h"
#include "siterows.h"
#include "u64map.h"

#define CTS_FOLD_ALLOCATOR_RE                                                               \
  "^(malloc|calloc|realloc|reallocarray|free|memalign|aligned_alloc|posix_memalign|valloc|" \
  "pvalloc|strdup|strndup|__strdup|__strndup|__libc_(malloc|calloc|realloc|memalign)|"      \
  "x(malloc|calloc|realloc|strdup|strndup|memdup)|g_(try_)?(malloc|malloc0|realloc)(_n)?|"  \
  "g_strdup|g_strndup|g_memdup2?|__rust_(alloc|alloc_zeroed|realloc)|"                      \
  "__r[dg]l_(alloc|alloc_zeroed|realloc)|operator new(\\[\\])?)$"                           \
  "|^(std|__gnu_cxx|alloc|core)::|^<(alloc|core|std)::"
/* The same by source file, for names from debug information, which are unqualified
 * ("allocate", "_M_realloc_insert<int const&>"): the C++ standard library's headers
 * (libstdc++, libc++) and Rust's standard library sources. Not for a symbol that
 * demangles: its qualified name says whose it is, and the tracer may pair a program's
 * function with the file of library code inlined into it ("app::f" in alloc.rs). */
#define CTS_FOLD_ALLOCATOR_FILES_RE \
  "/include/c\\+\\+/[^/]+/|^/rustc/[0-9a-f]+/library/(alloc|core|std)/"

/* Whether s matches CTS_FOLD_ALLOCATOR_RE / CTS_FOLD_ALLOCATOR_FILES_RE, without regexec:
 * glibc's costs ~4 400 instructions a call whatever the name (its set-up), and a frame took
 * two or three (the name shown, without parameters, mangled), which on a real trace's many
 * distinct frames (a JVM's, node's: thousands) was a fifth of `top --tree`'s instructions.
 * The first expression is a finite set of whole names and seven anchored prefixes, the
 * second a substring and a prefix; test_names.c checks both against regexec. Thread-safe. */
bool cts_fold_allocator_name(const char *s);
bool cts_fold_allocator_file(const char *s);

typedef struct cts_fold_config {
  bool no_demangle;    /* show names as the trace has them (--no-demangle) */
  bool keep_allocator; /* do not fold the built-in list (--keep-allocator-frames) */
  const char *drop_re; /* --drop-frames, NULL = none */
  const char *keep_re; /* --keep-frames, NULL = none */
} cts_fold_config_t;

typedef struct cts_fold_code {
  uint64_t code;
  cts_mt_location_t *locs; /* the shown locations, names demangled (owned) */
  uint32_t nlocs;          /* shown */
  uint32_t all;            /* locations in the trace */
  bool allocator;          /* every location is on the fold list */
  bool drop, drop_whole;   /* --drop-frames matched a location; matched the outermost */
  bool known;              /* the trace describes the code */
} cts_fold_code_t;

/* Entries of the direct-mapped memo in front of by_code for cts_fold_cut (16 KiB). */
#define CTS_FOLD_MEMO 1024u

typedef struct cts_fold_memo {
  uint64_t code;
  uint32_t index; /* in codes, + 1; 0 = empty */
  bool allocator; /* codes[index - 1].allocator, here so cts_fold_cut's test loads one line */
} cts_fold_memo_t;

typedef struct cts_fold {
  cts_fold_config_t cfg;
  cts_frames_t inner;
  cts_names_t names;
  regex_t drop, keep; /* the user's --drop-frames, --keep-frames */
  bool have_drop, have_keep;
  cts_u64map_t by_code;  /* code → index + 1 in codes */
  cts_u64map_t by_shown; /* shown name's address → its cts_name_t (for cts_fold_mangled) */
  cts_fold_code_t *codes;
  size_t ncodes, cap;
  bool nomem;
  /* cts_fold_cut classifies every allocation's innermost frames: a hash map look-up and a
   * call each, where this spares both for the few codes that recur. */
  cts_fold_memo_t memo[CTS_FOLD_MEMO];
} cts_fold_t;

/* inner: where locations come from (it must outlive f). Returns 0, -EINVAL for a bad
 * expression (regerror's message in err) or -ENOMEM; on error f needs no fini. */
int cts_fold_init(cts_fold_t *f, const cts_frames_t *inner, const cts_fold_config_t *cfg, char *err,
                  size_t err_size);
void cts_fold_fini(cts_fold_t *f);

/* Frames described as people read them (demangled, inlined allocator locations hidden). */
cts_frames_t cts_fold_frames(cts_fold_t *f);

/* The memo's entry of code: one multiply-shift (a full mix cost ~6 instructions more an
 * allocation), the product the trie's memo takes of a root's child (sites.h). */
static inline size_t cts_fold_memo_slot(uint64_t code) {
  _Static_assert(CTS_FOLD_MEMO == 1u << 10, "the memo has 2^10 entries");
  return (size_t)((code * 0x9e3779b97f4a7c15ull) >> 54);
}

/* cts_fold_cut's general case. */
size_t cts__fold_cut(cts_fold_t *f, const uint64_t *bt, size_t n);

/* How many frames of bt[0..n) (outermost first) are kept after the fold: a prefix. n when
 * memory ran out (nothing folded; cts_fold_t.nomem is set). Not thread-safe (it fills f's
 * tables and memo). */
static inline size_t cts_fold_cut(cts_fold_t *f, const uint64_t *bt, size_t n) {
  /* Most allocations are made by the program's own code: without --drop-frames, an
   * innermost frame known not to be the allocator's keeps the whole stack, without a call. */
  if (!f->have_drop && n) {
    const uint64_t leaf = bt[n - 1];
    const cts_fold_memo_t *m = &f->memo[cts_fold_memo_slot(leaf)];
    if (m->index && m->code == leaf && !m->allocator) return n;
  }
  return cts__fold_cut(f, bt, n);
}

/* The mangled name of a name shown by these frames, or NULL when it is shown as is. */
const char *cts_fold_mangled(const cts_fold_t *f, const char *shown);

#endif /* CTS_FOLD_H */
