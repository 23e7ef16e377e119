/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the mirage-profile reader (src/core/mprof_reader.c) on arbitrary bytes,
 * taken as a whole ring or stream file.
 *
 * Each input is read twice, in sequence order and in file order, with small limits so that
 * a hostile input cannot make the run slow. Besides memory errors (ASan/UBSan) the target
 * aborts when the reader breaks one of its promises:
 *  - every event has a known id, lies inside the input, and its string (for the kinds
 *    that have one) is NUL-terminated with the length reported;
 *  - an error has a message naming its offset; no event is delivered when the headers are
 *    bad, so both orders fail alike;
 *  - both orders decode the same number of events with the same warnings;
 *  - memory given back matches memory taken and stays within the bound the limits set. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/mprof.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PACKETS     4096u
#define MAX_PACKET_SIZE (1u << 20)
/* packet table (doubling) + one packet + the counting sort's buckets and copy */
#define MEMORY_BOUND (3u * MAX_PACKETS * 32u + MAX_PACKET_SIZE + 65537u * 4u + (64u << 10))

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

typedef struct account {
  uint64_t live, peak;
} account_t;

#define BLOCK_HEADER 16u

static void *account_alloc(void *user_data, size_t size) {
  account_t *m = user_data;
  uint8_t *block = malloc(size + BLOCK_HEADER);
  if (!block) return NULL;
  memcpy(block, &size, sizeof size);
  m->live += size;
  if (m->live > m->peak) m->peak = m->live;
  CHECK(m->peak <= MEMORY_BOUND);
  return block + BLOCK_HEADER;
}

static void account_free(void *user_data, void *ptr, size_t size) {
  account_t *m = user_data;
  if (!ptr) return;
  uint8_t *block = (uint8_t *)ptr - BLOCK_HEADER;
  size_t recorded;
  memcpy(&recorded, block, sizeof recorded);
  CHECK(recorded == size && m->live >= size);
  m->live -= size;
  free(block);
}

typedef struct run {
  size_t size;
  uint64_t events, warnings, digest;
} run_t;

static int on_event(void *user_data, const cts_mprof_event_t *ev) {
  run_t *r = user_data;
  CHECK(ev->id < CTS_MPROF_EVENT_IDS);
  CHECK(cts_mprof_event_name(ev->id) != NULL);
  CHECK(ev->offset < r->size);
  const bool has_string = ev->id == CTS_MPROF_FAILS || ev->id == CTS_MPROF_LABEL ||
                          ev->id == CTS_MPROF_INCREASE || ev->id == CTS_MPROF_COUNTER;
  CHECK(has_string == (ev->str != NULL));
  if (ev->str) {
    CHECK(strlen(ev->str) == ev->str_len);
    CHECK(ev->offset + ev->str_len < r->size);
  }
  if (ev->id == CTS_MPROF_GC) CHECK(ev->thread == CTS_TASK_NONE);
  r->events++;
  r->digest = (r->digest ^ ev->time_ns ^ ev->arg) * 0x100000001b3ull;
  return 0;
}

static void on_warning(void *user_data, int code, uint64_t offset, const char *message) {
  run_t *r = user_data;
  CHECK(code < 0 && message && message[0]);
  CHECK(offset <= r->size);
  r->warnings++;
}

static int read_once(const uint8_t *data, size_t size, bool file_order, run_t *r) {
  account_t acct = {0};
  cts_mprof_reader_config_t cfg;
  cts_mprof_reader_config_init(&cfg);
  cfg.allocator = (cts_allocator_t){account_alloc, account_free, &acct};
  cfg.max_packets = MAX_PACKETS;
  cfg.max_packet_size = MAX_PACKET_SIZE;
  cfg.file_order = file_order;
  cts_mprof_memory_t m = {data, size};
  const cts_mprof_handler_t h = {.user_data = r, .on_event = on_event, .on_warning = on_warning};
  cts_mprof_summary_t sum;
  char msg[256];
  memset(r, 0, sizeof *r);
  r->size = size;
  const int err =
      cts_mprof_read(&cfg, cts_mprof_memory_read_at, &m, size, &h, &sum, msg, sizeof msg);
  CHECK(acct.live == 0);
  if (err) {
    CHECK(err < 0);
    CHECK(strstr(msg, "offset ") == msg);
    CHECK(r->events == 0); /* header errors come before any decoding */
  } else {
    CHECK(sum.events == r->events);
    uint64_t by_id = 0;
    for (unsigned i = 0; i < CTS_MPROF_EVENT_IDS; i++) by_id += sum.events_by_id[i];
    CHECK(by_id == r->events);
  }
  return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run_t seq, file;
  const int e1 = read_once(data, size, false, &seq);
  const int e2 = read_once(data, size, true, &file);
  CHECK(e1 == e2);
  if (!e1) {
    CHECK(seq.events == file.events);
    CHECK(seq.warnings == file.warnings);
  }
  return 0;
}
