/* SPDX-License-Identifier: MIT */
/* Frames folded and names demangled (fold.h). */
#include "fold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compile(regex_t *re, const char *what, const char *src, char *err, size_t err_size) {
  const int rc = regcomp(re, src, REG_EXTENDED | REG_NOSUB);
  if (rc == 0) return 0;
  char msg[256];
  regerror(rc, re, msg, sizeof msg);
  snprintf(err, err_size, "%s '%s': %s", what, src, msg);
  return rc == REG_ESPACE ? -ENOMEM : -EINVAL;
}

int cts_fold_init(cts_fold_t *f, const cts_frames_t *inner, const cts_fold_config_t *cfg, char *err,
                  size_t err_size) {
  *f = (cts_fold_t){.cfg = *cfg, .inner = *inner};
  int e;
  if (cfg->drop_re) {
    e = compile(&f->drop, "--drop-frames", cfg->drop_re, err, err_size);
    if (e) return e;
    f->have_drop = true;
  }
  if (cfg->keep_re) {
    e = compile(&f->keep, "--keep-frames", cfg->keep_re, err, err_size);
    if (e) goto fail_drop;
    f->have_keep = true;
  }
  cts_names_init(&f->names, true);
  cts_u64map_init(&f->by_code);
  cts_u64map_init(&f->by_shown);
  return 0;
fail_drop:
  if (f->have_drop) regfree(&f->drop);
  return e;
}

void cts_fold_fini(cts_fold_t *f) {
  for (size_t i = 0; i < f->ncodes; i++) free(f->codes[i].locs);
  free(f->codes);
  cts_u64map_fini(&f->by_code);
  cts_u64map_fini(&f->by_shown);
  cts_names_fini(&f->names);
  if (f->have_drop) regfree(&f->drop);
  if (f->have_keep) regfree(&f->keep);
  *f = (cts_fold_t){0};
}

/* Whole names of CTS_FOLD_ALLOCATOR_RE's first alternative (a finite set), then the
 * prefixes of the other two. */
static const char *const ALLOCATOR_NAMES[] = {
    "malloc",          "calloc",         "realloc",
    "reallocarray",    "free",           "memalign",
    "aligned_alloc",   "posix_memalign", "valloc",
    "pvalloc",         "strdup",         "strndup",
    "__strdup",        "__strndup",      "__libc_malloc",
    "__libc_calloc",   "__libc_realloc", "__libc_memalign",
    "xmalloc",         "xcalloc",        "xrealloc",
    "xstrdup",         "xstrndup",       "xmemdup",
    "g_malloc",        "g_malloc_n",     "g_malloc0",
    "g_malloc0_n",     "g_realloc",      "g_realloc_n",
    "g_try_malloc",    "g_try_malloc_n", "g_try_malloc0",
    "g_try_malloc0_n", "g_try_realloc",  "g_try_realloc_n",
    "g_strdup",        "g_strndup",      "g_memdup",
    "g_memdup2",       "__rust_alloc",   "__rust_alloc_zeroed",
    "__rust_realloc",  "__rdl_alloc",    "__rdl_alloc_zeroed",
    "__rdl_realloc",   "__rgl_alloc",    "__rgl_alloc_zeroed",
    "__rgl_realloc",   "operator new",   "operator new[]"};
static const char *const ALLOCATOR_PREFIXES[] = {
    "std::", "__gnu_cxx::", "alloc::", "core::", "<alloc::", "<core::", "<std::"};

bool cts_fold_allocator_name(const char *s) {
  /* Every alternative is anchored and starts with one of these bytes: most names stop here. */
  if (!strchr("mcrfapvs_xgo<", s[0]) || !s[0]) return false;
  for (size_t i = 0; i < sizeof ALLOCATOR_PREFIXES / sizeof ALLOCATOR_PREFIXES[0]; i++) {
    const char *p = ALLOCATOR_PREFIXES[i];
    if (p[0] == s[0] && strncmp(s, p, strlen(p)) == 0) return true;
  }
  for (size_t i = 0; i < sizeof ALLOCATOR_NAMES / sizeof ALLOCATOR_NAMES[0]; i++)
    if (ALLOCATOR_NAMES[i][0] == s[0] && strcmp(s, ALLOCATOR_NAMES[i]) == 0) return true;
  return false;
}

bool cts_fold_allocator_file(const char *s) {
  /* "/include/c++/" then at least one byte other than '/' before the next '/'. */
  static const char cxx[] = "/include/c++/";
  for (const char *p = strstr(s, cxx); p; p = strstr(p + 1, cxx)) {
    const char *dir = p + sizeof cxx - 1;
    const char *slash = strchr(dir, '/');
    if (slash && slash > dir) return true;
  }
  /* "^/rustc/" [0-9a-f]+ "/library/" (alloc|core|std) "/". */
  static const char rustc[] = "/rustc/";
  if (strncmp(s, rustc, sizeof rustc - 1) != 0) return false;
  const char *h = s + sizeof rustc - 1;
  const size_t hash = strspn(h, "0123456789abcdef");
  if (!hash) return false;
  static const char library[] = "/library/";
  const char *lib = h + hash;
  if (strncmp(lib, library, sizeof library - 1) != 0) return false;
  const char *crate = lib + sizeof library - 1;
  return strncmp(crate, "alloc/", 6) == 0 || strncmp(crate, "core/", 5) == 0 ||
         strncmp(crate, "std/", 4) == 0;
}

/* The built-in list on any of the names users match (as matches() does for theirs). */
static bool on_allocator_list(const cts_name_t *n) {
  return cts_fold_allocator_name(n->shown) ||
         (n->base != n->shown && cts_fold_allocator_name(n->base)) ||
         (n->demangled && cts_fold_allocator_name(n->mangled));
}

static bool matches(const regex_t *re, const cts_name_t *n) {
  return regexec(re, n->shown, 0, NULL, 0) == 0 || regexec(re, n->base, 0, NULL, 0) == 0 ||
         (n->demangled && regexec(re, n->mangled, 0, NULL, 0) == 0);
}

/* Classifies code and copies its locations with their names as shown. NULL = no memory. */
static const cts_fold_code_t *classify(cts_fold_t *f, uint64_t code) {
  uint64_t *idx = cts_u64map_find(&f->by_code, code);
  if (idx) return &f->codes[*idx - 1];
  if (f->ncodes == f->cap) {
    const size_t cap = f->cap ? f->cap * 2 : 256;
    cts_fold_code_t *c = realloc(f->codes, cap * sizeof *c);
    if (!c) return NULL;
    f->codes = c;
    f->cap = cap;
  }
  cts_fold_code_t c = {.code = code};
  const cts_mt_location_t *locs = NULL;
  size_t n = 0;
  if (f->inner.lookup(f->inner.user_data, code, &locs, &n) == 0) {
    c.known = true;
    c.all = (uint32_t)n;
    c.nlocs = (uint32_t)n;
    if (n) {
      c.locs = malloc(n * sizeof *c.locs);
      if (!c.locs) return NULL;
    }
    /* allocator_from: the innermost run of locations on the fold list starts there. */
    size_t allocator_from = n;
    size_t drop_at = n;
    for (size_t i = 0; i < n; i++) {
      c.locs[i] = locs[i];
      const cts_name_t *name = cts_names_get(&f->names, locs[i].defname);
      if (!name) {
        free(c.locs);
        return NULL;
      }
      if (name->demangled && !f->cfg.no_demangle) {
        c.locs[i].defname = name->shown;
        bool added;
        if (!cts_u64map_insert(&f->by_shown, (uint64_t)(uintptr_t)name->shown,
                               (uint64_t)(uintptr_t)name, &added)) {
          free(c.locs);
          return NULL;
        }
      }
      const bool kept = f->have_keep && matches(&f->keep, name);
      const bool alloc = !kept && !f->cfg.keep_allocator &&
                         (on_allocator_list(name) || (!name->demangled && locs[i].filename &&
                                                      cts_fold_allocator_file(locs[i].filename)));
      if (!alloc)
        allocator_from = n;
      else if (allocator_from == n)
        allocator_from = i;
      if (drop_at == n && !kept && f->have_drop && matches(&f->drop, name)) drop_at = i;
    }
    c.allocator = n > 0 && allocator_from == 0;
    c.drop = drop_at < n;
    c.drop_whole = drop_at == 0 && n > 0;
    /* Hidden: the inner run of allocator locations, and what a partial drop removes; a
     * frame that is folded whole shows all it has (it is seen only when nothing else is). */
    if (!c.allocator && allocator_from < c.nlocs) c.nlocs = (uint32_t)allocator_from;
    if (c.drop && !c.drop_whole && drop_at < c.nlocs) c.nlocs = (uint32_t)drop_at;
  }
  bool added;
  if (!cts_u64map_insert(&f->by_code, code, f->ncodes + 1, &added)) {
    free(c.locs);
    return NULL;
  }
  f->codes[f->ncodes] = c;
  return &f->codes[f->ncodes++];
}

/* classify() through the memo. */
static inline const cts_fold_code_t *classify_memo(cts_fold_t *f, uint64_t code) {
  cts_fold_memo_t *m = &f->memo[cts_fold_memo_slot(code)];
  if (m->index && m->code == code) return &f->codes[m->index - 1];
  const cts_fold_code_t *c = classify(f, code);
  if (c && (size_t)(c - f->codes) < UINT32_MAX)
    *m = (cts_fold_memo_t){
        .code = code, .index = (uint32_t)(c - f->codes) + 1u, .allocator = c->allocator};
  return c;
}

size_t cts__fold_cut(cts_fold_t *f, const uint64_t *bt, size_t n) {
  /* --drop-frames, as pprof prunes: the first matching frame past the program's first
   * non-matching one goes, with everything it called. */
  size_t keep = n;
  bool user = false;
  /* Without it, only the frames from the allocation point up to its site are looked at:
   * a few per event, whatever the depth of the stack. */
  for (size_t i = 0; f->have_drop && i < n; i++) {
    const cts_fold_code_t *c = classify_memo(f, bt[i]);
    if (!c) {
      f->nomem = true;
      return n;
    }
    if (!c->drop) {
      user = true;
      continue;
    }
    if (!user) continue;
    keep = c->drop_whole ? i : i + 1;
    break;
  }
  /* The allocator's own frames: the innermost run of them. */
  size_t k = keep;
  while (k > 0) {
    const cts_fold_code_t *c = classify_memo(f, bt[k - 1]);
    if (!c) {
      f->nomem = true;
      return n;
    }
    if (!c->allocator) break;
    k--;
  }
  return k > 0 ? k : keep;
}

static int lookup(void *user_data, uint64_t code, const cts_mt_location_t **locs, size_t *n) {
  cts_fold_t *f = user_data;
  const cts_fold_code_t *c = classify(f, code);
  if (!c) {
    /* Out of memory: the trace's own description, undemangled, rather than nothing. */
    f->nomem = true;
    return f->inner.lookup(f->inner.user_data, code, locs, n);
  }
  if (!c->known) return -1;
  *locs = c->locs;
  *n = c->nlocs;
  return 0;
}

cts_frames_t cts_fold_frames(cts_fold_t *f) {
  return (cts_frames_t){.lookup = lookup, .user_data = f};
}

const char *cts_fold_mangled(const cts_fold_t *f, const char *shown) {
  const uint64_t *v = cts_u64map_find(&f->by_shown, (uint64_t)(uintptr_t)shown);
  return v ? ((const cts_name_t *)(uintptr_t)*v)->mangled : NULL;
}
