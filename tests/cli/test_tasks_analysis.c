/* SPDX-License-Identifier: MIT */
/* The analysis commands on mirage-profile task traces: every command's numbers against the
 * known trace of tasks_trace.h (truth worked out by hand there), the checked-in copy of that
 * trace used by the golden CLI cases (tests/cli/golden/cases.txt), and the corpus traces
 * (their counts agree with `dump`). CTS_UPDATE_GOLDEN=1 rewrites tests/data/tasks/. */
#include <math.h>

#include "../../src/analysis/hist.h"
#include "../run_json.h"
#include "../test.h"
#include "tasks_trace.h"

static char tmpdir[256], known[320], slow[320];

static bool setup(void) {
  if (tmpdir[0]) return true;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cts-tasks-XXXXXX");
  if (!mkdtemp(tmpdir)) return false;
  snprintf(known, sizeof known, "%s/known.ctf", tmpdir);
  snprintf(slow, sizeof slow, "%s/known-slow.ctf", tmpdir);
  return tt_write(known, 1) == 0 && tt_write(slow, 2) == 0;
}

static double field(const json_flat_t *j, const char *array, int i, const char *key) {
  char path[128];
  snprintf(path, sizeof path, "%s[%d].%s", array, i, key);
  return json_flat_num(j, path);
}

CTS_TEST(info_matches_truth) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "info", "--json", known, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json_silent(argv, &j, &r));
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "format"), "mirage-profile");
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "layout"), "ring");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "events_total"), TT_NEVENTS);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "events.creates"), 6);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "events.label"), 4);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "events.switch"), 7);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "events.counter"), 3);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "packets_total"), TT_PACKETS);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lanes"), 1);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "first_event_ns"), TT_BASE_NS);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "last_event_ns"), TT_BASE_NS + 32000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.total"), 7);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.created"), 6);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.preexisting"), 1);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.resolved"), 3);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.failed"), 1);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.merged"), 1);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.pending"), 3);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.should_resolve_pending"), 1);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "counters[0]"), "queue");
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(stats_matches_truth) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "stats", "--json", known, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json_silent(argv, &j, &r));
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "kind"), "tasks");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.total"), 7);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "time.span_ns"), 32000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "time.running_ns"), 12000 + 3000 + 5000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "time.idle_ns"), 5000 + 7000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "time.gc_ns"), 500);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "time.gc_pauses"), 1);
  /* created → resolved: 13000 (1), 10000 (2), 5000 (4, failed) */
  cts_hist_t h;
  cts_hist_init(&h);
  const uint64_t durations[] = {13000, 10000, 5000};
  for (int i = 0; i < 3; i++) cts_hist_add(&h, durations[i], durations[i]);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.tasks"), 3);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.total_ns"), 28000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.min_ns"), 5000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.percentiles_by_tasks_ns.p50"),
                    cts_hist_quantile(&h, 0.5, false));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.percentiles_by_time_ns.p50"),
                    cts_hist_quantile(&h, 0.5, true));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.percentiles_by_tasks_ns.max"), 13000);
  CTS_ASSERT(cts_hist_quantile(&h, 0.5, false) <= 10000 &&
             cts_hist_quantile(&h, 0.5, false) > 10000 - 10000 / 16);
  /* bins: 5000 in [4096, 8192), 10000 and 13000 in [8192, 16384) */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.bins[0].low_ns"), 4096);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.bins[0].tasks"), 1);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.bins[1].low_ns"), 8192);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.bins[1].tasks"), 2);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "durations.bins[1].time_ns"), 23000);
  const int task = json_flat_find(&j, "types", "type", "Task", 1000);
  CTS_ASSERT(task >= 0);
  CTS_ASSERT_EQ_U64(field(&j, "types", task, "tasks"), 2);
  CTS_ASSERT_EQ_U64(field(&j, "types", task, "resolved"), 2);
  CTS_ASSERT_EQ_U64(field(&j, "types", task, "failed"), 1);
  CTS_ASSERT_EQ_U64(field(&j, "types", task, "running_ns"), 8000);
  CTS_ASSERT_EQ_U64(field(&j, "types", task, "runs"), 2);
  CTS_ASSERT_EQ_U64(field(&j, "types", task, "alive_ns"), 13000 + 5000);
  CTS_ASSERT_EQ_U64(field(&j, "types", task, "waiting_ns"), 18000 - 8000);
  const int bind = json_flat_find(&j, "types", "type", "Bind", 1000);
  CTS_ASSERT(bind >= 0);
  CTS_ASSERT_EQ_U64(field(&j, "types", bind, "tasks"), 3);
  CTS_ASSERT_EQ_U64(field(&j, "types", bind, "merged"), 1);
  CTS_ASSERT_EQ_U64(field(&j, "types", bind, "pending"), 1);
  const int pre = json_flat_find(&j, "types", "type", "preexisting", 1000);
  CTS_ASSERT(pre >= 0);
  CTS_ASSERT_EQ_U64(field(&j, "types", pre, "running_ns"), 12000);
  CTS_ASSERT_EQ_U64(field(&j, "types", pre, "runs"), 3);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "counters[0].name"), "queue");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "counters[0].updates"), 3);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "counters[0].min"), 2);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "counters[0].max"), 7);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "counters[0].last"), 7);
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(top_matches_truth) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "top", "--json", "-n", "0", known, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json_silent(argv, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "total.running_ns"), 20000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows_total"), 4); /* (preexisting), rx, (bind), timer */
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[0].label"), "(preexisting)");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[0].running_ns"), 12000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[0].runs"), 3);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[1].label"), "rx");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[1].tasks"), 2);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[1].running_ns"), 8000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[1].failed"), 1);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[2].label"), "(bind)");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[2].tasks"), 3);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[2].resolved"), 1);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[3].label"), "timer");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[3].pending"), 1);
  json_flat_free(&j);
  run_result_free(&r);
  char *by_count[] = {CTS_TEST_CTFSCOPE, "top", "--json", "--by", "type", "-s",
                      "count",           known, NULL};
  CTS_ASSERT(run_json_silent(by_count, &j, &r));
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[0].type"), "Bind");
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[1].type"), "Task");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[1].running_ns"), 8000);
  json_flat_free(&j);
  run_result_free(&r);
  /* Memory-trace options on a task trace are usage errors. */
  char *tree[] = {CTS_TEST_CTFSCOPE, "top", "--tree", known, NULL};
  CTS_ASSERT(run_cmd(tree, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  run_result_free(&r);
  char *bad[] = {CTS_TEST_CTFSCOPE, "top", "--by", "function", known, NULL};
  CTS_ASSERT(run_cmd(bad, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  run_result_free(&r);
}

CTS_TEST(leaks_matches_truth) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "leaks", "--json", "-n", "0", known, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json_silent(argv, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "pending_total"), 3);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "should_resolve_pending"), 1);
  /* should-resolve first (3), then the oldest: 0 (from the trace start), then 6 */
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks[0].id"), 3);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "tasks[0].label"), "timer");
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "tasks[0].should_resolve"), "true");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks[0].age_ns"), 32000 - 3000);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks[0].creator.id"), 0);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks[1].id"), 0);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "tasks[1].preexisting"), "true");
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "tasks[1].creator"), "null");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks[2].id"), 6);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "tasks[2].type"), "Bind");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks[2].age_ns"), 32000 - 21500);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks[2].creator.id"), 4);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "tasks[2].creator.label"), "rx");
  CTS_ASSERT(json_flat_get(&j, "tasks[3].id") == NULL);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "groups[0].label"), "timer");
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(diff_matches_truth) {
  CTS_ASSERT(setup());
  run_result_t r;
  json_flat_t j;
  /* The trace slowed down twice: per second (on request), nothing changed. */
  char *rate[] = {
      CTS_TEST_CTFSCOPE, "diff", "--json", "--per-second", "-n", "0", known, slow, NULL};
  CTS_ASSERT(run_json_silent(rate, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows_total"), 4);
  CTS_ASSERT(json_flat_num(&j, "total.change") == 0);
  for (int i = 0; i < 4; i++) CTS_ASSERT(field(&j, "rows", i, "change") == 0);
  json_flat_free(&j);
  run_result_free(&r);
  /* Totals (the default with a metric): every running time doubled; the largest change
   * first. */
  char *totals[] = {
      CTS_TEST_CTFSCOPE, "diff", "--json", "-m", "running", "-n", "0", known, slow, NULL};
  CTS_ASSERT(run_json_silent(totals, &j, &r));
  CTS_ASSERT(json_flat_num(&j, "total.before") == 20000 &&
             json_flat_num(&j, "total.after") == 40000);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[0].label"), "(preexisting)");
  CTS_ASSERT(json_flat_num(&j, "rows[0].change") == 12000);
  json_flat_free(&j);
  run_result_free(&r);
  char *count[] = {
      CTS_TEST_CTFSCOPE, "diff", "--json", "-m", "count", "--by", "type", known, slow, NULL};
  CTS_ASSERT(run_json_silent(count, &j, &r));
  const int bind = json_flat_find(&j, "rows", "type", "Bind", 1000);
  CTS_ASSERT(bind >= 0);
  /* As totals, equal counts compare equal (per second they differed by the durations). */
  CTS_ASSERT(field(&j, "rows", bind, "before") == 3);
  CTS_ASSERT(field(&j, "rows", bind, "after") == 3);
  CTS_ASSERT(field(&j, "rows", bind, "change") == 0);
  json_flat_free(&j);
  run_result_free(&r);
  /* Without a metric: the runs did the same things in the same order, slower. */
  char *order[] = {CTS_TEST_CTFSCOPE, "diff", "--json", known, slow, NULL};
  CTS_ASSERT(run_json_silent(order, &j, &r));
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "comparison"), "order");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "matched_tasks"), 7);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows_total"), 0);
  json_flat_free(&j);
  run_result_free(&r);
}

CTS_TEST(export_matches_truth) {
  CTS_ASSERT(setup());
  char *argv[] = {CTS_TEST_CTFSCOPE, "export", "-f", "chrome", known, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json_silent(argv, &j, &r));
  size_t runs = 0, lifetimes = 0, gc = 0, starts = 0, ends = 0, counters = 0;
  double run_us = 0;
  for (int i = 0;; i++) {
    char p[96];
    snprintf(p, sizeof p, "traceEvents[%d].ph", i);
    const json_pair_t *ph = json_flat_get(&j, p);
    if (!ph) break;
    snprintf(p, sizeof p, "traceEvents[%d].pid", i);
    const double pid = json_flat_num(&j, p);
    snprintf(p, sizeof p, "traceEvents[%d].tid", i);
    const double tid = json_flat_num(&j, p);
    snprintf(p, sizeof p, "traceEvents[%d].ts", i);
    if (strcmp(ph->value, "B") == 0 && pid == 1 && tid == 1) runs++, run_us -= json_flat_num(&j, p);
    if (strcmp(ph->value, "E") == 0 && pid == 1 && tid == 1) run_us += json_flat_num(&j, p);
    if (strcmp(ph->value, "X") == 0 && pid == 1 && tid == 0) gc++;
    if (strcmp(ph->value, "X") == 0 && pid == 2) lifetimes++;
    starts += strcmp(ph->value, "s") == 0;
    ends += strcmp(ph->value, "f") == 0;
    counters += strcmp(ph->value, "C") == 0;
  }
  CTS_ASSERT_EQ_U64(runs, 5); /* 0 three times, 1, 4 */
  CTS_ASSERT(fabs(run_us - 20.0) < 1e-9);
  CTS_ASSERT_EQ_U64(gc, 1);
  CTS_ASSERT_EQ_U64(lifetimes, 7);
  /* created x6, try_read 0->1, resolve 1->2, read 2->0, resolve 0->1 (4 failing itself: none) */
  CTS_ASSERT_EQ_U64(starts, 10);
  CTS_ASSERT_EQ_U64(ends, 10);
  CTS_ASSERT_EQ_U64(counters, 3);
  json_flat_free(&j);
  run_result_free(&r);
  char *csv[] = {CTS_TEST_CTFSCOPE, "export", "-f", "csv", known, NULL};
  CTS_ASSERT(run_cmd(csv, NULL, 60, &r) && r.exit_code == 0);
  size_t lines = 0;
  for (const char *c = r.out; *c; c++) lines += *c == '\n';
  CTS_ASSERT_EQ_U64(lines, TT_NEVENTS + 1);
  CTS_ASSERT(strstr(r.out, "\n20000,fails,4,4,,,boom\n"));
  CTS_ASSERT(strstr(r.out, "\n1000,creates,0,1,Task,,\n"));
  run_result_free(&r);
  char *folded[] = {CTS_TEST_CTFSCOPE, "export", "-f", "folded", known, NULL};
  CTS_ASSERT(run_cmd(folded, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  run_result_free(&r);
}

/* A task trace on standard input, piped (copied into a temporary file: the reader reads
 * at offsets) and redirected from a file: the same figures as from the file itself. */
CTS_TEST(task_traces_from_standard_input) {
  CTS_ASSERT(setup());
  const char *const forms[] = {"cat '%s' | '%s' %s --json -", "'%2$s' %3$s --json - < '%1$s'"};
  const char *const commands[] = {"info", "stats"};
  for (size_t f = 0; f < 2; f++)
    for (size_t c = 0; c < 2; c++) {
      char cmd[1024];
      snprintf(cmd, sizeof cmd, forms[f], known, CTS_TEST_CTFSCOPE, commands[c]);
      char *argv[] = {"/bin/sh", "-c", cmd, NULL};
      run_result_t r;
      json_flat_t j;
      CTS_ASSERT_MSG(run_json_silent(argv, &j, &r), "%s", cmd);
      if (c == 0) {
        CTS_ASSERT_STR_EQ(json_flat_str(&j, "format"), "mirage-profile");
        CTS_ASSERT_EQ_U64(json_flat_num(&j, "events_total"), TT_NEVENTS);
      }
      CTS_ASSERT_MSG(json_flat_num(&j, "tasks.total") == 7, "%s: %g tasks", cmd,
                     json_flat_num(&j, "tasks.total"));
      CTS_ASSERT_EQ_U64(json_flat_num(&j, "tasks.resolved"), 3);
      json_flat_free(&j);
      run_result_free(&r);
    }
}

/* What is neither kind of trace gets a message saying what it is. */
CTS_TEST(non_traces_are_named) {
  CTS_ASSERT(setup());
  char meta[400];
  snprintf(meta, sizeof meta, "%s/metadata", tmpdir);
  FILE *f = fopen(meta, "w");
  CTS_ASSERT(f != NULL);
  fputs(cts_mprof_metadata(), f);
  fclose(f);
  static const char *const cmds[] = {"info", "stats", "top", "leaks"};
  for (size_t i = 0; i < 4; i++) {
    char *argv[] = {CTS_TEST_CTFSCOPE, (char *)cmds[i], meta, NULL};
    run_result_t r;
    CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
    CTS_ASSERT_EQ_INT(r.exit_code, 1);
    CTS_ASSERT_MSG(strstr(r.err, "CTF metadata") && strstr(r.err, "stream file"), "%s", r.err);
    CTS_ASSERT_EQ_U64(r.out_len, 0); /* no figures of nothing */
    run_result_free(&r);
  }
  char *dir[] = {CTS_TEST_CTFSCOPE, "stats", tmpdir, NULL};
  run_result_t r;
  CTS_ASSERT(run_cmd(dir, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 3);
  CTS_ASSERT(strstr(r.err, "is a directory"));
  run_result_free(&r);
  char *mixed[] = {CTS_TEST_CTFSCOPE, "diff", known,
                   CTS_TEST_DATA_DIR "/../../examples/traces/p2_leak.r1e-4.ctf", NULL};
  CTS_ASSERT(run_cmd(mixed, NULL, 60, &r));
  CTS_ASSERT_EQ_INT(r.exit_code, 2);
  run_result_free(&r);
}

/* Two OS threads, each writing its own small packets (as record --tasks does): thread A
 * runs task 1 from 0 to 40000 ns, thread B task 2 from 1000 to 21000 ns, both labelling
 * their task every 1000 ns so each fills several packets. With one current task per lane,
 * running time is 40000 + 20000; one current task for the trace would credit 1 with B's
 * time and 2 with A's. */
CTS_TEST(threads_get_their_own_lanes) {
  CTS_ASSERT(setup());
  enum { PACKETS = 16, PACKET = 256 };
  static uint8_t buf[PACKETS * PACKET];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(PACKETS) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buf;
  cfg.buffer_size = sizeof buf;
  cfg.packets = PACKETS;
  cfg.clock = tt_no_clock;
  cts_mprof_ring_t *ring;
  CTS_ASSERT_EQ_INT(cts_mprof_ring_init(&ring, state, sizeof state, &cfg), 0);
  cts_mprof_writer_t a, b;
  cts_mprof_writer_init(&a, ring);
  cts_mprof_writer_init(&b, ring);
  const uint64_t t0 = TT_BASE_NS;
  cts_mprof_event_t ev = {.time_ns = t0, .id = CTS_MPROF_SWITCH, .thread = 1};
  CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&a, &ev), 0);
  for (uint64_t t = 1000; t <= 40000; t += 1000) {
    cts_mprof_writer_t *w = t <= 21000 && t % 2000 == 1000 ? &b : &a;
    const int64_t task = w == &a ? 1 : 2;
    if (t == 1000) { /* B starts running 2 */
      ev = (cts_mprof_event_t){.time_ns = t0 + t, .id = CTS_MPROF_SWITCH, .thread = 2};
      CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&b, &ev), 0);
      continue;
    }
    if (t == 21000) { /* B goes idle */
      ev = (cts_mprof_event_t){.time_ns = t0 + t, .id = CTS_MPROF_SWITCH, .thread = -1};
      CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&b, &ev), 0);
      continue;
    }
    ev = (cts_mprof_event_t){.time_ns = t0 + t,
                             .id = CTS_MPROF_LABEL,
                             .thread = task,
                             .str = task == 1 ? "thread A's task" : "thread B's task",
                             .str_len = 15};
    CTS_ASSERT_EQ_INT(cts_mprof_writer_write(w, &ev), 0);
  }
  ev = (cts_mprof_event_t){.time_ns = t0 + 40000, .id = CTS_MPROF_SWITCH, .thread = -1};
  CTS_ASSERT_EQ_INT(cts_mprof_writer_write(&a, &ev), 0);
  cts_mprof_writer_fini(&a);
  cts_mprof_writer_fini(&b);
  CTS_ASSERT(cts_mprof_ring_packets_started(ring) > 4); /* several packets per thread */
  char path[400];
  snprintf(path, sizeof path, "%s/threads.ctf", tmpdir);
  FILE *f = fopen(path, "wb");
  CTS_ASSERT(f != NULL);
  CTS_ASSERT(fwrite(buf, 1, sizeof buf, f) == sizeof buf);
  fclose(f);
  char *argv[] = {CTS_TEST_CTFSCOPE, "stats", "--json", path, NULL};
  run_result_t r;
  json_flat_t j;
  CTS_ASSERT(run_json_silent(argv, &j, &r));
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "lanes"), 2);
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "time.running_ns"), 40000 + 20000);
  const int pre = json_flat_find(&j, "types", "type", "preexisting", 1000);
  CTS_ASSERT(pre >= 0);
  CTS_ASSERT_EQ_U64(field(&j, "types", pre, "runs"), 2);
  json_flat_free(&j);
  run_result_free(&r);
  char *top[] = {CTS_TEST_CTFSCOPE, "top", "--json", path, NULL};
  CTS_ASSERT(run_json_silent(top, &j, &r));
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[0].label"), "thread A's task");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[0].running_ns"), 40000);
  CTS_ASSERT_STR_EQ(json_flat_str(&j, "rows[1].label"), "thread B's task");
  CTS_ASSERT_EQ_U64(json_flat_num(&j, "rows[1].running_ns"), 20000);
  json_flat_free(&j);
  run_result_free(&r);
}

/* tests/data/tasks/known.ctf (used by the golden CLI cases) is this trace. */
CTS_TEST(checked_in_trace_is_current) {
  static uint8_t want[TT_RING_SIZE];
  char path[512], meta[512];
  snprintf(path, sizeof path, "%s/tasks/known.ctf", CTS_TEST_DATA_DIR);
  snprintf(meta, sizeof meta, "%s/tasks/metadata", CTS_TEST_DATA_DIR);
  const char *update = getenv("CTS_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0) {
    CTS_ASSERT_EQ_INT(tt_write(path, 1), 0);
    FILE *f = fopen(meta, "w");
    CTS_ASSERT(f != NULL);
    fputs(cts_mprof_metadata(), f);
    fclose(f);
    fprintf(stderr, "  wrote %s and %s\n", path, meta);
    return;
  }
  CTS_ASSERT_EQ_INT(tt_build(want, 1), 0);
  FILE *f = fopen(path, "rb");
  CTS_ASSERT_MSG(f != NULL, "%s missing (CTS_UPDATE_GOLDEN=1 writes it)", path);
  static uint8_t have[TT_RING_SIZE + 1];
  const size_t n = fread(have, 1, sizeof have, f);
  fclose(f);
  CTS_ASSERT_EQ_U64(n, TT_RING_SIZE);
  CTS_ASSERT(memcmp(have, want, TT_RING_SIZE) == 0);
}

/* The corpus task traces: every command runs and agrees with `dump` and with each other. */
CTS_TEST(corpus_counts_agree_with_dump) {
  CTS_REQUIRE_CORPUS(corpus);
  static const char *const rel[] = {"mprof/net/net.ctf",
                                    "mprof/wrapped/koleini-trace1-0a4963a.ctf"};
  for (size_t k = 0; k < 2; k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", corpus, rel[k]);
    char *dump[] = {CTS_TEST_CTFSCOPE, "dump", "--no-comments", path, NULL};
    char *info[] = {CTS_TEST_CTFSCOPE, "info", "--json", path, NULL};
    char *stats[] = {CTS_TEST_CTFSCOPE, "stats", "--json", path, NULL};
    char *top[] = {CTS_TEST_CTFSCOPE, "top", "--json", "-n", "0", "--by", "type", path, NULL};
    char *leaks[] = {CTS_TEST_CTFSCOPE, "leaks", "--json", path, NULL};
    char *csv[] = {CTS_TEST_CTFSCOPE, "export", "-f", "csv", path, NULL};
    run_result_t rd, rc;
    json_flat_t ji, js, jt, jl;
    run_result_t ri, rs, rt, rl;
    CTS_ASSERT(run_cmd(dump, NULL, 60, &rd) && rd.exit_code == 0);
    CTS_ASSERT(run_cmd(csv, NULL, 60, &rc) && rc.exit_code == 0);
    CTS_ASSERT(run_json_silent(info, &ji, &ri) && run_json_silent(stats, &js, &rs) &&
               run_json_silent(top, &jt, &rt) && run_json_silent(leaks, &jl, &rl));
    size_t lines = 0, creates = 0, csv_lines = 0;
    for (const char *c = rd.out; *c; c++) lines += *c == '\n';
    for (const char *c = rd.out; (c = strstr(c, " creates ")); c++) creates++;
    for (const char *c = rc.out; *c; c++) csv_lines += *c == '\n';
    CTS_ASSERT_EQ_U64(json_flat_num(&ji, "events_total"), lines);
    CTS_ASSERT_EQ_U64(csv_lines, lines + 1);
    CTS_ASSERT_EQ_U64(json_flat_num(&ji, "events.creates"), creates);
    CTS_ASSERT_EQ_U64(json_flat_num(&ji, "tasks.created"), creates); /* no duplicate creates */
    CTS_ASSERT_EQ_U64(json_flat_num(&js, "tasks.total"), json_flat_num(&ji, "tasks.total"));
    CTS_ASSERT_EQ_U64(json_flat_num(&jl, "pending_total"), json_flat_num(&ji, "tasks.pending"));
    /* One lane: running + idle covers the span; the type rows partition the tasks. */
    CTS_ASSERT_EQ_U64(json_flat_num(&ji, "lanes"), 1);
    CTS_ASSERT_EQ_U64(json_flat_num(&js, "time.running_ns") + json_flat_num(&js, "time.idle_ns"),
                      json_flat_num(&js, "time.span_ns"));
    double tasks = 0, running = 0;
    for (int i = 0;; i++) {
      const double n = field(&jt, "rows", i, "tasks");
      if (isnan(n)) break;
      tasks += n;
      running += field(&jt, "rows", i, "running_ns");
    }
    CTS_ASSERT_EQ_U64(tasks, json_flat_num(&ji, "tasks.total"));
    CTS_ASSERT_EQ_U64(running, json_flat_num(&js, "time.running_ns"));
    fprintf(stderr, "  %s: %zu events, %.0f tasks\n", rel[k], lines, tasks);
    json_flat_free(&ji);
    json_flat_free(&js);
    json_flat_free(&jt);
    json_flat_free(&jl);
    run_result_free(&rd);
    run_result_free(&rc);
    run_result_free(&ri);
    run_result_free(&rs);
    run_result_free(&rt);
    run_result_free(&rl);
  }
}

CTS_TEST_MAIN()
