/* SPDX-License-Identifier: MIT */
/* Test helper: a child process driven through pipes (stdin, stdout, stderr), for victims
 * that run while a test talks to them and to their trace reader, and loopback sockets.
 * Every wait has a deadline, so a hang fails the test instead of blocking the run. */
#ifndef CTS_TEST_DRIVEN_H
#define CTS_TEST_DRIVEN_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "os/net.h"

static inline int64_t drv_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void drv_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

typedef struct driven {
  pid_t pid;
  int in, out, err; /* our ends; -1 once closed */
  char out_buf[1 << 16];
  size_t out_len, out_pos; /* read so far; consumed by drv_line */
  char err_buf[1 << 14];
  size_t err_len;
} driven_t;

/* Starts argv with stdin, stdout and stderr on pipes. env: "NAME=VALUE" strings put into
 * the child's environment (NULL-terminated; may be NULL), after LD_PRELOAD and the
 * MEMTRACE variables were removed. */
static inline bool drv_start(driven_t *d, char *const argv[], const char *const env[]) {
  memset(d, 0, sizeof *d);
  int in[2], out[2], err[2];
  if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) return false;
  fflush(NULL);
  d->pid = fork();
  if (d->pid < 0) return false;
  if (d->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    unsetenv("LD_PRELOAD");
    unsetenv("MEMTRACE");
    unsetenv("MEMTRACE_RATE");
    unsetenv("MEMTRACE_DROP");
    for (size_t i = 0; env && env[i]; i++) putenv((char *)env[i]);
    execv(argv[0], argv);
    _exit(127);
  }
  close(in[0]), close(out[1]), close(err[1]);
  d->in = in[1];
  d->out = out[0];
  d->err = err[0];
  fcntl(d->out, F_SETFL, O_NONBLOCK);
  fcntl(d->err, F_SETFL, O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN); /* a victim that died must not kill the test */
  return true;
}

static inline void drv_drain(int *fd, char *buf, size_t cap, size_t *len) {
  while (*fd >= 0) {
    const ssize_t n = read(*fd, buf + *len, cap - 1 - *len);
    if (n > 0) {
      *len += (size_t)n;
      buf[*len] = '\0';
      if (*len == cap - 1) *len = 0; /* overflow: keep going, start over */
      continue;
    }
    if (n == 0) {
      close(*fd);
      *fd = -1;
    }
    return;
  }
}

/* Waits up to timeout_ms for output, and reads what there is. */
static inline void drv_pump(driven_t *d, int timeout_ms) {
  struct pollfd p[2] = {{.fd = d->out, .events = POLLIN}, {.fd = d->err, .events = POLLIN}};
  if (poll(p, 2, timeout_ms) <= 0) return;
  drv_drain(&d->out, d->out_buf, sizeof d->out_buf, &d->out_len);
  drv_drain(&d->err, d->err_buf, sizeof d->err_buf, &d->err_len);
}

/* Waits until stderr contains needle; false after timeout_ms. */
static inline bool drv_wait_err(driven_t *d, const char *needle, int timeout_ms) {
  const int64_t end = drv_now_ms() + timeout_ms;
  while (!strstr(d->err_buf, needle)) {
    if (drv_now_ms() > end || (d->err < 0 && d->out < 0)) return false;
    drv_pump(d, 50);
  }
  return true;
}

/* The next line of stdout (without its newline) into line; false after timeout_ms. */
static inline bool drv_line(driven_t *d, char *line, size_t size, int timeout_ms) {
  const int64_t end = drv_now_ms() + timeout_ms;
  for (;;) {
    const char *const start = d->out_buf + d->out_pos;
    const char *const nl = strchr(start, '\n');
    if (nl) {
      const size_t n = (size_t)(nl - start);
      snprintf(line, size, "%.*s", (int)n, start);
      d->out_pos += n + 1;
      return true;
    }
    if (drv_now_ms() > end || d->out < 0) {
      snprintf(line, size, "(no line: %s)", d->out < 0 ? "stdout closed" : "timeout");
      return false;
    }
    drv_pump(d, 50);
  }
}

/* Sends one command line and returns its reply in reply. */
static inline bool drv_command(driven_t *d, const char *cmd, char *reply, size_t size,
                               int timeout_ms) {
  char buf[256];
  const int n = snprintf(buf, sizeof buf, "%s\n", cmd);
  if (write(d->in, buf, (size_t)n) != n) {
    snprintf(reply, size, "(cannot write the command)");
    return false;
  }
  return drv_line(d, reply, size, timeout_ms);
}

/* Closes stdin, reads everything, and waits for the exit (SIGKILL after timeout_ms).
 * Returns the exit code, 128 + signal, or -1 if it had to be killed. */
static inline int drv_finish(driven_t *d, int timeout_ms) {
  if (d->in >= 0) close(d->in);
  d->in = -1;
  const int64_t end = drv_now_ms() + timeout_ms;
  while ((d->out >= 0 || d->err >= 0) && drv_now_ms() < end) drv_pump(d, 50);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(d->pid, &status, WNOHANG);
    if (r == d->pid) break;
    if (drv_now_ms() > end) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &status, 0);
      status = -1;
      break;
    }
    drv_sleep_ms(10);
  }
  if (d->out >= 0) close(d->out);
  if (d->err >= 0) close(d->err);
  d->out = d->err = -1;
  if (status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- loopback sockets ----------------------------------------------------------------- */

/* A listening socket on 127.0.0.1 with a free port; rcvbuf > 0 sets the accepted
 * sockets' receive buffer (small: a slow reader fills it fast). */
static inline int drv_listen(uint16_t *port, int rcvbuf) {
  cts_net_addr_t a;
  int fd;
  if (cts_net_parse_listen("127.0.0.1:0", &a, NULL, 0) != 0 || cts_net_listen(&a, 8, false, &fd))
    return -1;
  if (rcvbuf > 0) cts_net_set_buffer_size(fd, true, rcvbuf);
  if (cts_net_local_addr(fd, &a) != 0) return -1;
  *port = cts_net_addr_port(&a);
  return fd;
}

/* Accepts one connection within timeout_ms; -1 if none came. */
static inline int drv_accept(int lfd, int timeout_ms) {
  if (cts_net_wait(lfd, false, timeout_ms) <= 0) return -1;
  int fd;
  return cts_net_accept(lfd, false, &fd, NULL) == 0 ? fd : -1;
}

static inline int drv_connect(uint16_t port) {
  char spec[32];
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  cts_net_addr_t a;
  int fd;
  if (cts_net_parse_connect(spec, &a, NULL, 0) != 0 || cts_net_connect(&a, 5000, &fd) != 0)
    return -1;
  return fd;
}

/* A growable byte buffer. */
typedef struct drv_bytes {
  uint8_t *data;
  size_t len, cap;
} drv_bytes_t;

static inline void drv_bytes_add(drv_bytes_t *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + n) cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) abort();
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

/* One read of at most max bytes (waiting up to timeout_ms): the count, 0 at EOF, -1 if
 * nothing came or on error. */
static inline ssize_t drv_read_some(int fd, drv_bytes_t *b, size_t max, int timeout_ms) {
  if (cts_net_wait(fd, false, timeout_ms) <= 0) return -1;
  uint8_t buf[65536];
  const ssize_t n = cts_net_read(fd, buf, max < sizeof buf ? max : sizeof buf);
  if (n > 0) drv_bytes_add(b, buf, (size_t)n);
  return n < 0 ? -1 : n;
}

/* The length of the longest prefix of a memtrace stream made of whole packets. */
static inline size_t drv_whole_packets(const drv_bytes_t *b) {
  size_t off = 0;
  while (off + 8 <= b->len) {
    uint32_t bits;
    memcpy(&bits, b->data + off + 4, 4);
    if (bits / 8 < 8 || off + bits / 8 > b->len) break;
    off += bits / 8;
  }
  return off;
}

#endif /* CTS_TEST_DRIVEN_H */
