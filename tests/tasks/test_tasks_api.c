/* SPDX-License-Identifier: MIT */
/* The task-tracing hooks and the ring writer: what each hook writes (§7.2), the ring's
 * packet cycle (§3.3), the stream sink, limits, and the reader's handling of bad input. */
#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#include "../test.h"
#include "mprof_test_util.h"

static uint64_t fake_now;
static uint64_t fake_clock(void *ud) {
  (void)ud;
  return fake_now += 10;
}

typedef struct ring_fixture {
  uint64_t state[CTS_MPROF_RING_STATE_SIZE(8) / 8];
  uint8_t *buf;
  size_t size;
  cts_mprof_ring_t *ring;
} ring_fixture_t;

static int make_ring(ring_fixture_t *f, size_t size, uint32_t packets, cts_write_cb sink,
                     void *sink_ud) {
  f->buf = calloc(1, size);
  f->size = size;
  fake_now = 1000;
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = f->buf;
  cfg.buffer_size = size;
  cfg.packets = packets;
  cfg.clock = fake_clock;
  cfg.sink = sink;
  cfg.sink_user_data = sink_ud;
  return cts_mprof_ring_init(&f->ring, f->state, sizeof f->state, &cfg);
}

static uint32_t ld32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct expect {
  uint8_t id;
  int64_t thread;
  uint64_t arg;
  int64_t value;
  const char *str;
  uint8_t type;
} expect_t;

CTS_TEST(hooks_write_what_mirage_profile_writes) {
  ring_fixture_t f;
  CTS_ASSERT_EQ_INT(make_ring(&f, 4 * 4096, 4, NULL, NULL), 0);
  cts_task_label(5, "before start: nothing"); /* not started */
  CTS_ASSERT_EQ_INT(cts_task_current(), -1);
  CTS_ASSERT_EQ_INT(cts_task_start(f.ring), 0);
  CTS_ASSERT_EQ_INT(cts_task_current(), 0);
  const cts_task_id_t a = cts_task_named_wait("rx");
  const cts_task_id_t b = cts_task_create(CTS_TASK_BIND);
  cts_task_created(b + 1000, (cts_task_type_t)42); /* unknown type -> 99 */
  cts_task_try_read(b, a);
  cts_task_idle();
  cts_task_idle(); /* always written */
  cts_task_resume(0);
  cts_task_resume(0); /* unchanged: nothing */
  cts_task_resolved(a);
  cts_task_read(b, a);
  cts_task_read(b, b); /* reading oneself: nothing, but b runs */
  cts_task_switch(b);  /* already current: nothing */
  cts_task_becomes(b, b);
  cts_task_becomes(b, a);
  cts_task_failed(a, "Not_found");
  cts_task_failed(a, NULL);
  cts_task_signal(7, b);
  cts_task_signal_noswitch(8, 7);
  cts_task_read_later(8, a);
  cts_task_gc(12345);
  cts_task_counter_t c;
  cts_task_counter_init(&c, "gntref", 5);
  cts_task_counter_increase(&c, 2);
  cts_task_counter_set(&c, -3);
  cts_task_note_increase("old", -4);
  cts_task_should_resolve(a);
  cts_task_label_current("here");
  const cts_task_id_t cond = cts_task_named_condition("cond");
  const cts_task_id_t task = cts_task_named_task("job");
  CTS_ASSERT_EQ_INT(cts_task_current(), 7);
  cts_task_stop();
  cts_task_label(a, "after stop: nothing");
  CTS_ASSERT_EQ_INT(cts_task_counter_value(&c), -3);

  const expect_t want[] = {
      {CTS_MPROF_SWITCH, 0, 0, 0, NULL, 0},
      {CTS_MPROF_CREATES, 0, (uint64_t)a, 0, NULL, CTS_TASK_WAIT},
      {CTS_MPROF_LABEL, a, 0, 0, "rx", 0},
      {CTS_MPROF_CREATES, 0, (uint64_t)b, 0, NULL, CTS_TASK_BIND},
      {CTS_MPROF_CREATES, 0, (uint64_t)b + 1000, 0, NULL, 99},
      {CTS_MPROF_TRY_READ, b, (uint64_t)a, 0, NULL, 0},
      {CTS_MPROF_SWITCH, -1, 0, 0, NULL, 0},
      {CTS_MPROF_SWITCH, -1, 0, 0, NULL, 0},
      {CTS_MPROF_SWITCH, 0, 0, 0, NULL, 0},
      {CTS_MPROF_FULFILLS, 0, (uint64_t)a, 0, NULL, 0},
      {CTS_MPROF_READ, b, (uint64_t)a, 0, NULL, 0},
      {CTS_MPROF_BECOMES, b, (uint64_t)a, 0, NULL, 0},
      {CTS_MPROF_FAILS, b, (uint64_t)a, 0, "Not_found", 0},
      {CTS_MPROF_FAILS, b, (uint64_t)a, 0, "", 0},
      {CTS_MPROF_SIGNAL, 7, (uint64_t)b, 0, NULL, 0},
      {CTS_MPROF_SIGNAL_NOSWITCH, 8, 7, 0, NULL, 0},
      {CTS_MPROF_READ_LATER, 8, (uint64_t)a, 0, NULL, 0},
      {CTS_MPROF_GC, -1, 12345, 0, NULL, 0},
      {CTS_MPROF_COUNTER, 7, 0, 7, "gntref", 0},
      {CTS_MPROF_COUNTER, 7, 0, -3, "gntref", 0},
      {CTS_MPROF_INCREASE, 7, 0, -4, "old", 0},
      {CTS_MPROF_LABEL, a, 0, 0, "__should_resolve", 0},
      {CTS_MPROF_LABEL, 7, 0, 0, "here", 0},
      {CTS_MPROF_CREATES, 7, (uint64_t)cond, 0, NULL, CTS_TASK_CONDITION},
      {CTS_MPROF_LABEL, cond, 0, 0, "cond", 0},
      {CTS_MPROF_CREATES, 7, (uint64_t)task, 0, NULL, CTS_TASK_TASK},
      {CTS_MPROF_LABEL, task, 0, 0, "job", 0},
  };
  tu_events_t t = {0};
  char msg[256];
  CTS_ASSERT_MSG(tu_read(f.buf, f.size, &t, false, NULL, msg, sizeof msg) == 0, "%s", msg);
  CTS_ASSERT_EQ_U64(t.n, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < t.n; i++) {
    const cts_mprof_event_t *e = &t.ev[i];
    CTS_ASSERT_MSG(e->id == want[i].id && e->thread == want[i].thread && e->arg == want[i].arg &&
                       e->value == want[i].value && e->thread_type == want[i].type,
                   "event %zu: got %s thread=%lld arg=%llu value=%lld type=%u", i,
                   cts_mprof_event_name(e->id), (long long)e->thread, (unsigned long long)e->arg,
                   (long long)e->value, e->thread_type);
    if (want[i].str) CTS_ASSERT_STR_EQ(e->str, want[i].str);
    CTS_ASSERT_EQ_U64(e->time_ns, 1010 + 10 * i);
  }
  tu_events_free(&t);
  free(f.buf);
}

/* §3.3 with 256-byte packets: 13 switch events (17 bytes) fit, since 30 + 14 × 17 = 268 and
 * even 30 + 13 × 17 + 17 = 268 >= 256. After 210 events the ring holds counts 16,13,14,15. */
CTS_TEST(ring_cycles_packets_in_sequence) {
  ring_fixture_t f;
  CTS_ASSERT_EQ_INT(make_ring(&f, 4 * 256, 4, NULL, NULL), 0);
  cts_mprof_writer_t w;
  cts_mprof_writer_init(&w, f.ring);
  for (uint64_t i = 0; i < 210; i++) {
    const cts_mprof_event_t ev = {.time_ns = i, .id = CTS_MPROF_SWITCH, .thread = (int64_t)i};
    CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w, &ev), 0);
  }
  CTS_ASSERT_EQ_U64(cts_mprof_ring_packets_started(f.ring), 17);
  const uint16_t counts[4] = {16, 13, 14, 15};
  for (int k = 0; k < 4; k++) {
    const uint8_t *p = f.buf + 256 * k;
    CTS_ASSERT_EQ_U64(ld32(p + 20), 256 * 8);
    CTS_ASSERT_EQ_INT(p[24] | p[25] << 8, counts[k]);
    CTS_ASSERT_EQ_U64(ld32(p + 26), (k == 0 ? 30 + 2 * 17 : 30 + 13 * 17) * 8);
  }
  tu_events_t t = {0};
  cts_mprof_summary_t sum;
  CTS_ASSERT_EQ_INT(tu_read(f.buf, f.size, &t, false, &sum, NULL, 0), 0);
  CTS_ASSERT(sum.wrapped);
  CTS_ASSERT_EQ_U64(t.n, 3 * 13 + 2);
  for (size_t i = 0; i < t.n; i++) CTS_ASSERT_EQ_U64(t.ev[i].time_ns, 210 - t.n + i);
  tu_events_free(&t);
  free(f.buf);
}

typedef struct mem_sink {
  uint8_t *data;
  size_t len, cap;
  int calls;
} mem_sink_t;

static int mem_sink_write(void *ud, const void *buf, size_t len) {
  mem_sink_t *s = ud;
  if (s->len + len > s->cap) {
    s->cap = (s->len + len) * 2;
    s->data = realloc(s->data, s->cap);
  }
  memcpy(s->data + s->len, buf, len);
  s->len += len;
  s->calls++;
  return 0;
}

CTS_TEST(stream_sink_gets_finished_packets) {
  ring_fixture_t f;
  mem_sink_t s = {0};
  CTS_ASSERT_EQ_INT(make_ring(&f, 4 * 256, 4, mem_sink_write, &s), 0);
  cts_mprof_writer_t w;
  cts_mprof_writer_init(&w, f.ring);
  for (uint64_t i = 0; i < 100; i++) {
    const cts_mprof_event_t ev = {.time_ns = i, .id = CTS_MPROF_LABEL, .thread = 1, .str = "x"};
    CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w, &ev), 0);
  }
  /* labels are 19 bytes: 11 a packet; 9 packets are full, the 10th is still held */
  CTS_ASSERT_EQ_INT(s.calls, 9);
  CTS_ASSERT_EQ_INT(cts_mprof_ring_flush(f.ring), 0);
  CTS_ASSERT_EQ_INT(s.calls, 10);
  CTS_ASSERT_EQ_U64(s.len, 10 * 30 + 100 * 19);
  CTS_ASSERT_EQ_U64(ld32(s.data + 20), ld32(s.data + 26)); /* packet_size = content_size */
  tu_events_t t = {0};
  cts_mprof_summary_t sum;
  CTS_ASSERT_EQ_INT(tu_read(s.data, s.len, &t, false, &sum, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(sum.packets, 10);
  CTS_ASSERT_EQ_U64(t.n, 100);
  for (size_t i = 0; i < t.n; i++) CTS_ASSERT_EQ_U64(t.ev[i].time_ns, i);
  /* the ring memory itself keeps whole packets (the header was restored) */
  CTS_ASSERT_EQ_U64(ld32(f.buf + 20), 256 * 8);
  tu_events_free(&t);
  free(s.data);
  free(f.buf);
}

CTS_TEST(writers_beyond_packets_drop_events) {
  ring_fixture_t f;
  CTS_ASSERT_EQ_INT(make_ring(&f, 4 * 256, 4, NULL, NULL), 0);
  cts_mprof_writer_t w[5];
  const cts_mprof_event_t ev = {.time_ns = 1, .id = CTS_MPROF_SWITCH};
  for (int i = 0; i < 5; i++) cts_mprof_writer_init(&w[i], f.ring);
  for (int i = 0; i < 4; i++) CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w[i], &ev), 0);
  CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w[4], &ev), CTS_E_LIMIT);
  CTS_ASSERT_EQ_U64(cts_mprof_ring_dropped(f.ring), 1);
  CTS_ASSERT_EQ_U64(cts_mprof_ring_packets_started(f.ring), 4); /* no sequence burnt */
  cts_mprof_writer_fini(&w[1]);
  CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w[4], &ev), 0);
  const cts_mprof_event_t bad = {.id = CTS_MPROF_EVENT_IDS};
  CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w[0], &bad), CTS_E_INVAL);
  free(f.buf);
}

CTS_TEST(oversized_string_is_cut_to_fit) {
  ring_fixture_t f;
  CTS_ASSERT_EQ_INT(make_ring(&f, 4 * 256, 4, NULL, NULL), 0);
  char big[1000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  cts_mprof_writer_t w;
  cts_mprof_writer_init(&w, f.ring);
  const cts_mprof_event_t ev = {.time_ns = 1, .id = CTS_MPROF_LABEL, .thread = 3, .str = big};
  CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&w, &ev), 0);
  tu_events_t t = {0};
  CTS_ASSERT_EQ_INT(tu_read(f.buf, f.size, &t, false, NULL, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(t.n, 1);
  CTS_ASSERT_EQ_U64(t.ev[0].str_len, 256 - 30 - 1 - 18);
  tu_events_free(&t);
  free(f.buf);
}

CTS_TEST(state_size_is_checked) {
  uint8_t buf[4 * 256];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(64) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buf;
  cfg.buffer_size = sizeof buf;
  cfg.clock = fake_clock;
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, CTS_MPROF_RING_STATE_SIZE(4), &cfg), 0);
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, 64, &cfg), CTS_E_INVAL);
  cfg.packets = 5; /* 204-byte packets: too small */
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, sizeof state, &cfg), CTS_E_INVAL);
  cfg.packets = 4;
  cfg.clock = NULL;
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, sizeof state, &cfg), CTS_E_INVAL);
}

CTS_TEST(metadata_declares_everything) {
  const char *m = cts_mprof_metadata();
  CTS_ASSERT(strstr(m, "major = 1;") && strstr(m, "minor = 8;"));
  CTS_ASSERT(strstr(m, "freq = 1000000000;"));
  CTS_ASSERT(strstr(m, "map = clock.monotonic.value;"));
  CTS_ASSERT(strstr(m, "packet_seq_num;"));
  char want[64];
  for (unsigned id = 0; id < CTS_MPROF_EVENT_IDS; id++) {
    snprintf(want, sizeof want, "name = %s;\n\tid = %u;", cts_mprof_event_name(id), id);
    CTS_ASSERT_MSG(strstr(m, want), "metadata lacks event %u", id);
  }
  CTS_ASSERT(cts_mprof_event_name(CTS_MPROF_EVENT_IDS) == NULL);
  CTS_ASSERT_STR_EQ(cts_task_type_name(17), "Switch");
  CTS_ASSERT_STR_EQ(cts_task_type_name(99), "Unknown");
}

/* A small valid trace to corrupt: 4 packets of 256 bytes, some events in the first two. */
static uint8_t *sample_trace(size_t *size) {
  static ring_fixture_t f; /* the previous sample is freed: one is alive at a time */
  free(f.buf);
  make_ring(&f, 4 * 256, 4, NULL, NULL);
  cts_mprof_writer_t w;
  cts_mprof_writer_init(&w, f.ring);
  for (uint64_t i = 0; i < 20; i++) {
    const cts_mprof_event_t ev = {.time_ns = i, .id = CTS_MPROF_LABEL, .thread = 1, .str = "ab"};
    cts_mprof_writer_write(&w, &ev);
  }
  *size = f.size;
  return f.buf;
}

CTS_TEST(malformed_tail_is_skipped_with_warning) {
  size_t size;
  uint8_t *d = sample_trace(&size); /* labels of 20 bytes: 11 in packet 0, 9 in packet 1 */
  d[30 + 5 * 20 + 8] = 200;         /* 6th event of packet 0: unknown id */
  tu_events_t t = {0};
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(t.n, 5 + 9);
  CTS_ASSERT_EQ_U64(t.warnings, 1);
  CTS_ASSERT_EQ_INT(t.last_warning, CTS_E_UNKNOWN_EVENT);
  CTS_ASSERT_EQ_U64(t.last_warning_offset, 30 + 5 * 20);
  tu_events_free(&t);
  /* a string whose NUL is gone, at the end of packet 1's content */
  d = sample_trace(&size);
  d[256 + 30 + 9 * 20 - 1] = 'x';
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(t.n, 11 + 8);
  CTS_ASSERT_EQ_INT(t.last_warning, CTS_E_UNTERMINATED_STRING);
  tu_events_free(&t);
  /* content_size cutting an event in half (a crash mid-event) */
  d = sample_trace(&size);
  d[256 + 26] = (uint8_t)((30 + 9 * 20 - 7) * 8);
  d[256 + 27] = (uint8_t)(((30 + 9 * 20 - 7) * 8) >> 8);
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(t.n, 11 + 8);
  CTS_ASSERT_EQ_INT(t.last_warning, CTS_E_EVENT_OVERRUN);
  CTS_ASSERT_EQ_U64(t.last_warning_offset, 256 + 30 + 8 * 20);
  tu_events_free(&t);
}

CTS_TEST(corrupt_headers_are_errors_with_offsets) {
  size_t size;
  char msg[256];
  tu_events_t t = {0};
  uint8_t *d = sample_trace(&size);
  d[256] = 0;
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, msg, sizeof msg), CTS_E_BAD_MAGIC);
  CTS_ASSERT_MSG(strstr(msg, "offset 256:"), "%s", msg);
  CTS_ASSERT_EQ_U64(t.n, 0); /* nothing decoded before the headers are all checked */
  d = sample_trace(&size);
  d[512 + 10] ^= 1;
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, msg, sizeof msg), CTS_E_BAD_MAGIC);
  CTS_ASSERT_MSG(strstr(msg, "offset 516:") && strstr(msg, "uuid"), "%s", msg);
  d = sample_trace(&size);
  d[20] = 1; /* packet_size not a whole number of bytes */
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, msg, sizeof msg), CTS_E_PACKET_SIZE);
  CTS_ASSERT_MSG(strstr(msg, "offset 20:"), "%s", msg);
  d = sample_trace(&size);
  d[768 + 29] = 0xff; /* content_size beyond packet_size */
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, msg, sizeof msg), CTS_E_PACKET_SIZE);
  CTS_ASSERT_MSG(strstr(msg, "offset 794:"), "%s", msg);
  d = sample_trace(&size);
  d[768 + 23] = 0xff; /* a huge packet */
  CTS_ASSERT_EQ_INT(tu_read(d, size, &t, false, NULL, msg, sizeof msg), CTS_E_PACKET_TOO_LARGE);
  CTS_ASSERT_EQ_INT(tu_read(d, 0, &t, false, NULL, msg, sizeof msg), CTS_E_EMPTY);
  /* trailing bytes and a cut-off last packet are warnings */
  d = sample_trace(&size);
  CTS_ASSERT_EQ_INT(tu_read(d, 256 + 100, &t, false, NULL, msg, sizeof msg), 0);
  CTS_ASSERT_EQ_U64(t.n, 11 + 3);
  CTS_ASSERT_EQ_U64(t.warnings, 2); /* the packet is cut short, and so is its 4th event */
  CTS_ASSERT_EQ_INT(t.last_warning, CTS_E_EVENT_OVERRUN);
  tu_events_free(&t);
  CTS_ASSERT_EQ_INT(tu_read(d, 256 + 10, &t, false, NULL, msg, sizeof msg), 0);
  CTS_ASSERT_EQ_U64(t.n, 11);
  CTS_ASSERT_EQ_INT(t.last_warning, CTS_E_TRUNCATED_HEADER);
  tu_events_free(&t);
  CTS_ASSERT(cts_mprof_is_trace(d, size));
  d[5] ^= 1;
  CTS_ASSERT(!cts_mprof_is_trace(d, size));
}

CTS_TEST_MAIN()
