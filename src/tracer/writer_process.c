/* SPDX-License-Identifier: MIT */
/* The writer process (tracer.h, "The writer process"): forked twice so that it is nobody's
 * child, it runs the writer loop on the shared mapping until the program stops the session
 * or is gone (a hang-up on the watch pipe); the program watches it through a pidfd. Part
 * cts__wproc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "tracer_state.h"

cts__writer_proc_t cts__wproc = {.writer_pidfd = -1, .owner_fd = -1, .owner_watch_fd = -1};
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
 * init-like programs, container shims). The writer is made nobody's child by its parent's
 * exit, which hands an orphan to the nearest subreaper: this program. It would then see the
 * writer in wait() (one that reaps every child before it exits waited forever, the writer
 * waiting for its end) and get its SIGCHLD. Such a program gets a writer thread. */
static bool program_is_subreaper(void) {
  int subreaper = 0;
  return prctl(PR_GET_CHILD_SUBREAPER, &subreaper, 0L, 0L, 0L) == 0 && subreaper != 0;
}

/* Whether a session into `sink` can have a writer process: the sinks it can write to
 * alone (a callback, a clock callback or the service's client belong to this process). */
bool cts__process_writer_fits(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int socket_fd) {
  return cfg->writer == CTS_TRACER_WRITER_PROCESS && socket_fd < 0 && !sink->clock &&
         (sink->kind == CTS_TRACER_SINK_FILE || sink->kind == CTS_TRACER_SINK_FD ||
          sink->kind == CTS_TRACER_SINK_TCP_CONNECT) &&
         !program_is_subreaper();
}

/* Keeps descriptors `a` and `b` (-1: none), points 0-2 at /dev/null otherwise, and closes
 * every other one: the writer process must not hold the program's pipes and sockets open. */
static void keep_only_fds(int a, int b) {
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; fd++)
    if (fd != a && fd != b && null_fd >= 0 && null_fd != fd) dup2(null_fd, fd);
  int keep[2] = {a < b ? a : b, a < b ? b : a};
  unsigned next = 3;
  for (int i = 0; i < 2; i++) {
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
  cts__wproc.owner_watch_fd = watch_fd;
  cts__wproc.traced_pid = program;
  keep_only_fds(cts__sink.fd, watch_fd);
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
    cts__wproc.writer_pidfd = cts_fd_off_stdio((int)syscall(SYS_pidfd_open, pid, 0));
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
 * initial one (on_initial_stack). */
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

/* Whether this thread runs on the process's initial stack, which grows on demand: within
 * 1 MiB below its top (`__libc_stack_end`, the loader's; the kernel keeps other mappings a
 * guard gap of 1 MiB away from it). Not on a stack a program made itself (a coroutine's),
 * where the intermediate's frames below ours could land on the program's data. */
static bool on_initial_stack(void) {
  extern void *__libc_stack_end;
  const uintptr_t top = (uintptr_t)__libc_stack_end, here = (uintptr_t)__builtin_frame_address(0);
  return here < top && top - here < ((uintptr_t)1 << 20);
}

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
  args.watch[1] = cts_fd_off_stdio(args.watch[1]);
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
   * more threads, those go on running: a fork() of the program and a wait. */
  const bool lazy = __libc_single_threaded;
  const pid_t middle =
      !lazy ? fork()
      : SHARED_MIDDLE && on_initial_stack() && !under_valgrind()
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
