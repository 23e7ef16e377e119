/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* accept4() */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"

static int fail_msg(char *err, size_t err_size, const char *spec, const char *why) {
  if (err && err_size) snprintf(err, err_size, "'%s': %s", spec, why);
  return -EINVAL;
}

/* A decimal port, 0 to 65535, nothing else (no sign, no spaces, no "0x"). */
static bool parse_port(const char *s, bool allow_zero, uint16_t *port) {
  if (!*s || strlen(s) > 5) return false;
  unsigned long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (unsigned long)(*p - '0');
  }
  if (v > 65535 || (v == 0 && !allow_zero)) return false;
  *port = (uint16_t)v;
  return true;
}

/* Resolves host (numeric first, so that addresses never touch the resolver) and stores the
 * first IPv4 or IPv6 result with the port. */
static int resolve(const char *spec, const char *host, uint16_t port, cts_net_addr_t *out,
                   char *err, size_t err_size) {
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
  struct addrinfo *res = NULL;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc == EAI_NONAME) {
    hints.ai_flags = AI_ADDRCONFIG;
    rc = getaddrinfo(host, NULL, &hints, &res);
  }
  if (rc != 0) {
    if (err && err_size)
      snprintf(err, err_size, "'%s': cannot resolve '%s': %s", spec, host, gai_strerror(rc));
    return -EINVAL;
  }
  const struct addrinfo *found = NULL;
  for (const struct addrinfo *a = res; a && !found; a = a->ai_next)
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
        a->ai_addrlen <= sizeof out->storage)
      found = a;
  if (!found) {
    freeaddrinfo(res);
    return fail_msg(err, err_size, spec, "no IPv4 or IPv6 address for this host");
  }
  memset(out, 0, sizeof *out);
  memcpy(&out->storage, found->ai_addr, found->ai_addrlen);
  out->len = (socklen_t)found->ai_addrlen;
  if (found->ai_family == AF_INET)
    ((struct sockaddr_in *)&out->storage)->sin_port = htons(port);
  else
    ((struct sockaddr_in6 *)&out->storage)->sin6_port = htons(port);
  freeaddrinfo(res);
  return 0;
}

/* Splits "HOST:PORT" or "[HOST]:PORT" into host and port strings in buf. A spec without a
 * colon is a lone port when lone_port_ok (host is then NULL). */
static int split_host_port(const char *spec, bool lone_port_ok, char *buf, size_t buf_size,
                           const char **host, const char **port, char *err, size_t err_size) {
  const size_t n = strlen(spec);
  if (n == 0) return fail_msg(err, err_size, spec, "empty address");
  if (n >= buf_size) return fail_msg(err, err_size, spec, "address too long");
  memcpy(buf, spec, n + 1);
  if (buf[0] == '[') {
    char *close = strchr(buf, ']');
    if (!close) return fail_msg(err, err_size, spec, "'[' without a closing ']'");
    if (close[1] != ':') return fail_msg(err, err_size, spec, "expected ':PORT' after ']'");
    *close = '\0';
    *host = buf + 1;
    *port = close + 2;
    if (!**host) return fail_msg(err, err_size, spec, "empty address between '[' and ']'");
    return 0;
  }
  char *colon = strrchr(buf, ':');
  if (!colon) {
    if (!lone_port_ok) return fail_msg(err, err_size, spec, "expected HOST:PORT");
    *host = NULL;
    *port = buf;
    return 0;
  }
  if (strchr(buf, ':') != colon)
    return fail_msg(err, err_size, spec, "an IPv6 address needs brackets: [ADDR]:PORT");
  *colon = '\0';
  if (colon == buf) return fail_msg(err, err_size, spec, "missing address before ':'");
  *host = buf;
  *port = colon + 1;
  return 0;
}

int cts_net_parse_listen(const char *spec, cts_net_addr_t *out, char *err, size_t err_size) {
  char buf[256];
  const char *host, *port_s;
  int rc = split_host_port(spec, true, buf, sizeof buf, &host, &port_s, err, err_size);
  if (rc) return rc;
  uint16_t port;
  if (!parse_port(port_s, true, &port))
    return fail_msg(err, err_size, spec, "the port must be a number from 0 to 65535");
  return resolve(spec, host ? host : "127.0.0.1", port, out, err, err_size);
}

int cts_net_parse_connect(const char *spec, cts_net_addr_t *out, char *err, size_t err_size) {
  char buf[256];
  const char *host, *port_s;
  int rc = split_host_port(spec, false, buf, sizeof buf, &host, &port_s, err, err_size);
  if (rc) return rc;
  uint16_t port;
  if (!parse_port(port_s, false, &port))
    return fail_msg(err, err_size, spec, "the port must be a number from 1 to 65535");
  return resolve(spec, host, port, out, err, err_size);
}

const char *cts_net_addr_format(const cts_net_addr_t *addr, char *buf, size_t size) {
  char host[INET6_ADDRSTRLEN + 1];
  const struct sockaddr *sa = (const struct sockaddr *)&addr->storage;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
  } else {
    snprintf(buf, size, "(address family %d)", sa->sa_family);
  }
  return buf;
}

uint16_t cts_net_addr_port(const cts_net_addr_t *addr) {
  const struct sockaddr *sa = (const struct sockaddr *)&addr->storage;
  if (sa->sa_family == AF_INET) return ntohs(((const struct sockaddr_in *)sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
  return 0;
}

int cts_net_set_nonblocking(int fd, bool nonblocking) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -errno;
  const int want = nonblocking ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
  if (want != flags && fcntl(fd, F_SETFL, want) < 0) return -errno;
  return 0;
}

int cts_net_set_buffer_size(int fd, bool receive, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, receive ? SO_RCVBUF : SO_SNDBUF, &bytes, sizeof bytes) != 0)
    return -errno;
  return 0;
}

int cts_net_listen(const cts_net_addr_t *addr, int backlog, bool nonblocking, int *fd_out) {
  const int family = ((const struct sockaddr *)&addr->storage)->sa_family;
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -errno;
  const int one = 1;
  int rc = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, (const struct sockaddr *)&addr->storage, addr->len) != 0 || listen(fd, backlog) != 0)
    rc = -errno;
  if (rc) {
    close(fd);
    return rc;
  }
  *fd_out = fd;
  return 0;
}

int cts_net_local_addr(int fd, cts_net_addr_t *out) {
  memset(out, 0, sizeof *out);
  out->len = sizeof out->storage;
  if (getsockname(fd, (struct sockaddr *)&out->storage, &out->len) != 0) return -errno;
  return 0;
}

int cts_net_accept(int lfd, bool nonblocking, int *fd_out, cts_net_addr_t *peer) {
  cts_net_addr_t tmp;
  cts_net_addr_t *a = peer ? peer : &tmp;
  for (;;) {
    memset(a, 0, sizeof *a);
    a->len = sizeof a->storage;
    const int fd = accept4(lfd, (struct sockaddr *)&a->storage, &a->len,
                           SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0));
    if (fd >= 0) {
      *fd_out = fd;
      return 0;
    }
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
}

int cts_net_wait(int fd, bool for_write, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = for_write ? POLLOUT : POLLIN};
  const int n = poll(&p, 1, timeout_ms < 0 ? -1 : timeout_ms);
  if (n < 0) return -errno;
  return n > 0 ? 1 : 0;
}

int cts_net_connect(const cts_net_addr_t *addr, int timeout_ms, int *fd_out) {
  const int family = ((const struct sockaddr *)&addr->storage)->sa_family;
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  int rc = 0;
  if (connect(fd, (const struct sockaddr *)&addr->storage, addr->len) != 0) {
    if (errno != EINPROGRESS) {
      rc = -errno;
      goto end;
    }
    /* Wait for the handshake, restarting after signals but keeping the overall deadline. */
    const int64_t deadline = timeout_ms < 0 ? 0 : (int64_t)cts_mono_ms() + timeout_ms;
    for (;;) {
      const int left = timeout_ms < 0 ? -1 : (int)(deadline - (int64_t)cts_mono_ms());
      if (timeout_ms >= 0 && left <= 0) {
        rc = -ETIMEDOUT;
        goto end;
      }
      const int w = cts_net_wait(fd, true, left);
      if (w == -EINTR) continue;
      if (w < 0) {
        rc = w;
        goto end;
      }
      if (w == 0) continue; /* the deadline check above ends the loop */
      break;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0)
      rc = -errno;
    else if (so_error)
      rc = -so_error;
    if (rc) goto end;
  }
  rc = cts_net_set_nonblocking(fd, false);
end:
  if (rc) {
    close(fd);
    return rc;
  }
  *fd_out = fd;
  return 0;
}

ssize_t cts_net_read(int fd, void *buf, size_t len) {
  for (;;) {
    const ssize_t n = recv(fd, buf, len, 0);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == ENOTSOCK) {
      const ssize_t m = read(fd, buf, len);
      if (m >= 0) return m;
      if (errno == EINTR) continue;
    }
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
}

ssize_t cts_net_write(int fd, const void *buf, size_t len) {
  for (;;) {
    const ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == ENOTSOCK) {
      const ssize_t m = write(fd, buf, len);
      if (m >= 0) return m;
      if (errno == EINTR) continue;
    }
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  }
}

int cts_net_write_all(int fd, const void *buf, size_t len, int timeout_ms) {
  const uint8_t *p = buf;
  const int64_t deadline = timeout_ms < 0 ? 0 : (int64_t)cts_mono_ms() + timeout_ms;
  while (len > 0) {
    const ssize_t n = cts_net_write(fd, p, len);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) return -EPIPE; /* a zero-byte send of a non-empty buffer: give up */
    if (n != -EAGAIN) return (int)n;
    const int left = timeout_ms < 0 ? -1 : (int)(deadline - (int64_t)cts_mono_ms());
    if (timeout_ms >= 0 && left <= 0) return -ETIMEDOUT;
    const int w = cts_net_wait(fd, true, left);
    if (w < 0 && w != -EINTR) return w;
  }
  return 0;
}
