/* SPDX-License-Identifier: MIT */
/* The kind of a trace from its first bytes (load.h), without taking them from a pipe. */
#define _GNU_SOURCE /* tee(2) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../os/mprof_ring.h"
#include "load.h"

/* -e for a failed call's errno e, never 0: the callers return it as their error. */
static int fail(int e) {
  return e > 0 ? -e : CTS_E_IO;
}

/* Whether the bytes look like TSDL text (a CTF `metadata` file): its comment header, or one
 * of the top-level blocks, within the first bytes. Packetized metadata has its own magic. */
static bool is_ctf_metadata(const uint8_t *b, size_t n) {
  if (n >= 4 && b[0] == 0x57 && b[1] == 0x1d && b[2] == 0xd1 && b[3] == 0x75) return true;
  static const char *const marks[] = {"/* CTF",  "typealias", "trace {", "trace{",
                                      "clock {", "stream {",  "event {", "env {"};
  for (size_t i = 0; i < n; i++)
    if (b[i] == 0 || (b[i] < 0x20 && b[i] != '\n' && b[i] != '\t' && b[i] != '\r')) return false;
  for (size_t k = 0; k < CTS_ARRAY_SIZE(marks); k++) {
    const size_t len = strlen(marks[k]);
    for (size_t i = 0; i + len <= n; i++)
      if (memcmp(b + i, marks[k], len) == 0) return true;
  }
  return false;
}

/* Up to `size` bytes at the head of fd without taking them: pread on a file (standard input
 * only at its start), tee(2) on a pipe (waiting up to 2 s for at least `want` bytes, or the
 * writer's end). 0 for anything else (a terminal, a socket): it is read as a stream. */
static size_t peek(int fd, uint8_t *head, size_t size, size_t want, bool *is_file) {
  struct stat st;
  *is_file = false;
  if (fstat(fd, &st) != 0) return 0;
  if (S_ISREG(st.st_mode)) {
    *is_file = true;
    const off_t at = lseek(fd, 0, SEEK_CUR);
    const ssize_t n = at == 0 ? pread(fd, head, size, 0) : -1;
    return n > 0 ? (size_t)n : 0;
  }
  if (!S_ISFIFO(st.st_mode)) return 0;
  int copy[2];
  if (pipe2(copy, O_CLOEXEC | O_NONBLOCK) != 0) return 0;
  size_t n = 0;
  for (int tries = 0; tries < 200; tries++) {
    const ssize_t t = tee(fd, copy[1], size, SPLICE_F_NONBLOCK);
    if (t > 0) { /* a fresh copy of what is there: the first bytes, again */
      n = 0;
      ssize_t r;
      while (n < (size_t)t && (r = read(copy[0], head + n, (size_t)t - n)) > 0) n += (size_t)r;
    } else if (t == 0 || errno != EAGAIN) {
      break; /* the writer is gone and nothing is left, or not a pipe tee works on */
    }
    if (n >= want) break;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 10) > 0 && (pf.revents & POLLHUP) && n > 0) break; /* all there is */
    if (n > 0) usleep(10000); /* bytes, but too few yet: poll would return at once */
  }
  close(copy[0]);
  close(copy[1]);
  return n;
}

/* A task trace on a pipe (`what` names it): copied into an unlinked temporary file, since
 * task traces are read at offsets (a ring wraps). *out gets the file, at offset 0. Returns
 * 0 or -errno (logged). */
static int spool(int fd, const char *what, int *out, const cts_log_t *log) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !dir[0]) dir = "/tmp";
  const int tmp = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (tmp < 0) {
    const int e = errno;
    cts_logf(log, CTS_LOG_ERROR, "cannot keep the task trace from %s in %s: %s", what, dir,
             strerror(e));
    return fail(e);
  }
  static uint8_t buf[1u << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      cts_logf(log, CTS_LOG_ERROR, "cannot read %s: %s", what, strerror(e));
      close(tmp);
      return fail(e);
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = write(tmp, buf + done, (size_t)(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        const int e = errno;
        cts_logf(log, CTS_LOG_ERROR, "cannot keep the task trace from %s in %s: %s", what, dir,
                 strerror(e));
        close(tmp);
        return fail(e);
      }
      done += w;
    }
  }
  if (lseek(tmp, 0, SEEK_SET) != 0) {
    const int e = errno;
    cts_logf(log, CTS_LOG_ERROR, "cannot read %s back: %s", what, strerror(e));
    close(tmp);
    return fail(e);
  }
  *out = tmp;
  return 0;
}

/* A task trace piped into standard input: spooled, and the copy becomes standard input. */
static int spool_stdin(const cts_log_t *log) {
  int tmp;
  const int err = spool(STDIN_FILENO, "standard input", &tmp, log);
  if (err) return err;
  const bool ok = dup2(tmp, STDIN_FILENO) == STDIN_FILENO;
  const int e = errno;
  close(tmp);
  if (!ok) {
    cts_logf(log, CTS_LOG_ERROR, "cannot read standard input back: %s", strerror(e));
    return fail(e);
  }
  return 0;
}

/* A path that is a pipe (a FIFO, <(...)): opened once here and read through that descriptor
 * from now on (cts_os_input_register); a task trace is spooled first. Returns 0 with the
 * head bytes peeked in head[0..*n), or an error (logged). */
static int open_pipe(const char *path, int fd, uint8_t *head, size_t size, size_t *n,
                     const cts_log_t *log) {
  bool is_file;
  *n = peek(fd, head, size, 20, &is_file);
  if (*n >= 20 && cts_mprof_is_trace(head, *n)) {
    int tmp;
    const int err = spool(fd, path, &tmp, log);
    close(fd);
    if (err) return err;
    fd = tmp;
  }
  if (cts_os_input_register(path, fd) != 0) {
    close(fd);
    cts_logf(log, CTS_LOG_ERROR, "%s: too many piped inputs", path);
    return CTS_E_LIMIT;
  }
  return 0;
}

int cts_trace_detect(const char *path, cts_trace_kind_t *kind, bool strict, const cts_log_t *log) {
  *kind = CTS_TRACE_MEMTRACE;
  if (strcmp(path, "-") == 0) {
    /* memtrace streams on as it is; a task trace is recognised by its first bytes. */
    uint8_t head[64];
    bool is_file;
    const size_t n = peek(STDIN_FILENO, head, sizeof head, 20, &is_file);
    if (n < 20 || !cts_mprof_is_trace(head, n)) return 0;
    *kind = CTS_TRACE_TASKS;
    return is_file ? 0 : spool_stdin(log);
  }
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/stream", path);
    if (access(sub, R_OK) == 0)
      cts_logf(log, CTS_LOG_ERROR, "'%s' is a directory (a CTF trace): pass its stream file, '%s'",
               path, sub);
    else
      cts_logf(log, CTS_LOG_ERROR, "'%s' is a directory: pass a trace file", path);
    return -EISDIR;
  }
  const int fd = cts_os_open_input(path);
  if (fd < 0) {
    if (!strict) return 0; /* the reader says it its way */
    cts_logf(log, CTS_LOG_ERROR, "cannot read '%s': %s", path, strerror(-fd));
    return fd;
  }
  uint8_t head[256];
  ssize_t n;
  if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
    size_t got;
    const int err = open_pipe(path, fd, head, sizeof head, &got, log);
    if (err) return err;
    n = (ssize_t)got;
  } else {
    do n = pread(fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    const int read_errno = errno;
    close(fd);
    if (n < 0) {
      if (!strict) return 0;
      cts_logf(log, CTS_LOG_ERROR, "cannot read '%s': %s", path, strerror(read_errno));
      return fail(read_errno);
    }
  }
  if (n >= 20 && cts_mprof_is_trace(head, (size_t)n)) {
    *kind = CTS_TRACE_TASKS;
    return 0;
  }
  /* memtrace packets start with the CTF magic c1 1f fc c1; gzip with 1f 8b, zstd with
   * 28 b5 2f fd. An empty file or a short one is left to the memtrace reader, whose errors
   * name the offset. */
  if (n < 4 || (head[0] == 0xc1 && head[1] == 0x1f && head[2] == 0xfc && head[3] == 0xc1) ||
      (head[0] == 0x1f && head[1] == 0x8b) ||
      (head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd) ||
      (head[0] == 0x5c && head[1] == 0x2a && head[2] == 0x4d && head[3] == 0x18)) /* -z's */
    return 0;
  if (is_ctf_metadata(head, (size_t)n)) {
    const char *slash = strrchr(path, '/');
    cts_logf(log, CTS_LOG_ERROR,
             "%s: this is CTF metadata (the TSDL text describing a trace), not a trace: pass the "
             "stream file next to it (in %.*s)",
             path, slash ? (int)(slash - path) : 1, slash ? path : ".");
    return CTS_E_BAD_MAGIC;
  }
  if (!strict) return 0;
  cts_logf(
      log, CTS_LOG_ERROR,
      "%s: not a trace: neither memtrace nor mirage-profile CTF (it starts with bytes %02x %02x "
      "%02x %02x, not the CTF packet magic c1 1f fc c1, gzip's 1f 8b or zstd's 28 b5 2f fd)",
      path, head[0], head[1], head[2], head[3]);
  return CTS_E_BAD_MAGIC;
}
