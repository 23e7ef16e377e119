/* SPDX-License-Identifier: MIT */
/* Task tracing of an unmodified program (src/preload/preload_pthread.c): victim_tasks runs
 * untraced and under libctfscope-preload.so with CTFSCOPE_TASKS, must print the same, and
 * its trace, read back with the mprof reader, must hold exactly the expected events of
 * each thread in order: thread creation, names, contended mutex, condition wait and
 * broadcast, joins, cancellation, and the end of the process. */
#define _GNU_SOURCE
#include <time.h>
#include <unistd.h>

#include <ctfscope/mprof.h>

#include "../run_cmd.h"
#include "../test.h"
#include "mprof_test_util.h"

#define WORKERS 8

static char trace[256], memtrace[256];

static void paths(const char *name) {
  snprintf(trace, sizeof trace, "/tmp/cts_tasks_%s_%d.ctf", name, (int)getpid());
  snprintf(memtrace, sizeof memtrace, "/tmp/cts_tasks_%s_%d.mem.ctf", name, (int)getpid());
  unlink(trace);
  unlink(memtrace);
}

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Runs the victim with the environment entries given ("NAME=VALUE", NULL-terminated;
 * LD_PRELOAD is added when traced). */
static bool run_victim(run_result_t *r, const char *mode, bool traced, const char *const *env) {
  char *argv[] = {(char *)CTS_TEST_VICTIM_TASKS, (char *)mode, NULL};
  if (traced) setenv("LD_PRELOAD", CTS_TEST_PRELOAD, 1);
  for (const char *const *e = env; e && *e; e++) putenv((char *)*e);
  const bool ok = run_cmd(argv, NULL, 60, r);
  unsetenv("LD_PRELOAD");
  for (const char *const *e = env; e && *e; e++) {
    char name[128];
    const size_t n = (size_t)(strchr(*e, '=') - *e);
    memcpy(name, *e, n);
    name[n] = '\0';
    unsetenv(name);
  }
  return ok;
}

/* The events of the trace grouped by packet (one OS thread writes each packet here: the
 * threads write a few events each and give their packet back when they end). */
typedef struct packet_events {
  const cts_mprof_event_t *ev;
  size_t n;
} packet_events_t;

typedef struct victim_trace {
  tu_events_t t;
  packet_events_t packets[64];
  size_t npackets;
} victim_trace_t;

static bool load_trace(victim_trace_t *v, const char *path, bool stream, char *msg, size_t len) {
  memset(v, 0, sizeof *v);
  size_t size;
  uint8_t *data = tu_load(path, &size);
  if (!data) {
    snprintf(msg, len, "cannot read %.200s", path);
    return false;
  }
  const int e = tu_read(data, size, &v->t, stream, NULL, msg, len);
  free(data);
  if (e) return false;
  /* The allocation tracer's events (ctfscope_alloc, when both tracers run) are checked by
   * tests/tasks/test_task_memory.c: the thread events are what is checked here. */
  size_t kept = 0;
  for (size_t i = 0; i < v->t.n; i++)
    if (v->t.ev[i].id != CTS_MPROF_ALLOC) v->t.ev[kept++] = v->t.ev[i];
  v->t.n = kept;
  for (size_t i = 0; i < v->t.n; i++) {
    const cts_mprof_event_t *ev = &v->t.ev[i];
    if (v->npackets == 0 || ev->packet_count != v->packets[v->npackets - 1].ev->packet_count) {
      if (v->npackets == 64) break;
      v->packets[v->npackets++] = (packet_events_t){ev, 0};
    }
    v->packets[v->npackets - 1].n++;
  }
  return true;
}

#define EXPECT_EVENT(e, want_id, want_thread, want_arg)                                       \
  CTS_ASSERT_MSG((e)->id == (want_id) && (e)->thread == (int64_t)(want_thread) &&             \
                     (e)->arg == (uint64_t)(want_arg),                                        \
                 "at offset %llu: got %s thread=%lld arg=%lld, want %s thread=%lld arg=%lld", \
                 (unsigned long long)(e)->offset, cts_mprof_event_name((e)->id),              \
                 (long long)(e)->thread, (long long)(e)->arg, cts_mprof_event_name(want_id),  \
                 (long long)(want_thread), (long long)(want_arg))

static int64_t worker_task[WORKERS];

/* Checks the main thread's packet: start, names, creations, joins in order, its end. */
static void check_main(const packet_events_t *p, bool cancel, int64_t *cancelled_task) {
  size_t k = 0;
  CTS_ASSERT(p->n == 3 + 2 * WORKERS + WORKERS + 1 + (cancel ? 3u : 0u));
  EXPECT_EVENT(&p->ev[k], CTS_MPROF_SWITCH, 0, 0);
  k++;
  /* the clock anchor: the process id, and CLOCK_REALTIME in ns (after 2020) */
  CTS_ASSERT(p->ev[k].id == CTS_MPROF_ANCHOR && p->ev[k].thread > 0);
  CTS_ASSERT(p->ev[k].arg > UINT64_C(1577836800) * 1000000000u);
  k++;
  EXPECT_EVENT(&p->ev[k], CTS_MPROF_LABEL, 0, 0);
  CTS_ASSERT_STR_EQ(p->ev[k].str, "victim_tasks");
  k++;
  for (int i = 0; i < WORKERS; i++) {
    const cts_mprof_event_t *c = &p->ev[k++];
    CTS_ASSERT(c->id == CTS_MPROF_CREATES && c->thread == 0);
    CTS_ASSERT_EQ_INT(c->thread_type, CTS_TASK_TASK);
    worker_task[i] = (int64_t)c->arg;
    for (int j = 0; j < i; j++) CTS_ASSERT(worker_task[j] != worker_task[i]);
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_LABEL, worker_task[i], 0);
    CTS_ASSERT_STR_EQ(p->ev[k].str, "worker_main"); /* exported: dladdr names it */
    k++;
  }
  for (int i = 0; i < WORKERS; i++, k++) EXPECT_EVENT(&p->ev[k], CTS_MPROF_READ, 0, worker_task[i]);
  if (cancel) {
    const cts_mprof_event_t *c = &p->ev[k++];
    CTS_ASSERT(c->id == CTS_MPROF_CREATES && c->thread == 0);
    *cancelled_task = (int64_t)c->arg;
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_LABEL, *cancelled_task, 0);
    /* Static, so not in .dynsym: named from the executable's .symtab. */
    CTS_ASSERT_STR_EQ(p->ev[k].str, "cancelled_main");
    k++;
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_READ, 0, *cancelled_task);
    k++;
  }
  EXPECT_EVENT(&p->ev[k], CTS_MPROF_FULFILLS, 0, 0); /* the process ended */
}

/* Checks a whole victim trace; @p t0 and @p t1 bound the run in CLOCK_MONOTONIC. */
static void check_victim(const victim_trace_t *v, bool cancel, uint64_t t0, uint64_t t1) {
  CTS_ASSERT_EQ_U64(v->t.warnings, 0);
  CTS_ASSERT_EQ_U64(v->npackets, 1 + WORKERS + (cancel ? 1u : 0u));
  const packet_events_t *main_packet = NULL;
  for (size_t i = 0; i < v->npackets; i++)
    if (v->packets[i].ev[0].id == CTS_MPROF_SWITCH && v->packets[i].ev[0].thread == 0)
      main_packet = &v->packets[i];
  CTS_ASSERT_MSG(main_packet, "no packet starts with switch(0)");
  int64_t cancelled = CTS_TASK_NONE;
  check_main(main_packet, cancel, &cancelled);
  if (cts_test_state.failed) return;

  /* Every event lies within the run (the clock is CLOCK_MONOTONIC nanoseconds, through the
   * calibrated TSC or not; 2 ms of slack for the calibration) and each thread's are in
   * order. */
  for (size_t i = 0; i < v->t.n; i++) {
    const uint64_t time = v->t.ev[i].time_ns;
    CTS_ASSERT_MSG(time + 2000000 >= t0 && time <= t1 + 2000000,
                   "event %zu at %llu ns, the run was %llu..%llu", i, (unsigned long long)time,
                   (unsigned long long)t0, (unsigned long long)t1);
  }
  for (size_t i = 0; i < v->npackets; i++)
    for (size_t k = 1; k < v->packets[i].n; k++)
      CTS_ASSERT(v->packets[i].ev[k].time_ns >= v->packets[i].ev[k - 1].time_ns);

  /* The workers: one packet each. */
  int64_t cond = CTS_TASK_NONE, broadcaster = CTS_TASK_NONE;
  int seen_name[WORKERS] = {0}, waiters = 0, cond_creations = 0;
  for (size_t i = 0; i < v->npackets; i++) {
    const packet_events_t *p = &v->packets[i];
    if (p == main_packet) continue;
    const int64_t w = p->ev[0].thread;
    if (cancel && w == cancelled) {
      /* switch, creates(cond2) + label, try_read(cond2), fails("cancelled") */
      CTS_ASSERT_EQ_U64(p->n, 5);
      EXPECT_EVENT(&p->ev[0], CTS_MPROF_SWITCH, w, 0);
      CTS_ASSERT(p->ev[1].id == CTS_MPROF_CREATES && p->ev[1].thread == w);
      CTS_ASSERT_EQ_INT(p->ev[1].thread_type, CTS_TASK_CONDITION);
      EXPECT_EVENT(&p->ev[3], CTS_MPROF_TRY_READ, w, p->ev[1].arg);
      EXPECT_EVENT(&p->ev[4], CTS_MPROF_FAILS, w, w);
      CTS_ASSERT_STR_EQ(p->ev[4].str, "cancelled");
      continue;
    }
    int index = -1;
    for (int k = 0; k < WORKERS; k++)
      if (worker_task[k] == w) index = k;
    CTS_ASSERT_MSG(index >= 0, "packet %zu is of task %lld, not a worker", i, (long long)w);
    size_t k = 0;
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_SWITCH, w, 0);
    k++;
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_LABEL, w, 0);
    int name = -1;
    CTS_ASSERT(sscanf(p->ev[k].str, "worker-%d", &name) == 1 && name >= 0 && name < WORKERS);
    CTS_ASSERT(!seen_name[name]);
    seen_name[name] = 1;
    k++;
    /* main held the mutex: try_read of main, then read once it is ours */
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_TRY_READ, w, 0);
    k++;
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_READ, w, 0);
    k++;
    CTS_ASSERT(k < p->n);
    if (p->ev[k].id == CTS_MPROF_CREATES) { /* the first to use the condition */
      CTS_ASSERT_EQ_INT(p->ev[k].thread_type, CTS_TASK_CONDITION);
      CTS_ASSERT(p->ev[k].thread == w && cond == CTS_TASK_NONE);
      cond = (int64_t)p->ev[k].arg;
      cond_creations++;
      k++;
      EXPECT_EVENT(&p->ev[k], CTS_MPROF_LABEL, cond, 0);
      CTS_ASSERT_MSG(strncmp(p->ev[k].str, "cond 0x", 7) == 0, "label %s", p->ev[k].str);
      k++;
    }
    CTS_ASSERT(k < p->n);
    if (p->ev[k].id == CTS_MPROF_SIGNAL_NOSWITCH) { /* the last one: broadcast */
      CTS_ASSERT_MSG(broadcaster == CTS_TASK_NONE, "two broadcasts");
      broadcaster = w;
      k++;
    } else {
      waiters++;
      CTS_ASSERT(p->ev[k].id == CTS_MPROF_TRY_READ && p->ev[k].thread == w);
      k++;
      /* woken by the broadcast (glibc has no spurious wake-ups to allow for) */
      CTS_ASSERT(p->ev[k].id == CTS_MPROF_SIGNAL && p->ev[k].thread == w);
      k++;
    }
    EXPECT_EVENT(&p->ev[k], CTS_MPROF_FULFILLS, w, w);
    k++;
    CTS_ASSERT_EQ_U64(k, p->n);
  }
  CTS_ASSERT_EQ_INT(cond_creations, 1);
  CTS_ASSERT_EQ_INT(waiters, WORKERS - 1);
  CTS_ASSERT(broadcaster != CTS_TASK_NONE);
  /* every wait was on the condition, every wake-up came from the broadcaster */
  for (size_t i = 0; i < v->t.n; i++) {
    const cts_mprof_event_t *e = &v->t.ev[i];
    if (e->id == CTS_MPROF_SIGNAL) CTS_ASSERT_EQ_U64(e->arg, (uint64_t)broadcaster);
    if (e->id == CTS_MPROF_SIGNAL_NOSWITCH)
      EXPECT_EVENT(e, CTS_MPROF_SIGNAL_NOSWITCH, cond, broadcaster);
    if (e->id == CTS_MPROF_TRY_READ && e->arg != 0 && e->thread != cancelled)
      CTS_ASSERT_EQ_U64(e->arg, (uint64_t)cond);
  }
}

/* Runs the victim untraced and traced (same output, exit 0), then checks the trace. */
static void traced_run(const char *name, const char *mode, const char *const *env, bool stream) {
  run_result_t plain, traced;
  CTS_ASSERT(run_victim(&plain, mode, false, NULL));
  CTS_ASSERT_EQ_INT(plain.exit_code, 0);
  const uint64_t t0 = monotonic_ns();
  CTS_ASSERT(run_victim(&traced, mode, true, env));
  const uint64_t t1 = monotonic_ns();
  CTS_ASSERT_MSG(traced.exit_code == 0 && strcmp(plain.out, traced.out) == 0,
                 "exit %d, stdout:\n%s\nstderr:\n%s", traced.exit_code, traced.out, traced.err);
  CTS_ASSERT_MSG(traced.err_len == 0, "stderr: %s", traced.err);
  victim_trace_t v;
  char msg[256];
  CTS_ASSERT_MSG(load_trace(&v, trace, stream, msg, sizeof msg), "%s: %s", name, msg);
  check_victim(&v, mode != NULL, t0, t1);
  tu_events_free(&v.t);
  run_result_free(&plain);
  run_result_free(&traced);
}

CTS_TEST(ring_file_has_every_thread_event_in_order) {
  paths("ring");
  char setting[300];
  snprintf(setting, sizeof setting, "CTFSCOPE_TASKS=%s", trace);
  const char *env[] = {setting, NULL};
  traced_run("ring", NULL, env, false);
  unlink(trace);
}

CTS_TEST(cancelled_thread_fails) {
  paths("cancel");
  char setting[300];
  snprintf(setting, sizeof setting, "CTFSCOPE_TASKS=%s", trace);
  const char *env[] = {setting, NULL};
  traced_run("cancel", "cancel", env, false);
  unlink(trace);
}

CTS_TEST(stream_file_and_monotonic_clock_give_the_same_events) {
  paths("stream");
  char setting[300];
  snprintf(setting, sizeof setting, "CTFSCOPE_TASKS=%s", trace);
  const char *env[] = {setting,
                       "CTFSCOPE_TASKS_STREAM=1",
                       "CTFSCOPE_TASKS_CLOCK=monotonic",
                       "CTFSCOPE_TASKS_SIZE=64K",
                       "CTFSCOPE_TASKS_PACKETS=16",
                       NULL};
  traced_run("stream", NULL, env, true);
  struct stat st;
  CTS_ASSERT(stat(trace, &st) == 0 && st.st_size < 16 * 1024); /* packets cut to content */
  unlink(trace);
}

/* The allocations in a memtrace trace (`ctfscope info --json`), or -1. */
static long count_allocations(const char *path) {
  char *argv[] = {(char *)CTS_TEST_CTFSCOPE, "info", "--json", (char *)path, NULL};
  run_result_t r;
  if (!run_cmd(argv, NULL, 60, &r)) return -1;
  const char *field = r.exit_code == 0 ? strstr(r.out, "\"allocs_total\":") : NULL;
  const long n = field ? strtol(field + strlen("\"allocs_total\":"), NULL, 10) : -1;
  run_result_free(&r);
  return n;
}

/* Both tracers at once; and the task hooks allocate nothing: at sampling rate 1 the
 * allocation trace counts the same allocations with task tracing on as with it off. */
CTS_TEST(allocation_and_task_tracing_together) {
  paths("both");
  char setting[300], mt[300];
  snprintf(setting, sizeof setting, "CTFSCOPE_TASKS=%s", trace);
  snprintf(mt, sizeof mt, "MEMTRACE=%s", memtrace);
  const char *env[] = {setting, mt, "MEMTRACE_RATE=1", NULL};
  traced_run("both", NULL, env, false);
  const long with_tasks = count_allocations(memtrace);
  const char *env_off[] = {mt, "MEMTRACE_RATE=1", NULL};
  run_result_t r;
  CTS_ASSERT(run_victim(&r, NULL, true, env_off));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  run_result_free(&r);
  const long without = count_allocations(memtrace);
  CTS_ASSERT_MSG(with_tasks > 0 && with_tasks == without,
                 "%ld allocations with task tracing, %ld without", with_tasks, without);
  unlink(trace);
  unlink(memtrace);
}

/* Thousands of threads, one after another: every creation, end and join is recorded (the
 * start records and the thread table are reused), in a stream that keeps them all. */
CTS_TEST(thousands_of_threads_are_all_traced) {
  paths("many");
  char setting[300];
  snprintf(setting, sizeof setting, "CTFSCOPE_TASKS=%s", trace);
  const char *env[] = {setting, "CTFSCOPE_TASKS_STREAM=1", "CTFSCOPE_TASKS_SIZE=256K",
                       "CTFSCOPE_TASKS_PACKETS=64", NULL};
  run_result_t r;
  CTS_ASSERT(run_victim(&r, "many", true, env));
  CTS_ASSERT_MSG(r.exit_code == 0 && strcmp(r.out, "5000 threads\n") == 0, "exit %d: %s%s",
                 r.exit_code, r.out, r.err);
  run_result_free(&r);
  victim_trace_t v;
  char msg[256];
  CTS_ASSERT_MSG(load_trace(&v, trace, true, msg, sizeof msg), "%s", msg);
  CTS_ASSERT_EQ_U64(v.t.warnings, 0);
  size_t creates = 0, joins = 0, ends = 0;
  int64_t last_child = 0;
  for (size_t i = 0; i < v.t.n; i++) {
    const cts_mprof_event_t *e = &v.t.ev[i];
    if (e->id == CTS_MPROF_CREATES && e->thread == 0) {
      creates++;
      last_child = (int64_t)e->arg;
    } else if (e->id == CTS_MPROF_READ && e->thread == 0) {
      CTS_ASSERT_EQ_U64(e->arg, (uint64_t)last_child); /* main's packets are in order */
      joins++;
    } else if (e->id == CTS_MPROF_FULFILLS && e->thread != 0) {
      CTS_ASSERT_EQ_U64(e->arg, (uint64_t)e->thread);
      ends++;
    }
  }
  CTS_ASSERT_EQ_U64(creates, 5000);
  CTS_ASSERT_EQ_U64(joins, 5000);
  CTS_ASSERT_EQ_U64(ends, 5000);
  tu_events_free(&v.t);
  unlink(trace);
}

CTS_TEST(record_tasks_writes_the_task_trace) {
  paths("record");
  char *argv[] = {(char *)CTS_TEST_CTFSCOPE,     "record", "--tasks", "-T", trace, "-o", memtrace,
                  (char *)CTS_TEST_VICTIM_TASKS, NULL};
  setenv("CTFSCOPE_PRELOAD", CTS_TEST_PRELOAD, 1);
  run_result_t r;
  const uint64_t t0 = monotonic_ns();
  CTS_ASSERT(run_cmd(argv, NULL, 60, &r));
  const uint64_t t1 = monotonic_ns();
  unsetenv("CTFSCOPE_PRELOAD");
  CTS_ASSERT_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  CTS_ASSERT_MSG(strstr(r.err, "task trace written to") && strstr(r.err, trace), "%s", r.err);
  victim_trace_t v;
  char msg[256];
  CTS_ASSERT_MSG(load_trace(&v, trace, false, msg, sizeof msg), "%s", msg);
  check_victim(&v, false, t0, t1);
  tu_events_free(&v.t);
  struct stat st;
  CTS_ASSERT(stat(memtrace, &st) == 0 && st.st_size > 0);
  run_result_free(&r);
  unlink(trace);
  unlink(memtrace);
}

CTS_TEST(bad_settings_leave_the_program_untraced) {
  paths("bad");
  char setting[300];
  snprintf(setting, sizeof setting, "CTFSCOPE_TASKS=%s", trace);
  static const char *const bad[][2] = {
      {"CTFSCOPE_TASKS_PACKETS=0", "CTFSCOPE_TASKS_PACKETS"},
      {"CTFSCOPE_TASKS_SIZE=12Q", "CTFSCOPE_TASKS_SIZE"},
      {"CTFSCOPE_TASKS_SIZE=1K", "each packet must get"},
      {"CTFSCOPE_TASKS_CLOCK=sundial", "expected tsc or monotonic"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *env[] = {setting, bad[i][0], NULL};
    run_result_t r;
    CTS_ASSERT(run_victim(&r, NULL, true, env));
    CTS_ASSERT_EQ_INT(r.exit_code, 0);
    CTS_ASSERT_MSG(strstr(r.out, "workers 8, sum 28"), "%s", r.out);
    CTS_ASSERT_MSG(strstr(r.err, bad[i][1]) && strstr(r.err, "threads are not traced"), "%s",
                   r.err);
    CTS_ASSERT(access(trace, F_OK) != 0);
    run_result_free(&r);
  }
  /* a file that cannot be created */
  const char *env[] = {"CTFSCOPE_TASKS=/nonexistent-dir/x.ctf", NULL};
  run_result_t r;
  CTS_ASSERT(run_victim(&r, NULL, true, env));
  CTS_ASSERT_EQ_INT(r.exit_code, 0);
  CTS_ASSERT_MSG(strstr(r.err, "cannot create this file"), "%s", r.err);
  run_result_free(&r);
}

CTS_TEST_MAIN()
