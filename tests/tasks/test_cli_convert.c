/* SPDX-License-Identifier: MIT */
/* ctfscope convert: the corpus and a ring whose packets overlap in time (two writers)
 * become CTF directories with the events in time order, that ctfscope reads back the same
 * and babeltrace2 (when installed) prints completely. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctfscope/mprof.h>
#include <ctfscope/tasks.h>

#include "../test.h"
#include "mprof_test_util.h"

static int run(const char *cmd) {
  const int status = system(cmd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static uint64_t count_lines(const char *cmd, char *first, char *last, size_t size) {
  FILE *p = popen(cmd, "r");
  if (!p) return 0;
  uint64_t n = 0;
  char line[4096];
  while (fgets(line, sizeof line, p)) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\n")] = 0;
    if (!n && first) snprintf(first, size, "%s", line);
    if (last) snprintf(last, size, "%s", line);
    n++;
  }
  return pclose(p) == 0 ? n : 0;
}

static bool have_babeltrace2(void) {
  return system("babeltrace2 --version >/dev/null 2>&1") == 0;
}

static void convert_corpus(const char *rel, uint64_t events, const char *bt_first_ts,
                           const char *bt_last_ts) {
  CTS_REQUIRE_CORPUS(corpus);
  char dir[] = "/tmp/cts-convert-XXXXXX", cmd[4096], first[4096], last[4096];
  CTS_ASSERT(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "%s convert %s/mprof/%s %s/ctf", CTS_TEST_CTFSCOPE, corpus, rel, dir);
  CTS_ASSERT_EQ_INT(run(cmd), 0);
  /* our own dump of the converted stream equals the dump of the original */
  snprintf(cmd, sizeof cmd,
           "bash -c 'diff <(%s dump --no-comments %s/ctf/stream) "
           "<(%s dump --no-comments %s/mprof/%s)' >/dev/null",
           CTS_TEST_CTFSCOPE, dir, CTS_TEST_CTFSCOPE, corpus, rel);
  CTS_ASSERT_EQ_INT(run(cmd), 0);
  if (have_babeltrace2()) {
    snprintf(cmd, sizeof cmd, "babeltrace2 --clock-cycles %s/ctf", dir);
    CTS_ASSERT_EQ_U64(count_lines(cmd, first, last, sizeof first), events);
    CTS_ASSERT_MSG(strncmp(first, bt_first_ts, strlen(bt_first_ts)) == 0, "%s", first);
    CTS_ASSERT_MSG(strncmp(last, bt_last_ts, strlen(bt_last_ts)) == 0, "%s", last);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CTS_ASSERT_EQ_INT(run(cmd), 0);
}

CTS_TEST(convert_net) {
  convert_corpus("net/net.ctf", 10078, "[00000006777606442952]", "[00000006783505042718]");
}

CTS_TEST(convert_wrapped_ring) {
  convert_corpus("wrapped/koleini-trace1-0a4963a.ctf", 29707, "[00000000632514932861]",
                 "[00000000638850846714]");
}

static uint64_t zero_clock(void *ud) {
  (void)ud;
  return 0;
}

/* Two writers interleaved in time, each in its own packets: in sequence order time goes
 * back at every packet boundary; converted, it never does. */
CTS_TEST(convert_merges_overlapping_packets) {
  char dir[] = "/tmp/cts-convert-XXXXXX", path[256], cmd[1024], last[256];
  CTS_ASSERT(mkdtemp(dir));
  static uint8_t buf[8 * 1024];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(8) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buf;
  cfg.buffer_size = sizeof buf;
  cfg.packets = 8;
  cfg.clock = zero_clock;
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, sizeof state, &cfg), 0);
  cts_mprof_writer_t a, b;
  cts_mprof_writer_init(&a, ring);
  cts_mprof_writer_init(&b, ring);
  for (uint64_t t = 0; t < 300; t += 2) { /* 300 × 25 bytes: about 7.5 packets */
    const cts_mprof_event_t ea = {.time_ns = 1000 + t, .id = CTS_MPROF_READ, .thread = 1, .arg = t};
    const cts_mprof_event_t eb = {.time_ns = 1001 + t, .id = CTS_MPROF_READ, .thread = 2, .arg = t};
    CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&a, &ea), 0);
    CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&b, &eb), 0);
  }
  snprintf(path, sizeof path, "%s/ring.ctf", dir);
  FILE *f = fopen(path, "wb");
  CTS_ASSERT(f && fwrite(buf, 1, sizeof buf, f) == sizeof buf && fclose(f) == 0);
  tu_events_t t = {0};
  CTS_ASSERT_EQ_INT(tu_read(buf, sizeof buf, &t, false, NULL, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(t.n, 300);
  bool backwards = false;
  for (size_t i = 1; i < t.n; i++) backwards |= t.ev[i].time_ns < t.ev[i - 1].time_ns;
  CTS_ASSERT(backwards);
  tu_events_free(&t);

  snprintf(cmd, sizeof cmd, "%s convert %s %s/ctf", CTS_TEST_CTFSCOPE, path, dir);
  CTS_ASSERT_EQ_INT(run(cmd), 0);
  snprintf(path, sizeof path, "%s/ctf/stream", dir);
  size_t size;
  uint8_t *stream = tu_load(path, &size);
  CTS_ASSERT(stream);
  CTS_ASSERT_EQ_INT(tu_read(stream, size, &t, true, NULL, NULL, 0), 0);
  CTS_ASSERT_EQ_U64(t.n, 300);
  for (size_t i = 0; i < t.n; i++) CTS_ASSERT_EQ_U64(t.ev[i].time_ns, 1000 + i);
  tu_events_free(&t);
  free(stream);
  if (have_babeltrace2()) {
    snprintf(cmd, sizeof cmd, "babeltrace2 --clock-cycles %s/ctf", dir);
    CTS_ASSERT_EQ_U64(count_lines(cmd, NULL, last, sizeof last), 300);
    CTS_ASSERT_MSG(strncmp(last, "[00000000000000001299]", 22) == 0, "%s", last);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CTS_ASSERT_EQ_INT(run(cmd), 0);
}

CTS_TEST(convert_errors) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s convert /etc/hostname /tmp/cts-nowhere 2>/dev/null",
           CTS_TEST_CTFSCOPE);
  CTS_ASSERT_EQ_INT(run(cmd), 1);
  snprintf(cmd, sizeof cmd, "%s convert /nonexistent/trace.ctf /tmp/cts-nowhere 2>/dev/null",
           CTS_TEST_CTFSCOPE);
  CTS_ASSERT_EQ_INT(run(cmd), 3);
  snprintf(cmd, sizeof cmd, "%s convert onlyone 2>/dev/null", CTS_TEST_CTFSCOPE);
  CTS_ASSERT_EQ_INT(run(cmd), 2);
}

CTS_TEST_MAIN()
