/* SPDX-License-Identifier: MIT */
/* The column transform of compressed memtrace traces: see mtcols.h and
 * docs/formats/memtrace-zstd.md, whose sections the comments cite. */
#include "mtcols.h"

#include <string.h>

#include "common/endian.h"
#include "common/hash.h"
#include "ctfscope/errors.h"

#define MT_MAGIC   0xC1FC1FC1u
#define TIME_MASK  0x1FFFFFFu
#define PACKET_MAX (64u << 10) /* larger "packets" go raw (memtrace keeps them at 32 KiB) */
#define RAW_PIECE  (64u << 10)

/* --- primitive encodings ------------------------------------------------------------ */

/* memtrace's vint (memtrace.md §2): NULL past `end` or when not in the shortest form, which
 * is all the decoder rebuilds. */
static const uint8_t *vint_get(const uint8_t *p, const uint8_t *end, int64_t *v) {
  if (p >= end) return NULL;
  const uint8_t c = *p;
  if (c < 253) {
    *v = c;
    return p + 1;
  }
  if (c == 253) {
    if (end - p < 3) return NULL;
    *v = cts_ld_le16(p + 1);
    return *v > 252 ? p + 3 : NULL;
  }
  if (c == 254) {
    if (end - p < 5) return NULL;
    *v = (int32_t)cts_ld_le32(p + 1);
    return *v < 0 || *v > 65535 ? p + 5 : NULL;
  }
  if (end - p < 9) return NULL;
  *v = (int64_t)cts_ld_le64(p + 1);
  return *v < INT32_MIN || *v > INT32_MAX ? p + 9 : NULL;
}

static uint8_t *vint_put(uint8_t *q, int64_t v) {
  if (v >= 0 && v <= 252) {
    *q = (uint8_t)v;
    return q + 1;
  }
  if (v >= 0 && v <= 65535) {
    *q = 253;
    cts_st_le16(q + 1, (uint16_t)v);
    return q + 3;
  }
  if (v >= INT32_MIN && v <= INT32_MAX) {
    *q = 254;
    cts_st_le32(q + 1, (uint32_t)(int32_t)v);
    return q + 5;
  }
  *q = 255;
  cts_st_le64(q + 1, (uint64_t)v);
  return q + 9;
}

static inline uint64_t zig(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t unzig(uint64_t u) {
  return (int64_t)((u >> 1) ^ (0 - (u & 1)));
}

/* Columns' integers: LEB128, at most 10 bytes. */
static inline uint8_t *leb_put(uint8_t *q, uint64_t v) {
  while (v >= 0x80) {
    *q++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *q++ = (uint8_t)v;
  return q;
}

/* A location event's payload length (memtrace.md §7), 0 if it does not fit before `end`. */
static size_t loc_len(const uint8_t *p, const uint8_t *end) {
  const uint8_t *const start = p;
  if (end - p < 9) return 0;
  unsigned n = p[8];
  p += 9;
  while (n--) {
    if (end - p < 6) return 0;
    const unsigned codes = cts_ld_le16(p + 4);
    p += 6;
    for (unsigned k = 0; k < 2; k++) {
      if (((codes >> (6 + 5 * k)) & 31) != 31) continue;
      const uint8_t *const nul = memchr(p, 0, (size_t)(end - p));
      if (!nul) return 0;
      p = nul + 1;
    }
  }
  return (size_t)(p - start);
}

/* A backtrace's codewords (memtrace.md §8.3): the end of `n` of them, NULL past `end`. */
static const uint8_t *codewords_end(const uint8_t *p, const uint8_t *end, unsigned n) {
  while (n--) {
    if (end - p < 2) return NULL;
    const unsigned tag = p[0] & 3u;
    p += 2 + (tag == 2 ? 1 : tag == 3 ? 8 : 0);
    if (p > end) return NULL;
  }
  return p;
}

/* --- the cache of recent backtraces (§5) ------------------------------------------- */

#define BT_SLOTS 4096u
#define BT_KEY   255u       /* longest cached key: a form byte and the event's backtrace bytes */
#define STAMPS   (1u << 13) /* small enough to stay in cache; renumbered when used up */
#define HBUCKETS 8192u
#define DEAD     UINT32_MAX

/* The 4096 most recently used backtraces, each with the time (stamp) of its last use; a
 * bitmap of the stamps in use counts the ones used since, which is the rank that goes in
 * the trace (a move-to-front list's index, without moving anything). Encoder and decoder
 * make the same moves, so they agree on every rank. Most ranks are small: counting the
 * bits of the few words between a stamp and the newest costs less than a tree would. */
typedef struct {
  uint32_t used, live, next_stamp, min_word;
  uint32_t stamp[BT_SLOTS];
  uint16_t len[BT_SLOTS];
  uint16_t next[BT_SLOTS]; /* hash chains (encoder only): slot + 1, 0 ends */
  uint16_t head[HBUCKETS]; /* slot + 1 */
  uint64_t hash[BT_SLOTS];
  uint16_t stamp_slot[STAMPS];
  uint64_t bits[STAMPS / 64]; /* stamps in use */
  uint8_t key[BT_SLOTS][BT_KEY];
} btcache_t;

/* Inline: the baseline x86-64 build has no popcnt instruction, and libgcc's is a call. */
static inline uint32_t popcount64(uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

static inline void bit_set(btcache_t *c, uint32_t s) {
  c->bits[s >> 6] |= 1ull << (s & 63);
}
static inline void bit_clear(btcache_t *c, uint32_t s) {
  c->bits[s >> 6] &= ~(1ull << (s & 63));
}

/* Out of stamps: the live entries get 0, 1, 2... in the same order. */
static void renumber(btcache_t *c) {
  uint32_t n = 0;
  for (uint32_t w = 0; w < STAMPS / 64; w++) {
    for (uint64_t b = c->bits[w]; b; b &= b - 1) {
      const uint16_t slot = c->stamp_slot[w * 64 + (uint32_t)__builtin_ctzll(b)];
      c->stamp[slot] = n;
      c->stamp_slot[n++] = slot;
    }
  }
  memset(c->bits, 0, sizeof c->bits);
  for (uint32_t w = 0; w < n / 64; w++) c->bits[w] = ~0ull;
  if (n % 64) c->bits[n / 64] = (1ull << (n % 64)) - 1;
  c->next_stamp = n;
  c->min_word = 0;
}

static void stamp_now(btcache_t *c, uint32_t slot) {
  if (c->next_stamp == STAMPS) renumber(c);
  c->stamp[slot] = c->next_stamp;
  c->stamp_slot[c->next_stamp] = (uint16_t)slot;
  bit_set(c, c->next_stamp++);
}

/* The number of entries used since `slot` was. */
static uint32_t bt_rank(const btcache_t *c, uint32_t slot) {
  const uint32_t s = c->stamp[slot];
  if (s + 1 == c->next_stamp) return 0;
  uint32_t w = s >> 6;
  uint32_t r = popcount64(c->bits[w] & ~((2ull << (s & 63)) - 1));
  for (const uint32_t top = (c->next_stamp - 1) >> 6; w < top;) r += popcount64(c->bits[++w]);
  return r;
}

/* The entry of rank `rank` (< live). */
static uint32_t bt_at_rank(btcache_t *c, uint32_t rank) {
  if (rank == c->live - 1) {
    /* The oldest (an eviction): the lowest stamp in use, from a hint that only grows. */
    while (!c->bits[c->min_word]) c->min_word++;
    return c->stamp_slot[c->min_word * 64 + (uint32_t)__builtin_ctzll(c->bits[c->min_word])];
  }
  for (uint32_t w = (c->next_stamp - 1) >> 6;; w--) {
    const uint32_t n = popcount64(c->bits[w]);
    if (rank < n) {
      /* The bit with `rank` bits above it in this word. */
      uint64_t b = c->bits[w];
      for (uint32_t k = n - 1 - rank; k; k--) b &= b - 1;
      return c->stamp_slot[w * 64 + (uint32_t)__builtin_ctzll(b)];
    }
    rank -= n;
  }
}

static void bt_use(btcache_t *c, uint32_t slot) {
  if (c->stamp[slot] + 1 == c->next_stamp) return; /* the most recent already */
  bit_clear(c, c->stamp[slot]);
  c->stamp[slot] = DEAD;
  stamp_now(c, slot);
}

static void unchain(btcache_t *c, uint32_t slot) {
  uint16_t *link = &c->head[c->hash[slot] & (HBUCKETS - 1)];
  while (*link && *link != slot + 1) link = &c->next[*link - 1];
  if (*link) *link = c->next[slot];
}

/* Enters a key that is not there, in place of the least recently used one if full. */
static void bt_insert(btcache_t *c, bool form, const uint8_t *bytes, size_t blen, uint64_t hash,
                      bool chain) {
  uint32_t slot;
  if (c->used < BT_SLOTS) {
    slot = c->used++;
    c->live++;
    c->stamp[slot] = DEAD;
  } else {
    slot = bt_at_rank(c, c->live - 1);
    if (chain) unchain(c, slot);
    bit_clear(c, c->stamp[slot]);
    c->stamp[slot] = DEAD;
  }
  c->key[slot][0] = form;
  memcpy(c->key[slot] + 1, bytes, blen);
  c->len[slot] = (uint16_t)(blen + 1);
  if (chain) {
    c->hash[slot] = hash;
    uint16_t *const h = &c->head[hash & (HBUCKETS - 1)];
    c->next[slot] = *h;
    *h = (uint16_t)(slot + 1);
  }
  stamp_now(c, slot);
}

/* Forgets everything (a new frame, §3). */
static void bt_reset(btcache_t *c) {
  c->used = c->live = c->next_stamp = c->min_word = 0;
  memset(c->head, 0, sizeof c->head);
  memset(c->bits, 0, sizeof c->bits);
}

/* A key is the form (long or short alloc) and the backtrace's bytes, read where they are. */
static uint64_t key_hash(bool form, const uint8_t *k, size_t len) {
  uint64_t h = len * 2 + form;
  for (; len >= 8; k += 8, len -= 8) h = cts_mix64(h ^ cts_ld_le64(k));
  uint64_t w = 0;
  for (size_t i = 0; i < len; i++) w |= (uint64_t)k[i] << (8 * i);
  return cts_mix64(h ^ w ^ 0x9e3779b97f4a7c15u);
}

static int64_t bt_find(const btcache_t *c, bool form, const uint8_t *k, size_t len, uint64_t hash) {
  for (uint32_t s = c->head[hash & (HBUCKETS - 1)]; s; s = c->next[s - 1]) {
    if (c->hash[s - 1] == hash && c->len[s - 1] == len + 1 && c->key[s - 1][0] == form &&
        memcmp(c->key[s - 1] + 1, k, len) == 0)
      return (int64_t)s - 1;
  }
  return -1;
}

/* --- the opening frame (§2) -------------------------------------------------------- */

void cts_mtcols_head(uint8_t out[CTS_MTCOLS_HEAD_SIZE]) {
  cts_st_le32(out, CTS_MTCOLS_SKIP_MAGIC);
  cts_st_le32(out + 4, CTS_MTCOLS_HEAD_SIZE - 8);
  memcpy(out + 8, CTS_MTCOLS_TAG, 8);
  cts_st_le16(out + 16, CTS_MTCOLS_VERSION);
  cts_st_le16(out + 18, 0);
}

int cts_mtcols_head_check(const uint8_t *p) {
  if (cts_ld_le32(p) != CTS_MTCOLS_SKIP_MAGIC || cts_ld_le32(p + 4) != CTS_MTCOLS_HEAD_SIZE - 8 ||
      memcmp(p + 8, CTS_MTCOLS_TAG, 8) != 0)
    return 0;
  return cts_ld_le16(p + 16) == CTS_MTCOLS_VERSION && cts_ld_le16(p + 18) == 0
             ? 1
             : CTS_E_BAD_COMPRESSION;
}

/* --- encoder ---------------------------------------------------------------------- */

struct cts_mtcols_enc {
  uint32_t prev_low; /* the last event's 25 time bits */
  uint64_t prev_obj; /* the last collected object's id */
  size_t raw_left;   /* rest of a packet whose start went raw at a flush */
  bool started;      /* a group was emitted since the state was last reset */
  size_t npend;      /* bytes of an incomplete packet in `pend` */
  size_t group_raw;  /* memtrace bytes in the group being built */
  uint32_t npackets;
  size_t col_len[CTS_MTCOLS_NCOLS];
  btcache_t bt;
  uint8_t pend[PACKET_MAX];
  uint8_t col[CTS_MTCOLS_NCOLS][CTS_MTCOLS_COL_MAX];
};

size_t cts_mtcols_enc_size(void) {
  return sizeof(cts_mtcols_enc_t);
}

cts_mtcols_enc_t *cts_mtcols_enc_init(void *mem) {
  return mem;
}

bool cts_mtcols_enc_pending(const cts_mtcols_enc_t *e) {
  return e->npend || e->group_raw;
}

static int emit_group(cts_mtcols_enc_t *e, cts_mtcols_emit_cb emit, void *u) {
  if (!e->group_raw) return 0;
  uint8_t head[CTS_MTCOLS_GROUP_HEAD];
  cts_st_le32(head, CTS_MTCOLS_GROUP_MAGIC);
  cts_st_le32(head + 4, e->started ? 0 : CTS_MTCOLS_GROUP_FRESH);
  cts_st_le32(head + 8, (uint32_t)e->group_raw);
  cts_st_le32(head + 12, e->npackets);
  for (unsigned i = 0; i < CTS_MTCOLS_NCOLS; i++)
    cts_st_le32(head + 16 + 4 * i, (uint32_t)e->col_len[i]);
  e->started = true;
  int r = emit(u, head, sizeof head);
  for (unsigned i = 0; !r && i < CTS_MTCOLS_NCOLS; i++)
    if (e->col_len[i]) r = emit(u, e->col[i], e->col_len[i]);
  memset(e->col_len, 0, sizeof e->col_len);
  e->group_raw = 0;
  e->npackets = 0;
  return r;
}

/* Makes room for `n` more input bytes: no column can grow by more than twice that. */
static int room(cts_mtcols_enc_t *e, size_t n, cts_mtcols_emit_cb emit, void *u) {
  bool full = e->group_raw + n > CTS_MTCOLS_GROUP_RAW_MAX / 2;
  for (unsigned i = 0; !full && i < CTS_MTCOLS_NCOLS; i++)
    full = e->col_len[i] + 2 * n + 32 > CTS_MTCOLS_COL_MAX;
  return full ? emit_group(e, emit, u) : 0;
}

#define COL(e, i)        ((e)->col[i] + (e)->col_len[i])
#define PUT_LEB(e, i, v) ((e)->col_len[i] = (size_t)(leb_put(COL(e, i), (v)) - (e)->col[i]))

static int put_raw(cts_mtcols_enc_t *e, const uint8_t *p, size_t n, cts_mtcols_emit_cb emit,
                   void *u) {
  const int r = room(e, n, emit, u);
  if (r) return r;
  e->col[CTS_MTCOLS_PKT][e->col_len[CTS_MTCOLS_PKT]++] = 1;
  PUT_LEB(e, CTS_MTCOLS_PKT, n);
  memcpy(COL(e, CTS_MTCOLS_RAW), p, n);
  e->col_len[CTS_MTCOLS_RAW] += n;
  e->group_raw += n;
  e->npackets++;
  return 0;
}

static size_t header_size(const uint8_t *p) {
  return cts_ld_le16(p + 28) >= 3 ? 68 : 66;
}

/* Whether the packet `p` (`size` bytes) splits into columns and back to the same bytes;
 * its event count in *nevents. */
static bool packet_fits(const uint8_t *p, size_t size, uint32_t *nevents) {
  const unsigned version = cts_ld_le16(p + 28);
  if (version < 1 || version > 3 || size < header_size(p)) return false;
  const uint8_t *q = p + header_size(p), *const end = p + size;
  uint32_t n = 0;
  while (q < end) {
    if (end - q < 4) return false;
    const unsigned id = cts_ld_le32(q) >> 25;
    q += 4;
    int64_t v;
    if (id == 1) {
      const size_t l = loc_len(q, end);
      if (!l) return false;
      q += l;
    } else if (id == 3 || id == 4) {
      if (!(q = vint_get(q, end, &v))) return false;
    } else if (id == 2 || (id >= 101 && id <= 116)) {
      unsigned nc;
      if (id == 2) {
        if (!(q = vint_get(q, end, &v)) || !(q = vint_get(q, end, &v)) || q >= end) return false;
        q++; /* source */
      }
      if (!(q = vint_get(q, end, &v))) return false;
      if (id == 2) {
        if (end - q < 2) return false;
        nc = cts_ld_le16(q);
        q += 2;
      } else {
        if (q >= end) return false;
        nc = *q++;
      }
      if (!(q = codewords_end(q, end, nc))) return false;
    } else {
      return false; /* trace info (or not memtrace): passed raw */
    }
    n++;
  }
  *nevents = n;
  return true;
}

/* A backtrace: the event's bytes from the common prefix to the last codeword (§5). */
static const uint8_t *put_backtrace(cts_mtcols_enc_t *e, const uint8_t *q, const uint8_t *end,
                                    bool long_form) {
  const uint8_t *const start = q;
  int64_t cp;
  q = vint_get(q, end, &cp);
  unsigned nc;
  if (long_form) {
    nc = cts_ld_le16(q);
    q += 2;
  } else {
    nc = *q++;
  }
  const uint8_t *const cw = q;
  q = codewords_end(q, end, nc);
  const size_t blen = (size_t)(q - start);
  if (blen < BT_KEY) {
    const uint64_t h = key_hash(long_form, start, blen);
    const int64_t slot = bt_find(&e->bt, long_form, start, blen, h);
    if (slot >= 0) {
      PUT_LEB(e, CTS_MTCOLS_BTREF, bt_rank(&e->bt, (uint32_t)slot) + 1u);
      bt_use(&e->bt, (uint32_t)slot);
      return q;
    }
    bt_insert(&e->bt, long_form, start, blen, h, true);
  }
  e->col[CTS_MTCOLS_BTREF][e->col_len[CTS_MTCOLS_BTREF]++] = 0;
  PUT_LEB(e, CTS_MTCOLS_BTCP, zig(cp));
  PUT_LEB(e, CTS_MTCOLS_BTN, nc);
  for (const uint8_t *w = cw; w < q;) {
    const unsigned tag = w[0] & 3u;
    memcpy(COL(e, CTS_MTCOLS_BTCW), w, 2);
    e->col_len[CTS_MTCOLS_BTCW] += 2;
    w += 2;
    if (tag == 2) {
      e->col[CTS_MTCOLS_BTX8][e->col_len[CTS_MTCOLS_BTX8]++] = *w++;
    } else if (tag == 3) {
      memcpy(COL(e, CTS_MTCOLS_BTLIT), w, 8);
      e->col_len[CTS_MTCOLS_BTLIT] += 8;
      w += 8;
    }
  }
  return q;
}

static int put_packet(cts_mtcols_enc_t *e, const uint8_t *p, size_t size, cts_mtcols_emit_cb emit,
                      void *u) {
  uint32_t nevents;
  if (!packet_fits(p, size, &nevents)) {
    /* Not ours to split: as it is (and the time state goes on from its last event, which
     * the decoder does not see: it does not matter, the next delta says where we are). */
    return put_raw(e, p, size, emit, u);
  }
  int r = room(e, size, emit, u);
  if (r) return r;
  e->col[CTS_MTCOLS_PKT][e->col_len[CTS_MTCOLS_PKT]++] = 0;
  PUT_LEB(e, CTS_MTCOLS_PKT, nevents);
  const size_t hs = header_size(p);
  memcpy(COL(e, CTS_MTCOLS_HDR), p, hs);
  e->col_len[CTS_MTCOLS_HDR] += hs;
  uint64_t next_id = cts_ld_le64(p + hs - 16);
  const uint8_t *q = p + hs, *const end = p + size;
  while (q < end) {
    const uint32_t h = cts_ld_le32(q);
    const unsigned id = h >> 25;
    q += 4;
    e->col[CTS_MTCOLS_KIND][e->col_len[CTS_MTCOLS_KIND]++] = (uint8_t)id;
    PUT_LEB(e, CTS_MTCOLS_TIME, (h - e->prev_low) & TIME_MASK);
    e->prev_low = h & TIME_MASK;
    int64_t v;
    if (id == 1) {
      const size_t l = loc_len(q, end);
      memcpy(COL(e, CTS_MTCOLS_LOC), q, l);
      e->col_len[CTS_MTCOLS_LOC] += l;
      q += l;
    } else if (id == 3) {
      q = vint_get(q, end, &v);
      PUT_LEB(e, CTS_MTCOLS_OBJ, zig(v));
    } else if (id == 4) {
      /* As the id's distance from the last collected one (§4): frees tend to come in
       * runs of neighbouring ids, in either direction. */
      q = vint_get(q, end, &v);
      const uint64_t obj = next_id - 1 - (uint64_t)v;
      PUT_LEB(e, CTS_MTCOLS_OBJ, zig((int64_t)(obj - e->prev_obj)));
      e->prev_obj = obj;
    } else if (id == 2) {
      int64_t len, ns;
      q = vint_get(q, end, &len);
      q = vint_get(q, end, &ns);
      PUT_LEB(e, CTS_MTCOLS_LEN, zig(len));
      PUT_LEB(e, CTS_MTCOLS_NSAMP, zig((int64_t)((uint64_t)ns - (uint64_t)len)));
      e->col[CTS_MTCOLS_SRC][e->col_len[CTS_MTCOLS_SRC]++] = *q++;
      q = put_backtrace(e, q, end, true);
      next_id++;
    } else {
      q = put_backtrace(e, q, end, false);
      next_id++;
    }
  }
  e->group_raw += size;
  e->npackets++;
  return 0;
}

/* What `p` starts with: a packet's size, 0 if `n` bytes are too few to tell, or SIZE_MAX if
 * it is no packet (then *skip: bytes up to where one may start). */
static size_t classify(const uint8_t *p, size_t n, size_t *skip) {
  static const uint8_t magic[4] = {0xC1, 0x1F, 0xFC, 0xC1};
  if (n < 8) {
    if (memcmp(p, magic, n < 4 ? n : 4) == 0) return 0;
  } else if (cts_ld_le32(p) == MT_MAGIC) {
    const uint32_t bits = cts_ld_le32(p + 4);
    if (bits % 8 == 0 && bits / 8 >= 66 && bits / 8 <= PACKET_MAX) return bits / 8;
  }
  size_t k = 1;
  while (k < n && k < RAW_PIECE && p[k] != magic[0]) k++;
  *skip = k;
  return SIZE_MAX;
}

/* Takes what it can of `p`: whole packets and what is not a packet; leaves the start of an
 * incomplete packet (*taken: bytes taken). */
static int take(cts_mtcols_enc_t *e, const uint8_t *p, size_t n, size_t *taken,
                cts_mtcols_emit_cb emit, void *u) {
  size_t done = 0;
  int r = 0;
  while (!r && done < n) {
    if (e->raw_left) {
      const size_t k = n - done < e->raw_left ? n - done : e->raw_left;
      const size_t piece = k < RAW_PIECE ? k : RAW_PIECE;
      r = put_raw(e, p + done, piece, emit, u);
      e->raw_left -= piece;
      done += piece;
      continue;
    }
    size_t skip = 0;
    const size_t size = classify(p + done, n - done, &skip);
    if (size == 0 || (size != SIZE_MAX && size > n - done)) break;
    if (size == SIZE_MAX) {
      r = put_raw(e, p + done, skip, emit, u);
      done += skip;
    } else {
      r = put_packet(e, p + done, size, emit, u);
      done += size;
    }
  }
  *taken = done;
  return r;
}

int cts_mtcols_enc_write(cts_mtcols_enc_t *e, const void *buf, size_t len, cts_mtcols_emit_cb emit,
                         void *u) {
  const uint8_t *p = buf;
  while (len) {
    size_t taken;
    int r;
    if (!e->npend) {
      /* Straight from the caller's buffer: the writer hands whole packets. */
      if ((r = take(e, p, len, &taken, emit, u))) return r;
      p += taken;
      len -= taken;
      memcpy(e->pend, p, len); /* less than one packet */
      e->npend = len;
      return 0;
    }
    const size_t k = len < PACKET_MAX - e->npend ? len : PACKET_MAX - e->npend;
    memcpy(e->pend + e->npend, p, k);
    e->npend += k;
    p += k;
    len -= k;
    if ((r = take(e, e->pend, e->npend, &taken, emit, u))) return r;
    memmove(e->pend, e->pend + taken, e->npend - taken);
    e->npend -= taken;
  }
  return 0;
}

void cts_mtcols_enc_reset(cts_mtcols_enc_t *e) {
  e->prev_low = 0;
  e->prev_obj = 0;
  e->started = false;
  bt_reset(&e->bt);
}

int cts_mtcols_enc_flush(cts_mtcols_enc_t *e, cts_mtcols_emit_cb emit, void *u) {
  if (e->npend) {
    /* A packet's start goes raw, and so will its rest. */
    size_t skip;
    const size_t size = classify(e->pend, e->npend, &skip);
    const int r = put_raw(e, e->pend, e->npend, emit, u);
    if (r) return r;
    e->raw_left = size && size != SIZE_MAX ? size - e->npend : 0;
    e->npend = 0;
  }
  return emit_group(e, emit, u);
}

/* --- decoder ---------------------------------------------------------------------- */

struct cts_mtcols_dec {
  uint32_t prev_low;
  uint64_t prev_obj;
  btcache_t bt;
};

size_t cts_mtcols_dec_size(void) {
  return sizeof(cts_mtcols_dec_t);
}

cts_mtcols_dec_t *cts_mtcols_dec_init(void *mem) {
  return mem;
}

int cts_mtcols_group_size(const uint8_t *head, size_t *total, size_t *raw_size, const char **why) {
  if (cts_ld_le32(head) != CTS_MTCOLS_GROUP_MAGIC) {
    *why = "no column group starts here";
    return CTS_E_BAD_COMPRESSION;
  }
  if (cts_ld_le32(head + 4) & ~(uint32_t)CTS_MTCOLS_GROUP_FRESH) {
    *why = "a group with flags this reader does not know";
    return CTS_E_BAD_COMPRESSION;
  }
  size_t t = CTS_MTCOLS_GROUP_HEAD;
  for (unsigned i = 0; i < CTS_MTCOLS_NCOLS; i++) {
    const uint32_t l = cts_ld_le32(head + 16 + 4 * i);
    if (l > CTS_MTCOLS_COL_MAX) {
      *why = "a column longer than the format allows";
      return CTS_E_BAD_COMPRESSION;
    }
    t += l;
  }
  const uint32_t raw = cts_ld_le32(head + 8);
  if (raw == 0 || raw > CTS_MTCOLS_GROUP_RAW_MAX) {
    *why = "a group's size is out of bounds";
    return CTS_E_BAD_COMPRESSION;
  }
  *total = t;
  *raw_size = raw;
  return 0;
}

typedef struct {
  const uint8_t *p, *end;
} cur_t;

#define FAIL(msg) \
  do {            \
    *why = (msg); \
    goto fail;    \
  } while (0)

static bool leb_get(cur_t *c, uint64_t *v) {
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64 && c->p < c->end; shift += 7) {
    const uint8_t b = *c->p++;
    x |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

static bool bytes_get(cur_t *c, size_t n, const uint8_t **out) {
  if ((size_t)(c->end - c->p) < n) return false;
  *out = c->p;
  c->p += n;
  return true;
}

int cts_mtcols_dec_group(cts_mtcols_dec_t *d, const uint8_t *g, size_t len, uint8_t *out,
                         const char **why, size_t *at) {
  size_t total, raw_size;
  if (len < CTS_MTCOLS_GROUP_HEAD) {
    *why = "a group shorter than its header";
    *at = 0;
    return CTS_E_BAD_COMPRESSION;
  }
  int r = cts_mtcols_group_size(g, &total, &raw_size, why);
  if (r || total != len) {
    if (!r) *why = "a group's columns do not fill it";
    *at = 0;
    return CTS_E_BAD_COMPRESSION;
  }
  cur_t col[CTS_MTCOLS_NCOLS];
  const uint8_t *p = g + CTS_MTCOLS_GROUP_HEAD;
  for (unsigned i = 0; i < CTS_MTCOLS_NCOLS; i++) {
    const size_t l = cts_ld_le32(g + 16 + 4 * i);
    col[i] = (cur_t){p, p + l};
    p += l;
  }
  if (cts_ld_le32(g + 4) & CTS_MTCOLS_GROUP_FRESH) {
    d->prev_low = 0;
    d->prev_obj = 0;
    bt_reset(&d->bt);
  }
  const uint32_t npackets = cts_ld_le32(g + 12);
  uint8_t *o = out, *const oend = out + raw_size;
  for (uint32_t k = 0; k < npackets; k++) {
    const uint8_t *b;
    uint64_t v;
    if (!bytes_get(&col[CTS_MTCOLS_PKT], 1, &b) || !leb_get(&col[CTS_MTCOLS_PKT], &v))
      FAIL("the packet column ends early");
    if (*b == 1) {
      const uint8_t *src;
      if (v > (size_t)(oend - o)) FAIL("more bytes than the group's size");
      if (!bytes_get(&col[CTS_MTCOLS_RAW], v, &src)) FAIL("the raw column ends early");
      memcpy(o, src, v);
      o += v;
      continue;
    }
    if (*b != 0) FAIL("an unknown packet mode");
    uint64_t nevents = v;
    const uint8_t *hdr;
    if (!bytes_get(&col[CTS_MTCOLS_HDR], 30, &hdr)) FAIL("the header column ends early");
    col[CTS_MTCOLS_HDR].p -= 30;
    const size_t hs = header_size(hdr);
    const size_t size = cts_ld_le32(hdr + 4) / 8;
    if (cts_ld_le32(hdr) != MT_MAGIC || size < hs || size > (size_t)(oend - o))
      FAIL("a packet header out of bounds");
    if (!bytes_get(&col[CTS_MTCOLS_HDR], hs, &hdr)) FAIL("the header column ends early");
    uint8_t *const pend = o + size;
    memcpy(o, hdr, hs);
    o += hs;
    uint64_t next_id = cts_ld_le64(hdr + hs - 16);
    /* Every event is at least 5 bytes, so a count past that cannot be right. */
    if (nevents > (size_t)(pend - o) / 5) FAIL("more events than the packet can hold");
      /* Room for what is written before it is checked (a long alloc's fields, a codeword
       * with its literal): up to CTS_MTCOLS_SLACK bytes past the packet, in `out`'s slack;
       * each event must end within the packet. */
#define NEED(n)                                              \
  do {                                                       \
    if ((size_t)(pend + CTS_MTCOLS_SLACK - o) < (size_t)(n)) \
      FAIL("an event runs past its packet's size");          \
  } while (0)
    while (nevents--) {
      const uint8_t *kind;
      uint64_t dt;
      if (!bytes_get(&col[CTS_MTCOLS_KIND], 1, &kind)) FAIL("the kind column ends early");
      if (!leb_get(&col[CTS_MTCOLS_TIME], &dt)) FAIL("the time column ends early");
      const unsigned id = *kind;
      d->prev_low = (uint32_t)((d->prev_low + dt) & TIME_MASK);
      NEED(4);
      cts_st_le32(o, (uint32_t)id << 25 | d->prev_low);
      o += 4;
      if (id == 1) {
        cur_t *const lc = &col[CTS_MTCOLS_LOC];
        const size_t l = loc_len(lc->p, lc->end);
        if (!l) FAIL("the location column ends early");
        NEED(l);
        memcpy(o, lc->p, l);
        lc->p += l;
        o += l;
      } else if (id == 3 || id == 4) {
        if (!leb_get(&col[CTS_MTCOLS_OBJ], &v)) FAIL("the object column ends early");
        int64_t delta = unzig(v);
        if (id == 4) {
          const uint64_t obj = d->prev_obj + (uint64_t)delta;
          d->prev_obj = obj;
          delta = (int64_t)(next_id - 1 - obj);
        }
        NEED(9);
        o = vint_put(o, delta);
      } else if (id == 2 || (id >= 101 && id <= 116)) {
        const bool long_form = id == 2;
        if (long_form) {
          uint64_t ln, ns;
          const uint8_t *src;
          if (!leb_get(&col[CTS_MTCOLS_LEN], &ln) || !leb_get(&col[CTS_MTCOLS_NSAMP], &ns) ||
              !bytes_get(&col[CTS_MTCOLS_SRC], 1, &src))
            FAIL("an allocation column ends early");
          const int64_t l = unzig(ln);
          NEED(19);
          o = vint_put(o, l);
          o = vint_put(o, (int64_t)((uint64_t)l + (uint64_t)unzig(ns)));
          *o++ = *src;
        }
        next_id++;
        uint64_t ref;
        if (!leb_get(&col[CTS_MTCOLS_BTREF], &ref)) FAIL("the backtrace column ends early");
        btcache_t *const c = &d->bt;
        if (ref) {
          if (ref > c->live) FAIL("a backtrace rank past the cache");
          const uint32_t slot = bt_at_rank(c, (uint32_t)(ref - 1));
          if (c->key[slot][0] != long_form) FAIL("a cached backtrace of the other form");
          const size_t l = c->len[slot] - 1u;
          NEED(l);
          memcpy(o, c->key[slot] + 1, l);
          o += l;
          bt_use(c, slot);
          if (o > pend) FAIL("an event runs past its packet's size");
          continue;
        }
        uint64_t cp, nc;
        if (!leb_get(&col[CTS_MTCOLS_BTCP], &cp) || !leb_get(&col[CTS_MTCOLS_BTN], &nc))
          FAIL("a backtrace column ends early");
        if (nc > (long_form ? 65535u : 255u)) FAIL("a codeword count out of bounds");
        uint8_t *const start = o;
        NEED(11);
        o = vint_put(o, unzig(cp));
        if (long_form) {
          cts_st_le16(o, (uint16_t)nc);
          o += 2;
        } else {
          *o++ = (uint8_t)nc;
        }
        for (uint64_t i = 0; i < nc; i++) {
          const uint8_t *w, *x;
          if (!bytes_get(&col[CTS_MTCOLS_BTCW], 2, &w)) FAIL("the codeword column ends early");
          const unsigned tag = w[0] & 3u;
          NEED(10);
          memcpy(o, w, 2);
          o += 2;
          if (tag == 2) {
            if (!bytes_get(&col[CTS_MTCOLS_BTX8], 1, &x)) FAIL("the count column ends early");
            *o++ = *x;
          } else if (tag == 3) {
            if (!bytes_get(&col[CTS_MTCOLS_BTLIT], 8, &x)) FAIL("the literal column ends early");
            memcpy(o, x, 8);
            o += 8;
          }
        }
        const size_t blen = (size_t)(o - start);
        if (blen < BT_KEY) {
          bt_insert(c, long_form, start, blen, 0, false);
        }
      } else {
        FAIL("an unknown event kind");
      }
      if (o > pend) FAIL("an event runs past its packet's size");
    }
#undef NEED
    if (o != pend) FAIL("a packet's events do not fill it");
  }
  if (o != oend) FAIL("the packets do not fill the group's size");
  for (unsigned i = 0; i < CTS_MTCOLS_NCOLS; i++)
    if (col[i].p != col[i].end) FAIL("a column holds more than its events use");
  return 0;
fail:
  *at = (size_t)(o - out);
  return CTS_E_BAD_COMPRESSION;
}
