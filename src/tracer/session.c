/* SPDX-License-Identifier: MIT */
/* Sessions: starting one (configuration, the sink, the memtrace writer, the writer thread
 * or process) and stopping it, under the control mutex; what the TCP_LISTEN service uses
 * (session.h); forgetting the parent's session in a forked child. Part cts__session. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/single_threaded.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/tasks.h>

#include "os/os.h"
#include "session.h"
#include "side_stack.h"
#include "lazylib.h"
#include "tracer_state.h"

/* Whether the session's unwinder may call libunwind (lazylib.h). */
static bool walks_need_libunwind(void) {
  const cts_tracer_unwind_t unwind = SAMPLER_GET(unwind);
  return unwind == CTS_TRACER_UNWIND_MIXED || unwind == CTS_TRACER_UNWIND_LIBUNWIND;
}

/* tracer_internal.h. */
void cts__tracer_before_thread(void) {
  /* Only before the second thread: with threads already there, a dlopen here (wherever the
   * program calls pthread_create, perhaps holding its own locks) could wait for another
   * thread inside the loader that waits for one of those locks. Walks then do without. */
  if (__libc_single_threaded && atomic_load_explicit(&cts__tracer_active, memory_order_acquire))
    cts__unw_prepare(walks_need_libunwind(), true);
}

static uint64_t realtime_ns(void *user_data) {
  (void)user_data;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cts__tsc_usable_known = -1;

_Atomic int cts__lazy_writer;

cts__session_t cts__session = {
    .control = PTHREAD_MUTEX_INITIALIZER,
    .once = PTHREAD_ONCE_INIT,
};

static bool allocate_memory(void) {
  if (!cts__writer_memory()) return false;
  if (!cts__side_reset()) return false;
  /* Only sessions mark slots: before the first, the array is still all zero, and storing
   * zeros would fault in each of its 16 pages. */
  if (cts__session.session != 0)
    for (size_t i = 0; i < CTS__SLOT_COUNT; i++)
      atomic_store_explicit(&cts__sampled_slots[i], 0, memory_order_relaxed);
  return true;
}

/* tracer_state.h. */
void cts__session_writer_config(cts_mt_writer_config_t *wc, uint64_t start_us, uint64_t pid) {
  cts_mt_writer_config_init(wc);
  wc->version = 2;
  wc->sample_rate = SAMPLER_GET(rate);
  wc->word_size = 64;
  wc->executable_name = cts__session.exe;
  wc->host_name = cts__session.host;
  wc->runtime_params = "";
  wc->context = cts__session.context;
  wc->pid = pid;
  wc->max_backtrace_frames = REC_FRAMES_MAX; /* and a cut's marker */
  wc->write = cts__sink_write;
  wc->clock = cts__session.clock;
  wc->clock_user_data = cts__session.clock_user_data;
  wc->resolve = cts__resolve_code;        /* loss markers are named even without libdw */
  wc->encoding = CTS_MT_ENCODING_COMPACT; /* smaller traces; every memtrace reader reads them */
  wc->start_time_us = start_us;
}

bool cts__config_ok(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink) {
  if (!cfg || !sink || cfg->struct_size < sizeof *cfg || sink->struct_size < sizeof *sink)
    return false;
  /* Compression is for files and callbacks: the collector and `fetch` take plain memtrace. */
  const bool tcp =
      sink->kind == CTS_TRACER_SINK_TCP_CONNECT || sink->kind == CTS_TRACER_SINK_TCP_LISTEN;
  if (cfg->compress_level < 0 || cfg->compress_level > CTS__ZSINK_LEVEL_MAX ||
      (cfg->compress_level && tcp))
    return false;
  return cfg->sample_rate > 0.0 && cfg->sample_rate <= 1.0 && cfg->max_frames <= MAX_FRAMES_LIMIT;
}

/* Starts a session (a trace with its writer thread) into `sink`, or into the connected
 * socket `socket_fd` when it is >= 0 (taken over: closed at the end of the session, or at
 * once on failure). Control lock held. */
/* ---- Seccomp filters and the lazy writer's spawn ------------------------------------- */

/* The seccomp filters a lazy session started under: SECCOMP_NONE, or their count
 * (/proc/self/status, Linux 5.9+), or SECCOMP_COUNT_UNKNOWN. A program that installs a
 * filter by the seccomp system call (the preload sees only prctl's) may forbid the spawn's
 * clone and exec, and kill itself at its first sample; but the filters it was started
 * under are a container's or a service manager's (Docker, podman, systemd's
 * SystemCallFilter), which let it make processes: those alone must not stop tracing. */
#define SECCOMP_NONE           (-1L)
#define SECCOMP_COUNT_UNKNOWN  (-2L)
#define SECCOMP_STATUS_REFUSED (-3L) /* /proc/self/status refused: EACCES, EPERM */
static long seccomp_at_start = SECCOMP_NONE;

/* /proc/self/status into buf (NUL-terminated); the open's -errno if it cannot be opened.
 * No allocation: called from inside the allocator. */
static long read_own_status(char *buf, size_t size) {
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t len = 0;
  for (ssize_t n; len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return (long)len;
}

/* The number after `field` ("\nName:") in a status text, or -1. */
static long status_number(const char *status, const char *field) {
  const char *const line = strstr(status, field);
  if (!line) return -1;
  const char *p = line + strlen(field);
  while (*p == ' ' || *p == '\t') p++;
  if (*p < '0' || *p > '9') return -1;
  long n = 0;
  for (; *p >= '0' && *p <= '9' && n < 1000000; p++) n = n * 10 + (*p - '0');
  return n;
}

/* The number of seccomp filters in force (the Seccomp_filters line of /proc/self/status),
 * or SECCOMP_COUNT_UNKNOWN. No allocation: called from inside the allocator. */
static long seccomp_filter_count(void) {
  char buf[4096];
  if (read_own_status(buf, sizeof buf) < 0) return SECCOMP_COUNT_UNKNOWN;
  const long count = status_number(buf, "\nSeccomp_filters:");
  return count < 0 ? SECCOMP_COUNT_UNKNOWN : count;
}

/* The filters now, as seccomp_at_start counts them. One prctl when there are none. */
static long seccomp_filters_now(void) {
  return syscall(SYS_prctl, PR_GET_SECCOMP) == SECCOMP_MODE_FILTER ? seccomp_filter_count()
                                                                   : SECCOMP_NONE;
}

/* The filters at a lazy session's start: seccomp_filters_now, but without its prctl when
 * the image knows a filter is in force (cts__seccomp_in_force: the filter may kill on
 * prctl); a filter found is remembered for the images it execs. */
static long seccomp_filters_at_start(void) {
  const long count = __atomic_load_n(&cts__seccomp_in_force, __ATOMIC_RELAXED)
                         ? seccomp_filter_count()
                         : seccomp_filters_now();
  if (count != SECCOMP_NONE) __atomic_store_n(&cts__seccomp_in_force, true, __ATOMIC_RELAXED);
  return count;
}

/* The filters at the first sample, as seccomp_filters_now counts them, but asked of
 * /proc/self/status alone (its Seccomp and Seccomp_filters lines): the program may have
 * installed a filter by a call the preload does not see (a raw system call), and the
 * question must be one that filters rarely kill on. prctl(PR_GET_SECCOMP) is not: a filter
 * of a short allow list kills every other call, Chromium's traps unknown prctl options, and
 * such a program was killed at its first sample. Sandboxes answer an open they refuse with
 * EACCES or EPERM: a filter is taken to be in then. Where there is no /proc (a chroot),
 * prctl, as before. */
static long seccomp_filters_at_first_sample(void) {
  char buf[4096];
  const long got = read_own_status(buf, sizeof buf);
  if (got == -EACCES || got == -EPERM) return SECCOMP_STATUS_REFUSED;
  if (got < 0) return seccomp_filters_now();
  const long mode = status_number(buf, "\nSeccomp:");
  if (mode < 0) return seccomp_filters_now(); /* a kernel without the line */
  if (mode != SECCOMP_MODE_FILTER) return mode == 0 ? SECCOMP_NONE : SECCOMP_COUNT_UNKNOWN;
  const long count = status_number(buf, "\nSeccomp_filters:");
  return count < 0 ? SECCOMP_COUNT_UNKNOWN : count;
}

/* Whether a filter came since the session started that the preload did not see (a prctl
 * one, or one by libc's syscall(), made the writer first: cts__tracer_before_confinement).
 * Unknown counts on both sides (a kernel before 5.9) are taken for the filters of the
 * start; an unknown count where there was no filter at the start is a filter, and so is a
 * refused status. */
static bool seccomp_filter_installed_since_start(void) {
  const long now = seccomp_filters_at_first_sample();
  if (now == SECCOMP_NONE) return false;
  __atomic_store_n(&cts__seccomp_in_force, true, __ATOMIC_RELAXED); /* for the images exec'd */
  if (now == SECCOMP_STATUS_REFUSED) return true;
  if (seccomp_at_start == SECCOMP_NONE) return true;
  return now != SECCOMP_COUNT_UNKNOWN && seccomp_at_start != SECCOMP_COUNT_UNKNOWN &&
         now > seccomp_at_start;
}

/* cts__tsc_usable_known from /proc/cpuinfo (cts_os_tsc_usable). On the side stack: it
 * reads the file into a 32 KiB buffer on its stack, and a session starts on the program's
 * (the preload's constructor, on the main thread's, whose size `ulimit -s` sets; the API's
 * caller, on any thread's): a program run with `ulimit -s 48` (KiB) was fine untraced and
 * died by SIGSEGV at its start when traced. */
static void learn_whether_tsc_usable(void *unused) {
  (void)unused;
  cts__tsc_usable_known = cts_os_tsc_usable();
}

/* cts__session_start_locked, its descriptors set aside in `aside` (the caller ends it). */
static int start_locked(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                        int socket_fd, cts_fd_aside_t *aside) {
  if (!cts__config_ok(cfg, sink) || cts__session.session_running || !cts__session.ready ||
      !allocate_memory()) {
    const int e = !cts__config_ok(cfg, sink)     ? CTS_E_INVAL
                  : cts__session.session_running ? CTS_E_STATE
                  : !cts__session.ready          ? CTS_E_STATE
                                                 : CTS_E_NOMEM;
    if (socket_fd >= 0) close(socket_fd);
    return e;
  }

  /* The writer process needs the shared mapping; without it, a writer thread. A lazy one
   * (writer_process.c) needs the mapping from a memfd. */
  const pid_t pid = getpid(); /* once: the session, the writer's fit (pid 1) */
  const bool process_fits = cts__process_writer_fits(cfg, sink, socket_fd, pid);
  const bool lazy =
      process_fits && cts__lazy_writer_fits(cfg, sink) && cts__shared_mapping(true, aside);
  if (lazy) seccomp_at_start = seccomp_filters_at_start();
  cts__session.writer_process = lazy || (process_fits && cts__shared_mapping(false, aside));
  cts__session.cfg = *cfg;
  cts__sink.sink = *sink;
  cts__copy_string(cts__session.context, sizeof cts__session.context, cfg->context);
  cts__sampler_configure(cfg);
  /* Atomic stores: see cts__event_time. */
  __atomic_store_n(&cts__session.clock, sink->clock ? sink->clock : cts__wall_clock_us,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&cts__session.clock_user_data, sink->clock ? sink->clock_user_data : NULL,
                   __ATOMIC_RELAXED);
  if (CTS_HAVE_CPU_COUNTER && !sink->clock && cts__tsc_usable_known < 0)
    cts__call_on_side_stack(learn_whether_tsc_usable, NULL);
  cts__walk_stack_prepare(); /* (a thread's first sample when the side stack is taken) */
  __atomic_store_n(&cts__session.tsc_mode,
                   CTS_HAVE_CPU_COUNTER && !sink->clock && cts__tsc_usable_known > 0,
                   __ATOMIC_RELAXED);
  cts__writer_clock_start();
  if (cfg->executable_name) {
    cts__copy_string(cts__session.exe, sizeof cts__session.exe, cfg->executable_name);
  } else {
    const ssize_t n = readlink("/proc/self/exe", cts__session.exe, sizeof cts__session.exe - 1);
    cts__session.exe[n > 0 ? n : 0] = '\0';
  }
  if (gethostname(cts__session.host, sizeof cts__session.host) != 0) cts__session.host[0] = '\0';
  cts__session.host[sizeof cts__session.host - 1] = '\0';

  atomic_store_explicit(&cts__ctl->stopping, false, memory_order_relaxed);
  atomic_store(&cts__ctl->stalled, false);
  atomic_store(&cts__ctl->stall_reported, false);
  atomic_store(&cts__ctl->loss_noted, false);
  int e = cts__open_sink(sink, socket_fd, aside);
  /* The program's own limit back before anything else runs (the writer's spawn). */
  cts_fd_aside_end(aside);
  if (e) return e;
  if (cfg->compress_level) {
    cts__sink.zsink = cts__zsink_open(cfg->compress_level, cts__raw_write, NULL);
    if (!cts__sink.zsink) {
      cts__close_sink();
      return CTS_E_NOMEM;
    }
  }
  cts__sink.bytes_written = 0;
  const uint64_t start = cts__session.clock(cts__session.clock_user_data);
  cts__session_writer_config(&cts__session.wc, start, (uint64_t)pid);
  cts_mt_writer_config_t wc = cts__session.wc;
  e = cts__writer_init(&wc);
  /* The trace-info packet reaches the file now, as it does uncompressed. */
  if (!e && cts__sink.zsink) e = cts__zsink_flush(cts__sink.zsink);
  if (e) {
    cts__close_sink();
    return e;
  }
  cts__session.header_bytes = cts__sink.bytes_written;

  cts__ctl_lock();
  const unsigned session = cts__session.session % 0x7FFFFFFFu + 1u; /* never 0 */
  CTS_ASSERT(session != 0 && !cts__session.session_running);
  cts__session.session_bits = session & CTS__TRACER_SESSION_MASK;
  atomic_store(&cts__ctl->next_id, cts__session.session_bits << ID_BITS);
  cts__ctl->gave_up = 0;
  cts__writer_reset(start);
  cts__ctl->wake_requested = cts__ctl->stop_requested = false;
  atomic_store(&cts__ctl->writer_polling, false); /* a new writer: threads wake it at first */
  cts__ctl->flush_requested = cts__ctl->flush_done = 0;
  cts__ctl->end_time = 0;
  atomic_store(&cts__ctl->failed, false);
  atomic_store(&cts__ctl->exec_pending, false);
  memset(&cts__ctl->stats, 0, sizeof cts__ctl->stats);
  cts__ring_counts(&cts__session.base);
  cts__ctl->stats.bytes_written = cts__sink.bytes_written;
  cts__ctl->thread_running = true;
  cts__ctl_unlock();
  /* Task tracing in this process (the linked APIs, or the preload's): what aligns its
   * trace with this one, when this one's times are CLOCK_REALTIME (docs/formats/mprof.md
   * §14.2). */
  if (CTS__TASK_ON() && cts__session.clock == cts__wall_clock_us)
    cts_task_clock_anchor((int64_t)pid, realtime_ns, NULL);

  /* A writer process if it fits and can be made, else a writer thread; a lazy one is made
   * at the first sample (cts__lazy_writer_start), if ever. */
  atomic_store(&cts__lazy_writer, lazy ? CTS__LAZY_WAITING : CTS__LAZY_NONE);
  if (!lazy && cts__session.writer_process && cts__spawn_writer_process() != 0)
    cts__session.writer_process = false;
  /* libunwind is bound at the first walk that needs it only while the process has one
   * thread (lazylib.h): with a writer thread coming, or threads already there, now. */
  cts__unw_prepare(walks_need_libunwind(), !cts__session.writer_process);
  if (!cts__session.writer_process) {
    /* The writer thread takes no signals: they belong to the program's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    e = pthread_create(&cts__writer.thread, NULL, cts__writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
      cts__ctl->thread_running = false;
      cts__close_sink();
      return -e;
    }
    pthread_setname_np(cts__writer.thread, "ctfscope-writer");
  }
  /* Sampling starts at once: the writer's one-off work (calibrating the time-stamp counter,
   * reading the module list) is done when it first needs it, while the program runs; a
   * program that fills a ring meanwhile waits for it there, as it would have here, and one
   * that does not (every program at the default rate) never waits. Waiting here cost every
   * traced image 70-120 ms. A writer process that is already gone is noticed at once. */
  cts__ctl_lock();
  const bool writer_lost =
      !cts__ctl->thread_running || (cts__session.writer_process && cts__writer_process_gone());
  cts__ctl_unlock();
  if (writer_lost) {
    cts__forget_writer_process();
    cts__close_sink();
    return -ESRCH;
  }
  cts__session.session = session;
  atomic_store_explicit(&cts__sampler.thread_seeds, 0, memory_order_relaxed);
  cts__session.session_running = true;
  atomic_store_explicit(&cts__tracer_active, (int)cts__session.session, memory_order_release);
  return 0;
}

/* tracer_state.h. The session's descriptors (the rings' memfd, the trace file or socket)
 * are set aside in one batch: the descriptor limit read once, raised and put back once. */
int cts__session_start_locked(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int socket_fd) {
  cts_fd_aside_t aside = {0};
  const int e = start_locked(cfg, sink, socket_fd, &aside);
  cts_fd_aside_end(&aside);
  return e;
}

/* The end of a session that made no writer process (the lazy writer): the program writes
 * the last packet, as the writer would have, and closes the file. A few system calls. */
static int stop_alone(void) {
  atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
  cts__ctl_lock();
  const bool running = cts__ctl->thread_running; /* false: ended at a failed spawn or exec */
  cts__ctl_unlock();
  if (running) cts__writer_close_alone(cts__event_time());
  cts__close_sink();
  cts__session.session_running = false;
  cts__tsc_usable_known = -1; /* tracer_internal.h */
  atomic_store(&cts__lazy_writer, CTS__LAZY_NONE);
  cts__ctl_lock();
  const int e = cts__ctl->stats.error;
  cts__ctl_unlock();
  return e;
}

/* A writer process being made (cts__lazy_writer_start, in another thread) is waited for:
 * the spawn takes well under a millisecond, and nothing it does waits on the caller. */
static void wait_while_writer_spawns(void) {
  while (atomic_load(&cts__lazy_writer) == CTS__LAZY_SPAWNING) sched_yield();
}

/* No writer process made yet: none will be, and the program ends the trace itself. False
 * when one is made, being made, or the session's end was already claimed. */
static bool claim_end_alone(void) {
  int waiting = CTS__LAZY_WAITING;
  return atomic_compare_exchange_strong(&cts__lazy_writer, &waiting, CTS__LAZY_FINISHED);
}

/* Stops the running session: sampling ends, the writer thread writes what is queued,
 * flushes and exits, the sink is closed. Control lock held. */
int cts__session_stop_locked(void) {
  CTS_ASSERT(cts__session.session_running);
  /* No writer process made: none will be (a sample from now on is dropped as after any
   * stop), and the program ends the trace. One being made is waited for. */
  (void)claim_end_alone();
  wait_while_writer_spawns();
  if (atomic_load(&cts__lazy_writer) == CTS__LAZY_FINISHED) return stop_alone();
  cts__ctl_lock();
  atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
  atomic_store_explicit(&cts__ctl->stopping, true, memory_order_relaxed);
  cts__ctl->stop_requested = true;
  cts__ctl->end_time = cts__event_time(); /* the trace's end (tracer.h, "Events") */
  cts__ctl_wake(&cts__ctl->writer_wake, false);
  cts__ctl_wake(&cts__ctl->progress, true); /* threads waiting for queue space give up */
  if (cts__session.writer_process)
    while (cts__ctl->thread_running) cts__wait_progress(NULL);
  cts__ctl_unlock();
  if (cts__session.writer_process)
    cts__forget_writer_process();
  else
    pthread_join(cts__writer.thread, NULL);
  cts__report_stall();
  cts__close_sink();
  cts__session.session_running = false;
  cts__tsc_usable_known = -1; /* tracer_internal.h */
  cts__ctl_lock();
  const int e = cts__ctl->stats.error;
  cts__ctl_unlock();
  return e;
}

/* tracer_state.h. The first thread to claim a ring makes the writer process; the others
 * go on (their records wait in their rings for it). If it cannot be made, sampling stops
 * and the session's error says so; the program still ends the trace at its end
 * (stop_alone), with the end time. */
void cts__lazy_writer_start(void) {
  int waiting = CTS__LAZY_WAITING;
  if (!atomic_compare_exchange_strong(&cts__lazy_writer, &waiting, CTS__LAZY_SPAWNING)) return;
  /* Not cancelled half-way (a close in the spawn is a cancellation point): the first sample
   * may come from a cancellable thread, and so may a close of the program's. */
  int cancel_state;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  /* A seccomp filter the program installed by a call the preload does not see (libseccomp's
   * raw seccomp system call) may kill the program at the spawn's clone or exec
   * (SECCOMP_RET_KILL_PROCESS, as sandboxes forbid new processes): the program must live.
   * Not the filters it started under (a container's): seccomp_at_start. */
  const bool under_seccomp = seccomp_filter_installed_since_start();
  const int e = under_seccomp ? -EPERM : cts__spawn_writer_exec();
  pthread_setcancelstate(cancel_state, NULL);
  if (e) {
    atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
    cts__ctl_lock();
    if (!cts__ctl->stats.error) cts__ctl->stats.error = e == -EBADF || under_seccomp ? e : -ESRCH;
    atomic_store(&cts__ctl->failed, true);
    cts__ctl_unlock();
    /* Said where the user sees it: record's notes pipe went with the descriptors, and the
     * trace (its header, and its end written by the program) cannot tell a loss. */
    if (e == -EBADF)
      cts__tracer_log(&cts__sink.sink,
                      "tracing stopped at the first sample: the program had closed the "
                      "tracer's descriptors by a call the preload does not see (a raw "
                      "close_range system call?); the trace holds no sample");
    else if (under_seccomp)
      cts__tracer_log(&cts__sink.sink,
                      "tracing stopped at the first sample: the program had installed a seccomp "
                      "filter by a call the preload does not see (a raw seccomp system call), "
                      "which could kill it as the writer process was made; the trace holds no "
                      "sample");
    else
      cts__tracer_log(&cts__sink.sink,
                      "the writer process could not be made (%s): tracing stopped at the first "
                      "sample; the trace holds no sample",
                      strerror(-e));
  }
  atomic_store(&cts__lazy_writer, e ? CTS__LAZY_FINISHED : CTS__LAZY_SPAWNED);
}

/* A waiting lazy session's writer process made now, before the program takes away what
 * making it needs (its descriptors, the clone and exec system calls), rather than at its
 * first sample. Not in a vfork'd child sharing the program's memory (and this state) with
 * a descriptor table of its own: the session's pid is the program's. Returns once a writer
 * holds the session (or none could be made: the session's error says so); errno kept. */
static void make_the_lazy_writer_now(void) {
  if ((uint64_t)getpid() != cts__session.wc.pid) return;
  const int saved = errno;
  cts__guard_enter();
  cts__lazy_writer_start();
  /* Another thread's first sample may be making it: its copies must exist before ours go. */
  wait_while_writer_spawns();
  cts__guard_leave();
  errno = saved;
}

/* tracer_internal.h. The spawn's clones copy the descriptor table: the writer's copies of
 * the memfd, the trace file and record's notes pipe outlive the program's. Their numbers are the
 * session's (fixed while it waits), compared before the spawn checks them (cts_fd_still). */
void cts__tracer_before_fds_close(unsigned first, unsigned last) {
  if (cts__guarded()) return; /* the tracer's own closes: never the session's descriptors */
  /* record's notes pipe too: the writer keeps a copy of it (tracer_internal.h). */
  const int fds[] = {cts__ring_state.shared_fd, cts__sink.fd, cts__wproc.notes_fd};
  bool session_fd_closed = false;
  for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
    session_fd_closed |= fds[i] >= 0 && (unsigned)fds[i] >= first && (unsigned)fds[i] <= last;
  if (session_fd_closed) make_the_lazy_writer_now();
}

/* tracer_internal.h. */
bool cts__confined;

void cts__tracer_before_confinement(void) {
  __atomic_store_n(&cts__confined, true, __ATOMIC_RELAXED);
  if (!cts__guarded() && cts__tracer_fds_watched()) make_the_lazy_writer_now();
}

/* tracer_internal.h. */
bool cts__seccomp_in_force;

void cts__tracer_before_seccomp(void) {
  __atomic_store_n(&cts__seccomp_in_force, true, __ATOMIC_RELAXED);
  cts__tracer_before_confinement();
}

/* tracer_internal.h. */
bool cts__tracer_writer_waiting(void) {
  return atomic_load(&cts__lazy_writer) == CTS__LAZY_WAITING;
}

/* tracer_internal.h. Under the control mutex: no start or stop meanwhile. */
bool cts__session_exec_end(void) {
  pthread_mutex_lock(&cts__session.control);
  wait_while_writer_spawns();
  const bool ended = cts__session.session_running && claim_end_alone();
  if (ended) {
    atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
    cts__writer_close_alone(cts__event_time());
  }
  pthread_mutex_unlock(&cts__session.control);
  return ended;
}

/* tracer_internal.h. From _exit, perhaps in a signal handler: the control mutex only if it
 * is free (a handler may have interrupted its holder). */
void cts__session_end_at_exit(void) {
  if (pthread_mutex_trylock(&cts__session.control) != 0) return;
  if (cts__session.session_running && !cts__session.service_running && claim_end_alone())
    stop_alone();
  pthread_mutex_unlock(&cts__session.control);
}

/* tracer_internal.h. Nothing but the header was written while the session waited for its
 * writer: the memtrace writer is made again as it was then (its header's bytes dropped)
 * and the file cut back to them. */
void cts__session_exec_resume(void) {
  pthread_mutex_lock(&cts__session.control);
  if (cts__session.session_running && atomic_load(&cts__lazy_writer) == CTS__LAZY_FINISHED) {
    cts__ctl_lock();
    const bool failed = cts__ctl->stats.error != 0;
    cts__ctl_unlock();
    cts_mt_writer_config_t wc = cts__session.wc;
    const bool cut = !failed && cts__sink_check() == 0 &&
                     ftruncate(cts__sink.fd, (off_t)cts__session.header_bytes) == 0 &&
                     lseek(cts__sink.fd, (off_t)cts__session.header_bytes, SEEK_SET) >= 0;
    if (cut) {
      cts__sink.bytes_written = 0;
      cts__sink.discard = cts__session.header_bytes;
    }
    const bool resumed = cut && cts__writer_init(&wc) == 0 && cts__sink.discard == 0;
    cts__sink.discard = 0;
    if (cut) cts__sink.bytes_written = cts__session.header_bytes;
    /* Not resumed: the image goes on untraced, its trace as the exec left it (whole, or cut
     * to its header if the writer could not be made again). */
    if (resumed) {
      cts__writer_reset(wc.start_time_us);
      cts__ctl_lock();
      cts__ctl->thread_running = true;
      cts__ctl->stats.bytes_written = cts__sink.bytes_written;
      cts__ctl_unlock();
      atomic_store(&cts__lazy_writer, CTS__LAZY_WAITING);
      atomic_store_explicit(&cts__tracer_active, (int)cts__session.session, memory_order_release);
    }
  }
  pthread_mutex_unlock(&cts__session.control);
}

void cts__control_lock(void) {
  pthread_mutex_lock(&cts__session.control);
}

void cts__control_unlock(void) {
  pthread_mutex_unlock(&cts__session.control);
}

int cts__session_start_socket(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int fd) {
  if (cts__session.service_stopping) {
    close(fd);
    return CTS_E_STATE;
  }
  return cts__session_start_locked(cfg, sink, fd);
}

int cts__session_stop(void) {
  return cts__session.session_running ? cts__session_stop_locked() : CTS_E_STATE;
}

int cts__session_error(void) {
  cts__ctl_lock();
  const int e = cts__ctl->stats.error;
  cts__ctl_unlock();
  return e;
}

/* tracer_internal.h. */
void cts__tracer_before_subreaper(void) {
  /* A lazy writer made after it would be handed to the program as its child by the exit of
   * the writer's intermediate (a first sample later, a seccomp filter's going in): made now,
   * while the program is none. */
  if (!cts__guarded() && cts__tracer_fds_watched()) make_the_lazy_writer_now();
  cts__ctl_lock();
  if (cts__session.session_running && cts__session.writer_process) cts__writer_process_settle();
  cts__ctl_unlock();
}

int cts__tracer_writer_pid(void) {
  if (cts__session.session_running && cts__session.writer_process) cts__writer_process_settle();
  return cts__session.session_running && cts__session.writer_process
             ? (int)atomic_load(&cts__ctl->writer_pid)
             : 0;
}

/* tracer_state.h. The child is not traced: it has no writer, and the trace belongs to the
 * parent. Its copies of the parent's sockets are closed, so that a peer sees the parent's
 * trace end when the parent closes them. With a writer process, the child lets go of the
 * shared mapping and of the pipe the writer process watches, and starts again from a fresh
 * control block of its own. Ends by releasing the locks the prepare handler took. */
void cts__session_atfork_child(void) {
  atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
  cts__session.session_running = false;
  cts__sink_atfork_child();
  cts__session.service_running = cts__session.service_stopping = false;
  atomic_store(&cts__lazy_writer, CTS__LAZY_NONE);
  if (!cts__ctl_is_local()) {
    munmap(cts__ring_state.shared, cts__ring_state.shared_size);
    cts_fd_close_held(&cts__ring_state.shared_fd, cts__ring_state.shared_fd_ident);
    cts__ring_state.shared = NULL;
    atomic_store(&cts__ring_state.ring_words, 0); /* the rings went with the mapping */
    cts__ctl = &cts__local_control; /* first: cts__forget_writer_process() writes into it */
    memset(cts__ctl, 0, sizeof *cts__ctl);
    cts__init_control(cts__ctl, false);
    cts__forget_writer_process();
    cts__session.writer_process = false;
    cts__thread.ring = NULL;
    if (cts__ring_state.ring_key_ok) pthread_setspecific(cts__ring_state.ring_key, NULL);
  } else {
    cts__ctl->thread_running = false;
    cts__ctl->stop_requested = false;
    /* The other threads' rings have no owner here. */
    for (cts__ring_t *r = atomic_load(&cts__ctl->rings); r; r = r->next)
      atomic_store(&r->owned, r == cts__thread.ring);
    atomic_store(&cts__ctl->waiters, 0);
    cts__ctl_unlock();
  }
  pthread_mutex_unlock(&cts__side.side_lock);
  pthread_mutex_init(&cts__session.control, NULL);
}
