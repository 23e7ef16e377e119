/* SPDX-License-Identifier: MIT */
/* libFuzzer target: writer → reader round trip.
 *
 * The input is a small program (decoded with fuzz_data.h): a writer configuration, a pool
 * of location codes and of names, a resolver profile, then a sequence of operations —
 * allocations whose backtraces are drawn from the pool (up to a few thousand frames, in
 * patterns that exercise common prefixes, prediction runs and the 4 KiB truncation),
 * collects and promotes of existing objects, time steps (including jumps of more than the
 * 30 s a packet may span, and steps backwards that the writer must clamp), explicit
 * flushes, invalid calls, and optionally a write error. The trace is written into memory,
 * read back, and the target aborts unless (for both backtrace encodings, memtrace's and the
 * compact one):
 *  - every packet reaches the write callback whole, in one call, and within 32 KiB;
 *  - the trace info, every event (time, id, length, samples, source, backtrace) and every
 *    location definition read back equal what was written, after the format's clamping
 *    (line ≤ 0xFFFFF, start ≤ 0xFF, end ≤ 0x3FF) and memtrace's "<unknown>" sentinel for
 *    definitions too large to encode (memtrace.md §7.1);
 *  - every code of a backtrace read back was defined by an earlier location event;
 *  - a backtrace comes back whole, or, when its codewords hit the 4 KiB bound (§8.5), as a
 *    prefix holding at least the frames that bound must let through;
 *  - invalid calls return CTS_E_INVAL, and a write error is returned by the call that
 *    hit it and by every later call. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/memtrace.h>

#include "fuzz_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

#define MAX_OPS          2000u
#define MAX_EVENTS       (1u << 15) /* bursts make v3's 10 000-id chunks reachable (§12) */
#define MAX_BURST        4096u
#define MAX_POOL         64u
#define MAX_NAMES        8u
#define MAX_DEPTH        5000u
#define MAX_TOTAL_FRAMES (1u << 18)
/* Frames written over all events (bursts reuse one backtrace many times): keeps an input
 * to a few milliseconds, since the writer and the reader both walk every frame. */
#define MAX_WORK_FRAMES   (1u << 17)
#define MAX_WRITER_FRAMES 6000u
#define MAX_RESOLVED      300u /* the resolver may return more than the 255 the format allows */
#define WRITE_ERROR       (-5) /* -EIO, injected by the write callback */
/* The writer caps each trace-info string so that the packet stays within 32 KiB. */
#define INFO_STRING_CAP 8000u
/* §8.5: a backtrace is cut only once its codewords pass 4096 − 10 − 2 bytes; a frame costs
 * at most 10 bytes, so a cut backtrace still holds this many frames past its prefix. */
#define MIN_FRAMES_BEFORE_CUT 400u
#define WORST_LOCATION_BYTES  4096u /* §7.1: larger definitions become the sentinel */
#define SIZED_PROFILE         0xE0u /* resolver profiles where the code sets the size */
#define DEFINED_SLOTS         256u  /* > MAX_POOL: the set of defined codes never fills */

typedef struct expected_event {
  cts_mt_event_kind_t kind;
  uint8_t source;
  uint64_t time_us, obj_id, length, nsamples;
  size_t frames_start, depth;
} expected_event_t;

typedef struct program {
  /* writer configuration */
  cts_mt_writer_config_t cfg;
  char *info_strings[4];
  /* what backtraces and the resolver draw from */
  uint64_t codes[MAX_POOL];
  size_t ncodes;
  char *names[MAX_NAMES];
  size_t nnames;
  uint64_t resolver_seed;
  uint8_t resolver_profile;
  char sized_name[4096];
  /* the fake clock, the trace's start, and the time the writer gave the last event */
  uint64_t now, start_time, last_time;
  /* what was written */
  expected_event_t *events;
  size_t nevents;
  const expected_event_t *last_alloc;
  uint64_t *frames;
  size_t nframes, work;
  uint64_t nallocs;
  /* the trace */
  uint8_t *trace; /* trace_store */
  size_t trace_len;
  unsigned writes, fail_at_write;
  /* reading back */
  cts_mt_reader_t *reader;
  size_t next_event;
  uint64_t nlocations, noversize, ntruncated; /* what the program reached, for seed tuning */
  uint64_t defined[DEFINED_SLOTS]; /* codes whose location event was read (open addressing) */
} program_t;

/* The writer's memory: 8-byte aligned, big enough for the largest configuration here.
 * It and the other large buffers are static, reused by every run: fresh pages for them
 * cost more than a run's actual work. */
static uint64_t writer_memory[(CTS_MT_WRITER_MIN_SIZE + MAX_WRITER_FRAMES * 10u) / 8u];
static uint64_t frame_store[MAX_TOTAL_FRAMES];
static expected_event_t event_store[MAX_EVENTS];
static uint8_t *trace_store;
static size_t trace_store_cap;

/* ---- writer side ----------------------------------------------------------------------- */

static int write_packet(void *user_data, const void *buf, size_t len) {
  program_t *pg = user_data;
  pg->writes++;
  if (pg->writes == pg->fail_at_write) return WRITE_ERROR;
  /* One call per packet, whole, and no larger than memtrace's reader can read (§3). */
  const uint8_t *p = buf;
  CHECK(len >= CTS_MT_HEADER_SIZE_V2 && len <= CTS_MT_MAX_WRITTEN_PACKET);
  CHECK(p[0] == 0xC1 && p[1] == 0x1F && p[2] == 0xFC && p[3] == 0xC1);
  const uint32_t size_bits =
      (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
  CHECK(size_bits == len * 8u);
  if (pg->trace_len + len > trace_store_cap) {
    size_t cap = trace_store_cap ? trace_store_cap * 2 : 65536;
    while (cap < pg->trace_len + len) cap *= 2;
    uint8_t *bigger = realloc(trace_store, cap);
    CHECK(bigger != NULL);
    trace_store = bigger;
    trace_store_cap = cap;
  }
  pg->trace = trace_store;
  memcpy(pg->trace + pg->trace_len, buf, len);
  pg->trace_len += len;
  return 0;
}

static uint64_t fake_clock(void *user_data) {
  const program_t *pg = user_data;
  return pg->now;
}

/* What the resolver returns for a code: a pure function of the code and the input, so
 * that the checker can recompute it and re-sent codes stay consistent (§7.3). Returns the
 * real count, filling at most max entries. */
static size_t resolve_locations(program_t *pg, uint64_t code, cts_mt_location_t *out, size_t max) {
  if ((pg->resolver_profile & SIZED_PROFILE) == SIZED_PROFILE) {
    /* One location whose size the code sets: a new file name of code % 4096 bytes and an
     * empty function name take 21 + code % 4096 bytes, up to the largest definition that
     * is not replaced by the sentinel. Lets an input place location packet boundaries. */
    const size_t len = code % 4096u;
    memset(pg->sized_name, 'a' + (int)(code / 4096u % 26u), len);
    pg->sized_name[len] = '\0';
    if (max) out[0] = (cts_mt_location_t){(uint32_t)code, 0, 0, pg->sized_name, ""};
    return 1;
  }
  fuzz_rng_t rng = {pg->resolver_seed ^ (code * 0x9e3779b97f4a7c15ull)};
  const uint64_t r = fuzz_rng_next(&rng);
  size_t n;
  switch ((r + pg->resolver_profile) % 16) {
    case 0:
      n = 0;
      break;
    case 1: /* many inlined frames */
      n = 4 + r / 16 % 60;
      break;
    case 2: /* around the 255 the format allows */
      n = 250 + r / 16 % 51;
      break;
    case 3:
      n = 200 + r / 16 % (MAX_RESOLVED - 199);
      break;
    default:
      n = 1 + r / 16 % 3;
      break;
  }
  for (size_t i = 0; i < n && i < max; i++) {
    const uint64_t a = fuzz_rng_next(&rng), b = fuzz_rng_next(&rng);
    cts_mt_location_t *l = &out[i];
    /* Mostly in range, sometimes beyond the field widths, which the writer clamps. */
    l->line = (a & 7) == 0 ? (uint32_t)(a >> 8) : (uint32_t)(a >> 8) % 5000u;
    l->start_char = (a & 0x30) == 0 ? (uint32_t)(a >> 40) : (uint32_t)(a >> 40) % 120u;
    l->end_char = (a & 0xC0) == 0 ? (uint32_t)(b >> 40) : (uint32_t)(b >> 40) % 200u;
    l->filename = pg->nnames ? pg->names[b % pg->nnames] : NULL;
    l->defname = pg->nnames ? pg->names[(b >> 8) % pg->nnames] : NULL;
  }
  return n;
}

static size_t resolve_cb(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  CHECK(max == CTS_MT_MAX_LOCATIONS);
  return resolve_locations(user_data, code, out, max);
}

/* A name of one of several length classes; the long ones alone exceed what one location
 * definition may take, which forces the sentinel. NULL means "no name" (sent as ""). */
static char *make_name(fuzz_data_t *fd, size_t index) {
  const uint8_t kind = fuzz_u8(fd);
  size_t len;
  switch (kind % 8) {
    case 0:
      return NULL;
    case 1:
      len = 0;
      break;
    case 2:
      len = 100 + fuzz_range(fd, 0, 900);
      break;
    case 3:
      len = 4000 + fuzz_range(fd, 0, 2000);
      break;
    default:
      len = 1 + fuzz_range(fd, 0, 31);
      break;
  }
  char *s = malloc(len + 1);
  CHECK(s != NULL);
  const size_t given = fuzz_bytes(fd, s, len < 32 ? len : 32);
  for (size_t i = 0; i < len; i++) {
    const uint8_t c = i < given ? (uint8_t)s[i] : (uint8_t)('a' + (i + index) % 26);
    s[i] = (char)(c ? c : '_'); /* names are C strings */
  }
  s[len] = '\0';
  return s;
}

static char *make_info_string(fuzz_data_t *fd) {
  const uint8_t kind = fuzz_u8(fd);
  if (kind % 16 == 0) return NULL;
  const size_t len = kind % 16 == 1 ? 7000 + fuzz_range(fd, 0, 2000) : fuzz_range(fd, 0, 40);
  char *s = malloc(len + 1);
  CHECK(s != NULL);
  const size_t given = fuzz_bytes(fd, s, len < 40 ? len : 40);
  for (size_t i = 0; i < len; i++) {
    const uint8_t c = i < given ? (uint8_t)s[i] : (uint8_t)('A' + i % 26);
    s[i] = (char)(c ? c : '.');
  }
  s[len] = '\0';
  return s;
}

static void configure(program_t *pg, fuzz_data_t *fd) {
  cts_mt_writer_config_t *cfg = &pg->cfg;
  cts_mt_writer_config_init(cfg);
  const uint8_t flags = fuzz_u8(fd);
  cfg->version = flags & 1 ? 3 : 2;
  cfg->domain = fuzz_u16(fd);
  /* Half the inputs use the compact encoding; taken from a bit v2 ignores, so that the
   * corpus decodes as before the encoding existed. */
  cfg->encoding = cfg->domain & 0x8000 ? CTS_MT_ENCODING_COMPACT : CTS_MT_ENCODING_MEMTRACE;
  cfg->sample_rate = ((double)fuzz_u32(fd) + 1.0) / 4294967296.0;
  cfg->word_size = flags & 2 ? 32 : 64;
  cfg->pid = fuzz_u64(fd);
  static const uint32_t frame_caps[] = {4096, 0, 1, 8, 300, MAX_WRITER_FRAMES};
  cfg->max_backtrace_frames = frame_caps[((flags >> 2) & 7) % 6];
  for (size_t i = 0; i < 4; i++) pg->info_strings[i] = make_info_string(fd);
  cfg->executable_name = pg->info_strings[0];
  cfg->host_name = pg->info_strings[1];
  cfg->runtime_params = pg->info_strings[2];
  cfg->context = pg->info_strings[3];
  pg->now = fuzz_u64(fd) % (1ull << 52);
  cfg->start_time_us = flags & 0x20 ? CTS_TIME_NOW : pg->now;
  pg->start_time = pg->last_time = pg->now;
  cfg->write = write_packet;
  cfg->write_user_data = pg;
  cfg->clock = fake_clock;
  cfg->clock_user_data = pg;
  cfg->resolve = flags & 0x40 ? NULL : resolve_cb;
  cfg->resolve_user_data = pg;
  pg->fail_at_write = flags & 0x80 ? 1 + fuzz_u8(fd) % 16 : 0;

  pg->ncodes = 1 + fuzz_u8(fd) % MAX_POOL;
  for (size_t i = 0; i < pg->ncodes; i++) {
    /* Codes are non-zero and below 2^62 (§7.3); small ones come up as often as big. */
    uint64_t c = i % 2 ? fuzz_u64(fd) & ((1ull << 62) - 1) : fuzz_u16(fd);
    pg->codes[i] = c ? c : i + 1;
  }
  pg->nnames = fuzz_u8(fd) % (MAX_NAMES + 1);
  for (size_t i = 0; i < pg->nnames; i++) pg->names[i] = make_name(fd, i);
  pg->resolver_seed = fuzz_u64(fd);
  pg->resolver_profile = fuzz_u8(fd);
}

/* Appends a backtrace for the next allocation to pg->frames; returns its depth. */
static size_t make_backtrace(program_t *pg, fuzz_data_t *fd, fuzz_rng_t *rng) {
  uint64_t *bt = pg->frames + pg->nframes;
  size_t room = MAX_TOTAL_FRAMES - pg->nframes;
  if (room > MAX_WORK_FRAMES - pg->work) room = MAX_WORK_FRAMES - pg->work;
  if (room > MAX_DEPTH) room = MAX_DEPTH;
  const expected_event_t *prev = pg->last_alloc;
  size_t depth = 0;
  switch (fuzz_u8(fd) % 6) {
    case 0: /* none */
      break;
    case 1: /* a few frames chosen by the input */
    case 2: {
      const size_t n = fuzz_range(fd, 1, 24);
      for (; depth < n && depth < room; depth++) bt[depth] = pg->codes[fuzz_u8(fd) % pg->ncodes];
      break;
    }
    case 3: { /* the previous backtrace, cut somewhere, plus a few new frames */
      const size_t prev_depth = prev ? prev->depth : 0;
      const size_t keep = fuzz_range(fd, 0, prev_depth);
      for (; depth < keep && depth < room; depth++)
        bt[depth] = pg->frames[prev->frames_start + depth];
      const size_t extra = fuzz_range(fd, 0, 8);
      for (size_t i = 0; i < extra && depth < room; i++, depth++)
        bt[depth] = pg->codes[fuzz_u8(fd) % pg->ncodes];
      break;
    }
    case 4: { /* deep recursion: a short cycle repeated, which prediction runs compress */
      const size_t n = fuzz_range(fd, 0, MAX_DEPTH);
      const size_t cycle = fuzz_range(fd, 1, 8), head = fuzz_range(fd, 0, 4);
      uint64_t cyc[8];
      for (size_t i = 0; i < cycle; i++) cyc[i] = pg->codes[fuzz_rng_below(rng, pg->ncodes)];
      for (; depth < n && depth < room; depth++)
        bt[depth] =
            depth < head ? pg->codes[fuzz_rng_below(rng, pg->ncodes)] : cyc[(depth - head) % cycle];
      break;
    }
    default: { /* many frames in no pattern: mostly cache misses, cut at 4 KiB */
      const size_t n = fuzz_range(fd, 0, 3000);
      for (; depth < n && depth < room; depth++)
        bt[depth] = pg->codes[fuzz_rng_below(rng, pg->ncodes)];
      break;
    }
  }
  return depth;
}

/* A time for the next event: usually now, sometimes earlier (the writer clamps it). */
static uint64_t event_time(program_t *pg, fuzz_data_t *fd, uint8_t how) {
  uint64_t t;
  switch (how % 8) {
    case 0:
      t = CTS_TIME_NOW;
      break;
    case 1:
      t = pg->now >= 1000 ? pg->now - fuzz_range(fd, 1, 1000) : 0;
      break;
    default:
      t = pg->now;
      break;
  }
  const uint64_t effective = t == CTS_TIME_NOW ? pg->now : t;
  pg->last_time = effective > pg->last_time ? effective : pg->last_time;
  return t;
}

static void advance_clock(program_t *pg, fuzz_data_t *fd) {
  switch (fuzz_u8(fd) % 4) {
    case 0:
      pg->now += fuzz_range(fd, 0, 1000);
      break;
    case 1: /* around the 2^25 µs wrap of event times */
      pg->now += fuzz_range(fd, 0, 40000000);
      break;
    case 2: /* past a packet's 30 s */
      pg->now += 30000001 + fuzz_range(fd, 0, 1u << 24);
      break;
    default: /* hours, days */
      pg->now += fuzz_range(fd, 0, 1ull << 36);
      break;
  }
}

/* Draws an allocation's length and sample count; shape also picks the source. */
static void make_block(fuzz_data_t *fd, uint8_t shape, expected_event_t *ev) {
  ev->kind = CTS_MT_ALLOC;
  ev->source = (uint8_t)(shape % 3);
  switch (shape / 3 % 4) {
    case 0: /* the short form if minor with 1 sample */
      ev->length = fuzz_range(fd, 1, 16);
      break;
    case 1:
      ev->length = fuzz_u16(fd);
      break;
    case 2:
      ev->length = fuzz_u32(fd);
      break;
    default:
      ev->length = fuzz_u64(fd) & (uint64_t)INT64_MAX;
      break;
  }
  switch (shape / 12 % 4) {
    case 0:
    case 1:
      ev->nsamples = 1;
      break;
    case 2:
      ev->nsamples = fuzz_u16(fd);
      break;
    default:
      ev->nsamples = fuzz_u64(fd) & (uint64_t)INT64_MAX;
      break;
  }
}

/* Notes an event the writer accepted, at the time it was given. */
static void record(program_t *pg, const expected_event_t *ev) {
  expected_event_t *x = &pg->events[pg->nevents++];
  *x = *ev;
  x->time_us = pg->last_time;
  if (x->kind == CTS_MT_ALLOC) {
    CHECK(x->obj_id == pg->nallocs);
    pg->nallocs++;
    pg->last_alloc = x;
  }
}

/* One writer call per kind of event; returns its status. */
static int write_event(cts_mt_writer_t *w, program_t *pg, uint64_t t, expected_event_t *ev) {
  switch (ev->kind) {
    case CTS_MT_ALLOC:
      return cts_mt_writer_alloc(w, t, ev->length, ev->nsamples, (cts_mt_source_t)ev->source,
                                 pg->frames + ev->frames_start, ev->depth, &ev->obj_id);
    case CTS_MT_PROMOTE:
      return cts_mt_writer_promote(w, t, ev->obj_id);
    default:
      return cts_mt_writer_collect(w, t, ev->obj_id);
  }
}

/* An invalid call: refused with CTS_E_INVAL (or, once closed, the reason it closed), and
 * nothing is written. */
static void write_invalid(cts_mt_writer_t *w, program_t *pg, fuzz_data_t *fd, int write_error) {
  const uint64_t before = cts_mt_writer_bytes_written(w);
  uint64_t id;
  int rc;
  switch (fuzz_u8(fd) % 4) {
    case 0:
      rc = cts_mt_writer_collect(w, CTS_TIME_NOW, pg->nallocs + fuzz_u8(fd));
      break;
    case 1:
      rc = cts_mt_writer_promote(w, CTS_TIME_NOW, pg->nallocs);
      break;
    case 2:
      rc = cts_mt_writer_alloc(w, CTS_TIME_NOW, 1, 1, (cts_mt_source_t)3, NULL, 0, &id);
      break;
    default:
      rc = cts_mt_writer_alloc(w, CTS_TIME_NOW, 1ull << 63, 1, CTS_MT_SOURCE_MAJOR, NULL, 0, &id);
      break;
  }
  CHECK(cts_mt_writer_bytes_written(w) == before);
  CHECK(rc == CTS_E_INVAL || (write_error && rc == write_error));
}

/* Events in a burst: up to 64, or up to MAX_BURST when the variant asks for a long one
 * (short bursts keep most runs fast; long ones reach v3's 10 000-id chunks). */
static size_t burst_size(fuzz_data_t *fd, unsigned variant) {
  const size_t n = fuzz_range(fd, 1, MAX_BURST);
  return variant & 8 ? n : 1 + n % 64;
}

/* Runs the program against the writer. Returns false if a write error ended it. */
static bool write_program(program_t *pg, fuzz_data_t *fd) {
  cts_mt_writer_t *w;
  int rc = cts_mt_writer_init(&w, writer_memory, sizeof writer_memory, &pg->cfg);
  if (pg->fail_at_write == 1) {
    CHECK(rc == WRITE_ERROR);
    return false;
  }
  CHECK(rc == 0);
  fuzz_rng_t rng = {fuzz_u64(fd)};
  int write_error = 0; /* once a write failed, every call must return its error */
  for (unsigned op = 0; op < MAX_OPS && !fuzz_data_empty(fd); op++) {
    const uint8_t code = fuzz_u8(fd);
    const unsigned variant = code / 12u; /* operation = code % 12 */
    expected_event_t ev = {0};
    size_t count = 1;      /* events this operation writes */
    uint64_t step_max = 0; /* clock advance between them, in µs */
    bool newest_first = false;
    switch (code % 12) {
      case 0:
      case 1:
      case 2:
      case 3: { /* one allocation */
        const uint8_t shape = fuzz_u8(fd);
        make_block(fd, shape, &ev);
        ev.frames_start = pg->nframes;
        ev.depth = make_backtrace(pg, fd, &rng);
        pg->nframes += ev.depth;
        break;
      }
      case 4:
      case 5: /* collect or promote a recent object */
        if (pg->nallocs == 0) continue;
        ev.kind = variant & 1 ? CTS_MT_PROMOTE : CTS_MT_COLLECT;
        ev.obj_id = pg->nallocs - 1 - fuzz_u16(fd) % pg->nallocs;
        break;
      case 6:
      case 7: /* time passes */
        advance_clock(pg, fd);
        continue;
      case 8: /* explicit flush */
        rc = cts_mt_writer_flush(w);
        CHECK(rc == write_error || (!write_error && rc == WRITE_ERROR));
        if (rc) write_error = rc;
        continue;
      case 9:
        write_invalid(w, pg, fd, write_error);
        continue;
      case 10: { /* a burst of allocations sharing the last backtrace (or none) */
        const uint8_t shape = fuzz_u8(fd);
        count = burst_size(fd, variant);
        make_block(fd, shape, &ev);
        if (pg->last_alloc && (variant & 1)) {
          ev.frames_start = pg->last_alloc->frames_start;
          ev.depth = pg->last_alloc->depth;
        }
        static const uint64_t steps[] = {0, 10, 1000, 100000};
        step_max = steps[(variant >> 1) & 3];
        break;
      }
      default: /* a burst of collects, newest object first */
        if (pg->nallocs == 0) continue;
        ev.kind = CTS_MT_COLLECT;
        count = burst_size(fd, variant);
        if (count > pg->nallocs) count = pg->nallocs;
        ev.obj_id = pg->nallocs;
        newest_first = true;
        step_max = 10;
        break;
    }
    const uint64_t how = fuzz_u8(fd);
    for (size_t i = 0; i < count && pg->nevents < MAX_EVENTS; i++) {
      if (newest_first) ev.obj_id--;
      if (pg->work + ev.depth > MAX_WORK_FRAMES) ev.depth = 0;
      pg->now += fuzz_rng_below(&rng, step_max + 1);
      const uint64_t t = event_time(pg, fd, (uint8_t)(count > 1 ? 2 : how));
      rc = write_event(w, pg, t, &ev);
      if (write_error) {
        CHECK(rc == write_error);
        break;
      }
      if (rc == WRITE_ERROR) {
        write_error = rc;
        break;
      }
      CHECK(rc == 0);
      pg->work += ev.depth;
      record(pg, &ev);
    }
  }
  rc = cts_mt_writer_close(w);
  if (write_error || rc == WRITE_ERROR) {
    CHECK(rc == WRITE_ERROR);
    CHECK(cts_mt_writer_close(w) == WRITE_ERROR);
    return false;
  }
  CHECK(rc == 0);
  CHECK(cts_mt_writer_close(w) == CTS_E_CLOSED);
  CHECK(cts_mt_writer_flush(w) == CTS_E_CLOSED);
  CHECK(cts_mt_writer_next_id(w) == pg->nallocs);
  CHECK(cts_mt_writer_bytes_written(w) == pg->trace_len);
  /* The injected write error was never reached: the whole trace is there to read back. */
  return pg->fail_at_write == 0 || pg->writes < pg->fail_at_write;
}

/* ---- reader side ----------------------------------------------------------------------- */

static void *heap_alloc(void *user_data, size_t size) {
  return malloc(size);
}
static void heap_free(void *user_data, void *ptr, size_t size) {
  free(ptr);
}

static void check_string(const char *got, const char *written) {
  const char *want = written ? written : "";
  const size_t want_len = strlen(want),
               cap = want_len < INFO_STRING_CAP ? want_len : INFO_STRING_CAP;
  CHECK(got != NULL && strlen(got) == cap && memcmp(got, want, cap) == 0);
}

static int on_info(void *user_data, const cts_mt_info_t *info) {
  const program_t *pg = user_data;
  const cts_mt_writer_config_t *cfg = &pg->cfg;
  CHECK(info->version == cfg->version);
  CHECK(memcmp(&info->sample_rate, &cfg->sample_rate, sizeof info->sample_rate) == 0);
  CHECK(info->word_size == cfg->word_size);
  CHECK(info->pid == cfg->pid);
  CHECK(info->start_time_us == pg->start_time);
  check_string(info->executable_name, cfg->executable_name);
  check_string(info->host_name, cfg->host_name);
  check_string(info->runtime_params, cfg->runtime_params);
  if (cfg->context && cfg->context[0]) {
    check_string(info->context, cfg->context);
  } else {
    CHECK(info->context == NULL); /* memtrace writes "no context" as "" */
  }
  return 0;
}

static bool same_name(const char *got, const char *written) {
  return got != NULL && strcmp(got, written ? written : "") == 0;
}

static uint32_t clamp(uint32_t v, uint32_t max) {
  return v > max ? max : v;
}

static uint64_t *defined_slot(program_t *pg, uint64_t code) {
  size_t i = (size_t)((code * 0x9E3779B97F4A7C15ull) >> 56);
  while (pg->defined[i] != 0 && pg->defined[i] != code) i = (i + 1) % DEFINED_SLOTS;
  return &pg->defined[i];
}

static int on_location(void *user_data, uint64_t code, const cts_mt_location_t *locs, size_t n) {
  program_t *pg = user_data;
  static const cts_mt_location_t sentinel = {1, 1, 1, "<unknown>", "??"};
  cts_mt_location_t want[CTS_MT_MAX_LOCATIONS];
  size_t nwant = 0;
  if (pg->cfg.resolve) nwant = resolve_locations(pg, code, want, CTS_MT_MAX_LOCATIONS);
  bool oversize = nwant > CTS_MT_MAX_LOCATIONS;
  size_t worst = 9;
  for (size_t i = 0; i < nwant && !oversize; i++)
    worst += 6 + strlen(want[i].filename ? want[i].filename : "") + 1 +
             strlen(want[i].defname ? want[i].defname : "") + 1;
  if (worst > WORST_LOCATION_BYTES) oversize = true;
  if (oversize) {
    pg->noversize++;
    want[0] = sentinel;
    nwant = 1;
  }
  CHECK(n == nwant);
  for (size_t i = 0; i < n; i++) {
    CHECK(locs[i].line == clamp(want[i].line, 0xFFFFFu));
    CHECK(locs[i].start_char == clamp(want[i].start_char, 0xFFu));
    CHECK(locs[i].end_char == clamp(want[i].end_char, 0x3FFu));
    CHECK(same_name(locs[i].filename, want[i].filename));
    CHECK(same_name(locs[i].defname, want[i].defname));
  }
  pg->nlocations++;
  *defined_slot(pg, code) = code;
  return 0;
}

static int on_event(void *user_data, const cts_mt_event_t *ev) {
  program_t *pg = user_data;
  CHECK(pg->next_event < pg->nevents);
  const expected_event_t *x = &pg->events[pg->next_event++];
  CHECK(ev->kind == x->kind);
  CHECK(ev->time_us == x->time_us);
  CHECK(ev->obj_id == x->obj_id);
  CHECK(ev->domain == (pg->cfg.version >= 3 ? pg->cfg.domain : 0));
  if (ev->kind != CTS_MT_ALLOC) {
    CHECK(ev->backtrace_len == 0);
    return 0;
  }
  CHECK(ev->length == x->length);
  CHECK(ev->nsamples == x->nsamples);
  CHECK(ev->source == x->source);
  CHECK(!ev->short_form || (x->length <= 16 && x->nsamples == 1 && x->source == 0));
  const uint64_t *want = pg->frames + x->frames_start;
  CHECK(ev->backtrace_len <= x->depth);
  CHECK(ev->backtrace_len == 0 ||
        memcmp(ev->backtrace, want, ev->backtrace_len * sizeof *want) == 0);
  for (size_t i = ev->common_prefix; i < ev->backtrace_len; i++)
    CHECK(*defined_slot(pg, ev->backtrace[i]) == ev->backtrace[i]);
  if (ev->backtrace_len < x->depth) {
    /* Cut by the 4 KiB bound: only after its prefix and a good many frames. */
    CHECK(ev->common_prefix <= ev->backtrace_len);
    CHECK(ev->backtrace_len - ev->common_prefix >= MIN_FRAMES_BEFORE_CUT);
    pg->ntruncated++;
  }
  return 0;
}

static void read_back(program_t *pg, size_t split) {
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = (cts_allocator_t){heap_alloc, heap_free, NULL};
  const cts_mt_handler_t handler = {
      .user_data = pg, .on_info = on_info, .on_location = on_location, .on_event = on_event};
  CHECK(cts_mt_reader_create(&pg->reader, &cfg, &handler) == 0);
  if (split > pg->trace_len) split = pg->trace_len;
  int rc = cts_mt_reader_feed(pg->reader, pg->trace, split);
  if (!rc) rc = cts_mt_reader_feed(pg->reader, pg->trace + split, pg->trace_len - split);
  if (!rc) rc = cts_mt_reader_finish(pg->reader);
  CHECK(rc == 0);
  CHECK(pg->next_event == pg->nevents);
  cts_mt_reader_destroy(pg->reader);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_data_t fd = fuzz_data_make(data, size);
  program_t *pg = calloc(1, sizeof *pg);
  CHECK(pg != NULL);
  pg->frames = frame_store;
  pg->events = event_store;
  configure(pg, &fd);
  const size_t split = fuzz_u16(&fd);
  if (write_program(pg, &fd)) read_back(pg, split);
  for (size_t i = 0; i < 4; i++) free(pg->info_strings[i]);
  for (size_t i = 0; i < pg->nnames; i++) free(pg->names[i]);
  free(pg);
  return 0;
}
