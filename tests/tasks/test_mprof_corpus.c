/* SPDX-License-Identifier: MIT */
/* The reader and writer against real mirage-profile traces (corpus/mprof): event counts
 * per kind as babeltrace2 2.0.4 prints them on the (reordered) traces, the first and last
 * events, and a byte-exact rewrite of each trace through our writer. */
#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#include "../test.h"
#include "mprof_test_util.h"

/* `babeltrace2 DIR | awk '{print $3}' | sort | uniq -c` (mprof-viewer.md §D.2-D.3), by id. */
static const uint64_t net_counts[CTS_MPROF_EVENT_IDS] = {
    [CTS_MPROF_CREATES] = 1816,  [CTS_MPROF_READ] = 2596,   [CTS_MPROF_FULFILLS] = 1511,
    [CTS_MPROF_FAILS] = 2,       [CTS_MPROF_BECOMES] = 215, [CTS_MPROF_LABEL] = 2185,
    [CTS_MPROF_INCREASE] = 1394, [CTS_MPROF_SWITCH] = 358,  [CTS_MPROF_GC] = 1};
static const uint64_t koleini_counts[CTS_MPROF_EVENT_IDS] = {
    [CTS_MPROF_CREATES] = 7570, [CTS_MPROF_READ] = 7701,  [CTS_MPROF_FULFILLS] = 6437,
    [CTS_MPROF_BECOMES] = 1140, [CTS_MPROF_LABEL] = 2393, [CTS_MPROF_INCREASE] = 1256,
    [CTS_MPROF_SWITCH] = 2178,  [CTS_MPROF_GC] = 2,       [CTS_MPROF_SIGNAL] = 1030};

static uint8_t *load_corpus(const char *corpus, const char *rel, size_t *size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/mprof/%s", corpus, rel);
  return tu_load(path, size);
}

static uint64_t fixed_clock(void *ud) {
  (void)ud;
  return 42;
}

/* Writes @p t's events through a fresh ring of @p size bytes into @p out. */
static int rewrite(const tu_events_t *t, uint8_t *out, size_t size) {
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(4) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = out;
  cfg.buffer_size = size;
  cfg.clock = fixed_clock;
  cts_mprof_ring_t *ring;
  int err = cts_mprof_ring_init(&ring, state, sizeof state, &cfg);
  if (err) return err;
  cts_mprof_writer_t w;
  cts_mprof_writer_init(&w, ring);
  for (size_t i = 0; i < t->n && !err; i++) err = cts_mprof_writer_write(&w, &t->ev[i]);
  return err;
}

CTS_TEST(net_counts_and_ends) {
  CTS_REQUIRE_CORPUS(corpus);
  size_t size;
  uint8_t *data = load_corpus(corpus, "net/net.ctf", &size);
  CTS_ASSERT(data);
  tu_events_t t = {0};
  cts_mprof_summary_t sum;
  char msg[256];
  const int err = tu_read(data, size, &t, false, &sum, msg, sizeof msg);
  CTS_ASSERT_MSG(err == 0, "%s", msg);
  CTS_ASSERT_EQ_U64(t.n, 10078);
  CTS_ASSERT_EQ_U64(t.warnings, 0);
  CTS_ASSERT_EQ_U64(sum.packets, 4);
  CTS_ASSERT(!sum.wrapped);
  for (unsigned id = 0; id < CTS_MPROF_EVENT_IDS; id++)
    CTS_ASSERT_MSG(sum.events_by_id[id] == net_counts[id], "%s: %llu != %llu",
                   cts_mprof_event_name(id), (unsigned long long)sum.events_by_id[id],
                   (unsigned long long)net_counts[id]);
  /* babeltrace2 --clock-cycles: first and last lines */
  CTS_ASSERT_EQ_U64(t.ev[0].time_ns, 6777606442952u);
  CTS_ASSERT_EQ_INT(t.ev[0].id, CTS_MPROF_SWITCH);
  CTS_ASSERT_EQ_INT(t.ev[0].thread, 0);
  CTS_ASSERT_EQ_INT(t.ev[1].id, CTS_MPROF_INCREASE);
  CTS_ASSERT_EQ_INT(t.ev[1].value, 1);
  CTS_ASSERT_STR_EQ(t.ev[1].str, "gntref");
  CTS_ASSERT_STR_EQ(t.ev[2].str, "Gntshr.grant_access");
  const cts_mprof_event_t *last = &t.ev[t.n - 1];
  CTS_ASSERT_EQ_U64(last->time_ns, 6783505042718u);
  CTS_ASSERT_EQ_INT(last->id, CTS_MPROF_SWITCH);
  CTS_ASSERT_EQ_INT(last->thread, -1);
  CTS_ASSERT_EQ_INT(last->packet_count, 1);
  tu_events_free(&t);
  free(data);
}

CTS_TEST(koleini_wrapped_counts_and_ends) {
  CTS_REQUIRE_CORPUS(corpus);
  size_t size;
  uint8_t *data = load_corpus(corpus, "wrapped/koleini-trace1-0a4963a.ctf", &size);
  CTS_ASSERT(data);
  tu_events_t t = {0};
  cts_mprof_summary_t sum;
  char msg[256];
  const int err = tu_read(data, size, &t, false, &sum, msg, sizeof msg);
  CTS_ASSERT_MSG(err == 0, "%s", msg);
  CTS_ASSERT_EQ_U64(t.n, 29707);
  CTS_ASSERT_EQ_U64(t.warnings, 0);
  CTS_ASSERT(sum.wrapped);
  CTS_ASSERT_EQ_U64(sum.first_index, 1);
  for (unsigned id = 0; id < CTS_MPROF_EVENT_IDS; id++)
    CTS_ASSERT_MSG(sum.events_by_id[id] == koleini_counts[id], "%s: %llu != %llu",
                   cts_mprof_event_name(id), (unsigned long long)sum.events_by_id[id],
                   (unsigned long long)koleini_counts[id]);
  const cts_mprof_event_t *first = &t.ev[0], *last = &t.ev[t.n - 1];
  CTS_ASSERT_EQ_U64(first->time_ns, 632514932861u);
  CTS_ASSERT_EQ_INT(first->id, CTS_MPROF_CREATES);
  CTS_ASSERT_EQ_INT(first->packet_count, 0x25);
  CTS_ASSERT_EQ_U64(first->thread, 0x15B23);
  CTS_ASSERT_EQ_U64(first->arg, 0x15B48);
  CTS_ASSERT_EQ_INT(first->thread_type, CTS_TASK_TRY);
  CTS_ASSERT_EQ_U64(last->time_ns, 638850846714u);
  CTS_ASSERT_EQ_INT(last->id, CTS_MPROF_SWITCH);
  CTS_ASSERT_EQ_INT(last->thread, -1);
  CTS_ASSERT_EQ_INT(last->packet_count, 0x28);
  /* after ordering, time never goes backwards (§4 step 6) */
  for (size_t i = 1; i < t.n; i++) CTS_ASSERT(t.ev[i].time_ns >= t.ev[i - 1].time_ns);
  /* file order starts with the newest packet (count 40) */
  tu_events_t f = {0};
  CTS_ASSERT_EQ_INT(tu_read(data, size, &f, true, &sum, msg, sizeof msg), 0);
  CTS_ASSERT_EQ_U64(f.n, 29707);
  CTS_ASSERT_EQ_INT(f.ev[0].packet_count, 40);
  tu_events_free(&f);
  tu_events_free(&t);
  free(data);
}

/* net.ctf was never wrapped: writing its events again gives the file byte for byte. */
CTS_TEST(net_rewrite_is_byte_exact) {
  CTS_REQUIRE_CORPUS(corpus);
  size_t size;
  uint8_t *data = load_corpus(corpus, "net/net.ctf", &size);
  CTS_ASSERT(data);
  tu_events_t t = {0};
  CTS_ASSERT_EQ_INT(tu_read(data, size, &t, false, NULL, NULL, 0), 0);
  uint8_t *out = calloc(1, size);
  CTS_ASSERT_EQ_INT(rewrite(&t, out, size), 0);
  CTS_ASSERT_MEM_EQ(out, data, size);
  free(out);
  tu_events_free(&t);
  free(data);
}

/* The wrapped ring: written from empty, the same events fill packets 0-3 exactly as they
 * filled the original's packets 37-40 (same break points, same content_size). */
CTS_TEST(koleini_rewrite_same_packets) {
  CTS_REQUIRE_CORPUS(corpus);
  size_t size;
  uint8_t *data = load_corpus(corpus, "wrapped/koleini-trace1-0a4963a.ctf", &size);
  CTS_ASSERT(data);
  tu_events_t t = {0};
  CTS_ASSERT_EQ_INT(tu_read(data, size, &t, false, NULL, NULL, 0), 0);
  uint8_t *out = calloc(1, size);
  CTS_ASSERT_EQ_INT(rewrite(&t, out, size), 0);
  const size_t p = size / 4;
  for (size_t k = 0; k < 4; k++) {
    const uint8_t *orig = data + ((k + 1) % 4) * p, *mine = out + k * p;
    const uint32_t content = (uint32_t)orig[26] | (uint32_t)orig[27] << 8 |
                             (uint32_t)orig[28] << 16 | (uint32_t)orig[29] << 24;
    CTS_ASSERT_MEM_EQ(mine + 26, orig + 26, 4); /* content_size */
    CTS_ASSERT_MEM_EQ(mine + 30, orig + 30, content / 8 - 30);
    CTS_ASSERT_EQ_INT(mine[24], k);
  }
  free(out);
  tu_events_free(&t);
  free(data);
}

CTS_TEST_MAIN()
