/* SPDX-License-Identifier: MIT */
/* `ctfscope dump` on the mirage-profile corpus: event counts per kind and the first and
 * last lines equal babeltrace2 2.0.4's on the (reordered) traces, as recorded in
 * mprof-viewer.md §D; and, where babeltrace2 is installed, every line agrees with it
 * (time, event, thread). */
#include <stdlib.h>
#include <unistd.h>

#include <ctfscope/tasks.h>

#include "../test.h"

typedef struct line_set {
  char **lines;
  size_t n, cap;
} line_set_t;

static int run_lines(const char *cmd, line_set_t *out) {
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) {
    if (buf[0] == '#') continue;
    buf[strcspn(buf, "\n")] = 0;
    if (out->n == out->cap) {
      out->cap = out->cap ? 2 * out->cap : 1024;
      out->lines = realloc(out->lines, out->cap * sizeof *out->lines);
    }
    out->lines[out->n++] = strdup(buf);
  }
  return pclose(p);
}

static void free_lines(line_set_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->lines[i]);
  free(s->lines);
  memset(s, 0, sizeof *s);
}

static uint64_t count_kind(const line_set_t *s, const char *kind) {
  uint64_t n = 0;
  const size_t k = strlen(kind);
  for (size_t i = 0; i < s->n; i++) {
    const char *sp = strchr(s->lines[i], ' ');
    if (sp && strncmp(sp + 1, kind, k) == 0 && (sp[1 + k] == ' ' || sp[1 + k] == 0)) n++;
  }
  return n;
}

typedef struct kind_count {
  const char *kind;
  uint64_t n;
} kind_count_t;

static const kind_count_t net_counts[] = {{"read", 2596},     {"label", 2185},    {"creates", 1816},
                                          {"fulfills", 1511}, {"increase", 1394}, {"switch", 358},
                                          {"becomes", 215},   {"fails", 2},       {"gc", 1},
                                          {"signal", 0},      {"try_read", 0},    {"counter", 0}};
static const kind_count_t koleini_counts[] = {
    {"read", 7701},     {"creates", 7570}, {"fulfills", 6437}, {"label", 2393}, {"switch", 2178},
    {"increase", 1256}, {"becomes", 1140}, {"signal", 1030},   {"gc", 2},       {"fails", 0}};

static void check_dump(const char *rel, const kind_count_t *counts, size_t ncounts, size_t total,
                       const char *first, const char *last) {
  CTS_REQUIRE_CORPUS(corpus);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s dump --no-comments %s/mprof/%s", CTS_TEST_CTFSCOPE, corpus, rel);
  line_set_t s = {0};
  CTS_ASSERT_EQ_INT(run_lines(cmd, &s), 0);
  CTS_ASSERT_EQ_U64(s.n, total);
  for (size_t i = 0; i < ncounts; i++)
    CTS_ASSERT_MSG(count_kind(&s, counts[i].kind) == counts[i].n, "%s: %llu != %llu",
                   counts[i].kind, (unsigned long long)count_kind(&s, counts[i].kind),
                   (unsigned long long)counts[i].n);
  CTS_ASSERT_STR_EQ(s.lines[0], first);
  CTS_ASSERT_STR_EQ(s.lines[s.n - 1], last);
  free_lines(&s);
}

CTS_TEST(dump_net_matches_recorded_babeltrace) {
  check_dump("net/net.ctf", net_counts, sizeof net_counts / sizeof net_counts[0], 10078,
             "6777606442952 switch thread=0", "6783505042718 switch thread=-1");
}

CTS_TEST(dump_wrapped_matches_recorded_babeltrace) {
  check_dump("wrapped/koleini-trace1-0a4963a.ctf", koleini_counts,
             sizeof koleini_counts / sizeof koleini_counts[0], 29707,
             "632514932861 creates thread=88867 child=88904 type=Try",
             "638850846714 switch thread=-1");
}

/* One babeltrace2 --clock-cycles line: "[ts] (+delta) name: { stream_packet_count = 0x.. },
 * { thread = 0x.. }, …" (gc has no thread). */
static bool parse_bt(const char *line, uint64_t *ts, char *name, size_t name_size, uint64_t *thread,
                     bool *has_thread) {
  unsigned long long t;
  if (sscanf(line, "[%llu]", &t) != 1) return false;
  *ts = t;
  const char *p = strchr(line, ')');
  if (!p || p[1] != ' ') return false;
  p += 2;
  const char *colon = strchr(p, ':');
  if (!colon || (size_t)(colon - p) >= name_size) return false;
  memcpy(name, p, (size_t)(colon - p));
  name[colon - p] = 0;
  const char *th = strstr(colon, "{ thread = 0x");
  *has_thread = th != NULL;
  if (th) *thread = strtoull(th + strlen("{ thread = 0x"), NULL, 16);
  return true;
}

static void compare_with_babeltrace(const char *trace_rel, bool reorder) {
  CTS_REQUIRE_CORPUS(corpus);
  if (system("babeltrace2 --version >/dev/null 2>&1") != 0)
    CTS_SKIP("babeltrace2 is not installed (apt-get install babeltrace2)");
  char dir[] = "/tmp/cts-mprof-bt-XXXXXX";
  CTS_ASSERT(mkdtemp(dir));
  char cmd[4096];
  /* §D.3: a wrapped ring must be put in sequence order for babeltrace2 */
  if (reorder)
    snprintf(cmd, sizeof cmd,
             "{ dd if=%s/mprof/%s bs=250880 skip=1 count=3; dd if=%s/mprof/%s bs=250880 "
             "count=1; } 2>/dev/null > %s/stream && cp %s/mprof/net/metadata %s/",
             corpus, trace_rel, corpus, trace_rel, dir, corpus, dir);
  else
    snprintf(cmd, sizeof cmd, "cp %s/mprof/%s %s/mprof/net/metadata %s/", corpus, trace_rel, corpus,
             dir);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  line_set_t bt = {0}, ours = {0};
  snprintf(cmd, sizeof cmd, "babeltrace2 --clock-cycles %s", dir);
  CTS_ASSERT_EQ_INT(run_lines(cmd, &bt), 0);
  snprintf(cmd, sizeof cmd, "%s dump --no-comments %s/mprof/%s", CTS_TEST_CTFSCOPE, corpus,
           trace_rel);
  CTS_ASSERT_EQ_INT(run_lines(cmd, &ours), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  CTS_ASSERT_EQ_U64(ours.n, bt.n);
  for (size_t i = 0; i < bt.n; i++) {
    uint64_t ts, thread = 0;
    bool has_thread;
    char name[64], mine[64];
    CTS_ASSERT_MSG(parse_bt(bt.lines[i], &ts, name, sizeof name, &thread, &has_thread),
                   "cannot parse babeltrace2 line %zu: %s", i, bt.lines[i]);
    unsigned long long my_ts;
    long long my_thread = 0;
    CTS_ASSERT(sscanf(ours.lines[i], "%llu %63s thread=%lld", &my_ts, mine, &my_thread) >= 2);
    CTS_ASSERT_MSG(
        my_ts == ts && strcmp(mine, name) == 0 && (!has_thread || (uint64_t)my_thread == thread),
        "line %zu differs:\n  babeltrace2: %s\n  ctfscope:    %s", i, bt.lines[i], ours.lines[i]);
  }
  free_lines(&bt);
  free_lines(&ours);
}

CTS_TEST(dump_net_equals_babeltrace2_line_by_line) {
  compare_with_babeltrace("net/net.ctf", false);
}

CTS_TEST(dump_wrapped_equals_babeltrace2_line_by_line) {
  compare_with_babeltrace("wrapped/koleini-trace1-0a4963a.ctf", true);
}

CTS_TEST_MAIN()
