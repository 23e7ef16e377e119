/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the streaming memtrace reader on arbitrary bytes.
 *
 * Input layout (docs/fuzzing.md): byte 0 holds, in its low 3 bits, how many piece-size
 * bytes follow; the rest of the input is the trace, fed to the reader in pieces whose
 * sizes cycle through those bytes (none: the whole trace in one call). A seed made from a
 * real trace is that trace with one 0x00 byte in front.
 *
 * Each input is read twice, with decode_backtraces on and off, and small limits so that
 * a hostile input cannot make the run slow. Besides memory errors (ASan/UBSan) the target
 * aborts when the reader breaks one of its promises:
 *  - every code of a delivered backtrace has a location definition (lookup succeeds), and
 *    its common prefix equals the start of the domain's previous backtrace;
 *  - a location callback's definition is the one lookup returns, within the field widths;
 *  - events and packets come in file order, inside the trace, times monotone per domain;
 *  - an error is sticky, has a known code and a message naming its offset;
 *  - memory given back matches memory taken, and stays within a bound set by the limits;
 *  - a trace read without error with backtraces is also read without error, to the same
 *    events, without them (skipping backtraces only removes checks), whatever the split. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/memtrace.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PACKET_SIZE      (1u << 20)
#define MAX_BACKTRACE_FRAMES 65536u
#define MAX_LOCATION_BYTES   (4u << 20)
#define MAX_DOMAINS          8u
#define MAX_SPLIT_SIZES      7u
#define VERIFIED_SLOTS       4096u
/* Reader memory the limits above allow: carry buffer (< 2 packets), per-domain decoder
 * state with its backtrace (while being doubled), location tables. More than this breaks
 * the reader's promise of memory bounded by its limits. */
#define MEMORY_BOUND                                   \
  (2u * MAX_PACKET_SIZE + MAX_DOMAINS * (256u << 10) + \
   MAX_DOMAINS * 3u * MAX_BACKTRACE_FRAMES * 8u + MAX_LOCATION_BYTES + (1u << 20))

/* For the harness's per-frame work: its comparisons would only feed libFuzzer's
 * comparison tracing, which cost more than the reader itself on deep backtraces. */
#if defined(__clang__)
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

/* ---- accounting allocator -------------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct memory_account {
  uint64_t live, peak, nallocs;
} memory_account_t;

/* Each block carries its size so that free() can check the size the reader passes back. */
#define BLOCK_HEADER 16u

/* Large blocks (decoder state, carry buffer, name arena) are kept for the next run rather
 * than returned: each is the same size every run, and fresh pages from the system made up
 * most of an execution's time. A kept block is poisoned, so a use after free still traps
 * under ASan, and refilled with ASan's 0xbe on reuse, so no run sees the last one's data. */
#define KEEP_MIN_SIZE 4096u
#define KEEP_SLOTS    32u
static struct kept_block {
  size_t size;
  uint8_t *block;
} kept[KEEP_SLOTS];

static uint8_t *take_block(size_t size) {
  for (size_t i = 0; i < KEEP_SLOTS; i++) {
    if (kept[i].block && kept[i].size == size) {
      uint8_t *block = kept[i].block;
      kept[i].block = NULL;
      UNPOISON(block, size + BLOCK_HEADER);
      memset(block + BLOCK_HEADER, 0xbe, size < 4096 ? size : 4096);
      return block;
    }
  }
  return malloc(size + BLOCK_HEADER);
}

static void give_block(uint8_t *block, size_t size) {
  if (size >= KEEP_MIN_SIZE) {
    for (size_t i = 0; i < KEEP_SLOTS; i++) {
      if (!kept[i].block) {
        kept[i].block = block;
        kept[i].size = size;
        POISON(block, size + BLOCK_HEADER);
        return;
      }
    }
  }
  free(block);
}

static void *account_alloc(void *user_data, size_t size) {
  memory_account_t *m = user_data;
  uint8_t *block = size >= KEEP_MIN_SIZE ? take_block(size) : malloc(size + BLOCK_HEADER);
  if (!block) return NULL;
  memcpy(block, &size, sizeof size);
  m->live += size;
  m->nallocs++;
  if (m->live > m->peak) m->peak = m->live;
  CHECK(m->peak <= MEMORY_BOUND);
  return block + BLOCK_HEADER;
}

static void account_free(void *user_data, void *ptr, size_t size) {
  memory_account_t *m = user_data;
  if (!ptr) return;
  uint8_t *block = (uint8_t *)ptr - BLOCK_HEADER;
  size_t recorded;
  memcpy(&recorded, block, sizeof recorded);
  CHECK(recorded == size);
  CHECK(m->live >= size);
  m->live -= size;
  give_block(block, size);
}

/* ---- callbacks ------------------------------------------------------------------------- */

typedef struct read_run {
  cts_mt_reader_t *reader;
  bool decode;
  uint64_t trace_len;
  bool have_info;
  uint64_t digest;           /* everything but backtraces, which only one mode decodes */
  uint64_t backtrace_digest; /* touches every frame so that none goes unread */
  uint64_t nevents, nlocations, npackets, nwarnings;
  uint64_t last_event_offset, last_packet_end;
  bool any_event;
  size_t ndomains;
  uint16_t domain_ids[MAX_DOMAINS];
  uint64_t domain_times[MAX_DOMAINS];
  /* Codes already looked up (definitions are never taken back); 0 marks an empty slot. */
  uint64_t verified[VERIFIED_SLOTS];
  size_t nverified;
  /* Each domain's last delivered backtrace, as the reader decodes prefixes against it. */
  uint64_t *backtraces[MAX_DOMAINS];
  size_t backtrace_lens[MAX_DOMAINS], backtrace_caps[MAX_DOMAINS];
} read_run_t;

NO_COVERAGE static void mix(read_run_t *run, uint64_t v) {
  run->digest = (run->digest ^ v) * 0x100000001b3ull;
  run->digest ^= run->digest >> 29;
}

NO_COVERAGE static void mix_string(read_run_t *run, const char *s) {
  CHECK(s != NULL);
  const size_t n = strlen(s);
  mix(run, n);
  if (n) mix(run, (uint8_t)s[0] | (uint64_t)(uint8_t)s[n - 1] << 8);
}

static int on_info(void *user_data, const cts_mt_info_t *info) {
  read_run_t *run = user_data;
  CHECK(!run->have_info);
  run->have_info = true;
  CHECK(info->version >= 1 && info->version <= 3);
  CHECK(info->sample_rate > 0.0 && info->sample_rate <= 1.0);
  mix(run, info->version);
  mix(run, info->word_size);
  mix_string(run, info->executable_name);
  mix_string(run, info->host_name);
  mix_string(run, info->runtime_params);
  if (info->context) mix_string(run, info->context);
  mix(run, info->pid);
  mix(run, info->start_time_us);
  CHECK(cts_mt_reader_borrow_info(run->reader) == info);
  return 0;
}

static int on_location(void *user_data, uint64_t code, const cts_mt_location_t *locs, size_t n) {
  read_run_t *run = user_data;
  CHECK(run->have_info);
  CHECK(code != 0);
  CHECK(n <= CTS_MT_MAX_LOCATIONS);
  CHECK(n == 0 || locs != NULL);
  const cts_mt_location_t *found;
  size_t nfound;
  CHECK(cts_mt_reader_lookup_location(run->reader, code, &found, &nfound) == 0);
  CHECK(nfound == n && (n == 0 || found == locs));
  mix(run, code);
  mix(run, n);
  for (size_t i = 0; i < n; i++) {
    CHECK(locs[i].line <= 0xFFFFFu && locs[i].start_char <= 0xFFu && locs[i].end_char <= 0x3FFu);
    mix(run, locs[i].line | (uint64_t)locs[i].start_char << 20 | (uint64_t)locs[i].end_char << 28);
    mix_string(run, locs[i].filename);
    mix_string(run, locs[i].defname);
  }
  run->nlocations++;
  return 0;
}

/* Time per domain must never go backwards (§5). Returns the domain's index. */
static size_t check_domain_time(read_run_t *run, uint16_t domain, uint64_t time_us) {
  size_t i = 0;
  while (i < run->ndomains && run->domain_ids[i] != domain) i++;
  if (i == run->ndomains) {
    CHECK(run->ndomains < MAX_DOMAINS); /* the reader's own limit */
    run->domain_ids[run->ndomains] = domain;
    run->domain_times[run->ndomains++] = time_us;
  }
  CHECK(time_us >= run->domain_times[i]);
  run->domain_times[i] = time_us;
  return i;
}

/* Whether code was looked up before in this run; if not, remembers it (when there is room:
 * a full set only means more lookups). */
NO_COVERAGE static bool seen_before(read_run_t *run, uint64_t code) {
  size_t i = (size_t)((code * 0x9e3779b97f4a7c15ull) >> 52) & (VERIFIED_SLOTS - 1);
  for (; run->verified[i] != 0; i = (i + 1) & (VERIFIED_SLOTS - 1))
    if (run->verified[i] == code) return true;
  if (code != 0 && run->nverified < VERIFIED_SLOTS / 2) {
    run->verified[i] = code;
    run->nverified++;
  }
  return false;
}

/* A delivered backtrace shares its first min(common_prefix, previous length) frames with
 * the previous one of its domain (§8.3, and §8.4 when the prefix claims more than that):
 * those were looked up before, so only the rest needs one. Comparing the prefix
 * instead of looking it up again keeps deep backtraces (thousands of frames per event)
 * from dominating the run time, and checks the reader's prefix handling on the way. */
NO_COVERAGE static void check_backtrace(read_run_t *run, size_t domain, const cts_mt_event_t *ev) {
  const size_t len = ev->backtrace_len;
  CHECK(len <= MAX_BACKTRACE_FRAMES);
  CHECK(len == 0 || ev->backtrace != NULL);
  uint64_t *prev = run->backtraces[domain];
  const size_t prev_len = run->backtrace_lens[domain];
  size_t same = prev_len;
  if (ev->common_prefix < same) same = (size_t)ev->common_prefix;
  CHECK(len >= same);
  CHECK(same == 0 || memcmp(ev->backtrace, prev, same * sizeof *prev) == 0);
  uint64_t frames = 0;
  for (size_t i = same; i < len; i++) {
    const uint64_t code = ev->backtrace[i];
    frames = frames * 31 + code;
    if (seen_before(run, code)) continue;
    const cts_mt_location_t *locs;
    size_t n;
    /* The reader's invariant: a delivered code always has a definition. */
    if (cts_mt_reader_lookup_location(run->reader, code, &locs, &n) != 0) abort();
  }
  run->backtrace_digest = run->backtrace_digest * 0x9e3779b97f4a7c15ull + frames;
  if (len > run->backtrace_caps[domain]) {
    size_t cap = run->backtrace_caps[domain] ? run->backtrace_caps[domain] : 1024;
    while (cap < len) cap *= 2;
    prev = realloc(prev, cap * sizeof *prev);
    CHECK(prev != NULL);
    run->backtraces[domain] = prev;
    run->backtrace_caps[domain] = cap;
  }
  if (len > same) memcpy(prev + same, ev->backtrace + same, (len - same) * sizeof *prev);
  run->backtrace_lens[domain] = len;
}

static int on_event(void *user_data, const cts_mt_event_t *ev) {
  read_run_t *run = user_data;
  CHECK(run->have_info);
  CHECK(ev->kind == CTS_MT_ALLOC || ev->kind == CTS_MT_PROMOTE || ev->kind == CTS_MT_COLLECT);
  CHECK(ev->offset < run->trace_len);
  CHECK(!run->any_event || ev->offset > run->last_event_offset);
  run->any_event = true;
  run->last_event_offset = ev->offset;
  const size_t domain = check_domain_time(run, ev->domain, ev->time_us);
  mix(run, ev->kind);
  mix(run, ev->domain);
  mix(run, ev->time_us);
  mix(run, ev->obj_id);
  mix(run, ev->offset);
  if (ev->kind == CTS_MT_ALLOC) {
    CHECK(ev->source <= CTS_MT_SOURCE_EXTERNAL);
    CHECK(ev->length <= (uint64_t)INT64_MAX && ev->nsamples <= (uint64_t)INT64_MAX);
    CHECK(!ev->short_form || (ev->length >= 1 && ev->length <= 16 && ev->nsamples == 1 &&
                              ev->source == CTS_MT_SOURCE_MINOR));
    mix(run, ev->source);
    mix(run, ev->short_form);
    mix(run, ev->length);
    mix(run, ev->nsamples);
    mix(run, ev->common_prefix);
  }
  if (!run->decode || ev->kind != CTS_MT_ALLOC) {
    CHECK(ev->backtrace_len == 0);
  } else {
    check_backtrace(run, domain, ev);
  }
  run->nevents++;
  return 0;
}

static int on_packet(void *user_data, const cts_mt_packet_t *packet) {
  read_run_t *run = user_data;
  CHECK(packet->kind >= CTS_MT_PACKET_TRACE_INFO && packet->kind <= CTS_MT_PACKET_SKIPPED);
  CHECK(packet->offset >= run->last_packet_end);
  CHECK(packet->size <= MAX_PACKET_SIZE);
  CHECK(packet->size >= CTS_MT_HEADER_SIZE_V2);
  if (packet->kind == CTS_MT_PACKET_TRUNCATED) {
    CHECK(packet->offset + packet->size > run->trace_len);
  } else {
    CHECK(packet->offset + packet->size <= run->trace_len);
  }
  CHECK(packet->time_begin_us <= packet->time_end_us);
  CHECK(packet->alloc_id_begin <= packet->alloc_id_end);
  run->last_packet_end = packet->offset + packet->size;
  mix(run, packet->kind);
  mix(run, packet->offset);
  mix(run, packet->nevents);
  run->npackets++;
  return 0;
}

static void on_warning(void *user_data, int code, uint64_t offset, const char *message) {
  read_run_t *run = user_data;
  CHECK(code == CTS_E_TRUNCATED_PACKET || code == CTS_E_WRONG_PID || code == CTS_E_SKIPPED_PACKET);
  CHECK(offset <= run->trace_len);
  CHECK(message != NULL && message[0] != '\0');
  mix(run, (uint64_t)-code);
  run->nwarnings++;
}

/* ---- one read ------------------------------------------------------------------------- */

static size_t piece_size(uint8_t code, size_t left) {
  size_t n = code == 0 ? left : code <= 191 ? code : (size_t)(code - 191) * 512u;
  return n < left ? n : left;
}

static void check_failure(read_run_t *run, int err) {
  CHECK(err < 0);
  CHECK(strcmp(cts_err_name(err), "CTS_E_UNKNOWN") != 0 &&
        strcmp(cts_err_name(err), "CTS_E_SYSTEM") != 0);
  CHECK(cts_mt_reader_error(run->reader) == err);
  CHECK(cts_mt_reader_error_offset(run->reader) <= run->trace_len);
  const char *msg = cts_mt_reader_error_message(run->reader);
  CHECK(strncmp(msg, "at offset ", 10) == 0);
  /* Sticky: a failed reader keeps failing with the same error. */
  CHECK(cts_mt_reader_feed(run->reader, "", 0) == err);
  CHECK(cts_mt_reader_finish(run->reader) == err);
}

/* Reads the trace, fed in pieces cycling through sizes[first..] then sizes[0..first).
 * Returns the reader's final status. */
static int read_trace(read_run_t *run, bool decode, const uint8_t *trace, size_t len,
                      const uint8_t *sizes, size_t nsizes, size_t first) {
  memset(run, 0, sizeof *run);
  run->decode = decode;
  run->trace_len = len;
  run->digest = 0xcbf29ce484222325ull;
  memory_account_t memory = {0, 0, 0};
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = (cts_allocator_t){account_alloc, account_free, &memory};
  cfg.decode_backtraces = decode;
  cfg.max_packet_size = MAX_PACKET_SIZE;
  cfg.max_backtrace_frames = MAX_BACKTRACE_FRAMES;
  cfg.max_location_bytes = MAX_LOCATION_BYTES;
  cfg.max_domains = MAX_DOMAINS;
  const cts_mt_handler_t handler = {
      .user_data = run,
      .on_info = on_info,
      .on_location = on_location,
      .on_event = on_event,
      .on_packet = on_packet,
      .on_warning = on_warning,
  };
  CHECK(cts_mt_reader_create(&run->reader, &cfg, &handler) == 0);
  int err = 0;
  size_t pos = 0, k = first;
  while (pos < len && !err) {
    const size_t n = nsizes ? piece_size(sizes[k++ % nsizes], len - pos) : len - pos;
    err = cts_mt_reader_feed(run->reader, trace + pos, n);
    pos += n;
    if (!err) CHECK(cts_mt_reader_offset(run->reader) == pos);
  }
  if (!err) err = cts_mt_reader_finish(run->reader);
  if (err) {
    check_failure(run, err);
  } else {
    CHECK(run->have_info && cts_mt_reader_borrow_info(run->reader) != NULL);
    CHECK(cts_mt_reader_offset(run->reader) == len);
    CHECK(cts_mt_reader_error_message(run->reader)[0] == '\0');
  }
  cts_mt_reader_destroy(run->reader);
  CHECK(memory.live == 0);
  for (size_t i = 0; i < MAX_DOMAINS; i++) free(run->backtraces[i]);
  return err;
}

/* Keeps the backtrace walk observable so the compiler cannot drop it. */
static volatile uint64_t backtrace_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t nsizes = data[0] & MAX_SPLIT_SIZES;
  if (nsizes > size - 1) nsizes = size - 1;
  const uint8_t *sizes = data + 1;
  const uint8_t *trace = data + 1 + nsizes;
  const size_t len = size - 1 - nsizes;

  read_run_t with_bt, without_bt;
  const int err_with = read_trace(&with_bt, true, trace, len, sizes, nsizes, 0);
  const int err_without = read_trace(&without_bt, false, trace, len, sizes, nsizes, 1);
  backtrace_sink = with_bt.backtrace_digest;
  if (err_with == 0) {
    CHECK(err_without == 0);
    CHECK(with_bt.digest == without_bt.digest);
    CHECK(with_bt.nevents == without_bt.nevents && with_bt.npackets == without_bt.npackets &&
          with_bt.nlocations == without_bt.nlocations && with_bt.nwarnings == without_bt.nwarnings);
  }
  return 0;
}
