/* SPDX-License-Identifier: MIT */
/* The writer process (tracer.h, "The writer process"): forked twice so that it is nobody's
 * child, it runs the writer loop on the shared mapping until the program stops the session
 * or is gone (a hang-up on the watch pipe); the program watches it through a pidfd. Or, in
 * a lazy session, spawned at the first sample as the writer executable (writer_exec.c),
 * which takes the session over from the shared mapping ("The lazy writer" below). Part
 * cts__wproc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "raw_system_call.h"
#include "side_stack.h"
#include "tracer_state.h"

cts__writer_proc_t cts__wproc = {
    .writer_pidfd = -1, .owner_fd = -1, .owner_watch_fd = -1, .notes_fd = -1};
CTS__TLS bool cts__spawning_writer;

/* The program's module list (/proc/PID/maps as text), handed to the writer process right
 * before an exec, in the shared mapping's hand-over area (same address in both): the
 * program then execs at once instead of waiting for the writer to drain and resolve
 * everything (a flush), and the writer resolves the old image's codes against this list
 * while /proc/PID/maps already describes the new image. Written and read under the control
 * lock. Address space only (MAP_NORESERVE): untouched until an exec, and then only as many
 * pages as the text. An image that sampled nothing hands over no list, only `own`: it costs
 * the program no read of its maps (30-60 us, most exec'ing images at the default rate). */
typedef struct {
  size_t len; /* 0: no list handed over (none yet, or the exec failed) */
  /* The image took no object id before its exec: no record holds a code of its own but one
   * a thread (or a signal handler) sampled during the exec, which the writer resolves
   * against its own module list, the program's at the fork (a library the program loaded
   * since is missing from it). */
  bool own;
  char text[];
} maps_snapshot_t;
#define SNAPSHOT_BYTES CTS__HANDOVER_BYTES
/* Zero when the session starts: the area is zero-filled when made, an exec that succeeds
 * takes it along, and one that fails resets it (cts__tracer_exec_handoff_cancel). */
static maps_snapshot_t *snapshot;

static bool settle_middle(bool block, bool pidfd);

/* Whether this session's writer process has exited (killed: it could not say so), or was
 * never made (its intermediate process could not fork). Not while that process has not
 * told yet. */
bool cts__writer_process_gone(void) {
  if (!settle_middle(false, true)) return false;
  /* A pidfd the program closed (its number maybe its own now): kill(pid, 0) instead. */
  if (cts__wproc.writer_pidfd >= 0 &&
      !cts_fd_still(cts__wproc.writer_pidfd, cts__wproc.writer_pidfd_ident))
    cts__wproc.writer_pidfd = -1;
  if (cts__wproc.writer_pidfd >= 0) {
    struct pollfd p = {.fd = cts__wproc.writer_pidfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
  }
  const pid_t pid = (pid_t)atomic_load(&cts__ctl->writer_pid);
  return pid < 0 || (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH);
}

/* How long the writer process waits, after the watch pipe hung up, for the program to be
 * seen as exited: the kernel closes an exiting process's descriptors a moment before its
 * pidfd becomes readable. */
#define EXIT_SEEN_WITHIN_MS 20

/* The writer process's watcher thread (owner_watcher) blocks in poll() on the watch pipe
 * and wakes the writer when the program's end closes: the writer then needs no timed looks
 * at the pipe (cts__owner_check_ms) to see the program gone. Without it the writer woke
 * every 1-50 ms all the program's life, records or not: ~85 times in a program's first
 * second and 20 a second after, each a context switch that a program pinned with its
 * writer to one CPU pays for (bench/JOURNAL.md, "Issue 16: the default rate against the
 * interposer's floor"). True from before the thread starts until it has seen the hang-up
 * (or could not be made): the writer then goes back to timed looks, at the pidfd that may
 * replace the pipe (program_closed_the_pipe).
 *
 * Made only once the program has lived WATCH_AFTER_MS (cts__owner_is_gone): a thread costs
 * the writer process about as much as a few timed looks (its stack, a clone, malloc's
 * first use), and most images of an exec chain (env, sh) or a short command are gone
 * before that, seen by the first look or two. Not in ThreadSanitizer builds
 * (watcher_allowed). */
#define WATCH_AFTER_MS 4u
static uint64_t watch_from_ms; /* CLOCK_MONOTONIC ms: from then on the pipe gets a watcher */
static bool watcher_made;
static atomic_bool owner_watched;
static bool watcher_allowed(void);
/* The pipe the watcher polls: kept open until the writer process exits (a number the
 * watcher might still poll must not name another file). */
static int watcher_fd = -1;

/* tracer_state.h. */
bool cts__owner_watched(void) {
  return atomic_load_explicit(&owner_watched, memory_order_acquire);
}

static void *owner_watcher(void *arg) {
  (void)arg;
  struct pollfd p = {.fd = watcher_fd, .events = POLLIN};
  /* No data ever comes: POLLHUP (or POLLIN at end of file) is the program's end closing. */
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {}
  cts__ctl_lock();
  atomic_store_explicit(&owner_watched, false, memory_order_release);
  /* Under the lock: a writer about to wait sees the request, one waiting is woken. */
  cts__ctl->wake_requested = true;
  cts__ctl_wake(&cts__ctl->writer_wake, false);
  cts__ctl_unlock();
  return NULL;
}

/* Starts the watcher thread on the watch pipe `fd`; without it (no thread could be made),
 * the writer looks at the pipe on a timer. Its stack is small: it only polls. */
static void start_owner_watcher(int fd) {
  watcher_made = true;
  watcher_fd = fd;
  atomic_store(&owner_watched, true);
  pthread_attr_t attr;
  pthread_t thread;
  int e = pthread_attr_init(&attr);
  if (!e) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64u * 1024u);
    e = pthread_create(&thread, &attr, owner_watcher, NULL);
    pthread_attr_destroy(&attr);
  }
  if (e) atomic_store(&owner_watched, false);
}

/* The writer process, after a hang-up on the watch pipe with no exec announced: true if
 * the program lives on, having closed its end itself (closefrom(3), close_range, Python's
 * os.closerange: daemons do it when they start). It then watches the program through a
 * pidfd: the trace goes on to the program's real end instead of stopping there without a
 * word while the program samples on. False: it is gone, or this kernel has no pidfds (the
 * trace then ends here, as before). */
static bool program_closed_the_pipe(void) {
  const int pidfd = (int)syscall(SYS_pidfd_open, cts__wproc.traced_pid, 0);
  if (pidfd < 0) return false;
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  int r;
  while ((r = poll(&p, 1, EXIT_SEEN_WITHIN_MS)) < 0 && errno == EINTR) {}
  if (r != 0) {
    close(pidfd);
    return false;
  }
  if (cts__wproc.owner_watch_fd != watcher_fd) close(cts__wproc.owner_watch_fd);
  cts__wproc.owner_watch_fd = pidfd;
  cts__wproc.owner_by_pidfd = true;
  return true;
}

/* The writer process: whether the program is gone: its end of the watch pipe closed (it
 * exited, was killed or exec'd; its forked children close their copies), or, once the
 * program closed that end itself, its pidfd readable (it exited). */
bool cts__owner_is_gone(void) {
  struct pollfd p = {.fd = cts__wproc.owner_watch_fd, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) {
    /* A hang-up from now on wakes the writer (owner_watched): the pipe is polled after
     * this look found it open, so none is missed. */
    if (watcher_allowed() && !watcher_made && !cts__wproc.owner_by_pidfd &&
        cts_mono_ms() >= watch_from_ms)
      start_owner_watcher(cts__wproc.owner_watch_fd);
    return false;
  }
  if (cts__wproc.owner_by_pidfd ||
      atomic_load_explicit(&cts__ctl->exec_pending, memory_order_relaxed))
    return true;
  return !program_closed_the_pipe();
}

/* Whether the program is a child subreaper (PR_SET_CHILD_SUBREAPER, which exec keeps:
 * init-like programs, container shims) or the init of its pid namespace (pid 1: a
 * container's first program, `unshare -p --fork PROG`), which takes every orphan of the
 * namespace. The writer is made nobody's child by its parent's exit, which hands an orphan
 * to the nearest subreaper: this program. It would then see the writer in wait() (one that
 * reaps every child before it exits waited forever, the writer waiting for its end: a
 * program as pid 1 hung so) and get its SIGCHLD. Such a program gets a writer thread. */
static bool program_is_subreaper(pid_t pid) {
  if (pid == 1) return true;
  /* Under a filter known to be in force prctl is not asked (it may kill): what this image
   * was told or saw (cts__program_subreaper). */
  if (__atomic_load_n(&cts__seccomp_in_force, __ATOMIC_RELAXED))
    return __atomic_load_n(&cts__program_subreaper, __ATOMIC_RELAXED);
  int subreaper = 0;
  const bool is = prctl(PR_GET_CHILD_SUBREAPER, &subreaper, 0L, 0L, 0L) == 0 && subreaper != 0;
  __atomic_store_n(&cts__program_subreaper, is, __ATOMIC_RELAXED);
  return is;
}

bool cts__program_subreaper;

/* Whether a session into `sink` can have a writer process: the sinks it can write to
 * alone (a callback, a clock callback or the service's client belong to this process). */
bool cts__process_writer_fits(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int socket_fd, pid_t pid) {
  return cfg->writer == CTS_TRACER_WRITER_PROCESS && socket_fd < 0 && !sink->clock &&
         (sink->kind == CTS_TRACER_SINK_FILE || sink->kind == CTS_TRACER_SINK_FD ||
          sink->kind == CTS_TRACER_SINK_TCP_CONNECT) &&
         !program_is_subreaper(pid);
}

/* ---- `ctfscope record`'s notes pipe (tracer_internal.h) -------------------------------- */

void cts__tracer_notes_set(int fd) {
  cts__wproc.notes_fd = fd;
  cts__wproc.notes_fd_ident = cts_fd_ident(fd);
}

int cts__tracer_notes_fd(void) {
  return cts_fd_still(cts__wproc.notes_fd, cts__wproc.notes_fd_ident) ? cts__wproc.notes_fd : -1;
}

/* Why a trace lost its tail, in the words of `record`'s summary ("; its tail was lost:
 * REASON"). */
static void loss_reason(int e, char *buf, size_t size) {
  if (e == -ESRCH)
    snprintf(buf, size, "the writer process died");
  else if (e == -EBADF)
    snprintf(buf, size,
             "tracing stopped at the first sample: the program had closed the tracer's "
             "descriptors by a call the preload does not see (a raw close_range system call?)");
  else if (e == -EPERM) /* session.c, cts__lazy_writer_start: no writer made under it */
    snprintf(buf, size,
             "tracing stopped at the first sample: the program had installed a seccomp filter "
             "by a call the preload does not see (a raw seccomp system call)");
  else if (e > -1000 && e < 0)
    snprintf(buf, size, "writing the trace failed: %s", strerror(-e));
  else
    snprintf(buf, size, "%s", cts_strerror(e));
}

/* One note to record's pipe, "PATH\0TEXT\0" (text cut at 511 bytes), in one write: under
 * PIPE_BUF, not mixed with another image's note. True if written. */
static bool write_note(int fd, const char *path, const char *text) {
  char note[sizeof cts__sink.path + 512 + 2];
  const int n = snprintf(note, sizeof note, "%s%c%.511s%c", path, 0, text, 0);
  return n > 0 && (size_t)n < sizeof note && write(fd, note, (size_t)n) == (ssize_t)n;
}

void cts__tracer_note_loss(const char *path, int e) {
  /* The other side (the program, or its writer process) may have told already. */
  if (!path || !path[0] || atomic_load(&cts__ctl->loss_noted)) return;
  const int fd = cts__tracer_notes_fd();
  if (fd < 0 || atomic_exchange(&cts__ctl->loss_noted, true)) return;
  char why[512];
  loss_reason(e, why, sizeof why);
  write_note(fd, path, why); /* false: record is gone, nobody to tell */
}

bool cts__tracer_note_text(const char *text) {
  const int fd = cts__tracer_notes_fd();
  return fd >= 0 && write_note(fd, "", text);
}

bool cts__tracer_note_retraction(const char *text) {
  const int fd = cts__tracer_notes_fd();
  return fd >= 0 && write_note(fd, "-", text);
}

bool cts__tracer_note_untraced(const char *path, const char *text) {
  const int fd = cts__tracer_notes_fd();
  return fd >= 0 && path && path[0] && write_note(fd, path, text);
}

/* Keeps the descriptors of `keep` (-1: none), points 0-2 at /dev/null otherwise, and closes
 * every other one: the writer process must not hold the program's pipes and sockets open. */
static void keep_only_fds(int keep[3]) {
  for (int i = 1; i < 3; i++) /* sorted, three at most */
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
      const int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; fd++)
    if (fd != keep[0] && fd != keep[1] && fd != keep[2] && null_fd >= 0 && null_fd != fd)
      dup2(null_fd, fd);
  unsigned next = 3;
  for (int i = 0; i < 3; i++) {
    if (keep[i] < (int)next) continue;
    if ((unsigned)keep[i] > next) close_range(next, (unsigned)keep[i] - 1u, 0);
    next = (unsigned)keep[i] + 1u;
  }
  close_range(next, ~0u, 0);
}

/* The writer process: the writer loop, on its own, until the program stops the session or
 * is gone. It leaves the program's session and process group (a ^C for the program does
 * not cut its trace short), takes no signals, and samples nothing. */
static _Noreturn void writer_process_main(int watch_fd, pid_t program) {
  atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed);
  cts__guard_enter();
  cts__spawning_writer = false;
  cts__writer_process_run(watch_fd, program);
}

/* The writer process's stack: its symbolizer (libdw), compression and writer loop. */
#define WRITER_STACK_ROOM (8u << 20)

typedef struct {
  int watch_fd;
  pid_t program;
} writer_run_t;

static _Noreturn void writer_process_loop(int watch_fd, pid_t program);

static void writer_process_loop_entry(void *arg) {
  const writer_run_t *const run = arg;
  writer_process_loop(run->watch_fd, run->program);
}

/* tracer_state.h. On a stack of the usual size (side_stack.h): the writer inherits the
 * program's stack limit, and under `ulimit -s 128` (KiB; hard too) it died by SIGSEGV at
 * its first packet, the program's trace lost (said). */
_Noreturn void cts__writer_process_run(int watch_fd, pid_t program) {
  writer_run_t run = {watch_fd, program};
  cts__call_with_stack_room(writer_process_loop_entry, &run, WRITER_STACK_ROOM);
  _exit(0); /* not reached: the loop exits */
}

static _Noreturn void writer_process_loop(int watch_fd, pid_t program) {
  cts__wproc.owner_watch_fd = watch_fd;
  cts__wproc.traced_pid = program;
  /* record's notes pipe, if it is still the program's: a file of the program's that took
   * its number is not kept. */
  cts__wproc.notes_fd = cts__tracer_notes_fd();
  int keep[3] = {cts__sink.fd, watch_fd, cts__wproc.notes_fd};
  keep_only_fds(keep);
  watch_from_ms = cts_mono_ms() + WATCH_AFTER_MS;
  cts__writer_main(NULL);
  /* The program is released; `record` still waits for the sink's lock. */
  cts__symbolizer_save(cts__writer.symbolizer);
  cts__close_sink();
  _exit(0);
}

/* The intermediate process of the double fork. While the program has one thread (the
 * usual case: the preload starts tracing in its constructor) it is made with
 * CLONE_VM|CLONE_VFORK and no exit signal: it runs on the program's memory, below the
 * program's frames, while the program sleeps, and only its fork of the writer copies the address
 * space (one page-table copy, one teardown of a full address space and one round of
 * copy-on-write faults per image, where a copy for each process made two). The program
 * thus waits until the writer is forked, a fork's time, but never for the writer's work.
 * Without an exit signal, wait(), waitpid(-1) and waitid() without __WALL or __WCLONE do
 * not see it, and its exit sends no SIGCHLD; the program reaps it later (settle_middle),
 * by then a zombie. 0: none pending. */
static pid_t middle_pid;
static pid_t middle_parent; /* the process that made it: a forked child does not reap it */

/* Reaps the intermediate process if it is done (or waits for it: `block`), then opens the
 * writer's pidfd if `pidfd` (not when the session ends: nobody would poll it). True once
 * there is nothing left to reap. */
static bool settle_middle(bool block, bool pidfd) {
  if (!middle_pid) return true;
  /* Not this process's to reap: a forked child's copy of it, or a vfork'd child running
   * the exec hook on its parent's memory, where forgetting it would make the parent
   * forget it too (and hand it to its next image as a stray child). */
  if (getpid() != middle_parent) return true;
  pid_t r;
  while ((r = waitpid(middle_pid, NULL, __WALL | (block ? 0 : WNOHANG))) < 0 && errno == EINTR) {}
  if (r == 0) return false;
  middle_pid = 0;
  /* Killed before it could say: no writer (cts__writer_process_gone). */
  int none = 0;
  atomic_compare_exchange_strong(&cts__ctl->writer_pid, &none, -1);
  const pid_t pid = (pid_t)atomic_load(&cts__ctl->writer_pid);
  /* Without pidfds (Linux < 5.3), cts__writer_process_gone() uses kill(pid, 0). */
  if (pidfd && pid > 0 && cts__wproc.writer_pidfd < 0) {
    cts__wproc.writer_pidfd = cts_fd_set_aside((int)syscall(SYS_pidfd_open, pid, 0));
    cts__wproc.writer_pidfd_ident = cts_fd_ident(cts__wproc.writer_pidfd);
  }
  return true;
}

/* tracer_internal.h. */
void cts__writer_process_settle(void) {
  settle_middle(true, true);
}

/* tracer_internal.h. No pidfd: the exec would close it at once (a failed exec's later
 * checks do without, by kill(pid, 0)). */
void cts__writer_process_reap(void) {
  settle_middle(true, false);
}

/* The intermediate process: leaves the program's session, makes the writer process,
 * publishes its pid and exits. `shared`: it runs on the program's memory (CLONE_VM), with
 * its signals already blocked by the program; its descriptors and its session are its own
 * either way. */
static _Noreturn void middle_main(const int watch[2], pid_t program, bool shared) {
  close(watch[1]); /* the writer process must see the program's end close */
  /* A session of its own first, then the writer: the writer is out of the program's
   * session and process group from its first instruction, so a ^C (or a SIGKILL, a
   * SIGSTOP) sent to the program's group at once cannot reach it, though the program does
   * not wait for it to start. As in a daemon's double fork, the writer is no session leader
   * and can never acquire a controlling terminal. No signals, and its name: inherited. */
  setsid();
  if (!__atomic_load_n(&cts__seccomp_in_force, __ATOMIC_RELAXED)) /* tracer_internal.h */
    prctl(PR_SET_NAME, "ctfscope-writer");
  if (!shared) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
  }
  /* glibc's fork, handlers and all, as the program would call it: the writer's copy has the
   * loader's locks reset and the tracer's fork handlers run (tracer.c: they change nothing
   * for the writer). On the program's memory, the handlers' prepare and parent halves act
   * on the program's state, as the program's own fork() would. */
  const pid_t pid = fork();
  if (pid == 0) writer_process_main(watch[0], program);
  atomic_store(&cts__ctl->writer_pid, pid > 0 ? pid : -1);
  _exit(0);
}

typedef struct {
  int watch[2];
  pid_t program;
} middle_args_t;

static int middle_entry(void *arg) {
  const middle_args_t *const a = arg;
  middle_main(a->watch, a->program, true);
}

/* ThreadSanitizer follows a clone() and the fork in it as if each were the program's own:
 * an intermediate on the program's memory breaks its state (a CHECK failure in its fork
 * handling). Its builds make the intermediate a copy of the program, with no exit signal
 * (the program reaps it later all the same), as does a start on a stack other than the
 * initial one (cts__on_initial_stack). */
#if defined(__SANITIZE_THREAD__)
#define SHARED_MIDDLE 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHARED_MIDDLE 0
#endif
#endif
#ifndef SHARED_MIDDLE
#define SHARED_MIDDLE 1
#endif

/* Whether the writer process may make its watcher thread: not in ThreadSanitizer builds
 * (those without SHARED_MIDDLE), whose runtime kills a process that makes a thread after a
 * fork of a process with threads (die_after_fork), as the writer process is when the
 * program had threads. */
static bool watcher_allowed(void) {
  return SHARED_MIDDLE;
}

/* The intermediate, while it shares the program's memory, runs below the program's frames
 * (the program sleeps meanwhile), past this gap for the frames of the calls that make it
 * (clone and its wrappers: a few words; a sanitizer's interceptor more). Its own stack is
 * what it touches (the fork, the fork handlers: a few KiB), and the writer's, its copy,
 * grows on from there as the program's own stack would, up to the same limit: a stack of
 * fixed size for the writer would have to be as large as a thread's, and a local array
 * reserving one made a traced `/bin/true` under `ulimit -s 64` crash. */
#define MIDDLE_STACK_GAP (16u * 1024u)

/* Whether the program runs under Valgrind, whose core puts its vgpreload_*.so libraries in
 * the client's LD_PRELOAD. Valgrind runs a CLONE_VM|CLONE_VFORK clone as a fork: the
 * intermediate's writes (the program's memory, its stack below ours) then land in a copy,
 * and the program crashed (SIGSEGV) under every Valgrind tool. */
static bool under_valgrind(void) {
  const char *const preload = getenv("LD_PRELOAD");
  return preload && strstr(preload, "/vgpreload_") != NULL;
}

/* The intermediate process, made with CLONE_VM|CLONE_VFORK (see middle_pid): the program
 * sleeps until it has forked the writer and exited. Its pid, or -1 (errno set). Unused in
 * ThreadSanitizer builds (SHARED_MIDDLE). Not inlined: its frame marks where the program's
 * stack ends. */
__attribute__((unused, noinline)) static pid_t clone_shared_middle(middle_args_t *args) {
  char *const top =
      (char *)((uintptr_t)((char *)__builtin_frame_address(0) - MIDDLE_STACK_GAP) & ~(uintptr_t)63);
  /* Its signals are blocked from its first instruction: a handler of the program's must
   * not run there, on the program's memory. Its failing calls write the program's errno. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int saved = errno;
  const pid_t pid = clone(middle_entry, top, CLONE_VM | CLONE_VFORK, args);
  const int e = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = pid < 0 ? e : saved;
  return pid;
}

/* Forks the writer process, twice, so that it is nobody's child: the program never sees it
 * in wait(), and it lives on when the program dies, to finish the trace. 0, or -errno. */
int cts__spawn_writer_process(void) {
  middle_args_t args;
  if (pipe2(args.watch, O_CLOEXEC) != 0) return -errno;
  /* The program's end off 0-2 (common/held_fd.h); the writer's end goes with the fork. */
  args.watch[1] = cts_fd_set_aside(args.watch[1]);
  if (args.watch[1] < 0) {
    const int e = -errno;
    close(args.watch[0]);
    return e;
  }
  /* Without it, an exec flushes (cts__tracer_exec_handoff says so). */
  snapshot = cts__shared_handover();
  const pid_t program = args.program = getpid();
  atomic_store(&cts__ctl->writer_pid, 0);
  cts__spawning_writer = true;
  /* With one thread, no lock of libc's (malloc's, stdio's, the loader's) can be held by
   * another thread, and none runs while the intermediate uses the program's memory. With
   * more threads, those go on running: a fork() of the program and a wait. The shared
   * intermediate only from the initial stack, which grows on demand: on a stack the program
   * made itself (a coroutine's) its frames below ours could land on the program's data. */
  const bool lazy = __libc_single_threaded;
  const pid_t middle =
      !lazy ? fork()
      : SHARED_MIDDLE && cts__on_initial_stack((uintptr_t)__builtin_frame_address(0)) &&
              !under_valgrind()
          ? clone_shared_middle(&args)
          : (pid_t)syscall(SYS_clone, 0L /* no exit signal */, NULL, NULL, NULL, NULL);
  if (middle == 0) middle_main(args.watch, program, false);
  const int e = middle < 0 ? -errno : 0;
  cts__spawning_writer = false;
  close(args.watch[0]);
  if (e) {
    close(args.watch[1]);
    return e;
  }
  cts__wproc.owner_fd = args.watch[1];
  cts__wproc.owner_fd_ident = cts_fd_ident(args.watch[1]);
  middle_pid = middle;
  middle_parent = program;
  if (!lazy && !settle_middle(true, true)) return -EAGAIN;
  if (!lazy && atomic_load(&cts__ctl->writer_pid) <= 0) {
    cts__forget_writer_process();
    return -EAGAIN;
  }
  return 0;
}

/* After the session: the pipe and the pidfd go; the hand-over area stays with the shared
 * mapping (in a forked child, already unmapped: not touched here). */
void cts__forget_writer_process(void) {
  settle_middle(true, false);
  /* Not numbers the program closed and took for files of its own (common/held_fd.h). */
  cts_fd_close_held(&cts__wproc.owner_fd, cts__wproc.owner_fd_ident);
  cts_fd_close_held(&cts__wproc.writer_pidfd, cts__wproc.writer_pidfd_ident);
  atomic_store(&cts__ctl->writer_pid, 0);
  snapshot = NULL;
}

/* Reads a module list (`path`: /proc/PID/maps) into `buf`, `room` bytes at most: its length,
 * or 0 if it could not be read whole. */
static size_t read_maps(const char *path, char *buf, size_t room) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  size_t len = 0;
  ssize_t n = fd < 0 ? -1 : 1;
  while (n != 0 && len < room) {
    n = read(fd, buf + len, room - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    len += (size_t)n;
  }
  if (fd >= 0) close(fd);
  /* Only a whole list: a cut one would leave codes unresolved or, worse, misplaced. */
  return n == 0 ? len : 0;
}

/* tracer_internal.h. The list is read straight into the shared mapping: no allocation, one
 * open, a few reads and a close (30-60 us for a small program), under the control lock so
 * that two threads exec'ing at once do not write it together; not at all if the session
 * took no object id (maps_snapshot_t, `own`). */
bool cts__tracer_exec_handoff(int *error) {
  bool handed = false;
  *error = 0;
  cts__ctl_lock();
  if (snapshot && cts__session.writer_process && cts__ctl->thread_running &&
      !cts__ctl->stop_requested) {
    snapshot->own = (atomic_load(&cts__ctl->next_id) & ID_MASK) == 0;
    snapshot->len = snapshot->own ? 0
                                  : read_maps("/proc/self/maps", snapshot->text,
                                              SNAPSHOT_BYTES - sizeof *snapshot);
    handed = snapshot->own || snapshot->len > 0;
    /* The symbolizer looks at the list again (it takes this one). */
    atomic_fetch_add(&cts__ctl->module_epoch, 1);
    /* What a flush would have said: the trace already lost its tail. */
    *error = cts__ctl->stats.error        ? cts__ctl->stats.error
             : cts__writer_process_gone() ? -ESRCH
                                          : 0;
  }
  cts__ctl_unlock();
  return handed;
}

/* tracer_internal.h. */
bool cts__writer_watch_lost(void) {
  return cts__session.writer_process && cts__wproc.owner_fd >= 0 &&
         !cts_fd_still(cts__wproc.owner_fd, cts__wproc.owner_fd_ident);
}

/* tracer_internal.h. After a failed exec: the image goes on, and may load libraries. */
void cts__tracer_exec_handoff_cancel(void) {
  cts__ctl_lock();
  if (snapshot && (snapshot->len || snapshot->own)) {
    snapshot->len = 0;
    snapshot->own = false;
    atomic_fetch_add(&cts__ctl->module_epoch, 1);
  }
  cts__ctl_unlock();
}

/* tracer_internal.h. In the writer process: a copy of the list the program handed over, or
 * of its own (`own`). */
char *cts__program_maps(size_t *len) {
  if (!snapshot) return NULL;
  cts__ctl_lock();
  const bool own = snapshot->own;
  size_t n = snapshot->len;
  char *copy = n ? malloc(n) : NULL;
  if (copy) memcpy(copy, snapshot->text, n);
  cts__ctl_unlock();
  if (own) {
    /* Its own list, as it was at the fork: what the program had before the exec. */
    const size_t room = SNAPSHOT_BYTES - sizeof *snapshot;
    copy = malloc(room);
    n = copy ? read_maps("/proc/self/maps", copy, room) : 0;
    if (!n) {
      free(copy);
      copy = NULL;
    }
  }
  *len = copy ? n : 0;
  return copy;
}

/* tracer_internal.h. */
char *cts__read_maps(int pid, size_t *len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", pid ? pid : (int)getpid());
  /* As much as a handed-over list may hold: address space until read. */
  const size_t room = SNAPSHOT_BYTES - sizeof(maps_snapshot_t);
  char *const text = malloc(room);
  *len = text ? read_maps(path, text, room) : 0;
  if (!*len) {
    free(text);
    return NULL;
  }
  return text;
}

/* ---- The lazy writer ---------------------------------------------------------------------
 * (docs/tracing.md, "The writer process"). At the default rate most images of an exec chain
 * or a short command never sample: making their writer process cost each ~0.45 ms of CPU
 * (bench/README.md, "The exec chain with no writer until the first sample"). A session into
 * a file, uncompressed, whose writer executable is found, makes none at its start: the
 * program writes the header, and either finishes the trace itself at its end (the last
 * packet: cts__writer_close_alone) or, at its first sample, spawns the writer executable,
 * which maps the rings' memfd at the same address, re-makes the memtrace writer from the
 * session's state and runs the writer loop as a forked writer does.
 *
 * The first sample comes from inside malloc, in any thread, with any lock held: no fork()
 * there (the program's pthread_atfork handlers may wait for a lock this thread holds) and
 * no _Fork() either (the child would keep the loader's and malloc's locks as other threads
 * held them). The spawn is two vfork-style clones on stacks of their own, every signal
 * blocked, raw system calls only, and an exec: nothing of the program's runs in them. */

/* The writer executable's path, once per image: 1 found, 0 not, -1 not looked for yet. It
 * is installed in LIBEXECDIR/ctfscope/, the build tree laid out alike: found from the
 * directory of the library the tracer is in (dladdr), by the relative path CMake computed
 * from LIBDIR (src/tracer/CMakeLists.txt), so that a copy of the installed tree elsewhere
 * finds its own. Not found (the tracer linked into a program, or the file removed): the
 * session makes its writer at its start, as before the lazy writer. */
static char writer_exe[4096];
static int writer_exe_found = -1;

#ifndef CTS_WRITER_EXE_NAME
#define CTS_WRITER_EXE_NAME "ctfscope-writer"
#endif
#ifndef CTS_WRITER_DIR_FROM_LIBDIR
#define CTS_WRITER_DIR_FROM_LIBDIR "../libexec/ctfscope"
#endif
#define WRITER_FROM_LIBDIR CTS_WRITER_DIR_FROM_LIBDIR "/" CTS_WRITER_EXE_NAME

/* dl_iterate_phdr's callback: the loader's name of the object whose loaded segments hold
 * `key`, into *(const char **)found (NULL for the main program, which has none). */
static int object_holding(struct dl_phdr_info *info, size_t size, void *found) {
  (void)size;
  const uintptr_t key = (uintptr_t)&writer_exe_found;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *const ph = &info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && key >= start && key - start < ph->p_memsz) {
      *(const char **)found = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : NULL;
      return 1;
    }
  }
  return 0;
}

/* tracer_internal.h. The loader's own list of objects, walked under its lock: a few dozen
 * instructions an object, the tracer's library among the first (preloaded). dladdr, which
 * this replaced, also scans the object's symbol table for the nearest symbol: ~3.8 k
 * instructions at each traced image's start (callgrind). */
const char *cts__tracer_object_path(void) {
  const char *found = NULL;
  dl_iterate_phdr(object_holding, &found);
  return found;
}

static bool find_writer_executable(void) {
  if (writer_exe_found >= 0) return writer_exe_found == 1;
  writer_exe_found = 0;
  Dl_info info;
  /* The tracer's library; the program itself (the tracer linked into it) by dladdr, which
   * names it by its argv[0] (an object of the tracer's, not a function: ISO C has no
   * function-to-object pointer). */
  const char *path = cts__tracer_object_path();
  if (!path && dladdr((const void *)&writer_exe_found, &info)) path = info.dli_fname;
  if (!path || !path[0]) return false;
  const char *const slash = strrchr(path, '/');
  const size_t dir = slash ? (size_t)(slash - path) + 1u : 0u;
  if (!slash || dir + sizeof WRITER_FROM_LIBDIR > sizeof writer_exe) return false;
  memcpy(writer_exe, path, dir);
  memcpy(writer_exe + dir, WRITER_FROM_LIBDIR, sizeof WRITER_FROM_LIBDIR);
  writer_exe_found = access(writer_exe, X_OK) == 0;
  return writer_exe_found == 1;
}

/* Whether the program is dumpable (its maps readable by the writer executable). Under a
 * seccomp filter (tracer_internal.h: cts__seccomp_in_force), without the prctl: a program
 * in secure-execution mode (set-uid, set-gid, file capabilities) starts undumpable. */
static bool program_is_dumpable(void) {
  if (__atomic_load_n(&cts__seccomp_in_force, __ATOMIC_RELAXED)) return !getauxval(AT_SECURE);
  return prctl(PR_GET_DUMPABLE, 0L, 0L, 0L, 0L) == 1;
}

/* The lazy writer is for rates at which a short image may well never sample. Its spawn, an
 * exec, costs a sampling image ~0.5 ms of CPU more than the fork at the start (an exec and
 * the loader: bench/README.md, "The exec chain with no writer until the first sample"),
 * and saves ~0.45 ms where no sample comes. At 1e-4 an image that allocates 40 KB (env,
 * sh) samples about one time in three; at the default rate, 1e-6, one in three hundred;
 * at rate 1, always, at its first allocation. */
#define LAZY_RATE_BELOW 1e-4

/* tracer_state.h. Not: a sampling rate from LAZY_RATE_BELOW up, a compressed trace (the zstd
 * stage's state is the program's), a descriptor, socket or callback sink (a file's end can be taken
 * back after a failed exec: cts__session_exec_resume), ThreadSanitizer or Valgrind builds (which
 * follow clones as their own), a program that is not dumpable (the writer executable could not read
 * its maps, where a forked writer has them), or no writer executable (the tracer linked into a
 * program). Those make their writer process at the start, as before. */
bool cts__lazy_writer_fits(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink) {
  return cfg->sample_rate < LAZY_RATE_BELOW && SHARED_MIDDLE &&
         sink->kind == CTS_TRACER_SINK_FILE && !cfg->compress_level && !under_valgrind() &&
         program_is_dumpable() && find_writer_executable();
}

/* What the spawn's clones read: prepared before them (they allocate nothing). */
#define SPAWN_ENV_MAX 1024u
static CTS__COLD_BSS struct {
  const char *argv[5];
  char memfd_arg[24], addr_arg[24], size_arg[24];
  const char *envp[SPAWN_ENV_MAX + 2u];
  char memtrace_env[sizeof "MEMTRACE=" + sizeof cts__sink.path];
  int keep[4]; /* the writer's copies of these lose their close-on-exec flag (-1: none) */
  volatile int exec_failed;
} spawn;
static CTS__COLD_BSS _Alignas(64) unsigned char middle_stack[16384], writer_stack[16384];

static void format_unsigned(char *out, uint64_t v) {
  char digits[24];
  size_t n = 0;
  do digits[n++] = (char)('0' + v % 10u);
  while ((v /= 10u) != 0);
  for (size_t i = 0; i < n; i++) out[i] = digits[n - 1u - i];
  out[n] = '\0';
}

/* The writer, a vfork'd child of the intermediate on its memory (the program's): its own
 * descriptor table, in which the three it needs survive the exec. */
static int exec_writer_entry(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++)
    if (spawn.keep[i] >= 0) syscall(SYS_fcntl, spawn.keep[i], F_SETFD, 0);
  /* Not by syscall(): the preload's hook there hands an execve to its exec hooks. */
  cts__raw_system_call(SYS_execve, (long)writer_exe, (long)spawn.argv, (long)spawn.envp, 0, 0, 0);
  spawn.exec_failed = 1;
  syscall(SYS_exit, 127);
  return 0;
}

/* The intermediate: a session of its own (the writer is then out of the program's session
 * and process group from its first instruction, and no session leader), the writer, its
 * pid for the program, and its exit, which makes the writer nobody's child. */
static int exec_middle_entry(void *arg) {
  (void)arg;
  syscall(SYS_setsid);
  const int pid = clone(exec_writer_entry, writer_stack + sizeof writer_stack,
                        CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
  atomic_store(&cts__ctl->writer_pid, pid > 0 && !spawn.exec_failed ? pid : -1);
  syscall(SYS_exit, 0);
  return 0;
}

/* The program's environment for the writer, without LD_PRELOAD (the writer is not traced);
 * the symbol cache's variables (CTFSCOPE_CACHE, XDG_CACHE_HOME, HOME) stay. MEMTRACE names
 * the trace it writes, as a forked writer's environment (the program's at its start) does:
 * what tells one program's writer from another's. */
static void spawn_environment(void) {
  extern char **environ;
  size_t n = 0;
  memcpy(spawn.memtrace_env, "MEMTRACE=", 9);
  cts__copy_string(spawn.memtrace_env + 9, sizeof spawn.memtrace_env - 9, cts__sink.path);
  spawn.envp[n++] = spawn.memtrace_env;
  for (char **e = environ; e && *e && n < SPAWN_ENV_MAX; e++)
    if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && strncmp(*e, "MEMTRACE=", 9) != 0)
      spawn.envp[n++] = *e;
  spawn.envp[n] = NULL;
}

/* What the writer executable needs of the session, in the shared header. */
static void write_handover(int watch_fd, int notes_fd) {
  cts__writer_handover_t *const h =
      (cts__writer_handover_t *)(cts__ring_state.shared + CTS__HANDOVER_OFFSET);
  h->struct_size = sizeof *h;
  h->program_pid = getpid();
  h->sink_fd = cts__sink.fd;
  h->watch_fd = watch_fd;
  h->sink_fd_ident = cts__sink.fd_ident;
  h->notes_fd = notes_fd;
  h->notes_fd_ident = cts__wproc.notes_fd_ident;
  h->header_bytes = cts__session.header_bytes;
  h->start_us = cts__session.wc.start_time_us;
  h->cfg = cts__session.cfg;
  h->cfg.context = h->cfg.executable_name = NULL;
  memcpy(&h->sampler, &cts__sampler, sizeof h->sampler);
  h->session = cts__session.session;
  h->session_bits = cts__session.session_bits;
  h->tsc_mode = cts__session.tsc_mode;
  h->tsc_start = cts__writer.tsc_start;
  h->tsc_start_ns = cts__writer.tsc_start_ns;
  h->lost_taken = cts__writer.lost_taken;
  h->base = cts__session.base;
  cts__copy_string(h->exe, sizeof h->exe, cts__session.exe);
  cts__copy_string(h->host, sizeof h->host, cts__session.host);
  cts__copy_string(h->context, sizeof h->context, cts__session.context);
  cts__copy_string(h->path, sizeof h->path, cts__sink.path);
  h->magic = CTS__HANDOVER_MAGIC;
}

/* tracer_state.h. From inside the allocator (guard raised), any thread. */
int cts__spawn_writer_exec(void) {
  if (cts__sink_check() != 0 ||
      !cts_fd_still(cts__ring_state.shared_fd, cts__ring_state.shared_fd_ident))
    return -EBADF;
  int watch[2];
  if (pipe2(watch, O_CLOEXEC) != 0) return -errno;
  watch[1] = cts_fd_set_aside(watch[1]);
  if (watch[1] < 0) {
    const int e = -errno;
    close(watch[0]);
    return e;
  }
  /* record's notes pipe, if the program still holds it: the writer keeps a copy. */
  const int notes_fd = cts__tracer_notes_fd();
  write_handover(watch[0], notes_fd);
  spawn.keep[0] = cts__ring_state.shared_fd;
  spawn.keep[1] = cts__sink.fd;
  spawn.keep[2] = watch[0];
  spawn.keep[3] = notes_fd;
  format_unsigned(spawn.memfd_arg, (uint64_t)cts__ring_state.shared_fd);
  format_unsigned(spawn.addr_arg, (uint64_t)(uintptr_t)cts__ring_state.shared);
  format_unsigned(spawn.size_arg, (uint64_t)cts__ring_state.shared_size);
  spawn.argv[0] = writer_exe;
  spawn.argv[1] = spawn.memfd_arg;
  spawn.argv[2] = spawn.addr_arg;
  spawn.argv[3] = spawn.size_arg;
  spawn.argv[4] = NULL;
  spawn.exec_failed = 0;
  spawn_environment();
  snapshot = cts__shared_handover();
  atomic_store(&cts__ctl->writer_pid, 0);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int saved = errno;
  const pid_t middle = clone(exec_middle_entry, middle_stack + sizeof middle_stack,
                             CLONE_VM | CLONE_VFORK /* no exit signal */, NULL);
  const int e = middle < 0 ? -errno : 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = saved;
  close(watch[0]);
  if (e) {
    close(watch[1]);
    snapshot = NULL;
    return e;
  }
  cts__wproc.owner_fd = watch[1];
  cts__wproc.owner_fd_ident = cts_fd_ident(watch[1]);
  middle_pid = middle;
  middle_parent = getpid();
  settle_middle(true, true); /* it has exited: its last step was the writer's exec */
  if (atomic_load(&cts__ctl->writer_pid) <= 0) {
    cts__forget_writer_process();
    return -ESRCH;
  }
  return 0;
}

/* tracer_internal.h. The writer executable's main: argv is the memfd, the address and the
 * size of the shared mapping. Exits 127 when it cannot take the session over (the program
 * then sees its writer gone). */
int cts__writer_exec_main(int argc, char **argv) {
  if (argc != 4) return 127;
  char *end;
  const long memfd = strtol(argv[1], &end, 10);
  if (*end || memfd < 0) return 127;
  const unsigned long long addr = strtoull(argv[2], &end, 10);
  if (*end) return 127;
  const unsigned long long size = strtoull(argv[3], &end, 10);
  if (*end || size < SHARED_HEADER + CTS__HANDOVER_BYTES) return 127;
  /* At the program's address: the control block's ring pointers hold in both. */
  void *const p = mmap((void *)(uintptr_t)addr, (size_t)size, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, (int)memfd, 0);
  if (p != (void *)(uintptr_t)addr) return 127;
  close((int)memfd);
  const cts__writer_handover_t *const h =
      (const cts__writer_handover_t *)((unsigned char *)p + CTS__HANDOVER_OFFSET);
  if (h->magic != CTS__HANDOVER_MAGIC || h->struct_size != sizeof *h) return 127;
  cts__guard_enter();
  cts__ring_state.shared = p;
  cts__ring_state.shared_size = (size_t)size;
  cts__ctl = (cts__control_t *)p;
  snapshot = cts__shared_handover();

  cts__session.cfg = h->cfg;
  cts__session.session = h->session;
  cts__session.session_bits = h->session_bits;
  cts__session.tsc_mode = h->tsc_mode;
  cts__session.base = h->base;
  cts__session.clock = cts__wall_clock_us;
  cts__session.clock_user_data = NULL;
  cts__session.writer_process = true;
  cts__session.session_running = true;
  cts__copy_string(cts__session.exe, sizeof cts__session.exe, h->exe);
  cts__copy_string(cts__session.host, sizeof cts__session.host, h->host);
  cts__copy_string(cts__session.context, sizeof cts__session.context, h->context);
  memcpy(&cts__sampler, &h->sampler, sizeof cts__sampler);
  cts__writer.tsc_start = h->tsc_start;
  cts__writer.tsc_start_ns = h->tsc_start_ns;

  /* The sink: the program's trace file, by the inherited descriptor. */
  cts_tracer_sink_init(&cts__sink.sink, CTS_TRACER_SINK_FILE);
  cts__copy_string(cts__sink.path, sizeof cts__sink.path, h->path);
  cts__sink.sink.path = cts__sink.path;
  cts__sink.fd = h->sink_fd;
  cts__sink.fd_ident = h->sink_fd_ident;
  cts__sink.own_fd = true;
  cts__wproc.notes_fd = h->notes_fd;
  cts__wproc.notes_fd_ident = h->notes_fd_ident;
  /* The memtrace writer re-made as the program made it: its header's bytes, already in the
   * file, are dropped (the encoder's state after them is the program's). */
  cts__sink.bytes_written = 0;
  cts__sink.discard = h->header_bytes;
  cts_mt_writer_config_t wc;
  cts__session_writer_config(&wc, h->start_us, (uint64_t)h->program_pid);
  if (!cts__writer_memory() || cts__writer_init(&wc) != 0 || cts__sink.discard != 0 ||
      cts__sink.bytes_written != h->header_bytes)
    return 127;
  cts__writer.emitted = 0;
  cts__writer.pending.present = false;
  cts__writer.lost_taken = h->lost_taken;
  cts__writer.writer_time = h->start_us;
  cts__writer_process_run(h->watch_fd, h->program_pid);
}
