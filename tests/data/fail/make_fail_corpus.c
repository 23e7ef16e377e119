/* SPDX-License-Identifier: MIT */
/* make_fail_corpus OUTDIR: writes the hand-made corrupt memtrace traces of tests/data/fail.
 *
 * Each case starts from the same small, valid v002 trace made with ctfscope's writer and
 * changes a few bytes so that the trace has exactly one defect. Next to NAME.ctf it writes
 * NAME.ctf.expect: the error name the reader must report and, on line 2, the byte offset
 * it must report (cts_mt_reader_error_offset()); for traces that must read successfully,
 * "OK", the warning expected, and the warning's offset.
 *
 * The expected offsets are worked out here from the format (docs/formats/memtrace.md), by
 * a small event walker of our own, never by running the reader under test. The output is
 * deterministic: a CTest test regenerates it and compares it with the committed files. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/ctfscope.h>

/* ---- bytes ---------------------------------------------------------------------------- */

typedef struct bytes {
  uint8_t *data;
  size_t len, cap;
} bytes_t;

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("make_fail_corpus: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static void bytes_append(bytes_t *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) die("out of memory");
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static bytes_t bytes_copy(const bytes_t *src) {
  bytes_t b = {0};
  bytes_append(&b, src->data, src->len);
  return b;
}

static void bytes_insert(bytes_t *b, size_t at, const void *p, size_t n) {
  bytes_append(b, p, n); /* grows; the tail is moved into place below */
  memmove(b->data + at + n, b->data + at, b->len - n - at);
  memcpy(b->data + at, p, n);
}

/* Little-endian fields (§2), written independently of the codec's own helpers. */
static uint64_t ld(const uint8_t *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void st(uint8_t *p, unsigned n, uint64_t v) {
  for (unsigned i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- the valid base trace -------------------------------------------------------------- */

/* v002 packet header fields (§4). */
enum {
  H_MAGIC = 0,
  H_SIZE = 4,
  H_TIME_BEGIN = 8,
  H_TIME_END = 16,
  H_VERSION = 28,
  H_PID = 30,
  H_VERIFY_IX = 38,
  H_VERIFY_VAL = 42,
  H_ID_BEGIN = 50,
  H_ID_END = 58,
  HEADER = 66,
};

#define START_US     1700000000000000ull /* low 25 bits far from wrapping (§5) */
#define PID          4242u
#define CONTEXT      "ctfscope fail corpus"
#define LATE_DEFNAME "late_fn"

/* Location codes: C1 has no debug info, C3 has an inlined frame, C5 is first needed by
 * the second event packet. */
enum { C1 = 0x1000, C2 = 0x2000, C3 = 0x3000, C4 = 0x4000, C5 = 0x5000 };

/* The packets of the base trace, in file order. */
enum { P_INFO, P_LOC1, P_EV1, P_LOC2, P_EV2, P_END, NPACKETS };
/* Events of P_EV1 and P_EV2, in order. */
enum { EV1_A0, EV1_A1, EV1_PROMOTE_A1, EV1_COLLECT_A0 };
enum { EV2_A2, EV2_COLLECT_A1, EV2_COLLECT_A2 };

#define MAX_EVENTS 16

typedef struct base {
  bytes_t bytes;
  size_t npackets;
  size_t pkt[NPACKETS + 1];  /* packet offsets */
  size_t size[NPACKETS + 1]; /* packet sizes in bytes */
  size_t nevents[NPACKETS];
  size_t ev[NPACKETS][MAX_EVENTS]; /* absolute event offsets */
} base_t;

static int record_packet(void *user_data, const void *buf, size_t len) {
  base_t *b = user_data;
  if (b->npackets >= NPACKETS) die("the writer made more packets than expected");
  b->pkt[b->npackets] = b->bytes.len;
  b->size[b->npackets] = len;
  b->npackets++;
  bytes_append(&b->bytes, buf, len);
  return 0;
}

static size_t resolve(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)user_data;
  if (max < 2) return 0;
  switch (code) {
    case C2:
      out[0] = (cts_mt_location_t){10, 2, 20, "main.c", "main"};
      return 1;
    case C3:
      out[0] = (cts_mt_location_t){30, 4, 18, "util.c", "helper"};
      out[1] = (cts_mt_location_t){44, 8, 30, "util.c", "inner"};
      return 2;
    case C4:
      out[0] = (cts_mt_location_t){7, 0, 12, "alloc.c", "make_obj"};
      return 1;
    case C5:
      out[0] = (cts_mt_location_t){99, 1, 9, "late.c", LATE_DEFNAME};
      return 1;
    default:
      return 0;
  }
}

static size_t vint_size(const uint8_t *p) {
  return p[0] < 253 ? 1 : p[0] == 253 ? 3 : p[0] == 254 ? 5 : 9;
}

static size_t codewords_size(const uint8_t *p, unsigned n) {
  size_t q = 0;
  for (unsigned i = 0; i < n; i++) {
    const unsigned tag = (unsigned)ld(p + q, 2) & 3u;
    q += 2 + (tag == 2 ? 1 : tag == 3 ? 8 : 0);
  }
  return q;
}

/* Size of the valid event at p (§5.1, §7, §8.1, §9). */
static size_t event_size(const uint8_t *p) {
  const unsigned id = (unsigned)(ld(p, 4) >> 25);
  size_t q = 4;
  if (id == 1) {
    const unsigned nlocs = p[12];
    q = 13;
    for (unsigned i = 0; i < nlocs; i++) {
      const uint64_t bits = ld(p + q, 6);
      q += 6;
      if (((bits >> 38) & 31) == 31) q += strlen((const char *)p + q) + 1;
      if (((bits >> 43) & 31) == 31) q += strlen((const char *)p + q) + 1;
    }
  } else if (id == 2) {
    q += vint_size(p + q);
    q += vint_size(p + q);
    q += 1;
    q += vint_size(p + q);
    const unsigned n = (unsigned)ld(p + q, 2);
    q += 2;
    q += codewords_size(p + q, n);
  } else if (id == 3 || id == 4) {
    q += vint_size(p + q);
  } else if (id >= 101 && id <= 116) {
    q += vint_size(p + q);
    const unsigned n = p[q++];
    q += codewords_size(p + q, n);
  } else {
    die("unexpected event id %u in the base trace", id);
  }
  return q;
}

static unsigned event_id(const base_t *b, size_t off) {
  return (unsigned)(ld(b->bytes.data + off, 4) >> 25);
}

static void expect_event(const base_t *b, int pkt, int ev, unsigned id) {
  if ((size_t)ev >= b->nevents[pkt] || event_id(b, b->ev[pkt][ev]) != id)
    die("the base trace changed: event %d of packet %d is not of id %u", ev, pkt, id);
}

static void make_base(base_t *b) {
  memset(b, 0, sizeof *b);
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 0.01;
  cfg.executable_name = "/opt/ctfscope/fail_base";
  cfg.host_name = "testhost";
  cfg.runtime_params = "a=2";
  cfg.context = CONTEXT;
  cfg.pid = PID;
  cfg.start_time_us = START_US;
  cfg.max_backtrace_frames = 64;
  cfg.write = record_packet;
  cfg.write_user_data = b;
  cfg.resolve = resolve;
  void *mem = NULL;
  if (posix_memalign(&mem, 64, cts_mt_writer_size(&cfg)) != 0) die("out of memory");
  cts_mt_writer_t *w;
  uint64_t a0, a1, a2;
  const uint64_t bt0[] = {C1, C2, C4}, bt1[] = {C1, C2, C3}, bt2[] = {C1, C2, C5};
  int e = cts_mt_writer_init(&w, mem, cts_mt_writer_size(&cfg), &cfg);
  if (!e) e = cts_mt_writer_alloc(w, START_US + 10, 5, 2, CTS_MT_SOURCE_MAJOR, bt0, 3, &a0);
  if (!e) e = cts_mt_writer_alloc(w, START_US + 20, 3, 1, CTS_MT_SOURCE_MINOR, bt1, 3, &a1);
  if (!e) e = cts_mt_writer_promote(w, START_US + 25, a1);
  if (!e) e = cts_mt_writer_collect(w, START_US + 30, a0);
  if (!e) e = cts_mt_writer_flush(w);
  if (!e) e = cts_mt_writer_alloc(w, START_US + 40, 300, 4, CTS_MT_SOURCE_MAJOR, bt2, 3, &a2);
  if (!e) e = cts_mt_writer_collect(w, START_US + 50, a1);
  if (!e) e = cts_mt_writer_collect(w, START_US + 60, a2);
  if (!e) e = cts_mt_writer_flush(w);
  if (!e) e = cts_mt_writer_close(w); /* an empty event packet: P_END */
  free(mem);
  if (e) die("writing the base trace failed: %s", cts_err_name(e));
  if (b->npackets != NPACKETS) die("the base trace has %zu packets, not %d", b->npackets, NPACKETS);
  b->pkt[NPACKETS] = b->bytes.len;

  for (int k = P_LOC1; k < NPACKETS; k++) {
    size_t off = b->pkt[k] + HEADER;
    const size_t end = b->pkt[k] + b->size[k];
    while (off < end) {
      if (b->nevents[k] == MAX_EVENTS) die("too many events in packet %d", k);
      b->ev[k][b->nevents[k]++] = off;
      off += event_size(b->bytes.data + off);
    }
    if (off != end) die("packet %d: events do not fill the packet", k);
  }
  /* The cases below rely on this layout; stop if the writer ever changes it. */
  const uint8_t *d = b->bytes.data;
  if (b->nevents[P_LOC1] != 4 || b->nevents[P_EV1] != 4 || b->nevents[P_LOC2] != 1 ||
      b->nevents[P_EV2] != 3 || b->nevents[P_END] != 0)
    die("the base trace has an unexpected number of events per packet");
  static const uint64_t loc1_codes[] = {C1, C2, C4, C3};
  for (int i = 0; i < 4; i++)
    if (ld(d + b->ev[P_LOC1][i] + 4, 8) != loc1_codes[i]) die("unexpected location order");
  if (ld(d + b->ev[P_LOC2][0] + 4, 8) != C5) die("unexpected second location packet");
  expect_event(b, P_EV1, EV1_A0, 2);
  expect_event(b, P_EV1, EV1_A1, 103);
  expect_event(b, P_EV1, EV1_PROMOTE_A1, 3);
  expect_event(b, P_EV1, EV1_COLLECT_A0, 4);
  expect_event(b, P_EV2, EV2_A2, 2);
  expect_event(b, P_EV2, EV2_COLLECT_A1, 4);
  expect_event(b, P_EV2, EV2_COLLECT_A2, 4);
  /* a0: length 5, 2 samples, major, common prefix 0, then the u16 codeword count. */
  const uint8_t *first = d + b->ev[P_EV1][EV1_A0];
  if (first[4] != 5 || first[5] != 2 || first[6] != 1 || first[7] != 0 || ld(first + 8, 2) != 3 ||
      (ld(first + 10, 2) & 3) != 3 || ld(first + 12, 8) != C1)
    die("unexpected layout of the first allocation");
  if (ld(d + b->pkt[P_EV2] + H_VERIFY_IX, 2) == 0xFFFF)
    die("the second event packet should carry a cache verifier");
}

/* ---- writing cases ------------------------------------------------------------------- */

static const char *outdir;
static int ncases;

static void write_file(const char *name, const char *suffix, const void *data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%s", outdir, name, suffix);
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot create %s: %s", path, strerror(errno));
  if ((len && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
    die("cannot write %s: %s", path, strerror(errno));
}

/* The trace must fail with `error` found at byte `offset`. Frees b. */
static void fails(const char *name, bytes_t *b, const char *error, uint64_t offset) {
  char expect[128];
  snprintf(expect, sizeof expect, "%s\n%llu\n", error, (unsigned long long)offset);
  write_file(name, ".ctf", b->data, b->len);
  write_file(name, ".ctf.expect", expect, strlen(expect));
  free(b->data);
  ncases++;
}

/* The trace must read successfully, with `warning` (first) at byte `offset`. Frees b. */
static void warns(const char *name, bytes_t *b, const char *warning, uint64_t offset) {
  char expect[128];
  snprintf(expect, sizeof expect, "OK\n%s\n%llu\n", warning, (unsigned long long)offset);
  write_file(name, ".ctf", b->data, b->len);
  write_file(name, ".ctf.expect", expect, strlen(expect));
  free(b->data);
  ncases++;
}

/* Replaces the 7-bit event id of the event header at off, keeping its time (§5). */
static void set_event_id(bytes_t *b, size_t off, unsigned id) {
  const uint64_t h = ld(b->data + off, 4);
  st(b->data + off, 4, (h & 0x1FFFFFFu) | ((uint64_t)id << 25));
}

static void set_event_time(bytes_t *b, size_t off, uint64_t t) {
  const uint64_t h = ld(b->data + off, 4);
  st(b->data + off, 4, (h & ~(uint64_t)0x1FFFFFFu) | (t & 0x1FFFFFFu));
}

static void set_sample_rate(const base_t *base, const char *name, uint64_t bits) {
  bytes_t b = bytes_copy(&base->bytes);
  st(b.data + HEADER + 4, 8, bits);
  fails(name, &b, "CTS_E_BAD_SAMPLE_RATE", 0);
}

/* ---- the cases ----------------------------------------------------------------------- */

static void make_cases(const base_t *base) {
  const size_t *pkt = base->pkt;
  const size_t a0 = base->ev[P_EV1][EV1_A0];
  bytes_t b;

  /* Packet framing (§4). */
  b = bytes_copy(&base->bytes);
  st(b.data + H_MAGIC, 4, 0xDEADBEEF);
  fails("bad_magic_first", &b, "CTS_E_BAD_MAGIC", 0);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_LOC2] + H_MAGIC, 4, 0xC1FC1FC0);
  fails("bad_magic_later", &b, "CTS_E_BAD_MAGIC", pkt[P_LOC2]);

  b = bytes_copy(&base->bytes);
  st(b.data + H_VERSION, 2, 0);
  fails("bad_version_0", &b, "CTS_E_BAD_VERSION", 0);

  b = bytes_copy(&base->bytes);
  st(b.data + H_VERSION, 2, 4);
  fails("bad_version_4", &b, "CTS_E_BAD_VERSION", 0);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV1] + H_VERSION, 2, 1);
  fails("version_changes", &b, "CTS_E_VERSION_MISMATCH", pkt[P_EV1]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_LOC1] + H_SIZE, 4, base->size[P_LOC1] * 8 + 4);
  fails("packet_size_not_bytes", &b, "CTS_E_PACKET_SIZE", pkt[P_LOC1]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV1] + H_SIZE, 4, 40 * 8);
  fails("packet_below_header", &b, "CTS_E_PACKET_SIZE", pkt[P_EV1]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV1] + H_SIZE, 4, 0xFFFFFFF8u);
  fails("packet_too_large", &b, "CTS_E_PACKET_TOO_LARGE", pkt[P_EV1]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV1] + H_TIME_END, 8, ld(b.data + pkt[P_EV1] + H_TIME_BEGIN, 8) - 1);
  fails("packet_times_reversed", &b, "CTS_E_PACKET_TIMES", pkt[P_EV1]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV2] + H_ID_END, 8, ld(b.data + pkt[P_EV2] + H_ID_BEGIN, 8) - 1);
  fails("packet_ids_reversed", &b, "CTS_E_PACKET_IDS", pkt[P_EV2]);

  /* The trace-info packet (§6). */
  b = bytes_copy(&base->bytes);
  bytes_insert(&b, base->size[P_INFO], "xyz", 3);
  st(b.data + H_SIZE, 4, (base->size[P_INFO] + 3) * 8);
  fails("info_trailing_bytes", &b, "CTS_E_BAD_TRACE_INFO", base->size[P_INFO]);

  b = bytes_copy(&base->bytes);
  set_event_id(&b, HEADER, 1);
  fails("info_wrong_event", &b, "CTS_E_BAD_TRACE_INFO", 0);

  set_sample_rate(base, "sample_rate_zero", 0);
  set_sample_rate(base, "sample_rate_nan", 0x7FF8000000000000ull);
  set_sample_rate(base, "sample_rate_above_one", 0x3FF8000000000000ull); /* 1.5 */

  /* The context is the last string of the trace info: without its NUL it runs to the end. */
  b = bytes_copy(&base->bytes);
  b.data[base->size[P_INFO] - 1] = 'X';
  fails("info_string_unterminated", &b, "CTS_E_UNTERMINATED_STRING",
        base->size[P_INFO] - 1 - strlen(CONTEXT));

  /* Events (§5). */
  b = bytes_copy(&base->bytes);
  set_event_id(&b, base->ev[P_EV1][EV1_PROMOTE_A1], 77);
  fails("unknown_event", &b, "CTS_E_UNKNOWN_EVENT", base->ev[P_EV1][EV1_PROMOTE_A1]);

  /* The collect ends its packet: a 9-byte vint tag leaves 8 bytes missing. */
  b = bytes_copy(&base->bytes);
  const size_t collect_a0 = base->ev[P_EV1][EV1_COLLECT_A0];
  if (collect_a0 + 5 != pkt[P_EV1] + base->size[P_EV1]) die("collect a0 should end its packet");
  b.data[collect_a0 + 4] = 0xFF;
  fails("event_vint_cut", &b, "CTS_E_EVENT_OVERRUN", collect_a0);

  /* Two stray bytes after the last event: too short for an event header. */
  b = bytes_copy(&base->bytes);
  bytes_insert(&b, pkt[P_EV1] + base->size[P_EV1], "\x01\x02", 2);
  st(b.data + pkt[P_EV1] + H_SIZE, 4, (base->size[P_EV1] + 2) * 8);
  fails("event_header_cut", &b, "CTS_E_EVENT_OVERRUN", pkt[P_EV1] + base->size[P_EV1]);

  b = bytes_copy(&base->bytes);
  set_event_time(&b, a0, ld(b.data + pkt[P_EV1] + H_TIME_END, 8) + 1);
  fails("event_time_after_packet", &b, "CTS_E_EVENT_TIME", a0);

  b = bytes_copy(&base->bytes);
  set_event_time(&b, collect_a0, START_US + 15); /* the promote before it is at +25 */
  fails("time_backwards", &b, "CTS_E_TIME_NOT_MONOTONE", collect_a0);

  b = bytes_copy(&base->bytes);
  set_event_id(&b, base->ev[P_EV2][EV2_COLLECT_A1], 0);
  fails("second_trace_info", &b, "CTS_E_DUPLICATE_TRACE_INFO", base->ev[P_EV2][EV2_COLLECT_A1]);

  /* Allocations (§8.1). a0 = header, length 5, nsamples 2, source, prefix 0, u16 count. */
  b = bytes_copy(&base->bytes);
  b.data[a0 + 6] = 3;
  fails("bad_source", &b, "CTS_E_BAD_SOURCE", a0);

  b = bytes_copy(&base->bytes);
  st(b.data + a0 + 8, 2, 0xFFFF);
  fails("backtrace_too_long", &b, "CTS_E_BACKTRACE_TOO_LONG", a0);

  b = bytes_copy(&base->bytes);
  st(b.data + a0 + 12, 8, 0);
  fails("location_zero_literal", &b, "CTS_E_LOCATION_CODE_ZERO", a0);

  /* The first codeword becomes a hit (tag 0) on its bucket, which is still empty. */
  b = bytes_copy(&base->bytes);
  st(b.data + a0 + 10, 2, ld(b.data + a0 + 10, 2) & ~3u);
  fails("location_zero_empty_bucket", &b, "CTS_E_LOCATION_CODE_ZERO", a0);

  /* The event packet comes before the location packet that defines its codes (§7.3). */
  b = bytes_copy(&base->bytes);
  memcpy(b.data + pkt[P_LOC1], base->bytes.data + pkt[P_EV1], base->size[P_EV1]);
  memcpy(b.data + pkt[P_LOC1] + base->size[P_EV1], base->bytes.data + pkt[P_LOC1],
         base->size[P_LOC1]);
  fails("location_used_before_defined", &b, "CTS_E_LOCATION_UNDEFINED",
        pkt[P_LOC1] + (a0 - pkt[P_EV1]));

  /* Promote and collect (§9). */
  b = bytes_copy(&base->bytes);
  b.data[base->ev[P_EV1][EV1_PROMOTE_A1] + 4] = 7;
  fails("promote_unknown_object", &b, "CTS_E_BAD_OBJECT", base->ev[P_EV1][EV1_PROMOTE_A1]);

  b = bytes_copy(&base->bytes);
  b.data[base->ev[P_EV2][EV2_COLLECT_A2] + 4] = 9;
  fails("collect_unknown_object", &b, "CTS_E_BAD_OBJECT", base->ev[P_EV2][EV2_COLLECT_A2]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV1] + H_ID_END, 8, ld(b.data + pkt[P_EV1] + H_ID_END, 8) + 1);
  fails("alloc_id_sync", &b, "CTS_E_ALLOC_ID_SYNC", pkt[P_EV1]);

  /* Locations (§7). The second location of P_LOC1 is C2: new file, new function name. */
  b = bytes_copy(&base->bytes);
  st(b.data + base->ev[P_LOC1][0] + 4, 8, 0);
  fails("location_zero_defined", &b, "CTS_E_LOCATION_CODE_ZERO", base->ev[P_LOC1][0]);

  const size_t loc_c2 = base->ev[P_LOC1][1];
  const uint64_t c2_high = ld(base->bytes.data + loc_c2 + 17, 2); /* location bits 32..47 */
  if (((c2_high >> 6) & 31) != 31 || ((c2_high >> 11) & 31) != 31)
    die("C2 should bring a new file and a new function name");
  b = bytes_copy(&base->bytes);
  st(b.data + loc_c2 + 17, 2, (c2_high & ~(31u << 6)) | (5u << 6));
  fails("mtf_filename_empty_slot", &b, "CTS_E_MTF_INDEX", loc_c2);

  b = bytes_copy(&base->bytes);
  st(b.data + loc_c2 + 17, 2, (c2_high & ~(31u << 11)) | (3u << 11));
  fails("mtf_defname_empty_slot", &b, "CTS_E_MTF_INDEX", loc_c2);

  b = bytes_copy(&base->bytes);
  st(b.data + base->ev[P_LOC2][0] + 4, 8, C4);
  fails("location_redefined", &b, "CTS_E_LOCATION_CONFLICT", base->ev[P_LOC2][0]);

  /* C5's function name is the last string of its packet. */
  const size_t loc2_end = pkt[P_LOC2] + base->size[P_LOC2];
  const size_t late = loc2_end - 1 - strlen(LATE_DEFNAME);
  if (memcmp(base->bytes.data + late, LATE_DEFNAME, sizeof LATE_DEFNAME) != 0)
    die("the second location packet should end with \"%s\"", LATE_DEFNAME);
  b = bytes_copy(&base->bytes);
  b.data[loc2_end - 1] = 'X';
  fails("location_string_unterminated", &b, "CTS_E_UNTERMINATED_STRING", late);

  /* Backtrace cache verifier of the second event packet (§8.6). */
  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV2] + H_VERIFY_IX, 2, 20000);
  fails("cache_index_out_of_range", &b, "CTS_E_CACHE_INDEX", pkt[P_EV2]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_EV2] + H_VERIFY_VAL, 8, ld(b.data + pkt[P_EV2] + H_VERIFY_VAL, 8) ^ 1);
  fails("cache_verify_mismatch", &b, "CTS_E_CACHE_VERIFY", pkt[P_EV2]);

  /* Where the trace ends (§11). */
  b = bytes_copy(&base->bytes);
  b.len = pkt[P_LOC2] + 40;
  fails("truncated_header", &b, "CTS_E_TRUNCATED_HEADER", pkt[P_LOC2]);

  b = bytes_copy(&base->bytes);
  b.len = 0;
  fails("empty_file", &b, "CTS_E_EMPTY", 0);

  b = bytes_copy(&base->bytes);
  b.len = 100;
  if (base->size[P_INFO] <= 100) die("the trace-info packet should be longer than 100 bytes");
  fails("info_packet_truncated", &b, "CTS_E_EMPTY", 0);

  /* Traces that read successfully with a warning. */
  b = bytes_copy(&base->bytes);
  b.len = pkt[P_EV2] + HEADER + (base->size[P_EV2] - HEADER) / 2; /* header complete */
  warns("warn_truncated_last_packet", &b, "CTS_E_TRUNCATED_PACKET", pkt[P_EV2]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_END] + H_PID, 8, PID + 1);
  warns("warn_wrong_pid", &b, "CTS_E_WRONG_PID", pkt[P_END]);

  b = bytes_copy(&base->bytes);
  st(b.data + pkt[P_END] + H_ID_BEGIN, 8, ld(b.data + pkt[P_END] + H_ID_BEGIN, 8) + 5);
  st(b.data + pkt[P_END] + H_ID_END, 8, ld(b.data + pkt[P_END] + H_ID_END, 8) + 5);
  warns("warn_skipped_packet", &b, "CTS_E_SKIPPED_PACKET", pkt[P_END]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_fail_corpus OUTDIR\n");
    return 2;
  }
  outdir = argv[1];
  base_t base;
  make_base(&base);
  make_cases(&base);
  free(base.bytes.data);
  fprintf(stderr, "make_fail_corpus: wrote %d cases to %s\n", ncases, outdir);
  return 0;
}
