/* SPDX-License-Identifier: MIT */
/* The writer process (tracer.h, "The writer process"): forked twice so that it is nobody's
 * child, it runs the writer loop on the shared mapping until the program stops the session
 * or is gone (a hang-up on the watch pipe); the program watches it through a pidfd. Part
 * cts__wproc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tracer_state.h"

cts__writer_proc_t cts__wproc = {.writer_pidfd = -1, .owner_fd = -1, .owner_watch_fd = -1};
CTS__TLS bool cts__spawning_writer;

/* Whether this session's writer process has exited (killed: it could not say so). */
bool cts__writer_process_gone(void) {
  if (cts__wproc.writer_pidfd >= 0) {
    struct pollfd p = {.fd = cts__wproc.writer_pidfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
  }
  const pid_t pid = (pid_t)atomic_load(&cts__ctl->writer_pid);
  return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* The writer process: whether the program's end of the watch pipe is closed (it exited,
 * was killed or exec'd; its forked children close their copies). */
bool cts__owner_is_gone(void) {
  struct pollfd p = {.fd = cts__wproc.owner_watch_fd, .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

/* Whether a session into `sink` can have a writer process: the sinks it can write to
 * alone (a callback, a clock callback or the service's client belong to this process). */
bool cts__process_writer_fits(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink,
                              int socket_fd) {
  return cfg->writer == CTS_TRACER_WRITER_PROCESS && socket_fd < 0 && !sink->clock &&
         (sink->kind == CTS_TRACER_SINK_FILE || sink->kind == CTS_TRACER_SINK_FD ||
          sink->kind == CTS_TRACER_SINK_TCP_CONNECT);
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
  cts__writer_main(NULL);
  /* The program is released; `record` still waits for the sink's lock. */
  cts__symbolizer_save(cts__writer.symbolizer);
  cts__close_sink();
  _exit(0);
}

/* Forks the writer process, twice, so that it is nobody's child: the program never sees it
 * in wait(), and it lives on when the program dies, to finish the trace. 0, or -errno. */
int cts__spawn_writer_process(void) {
  int watch[2];
  if (pipe2(watch, O_CLOEXEC) != 0) return -errno;
  const pid_t program = getpid();
  atomic_store(&cts__ctl->writer_pid, 0);
  cts__spawning_writer = true;
  const pid_t middle = fork();
  if (middle == 0) {
    close(watch[1]); /* the writer process must see the program's end close */
    /* Its own session, no signals and its name before the program goes on
     * (cts__session_start_locked does not wait for the writer): a Ctrl-C sent to the program's
     * process group at once must not reach it, and `ps` shows it as it is from the start.
     * The mask and the name are inherited; the session is the grandchild's own, and this
     * process waits for it (the pipe's end closed) before it exits. */
    prctl(PR_SET_NAME, "ctfscope-writer");
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    int led[2];
    const bool sync = pipe2(led, O_CLOEXEC) == 0;
    const pid_t pid = fork();
    if (pid == 0) {
      setsid();
      if (sync) close(led[0]), close(led[1]);
      writer_process_main(watch[0], program);
    }
    if (sync) {
      close(led[1]);
      char byte;
      while (pid > 0 && read(led[0], &byte, 1) < 0 && errno == EINTR) {}
    }
    atomic_store(&cts__ctl->writer_pid, pid > 0 ? pid : -1);
    _exit(0);
  }
  const int e = middle < 0 ? -errno : 0;
  cts__spawning_writer = false;
  if (middle > 0)
    while (waitpid(middle, NULL, 0) < 0 && errno == EINTR) {}
  close(watch[0]);
  const pid_t pid = atomic_load(&cts__ctl->writer_pid);
  if (e || pid <= 0) {
    close(watch[1]);
    return e ? e : -EAGAIN;
  }
  cts__wproc.owner_fd = watch[1];
  /* Without pidfds (Linux < 5.3), cts__writer_process_gone() uses kill(pid, 0). */
  cts__wproc.writer_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  return 0;
}

/* After the session: the pipe and the pidfd go. */
void cts__forget_writer_process(void) {
  if (cts__wproc.owner_fd >= 0) close(cts__wproc.owner_fd);
  if (cts__wproc.writer_pidfd >= 0) close(cts__wproc.writer_pidfd);
  cts__wproc.owner_fd = cts__wproc.writer_pidfd = -1;
  atomic_store(&cts__ctl->writer_pid, 0);
}
