/* SPDX-License-Identifier: MIT */
/* The writer process (tracer.h, "The writer process"), through the linked API: traces as
 * exact as with a writer thread, a process that is nobody's child and leaves the program's
 * session, the program unharmed when it dies, forked children that let go of it, and the
 * trace of a killed program finished by it. The tests run in order in one process: the
 * first session makes the shared mapping (no ring exists before it), later ones reuse it. */
#define _GNU_SOURCE
#include <ctfscope/tracer.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../test.h"
#include "decoded.h"
#include "tracer/tracer_internal.h"

static const void *fake_ptr(uint64_t i) {
  return (const void *)(uintptr_t)(0x200000000ull + i * 64u);
}

static void temp_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "/tmp/cts_writer_process_%s_%d.ctf", name, (int)getpid());
}

static int start_process_writer_into(const cts_tracer_sink_t *sink, cts_tracer_unwind_t unwind) {
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.unwind = unwind;
  cfg.writer = CTS_TRACER_WRITER_PROCESS;
  return cts_tracer_start(&cfg, sink);
}

static int start_process_writer(const char *path, cts_tracer_unwind_t unwind) {
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = path;
  return start_process_writer_into(&sink, unwind);
}

/* The trace at `path` reads back cleanly with these counts. */
static void check_trace(const char *path, uint64_t allocs, uint64_t collects) {
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.error == 0, "%s", d.message);
  CTS_ASSERT_EQ_U64(d.nallocs, allocs);
  CTS_ASSERT_EQ_U64(d.ncollects, collects);
  CTS_ASSERT(!d.collected_twice && !d.time_backwards && d.truncated_packets == 0);
  decoded_fini(&d);
}

/* The first line of /proc/PID/FILE, or "" (a process that is gone). */
static void proc_line(int pid, const char *file, char *buf, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
  buf[0] = '\0';
  FILE *const f = fopen(path, "r");
  if (!f) return;
  if (!fgets(buf, (int)size, f)) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

/* Field 6 of /proc/PID/stat: the session id (after the command's closing parenthesis). */
static long session_of(int pid) {
  char stat[512];
  proc_line(pid, "stat", stat, sizeof stat);
  const char *const close_paren = strrchr(stat, ')');
  long fields[4] = {0};
  if (!close_paren ||
      sscanf(close_paren + 2, "%*c %ld %ld %ld", &fields[0], &fields[1], &fields[2]) != 3)
    return -1;
  return fields[2];
}

static bool thread_named(const char *name) {
  DIR *const d = opendir("/proc/self/task");
  if (!d) return false;
  bool found = false;
  for (struct dirent *e; !found && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *const f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f)) found = strncmp(comm, name, strlen(name)) == 0;
    fclose(f);
  }
  closedir(d);
  return found;
}

/* Waits (up to 5 s) until process `pid` is gone, or no longer the writer process. */
static bool writer_gone_within_5s(int pid) {
  for (int i = 0; i < 500; i++) {
    char comm[64];
    proc_line(pid, "comm", comm, sizeof comm);
    if (strcmp(comm, "ctfscope-writer") != 0) return true;
    const struct timespec step = {0, 10000000L};
    nanosleep(&step, NULL);
  }
  return false;
}

static void allocate_and_free(uint64_t first, uint64_t n) {
  for (uint64_t i = first; i < first + n; i++) cts_tracer_track_alloc(fake_ptr(i), 8 + i % 3000);
  for (uint64_t i = first; i < first + n; i += 2) cts_tracer_track_free(fake_ptr(i));
}

/* The program's minor page faults while cts_tracer_start runs (its result in *e). */
static long faults_of_start(const char *path, int *e) {
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  cfg.writer = CTS_TRACER_WRITER_PROCESS;
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = path;
  *e = cts_tracer_start(&cfg, &sink);
  getrusage(RUSAGE_SELF, &after);
  return after.ru_minflt - before.ru_minflt;
}

/* Guard for every traced image's start-up (bench/README.md, the exec chain): a session's
 * start touches only the pages it uses. Clearing the memtrace writer's 440 KB state and the
 * 64 KB of sampled-block slots wrote ~125 fresh pages, a fault each, in every image (0.3-0.8
 * ms of CPU). First in this file: its first session is this process's first. The second
 * session reuses the memory (dropped with MADV_DONTNEED, not cleared). */
/* ThreadSanitizer maps shadow memory for every page the program touches, so its fault
 * counts say nothing about ours. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

CTS_TEST(session_start_touches_few_pages) {
#ifdef UNDER_TSAN
  CTS_SKIP("page faults are ThreadSanitizer's here (shadow memory)");
#endif
  for (int s = 0; s < 2; s++) {
    char path[256];
    temp_path(path, sizeof path, s ? "faults2" : "faults1");
    int e;
    const long faults = faults_of_start(path, &e);
    CTS_ASSERT_EQ_INT(e, 0);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    check_trace(path, 0, 0);
    unlink(path);
    CTS_ASSERT_MSG(faults <= 70, "session %d: %ld page faults at start (at most 70)", s, faults);
    printf("session %d: %ld page faults at start\n", s, faults);
  }
}

CTS_TEST(file_sink_through_a_writer_process_is_exact) {
  char path[256];
  temp_path(path, sizeof path, "exact");
  CTS_ASSERT_EQ_INT(start_process_writer(path, CTS_TRACER_UNWIND_FRAME_POINTER), 0);
  const int pid = cts__tracer_writer_pid();
  CTS_ASSERT_MSG(pid > 0, "the session has a writer thread, not a process");
  char comm[64];
  proc_line(pid, "comm", comm, sizeof comm);
  CTS_ASSERT_STR_EQ(comm, "ctfscope-writer");
  CTS_ASSERT(!thread_named("ctfscope-writer"));
  /* Nobody's child, in a session of its own (its intermediate process's: not a leader). */
  CTS_ASSERT(waitpid(pid, NULL, WNOHANG) == -1 && errno == ECHILD);
  CTS_ASSERT(session_of(pid) != session_of(getpid()) && session_of(pid) != pid);

  allocate_and_free(0, 5000);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), 0);
  check_trace(path, 5000, 2500); /* while tracing goes on */

  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  CTS_ASSERT_EQ_INT(cts__tracer_writer_pid(), 0);
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_U64(st.samples, 5000);
  CTS_ASSERT_EQ_U64(st.collects, 2500);
  CTS_ASSERT_EQ_INT(st.error, 0);
  struct stat sb;
  CTS_ASSERT(stat(path, &sb) == 0);
  CTS_ASSERT_EQ_U64(st.bytes_written, (uint64_t)sb.st_size);
  check_trace(path, 5000, 2500);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_EQ_U64(d.pid, (uint64_t)getpid()); /* the program's, not the writer's */
  for (size_t i = 0; i < d.nallocs; i++) {
    CTS_ASSERT_EQ_U64(d.allocs[i].id, i);
    CTS_ASSERT_EQ_U64(d.allocs[i].length, (8 + i % 3000 + 7) / 8);
  }
  for (size_t i = 0; i < d.ncollects; i++) CTS_ASSERT_EQ_U64(d.collects[i], 2 * i);
#ifdef CTS_TEST_HAVE_LIBDW
  /* Resolved in the writer process, from the program's modules. */
  const char *const site = decoded_function(&d, d.allocs[0].innermost);
  CTS_ASSERT_MSG(site && strcmp(site, "allocate_and_free") == 0, "site %s", site ? site : "(none)");
#endif
  decoded_fini(&d);
  CTS_ASSERT_MSG(writer_gone_within_5s(pid), "writer process %d still there", pid);
  unlink(path);
}

CTS_TEST(each_session_gets_its_own_writer_process) {
  const size_t rings = cts__tracer_ring_count();
  int pids[2];
  for (int s = 0; s < 2; s++) {
    char path[256];
    temp_path(path, sizeof path, s ? "second" : "first");
    CTS_ASSERT_EQ_INT(start_process_writer(path, CTS_TRACER_UNWIND_NONE), 0);
    pids[s] = cts__tracer_writer_pid();
    CTS_ASSERT(pids[s] > 0);
    allocate_and_free(0, 100 + (uint64_t)s);
    CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
    check_trace(path, 100 + (uint64_t)s, 50 + (uint64_t)s); /* its ids from 0 again */
    unlink(path);
  }
  CTS_ASSERT(pids[0] != pids[1]);
  CTS_ASSERT_EQ_U64(cts__tracer_ring_count(), rings); /* this thread's ring, reused */
}

/* A killed writer process: the program's threads, waiting for ring space, see it gone
 * within WRITER_CHECK_MS, tracing stops, and the program runs on. */
CTS_TEST(killed_writer_process_stops_tracing_not_the_program) {
  char path[256];
  temp_path(path, sizeof path, "killed_writer");
  CTS_ASSERT_EQ_INT(start_process_writer(path, CTS_TRACER_UNWIND_NONE), 0);
  const int pid = cts__tracer_writer_pid();
  CTS_ASSERT(pid > 0);
  CTS_ASSERT_EQ_INT(kill(pid, SIGKILL), 0);
  /* Far more records than a ring holds: lossless, so the thread waits, then gives up. */
  for (uint64_t i = 0; i < 200000; i++) cts_tracer_track_alloc(fake_ptr(i), 64);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), CTS_E_STATE);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), -ESRCH);
  cts_tracer_stats_t st;
  cts_tracer_get_stats(&st);
  CTS_ASSERT_EQ_INT(st.error, -ESRCH);
  CTS_ASSERT(st.samples < 200000);
  unlink(path);
}

/* A sink error in the writer process (a pipe nobody reads any more) reaches the program:
 * flush and stop report it. The writer process takes no signals, so no SIGPIPE kills it. */
CTS_TEST(sink_error_in_the_writer_process_reaches_the_program) {
  int p[2];
  CTS_ASSERT(pipe(p) == 0);
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FD);
  sink.fd = p[1];
  CTS_ASSERT_EQ_INT(start_process_writer_into(&sink, CTS_TRACER_UNWIND_NONE), 0);
  CTS_ASSERT(cts__tracer_writer_pid() > 0);
  close(p[0]);
  for (uint64_t i = 0; i < 1000; i++) cts_tracer_track_alloc(fake_ptr(i), 64);
  CTS_ASSERT_EQ_INT(cts_tracer_flush(), -EPIPE);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), -EPIPE);
  close(p[1]);
}

/* A forked child is not traced by its parent's session: it lets go of the writer process
 * (whose pipe it closes) and of the shared rings, and may trace itself with its own. */
CTS_TEST(forked_child_lets_go_of_the_writer_process) {
  char parent_path[256], child_path[256];
  temp_path(parent_path, sizeof parent_path, "parent");
  temp_path(child_path, sizeof child_path, "child");
  CTS_ASSERT_EQ_INT(start_process_writer(parent_path, CTS_TRACER_UNWIND_NONE), 0);
  const int parent_writer = cts__tracer_writer_pid();
  allocate_and_free(0, 100);
  fflush(NULL);
  const pid_t child = fork();
  if (child == 0) {
    int code = 0;
    if (cts_tracer_is_active()) code = 1;
    if (!code && start_process_writer(child_path, CTS_TRACER_UNWIND_NONE) != 0) code = 2;
    const int own = cts__tracer_writer_pid();
    if (!code && (own <= 0 || own == parent_writer)) code = 3;
    allocate_and_free(1000, 50);
    if (!code && cts_tracer_stop() != 0) code = 4;
    _exit(code);
  }
  CTS_ASSERT(child > 0);
  int status = 0;
  CTS_ASSERT(waitpid(child, &status, 0) == child);
  CTS_ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  allocate_and_free(100, 100);
  CTS_ASSERT_EQ_INT(cts_tracer_stop(), 0);
  check_trace(parent_path, 200, 100);
  check_trace(child_path, 50, 25);
  decoded_t d;
  decoded_from_file(&d, child_path);
  CTS_ASSERT_EQ_U64(d.pid, (uint64_t)child);
  decoded_fini(&d);
  unlink(parent_path);
  unlink(child_path);
}

/* Waits (up to 5 s) until no writer process holds the flock of the trace at `path`. */
static bool writer_lets_go_within_5s(const char *path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool unlocked = false;
  for (int i = 0; i < 500 && !unlocked; i++) {
    unlocked = flock(fd, LOCK_SH | LOCK_NB) == 0;
    const struct timespec step = {0, 10000000L};
    if (!unlocked) nanosleep(&step, NULL);
  }
  close(fd);
  return unlocked;
}

/* Runs a program (a child) that traces 3000 allocations (half of them freed) into `path`
 * through a writer process, at zstd level `compress_level` (0: plain), waits `pause_ms`
 * and is killed; returns once its writer process let go of the file. */
static void run_killed_program(const char *path, int compress_level, long pause_ms) {
  unlink(path);
  fflush(NULL);
  const pid_t child = fork();
  if (child == 0) {
    cts_tracer_config_t cfg;
    cts_tracer_config_init(&cfg);
    cfg.sample_rate = 1.0;
    cfg.unwind = CTS_TRACER_UNWIND_NONE;
    cfg.writer = CTS_TRACER_WRITER_PROCESS;
    cfg.compress_level = compress_level;
    cts_tracer_sink_t sink;
    cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
    sink.path = path;
    if (cts_tracer_start(&cfg, &sink) != 0) _exit(1);
    allocate_and_free(0, 3000);
    const struct timespec pause = {0, pause_ms * 1000000L};
    nanosleep(&pause, NULL);
    raise(SIGKILL);
    _exit(2);
  }
  CTS_ASSERT(child > 0);
  int status = 0;
  CTS_ASSERT(waitpid(child, &status, 0) == child);
  CTS_ASSERT_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
  CTS_ASSERT_MSG(writer_lets_go_within_5s(path), "the writer process still holds %s after 5 s",
                 path);
}

/* A program killed before any flush: its writer process still holds the rings, writes
 * every record and closes the trace, then lets go of the file's flock. */
CTS_TEST(writer_process_finishes_the_trace_of_a_killed_program) {
  char path[256];
  temp_path(path, sizeof path, "killed_program");
  run_killed_program(path, 0, 0);
  check_trace(path, 3000, 1500);
  unlink(path);
}

/* The same with compression: the writer process ends the zstd frame for the killed
 * program (zstd(1) checks it whole), and the trace ends when the program was seen gone,
 * not at its last event. */
CTS_TEST(writer_process_finishes_the_compressed_trace_of_a_killed_program) {
  char path[256];
  temp_path(path, sizeof path, "killed_compressed");
  run_killed_program(path, 1, 300);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "zstd -q -t %s", path);
  CTS_ASSERT_EQ_INT(system(cmd), 0);
  check_trace(path, 3000, 1500);
  decoded_t d;
  decoded_from_file(&d, path);
  CTS_ASSERT_MSG(d.end_time >= d.last_time + 300000, "end %llu, last event %llu",
                 (unsigned long long)d.end_time, (unsigned long long)d.last_time);
  decoded_fini(&d);
  unlink(path);
}

/* A session started through the API from a thread other than the main one forks its writer
 * from that thread: the writer process ran its loop (libdw's symbolizer, the memtrace
 * writer) on what was left of that thread's stack, whatever RLIMIT_STACK said
 * (cts__call_with_stack_room looked at the limit only). A thread with a small stack (glibc
 * takes the size as given, a guard page under it) starts a session with a writer process and
 * the mixed unwinder (symbolised: libdw on the writer), records, stops: the trace is
 * complete. 32 KiB: at 64 KiB main's writer died in 1 run of 5 (as its packets came: libdw's
 * symbolisation is the deepest), at 32 KiB in every run. Main (f51ae45): the trace broken
 * in 10 runs of 10 (its writer process died while writing: "event time ... is after its
 * packet's end"; checked: fails). */
#define SMALL_THREAD_STACK (32u * 1024u)

typedef struct {
  const char *path;
  int started, stopped;
  cts_tracer_stats_t stats;
} small_thread_session_t;

static void *small_thread_session(void *arg) {
  small_thread_session_t *const s = arg;
  s->started = start_process_writer(s->path, CTS_TRACER_UNWIND_MIXED);
  if (s->started != 0) return NULL;
  allocate_and_free(0, 3000);
  s->stopped = cts_tracer_stop();
  cts_tracer_get_stats(&s->stats);
  return NULL;
}

/* Under a sanitizer the tracer's side stack is off (side_stack.h) and frames are larger:
 * the session's start alone takes more than such a thread has. */
#if defined(__SANITIZE_ADDRESS__) || defined(UNDER_TSAN)
#define UNDER_A_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_A_SANITIZER 1
#endif
#endif

CTS_TEST(session_started_from_a_thread_with_a_small_stack_is_complete) {
#ifdef UNDER_A_SANITIZER
  CTS_SKIP("under a sanitizer: no side stack, larger frames");
#endif
  small_thread_session_t s = {.started = -1, .stopped = -1};
  char path[256];
  temp_path(path, sizeof path, "small_thread");
  s.path = path;
  pthread_attr_t attr;
  CTS_ASSERT_EQ_INT(pthread_attr_init(&attr), 0);
  CTS_ASSERT_EQ_INT(pthread_attr_setstacksize(&attr, SMALL_THREAD_STACK), 0);
  pthread_t th;
  CTS_ASSERT_EQ_INT(pthread_create(&th, &attr, small_thread_session, &s), 0);
  pthread_attr_destroy(&attr);
  CTS_ASSERT_EQ_INT(pthread_join(th, NULL), 0);
  CTS_ASSERT_EQ_INT(s.started, 0);
  CTS_ASSERT_MSG(s.stopped == 0 && s.stats.error == 0, "stop %d, error %d", s.stopped,
                 s.stats.error);
  check_trace(path, 3000, 1500);
  unlink(path);
}

CTS_TEST_MAIN()
