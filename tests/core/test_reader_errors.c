/* SPDX-License-Identifier: MIT */
/* Reader robustness: every hand-made corrupt trace of tests/data/fail gives exactly the
 * error (or warning) and byte offset its .expect file names, however the bytes are fed;
 * hostile traces cannot make the reader's memory grow past its configured limits; and
 * feeding real traces in tiny pieces changes nothing. */
#include <dirent.h>
#include <stdlib.h>

#include <ctfscope/ctfscope.h>

#include "../test.h"
#include "../test_buf.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* An allocator that counts live and peak bytes, to check the reader's memory bounds. */
typedef struct counting_allocator {
  size_t live, peak, nallocs;
} counting_allocator_t;

static void *counting_alloc(void *ud, size_t size) {
  counting_allocator_t *c = ud;
  void *p = malloc(size ? size : 1);
  if (!p) return NULL;
  c->live += size;
  c->nallocs++;
  if (c->live > c->peak) c->peak = c->live;
  return p;
}

static void counting_free(void *ud, void *p, size_t size) {
  counting_allocator_t *c = ud;
  if (!p) return;
  c->live -= size;
  free(p);
}

static cts_allocator_t counting_allocator(counting_allocator_t *c) {
  memset(c, 0, sizeof *c);
  return (cts_allocator_t){counting_alloc, counting_free, c};
}

/* xorshift64*: fixed seeds make the piece sizes the same on every run. */
static uint64_t next_random(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

typedef enum feed_mode { FEED_WHOLE, FEED_BYTES, FEED_RANDOM, FEED_TINY } feed_mode_t;
static const char *const feed_mode_names[] = {"whole", "one byte at a time", "random pieces",
                                              "1..7-byte pieces"};

/* Piece size for the next feed call. */
static size_t piece_size(feed_mode_t mode, uint64_t *seed, size_t left) {
  size_t n = left;
  if (mode == FEED_BYTES) n = 1;
  if (mode == FEED_RANDOM) n = 1 + (size_t)(next_random(seed) % 97);
  if (mode == FEED_TINY) n = 1 + (size_t)(next_random(seed) % 7);
  return n < left ? n : left;
}

/* What reading a trace gave: the result, and everything the callbacks saw, hashed. */
typedef struct outcome {
  int rc;
  uint64_t err_offset;
  char message[512];
  int warning;             /* first warning's code, 0 if none */
  uint64_t warning_offset; /* and its offset */
  size_t nwarnings;
  bool warning_message_empty;
  uint64_t nevents, npackets, nlocations;
  uint64_t hash;
  size_t max_backtrace;
} outcome_t;

static void mix(outcome_t *o, uint64_t v) {
  o->hash = (o->hash ^ v) * 0x100000001b3ull;
  o->hash ^= o->hash >> 29;
}

static void mix_str(outcome_t *o, const char *s) {
  for (; s && *s; s++) mix(o, (uint8_t)*s);
  mix(o, 0x5eed);
}

static int on_info(void *ud, const cts_mt_info_t *info) {
  outcome_t *o = ud;
  mix(o, info->version);
  mix(o, info->start_time_us);
  mix(o, info->pid);
  mix_str(o, info->executable_name);
  mix_str(o, info->context);
  return 0;
}

static int on_location(void *ud, uint64_t code, const cts_mt_location_t *locs, size_t n) {
  outcome_t *o = ud;
  o->nlocations++;
  mix(o, code);
  for (size_t i = 0; i < n; i++) {
    mix(o, locs[i].line | (uint64_t)locs[i].start_char << 20 | (uint64_t)locs[i].end_char << 28);
    mix_str(o, locs[i].filename);
    mix_str(o, locs[i].defname);
  }
  return 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  outcome_t *o = ud;
  o->nevents++;
  mix(o, ev->kind);
  mix(o, ev->domain);
  mix(o, ev->source);
  mix(o, ev->short_form);
  mix(o, ev->time_us);
  mix(o, ev->obj_id);
  mix(o, ev->length);
  mix(o, ev->nsamples);
  mix(o, ev->common_prefix);
  mix(o, ev->offset);
  mix(o, ev->backtrace_len);
  for (size_t i = 0; i < ev->backtrace_len; i++) mix(o, ev->backtrace[i]);
  if (ev->backtrace_len > o->max_backtrace) o->max_backtrace = ev->backtrace_len;
  return 0;
}

static int on_packet(void *ud, const cts_mt_packet_t *pk) {
  outcome_t *o = ud;
  o->npackets++;
  mix(o, pk->kind);
  mix(o, pk->offset);
  mix(o, pk->size);
  mix(o, pk->nevents);
  return 0;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  outcome_t *o = ud;
  if (!o->nwarnings++) {
    o->warning = code;
    o->warning_offset = offset;
  }
  if (!message || !message[0]) o->warning_message_empty = true;
  mix(o, (uint64_t)(int64_t)code);
  mix(o, offset);
}

static const cts_mt_handler_t handler = {.on_info = on_info,
                                         .on_location = on_location,
                                         .on_event = on_event,
                                         .on_packet = on_packet,
                                         .on_warning = on_warning};

/* Reads data with cfg (its allocator counts), fed as `mode` says. Returns false if the
 * reader misbehaved in a way the outcome cannot show (printed on stderr). */
static bool read_trace(const uint8_t *data, size_t len, const cts_mt_reader_config_t *cfg,
                       feed_mode_t mode, outcome_t *o) {
  memset(o, 0, sizeof *o);
  o->hash = 0xcbf29ce484222325ull;
  cts_mt_handler_t h = handler;
  h.user_data = o;
  cts_mt_reader_t *r;
  int rc = cts_mt_reader_create(&r, cfg, &h);
  if (rc) {
    fprintf(stderr, "  cannot create a reader: %s\n", cts_err_name(rc));
    return false;
  }
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  size_t pos = 0;
  while (!rc && pos < len) {
    const size_t n = piece_size(mode, &seed, len - pos);
    rc = cts_mt_reader_feed(r, data + pos, n);
    pos += n;
  }
  if (!rc) rc = cts_mt_reader_finish(r);
  o->rc = rc;
  o->err_offset = cts_mt_reader_error_offset(r);
  snprintf(o->message, sizeof o->message, "%s", cts_mt_reader_error_message(r));
  bool ok = true;
  if (cts_mt_reader_error(r) != rc) {
    fprintf(stderr, "  cts_mt_reader_error() is %d but the reader returned %d\n",
            cts_mt_reader_error(r), rc);
    ok = false;
  }
  /* A failed reader stays failed with the same error. */
  if (rc && (cts_mt_reader_feed(r, "\xC1", 1) != rc || cts_mt_reader_finish(r) != rc)) {
    fprintf(stderr, "  the reader did not stay failed with %s\n", cts_err_name(rc));
    ok = false;
  }
  cts_mt_reader_destroy(r);
  return ok;
}

/* ---- the corrupt-trace corpus --------------------------------------------------------- */

typedef struct expectation {
  bool ok;         /* the trace must read successfully */
  char name[128];  /* the error, or the warning when ok */
  uint64_t offset; /* of the error or the warning */
  bool has_offset;
} expectation_t;

static bool read_expectation(const char *path, expectation_t *e) {
  memset(e, 0, sizeof *e);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char line[128];
  bool good = false;
  if (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    e->ok = strcmp(line, "OK") == 0;
    if (e->ok) {
      good = fgets(line, sizeof line, f) != NULL;
      line[strcspn(line, "\r\n")] = 0;
    } else {
      good = true;
    }
    snprintf(e->name, sizeof e->name, "%s", line);
    char *end;
    if (good && fgets(line, sizeof line, f)) {
      e->offset = strtoull(line, &end, 10);
      e->has_offset = end != line;
    }
  }
  fclose(f);
  return good && e->name[0] && e->has_offset;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks one outcome against the expectation; prints what differs. */
static bool outcome_matches(const char *file, feed_mode_t mode, const outcome_t *o,
                            const expectation_t *e) {
  const char *how = feed_mode_names[mode];
  if (e->ok) {
    if (o->rc != 0) {
      fprintf(stderr, "  %s (%s): expected success with %s, got %s: %s\n", file, how, e->name,
              cts_err_name(o->rc), o->message);
      return false;
    }
    if (!o->warning || strcmp(cts_err_name(o->warning), e->name) != 0 ||
        o->warning_offset != e->offset || o->warning_message_empty) {
      fprintf(stderr, "  %s (%s): expected warning %s at %llu, got %s at %llu\n", file, how,
              e->name, (unsigned long long)e->offset,
              o->warning ? cts_err_name(o->warning) : "none",
              (unsigned long long)o->warning_offset);
      return false;
    }
    return true;
  }
  if (o->rc == 0 || strcmp(cts_err_name(o->rc), e->name) != 0 || o->err_offset != e->offset) {
    fprintf(stderr, "  %s (%s): expected %s at offset %llu, got %s at offset %llu: %s\n", file, how,
            e->name, (unsigned long long)e->offset, o->rc ? cts_err_name(o->rc) : "success",
            (unsigned long long)o->err_offset, o->message);
    return false;
  }
  char at[64];
  snprintf(at, sizeof at, "offset %llu", (unsigned long long)e->offset);
  if (!o->message[0] || !strstr(o->message, "offset") || !strstr(o->message, at)) {
    fprintf(stderr, "  %s (%s): message \"%s\" does not name %s\n", file, how, o->message, at);
    return false;
  }
  return true;
}

CTS_TEST(fail_corpus_errors_and_offsets) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fail", cts_test_data_dir());
  DIR *d = opendir(dir);
  CTS_ASSERT_MSG(d, "cannot open %s", dir);
  char *names[512];
  size_t nfiles = 0;
  const struct dirent *de;
  while ((de = readdir(d)) != NULL && nfiles < sizeof names / sizeof *names) {
    const size_t n = strlen(de->d_name);
    if (n > 4 && strcmp(de->d_name + n - 4, ".ctf") == 0) names[nfiles++] = strdup(de->d_name);
  }
  closedir(d);
  qsort(names, nfiles, sizeof *names, compare_names);

  size_t nbad = 0, nwarning_cases = 0;
  for (size_t i = 0; i < nfiles; i++) {
    char path[4200], expect_path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    snprintf(expect_path, sizeof expect_path, "%s.expect", path);
    expectation_t e;
    buf_t trace = {0};
    if (!read_expectation(expect_path, &e) || !read_file(path, &trace)) {
      fprintf(stderr, "  %s: missing or malformed .expect file, or unreadable trace\n", names[i]);
      nbad++;
      free(trace.data);
      continue;
    }
    if (e.ok) nwarning_cases++;
    for (feed_mode_t mode = FEED_WHOLE; mode <= FEED_RANDOM; mode++) {
      counting_allocator_t counter;
      cts_mt_reader_config_t cfg;
      cts_mt_reader_config_init(&cfg);
      cfg.allocator = counting_allocator(&counter);
      outcome_t o;
      bool good = read_trace(trace.data, trace.len, &cfg, mode, &o);
      good = outcome_matches(names[i], mode, &o, &e) && good;
      if (counter.live != 0) {
        fprintf(stderr, "  %s (%s): %zu bytes not freed\n", names[i], feed_mode_names[mode],
                counter.live);
        good = false;
      }
      if (!good) nbad++;
    }
    free(trace.data);
  }
  for (size_t i = 0; i < nfiles; i++) free(names[i]);
  fprintf(stderr, "  %zu corrupt traces (%zu with warnings), each read 3 ways\n", nfiles,
          nwarning_cases);
  /* The corpus has 43 cases; a missing directory or lost files must not pass quietly. */
  CTS_ASSERT_MSG(nfiles >= 40, "only %zu traces in %s", nfiles, dir);
  CTS_ASSERT_MSG(nwarning_cases >= 3, "only %zu warning cases", nwarning_cases);
  CTS_ASSERT_MSG(nbad == 0, "%zu mismatches (listed above)", nbad);
}

/* ---- memory bounds -------------------------------------------------------------------- */

#define START_US 1700000000000000ull

static int write_trace(buf_t *out, cts_mt_writer_config_t *cfg, void **mem, cts_mt_writer_t **w) {
  cfg->write = buf_write;
  cfg->write_user_data = out;
  cfg->start_time_us = START_US;
  cfg->pid = 77;
  cfg->sample_rate = 0.5;
  const size_t size = cts_mt_writer_size(cfg);
  if (posix_memalign(mem, 64, size) != 0) return CTS_E_NOMEM;
  return cts_mt_writer_init(w, *mem, size, cfg);
}

/* Reads `trace` whole with default limits and then with `limited` ones, both through a
 * counting allocator. */
typedef struct bounded_reads {
  outcome_t full, limited;
  size_t full_peak, limited_peak;
} bounded_reads_t;

static bool read_twice(const buf_t *trace, const cts_mt_reader_config_t *limits,
                       bounded_reads_t *out) {
  counting_allocator_t c1, c2;
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = counting_allocator(&c1);
  bool ok = read_trace(trace->data, trace->len, &cfg, FEED_WHOLE, &out->full);
  out->full_peak = c1.peak;
  cfg = *limits;
  cfg.allocator = counting_allocator(&c2);
  ok = read_trace(trace->data, trace->len, &cfg, FEED_RANDOM, &out->limited) && ok;
  out->limited_peak = c2.peak;
  fprintf(stderr, "  peak reader memory: %zu bytes with default limits, %zu with small ones\n",
          out->full_peak, out->limited_peak);
  return ok && c1.live == 0 && c2.live == 0;
}

/* Backtraces that grow by 1000 frames per allocation through the common prefix, up to
 * 200 000 frames, a repeating pair of codes so that each allocation costs a few bytes. */
CTS_TEST(memory_bounded_by_max_backtrace_frames) {
  enum { STEP = 1000, NALLOCS = 200, DEPTH = STEP * NALLOCS };
  uint64_t *bt = malloc(DEPTH * sizeof *bt);
  CTS_ASSERT(bt);
  for (size_t i = 0; i < DEPTH; i++) bt[i] = i % 2 ? 0x2222 : 0x1111;
  buf_t trace = {0};
  cts_mt_writer_config_t wcfg;
  cts_mt_writer_config_init(&wcfg);
  wcfg.max_backtrace_frames = DEPTH;
  void *mem = NULL;
  cts_mt_writer_t *w;
  int e = write_trace(&trace, &wcfg, &mem, &w);
  for (size_t i = 0; !e && i < NALLOCS; i++)
    e = cts_mt_writer_alloc(w, START_US + i, 4, 1, CTS_MT_SOURCE_MAJOR, bt, STEP * (i + 1), NULL);
  if (!e) e = cts_mt_writer_close(w);
  free(mem);
  free(bt);
  CTS_ASSERT_MSG(e == 0, "writing: %s", cts_err_name(e));

  cts_mt_reader_config_t limits;
  cts_mt_reader_config_init(&limits);
  limits.max_backtrace_frames = 4 * STEP; /* the 4th allocation fits exactly, the 5th not */
  bounded_reads_t r;
  const bool ok = read_twice(&trace, &limits, &r);
  free(trace.data);
  CTS_ASSERT(ok);
  CTS_ASSERT_MSG(r.full.rc == 0, "%s", r.full.message);
  CTS_ASSERT_EQ_U64(r.full.max_backtrace, DEPTH);
  CTS_ASSERT_EQ_INT(r.limited.rc, CTS_E_BACKTRACE_TOO_LONG);
  CTS_ASSERT_EQ_U64(r.limited.nevents, 4);
  CTS_ASSERT_EQ_U64(r.limited.max_backtrace, 4 * STEP);
  /* The full read needs the 200 000-frame backtrace (1.6 MB); the limited one a 4000-frame
   * one next to the fixed decoder state (~170 KiB per domain). */
  CTS_ASSERT_MSG(r.full_peak > DEPTH * sizeof(uint64_t), "full peak %zu", r.full_peak);
  CTS_ASSERT_MSG(r.limited_peak < 640u * 1024u, "limited peak %zu", r.limited_peak);
}

/* 20 000 distinct location codes, each with its own file and function name. */
static size_t resolve_unique(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static char file[64], fn[64];
  (void)ud;
  if (!max) return 0;
  snprintf(file, sizeof file, "src/generated/file_%llu.c", (unsigned long long)code);
  snprintf(fn, sizeof fn, "Generated.function_%llu", (unsigned long long)code);
  out[0] = (cts_mt_location_t){(uint32_t)(code % 1000), 1, 20, file, fn};
  return 1;
}

CTS_TEST(memory_bounded_by_max_location_bytes) {
  enum { NCODES = 20000 };
  buf_t trace = {0};
  cts_mt_writer_config_t wcfg;
  cts_mt_writer_config_init(&wcfg);
  wcfg.resolve = resolve_unique;
  void *mem = NULL;
  cts_mt_writer_t *w;
  int e = write_trace(&trace, &wcfg, &mem, &w);
  for (uint64_t i = 0; !e && i < NCODES; i++) {
    const uint64_t code = 0x100000 + i;
    e = cts_mt_writer_alloc(w, START_US + i, 2, 1, CTS_MT_SOURCE_MAJOR, &code, 1, NULL);
  }
  if (!e) e = cts_mt_writer_close(w);
  free(mem);
  CTS_ASSERT_MSG(e == 0, "writing: %s", cts_err_name(e));

  cts_mt_reader_config_t limits;
  cts_mt_reader_config_init(&limits);
  limits.max_location_bytes = 256u * 1024u;
  bounded_reads_t r;
  const bool ok = read_twice(&trace, &limits, &r);
  free(trace.data);
  CTS_ASSERT(ok);
  CTS_ASSERT_MSG(r.full.rc == 0, "%s", r.full.message);
  CTS_ASSERT_EQ_U64(r.full.nlocations, NCODES);
  CTS_ASSERT_EQ_INT(r.limited.rc, CTS_E_LIMIT);
  CTS_ASSERT(r.limited.nlocations > 0 && r.limited.nlocations < NCODES);
  CTS_ASSERT_MSG(r.full_peak > 2u * 1024u * 1024u, "full peak %zu", r.full_peak);
  /* The limit, plus the decoder state of one domain and the reader itself. */
  CTS_ASSERT_MSG(r.limited_peak < limits.max_location_bytes + 512u * 1024u, "limited peak %zu",
                 r.limited_peak);
}

/* A v3 trace whose 64 domains each write one packet. The trace-info packet comes from
 * domain 0's writer; the other writers' own trace-info packets are left out. */
CTS_TEST(memory_bounded_by_max_domains) {
  enum { NDOMAINS = 64 };
  buf_t trace = {0};
  int e = 0;
  for (uint16_t dom = 0; !e && dom < NDOMAINS; dom++) {
    buf_t part = {0};
    cts_mt_writer_config_t wcfg;
    cts_mt_writer_config_init(&wcfg);
    wcfg.version = 3;
    wcfg.domain = dom;
    void *mem = NULL;
    cts_mt_writer_t *w;
    e = write_trace(&part, &wcfg, &mem, &w);
    const size_t info_size = part.len;
    const uint64_t code = 0x7000 + dom;
    uint64_t id = 0;
    if (!e) e = cts_mt_writer_alloc(w, START_US + 5, 3, 1, CTS_MT_SOURCE_MAJOR, &code, 1, &id);
    if (!e) e = cts_mt_writer_collect(w, START_US + 6, id);
    if (!e) e = cts_mt_writer_close(w);
    free(mem);
    const size_t skip = dom == 0 ? 0 : info_size;
    if (!e) e = buf_write(&trace, part.data + skip, part.len - skip);
    free(part.data);
  }
  CTS_ASSERT_MSG(e == 0, "writing: %s", cts_err_name(e));

  cts_mt_reader_config_t limits;
  cts_mt_reader_config_init(&limits);
  limits.max_domains = 2;
  bounded_reads_t r;
  const bool ok = read_twice(&trace, &limits, &r);
  free(trace.data);
  CTS_ASSERT(ok);
  CTS_ASSERT_MSG(r.full.rc == 0, "%s", r.full.message);
  CTS_ASSERT_EQ_U64(r.full.nevents, 2 * NDOMAINS);
  CTS_ASSERT_EQ_INT(r.limited.rc, CTS_E_TOO_MANY_DOMAINS);
  CTS_ASSERT_EQ_U64(r.limited.nevents, 2 * 2);
  CTS_ASSERT_MSG(r.full_peak > NDOMAINS * 128u * 1024u, "full peak %zu", r.full_peak);
  CTS_ASSERT_MSG(r.limited_peak < 1024u * 1024u, "limited peak %zu", r.limited_peak);
}

/* A trace ending with an empty (header-only) event packet, as memtrace writes at exit,
 * whose header straddles two feeds: the last feed completes the packet exactly. The reader
 * once kept it in its carry buffer and finish() then called it truncated. */
CTS_TEST(empty_last_packet_split_across_feeds) {
  buf_t trace = {0};
  cts_mt_writer_config_t wcfg;
  cts_mt_writer_config_init(&wcfg);
  void *mem = NULL;
  cts_mt_writer_t *w;
  const uint64_t code = 0x4444;
  int e = write_trace(&trace, &wcfg, &mem, &w);
  if (!e) e = cts_mt_writer_alloc(w, START_US + 1, 8, 1, CTS_MT_SOURCE_MAJOR, &code, 1, NULL);
  if (!e) e = cts_mt_writer_flush(w);
  const size_t last = trace.len; /* the empty packet close() writes starts here */
  if (!e) e = cts_mt_writer_close(w);
  free(mem);
  CTS_ASSERT_MSG(e == 0, "writing: %s", cts_err_name(e));
  CTS_ASSERT_EQ_U64(trace.len - last, CTS_MT_HEADER_SIZE_V2);

  uint64_t npackets_whole = 0;
  for (size_t split = last + 1; split < trace.len; split++) {
    outcome_t o;
    memset(&o, 0, sizeof o);
    counting_allocator_t counter;
    cts_mt_reader_config_t cfg;
    cts_mt_reader_config_init(&cfg);
    cfg.allocator = counting_allocator(&counter);
    cts_mt_handler_t h = handler;
    h.user_data = &o;
    cts_mt_reader_t *r;
    CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &cfg, &h), 0);
    int rc = cts_mt_reader_feed(r, trace.data, split);
    if (!rc) rc = cts_mt_reader_feed(r, trace.data + split, trace.len - split);
    if (!rc) rc = cts_mt_reader_finish(r);
    cts_mt_reader_destroy(r);
    CTS_ASSERT_MSG(rc == 0, "split at %zu: %s", split, cts_err_name(rc));
    CTS_ASSERT_MSG(o.nwarnings == 0, "split at %zu: warning %s", split, cts_err_name(o.warning));
    if (!npackets_whole) npackets_whole = o.npackets;
    CTS_ASSERT_EQ_U64(o.npackets, npackets_whole);
  }
  free(trace.data);
}

/* ---- real traces in tiny pieces -------------------------------------------------------- */

CTS_TEST(corpus_in_tiny_pieces) {
  CTS_REQUIRE_CORPUS(corpus);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/memtrace/traces", corpus);
  DIR *d = opendir(dir);
  CTS_ASSERT_MSG(d, "cannot open %s", dir);
  size_t ntraces = 0, nbad = 0;
  const struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const size_t n = strlen(de->d_name);
    if (n <= 4 || strcmp(de->d_name + n - 4, ".ctf") != 0) continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    buf_t trace = {0};
    if (!read_file(path, &trace)) {
      fprintf(stderr, "  cannot read %s\n", path);
      nbad++;
      continue;
    }
    ntraces++;
    counting_allocator_t counter;
    cts_mt_reader_config_t cfg;
    cts_mt_reader_config_init(&cfg);
    cfg.allocator = counting_allocator(&counter);
    outcome_t whole, pieces;
    bool good = read_trace(trace.data, trace.len, &cfg, FEED_WHOLE, &whole);
    good = read_trace(trace.data, trace.len, &cfg, FEED_TINY, &pieces) && good;
    free(trace.data);
    if (!good || whole.nevents == 0 || whole.rc != pieces.rc ||
        whole.err_offset != pieces.err_offset || whole.nevents != pieces.nevents ||
        whole.npackets != pieces.npackets || whole.nwarnings != pieces.nwarnings ||
        whole.hash != pieces.hash) {
      fprintf(stderr,
              "  %s: whole: %s, %llu events, hash %016llx; pieces: %s, %llu events, hash %016llx\n",
              de->d_name, cts_err_name(whole.rc), (unsigned long long)whole.nevents,
              (unsigned long long)whole.hash, cts_err_name(pieces.rc),
              (unsigned long long)pieces.nevents, (unsigned long long)pieces.hash);
      nbad++;
    }
  }
  closedir(d);
  fprintf(stderr, "  %zu corpus traces compared\n", ntraces);
  CTS_ASSERT_MSG(ntraces >= 10, "only %zu traces in %s", ntraces, dir);
  CTS_ASSERT_MSG(nbad == 0, "%zu traces differ (listed above)", nbad);
}

CTS_TEST_MAIN()
