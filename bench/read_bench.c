/* SPDX-License-Identifier: MIT */
/* read_bench: throughput of the memtrace reader on one trace file (bench/README.md).
 *
 * Each run creates a reader and hands the file to cts_os_read_memtrace() -- the path every
 * ctfscope command takes (a plain file is mapped, not read) -- or, with --via-read, reads
 * it with read(2) into a 1 MiB buffer and feeds every piece to cts_mt_reader_feed() (the
 * path before the mapping; what a program feeding the reader itself does). The event
 * callback folds every
 * event into a checksum (backtrace length, samples, the allocation point's code) so that
 * nothing can be skipped. The median of the runs' wall times gives events/s, MB/s
 * (10^6 bytes) and backtrace frames decoded per second; peak RSS comes from getrusage.
 *
 * --walk-floor measures what the format itself costs: the file is loaded into memory once,
 * then each run only finds the events' boundaries (event codes, vint lengths, codeword
 * tags), with no validation, no backtrace cache, no callback and no I/O. No reader of the
 * format can do less per event, so this bounds the events/s any reader reaches on the
 * machine.
 *
 * --trie-floor measures what keeping every distinct stack costs on top of decoding: each
 * allocation's backtrace is interned into the leanest (parent, frame) -> node table there
 * is, and one 32-bit count per node is kept, nothing else (trie_floor_t below). Any
 * command that keeps every stack (leaks, export -f folded|pprof, report) does at least
 * this, so its CPU over this run's is how far it is from its floor. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "common/hash.h"
#include "analysis/u64map.h"
#include "core/memtrace_wire.h"
#include "os/os.h"

#define READ_CHUNK (1u << 20)
#define MAX_RUNS   100

typedef struct tally {
  uint64_t events, allocs, frames, samples, checksum;
} tally_t;

/* A minimal consumer: counts events and backtrace frames, sums the allocations' samples
 * and folds each allocation point (the last frame) into a checksum. */
static int on_event(void *user_data, const cts_mt_event_t *ev) {
  tally_t *t = user_data;
  const size_t n = ev->backtrace_len;
  t->events++;
  t->frames += n;
  if (ev->kind == CTS_MT_ALLOC) {
    t->allocs++;
    t->samples += ev->nsamples;
    if (n) t->checksum ^= ev->backtrace[n - 1] + ev->obj_id;
  }
  return 0;
}

typedef enum mode {
  MODE_VIA_OS,
  MODE_FEED,
  MODE_READ_ONLY,
  MODE_WALK_FLOOR,
  MODE_TRIE_FLOOR
} mode_t_;

/* The trie floor's table. A frame code becomes a small id first (codes: a few thousand to
 * a few hundred thousand distinct, a table that stays in cache), so a node's whole key,
 * (parent node, code id), fits in one 8-byte slot and a look-up costs one probe run: no
 * second look at a node record. A node is its slot (node = slot index + 1, the root 0), so
 * the table cannot be rehashed: it is sized from the file. The run starts with
 * FLOOR_FIRST_SLOTS (in cache: most traces have few stacks); if that fills up, it starts
 * again (counted in `restarts`, which costs the part of the file read before) with a table
 * for the nodes found so far extrapolated to the whole file, or for one node every
 * FLOOR_BYTES_PER_NODE if fewer (the start of a trace makes nodes faster than the rest),
 * and twice as large if that fills up too. */
#define FLOOR_FIRST_SLOTS    (1u << 16)
#define FLOOR_BYTES_PER_NODE 16u /* gen_trace's default shape: 19 bytes of trace a node */
#define FLOOR_MAX_LOAD_PCT   70u

#define FLOOR_COUNT_LAG 8u

typedef struct trie_floor {
  uint64_t *keys;   /* parent << 32 | code id (ids from 1, so 0 = empty) */
  uint32_t *counts; /* allocations whose stack ends at the node */
  /* The last FLOOR_COUNT_LAG allocations' nodes (0 = none), their counts fetched and not yet
   * incremented: a count is a cache miss in an array as large as the table, waited for only
   * once the next few allocations are under way. */
  uint32_t lagging[FLOOR_COUNT_LAG];
  uint32_t lag_next;
  size_t keys_bytes, counts_bytes;
  uint32_t cap; /* slots, a power of 2 */
  uint32_t nodes, root_count;
  uint64_t lookups;      /* frames looked up in the table (past the previous path) */
  bool full;             /* more nodes than FLOOR_MAX_LOAD_PCT of cap: the run is void */
  cts_u64map_t code_ids; /* frame code -> id */
  uint32_t code_count;
  /* The previous allocation's path: frames equal to its prefix are not looked up again.
   * prev_hashes[i] is the hash of its path to depth i (floor_path_hash). */
  uint64_t *prev_codes, *prev_hashes;
  uint32_t *prev_nodes;
  size_t prev_len, prev_cap;
  uint16_t prev_domain;
  tally_t *tally;    /* what on_event counts, as in every other mode */
  uint32_t restarts; /* runs started again with a larger table */
  /* --max-nodes: past this many nodes a new stack is kept as root -> overflow -> its last
   * frame, as ctfscope's profile keeps them past its node budget (cts_stacks_t.max_nodes,
   * 10 Mi for report, leaks and the exports): the floor of a command that keeps what they
   * keep. 0 = every stack. */
  uint32_t max_nodes;  /* (the root counted, as cts_stacks_t.count counts it) */
  uint64_t overflowed; /* allocations kept by their last frame for the budget */
  /* Past the budget, the (parent, code) of the last frame that had no node: a stack that
   * stops there again is cut with no look-up, as ctfscope's profile does. */
  uint64_t absent_code;
  uint32_t absent_parent;
  bool absent_valid;
} trie_floor_t;

/* The overflow node's code (cf. CTS_STACKS_OVERFLOW_CODE): above any memtrace code. */
#define FLOOR_OVERFLOW_CODE (1ull << 63)

/* The id of frame code (from 1), made if new: 0 if out of memory. */
static uint32_t floor_code_id(trie_floor_t *f, uint64_t code) {
  bool added;
  uint64_t *id = cts_u64map_insert(&f->code_ids, code, f->code_count + 1, &added);
  if (!id) return 0;
  if (added) f->code_count++;
  return (uint32_t)*id;
}

/* A node's home slot is its path's hash, not its (parent, code) key's: the hash of frame i
 * of a backtrace comes from frame i - 1's hash and frame i's code, with no node in between, so
 * every frame's slot past the previous path can be fetched at once (floor_on_event) rather than
 * one cache miss after another, each waiting for its parent's slot to give the node. The slot
 * still holds the exact key: a look-up compares it, whatever the hash. */
static inline uint64_t floor_path_hash(uint64_t parent_hash, uint64_t code) {
  return cts_mix64(code ^ parent_hash * 0x9e3779b97f4a7c15ull);
}

/* The child of parent (whose path hashes to parent_hash) for frame code, made if new (past
 * the budget only when past_budget): a node (from 1), or 0 when the table is full, memory ran
 * out (f->full says which) or the budget is spent (f->nodes and the root at f->max_nodes). */
static uint32_t floor_child(trie_floor_t *f, uint32_t parent, uint64_t path_hash, uint64_t code,
                            bool past_budget) {
  const uint32_t id = floor_code_id(f, code);
  if (!id) return 0;
  f->lookups++;
  const uint64_t key = (uint64_t)parent << 32 | id;
  const uint32_t mask = f->cap - 1u;
  size_t j = path_hash & mask;
  for (; f->keys[j]; j = (j + 1) & mask)
    if (f->keys[j] == key) return (uint32_t)j + 1;
  if (f->max_nodes && f->nodes + 1u >= f->max_nodes && !past_budget) return 0; /* (+ the root) */
  if ((uint64_t)(f->nodes + 1) * 100 > (uint64_t)f->cap * FLOOR_MAX_LOAD_PCT) {
    f->full = true;
    return 0;
  }
  f->keys[j] = key;
  f->nodes++;
  return (uint32_t)j + 1;
}

/* Frames whose home slots are fetched before the one looked up. */
#ifndef FLOOR_AHEAD
#define FLOOR_AHEAD 4u
#endif

/* Counts one more allocation at node (from 1) FLOOR_COUNT_LAG allocations from now. */
static void floor_count(trie_floor_t *f, uint32_t node) {
  __builtin_prefetch(&f->counts[node - 1], 1);
  uint32_t *const slot = &f->lagging[f->lag_next++ % FLOOR_COUNT_LAG];
  if (*slot) f->counts[*slot - 1]++;
  *slot = node;
}

/* The counts still lagging, made. */
static void floor_count_flush(trie_floor_t *f) {
  for (uint32_t k = 0; k < FLOOR_COUNT_LAG; k++)
    if (f->lagging[k]) f->counts[f->lagging[k] - 1]++;
  memset(f->lagging, 0, sizeof f->lagging);
}

static int floor_on_event(void *user_data, const cts_mt_event_t *ev) {
  trie_floor_t *f = user_data;
  (void)on_event(f->tally, ev);
  if (ev->kind != CTS_MT_ALLOC) return 0;
  const size_t n = ev->backtrace_len;
  const uint64_t *bt = ev->backtrace;
  if (n > f->prev_cap) {
    size_t cap = f->prev_cap ? f->prev_cap : 64;
    while (cap < n) cap *= 2;
    uint64_t *codes = realloc(f->prev_codes, cap * sizeof *codes);
    if (codes) f->prev_codes = codes;
    uint64_t *hashes = realloc(f->prev_hashes, cap * sizeof *hashes);
    if (hashes) f->prev_hashes = hashes;
    uint32_t *nodes = realloc(f->prev_nodes, cap * sizeof *nodes);
    if (nodes) f->prev_nodes = nodes;
    if (!codes || !hashes || !nodes) return -ENOMEM;
    f->prev_cap = cap;
  }
  /* The reader's common prefix is with the previous allocation of the same domain. */
  const size_t limit = n < f->prev_len ? n : f->prev_len;
  size_t common = ev->domain == f->prev_domain && ev->common_prefix < limit
                      ? (size_t)ev->common_prefix
                      : (ev->domain == f->prev_domain ? limit : 0);
  while (common < limit && bt[common] == f->prev_codes[common]) common++;
  f->prev_domain = ev->domain;
  uint32_t cur = common ? f->prev_nodes[common - 1] : 0;
  /* The home slots of the frames past the previous path are fetched FLOOR_AHEAD frames
   * before they are looked up, several at a time: not all at once, since a stack cut for
   * the budget looks up none past its cut. */
  uint64_t *const hashes = f->prev_hashes;
  const size_t ahead_end = common + FLOOR_AHEAD < n ? common + FLOOR_AHEAD : n;
  uint64_t h = common ? hashes[common - 1] : 0;
  for (size_t i = common; i < ahead_end; i++) {
    hashes[i] = h = floor_path_hash(h, bt[i]);
    __builtin_prefetch(&f->keys[h & (f->cap - 1u)]);
  }
  for (size_t i = common; i < n; i++) {
    if (i + FLOOR_AHEAD < n) {
      hashes[i + FLOOR_AHEAD] = h = floor_path_hash(h, bt[i + FLOOR_AHEAD]);
      __builtin_prefetch(&f->keys[h & (f->cap - 1u)]);
    }
    const uint32_t parent = cur;
    const bool absent = f->absent_valid && parent == f->absent_parent && bt[i] == f->absent_code;
    if (absent || !(cur = floor_child(f, parent, hashes[i], bt[i], false))) {
      if (f->full || !f->max_nodes || f->nodes + 1u < f->max_nodes) {
        f->prev_len = 0;
        return f->full ? -EAGAIN : -ENOMEM;
      }
      /* Past the budget: root -> overflow -> last frame; the path up to frame i stays the
       * previous one (as cts_stacks_intern_shared leaves it). */
      f->prev_len = i;
      f->absent_parent = parent;
      f->absent_code = bt[i];
      f->absent_valid = true;
      const uint64_t over_hash = floor_path_hash(0, FLOOR_OVERFLOW_CODE);
      const uint32_t over = floor_child(f, 0, over_hash, FLOOR_OVERFLOW_CODE, true);
      const uint32_t leaf =
          over ? floor_child(f, over, floor_path_hash(over_hash, bt[n - 1]), bt[n - 1], true) : 0;
      if (!leaf) return f->full ? -EAGAIN : -ENOMEM;
      f->overflowed++;
      floor_count(f, leaf);
      return 0;
    }
    f->prev_codes[i] = bt[i];
    f->prev_nodes[i] = cur;
  }
  f->prev_len = n;
  if (cur)
    floor_count(f, cur);
  else
    f->root_count++;
  return 0;
}

/* Bytes past the end of a loaded file that the floor walk may read: the longest fixed part
 * of an event (three 9-byte vints, a byte and a u16). */
#define WALK_PAD 64u

/* A vint's length (§2) and value, with 9 bytes known to be readable. */
static const uint8_t *walk_vint(const uint8_t *p, uint64_t *v) {
  const uint8_t c = *p++;
  if (CTS_LIKELY(c < 253)) {
    *v = c;
    return p;
  }
  if (c == 253) {
    *v = cts_ld_le16(p);
    return p + 2;
  }
  if (c == 254) {
    *v = cts_ld_le32(p);
    return p + 4;
  }
  *v = cts_ld_le64(p);
  return p + 8;
}

/* Past nencoded codewords (tag in the low 2 bits: 2, 2, 3 or 10 bytes), or NULL if they
 * would run past end. */
static const uint8_t *walk_codewords(const uint8_t *q, const uint8_t *end, uint64_t nencoded) {
  static const uint8_t bytes[4] = {2, 2, 3, 10};
  if (nencoded * 10u <= (uint64_t)(end - q)) {
    for (uint64_t i = 0; i < nencoded; i++) q += bytes[q[0] & 3u];
    return q;
  }
  for (uint64_t i = 0; i < nencoded && q < end; i++) q += bytes[q[0] & 3u];
  return q <= end ? q : NULL;
}

/* Past a location event's body (§6): code, count, then per location 6 bytes and the new
 * file and function names (NUL-terminated) its MTF codes announce; NULL if it runs past
 * end. */
static const uint8_t *walk_location(const uint8_t *q, const uint8_t *end) {
  if (end - q < 9) return NULL;
  const unsigned nlocs = q[8];
  q += 9;
  for (unsigned i = 0; i < nlocs; i++) {
    if (end - q < 6) return NULL;
    const uint64_t bits = (uint64_t)cts_ld_le32(q) | (uint64_t)cts_ld_le16(q + 4) << 32;
    q += 6;
    const unsigned strings =
        (((bits >> 38) & 31u) == MT_MTF_NEW) + (((bits >> 43) & 31u) == MT_MTF_NEW);
    for (unsigned k = 0; k < strings; k++) {
      const uint8_t *const nul = memchr(q, 0, (size_t)(end - q));
      if (!nul) return NULL;
      q = nul + 1;
    }
  }
  return q;
}

/* The floor walk over a whole trace in memory (data has WALK_PAD readable bytes past len).
 * Counts events, allocations and samples into *t; false if the trace is not what the walk
 * understands (it stops there). */
static bool walk_floor(const uint8_t *data, size_t len, tally_t *t, uint64_t *offset) {
  const uint8_t *p = data, *const end = data + len;
  bool first = true;
  while ((size_t)(end - p) >= MT_MIN_PREFIX) {
    const uint32_t header = cts__mt_header_size(cts_ld_le16(p + MT_VERSION_OFFSET));
    const uint32_t size = cts_ld_le32(p + 4) / 8u;
    *offset = (uint64_t)(p - data);
    if (cts_ld_le32(p) != MT_MAGIC || size < header || size > (size_t)(end - p)) return false;
    const uint8_t *q = p + header, *const pe = p + size;
    if (first) { /* the trace-info packet */
      first = false;
      p = pe;
      continue;
    }
    while (q < pe) {
      const unsigned id = cts_ld_le32(q) >> MT_TIME_BITS;
      uint64_t a, b, nencoded;
      q += 4;
      if (id == MT_EV_COLLECT || id == MT_EV_PROMOTE) {
        q = walk_vint(q, &a);
      } else if (id > MT_EV_SHORT_ALLOC_BASE && id <= MT_EV_SHORT_ALLOC_BASE + 16) {
        q = walk_vint(q, &a);
        nencoded = *q++;
        q = walk_codewords(q, pe, nencoded);
        t->allocs++;
        t->samples++;
      } else if (id == MT_EV_ALLOC) {
        q = walk_vint(q, &a);
        q = walk_vint(q, &b);
        q = walk_vint(q + 1, &a);
        nencoded = cts_ld_le16(q);
        q = walk_codewords(q + 2, pe, nencoded);
        t->allocs++;
        t->samples += b;
      } else if (id == MT_EV_LOCATION) {
        if (!(q = walk_location(q, pe))) return false;
        continue; /* the reader does not count them as events either */
      } else {
        return false;
      }
      if (!q || q > pe) return false;
      t->events++;
    }
    p = pe;
  }
  *offset = (uint64_t)(p - data);
  return p == end;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* User + system CPU seconds of this process so far: less disturbed than wall time when
 * the machine is shared. */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* A zeroed array of n items, mapped (so pages the probes never reach cost no memory) and
 * on 2 MiB pages where the kernel gives them on request: the table is probed at random,
 * and with 4 KiB pages nearly every probe would miss the TLB as well as the cache (the trie
 * of ctfscope asks for them too, sites.c). */
static void *floor_array(size_t n, size_t size, size_t *bytes) {
  const size_t huge = (size_t)2 << 20;
  *bytes = (n * size + huge - 1) / huge * huge;
  uint8_t *const m =
      mmap(NULL, *bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  /* Aligned to 2 MiB, the rest given back. */
  uint8_t *const p = (uint8_t *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
  if (p > m) munmap(m, (size_t)(p - m));
  if (p + *bytes < m + *bytes + huge)
    munmap(p + *bytes, (size_t)(m + *bytes + huge - (p + *bytes)));
  (void)madvise(p, *bytes, MADV_HUGEPAGE); /* only advice */
  return p;
}

static void floor_free(trie_floor_t *f) {
  if (f->keys) munmap(f->keys, f->keys_bytes);
  if (f->counts) munmap(f->counts, f->counts_bytes);
  cts_u64map_fini(&f->code_ids);
  free(f->prev_codes);
  free(f->prev_hashes);
  free(f->prev_nodes);
}

/* --max-nodes N (trie_floor_t.max_nodes). */
static uint32_t floor_max_nodes;

/* One --trie-floor pass, with a table sized from the file (see trie_floor_t). Leaves the
 * run's nodes, codes and slots in *f. Returns 0 or prints the error and returns non-zero. */
static int run_floor(const char *path, const cts_mt_reader_config_t *cfg, tally_t *t,
                     uint64_t *bytes, trie_floor_t *f) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "read_bench: cannot open %s: %s\n", path, strerror(errno));
    return 1;
  }
  uint32_t cap = FLOOR_FIRST_SLOTS;
  for (uint32_t restarts = 0;; restarts++) {
    memset(t, 0, sizeof *t);
    *f = (trie_floor_t){.tally = t, .restarts = restarts, .max_nodes = floor_max_nodes};
    f->cap = cap;
    cts_u64map_init(&f->code_ids);
    f->keys = floor_array(cap, sizeof *f->keys, &f->keys_bytes);
    f->counts = floor_array(cap, sizeof *f->counts, &f->counts_bytes);
    cts_mt_reader_t *r = NULL;
    const cts_mt_handler_t h = {.user_data = f, .on_event = floor_on_event};
    int e = -ENOMEM;
    uint64_t want = 0; /* slots for the whole file, if this table filled up */
    if (f->keys && f->counts && (e = cts_mt_reader_create(&r, cfg, &h)) == 0) {
      bool input_error;
      e = cts_os_read_memtrace(path, r, NULL, NULL, &input_error);
      floor_count_flush(f);
      *bytes = cts_mt_reader_offset(r);
      const double per_bytes = (double)st.st_size / FLOOR_BYTES_PER_NODE;
      const double nodes = *bytes ? (double)f->nodes * (double)st.st_size / (double)*bytes : 0;
      double expect = nodes < per_bytes ? nodes : per_bytes;
      /* Past the budget only the overflow's leaves come: at most one a distinct frame. */
      if (f->max_nodes && expect > (double)f->max_nodes + 65536.0)
        expect = (double)f->max_nodes + 65536.0;
      want = (uint64_t)(expect * 100 / FLOOR_MAX_LOAD_PCT);
      if (e && !f->full)
        fprintf(stderr, "read_bench: %s: %s\n", path,
                input_error ? cts_os_strerror(e) : cts_mt_reader_error_message(r));
      cts_mt_reader_destroy(r);
    } else {
      fprintf(stderr, "read_bench: trie floor: %s\n", cts_strerror(e));
    }
    const bool again = e && f->full && cap < 1u << 31;
    floor_free(f);
    if (!again) return e != 0;
    const uint32_t filled = cap;
    while ((cap < want || cap == filled) && cap < 1u << 31) cap *= 2;
  }
}

/* One pass over the file. Returns 0 or prints the error and returns non-zero. */
/* --count-frees: the reader counts promotions and collections (cts_mt_reader_count_frees(),
 * what ctfscope info has it do) and the tally adds them to its events at the end. */
static bool count_frees;
/* --count-allocs: and most allocations (cts_mt_reader_count_allocs(), as ctfscope info);
 * their samples and frames are added at the end, the checksum covers only those delivered. */
static bool count_allocs;

/* Adds what r counted instead of delivering to t's events. */
static void add_counted(const cts_mt_reader_t *r, tally_t *t) {
  cts_mt_free_counts_t f;
  cts_mt_reader_free_counts(r, &f);
  t->events += f.promote + f.collect;
  cts_mt_alloc_counts_t a;
  cts_mt_reader_alloc_counts(r, &a);
  const uint64_t n = a.allocs[0] + a.allocs[1] + a.allocs[2];
  t->events += n;
  t->allocs += n;
  t->samples += a.samples[0] + a.samples[1] + a.samples[2];
  t->frames += a.frames_total;
}

static int run_once(const char *path, mode_t_ mode, bool decode, uint8_t *buf, tally_t *t,
                    uint64_t *bytes, const uint8_t *loaded, size_t loaded_len,
                    trie_floor_t *floor) {
  memset(t, 0, sizeof *t);
  *bytes = 0;
  if (mode == MODE_WALK_FLOOR) {
    uint64_t offset;
    *bytes = loaded_len;
    if (walk_floor(loaded, loaded_len, t, &offset)) return 0;
    fprintf(stderr, "read_bench: %s: the floor walk stops at offset %" PRIu64 "\n", path, offset);
    return 1;
  }
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cfg.decode_backtraces = decode;
  if (mode == MODE_TRIE_FLOOR) return run_floor(path, &cfg, t, bytes, floor);
  const cts_mt_handler_t h = {.user_data = t, .on_event = on_event};
  cts_mt_reader_t *r = NULL;
  int e = 0;
  if (mode != MODE_READ_ONLY && (e = cts_mt_reader_create(&r, &cfg, &h)) != 0) {
    fprintf(stderr, "read_bench: cts_mt_reader_create: %s\n", cts_strerror(e));
    return 1;
  }
  if (r && count_frees) cts_mt_reader_count_frees(r, true);
  if (r && count_allocs) cts_mt_reader_count_allocs(r, true);
  if (mode == MODE_VIA_OS) {
    bool input_error;
    e = cts_os_read_memtrace(path, r, NULL, NULL, &input_error);
    *bytes = cts_mt_reader_offset(r);
    add_counted(r, t);
    if (e) {
      fprintf(stderr, "read_bench: %s: %s\n", path,
              input_error ? cts_os_strerror(e) : cts_mt_reader_error_message(r));
    }
    cts_mt_reader_destroy(r);
    return e != 0;
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "read_bench: cannot open %s: %s\n", path, strerror(errno));
    cts_mt_reader_destroy(r);
    return 1;
  }
  for (;;) {
    const ssize_t n = read(fd, buf, READ_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fprintf(stderr, "read_bench: reading %s: %s\n", path, strerror(errno));
      e = 1;
      break;
    }
    if (n == 0) {
      if (r && (e = cts_mt_reader_finish(r)) != 0)
        fprintf(stderr, "read_bench: %s: %s\n", path, cts_mt_reader_error_message(r));
      break;
    }
    *bytes += (uint64_t)n;
    if (mode == MODE_READ_ONLY) {
      t->checksum += buf[n - 1]; /* touch the data so the pass is not only a syscall */
      continue;
    }
    if ((e = cts_mt_reader_feed(r, buf, (size_t)n)) != 0) {
      fprintf(stderr, "read_bench: %s: %s\n", path, cts_mt_reader_error_message(r));
      break;
    }
  }
  close(fd);
  if (r) add_counted(r, t);
  cts_mt_reader_destroy(r);
  return e != 0;
}

/* The whole file into *data (with WALK_PAD zero bytes after it). */
static int load_file(const char *path, uint8_t **data, size_t *len) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "read_bench: cannot open %s: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
    return 1;
  }
  const size_t size = (size_t)st.st_size;
  uint8_t *const d = calloc(1, size + WALK_PAD);
  size_t n = 0;
  while (d && n < size) {
    const ssize_t got = read(fd, d + n, size - n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(fd);
  if (!d || n != size) {
    fprintf(stderr, "read_bench: cannot load %s into memory\n", path);
    free(d);
    return 1;
  }
  *data = d;
  *len = size;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median, minimum and maximum of v[0..n). */
static void summarize(const double *v, int n, double *med, double *lo, double *hi) {
  double sorted[MAX_RUNS];
  memcpy(sorted, v, (size_t)n * sizeof *v);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  *med = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  *lo = sorted[0];
  *hi = sorted[n - 1];
}

static void usage(FILE *f) {
  fprintf(f,
          "Usage: read_bench [--decode | --skip] [--count-frees [--count-allocs]] [--via-read | "
          "--read-only | "
          "--walk-floor | "
          "--trie-floor [--max-nodes N]] "
          "[-n RUNS] [--warmup N] TRACE\n"
          "Reads TRACE RUNS times (default 5, after 1 warm-up run) and prints the median,\n"
          "minimum and maximum wall time (and CPU time), events/s, MB/s (10^6 bytes) and\n"
          "backtrace frames/s from the wall times, and the peak RSS.\n"
          "  --decode       decode backtraces (default)\n"
          "  --skip         skip backtraces (reader config decode_backtraces = false)\n"
          "  --count-frees  the reader counts promotions and collections instead of\n"
          "                 delivering them (cts_mt_reader_count_frees(), as ctfscope info)\n"
          "  --count-allocs and most allocations (cts_mt_reader_count_allocs(), as\n"
          "                 ctfscope info): the checksum then covers only those delivered\n"
          "  --via-os       read with cts_os_read_memtrace(), as ctfscope does (default)\n"
          "  --via-read     read() the file into a 1 MiB buffer and feed each piece\n"
          "  --read-only    only read() the file: the I/O floor of --via-read\n"
          "  --walk-floor   only find the events' boundaries in the file, loaded into memory\n"
          "                 first: no validation, no backtraces, no callback, no I/O (the\n"
          "                 format's own floor)\n"
          "  --trie-floor   decode (as --via-os --decode) and intern every allocation's\n"
          "                 backtrace into the leanest (parent, frame) -> node table, one\n"
          "                 32-bit count per node: what keeping every stack costs at least\n"
          "  --max-nodes N  with --trie-floor: past N nodes, a new stack is kept as\n"
          "                 overflow -> its last frame, as ctfscope's profile does past its\n"
          "                 node budget (10485760 for report, leaks and the exports)\n"
          "  -n, --runs N   counted runs (1..%d)\n"
          "  --warmup N     uncounted runs first (default 1)\n",
          MAX_RUNS);
}

int main(int argc, char **argv) {
  enum {
    OPT_DECODE = 256,
    OPT_SKIP,
    OPT_VIA_OS,
    OPT_VIA_READ,
    OPT_READ_ONLY,
    OPT_WALK_FLOOR,
    OPT_TRIE_FLOOR,
    OPT_COUNT_FREES,
    OPT_COUNT_ALLOCS,
    OPT_MAX_NODES,
    OPT_WARMUP
  };
  static const struct option opts[] = {
      {"decode", no_argument, NULL, OPT_DECODE},
      {"skip", no_argument, NULL, OPT_SKIP},
      {"via-os", no_argument, NULL, OPT_VIA_OS},
      {"via-read", no_argument, NULL, OPT_VIA_READ},
      {"read-only", no_argument, NULL, OPT_READ_ONLY},
      {"walk-floor", no_argument, NULL, OPT_WALK_FLOOR},
      {"trie-floor", no_argument, NULL, OPT_TRIE_FLOOR},
      {"count-frees", no_argument, NULL, OPT_COUNT_FREES},
      {"count-allocs", no_argument, NULL, OPT_COUNT_ALLOCS},
      {"max-nodes", required_argument, NULL, OPT_MAX_NODES},
      {"runs", required_argument, NULL, 'n'},
      {"warmup", required_argument, NULL, OPT_WARMUP},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  bool decode = true;
  mode_t_ mode = MODE_VIA_OS;
  int runs = 5, warmup = 1, c;
  while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
    switch (c) {
      case OPT_DECODE:
        decode = true;
        break;
      case OPT_SKIP:
        decode = false;
        break;
      case OPT_VIA_OS:
        mode = MODE_VIA_OS;
        break;
      case OPT_VIA_READ:
        mode = MODE_FEED;
        break;
      case OPT_READ_ONLY:
        mode = MODE_READ_ONLY;
        break;
      case OPT_WALK_FLOOR:
        mode = MODE_WALK_FLOOR;
        break;
      case OPT_TRIE_FLOOR:
        mode = MODE_TRIE_FLOOR;
        decode = true;
        break;
      case OPT_COUNT_FREES:
        count_frees = true;
        break;
      case OPT_COUNT_ALLOCS:
        count_frees = count_allocs = true;
        break;
      case OPT_MAX_NODES:
        floor_max_nodes = (uint32_t)strtoul(optarg, NULL, 10);
        break;
      case 'n':
        runs = atoi(optarg);
        break;
      case OPT_WARMUP:
        warmup = atoi(optarg);
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind + 1 != argc || runs < 1 || runs > MAX_RUNS || warmup < 0 || warmup > 10) {
    usage(stderr);
    return 2;
  }
  const char *path = argv[optind];
  uint8_t *buf = malloc(READ_CHUNK);
  if (!buf) return 1;
  uint8_t *loaded = NULL;
  size_t loaded_len = 0;
  if (mode == MODE_WALK_FLOOR && load_file(path, &loaded, &loaded_len)) return 1;

  double times[MAX_RUNS], cpu_times[MAX_RUNS];
  tally_t t, first = {0};
  trie_floor_t floor = {0};
  uint64_t bytes = 0;
  for (int i = 0; i < warmup + runs; i++) {
    const double t0 = now_s(), c0 = cpu_s();
    if (run_once(path, mode, decode, buf, &t, &bytes, loaded, loaded_len, &floor)) return 1;
    const double dt = now_s() - t0, dc = cpu_s() - c0;
    if (i >= warmup) {
      times[i - warmup] = dt;
      cpu_times[i - warmup] = dc;
    }
    if (i == 0) {
      first = t;
    } else if (memcmp(&first, &t, sizeof t) != 0) {
      fprintf(stderr, "read_bench: run %d decoded differently from the first\n", i);
      return 1;
    }
  }
  free(buf);
  free(loaded);
  double med, lo, hi, cpu_med, cpu_lo, cpu_hi;
  summarize(times, runs, &med, &lo, &hi);
  summarize(cpu_times, runs, &cpu_med, &cpu_lo, &cpu_hi);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);

  const char *what = mode == MODE_READ_ONLY    ? "read-only"
                     : mode == MODE_WALK_FLOOR ? "walk-floor (in memory, boundaries only)"
                     : mode == MODE_TRIE_FLOOR ? "trie-floor (decode, every stack interned)"
                     : mode == MODE_FEED       ? (decode ? "via-read decode" : "via-read skip")
                                               : (decode ? "decode" : "skip");
  printf("trace      %s: %.1f MB, %" PRIu64 " events (%" PRIu64 " allocs), %" PRIu64
         " backtrace frames\n",
         path, (double)bytes / 1e6, t.events, t.allocs, t.frames);
  printf("mode       %s%s, %d runs after %d warm-up\n", what,
         count_allocs  ? ", promotions, collections and allocations counted by the reader"
         : count_frees ? ", promotions and collections counted by the reader"
                       : "",
         runs, warmup);
  printf("wall       median %.4f s  (min %.4f, max %.4f)\n", med, lo, hi);
  printf("cpu        median %.4f s  (min %.4f, max %.4f)  user + system\n", cpu_med, cpu_lo,
         cpu_hi);
  printf("events/s   median %.2f M  (min %.2f, max %.2f)\n", (double)t.events / med / 1e6,
         (double)t.events / hi / 1e6, (double)t.events / lo / 1e6);
  printf("MB/s       median %.1f  (min %.1f, max %.1f)\n", (double)bytes / med / 1e6,
         (double)bytes / hi / 1e6, (double)bytes / lo / 1e6);
  printf("frames/s   median %.1f M\n", (double)t.frames / med / 1e6);
  /* On a shared machine wall time includes waiting for a processor: CPU time does not. */
  printf("per cpu-s  %.2f M events/s, %.1f MB/s, %.1f M frames/s (median CPU time)\n",
         (double)t.events / cpu_med / 1e6, (double)bytes / cpu_med / 1e6,
         (double)t.frames / cpu_med / 1e6);
  printf("peak RSS   %ld KiB\n", ru.ru_maxrss);
  if (mode == MODE_TRIE_FLOOR)
    printf("trie       %" PRIu32 " nodes, %" PRIu32 " distinct frames, %" PRIu32
           " slots (load %.2f), %" PRIu32 " restarts, %.1f bytes a node, %" PRIu64 " look-ups\n",
           floor.nodes, floor.code_count, floor.cap, (double)floor.nodes / floor.cap,
           floor.restarts, floor.nodes ? (double)floor.cap * 12 / floor.nodes : 0.0, floor.lookups);
  if (mode == MODE_TRIE_FLOOR && floor.max_nodes)
    printf("budget     %" PRIu32 " nodes: %" PRIu64 " allocations kept by their last frame\n",
           floor.max_nodes, floor.overflowed);
  printf("checksum   %016" PRIx64 " (samples %" PRIu64 ")\n", t.checksum, t.samples);
  return 0;
}
