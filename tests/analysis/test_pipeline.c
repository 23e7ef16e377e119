/* SPDX-License-Identifier: MIT */
/* Reading a memtrace trace on two threads (analysis/pipeline.h, issue #20 point 3): the
 * consumer gets the very events, backtraces, location names, warnings and errors that a
 * single-threaded load gives, on the corpus and on a trace large enough to fill the ring;
 * a hook that stops early ends the decode thread without a deadlock; progress is reported
 * on the calling thread; the automatic choice keeps small traces and pipes on one thread;
 * and the commands print the same bytes either way. */
#define _GNU_SOURCE
#include "../../src/analysis/load.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/analysis/fold.h"
#include "../../src/analysis/pipeline.h"
#include "../../src/common/hash.h"
#include "../mt_file_writer.h"
#include "../test.h"

/* ---- what a load delivered, in order -------------------------------------------------- */

typedef struct seen {
  uint64_t hash, events, frames, names;
  char log[8192]; /* every message, in order */
  size_t log_len;
  long stop_after;       /* the hook fails at this event (0: never) */
  unsigned tasks;        /* threads of this process at the first event */
  unsigned tasks_before; /* and before the load (a sanitizer may run its own) */
  int stop_rc;
  /* progress */
  pthread_t caller;
  bool progress_elsewhere;
  uint64_t progress_calls, progress_done, progress_total;
} seen_t;

static void mix(seen_t *s, uint64_t v) {
  s->hash = cts_hash_combine(s->hash, v);
}

static void mix_str(seen_t *s, const char *str) {
  for (; str && *str; str++) mix(s, (unsigned char)*str);
  mix(s, 0x100);
}

/* The threads of this process now (/proc/self/task), 0 when it cannot be listed. */
static unsigned count_tasks(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  unsigned n = 0;
  for (const struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int hook(void *ud, cts_mem_trace_t *t, const cts_mt_event_t *ev) {
  seen_t *s = ud;
  if (!s->events) s->tasks = count_tasks();
  s->events++;
  mix(s, ev->kind);
  mix(s, ev->domain);
  mix(s, ev->source);
  mix(s, ev->short_form);
  mix(s, ev->time_us);
  mix(s, ev->obj_id);
  mix(s, ev->length);
  mix(s, ev->nsamples);
  mix(s, ev->common_prefix);
  mix(s, ev->offset);
  mix(s, ev->backtrace_len);
  /* Names looked up from the hook, as the CSV and Chrome exports do while reading. */
  const cts_frames_t fr = cts_mem_trace_frames(t);
  for (size_t i = 0; i < ev->backtrace_len; i++) {
    mix(s, ev->backtrace[i]);
    s->frames++;
    const cts_mt_location_t *loc = cts_frame_innermost(&fr, ev->backtrace[i]);
    if (loc) {
      s->names++;
      mix_str(s, loc->defname);
      mix_str(s, loc->filename);
      mix(s, loc->line);
    }
  }
  if (ev->kind == CTS_MT_ALLOC) mix(s, t->prof.last_node);
  if (s->stop_after && (long)s->events == s->stop_after) return s->stop_rc;
  return 0;
}

static void on_log(void *ud, cts_log_level_t level, const char *msg) {
  seen_t *s = ud;
  const int n =
      snprintf(s->log + s->log_len, sizeof s->log - s->log_len, "%d %s\n", (int)level, msg);
  if (n > 0) s->log_len += (size_t)n < sizeof s->log - s->log_len ? (size_t)n : 0;
}

static void on_progress(void *ud, uint64_t done, uint64_t total) {
  seen_t *s = ud;
  if (!pthread_equal(pthread_self(), s->caller)) s->progress_elsewhere = true;
  s->progress_calls++;
  s->progress_done = done;
  s->progress_total = total;
}

typedef struct result {
  int err;
  bool kept, input_error;
  unsigned threads;
  uint64_t allocs, samples, live, hook_err;
  double duration;
  seen_t seen;
} result_t;

/* Loads path with stacks, the default fold and a hook, on `threads` threads. */
static void load(const char *path, unsigned threads, long stop_after, int stop_rc, result_t *r) {
  memset(r, 0, sizeof *r);
  r->seen.stop_after = stop_after;
  r->seen.stop_rc = stop_rc;
  r->seen.caller = pthread_self();
  r->seen.tasks_before = count_tasks();
  static const cts_fold_config_t fold = {0};
  const cts_load_opts_t opts = {.log = {.fn = on_log, .user_data = &r->seen},
                                .progress = on_progress,
                                .progress_user_data = &r->seen,
                                .fold = &fold,
                                .threads = threads};
  const cts_alloc_profile_config_t cfg = {.stacks = true, .history = true};
  cts_mem_trace_t t;
  r->err = cts_mem_trace_load(&t, path, &cfg, &opts, hook, &r->seen);
  r->kept = t.kept;
  r->input_error = t.input_error;
  r->threads = t.threads;
  r->hook_err = (uint64_t)t.hook_err;
  r->allocs = cts_alloc_profile_allocs(&t.prof);
  r->samples = cts_alloc_profile_samples(&t.prof);
  r->live = t.prof.live_blocks;
  r->duration = cts_alloc_profile_duration_s(&t.prof);
  cts_mem_trace_free(&t);
}

/* Fails unless both loads saw and returned the same. */
#define ASSERT_SAME(a, b, path)                                                                    \
  do {                                                                                             \
    CTS_ASSERT_MSG((a).err == (b).err, "%s: err %d vs %d", path, (a).err, (b).err);                \
    CTS_ASSERT_MSG((a).kept == (b).kept && (a).input_error == (b).input_error, "%s: flags differ", \
                   path);                                                                          \
    CTS_ASSERT_MSG((a).seen.events == (b).seen.events, "%s: %llu vs %llu events", path,            \
                   (unsigned long long)(a).seen.events, (unsigned long long)(b).seen.events);      \
    CTS_ASSERT_MSG((a).seen.hash == (b).seen.hash, "%s: events differ", path);                     \
    CTS_ASSERT_STR_EQ((a).seen.log, (b).seen.log);                                                 \
    CTS_ASSERT_EQ_U64((a).allocs, (b).allocs);                                                     \
    CTS_ASSERT_EQ_U64((a).samples, (b).samples);                                                   \
    CTS_ASSERT_EQ_U64((a).live, (b).live);                                                         \
    CTS_ASSERT((a).duration == (b).duration);                                                      \
    CTS_ASSERT_EQ_U64((a).hook_err, (b).hook_err);                                                 \
    CTS_ASSERT_EQ_U64((a).seen.progress_done, (b).seen.progress_done);                             \
  } while (0)

/* ---- traces ------------------------------------------------------------------------------- */

static char tmpdir[] = "/tmp/cts_pipeline_XXXXXX";

static const char *tmp_path(const char *name, char *buf, size_t size) {
  snprintf(buf, size, "%s/%s", tmpdir, name);
  return buf;
}

static size_t resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  static char names[64][32];
  (void)ud;
  if (!max) return 1;
  snprintf(names[code % 64], sizeof names[0], "fn_%llu", (unsigned long long)code);
  out[0] = (cts_mt_location_t){.line = (uint32_t)(code % 1000),
                               .start_char = 1,
                               .end_char = 9,
                               .filename = "gen.ml",
                               .defname = names[code % 64]};
  return 1;
}

/* A trace of n allocations (every third collected a little later) over varied stacks,
 * some deep, three of 40 000 frames: many batches and ring turns for n of a few hundred
 * thousand. */
static int make_trace(const char *path, uint64_t n) {
  mt_file_writer_t fw;
  int e = mt_file_writer_open(&fw, path, 1.0, resolve);
  if (e) return e;
  cts_mt_writer_t *w = fw.w;
  static uint64_t bt[40000];
  uint64_t rng = 42, pending[8] = {0};
  for (uint64_t i = 0; !e && i < n; i++) {
    const uint64_t x = cts_splitmix64(&rng);
    size_t depth = (x & 0xff) == 0 ? 200 + (x >> 8) % 100 : 1 + (x >> 8) % 24;
    if (i == 1000 || i == 1001 || i == 50000) depth = 40000; /* more than a batch holds */
    /* Shared outer frames, then a random tail: about 16 bytes an event. */
    for (size_t k = 0; k < depth; k++)
      bt[k] = 1 + (k < depth / 2 ? k * 7 + (x >> 20) % (k + 3) : cts_splitmix64(&rng)) % 20000;
    uint64_t id;
    e = cts_mt_writer_alloc(w, 1700000000000000ull + i, 1 + (x >> 40) % 300, 1 + (x >> 50) % 3,
                            (cts_mt_source_t)((x >> 33) % 3), bt, depth, &id);
    if (!e && i % 3 == 0) {
      if (pending[i % 8]) e = cts_mt_writer_collect(w, 1700000000000000ull + i, pending[i % 8]);
      pending[i % 8] = id + 1;
    }
  }
  return mt_file_writer_close(&fw, e);
}

static char big[256];

__attribute__((constructor)) static void setup(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    exit(1);
  }
  tmp_path("big.ctf", big, sizeof big);
  if (make_trace(big, 160000)) {
    fprintf(stderr, "cannot write %s\n", big);
    exit(1);
  }
}

__attribute__((destructor)) static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Every corpus trace (v1, v2, v3, truncated body and header) loads the same both ways. */
CTS_TEST(corpus_traces_load_the_same_on_two_threads) {
  static const char *const dirs[] = {CTS_TEST_CORPUS_DIR "/memtrace/traces",
                                     CTS_TEST_CORPUS_DIR "/memtrace/public"};
  int traces = 0;
  for (size_t d = 0; d < 2; d++) {
    DIR *dir = opendir(dirs[d]);
    CTS_ASSERT_MSG(dir, "no corpus at %s", dirs[d]);
    for (struct dirent *de; (de = readdir(dir));) {
      const size_t len = strlen(de->d_name);
      if (len < 4 || strcmp(de->d_name + len - 4, ".ctf") != 0) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/%s", dirs[d], de->d_name);
      static result_t one, two;
      load(path, 1, 0, 0, &one);
      load(path, 2, 0, 0, &two);
      CTS_ASSERT_EQ_INT(one.threads, 1);
      CTS_ASSERT_EQ_INT(two.threads, 2);
      CTS_ASSERT_MSG(one.seen.events > 0, "%s: no events", path);
      ASSERT_SAME(one, two, path);
      traces++;
    }
    closedir(dir);
  }
  CTS_ASSERT(traces >= 20);
}

/* A trace larger than the ring, read whole: same events, frames and names. */
CTS_TEST(a_large_trace_loads_the_same_on_two_threads) {
  static result_t one, two;
  load(big, 1, 0, 0, &one);
  load(big, 2, 0, 0, &two);
  CTS_ASSERT_EQ_INT(two.err, 0);
  CTS_ASSERT_EQ_INT(two.threads, 2);
  CTS_ASSERT(two.seen.events > 160000); /* allocations and collections */
  CTS_ASSERT(two.seen.events > 4 * CTS_PIPE_BATCHES * CTS_PIPE_BATCH_EVENTS);
  CTS_ASSERT(two.seen.names == two.seen.frames); /* every location looked up during the load */
  ASSERT_SAME(one, two, big);
}

/* A defect in the middle: the events before it, then the same error at the same offset. */
CTS_TEST(a_corrupt_trace_reports_the_same_error_and_offset) {
  FILE *in = fopen(big, "rb");
  CTS_ASSERT(in);
  static uint8_t buf[32u << 20];
  const size_t n = fread(buf, 1, sizeof buf, in);
  fclose(in);
  CTS_ASSERT(n > (256u << 10) && n < sizeof buf);
  memset(buf + n / 2, 0xff, 256); /* into the events of some packet */
  char path[256];
  FILE *out = fopen(tmp_path("corrupt.ctf", path, sizeof path), "wb");
  CTS_ASSERT(out && fwrite(buf, 1, n, out) == n);
  CTS_ASSERT(fclose(out) == 0);
  static result_t one, two;
  load(path, 1, 0, 0, &one);
  load(path, 2, 0, 0, &two);
  CTS_ASSERT(one.err != 0 && one.kept);
  CTS_ASSERT(one.seen.events > 1000);
  CTS_ASSERT_MSG(strstr(two.seen.log, "at offset ") != NULL, "log: %s", two.seen.log);
  ASSERT_SAME(one, two, path);
}

/* A hook that stops after some events (an output closed, a size refused): the load
 * returns its error at once, the decode thread stopped behind a full ring. */
CTS_TEST(a_hook_stop_ends_the_decode_thread) {
  static const long stops[] = {1, 5000, 3 * CTS_PIPE_BATCH_EVENTS + 7, 100000};
  for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
    static result_t one, two;
    load(big, 1, stops[i], -EPIPE, &one);
    load(big, 2, stops[i], -EPIPE, &two);
    CTS_ASSERT_EQ_INT(two.err, -EPIPE);
    CTS_ASSERT_EQ_U64(two.seen.events, (uint64_t)stops[i]);
    CTS_ASSERT(!two.kept);
    ASSERT_SAME(one, two, big);
  }
  /* A positive value stops as CTS_E_STOPPED, with the reader's words for it. */
  static result_t one, two;
  load(big, 1, 12345, 7, &one);
  load(big, 2, 12345, 7, &two);
  CTS_ASSERT_EQ_INT(two.err, CTS_E_STOPPED);
  CTS_ASSERT_MSG(strstr(two.seen.log, "stopped by the caller") != NULL, "log: %s", two.seen.log);
  ASSERT_SAME(one, two, big);
}

/* Progress is drawn by the calling thread (the CLI's progress line is not thread-safe),
 * up to the whole file. */
CTS_TEST(progress_is_reported_on_the_calling_thread) {
  static result_t two;
  load(big, 2, 0, 0, &two);
  struct stat st;
  CTS_ASSERT(stat(big, &st) == 0);
  CTS_ASSERT(!two.seen.progress_elsewhere);
  CTS_ASSERT(two.seen.progress_calls >= 1); /* one every 4 MiB, and the end */
  CTS_ASSERT_EQ_U64(two.seen.progress_done, (uint64_t)st.st_size);
  CTS_ASSERT_EQ_U64(two.seen.progress_total, (uint64_t)st.st_size);
}

/* Automatic: two threads for a large regular file when two CPUs are there, one for a small
 * one; the process default applies when a load leaves the choice open; a pipe is always
 * read on the calling thread. */
CTS_TEST(the_automatic_choice) {
  /* A large file: a trace with zeros after it, never read (the hook stops at once). */
  char padded[256];
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", big, tmp_path("padded.ctf", padded, sizeof padded));
  CTS_ASSERT(system(cmd) == 0);
  CTS_ASSERT(truncate(padded, CTS_PIPE_MIN_BYTES) == 0);
  static result_t r;
  const unsigned before = cts_pipe_auto_threads(CTS_PIPE_MIN_BYTES);
  load(padded, 0, 1, -ECANCELED, &r);
  CTS_ASSERT_EQ_INT(r.err, -ECANCELED);
  if (before == cts_pipe_auto_threads(CTS_PIPE_MIN_BYTES)) /* the load did not cross */
    CTS_ASSERT_EQ_INT(r.threads, before);
  load(CTS_TEST_CORPUS_DIR "/memtrace/traces/p2_leak.r1.ctf", 0, 1, -ECANCELED, &r);
  CTS_ASSERT_EQ_INT(r.threads, 1);
  cts_load_set_threads(2);
  load(CTS_TEST_CORPUS_DIR "/memtrace/traces/p2_leak.r1.ctf", 0, 1, -ECANCELED, &r);
  CTS_ASSERT_EQ_INT(r.threads, 2);
  cts_load_set_threads(1);
  load(padded, 0, 1, -ECANCELED, &r);
  CTS_ASSERT_EQ_INT(r.threads, 1);
  cts_load_set_threads(0);

  char fifo[256];
  CTS_ASSERT(mkfifo(tmp_path("fifo", fifo, sizeof fifo), 0600) == 0);
  const pid_t pid = fork();
  CTS_ASSERT(pid >= 0);
  if (pid == 0) { /* the writer: the small trace into the FIFO */
    FILE *in = fopen(CTS_TEST_CORPUS_DIR "/memtrace/traces/p2_leak.r1.ctf", "rb");
    FILE *out = fopen(fifo, "wb");
    char b[65536];
    size_t k;
    while (in && out && (k = fread(b, 1, sizeof b, in)) > 0) fwrite(b, 1, k, out);
    _exit(in && out && fclose(out) == 0 ? 0 : 1);
  }
  load(fifo, 2, 0, 0, &r);
  int status;
  CTS_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CTS_ASSERT_EQ_INT(r.err, 0);
  CTS_ASSERT_EQ_INT(r.threads, 1);
  CTS_ASSERT(r.seen.events > 0);
}

/* The rule (issue #20): a decode thread only for a trace of CTS_PIPE_MIN_BYTES or more,
 * with two CPUs and one of them idle. A 20 MB trace, which one thread reads in well under
 * 0.3 s, used to get one whenever a CPU was idle: 1.75 CPUs for no shorter wait. */
CTS_TEST(the_rule_keeps_traces_under_the_threshold_on_one_thread) {
  const uint64_t min = CTS_PIPE_MIN_BYTES, mb20 = 20465147; /* sqlite3 at rate 1 */
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(mb20, 2, 0.0), 1);
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(mb20, 64, -1.0), 1);
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(min - 1, 2, 0.0), 1);
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(min, 2, 0.0), 2);
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(min, 2, 1.0), 2);
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(min, 2, 1.5), 1);  /* no CPU idle */
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(min, 2, -1.0), 2); /* load unknown */
  CTS_ASSERT_EQ_INT(cts_pipe_threads_for(UINT64_MAX, 1, 0.0), 1);
  CTS_ASSERT_EQ_INT(cts_pipe_auto_threads(mb20), 1);
}

/* The automatic choice on a 20 MB file starts no thread, whatever the machine's load: the
 * process has no more threads while the hook sees the first event than before the load. */
CTS_TEST(a_20_mb_trace_starts_no_thread) {
  char padded[256];
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", big, tmp_path("p20.ctf", padded, sizeof padded));
  CTS_ASSERT(system(cmd) == 0);
  CTS_ASSERT(truncate(padded, 20465147) == 0);
  static result_t r;
  load(padded, 0, 1, -ECANCELED, &r);
  CTS_ASSERT_EQ_INT(r.err, -ECANCELED);
  CTS_ASSERT_EQ_INT(r.threads, 1);
  CTS_ASSERT(r.seen.tasks_before > 0);
  CTS_ASSERT_EQ_INT(r.seen.tasks, r.seen.tasks_before);
  load(padded, 2, 1, -ECANCELED, &r); /* (the count sees a decode thread) */
  CTS_ASSERT_EQ_INT(r.threads, 2);
  CTS_ASSERT_EQ_INT(r.seen.tasks, r.seen.tasks_before + 1);
}

/* The commands print the same bytes (and exit the same) with --threads 1 and 2. */
CTS_TEST(commands_print_the_same_on_two_threads) {
  static const char *const cmds[] = {
      "stats",
      "stats --json",
      "top",
      "top --tree --json",
      "leaks --json",
      "export -f folded",
      "export -f csv",
      "export -f chrome",
      "export -f pprof -o -",
      "report -o -",
  };
  static const char *const traces[] = {
      CTS_TEST_CORPUS_DIR "/memtrace/traces/p5_mixed_promote.r1.ctf",
      CTS_TEST_CORPUS_DIR "/memtrace/traces/p1_short_lived.r1e-2.trunc-header.ctf",
      CTS_TEST_CORPUS_DIR "/memtrace/traces/p4_deep_recursion.r1.ctf",
  };
  for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
    for (size_t k = 0; k < sizeof traces / sizeof *traces; k++) {
      int status[2];
      for (int n = 1; n <= 2; n++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' %s --threads %d '%s' >'%s/out%d' 2>'%s/err%d'",
                 CTS_TEST_CTFSCOPE, cmds[c], n, traces[k], tmpdir, n, tmpdir, n);
        status[n - 1] = system(cmd);
      }
      CTS_ASSERT_MSG(status[0] == status[1], "%s on trace %zu: status %d vs %d", cmds[c], k,
                     status[0], status[1]);
      char cmp[512];
      snprintf(cmp, sizeof cmp, "cmp -s '%s/out1' '%s/out2' && cmp -s '%s/err1' '%s/err2'", tmpdir,
               tmpdir, tmpdir, tmpdir);
      CTS_ASSERT_MSG(system(cmp) == 0, "%s on trace %zu: outputs differ", cmds[c], k);
    }
  }
}

CTS_TEST_MAIN()
