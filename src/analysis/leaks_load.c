/* SPDX-License-Identifier: MIT */
/* `leaks` in two passes (leaks_load.h). */
#define _GNU_SOURCE /* asprintf */
#include "leaks_load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/compiler.h"
#include "../common/hash.h"
#include "fold.h"
#include "strtab.h"
#include "u64map.h"

/* Pass 1 gives up at this fraction of the file (1/8) when more than a quarter of the blocks
 * read so far are live: on the survivors shape (90 % never collected) pass 2 would save
 * little, and 1/8 of a skipping read is ~3 % of what `leaks` costs there. A quarter, not
 * half: a rate-1 trace of python3 (PYTHONMALLOC=malloc) has 49.6 % of its blocks live 1/8
 * in and 31 at the end, and its stacks cost little to intern whole: two passes took 2490 M
 * instructions and one 2229 M (CPU 0.90 x). The traces that gain from two passes had far
 * fewer live then: sqlite3 0.2 %, gen_trace's default shape 2.3 %. */
#define GIVE_UP_AT_SHIFT 3

/* The bitmap's bound: ids at most this far past the first one per allocation marked (plus
 * a fixed slack), so that a trace of sparse or hostile ids costs at most ~2 bits per
 * allocation and 128 KiB before it falls back to one pass. */
#define IDS_PER_ALLOC 2u
#define IDS_SLACK     (1u << 20)

/* Why a callback stopped a read (the reader returns CTS_E_STOPPED for any of them). */
enum { MARK_GIVE_UP = 1, MARK_SPARSE, MARK_NOMEM, TIES_DONE };

/* ---- the marks ---------------------------------------------------------------------------- */

/* The bitmap grown to hold bit i: 0 or -ENOMEM. */
static CTS_NOINLINE int grow_marks(cts_leaks_marks_t *m, uint64_t i) {
  size_t words = m->words ? m->words : 1024;
  while (words <= i / 64) words *= 2;
  uint64_t *bits = realloc(m->bits, words * sizeof *bits);
  if (!bits) return -ENOMEM;
  memset(bits + m->words, 0, (words - m->words) * sizeof *bits);
  m->bits = bits;
  m->words = words;
  return 0;
}

static inline int mark_alloc(cts_leaks_marks_t *m, uint64_t id) {
  if (CTS_UNLIKELY(!m->have_base)) m->have_base = true, m->base = id;
  /* An id below the base wraps far past the bound. */
  const uint64_t i = id - m->base;
  if (i > (m->allocs + 1) * IDS_PER_ALLOC + IDS_SLACK) return CTS_E_LIMIT;
  if (CTS_UNLIKELY(i / 64 >= m->words)) {
    const int e = grow_marks(m, i);
    if (e) return e;
  }
  uint64_t *w = &m->bits[i / 64];
  /* An id allocated again while live (a corrupt trace): one block, as the profile has it. */
  m->live += !(*w >> (i % 64) & 1u);
  *w |= 1ull << (i % 64);
  m->allocs++;
  return 0;
}

int cts_leaks_mark_alloc(cts_leaks_marks_t *m, uint64_t id) {
  return mark_alloc(m, id);
}

static inline void mark_collect(cts_leaks_marks_t *m, uint64_t id) {
  if (!cts_leaks_marked(m, id)) return; /* not allocated, or collected: as the profile */
  const uint64_t i = id - m->base;
  m->bits[i / 64] &= ~(1ull << (i % 64));
  m->live--;
}

void cts_leaks_mark_collect(cts_leaks_marks_t *m, uint64_t id) {
  mark_collect(m, id);
}

void cts_leaks_marks_fini(cts_leaks_marks_t *m) {
  free(m->bits);
  memset(m, 0, sizeof *m);
}

/* ---- pass 1: the blocks live at the end ------------------------------------------------- */

typedef struct mark {
  cts_leaks_marks_t marks;
  bool warned;
  bool auto_give_up; /* may give up at 1/8 of the file */
  uint64_t give_up_at;
  cts_os_progress_cb progress;
  void *progress_user_data;
  int why; /* a MARK_* stop, 0 if none */
} mark_t;

static int mark_event(void *ud, const cts_mt_event_t *ev) {
  mark_t *m = ud;
  if (m->auto_give_up && ev->offset >= m->give_up_at) {
    m->auto_give_up = false;
    if (m->marks.live * 4 > m->marks.allocs) return m->why = MARK_GIVE_UP;
  }
  if (ev->kind == CTS_MT_ALLOC) {
    const int e = mark_alloc(&m->marks, ev->obj_id);
    if (e) return m->why = e == CTS_E_LIMIT ? MARK_SPARSE : MARK_NOMEM;
  } else if (ev->kind == CTS_MT_COLLECT) {
    mark_collect(&m->marks, ev->obj_id);
  }
  return 0;
}

static void mark_warning(void *ud, int code, uint64_t offset, const char *message) {
  mark_t *m = ud;
  (void)code, (void)offset, (void)message;
  m->warned = true;
}

/* Pass 1 reports the first half of the progress, once it is known to be one of two: a
 * pass 1 that gives up is followed by one pass that reports on the file alone, and a line
 * drawn on the scale of two would run backwards (the line waits ~1 s before it is drawn,
 * and 1/8 of a skipping read of 160 MB takes ~0.03 s). */
static void mark_progress(void *ud, uint64_t done, uint64_t total) {
  const mark_t *m = ud;
  if (m->progress && !m->auto_give_up) m->progress(m->progress_user_data, done, total * 2);
}

/* Reads path marking the blocks live at its end: 0, or why one pass is used instead. */
static const char *mark_live(mark_t *m, const char *path, uint64_t size) {
  cts_mt_reader_config_t rc;
  cts_mt_reader_config_init(&rc);
  rc.allocator = cts_os_allocator();
  rc.decode_backtraces = false;
  const cts_mt_handler_t h = {.user_data = m, .on_event = mark_event, .on_warning = mark_warning};
  m->give_up_at = size >> GIVE_UP_AT_SHIFT;
  cts_mt_reader_t *r;
  if (cts_mt_reader_create(&r, &rc, &h)) return "no memory for a reader";
  bool input_error;
  const int err = cts_os_read_memtrace(path, r, mark_progress, m, &input_error);
  cts_mt_reader_destroy(r);
  if (m->why == MARK_GIVE_UP) return "over a quarter of the blocks live 1/8 into the trace";
  if (m->why == MARK_SPARSE) return "object ids too sparse for a bitmap";
  if (m->why == MARK_NOMEM) return "no memory for the bitmap";
  if (err) return "the first pass found an error";
  if (m->warned) return "the first pass found something to warn about";
  return NULL;
}

/* ---- pass 2: the profile, full stacks only for marked blocks ----------------------------- */

typedef struct pass2 {
  cts_log_t log;
  cts_os_progress_cb progress;
  void *progress_user_data;
} pass2_t;

/* Pass 2's messages: warnings go through (pass 1 had none, so they are this read's own);
 * an error is dropped, as the one pass that follows reports it. */
static void pass2_log(void *ud, cts_log_level_t level, const char *msg) {
  const pass2_t *c = ud;
  if (level == CTS_LOG_WARNING && c->log.fn) c->log.fn(c->log.user_data, level, msg);
}

static void pass2_progress(void *ud, uint64_t done, uint64_t total) {
  const pass2_t *c = ud;
  if (c->progress) c->progress(c->progress_user_data, total + done, total * 2);
}

/* Why path cannot be read twice cheaply, or NULL; *size gets its size. */
static const char *not_twice(const char *path, uint64_t *size) {
  struct stat st;
  if (strcmp(path, "-") == 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return "a pipe or standard input";
  cts_os_input_t *in;
  if (cts_os_input_open(&in, path)) return "the file cannot be opened";
  const bool compressed = cts_os_input_is_compressed(in);
  cts_os_input_close(in);
  if (compressed) return "a compressed file";
  *size = (uint64_t)st.st_size;
  return NULL;
}

int cts_leaks_trace_load(cts_mem_trace_t *t, const char *path,
                         const cts_alloc_profile_config_t *cfg, const cts_load_opts_t *opts,
                         cts_leaks_passes_t passes, cts_leaks_load_stats_t *st) {
  cts_leaks_load_stats_t local;
  if (!st) st = &local;
  memset(st, 0, sizeof *st);
  st->passes = 1;
  uint64_t size = 0;
  st->one_why = passes == CTS_LEAKS_PASSES_ONE ? "asked" : not_twice(path, &size);
  mark_t m = {.auto_give_up = passes == CTS_LEAKS_PASSES_AUTO,
              .progress = opts->progress,
              .progress_user_data = opts->progress_user_data};
  if (!st->one_why) st->one_why = mark_live(&m, path, size);
  /* Past pass 1, pass 2 costs at most what one pass does (a block interns its full stack or
   * less), however many blocks are live: it goes on. */
  if (!st->one_why) {
    st->marked = m.marks.live;
    pass2_t c = {.log = opts->log,
                 .progress = opts->progress,
                 .progress_user_data = opts->progress_user_data};
    cts_load_opts_t o = *opts;
    /* The loader asks the marks itself: a hook per event (the loader's call, then the
     * hook's, then the profile's) was ~6 % of leaks on a rate-1 trace of sqlite3. */
    o.full_stacks = &m.marks;
    o.log = (cts_log_t){.fn = pass2_log, .user_data = &c};
    o.progress = opts->progress ? pass2_progress : NULL;
    o.progress_user_data = &c;
    const int err = cts_mem_trace_load(t, path, cfg, &o, NULL, NULL);
    st->allocs = cts_alloc_profile_allocs(&t->prof);
    st->full = t->full_allocs;
    /* A file written to (or cut) between the passes: the marks are not its end's. */
    if (!err && st->allocs == m.marks.allocs) {
      cts_leaks_marks_fini(&m.marks);
      st->passes = 2;
      return 0;
    }
    /* A defect only decoded backtraces show, or no memory: one pass says which. */
    cts_mem_trace_free(t);
    st->one_why = err ? "the second pass failed" : "the file changed between the passes";
  }
  cts_leaks_marks_fini(&m.marks);
  return cts_mem_trace_load(t, path, cfg, opts, NULL, NULL);
}

/* ---- ties -------------------------------------------------------------------------------- */

/* A row's grouping key for code, as cts_rows_build makes it (siterows.c). */
static char *key_of(const cts_frames_t *f, cts_group_t by, uint64_t code) {
  const cts_mt_location_t *l = code ? cts_frame_innermost(f, code) : NULL;
  char *key = NULL;
  int n;
  if (!l)
    n = asprintf(&key, code ? "0x%llx" : "(no backtrace)", (unsigned long long)code);
  else if (by == CTS_GROUP_FILE)
    n = asprintf(&key, "%s", l->filename);
  else if (by == CTS_GROUP_FUNCTION)
    n = asprintf(&key, "%s\t%s", l->defname, l->filename);
  else
    n = asprintf(&key, "%s\t%s\t%u", l->defname, l->filename, l->line);
  return n < 0 ? NULL : key;
}

static bool cut(const cts_stacks_t *s, uint32_t node) {
  return s->nodes[s->nodes[node].parent].code == CTS_STACKS_OVERFLOW_CODE;
}

/* Whether node i could be a row's heaviest stack in best's place: as heavy, and cut for the
 * node budget alike (cts_rows_build prefers whole stacks). */
static bool candidate(const cts_stacks_t *s, uint32_t best, uint32_t i) {
  return best != UINT32_MAX && best != 0 && cut(s, best) == cut(s, i) &&
         cts_stacks_self(s, best).live_samples == cts_stacks_self(s, i).live_samples;
}

/* Whether two nodes print the same backtrace within depth frames. */
static bool same_print(const cts_stacks_t *s, uint32_t a, uint32_t b, long depth) {
  for (long k = 0; k <= depth; k++) {
    if (a == b) return true;
    if (a == 0 || b == 0) return false;
    if (k == depth)
      return cts_stacks_depth(s, a) == cts_stacks_depth(s, b); /* "... N more frames" */
    if (s->nodes[a].code != s->nodes[b].code) return false;
    a = s->nodes[a].parent, b = s->nodes[b].parent;
  }
  return true;
}

typedef struct ties {
  const cts_stacks_t *s;
  cts_fold_t *fold;
  /* The candidates and their ancestors, by edge_key(parent, code): the only nodes a walk
   * needs, in a table small enough to stay in cache (the trie's own is not). */
  cts_u64map_t edges;
  bool edges_exact;   /* no two of them share a key (else the trie's table is asked) */
  uint32_t *group_of; /* node → tied row + 1, 0 = not a candidate */
  uint32_t *winner;   /* tied row → the candidate met first, UINT32_MAX = none yet */
  size_t open;        /* tied rows without a winner */
  uint32_t *path;     /* nodes of the last allocation's walk */
  uint32_t *tags;     /* their path tags, for the trie's own look-ups (!edges_exact) */
  size_t path_len, path_cap, last_kept;
  bool have_domain;
  uint16_t domain;
} ties_t;

static uint64_t edge_key(uint32_t parent, uint64_t code) {
  return cts_hash_combine(cts_mix64(parent), code);
}

/* The child of parent with code among the nodes of c->edges, or UINT32_MAX. *tag: the
 * parent's path tag on entry, the child's on return (used only when the trie is asked: its
 * table is keyed by path, and the walk down keeps the tags so that no look-up walks up). */
static uint32_t edge_child(const ties_t *c, uint32_t parent, uint64_t code, uint32_t *tag) {
  if (!c->edges_exact) return cts_stacks_find_child_down(c->s, parent, code, tag);
  const uint64_t *v = cts_u64map_find(&c->edges, edge_key(parent, code));
  if (!v) return UINT32_MAX;
  const cts_stack_node_t *n = &c->s->nodes[*v];
  return n->parent == parent && n->code == code ? (uint32_t)*v : UINT32_MAX;
}

/* Fills c->edges with every candidate and its ancestors: 0 or -ENOMEM. */
static int index_edges(ties_t *c) {
  const cts_stacks_t *s = c->s;
  c->edges_exact = true;
  for (uint32_t i = 1; i < s->count; i++) {
    if (!c->group_of[i]) continue;
    for (uint32_t n = i; n != 0; n = s->nodes[n].parent) {
      bool added;
      uint64_t *v =
          cts_u64map_insert(&c->edges, edge_key(s->nodes[n].parent, s->nodes[n].code), n, &added);
      if (!v) return -ENOMEM;
      if (!added && *v != n) c->edges_exact = false; /* two edges, one key: 2^-64 */
      if (!added) break;                             /* its ancestors are in */
    }
  }
  return 0;
}

/* Walks each allocation's stack down the trie (as one pass would have interned it): the
 * first candidate of a row met is the node one pass made first. */
static int ties_event(void *ud, const cts_mt_event_t *ev) {
  ties_t *c = ud;
  if (ev->kind != CTS_MT_ALLOC) return 0;
  size_t n = ev->backtrace_len;
  size_t shared = c->have_domain && c->domain == ev->domain ? (size_t)ev->common_prefix : 0;
  if (c->fold) {
    const size_t kept = cts_fold_cut(c->fold, ev->backtrace, n);
    if (shared > kept) shared = kept;
    if (shared > c->last_kept) shared = c->last_kept;
    c->last_kept = n = kept;
  }
  c->have_domain = true;
  c->domain = ev->domain;
  if (n > c->path_cap) {
    size_t cap = c->path_cap ? c->path_cap : 64;
    while (cap < n) cap *= 2;
    uint32_t *p = realloc(c->path, cap * sizeof *p);
    if (!p) return -ENOMEM;
    c->path = p;
    uint32_t *tags = realloc(c->tags, cap * sizeof *tags);
    if (!tags) return -ENOMEM;
    c->tags = tags, c->path_cap = cap;
  }
  /* Frames shared with the last walk met the same nodes, candidates included. */
  size_t i = shared < c->path_len ? shared : c->path_len;
  uint32_t cur = i ? c->path[i - 1] : 0;
  uint32_t tag = i ? c->tags[i - 1] : 0;
  for (; i < n; i++) {
    const uint32_t child = edge_child(c, cur, ev->backtrace[i], &tag);
    if (child == UINT32_MAX) break;
    cur = c->path[i] = child;
    c->tags[i] = tag;
    const uint32_t g = c->group_of[cur];
    if (g && c->winner[g - 1] == UINT32_MAX) {
      c->winner[g - 1] = cur;
      if (--c->open == 0) return TIES_DONE;
    }
  }
  c->path_len = i;
  return 0;
}

/* Marks the candidates of each tied shown row in c: the number of tied rows, or -ENOMEM. */
static long find_ties(ties_t *c, cts_mem_trace_t *t, const cts_rows_t *rows, size_t shown,
                      cts_group_t by, long depth, uint32_t **tied_rows) {
  const cts_stacks_t *s = &t->prof.stacks;
  const cts_frames_t f = cts_mem_trace_frames(t);
  cts_strtab_t keys;
  cts_strtab_init(&keys);
  cts_u64map_t row_of_code; /* code → shown row + 1, 0 = none */
  cts_u64map_init(&row_of_code);
  long ntied = 0, err = 0;
  for (size_t r = 0; r < shown && !err; r++) {
    size_t id;
    if (cts_strtab_add(&keys, rows->rows[r].key, strlen(rows->rows[r].key), &id) < 0) err = -ENOMEM;
  }
  uint32_t *tied = calloc(shown ? shown : 1, sizeof *tied); /* shown row → tied row + 1 */
  c->group_of = calloc(s->count ? s->count : 1, sizeof *c->group_of);
  *tied_rows = calloc(shown ? shown : 1, sizeof **tied_rows); /* tied row → shown row */
  if (!tied || !c->group_of || !*tied_rows) err = -ENOMEM;
  for (uint32_t i = 1; i < s->count && !err; i++) {
    const cts_site_stats_t self = cts_stacks_self(s, i);
    if (self.allocs == 0 || self.live_samples == 0) continue;
    const uint64_t code = s->nodes[i].code;
    const uint64_t *known = cts_u64map_find(&row_of_code, code);
    uint64_t r1;
    if (known) {
      r1 = *known;
    } else {
      char *key = key_of(&f, by, code);
      if (!key) {
        err = -ENOMEM;
        break;
      }
      const size_t id = cts_strtab_find(&keys, key, strlen(key));
      free(key);
      r1 = id == SIZE_MAX ? 0 : id + 1;
      bool added;
      if (!cts_u64map_insert(&row_of_code, code, r1, &added)) {
        err = -ENOMEM;
        break;
      }
    }
    /* Sweep 1: each live node's shown row, and which rows have a tie that shows. */
    c->group_of[i] = (uint32_t)r1;
    if (!r1) continue;
    const uint32_t best = rows->rows[r1 - 1].first_node;
    if (best != i && candidate(s, best, i) && !same_print(s, best, i, depth) && !tied[r1 - 1]) {
      (*tied_rows)[ntied] = (uint32_t)(r1 - 1);
      tied[r1 - 1] = (uint32_t)++ntied;
    }
  }
  /* Sweep 2: every candidate of a tied row, the heaviest too, whatever it prints (the one
   * met first may print as the heaviest does). */
  for (uint32_t i = 1; i < s->count && !err; i++) {
    const uint32_t r1 = c->group_of[i];
    c->group_of[i] = 0;
    if (!r1 || !tied[r1 - 1]) continue;
    const uint32_t best = rows->rows[r1 - 1].first_node;
    if (best == i || candidate(s, best, i)) c->group_of[i] = tied[r1 - 1];
  }
  free(tied);
  cts_u64map_fini(&row_of_code);
  cts_strtab_fini(&keys);
  return err ? err : ntied;
}

int cts_leaks_settle_ties(cts_mem_trace_t *t, cts_rows_t *rows, size_t shown, cts_group_t by,
                          long depth, cts_leaks_load_stats_t *st, cts_os_progress_cb progress,
                          void *progress_user_data) {
  if (st->passes != 2 || depth <= 0 || !shown) return 0;
  ties_t c = {.s = &t->prof.stacks, .fold = t->fold};
  cts_u64map_init(&c.edges);
  uint32_t *tied_rows = NULL;
  const long ntied = find_ties(&c, t, rows, shown, by, depth, &tied_rows);
  int err = ntied < 0 ? (int)ntied : 0;
  if (ntied > 0 && !err) err = index_edges(&c);
  if (ntied > 0) {
    c.open = (size_t)ntied;
    c.winner = malloc((size_t)ntied * sizeof *c.winner);
    if (!c.winner) err = -ENOMEM;
  }
  cts_mt_reader_t *r = NULL;
  if (ntied > 0 && !err) {
    for (long g = 0; g < ntied; g++) c.winner[g] = UINT32_MAX;
    cts_mt_reader_config_t rc;
    cts_mt_reader_config_init(&rc);
    rc.allocator = cts_os_allocator();
    const cts_mt_handler_t h = {.user_data = &c, .on_event = ties_event};
    err = cts_mt_reader_create(&r, &rc, &h);
  }
  if (ntied > 0 && !err) {
    bool input_error;
    const int e = cts_os_read_memtrace(t->path, r, progress, progress_user_data, &input_error);
    st->ties_read = cts_mt_reader_offset(r);
    /* The trace read completely in pass 2: every candidate was met (its own live block). */
    if (c.open) err = e ? e : -EIO;
  }
  if (ntied > 0 && !err) {
    for (long g = 0; g < ntied; g++) rows->rows[tied_rows[g]].first_node = c.winner[g];
    st->tie_rows = (uint64_t)ntied;
  }
  if (err == CTS_E_NOMEM) err = -ENOMEM; /* the reader's word for it */
  cts_mt_reader_destroy(r);
  cts_u64map_fini(&c.edges);
  free(c.winner);
  free(c.group_of);
  free(c.path);
  free(c.tags);
  free(tied_rows);
  return err;
}
