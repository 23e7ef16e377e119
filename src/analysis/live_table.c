/* SPDX-License-Identifier: MIT */
#include "live_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MASK      (CTS_LIVE_CHUNK - 1u)
#define WORDS     (CTS_LIVE_CHUNK / 64u)
#define DEAD      CTS_LIVE_DEAD
#define DENSE_MIN (CTS_LIVE_CHUNK / 8u * 7u)
/* A sparse chunk's index: WORDS words of bitmap, then WORDS uint16_t counts. */
#define INDEX_BYTES (WORDS * sizeof(uint64_t) + WORDS * sizeof(uint16_t))

int cts_live_init(cts_live_table_t *t, size_t rec_size) {
  memset(t, 0, sizeof *t);
  if (rec_size < 8 || rec_size > 256 || rec_size % 8) return -EINVAL;
  t->rec_size = rec_size;
  cts_u64map_init(&t->chunks);
  return 0;
}

/* ---- the arena ------------------------------------------------------------------------------
 * A chunk thinned to sparse keeps its survivors' records in a new array, written at once
 * and often held to the end (a rate-1 trace of python3: ~570 chunks thinned at ~2048 live,
 * 28 MB). From malloc, each 4 KiB page of them cost a fault or a populate, and the
 * teardown's collections, one in a random old chunk each, missed the TLB on most. They are
 * cut instead from 2 MiB slabs, aligned and advised huge (MADV_HUGEPAGE: only advice, a
 * kernel without transparent huge pages gives 4 KiB pages as before): export -f pprof on
 * that trace took ~0.96 x the CPU. Blocks are cut one after another from the first slab;
 * a slab is unmapped once its last block is freed (the first one is rewound instead), and
 * a second or later slab is mapped only while the slabs hold at most 5/4 of the blocks in
 * use, else the block comes from malloc as before: a trace that frees the blocks around a
 * few survivors cannot pin slabs without bound. Blocks larger than an eighth of a slab
 * (records of more than 64 bytes) come from malloc too, so a slab is never left mostly
 * unused at its end; and so do all blocks until the table holds ARENA_FROM bytes: a huge
 * page is resident whole from its first byte. From 4 MiB, gen_trace's default shape at
 * 160 MB maps no slab (stats' peak RSS 8.8 MB as with malloc; 12.6 MB with slabs from
 * 1 MiB and two of them allowed whatever their use), and python3's pprof takes the same
 * CPU as from 1 MiB (15 interleaved pairs, 0.99-1.01). */
#define SLAB       ((size_t)2 << 20)
#define SLAB_HEAD  64u /* the slab's own header, a cache line */
#define SLAB_BLOCK 64u /* blocks start on a cache line */
#define ARENA_MAX  (SLAB / 8u)
#define ARENA_FROM ((size_t)4 << 20)

struct cts_live_slab {
  struct cts_live_slab *prev, *next;
  size_t used; /* bytes cut from the slab, its header included */
  size_t live; /* bytes of the blocks not yet freed */
};

static size_t block_size(size_t n) {
  return (n + SLAB_BLOCK - 1) & ~(size_t)(SLAB_BLOCK - 1);
}

/* A new slab, first in t's list; NULL if the kernel gives no memory. */
static struct cts_live_slab *slab_new(cts_live_table_t *t) {
  /* Twice the size, then the ends cut, for a slab aligned on its size: a huge page can
   * back only an aligned 2 MiB. */
  unsigned char *const r =
      mmap(NULL, 2 * SLAB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED) return NULL;
  unsigned char *const a = (unsigned char *)(((uintptr_t)r + SLAB - 1) & ~(uintptr_t)(SLAB - 1));
  if (a > r) munmap(r, (size_t)(a - r));
  if (a + SLAB < r + 2 * SLAB) munmap(a + SLAB, (size_t)(r + 2 * SLAB - (a + SLAB)));
#ifdef MADV_HUGEPAGE
  (void)madvise(a, SLAB, MADV_HUGEPAGE);
#endif
  struct cts_live_slab *s = (struct cts_live_slab *)(void *)a;
  *s = (struct cts_live_slab){.next = t->slabs, .used = SLAB_HEAD};
  if (t->slabs) t->slabs->prev = s;
  t->slabs = s;
  t->arena_bytes += SLAB;
  return s;
}

static void slab_drop(cts_live_table_t *t, struct cts_live_slab *s) {
  if (s->prev) s->prev->next = s->next;
  if (s->next) s->next->prev = s->prev;
  if (t->slabs == s) t->slabs = s->next;
  t->arena_bytes -= SLAB;
  munmap(s, SLAB);
}

/* A block of n bytes from the arena, or NULL (too large, the slabs held enough, or no
 * memory): the caller then takes it from malloc. */
static void *arena_alloc(cts_live_table_t *t, size_t n) {
  if (n > ARENA_MAX || (!t->slabs && t->bytes < ARENA_FROM)) return NULL;
  n = block_size(n);
  struct cts_live_slab *s = t->slabs;
  if (!s || SLAB - s->used < n) {
    if (t->slabs && t->arena_bytes * 4 > 5 * t->arena_live) return NULL;
    if (!(s = slab_new(t))) return NULL;
  }
  void *p = (unsigned char *)s + s->used;
  s->used += n;
  s->live += n;
  t->arena_live += n;
  return p;
}

/* Frees p, a block of n bytes (as asked) from arena_alloc. */
static void arena_free(cts_live_table_t *t, void *p, size_t n) {
  struct cts_live_slab *s = (struct cts_live_slab *)((uintptr_t)p & ~(uintptr_t)(SLAB - 1));
  n = block_size(n);
  s->live -= n;
  t->arena_live -= n;
  if (s->live) return;
  if (s == t->slabs)
    s->used = SLAB_HEAD; /* blocks are cut from it again */
  else
    slab_drop(t, s);
}

/* Frees c's sparse records, wherever they came from. */
static void sparse_recs_free(cts_live_table_t *t, cts_live_chunk_t *c) {
  if (c->arena)
    arena_free(t, c->recs, (size_t)c->cap * t->rec_size);
  else
    free(c->recs);
  c->recs = NULL;
  c->arena = false;
}

static size_t chunk_bytes(const cts_live_table_t *t, const cts_live_chunk_t *c) {
  if (c->dense) return sizeof *c + WORDS * 8u + CTS_LIVE_CHUNK * t->rec_size;
  return sizeof *c + c->cap * (sizeof(uint16_t) + t->rec_size) + (c->index ? INDEX_BYTES : 0);
}

/* A dense chunk's records, no longer used: kept as the spare if there is none, else freed.
 * On a trace whose blocks die after the window (a rate-1 trace of python3), every dense
 * chunk is thinned or freed once it leaves the window while a new one opens: the spare
 * saves malloc, free and the kernel's work on their pages each time (populate() on memory
 * malloc had kept resident walks its pages all the same). */
static void dense_recs_done(cts_live_table_t *t, unsigned char *recs) {
  if (t->spare_recs) {
    free(recs);
    return;
  }
  t->spare_recs = recs;
  t->bytes += CTS_LIVE_CHUNK * t->rec_size;
}

static void chunk_free(cts_live_table_t *t, cts_live_chunk_t *c) {
  t->bytes -= chunk_bytes(t, c);
  if (c->dense) {
    t->dense_chunks--;
    dense_recs_done(t, c->recs);
  } else {
    t->sparse_chunks--;
    sparse_recs_free(t, c);
  }
  free(c->present);
  free(c->offs);
  free(c->index);
  free(c);
}

void cts_live_fini(cts_live_table_t *t) {
  uint64_t key, val;
  for (size_t pos = 0; cts_u64map_next(&t->chunks, &pos, &key, &val);)
    chunk_free(t, (cts_live_chunk_t *)(uintptr_t)val);
  cts_u64map_fini(&t->chunks);
  free(t->spare_recs);
  while (t->slabs) slab_drop(t, t->slabs);
  memset(t, 0, sizeof *t);
}

static cts_live_chunk_t *chunk_of(cts_live_table_t *t, uint64_t number) {
  if (t->head && t->head->number == number) return t->head;
  if (t->last && t->last->number == number) return t->last;
  cts_live_chunk_t *w = t->window[number % CTS_LIVE_WINDOW];
  if (w && w->number == number) return w;
  const uint64_t *v = cts_u64map_find(&t->chunks, number);
  if (!v) return NULL;
  t->last = (cts_live_chunk_t *)(uintptr_t)*v;
  return t->last;
}

static void drop_chunk(cts_live_table_t *t, cts_live_chunk_t *c) {
  cts_u64map_remove(&t->chunks, c->number);
  if (t->last == c) t->last = NULL;
  if (t->head == c) t->head = NULL;
  if (t->drain == c) t->drain = NULL;
  for (unsigned i = 0; i < CTS_LIVE_WINDOW; i++)
    if (t->window[i] == c) t->window[i] = NULL;
  chunk_free(t, c);
}

/* Copies a record of the usual sizes with fixed-size moves the compiler inlines; a libc
 * call for a size known only at run time cost ~20 instructions a record, and a sparse
 * chunk's sweeps and thinning copy records by the thousand (a rate-1 trace of python3,
 * whose objects die long after the window: 11 % of stats). */
static inline void rec_copy(void *dst, const void *src, size_t size) {
  switch (size) {
    case 8:
      memcpy(dst, src, 8);
      break;
    case 16:
      memcpy(dst, src, 16);
      break;
    case 24:
      memcpy(dst, src, 24);
      break;
    case 32:
      memcpy(dst, src, 32);
      break;
    default:
      memcpy(dst, src, size);
  }
}

/* ---- the index of a sparse chunk ------------------------------------------------------------
 * A binary search of a sparse chunk's offsets took ~140 instructions a collection on a
 * rate-1 trace of python3, whose objects die long after the window (6 % of `top`): with a
 * bitmap of the offsets present and the count of entries below each of its words, an
 * entry's index is that count plus the bits below it in its word. At 640 bytes a chunk it
 * is kept only from CTS_LIVE_INDEX_MIN entries (at most 2.5 bytes an entry beside the 2
 * of its offset); a chunk below that searches its at most 9 levels. */

/* Bits set in x. Inline: the baseline x86-64 build has no popcnt instruction, and
 * __builtin_popcountll is a libgcc call there. */
static inline uint32_t bits_set(uint64_t x) {
  x = x - (x >> 1 & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + (x >> 2 & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (uint32_t)(x * 0x0101010101010101ull >> 56);
}

static inline uint16_t *index_counts(const cts_live_chunk_t *c) {
  return (uint16_t *)(c->index + WORDS);
}

/* Builds, updates or drops c's index, as its number of entries asks: an index kept has
 * its bitmap right (sparse_compact clears the bits of the entries it drops), and only its
 * counts are made again (rebuilding the bitmap from the offsets at every sweep cost ~65
 * instructions a collection on python3's trace). Without memory the chunk goes without
 * one: the binary search gives the same answers. */
static void index_rebuild(cts_live_table_t *t, cts_live_chunk_t *c) {
  if (c->n < CTS_LIVE_INDEX_MIN || !c->index) {
    t->bytes -= chunk_bytes(t, c);
    if (c->n < CTS_LIVE_INDEX_MIN) {
      free(c->index);
      c->index = NULL;
    } else if ((c->index = malloc(INDEX_BYTES)) != NULL) {
      memset(c->index, 0, WORDS * sizeof(uint64_t));
      for (uint32_t i = 0; i < c->n; i++) {
        const uint32_t off = c->offs[i] & MASK;
        c->index[off / 64u] |= 1ull << (off % 64u);
      }
    }
    t->bytes += chunk_bytes(t, c);
    if (!c->index) return;
  }
  uint16_t *counts = index_counts(c), below = 0;
  for (uint32_t w = 0; w < WORDS; w++) {
    counts[w] = below;
    below = (uint16_t)(below + bits_set(c->index[w]));
  }
}

/* off, new in c, has an entry now (the entries after it moved up by one). */
static void index_add(cts_live_chunk_t *c, uint32_t off) {
  c->index[off / 64u] |= 1ull << (off % 64u);
  uint16_t *counts = index_counts(c);
  for (uint32_t w = off / 64u + 1u; w < WORDS; w++) counts[w]++;
}

/* Index of the sparse entry with offset off (dead or not), or where it would go. Inline:
 * a teardown's collections (python3's) search an old chunk each. */
static CTS_FORCE_INLINE uint32_t sparse_search(const cts_live_chunk_t *c, uint32_t off,
                                               bool *found) {
  if (c->index) {
    const uint64_t word = c->index[off / 64u];
    *found = word >> (off % 64u) & 1u;
    return index_counts(c)[off / 64u] + bits_set(word & ((1ull << (off % 64u)) - 1u));
  }
  uint32_t lo = 0, hi = c->n;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if ((c->offs[mid] & MASK) < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = lo < c->n && (c->offs[lo] & MASK) == off;
  return lo;
}

/* c's sparse arrays replaced by offs and recs, of capacity cap (the old ones freed). */
static void sparse_adopt(cts_live_table_t *t, cts_live_chunk_t *c, uint16_t *offs,
                         unsigned char *recs, uint32_t cap) {
  free(c->offs);
  sparse_recs_free(t, c);
  t->bytes -= chunk_bytes(t, c);
  c->offs = offs;
  c->recs = recs;
  c->cap = cap;
  t->bytes += chunk_bytes(t, c);
}

/* Sets the sparse capacity to cap >= n. Returns false (nothing changed) without memory. */
static bool sparse_resize(cts_live_table_t *t, cts_live_chunk_t *c, uint32_t cap) {
  if (cap < 4) cap = 4;
  if (cap == c->cap) return true;
  uint16_t *offs = malloc(cap * sizeof *offs);
  unsigned char *recs = malloc(cap * t->rec_size);
  if (!offs || !recs) {
    free(offs);
    free(recs);
    return false;
  }
  if (c->n) {
    memcpy(offs, c->offs, c->n * sizeof *offs);
    memcpy(recs, c->recs, c->n * t->rec_size);
  }
  sparse_adopt(t, c, offs, recs, cap);
  return true;
}

/* Moves c's live entries, in order, to offs and recs (c's own arrays, or new ones): a run
 * of live entries with one call each. Clears the dead entries' bits in c's index (its
 * counts are then stale: index_rebuild). Returns how many. */
static uint32_t sparse_compact(const cts_live_table_t *t, cts_live_chunk_t *c, uint16_t *offs,
                               unsigned char *recs) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < c->n;) {
    if (c->offs[i] & DEAD) {
      const uint32_t off = c->offs[i] & MASK;
      if (c->index) c->index[off / 64u] &= ~(1ull << (off % 64u));
      i++;
      continue;
    }
    uint32_t j = i + 1;
    while (j < c->n && !(c->offs[j] & DEAD)) j++;
    if (offs != c->offs || k != i) {
      memmove(offs + k, c->offs + i, (j - i) * sizeof *offs);
      memmove(recs + (size_t)k * t->rec_size, c->recs + (size_t)i * t->rec_size,
              (size_t)(j - i) * t->rec_size);
    }
    k += j - i;
    i = j;
  }
  return k;
}

/* Drops the tombstones and the spare capacity. A chunk is swept when a fifth of it is dead,
 * so a removal costs ~4 records moved (at an eighth, ~7: 4.4 % more of python3's top; at a
 * quarter, survivors half collected cost more than 32 bytes each). They go straight to
 * arrays of the new size (they were moved in place one call each, then copied again to
 * shrink the arrays: on a rate-1 trace of python3, whose objects die long after the window,
 * most of a collection's cost). Fresh arrays rather than realloc: shrinking in place left
 * glibc's heap fragmented (stats' peak RSS on gen_trace's default shape 8.9 -> 11.5 MiB). */
static void sparse_sweep(cts_live_table_t *t, cts_live_chunk_t *c) {
  t->sweeps++;
  const uint32_t cap = c->live < 4 ? 4 : c->live;
  uint16_t *offs = cap == c->cap ? NULL : malloc(cap * sizeof *offs);
  unsigned char *recs = offs ? malloc(cap * t->rec_size) : NULL;
  if (!recs) {
    /* Same capacity, or no memory: in place, the chunk keeps its capacity. */
    free(offs);
    c->n = sparse_compact(t, c, c->offs, c->recs);
  } else {
    c->n = sparse_compact(t, c, offs, recs);
    sparse_adopt(t, c, offs, recs, cap);
  }
  index_rebuild(t, c);
}

/* Asks the kernel for the pages of a new dense chunk's records at once: the ids to come
 * fill them in order anyway, and one call costs less than a page fault per 4 KiB (on the
 * survivors shape, 240 MB of records: stats' system time 0.22 -> 0.17 s). Only advice:
 * pages malloc reused are already there, and a kernel without it (before 5.14) says no. */
static void populate(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = 4096u, a = ((uintptr_t)p + page - 1) & ~(page - 1);
  const uintptr_t e = ((uintptr_t)p + n) & ~(page - 1);
  if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)n;
#endif
}

/* A dense chunk too empty to stay so becomes sparse (or is freed). Without memory it stays
 * dense: the table is still right, only larger. */
static void maybe_thin(cts_live_table_t *t, cts_live_chunk_t *c) {
  if (c->live == 0) {
    drop_chunk(t, c);
    return;
  }
  if (c->live >= DENSE_MIN) return;
  const size_t n = (size_t)c->live * t->rec_size;
  uint16_t *offs = malloc(c->live * sizeof *offs);
  unsigned char *recs = offs ? arena_alloc(t, n) : NULL;
  const bool arena = recs != NULL;
  if (!recs) recs = malloc(n);
  if (!offs || !recs) {
    free(offs);
    free(recs);
    return;
  }
  /* The copy below writes every page of recs, fresh ones mostly (the survivors' copies are
   * held to the end): one call rather than a fault a page (on python3's trace, pprof's page
   * faults 6922 -> 2386 with malloc's memory; in a slab on huge pages, a call a slab). */
  populate(recs, n);
  uint32_t k = 0;
  for (uint32_t w = 0; w < WORDS; w++) {
    for (uint64_t bits = c->present[w]; bits; bits &= bits - 1) {
      const uint32_t off = w * 64u + (uint32_t)__builtin_ctzll(bits);
      offs[k] = (uint16_t)off;
      rec_copy(recs + (size_t)k * t->rec_size, c->recs + (size_t)off * t->rec_size, t->rec_size);
      k++;
    }
  }
  t->bytes -= chunk_bytes(t, c);
  dense_recs_done(t, c->recs);
  /* The presence bitmap is the index's bitmap as it is (an entry per live offset): kept,
   * grown by the counts, rather than built again from the offsets. */
  uint64_t *index = k >= CTS_LIVE_INDEX_MIN ? realloc(c->present, INDEX_BYTES) : NULL;
  if (!index) free(c->present);
  c->present = NULL;
  c->index = index;
  c->dense = false;
  c->offs = offs;
  c->recs = recs;
  c->arena = arena;
  c->n = c->cap = k;
  t->bytes += chunk_bytes(t, c);
  t->dense_chunks--;
  t->sparse_chunks++;
  index_rebuild(t, c);
}

static cts_live_chunk_t *new_chunk(cts_live_table_t *t, uint64_t number, bool dense) {
  cts_live_chunk_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->number = number;
  c->dense = dense;
  if (dense) {
    c->present = calloc(WORDS, sizeof *c->present);
    if (!c->present) goto nomem;
    if (t->spare_recs) {
      /* Its pages are there (it was written): nothing to populate. */
      c->recs = t->spare_recs;
      t->spare_recs = NULL;
      t->bytes -= CTS_LIVE_CHUNK * t->rec_size;
    } else {
      c->recs = malloc(CTS_LIVE_CHUNK * t->rec_size);
      if (!c->recs) goto nomem;
      populate(c->recs, CTS_LIVE_CHUNK * t->rec_size);
    }
  }
  bool added;
  uint64_t *v = cts_u64map_insert(&t->chunks, number, (uintptr_t)c, &added);
  if (!v) goto nomem;
  t->bytes += chunk_bytes(t, c);
  if (dense)
    t->dense_chunks++;
  else
    t->sparse_chunks++;
  return c;
nomem:
  free(c->present);
  free(c->recs);
  free(c);
  return NULL;
}

/* The chunk for a new id above every other: it becomes the head, and the window's chunks
 * that fall out of the window are thinned. */
static cts_live_chunk_t *new_head(cts_live_table_t *t, uint64_t number) {
  cts_live_chunk_t *c = new_chunk(t, number, true);
  if (!c) return NULL;
  for (unsigned i = 0; i < CTS_LIVE_WINDOW; i++) {
    cts_live_chunk_t *old = t->window[i];
    if (old && old->number + CTS_LIVE_WINDOW <= number) {
      t->window[i] = NULL;
      maybe_thin(t, old);
    }
  }
  t->window[number % CTS_LIVE_WINDOW] = c;
  t->head = c;
  return c;
}

static bool in_window(const cts_live_table_t *t, const cts_live_chunk_t *c) {
  return t->window[c->number % CTS_LIVE_WINDOW] == c;
}

void *cts_live_find_slow(cts_live_table_t *t, uint64_t id) {
  cts_live_chunk_t *c = chunk_of(t, id >> CTS_LIVE_CHUNK_BITS);
  if (!c) return NULL;
  const uint32_t off = (uint32_t)id & MASK;
  if (c->dense)
    return c->present[off / 64u] >> (off % 64u) & 1u ? c->recs + (size_t)off * t->rec_size : NULL;
  bool found;
  const uint32_t i = sparse_search(c, off, &found);
  return found && !(c->offs[i] & DEAD) ? c->recs + (size_t)i * t->rec_size : NULL;
}

void *cts_live_insert_slow(cts_live_table_t *t, uint64_t id, bool *added) {
  const uint64_t number = id >> CTS_LIVE_CHUNK_BITS;
  const uint32_t off = (uint32_t)id & MASK;
  *added = false;
  cts_live_chunk_t *c = chunk_of(t, number);
  if (c && c == t->drain) {
    /* An insert moves the entries after it and may grow the arrays: not past tombstones
     * (only corrupt or hostile traces insert below the window). */
    t->drain = NULL;
    if ((c->n - c->live) * 5u > c->n) sparse_sweep(t, c);
  }
  if (!c) {
    /* Only an id above every other opens a dense chunk: a hostile order of ids cannot make
     * the table hold more dense chunks than the window. */
    c = !t->head || number > t->head->number ? new_head(t, number) : new_chunk(t, number, false);
    if (!c) return NULL;
  }
  unsigned char *rec;
  if (c->dense) {
    uint64_t *w = &c->present[off / 64u];
    const uint64_t bit = 1ull << (off % 64u);
    rec = c->recs + (size_t)off * t->rec_size;
    if (*w & bit) return rec;
    *w |= bit;
  } else {
    bool found;
    uint32_t i = sparse_search(c, off, &found);
    if (found && !(c->offs[i] & DEAD)) return c->recs + (size_t)i * t->rec_size;
    if (found) {
      c->offs[i] = (uint16_t)off; /* revives a tombstone */
    } else {
      /* Growing by an eighth keeps the spare capacity small; an insert here already moves
       * the entries after it, so the copies do not change the cost. */
      if (c->n == c->cap && !sparse_resize(t, c, c->cap + c->cap / 8u + 4u)) {
        if (c->live == 0) drop_chunk(t, c);
        return NULL;
      }
      memmove(c->offs + i + 1, c->offs + i, (c->n - i) * sizeof *c->offs);
      memmove(c->recs + (size_t)(i + 1) * t->rec_size, c->recs + (size_t)i * t->rec_size,
              (c->n - i) * t->rec_size);
      c->offs[i] = (uint16_t)off;
      c->n++;
      if (c->index)
        index_add(c, off);
      else if (c->n == CTS_LIVE_INDEX_MIN)
        index_rebuild(t, c);
    }
    rec = c->recs + (size_t)i * t->rec_size;
  }
  cts_live_rec_zero(rec, t->rec_size);
  c->live++;
  t->count++;
  *added = true;
  return rec;
}

bool cts_live_take_slow(cts_live_table_t *t, uint64_t id, void *out) {
  /* A teardown takes its ids from one old chunk after another: t->last first, without the
   * call (the head and the window, the inline path's, are not it). */
  const uint64_t number = id >> CTS_LIVE_CHUNK_BITS;
  cts_live_chunk_t *c = t->last && t->last->number == number ? t->last : chunk_of(t, number);
  if (!c) return false;
  const uint32_t off = (uint32_t)id & MASK;
  if (c->dense) {
    if (!cts_live_take_dense(t, c, id, out)) return false;
    if (!in_window(t, c)) maybe_thin(t, c);
    return true;
  }
  bool found;
  const uint32_t i = sparse_search(c, off, &found);
  if (!found || (c->offs[i] & DEAD)) return false;
  rec_copy(out, c->recs + (size_t)i * t->rec_size, t->rec_size);
  c->offs[i] |= DEAD;
  c->live--;
  t->count--;
  if (c->live == 0) {
    drop_chunk(t, c);
  } else if (c != t->drain && (c->n - c->live) * 5u > c->n) {
    /* c becomes the drain; the one before (past its fifth too) is swept now. */
    cts_live_chunk_t *old = t->drain;
    t->drain = c;
    if (old) sparse_sweep(t, old);
  }
  return true;
}

bool cts_live_next(const cts_live_table_t *t, cts_live_cursor_t *cur, uint64_t *id, void **rec) {
  for (;;) {
    cts_live_chunk_t *c = cur->chunk;
    if (c && c->dense) {
      /* The next live offset, a word of the bitmap at a time (a bit at a time, this loop
       * was a third of the report's own cost of iterating 10 M survivors). */
      for (uint32_t i = cur->i; i < CTS_LIVE_CHUNK; i = (i / 64u + 1u) * 64u) {
        const uint64_t w = c->present[i / 64u] >> (i % 64u);
        if (!w) continue;
        i += (uint32_t)__builtin_ctzll(w);
        cur->i = i + 1;
        *id = c->number << CTS_LIVE_CHUNK_BITS | i;
        *rec = c->recs + (size_t)i * t->rec_size;
        return true;
      }
    } else if (c) {
      for (; cur->i < c->n; cur->i++) {
        const uint32_t i = cur->i;
        if (c->offs[i] & DEAD) continue;
        cur->i++;
        *id = c->number << CTS_LIVE_CHUNK_BITS | c->offs[i];
        *rec = c->recs + (size_t)i * t->rec_size;
        return true;
      }
    }
    uint64_t key, val;
    if (!cts_u64map_next(&t->chunks, &cur->map_pos, &key, &val)) return false;
    cur->chunk = (cts_live_chunk_t *)(uintptr_t)val;
    cur->i = 0;
  }
}
