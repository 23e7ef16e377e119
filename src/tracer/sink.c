/* SPDX-License-Identifier: MIT */
/* The sinks (cts_tracer_sink_t): a file, a descriptor, a callback, a TCP connection or the
 * service's client (tracer.h, "TCP sinks"; TCP listen is service.c), behind the optional
 * zstd stage (zsink.c, tracer.h "Compression"); and the tracer's log lines. Part
 * cts__sink: the writer's while a session runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "os/net.h"
#include "os/os.h"
#include "tracer_state.h"

cts__sink_state_t cts__sink = {.fd = -1};

/* Says once per session, on the program's side, that a peer stalled the trace: a writer
 * process's stderr is /dev/null, so the program's threads say it for it (cts__ring_wake, the
 * session's stop). */
void cts__report_stall(void) {
  if (!atomic_load_explicit(&cts__ctl->stalled, memory_order_relaxed) ||
      atomic_exchange(&cts__ctl->stall_reported, true))
    return;
  const uint32_t ms = cts__session.cfg.stall_timeout_ms;
  cts__tracer_log(&cts__sink.sink,
                  "the trace reader took nothing for %u.%03u s: tracing stopped, the program runs "
                  "on untraced (CTFSCOPE_STALL_TIMEOUT)",
                  ms / 1000u, ms % 1000u);
}

/* Writes to our non-blocking socket, waiting for room as long as the peer takes something
 * at least every stall_timeout_ms (lossless; 0: for ever), or, in drop mode once stopping,
 * until the peer has taken nothing for DROP_GIVE_UP_MS. */
static int socket_write(const char *p, size_t len) {
  uint64_t stalled_since = 0;
  const bool drop = cts__session.cfg.drop_when_full;
  while (len) {
    const ssize_t n = cts_net_write(cts__sink.fd, p, len);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      stalled_since = 0;
      continue;
    }
    if (n == 0) return -EPIPE;
    if (n != -EAGAIN) return (int)n;
    const uint64_t bound =
        drop ? (atomic_load_explicit(&cts__ctl->stopping, memory_order_relaxed) ? DROP_GIVE_UP_MS
                                                                                : 0)
             : cts__session.cfg.stall_timeout_ms;
    if (bound) {
      const uint64_t now = cts_mono_ms();
      if (!stalled_since) {
        stalled_since = now;
      } else if (now - stalled_since >= bound) {
        if (!drop) {
          /* The writer fails with this error: sampling stops and waiting threads go on. */
          atomic_store(&cts__ctl->stalled, true);
          if (!cts__session.writer_process) cts__report_stall();
        }
        return -ETIMEDOUT;
      }
    }
    cts_net_wait(cts__sink.fd, true, 100);
  }
  return 0;
}

/* The trace file again, by its path, after the program closed our descriptor (common/held_fd.h):
 * the same file (device and inode), positioned where the trace goes on, with the flock
 * `record` waits for taken again. 0, or -EBADF if it cannot be the same file. */
static int reopen_trace_file(uint64_t offset) {
  if (cts__sink.sink.kind != CTS_TRACER_SINK_FILE || !cts__sink.path[0]) return -EBADF;
  const int fd = cts_fd_set_aside(open(cts__sink.path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0) return -EBADF;
  if (!cts_fd_still(fd, cts__sink.fd_ident) || lseek(fd, (off_t)offset, SEEK_SET) < 0) {
    close(fd);
    return -EBADF;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* ignored: only a courtesy */
  }
  cts__sink.fd = fd;
  return 0;
}

/* Whether the sink's descriptor may be written: a writer thread's lives among the
 * program's descriptors, which the program may close and reuse (common/held_fd.h); a writer
 * process holds its own. A trace file closed by the program is opened again. */
static int sink_fd_usable(uint64_t offset) {
  if (cts__wproc.owner_watch_fd >= 0 || cts_fd_still(cts__sink.fd, cts__sink.fd_ident)) return 0;
  const int e = reopen_trace_file(offset);
  if (e) {
    cts__tracer_log(&cts__sink.sink,
                    "the program closed the trace's descriptor (%d) and it cannot be opened "
                    "again: tracing stopped, the program runs on",
                    cts__sink.fd);
    cts__sink.fd = -1; /* the number is the program's now: never written nor closed */
  }
  return e;
}

/* tracer_state.h. */
int cts__sink_check(void) {
  return cts__sink.fd < 0 ? -EBADF : sink_fd_usable(cts__sink.bytes_written);
}

/* Where the trace's bytes go, after the zstd stage if there is one. */
int cts__raw_write(void *user_data, const void *buf, size_t len) {
  (void)user_data;
  if (CTS_UNLIKELY(cts__sink.discard != 0)) {
    const size_t n = len < cts__sink.discard ? len : (size_t)cts__sink.discard;
    cts__sink.discard -= n;
    cts__sink.bytes_written += n;
    buf = (const unsigned char *)buf + n;
    len -= n;
    if (!len) return 0;
  }
  const uint64_t offset = cts__sink.bytes_written;
  cts__sink.bytes_written += len;
  if (cts__sink.sink.kind == CTS_TRACER_SINK_CALLBACK)
    return cts__sink.sink.write(cts__sink.sink.write_user_data, buf, len);
  if (cts__sink.fd < 0) return -EBADF;
  const int e = sink_fd_usable(offset);
  if (e) return e;
  if (cts__sink.socket_sink) return socket_write(buf, len);
  return cts_os_fd_write((void *)(intptr_t)cts__sink.fd, buf, len);
}

/* The memtrace writer's output. */
int cts__sink_write(void *user_data, const void *buf, size_t len) {
  return cts__sink.zsink ? cts__zsink_write(cts__sink.zsink, buf, len)
                         : cts__raw_write(user_data, buf, len);
}

/* Takes over the connected socket `fd` as the sink (closed by cts__close_sink, or here). */
static int adopt_socket(int fd, cts_fd_aside_t *aside) {
  fd = cts_fd_set_aside_in(aside, fd);
  if (fd < 0) return -EMFILE;
  const int e = cts_net_set_nonblocking(fd, true);
  if (e) {
    close(fd);
    return e;
  }
  cts__sink.fd = fd;
  cts__sink.fd_ident = cts_fd_ident(fd);
  cts__sink.own_fd = true;
  cts__sink.socket_sink = true;
  return 0;
}

/* How long a trace file that is a FIFO may go without a reader before the program runs
 * untraced: its reader may be started with the program (`record -o fifo -- prog & cat fifo`). */
#define FIFO_READER_WAIT_MS 1000

/* open(path) for writing, created if need be, close-on-exec; O_NONBLOCK, so that a FIFO
 * nobody reads (`record -o fifo` with its reader never started) does not block the
 * program's start for ever, as a plain open did: ENXIO after FIFO_READER_WAIT_MS, and the
 * program runs untraced. The caller clears O_NONBLOCK for what is not a regular file. */
static int open_without_waiting(const char *path) {
  for (int waited_ms = 0;; waited_ms += 10) {
    const int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd >= 0 || errno != ENXIO || waited_ms >= FIFO_READER_WAIT_MS) return fd;
    const struct timespec step = {0, 10 * 1000 * 1000};
    nanosleep(&step, NULL);
  }
}

int cts__open_sink(const cts_tracer_sink_t *sink, int socket_fd, cts_fd_aside_t *aside) {
  cts__sink.fd = -1;
  cts__sink.own_fd = false;
  cts__sink.socket_sink = false;
  if (socket_fd >= 0) return adopt_socket(socket_fd, aside);
  switch (sink->kind) {
    case CTS_TRACER_SINK_FILE: {
      if (!sink->path || !sink->path[0]) return CTS_E_INVAL;
      cts__copy_string(cts__sink.path, sizeof cts__sink.path, sink->path);
      /* Off 0-2: a program started with stdout closed would write into the trace. */
      const int fd = cts_fd_set_aside_in(aside, open_without_waiting(cts__sink.path));
      if (fd < 0) return -errno;
      /* As memtrace: refuse a file another process is tracing into, then truncate it
       * (errors ignored so that /dev/null works). */
      if (lockf(fd, F_TLOCK, 0) != 0 && errno != EINVAL) {
        const int e = -errno;
        close(fd);
        return e;
      }
      /* Not when it is empty already (a new file: every traced image's): on ext4, a file
       * truncated to size 0 is written back when it is closed (the auto_da_alloc
       * heuristic), 0.3 ms of CPU per image here. */
      struct stat st;
      const bool known = fstat(fd, &st) == 0;
      /* The writes to a FIFO or a device wait, as a plain open's would. */
      if ((!known || !S_ISREG(st.st_mode)) && fcntl(fd, F_SETFL, O_WRONLY) != 0) {
        const int e = -errno;
        close(fd);
        return e;
      }
      /* Never a user's file that is not a trace (`record -o main.c`, an exec'd image's
       * name taken by something else): truncating it would destroy it. Looked at only
       * when there is something in it (a trace recorded again). */
      if (known && st.st_size != 0) {
        const int readable = open(cts__sink.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        const bool other = readable >= 0 && cts_os_fd_holds_other_data(readable);
        if (readable >= 0) close(readable);
        if (other) {
          close(fd);
          return CTS_E_NOT_A_TRACE;
        }
      }
      if (!known || st.st_size != 0) {
        if (ftruncate(fd, 0) != 0) { /* ignored */
        }
      }
      cts__sink.fd_ident = known ? cts_fd_ident_of(&st) : cts_fd_ident(fd);
      /* Also an flock, held while any copy of the descriptor is open, the writer
       * process's included: `ctfscope record` waits for it to go before reading the
       * trace of a program that was killed (its writer process finishes the trace). */
      if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* ignored: only a courtesy */
      }
      cts__sink.fd = fd;
      cts__sink.own_fd = true;
      return 0;
    }
    case CTS_TRACER_SINK_FD:
      if (sink->fd < 0) return CTS_E_INVAL;
      cts__sink.fd = sink->fd;
      cts__sink.fd_ident = cts_fd_ident(sink->fd);
      return 0;
    case CTS_TRACER_SINK_CALLBACK:
      return sink->write ? 0 : CTS_E_INVAL;
    case CTS_TRACER_SINK_TCP_CONNECT: {
      if (!sink->address || !sink->address[0]) return CTS_E_INVAL;
      cts_net_addr_t addr;
      char err[CTS_NET_ERR_LEN];
      int e = cts_net_parse_connect(sink->address, &addr, err, sizeof err);
      if (e) return e;
      int fd;
      e = cts_net_connect(&addr, sink->connect_timeout_ms ? (int)sink->connect_timeout_ms : -1,
                          &fd);
      return e ? e : adopt_socket(fd, aside);
    }
    default:
      return CTS_E_INVAL;
  }
}

void cts__close_sink(void) {
  cts__zsink_close(cts__sink.zsink);
  cts__sink.zsink = NULL;
  /* Not a number the program closed and took for a file of its own (common/held_fd.h). */
  if (cts__sink.own_fd && cts__sink.fd >= 0 &&
      (cts__wproc.owner_watch_fd >= 0 || cts_fd_still(cts__sink.fd, cts__sink.fd_ident))) {
    if (cts__sink.socket_sink) {
      /* End the stream with a FIN even if a copy of the descriptor lives on, and read what
       * the peer sent, so that closing does not turn into a reset that could discard the
       * last packet on its way. */
      shutdown(cts__sink.fd, SHUT_WR);
      char sink_buf[4096];
      for (int i = 0; i < 256 && cts_net_read(cts__sink.fd, sink_buf, sizeof sink_buf) > 0; i++) {}
    }
    close(cts__sink.fd);
  }
  cts__sink.fd = -1;
  cts__sink.own_fd = false;
  cts__sink.socket_sink = false;
}

/* tracer_state.h. In a forked child: the copies of the parent's sockets, trace file and
 * compressor go. The file's copy held its flock (one lock per open file description, the
 * parent's and the writer's copies share it): a child that outlives its parent, a daemon
 * (nginx's master, forked by the command it was started as), kept `ctfscope record`
 * waiting 10 s for a trace that was whole, then saying it was still being written. */
void cts__sink_atfork_child(void) {
  if (cts__sink.socket_sink || cts__sink.own_fd)
    cts_fd_close_held(&cts__sink.fd, cts__sink.fd_ident);
  cts__sink.fd = -1;
  cts__sink.socket_sink = false;
  cts__sink.own_fd = false;
  cts__zsink_close(cts__sink.zsink); /* a copy of the parent's compressor state */
  cts__sink.zsink = NULL;
}

void cts__tracer_log(const cts_tracer_sink_t *sink, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (sink->log) {
    sink->log(sink->log_user_data, line);
    return;
  }
  char out[sizeof line + 16];
  const int n = snprintf(out, sizeof out, "ctfscope: %s\n", line);
  if (n > 0 && write(STDERR_FILENO, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1) < 0) {
    /* nowhere else to say it */
  }
}
