/* SPDX-License-Identifier: MIT */
/* The table of live blocks (src/analysis/live_table.h) against a plain hash map, under the
 * id patterns of sound traces (dense, most blocks surviving or most dying young) and of
 * hostile ones (sparse, huge gaps, decreasing, duplicates), with its memory bound checked
 * after every step. */
#include "../../src/analysis/live_table.h"

#include <errno.h>
#include <sys/mman.h>

#include "../test.h"

#define REC 24u

typedef struct rec {
  uint64_t id, check, pad;
} rec_t;

static uint64_t rng_state = 42;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Memory the table may hold for n live ids: the window's dense chunks and the spare records
 * of one more, the drain's tombstones (a whole chunk's entries and its index at most), and
 * per live id its record and offset at 7/8 density with 1/8 spare capacity, plus a header
 * and a few spare entries per chunk. */
static size_t bound(uint64_t n, uint64_t chunks) {
  const size_t dense = 64u + CTS_LIVE_CHUNK / 8u + CTS_LIVE_CHUNK * (size_t)REC;
  const size_t drain = CTS_LIVE_CHUNK * (REC + 2u) + 640u;
  return (CTS_LIVE_WINDOW + 1u) * dense + drain + (size_t)n * (REC + 2u) * 9u / 7u + 64u +
         (size_t)chunks * (64u + 4u * (REC + 2u));
}

typedef struct model {
  cts_live_table_t t;
  cts_u64map_t ref; /* id + 1 -> check value */
  bool has_max;     /* UINT64_MAX is live (ref cannot key it) */
  uint64_t max_check;
} model_t;

static bool ref_find(model_t *m, uint64_t id, uint64_t *check) {
  if (id == UINT64_MAX) {
    *check = m->max_check;
    return m->has_max;
  }
  const uint64_t *v = cts_u64map_find(&m->ref, id + 1);
  if (v) *check = *v;
  return v != NULL;
}

/* One insert on both; returns false on a mismatch. */
static bool do_insert(model_t *m, uint64_t id) {
  uint64_t want = 0;
  const bool had = ref_find(m, id, &want);
  bool added;
  rec_t *r = cts_live_insert(&m->t, id, &added);
  if (!r || added == had) return false;
  if (had) return r->id == id && r->check == want;
  if (r->id || r->check || r->pad) return false; /* zeroed */
  r->id = id;
  r->check = rnd();
  if (id == UINT64_MAX) {
    m->has_max = true;
    m->max_check = r->check;
  } else {
    bool a;
    cts_u64map_insert(&m->ref, id + 1, r->check, &a);
  }
  return true;
}

static bool do_take(model_t *m, uint64_t id) {
  uint64_t want = 0;
  const bool had = ref_find(m, id, &want);
  rec_t out;
  const bool took = cts_live_take(&m->t, id, &out);
  if (took != had) return false;
  if (!took) return true;
  if (id == UINT64_MAX)
    m->has_max = false;
  else
    cts_u64map_remove(&m->ref, id + 1);
  return out.id == id && out.check == want && !cts_live_find(&m->t, id);
}

static uint64_t ref_count(const model_t *m) {
  return m->ref.count + m->ref.has_zero + m->has_max;
}

/* Every live id is found with its record, iteration yields each once, and memory holds. */
static bool consistent(model_t *m) {
  if (m->t.count != ref_count(m)) return false;
  if (m->t.bytes > bound(m->t.count, m->t.sparse_chunks)) return false;
  uint64_t seen = 0, id;
  void *p;
  for (cts_live_cursor_t c = {0}; cts_live_next(&m->t, &c, &id, &p);) {
    const rec_t *r = p;
    uint64_t want = 0;
    if (r->id != id || !ref_find(m, id, &want) || want != r->check) return false;
    if (cts_live_find(&m->t, id) != p) return false;
    seen++;
  }
  return seen == m->t.count;
}

static void model_init(model_t *m) {
  CTS_ASSERT_EQ_INT(cts_live_init(&m->t, REC), 0);
  cts_u64map_init(&m->ref);
  m->has_max = false;
}

static void model_fini(model_t *m) {
  cts_live_fini(&m->t);
  cts_u64map_fini(&m->ref);
}

CTS_TEST(rejects_bad_record_sizes) {
  cts_live_table_t t;
  CTS_ASSERT_EQ_INT(cts_live_init(&t, 0), -EINVAL);
  CTS_ASSERT_EQ_INT(cts_live_init(&t, 12), -EINVAL);
  CTS_ASSERT_EQ_INT(cts_live_init(&t, 264), -EINVAL);
  CTS_ASSERT_EQ_INT(cts_live_init(&t, 8), 0);
  cts_live_fini(&t);
}

/* Every record size, through the inline paths (the head chunk, a chunk of the window) and
 * the general ones (an older chunk): a record is zeroed when added, and a take copies all
 * of it and nothing beyond it. */
CTS_TEST(every_record_size_zeroed_and_copied_whole) {
  for (size_t size = 8; size <= 256; size += 8) {
    cts_live_table_t t;
    CTS_ASSERT_EQ_INT(cts_live_init(&t, size), 0);
    const uint64_t ids[] = {5, CTS_LIVE_CHUNK + 7, (CTS_LIVE_WINDOW + 2) * CTS_LIVE_CHUNK + 1};
    unsigned char out[264];
    for (int round = 0; round < 2; round++) {
      for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        bool added;
        unsigned char *r = cts_live_insert(&t, ids[k], &added);
        CTS_ASSERT(r && added);
        for (size_t i = 0; i < size; i++) CTS_ASSERT_EQ_INT(r[i], 0);
        memset(r, (int)(k + 1), size);
      }
      for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        const unsigned char *r = cts_live_find(&t, ids[k]);
        CTS_ASSERT(r && r[0] == k + 1 && r[size - 1] == k + 1);
        memset(out, 0xEE, sizeof out);
        CTS_ASSERT(cts_live_take(&t, ids[k], out));
        for (size_t i = 0; i < size; i++) CTS_ASSERT_EQ_INT(out[i], (int)(k + 1));
        CTS_ASSERT_EQ_INT(out[size], 0xEE);
        CTS_ASSERT(!cts_live_find(&t, ids[k]));
        CTS_ASSERT(!cts_live_take(&t, ids[k], out));
      }
      CTS_ASSERT_EQ_U64(t.count, 0);
    }
    cts_live_fini(&t);
  }
}

/* cts_live_insert_unset: the same table as cts_live_insert, only a record added is left
 * for the caller to write (an id present gives its record back, untouched). */
CTS_TEST(insert_unset_keeps_what_the_caller_writes) {
  cts_live_table_t t;
  CTS_ASSERT_EQ_INT(cts_live_init(&t, REC), 0);
  for (uint64_t id = 0; id < 3 * CTS_LIVE_CHUNK; id++) {
    bool added;
    rec_t *r = cts_live_insert_unset(&t, id, &added);
    CTS_ASSERT(r && added);
    *r = (rec_t){.id = id, .check = ~id, .pad = 7};
    CTS_ASSERT(cts_live_insert_unset(&t, id, &added) == r && !added && r->check == ~id);
  }
  CTS_ASSERT_EQ_U64(t.count, 3 * CTS_LIVE_CHUNK);
  for (uint64_t id = 0; id < 3 * CTS_LIVE_CHUNK; id += 5) {
    rec_t out;
    CTS_ASSERT(cts_live_take(&t, id, &out));
    CTS_ASSERT(out.id == id && out.check == ~id && out.pad == 7);
  }
  cts_live_fini(&t);
}

/* A new dense chunk's pages are asked for at once (MADV_POPULATE_WRITE), not faulted in
 * one by one as its records are written: right after the chunk's first record, every page
 * of its records is resident (mincore), not only the first. */
CTS_TEST(dense_chunks_are_populated_at_once) {
#ifdef MADV_POPULATE_WRITE
  void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CTS_ASSERT(probe != MAP_FAILED);
  const bool have = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(probe, 4096);
  if (!have) CTS_SKIP("the kernel has no MADV_POPULATE_WRITE");
  cts_live_table_t t;
  CTS_ASSERT_EQ_INT(cts_live_init(&t, 24), 0);
  bool added;
  /* A fresh chunk far above anything malloc handed out before (its pages untouched). */
  CTS_ASSERT(cts_live_insert(&t, 1000u * CTS_LIVE_CHUNK, &added) != NULL);
  const uintptr_t page = 4096u, recs = (uintptr_t)t.head->recs;
  const uintptr_t a = (recs + page - 1) & ~(page - 1);
  const uintptr_t e = (recs + CTS_LIVE_CHUNK * 24u) & ~(page - 1);
  unsigned char vec[64];
  const size_t pages = (e - a) / page;
  CTS_ASSERT(pages > 16 && pages <= sizeof vec);
  CTS_ASSERT_EQ_INT(mincore((void *)a, e - a, vec), 0);
  size_t resident = 0;
  for (size_t i = 0; i < pages; i++) resident += vec[i] & 1u;
  CTS_ASSERT_EQ_U64(resident, pages);
  cts_live_fini(&t);
#else
  CTS_SKIP("built without MADV_POPULATE_WRITE");
#endif
}

/* Increasing ids, a fraction dying a few allocations later: the shapes of sound traces. */
static void run_sequential(unsigned survive_per_mille, uint64_t n) {
  model_t m;
  model_init(&m);
  uint64_t pending[64] = {0};
  unsigned npending = 0;
  for (uint64_t id = 0; id < n; id++) {
    CTS_ASSERT(do_insert(&m, id));
    if (rnd() % 1000 >= survive_per_mille) {
      if (npending == 64) {
        const unsigned k = (unsigned)(rnd() % 64);
        CTS_ASSERT(do_take(&m, pending[k]));
        pending[k] = pending[--npending];
      }
      pending[npending++] = id;
    }
    if (id % 9973 == 0) CTS_ASSERT(consistent(&m));
  }
  /* Late collections of old survivors, in a scattered order. */
  for (uint64_t k = 0; k < n / 3; k++) CTS_ASSERT(do_take(&m, rnd() % n));
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

CTS_TEST(dense_survivors) {
  run_sequential(900, 300000);
}

CTS_TEST(dense_dying_young) {
  run_sequential(10, 300000);
}

CTS_TEST(survivors_cost_at_most_32_bytes_each) {
  model_t m;
  model_init(&m);
  for (uint64_t id = 0; id < 1000000; id++) CTS_ASSERT(do_insert(&m, id));
  /* Half of the old ones collected: their chunks turn sparse. */
  for (uint64_t id = 0; id < 900000; id += 2) CTS_ASSERT(do_take(&m, id));
  CTS_ASSERT(consistent(&m));
  CTS_ASSERT_MSG(m.t.bytes <= m.t.count * 32u, "%zu bytes for %" PRIu64 " live", m.t.bytes,
                 m.t.count);
  model_fini(&m);
}

/* Sparse chunks emptied in random order: each is swept (tombstones dropped, runs of live
 * records moved, the arrays shrunk) many times, and every record stays whole. */
CTS_TEST(sparse_chunks_swept_keep_every_record) {
  model_t m;
  model_init(&m);
  const uint64_t n = (CTS_LIVE_WINDOW + 4) * (uint64_t)CTS_LIVE_CHUNK;
  for (uint64_t id = 0; id < n; id++) CTS_ASSERT(do_insert(&m, id));
  /* A third of the first 4 chunks dies first: they leave the window's density, turn sparse. */
  const uint64_t old = 4 * (uint64_t)CTS_LIVE_CHUNK;
  for (uint64_t id = 0; id < old; id += 3) CTS_ASSERT(do_take(&m, id));
  CTS_ASSERT(m.t.sparse_chunks > 0);
  for (uint64_t k = 0; k < 3 * old; k++) {
    CTS_ASSERT(do_take(&m, rnd() % old));
    if (k % 997 == 0) CTS_ASSERT(consistent(&m));
  }
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

/* m with `old` sparse chunks below a full window: every id inserted, then every other id of
 * the old chunks taken (2048 live each). */
static void model_with_sparse(model_t *m, uint64_t old_chunks) {
  model_init(m);
  const uint64_t old = old_chunks * CTS_LIVE_CHUNK;
  for (uint64_t id = 0; id < old + CTS_LIVE_WINDOW * (uint64_t)CTS_LIVE_CHUNK; id++)
    CTS_ASSERT(do_insert(m, id));
  for (uint64_t id = 1; id < old; id += 2) CTS_ASSERT(do_take(m, id));
  CTS_ASSERT_EQ_U64(m->t.sparse_chunks, old_chunks);
}

/* A teardown at the end of a rate-1 trace: old chunks, thinned to sparse, are emptied one
 * after another (in increasing and in decreasing order, ids in either order within a
 * chunk). Each is the drain while it empties: freed at its last id with no sweep, where
 * each used to be swept ~28 times (4 records moved a removal). Memory stays bounded, and
 * every record is right, after every step. */
CTS_TEST(chunks_emptied_one_by_one_are_never_swept) {
  model_t m;
  model_with_sparse(&m, 8);
  const uint64_t sweeps = m.t.sweeps;
  for (uint64_t k = 0; k < 8; k++) {
    const uint64_t chunk = k < 4 ? k : 11 - k; /* 0 1 2 3, then 7 6 5 4 */
    const uint64_t base = chunk * CTS_LIVE_CHUNK;
    for (uint64_t i = 0; i < CTS_LIVE_CHUNK; i += 2) {
      const uint64_t off = k % 2 ? CTS_LIVE_CHUNK - 2 - i : i;
      CTS_ASSERT(do_take(&m, base + off));
      if (i % 250 == 0) CTS_ASSERT(consistent(&m));
    }
    CTS_ASSERT_EQ_U64(m.t.sparse_chunks, 7 - k);
  }
  /* One sweep: the drain the thinning left (chunk 7), when chunk 0 took its place. */
  CTS_ASSERT_EQ_U64(m.t.sweeps, sweeps + 1);
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

/* Removals that alternate between two sparse chunks: each passes its fifth in turn and the
 * drain moves from one to the other, sweeping the one it leaves. Both stay within the
 * memory bound and keep every record. */
CTS_TEST(drain_moves_and_sweeps_the_one_it_leaves) {
  model_t m;
  model_with_sparse(&m, 2);
  const uint64_t sweeps = m.t.sweeps;
  for (uint64_t i = 0; i < CTS_LIVE_CHUNK - 2; i += 2) {
    CTS_ASSERT(do_take(&m, i));
    CTS_ASSERT(do_take(&m, CTS_LIVE_CHUNK + i));
    if (i % 100 == 0) CTS_ASSERT(consistent(&m));
  }
  CTS_ASSERT(m.t.sweeps > sweeps);
  CTS_ASSERT_EQ_U64(m.t.count, 2 + CTS_LIVE_WINDOW * (uint64_t)CTS_LIVE_CHUNK);
  CTS_ASSERT(consistent(&m));
  /* An insert into the drain sweeps it first: the entries it moves are live ones. */
  CTS_ASSERT(do_insert(&m, 1));
  CTS_ASSERT(do_insert(&m, CTS_LIVE_CHUNK + 1));
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

/* Whether a chunk of t below the window is sparse with an index (the drain aside: its
 * entries, tombstones included, wait for its next sweep). */
static bool has_indexed_chunk(const cts_live_table_t *t) {
  uint64_t key, val;
  for (size_t pos = 0; cts_u64map_next(&t->chunks, &pos, &key, &val);) {
    const cts_live_chunk_t *c = (const cts_live_chunk_t *)(uintptr_t)val;
    if (!c->dense && c->index && c != t->drain) return true;
  }
  return false;
}

/* Sparse chunks large enough for an index (a bitmap of offsets and counts below each
 * word): found, taken, revived and inserted into (the counts after the new entry move up)
 * in random order, each agreeing with the reference, until they fall below the index's
 * threshold and search without it. */
CTS_TEST(sparse_index_finds_takes_and_inserts) {
  model_t m;
  model_init(&m);
  const uint64_t old = 4 * (uint64_t)CTS_LIVE_CHUNK, n = old + CTS_LIVE_WINDOW * CTS_LIVE_CHUNK;
  for (uint64_t id = 0; id < n; id++) CTS_ASSERT(do_insert(&m, id));
  /* Half of the old chunks die: 2048 entries each, indexed. */
  for (uint64_t id = 1; id < old; id += 2) CTS_ASSERT(do_take(&m, id));
  CTS_ASSERT(m.t.sparse_chunks == 4);
  CTS_ASSERT(has_indexed_chunk(&m.t));
  for (uint64_t k = 0; k < 4 * old; k++) {
    const uint64_t id = rnd() % old;
    if (rnd() % 3)
      CTS_ASSERT(do_take(&m, id));
    else
      CTS_ASSERT(do_insert(&m, id));
    uint64_t want;
    void *r = cts_live_find(&m.t, id);
    CTS_ASSERT((r != NULL) == ref_find(&m, id, &want));
    if (r) CTS_ASSERT(((rec_t *)r)->id == id && ((rec_t *)r)->check == want);
    if (k % 4999 == 0) CTS_ASSERT(consistent(&m));
  }
  CTS_ASSERT(consistent(&m));
  /* Down to a few entries a chunk: no index left, the same answers. */
  for (uint64_t id = 0; id < old; id++)
    if (id % 64) CTS_ASSERT(do_take(&m, id));
  CTS_ASSERT(!has_indexed_chunk(&m.t));
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

CTS_TEST(sparse_and_huge_gaps) {
  model_t m;
  model_init(&m);
  uint64_t id = 0;
  for (int i = 0; i < 20000; i++) {
    const uint64_t gap = i % 3 == 0 ? 1 : i % 3 == 1 ? 5000 + rnd() % 100000 : rnd() >> 20;
    id += gap;
    CTS_ASSERT(do_insert(&m, id));
    if (i % 1000 == 0) CTS_ASSERT(consistent(&m));
  }
  CTS_ASSERT(do_insert(&m, UINT64_MAX));
  CTS_ASSERT(do_insert(&m, 0));
  CTS_ASSERT(consistent(&m));
  CTS_ASSERT(do_take(&m, UINT64_MAX));
  CTS_ASSERT(do_take(&m, 0));
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

CTS_TEST(hostile_orders_and_duplicates) {
  model_t m;
  model_init(&m);
  for (int i = 0; i < 200000; i++) {
    const uint64_t r = rnd();
    /* Ids from a few small ranges, in any order: decreasing, repeated, taken twice. */
    const uint64_t id = (r >> 62) * 0x10000000ull + (r & 0xffff);
    if (r >> 20 & 1)
      CTS_ASSERT(do_insert(&m, id));
    else
      CTS_ASSERT(do_take(&m, id));
    if (i % 5000 == 0) CTS_ASSERT(consistent(&m));
  }
  /* Decreasing ids. */
  for (uint64_t id = 3000000; id > 2000000; id -= 7) CTS_ASSERT(do_insert(&m, id));
  CTS_ASSERT(consistent(&m));
  for (uint64_t id = 2000000; id < 3000000; id++) CTS_ASSERT(do_take(&m, id));
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

CTS_TEST(empty_chunks_are_freed) {
  model_t m;
  model_init(&m);
  for (uint64_t id = 0; id < 100 * CTS_LIVE_CHUNK; id++) {
    CTS_ASSERT(do_insert(&m, id));
    CTS_ASSERT(do_take(&m, id));
  }
  CTS_ASSERT_EQ_U64(m.t.count, 0);
  CTS_ASSERT(m.t.dense_chunks <= CTS_LIVE_WINDOW);
  CTS_ASSERT_EQ_U64(m.t.sparse_chunks, 0);
  model_fini(&m);
}

/* A dense chunk thinned or freed as it leaves the window leaves its records as the spare,
 * and the next dense chunk takes them (no malloc, no populate); fini frees the spare. */
CTS_TEST(dense_records_reused) {
  model_t m;
  model_init(&m);
  for (uint64_t id = 0; id < (CTS_LIVE_WINDOW + 1u) * CTS_LIVE_CHUNK; id++) {
    CTS_ASSERT(do_insert(&m, id));
    if (id % 2) CTS_ASSERT(do_take(&m, id)); /* half dies: thinned once out of the window */
  }
  CTS_ASSERT_EQ_U64(m.t.sparse_chunks, 1);
  unsigned char *const spare = m.t.spare_recs;
  CTS_ASSERT(spare != NULL);
  CTS_ASSERT(do_insert(&m, (CTS_LIVE_WINDOW + 1u) * CTS_LIVE_CHUNK)); /* a new head */
  CTS_ASSERT(m.t.head->recs == spare);
  /* The second chunk was thinned as the window moved: its records are the spare now. */
  CTS_ASSERT(m.t.spare_recs != NULL && m.t.spare_recs != spare);
  CTS_ASSERT_EQ_U64(m.t.sparse_chunks, 2);
  CTS_ASSERT(consistent(&m));
  model_fini(&m);
}

/* Iteration over a dense chunk skips a word of absent offsets at a time: every live offset
 * comes once, in increasing order (the report finishes live blocks in this order, and its
 * output depends on it), at word boundaries and at both ends of the chunk too. */
CTS_TEST(dense_iteration_in_offset_order) {
  static const uint32_t offs[] = {0,   1,   62,   63,   64,   65,   127,
                                  128, 700, 2047, 2048, 4031, 4094, 4095};
  const size_t n = sizeof offs / sizeof *offs;
  cts_live_table_t t;
  CTS_ASSERT_EQ_INT(cts_live_init(&t, 8), 0);
  bool added;
  for (size_t i = n; i-- > 0;) {
    uint64_t *r = cts_live_insert(&t, 5u * CTS_LIVE_CHUNK + offs[i], &added);
    CTS_ASSERT(r && added);
    *r = offs[i];
  }
  CTS_ASSERT(t.head && t.head->dense);
  size_t k = 0;
  uint64_t id;
  void *rec;
  for (cts_live_cursor_t c = {0}; cts_live_next(&t, &c, &id, &rec); k++) {
    CTS_ASSERT(k < n);
    CTS_ASSERT_EQ_U64(id, 5u * CTS_LIVE_CHUNK + offs[k]);
    CTS_ASSERT_EQ_U64(*(const uint64_t *)rec, offs[k]);
  }
  CTS_ASSERT_EQ_U64(k, n);
  cts_live_fini(&t);
}

/* Inserts chunks [from, to) whole, taking every odd id at once: each chunk leaves the window
 * with half of its ids live and is thinned to sparse then (2048 records, 48 KiB). */
static void thin_chunks(model_t *m, uint64_t from, uint64_t to) {
  for (uint64_t id = from * CTS_LIVE_CHUNK; id < to * CTS_LIVE_CHUNK; id++) {
    CTS_ASSERT(do_insert(m, id));
    if (id % 2) CTS_ASSERT(do_take(m, id));
  }
}

/* Takes every live id of chunks [from, to). */
static void empty_chunks(model_t *m, uint64_t from, uint64_t to) {
  for (uint64_t id = from * CTS_LIVE_CHUNK; id < to * CTS_LIVE_CHUNK; id += 2)
    CTS_ASSERT(do_take(m, id));
}

#define SLAB ((size_t)2 << 20)

/* Once the table holds 4 MiB, thinned chunks keep their records in the arena's slabs (2 MiB,
 * aligned for a huge page); every record stays whole through sweeps and takes, and a slab
 * whose blocks are all freed is unmapped (the one blocks are cut from is kept). */
CTS_TEST(thinned_records_in_slabs) {
  model_t m;
  model_init(&m);
  thin_chunks(&m, 0, 300);
  CTS_ASSERT(consistent(&m));
  CTS_ASSERT(m.t.slabs != NULL);
  CTS_ASSERT_EQ_U64((uintptr_t)m.t.slabs % SLAB, 0);
  /* All but the first ~80 thinned chunks (the table's first 4 MiB) and the window. */
  CTS_ASSERT_MSG(m.t.arena_live >= 180u * 2048u * REC, "%zu bytes in slabs", m.t.arena_live);
  CTS_ASSERT(m.t.arena_bytes * 4 <= 5 * m.t.arena_live + 4 * SLAB);
  empty_chunks(&m, 0, 296);
  CTS_ASSERT(consistent(&m));
  CTS_ASSERT_EQ_U64(m.t.arena_live, 0);
  CTS_ASSERT_EQ_U64(m.t.arena_bytes, SLAB);
  model_fini(&m);
  CTS_ASSERT(m.t.slabs == NULL && m.t.arena_bytes == 0);
}

/* Survivors scattered over the slabs pin them (a slab goes only with its last block); no
 * slab is mapped while the slabs hold more than 5/4 of the blocks in use: the records of
 * the chunks thinned next come from malloc. */
CTS_TEST(slabs_pinned_by_survivors_stay_bounded) {
  model_t m;
  model_init(&m);
  thin_chunks(&m, 0, 300);
  for (uint64_t k = 0; k < 296; k++)
    if (k % 40 != 39) empty_chunks(&m, k, k + 1);
  const size_t pinned = m.t.arena_bytes;
  CTS_ASSERT_MSG(pinned >= 3 * SLAB && pinned > 4 * m.t.arena_live, "%zu mapped, %zu in use",
                 pinned, m.t.arena_live);
  thin_chunks(&m, 300, 500);
  CTS_ASSERT(consistent(&m));
  CTS_ASSERT_MSG(m.t.arena_bytes == pinned, "%zu mapped, was %zu", m.t.arena_bytes, pinned);
  model_fini(&m);
}

CTS_TEST_MAIN()
