/* SPDX-License-Identifier: MIT */
/* TCP helpers shared by the collector, `ctfscope fetch` and the tracer's network sinks:
 * address parsing and formatting, listening and connecting sockets, and non-blocking I/O
 * that retries EINTR and never raises SIGPIPE.
 *
 * Conventions: functions return 0 (or a byte count) or a negative error, -errno for system
 * calls, as everywhere in ctfscope. Functions that can fail for reasons errno cannot name
 * (a host name that does not resolve) also fill a caller buffer with a message, as redis's
 * anet does. Every descriptor made here is close-on-exec, so a traced program that execs
 * does not leak its trace socket into the child. Nothing here allocates, except the
 * resolver inside getaddrinfo() for names that are not numeric addresses. */
#ifndef CTS_OS_NET_H
#define CTS_OS_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* An IPv4 or IPv6 socket address with its length. */
typedef struct cts_net_addr {
  struct sockaddr_storage storage;
  socklen_t len;
} cts_net_addr_t;

/* Room for any formatted address: "[ffff:...:ffff%interface]:65535". */
#define CTS_NET_ADDR_STRLEN 80
/* Room for the message of a failed parse or resolution. */
#define CTS_NET_ERR_LEN 160

/* Parses a listening address, "[ADDR:]PORT": "4242", "127.0.0.1:4242", "0.0.0.0:4242",
 * "[::1]:4242", "[::]:4242", "localhost:4242". Without an address it is 127.0.0.1: a
 * trace collector is reachable from the network only when the user says so. Port 0 asks
 * the kernel for a free port (see cts_net_local_addr()). Returns 0 or -EINVAL with a
 * message in err. */
int cts_net_parse_listen(const char *spec, cts_net_addr_t *out, char *err, size_t err_size);

/* Parses a peer address, "HOST:PORT" or "[IPV6]:PORT" (the port is required and not 0).
 * HOST may be a name; the first IPv4 or IPv6 address it resolves to is used. Returns 0 or
 * -EINVAL with a message in err. */
int cts_net_parse_connect(const char *spec, cts_net_addr_t *out, char *err, size_t err_size);

/* Formats an address as "127.0.0.1:4242" or "[::1]:4242" into buf (CTS_NET_ADDR_STRLEN
 * bytes are always enough) and returns buf. */
const char *cts_net_addr_format(const cts_net_addr_t *addr, char *buf, size_t size);

/* The port of addr (host byte order). */
uint16_t cts_net_addr_port(const cts_net_addr_t *addr);

/* Makes a listening TCP socket bound to addr with SO_REUSEADDR (a restarted collector can
 * bind again at once) and the given backlog. The socket is non-blocking when nonblocking
 * is true. Sets *fd_out; returns 0 or -errno. */
int cts_net_listen(const cts_net_addr_t *addr, int backlog, bool nonblocking, int *fd_out);

/* The address a socket is bound to (learns the port the kernel chose for port 0). */
int cts_net_local_addr(int fd, cts_net_addr_t *out);

/* Accepts one connection from listening socket lfd. The new socket is non-blocking when
 * nonblocking is true; peer (may be NULL) receives the client's address. Returns 0,
 * -EAGAIN when no connection is waiting on a non-blocking lfd, or another -errno. */
int cts_net_accept(int lfd, bool nonblocking, int *fd_out, cts_net_addr_t *peer);

/* Connects a TCP socket to addr, waiting at most timeout_ms (negative: the system's own
 * timeout). The returned socket is blocking, with TCP_NODELAY off. Returns 0, -ETIMEDOUT,
 * -ECONNREFUSED or another -errno. */
int cts_net_connect(const cts_net_addr_t *addr, int timeout_ms, int *fd_out);

/* Sets or clears O_NONBLOCK. */
int cts_net_set_nonblocking(int fd, bool nonblocking);

/* Sets SO_RCVBUF or SO_SNDBUF (bytes; the kernel may round it). */
int cts_net_set_buffer_size(int fd, bool receive, int bytes);

/* One read: the byte count, 0 at the end of the stream, -EAGAIN when a non-blocking socket
 * has nothing, or another -errno (-ECONNRESET for a peer that reset). EINTR is retried. */
ssize_t cts_net_read(int fd, void *buf, size_t len);

/* One write: the byte count (possibly short), -EAGAIN when a non-blocking socket is full,
 * or another -errno (-EPIPE when the peer is gone; no SIGPIPE is raised). EINTR is
 * retried. */
ssize_t cts_net_write(int fd, const void *buf, size_t len);

/* Writes all len bytes to a blocking or non-blocking socket, waiting for room with poll()
 * for at most timeout_ms in total (negative: forever). Returns 0, -ETIMEDOUT, or another
 * -errno. */
int cts_net_write_all(int fd, const void *buf, size_t len, int timeout_ms);

/* Waits until fd is readable (or writable) for at most timeout_ms (negative: forever).
 * Returns 1 when ready (including on errors and hang-ups, which the next read or write
 * reports), 0 on timeout, or -errno (-EINTR when a signal arrived). */
int cts_net_wait(int fd, bool for_write, int timeout_ms);

#endif /* CTS_OS_NET_H */
