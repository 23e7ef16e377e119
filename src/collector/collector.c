/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* pipe2(), splice(), F_SETPIPE_SZ */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "os/os.h"
#include "os/output.h"

#define ACCEPTS_PER_WAKEUP 64
#define READS_PER_WAKEUP   8
/* When accept() fails for lack of descriptors the listening socket stays readable: pause
 * accepting for a while rather than spin. */
#define ACCEPT_PAUSE_MS 100
/* At shutdown, what is read from each connection before its file is finished: what the
 * kernel had already received, not what a client would go on sending. */
#define SHUTDOWN_DRAIN_BYTES (64u << 20)
/* The pipe that carries spliced bytes from a socket to a file: as large as the kernel lets
 * an unprivileged process make it (1 MiB by default), so that one splice moves as much as
 * one read of the receive buffer would. */
#define SPLICE_PIPE_SIZE (1 << 20)

typedef enum end_kind {
  END_PEER_CLOSED, /* end of stream */
  END_LOST,        /* read error (reset) */
  END_DROPPED,     /* a rule of ours */
  END_SHUTDOWN,
} end_kind_t;

typedef struct conn {
  int fd;
  char peer[CTS_NET_ADDR_STRLEN];
  cts_sink_t *sink;
  int64_t opened_ms, last_read_ms, pending_since_ms;
  uint64_t last_complete;
  uint64_t bytes_read; /* from the socket (the sink stops counting at an error) */
  bool pending;        /* a packet (or the first one) is on its way */
} conn_t;

struct cts_collector {
  cts_collector_config_t cfg;
  int dir_fd, listen_fd, wake_rd, wake_wr;
  /* Zero-copy receiving (trace_sink.h): bytes go socket -> pipe -> file without passing
   * through c->buf. -1 when splice is unavailable. */
  int pipe_rd, pipe_wr;
  size_t pipe_size;
  cts_net_addr_t addr;
  conn_t *conns;
  unsigned nconns;
  struct pollfd *pfds;
  uint8_t *buf;
  uint64_t serial;
  int64_t accept_paused_until;
  cts_collector_stats_t stats;
};

void cts_collector_config_init(cts_collector_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->max_clients = 256;
  cfg->packet_timeout_ms = 10000;
  cfg->max_packet_size = 1u << 20;
  cfg->recv_buffer_size = 1u << 20;
  cfg->validate = CTS_SINK_VALIDATE_PACKETS;
}

int cts_collector_create(cts_collector_t **out, const cts_collector_config_t *cfg, char *err,
                         size_t err_size) {
  *out = NULL;
  if (!cfg->dir || cfg->max_clients == 0 || cfg->recv_buffer_size < 4096) {
    snprintf(err, err_size, "invalid collector configuration");
    return -EINVAL;
  }
  cts_collector_t *c = calloc(1, sizeof *c);
  if (!c) goto nomem;
  c->cfg = *cfg;
  c->dir_fd = c->listen_fd = c->wake_rd = c->wake_wr = c->pipe_rd = c->pipe_wr = -1;
  c->conns = calloc(cfg->max_clients, sizeof *c->conns);
  c->pfds = calloc((size_t)cfg->max_clients + 2, sizeof *c->pfds);
  c->buf = malloc(cfg->recv_buffer_size);
  if (!c->conns || !c->pfds || !c->buf) goto nomem;
  int rc;
  c->dir_fd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (c->dir_fd < 0) {
    rc = -errno;
    snprintf(err, err_size, "cannot open the directory '%s': %s", cfg->dir, cts_os_strerror(rc));
    goto fail;
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    rc = -errno;
    snprintf(err, err_size, "cannot make a pipe: %s", cts_os_strerror(rc));
    goto fail;
  }
  c->wake_rd = wake[0];
  c->wake_wr = wake[1];
  int carry[2];
  if (pipe2(carry, O_CLOEXEC | O_NONBLOCK) == 0) {
    c->pipe_rd = carry[0];
    c->pipe_wr = carry[1];
    const int size = fcntl(c->pipe_wr, F_SETPIPE_SZ, SPLICE_PIPE_SIZE);
    c->pipe_size = size > 0 ? (size_t)size : (size_t)fcntl(c->pipe_wr, F_GETPIPE_SZ);
    if (c->pipe_size == 0 || c->pipe_size > (1u << 30)) c->pipe_size = 65536;
  }
  rc = cts_net_listen(&cfg->listen_addr, 128, true, &c->listen_fd);
  if (!rc) rc = cts_net_local_addr(c->listen_fd, &c->addr);
  if (rc) {
    char a[CTS_NET_ADDR_STRLEN];
    snprintf(err, err_size, "cannot listen on %s: %s",
             cts_net_addr_format(&cfg->listen_addr, a, sizeof a), cts_os_strerror(rc));
    goto fail;
  }
  *out = c;
  return 0;
nomem:
  rc = -ENOMEM;
  snprintf(err, err_size, "out of memory");
fail:
  cts_collector_destroy(c);
  return rc;
}

const cts_net_addr_t *cts_collector_address(const cts_collector_t *c) {
  return &c->addr;
}

void cts_collector_stop(cts_collector_t *c) {
  const char x = 's';
  const int saved = errno;
  if (write(c->wake_wr, &x, 1) < 0) { /* a full pipe already holds a stop request */
  }
  errno = saved;
}

void cts_collector_get_stats(const cts_collector_t *c, cts_collector_stats_t *out) {
  *out = c->stats;
  out->active = c->nconns;
}

/* "127.0.0.1:4242" -> "127.0.0.1-4242", "[::1]:4242" -> "::1-4242" (the sink turns the
 * remaining ':' into '_'). */
static void peer_tag(const char *peer, char *buf, size_t size) {
  size_t n = 0;
  const char *last_colon = strrchr(peer, ':');
  for (const char *p = peer; *p && n + 1 < size; p++) {
    if (*p == '[' || *p == ']') continue;
    buf[n++] = p == last_colon ? '-' : *p;
  }
  buf[n] = '\0';
}

static void end_conn(cts_collector_t *c, conn_t *k, end_kind_t kind, const char *why) {
  CTS_ASSERT(k >= c->conns && k < c->conns + c->nconns && k->fd >= 0 && k->sink);
  cts_sink_t *s = k->sink;
  const uint64_t received = k->bytes_read, complete = cts_sink_complete_bytes(s);
  const bool partial = cts_sink_has_info(s) && received > complete && !cts_sink_error(s);
  char status[512];
  switch (kind) {
    case END_PEER_CLOSED:
      snprintf(status, sizeof status, "closed by peer%s", partial ? " mid-packet" : "");
      break;
    case END_LOST:
      snprintf(status, sizeof status, "connection lost (%s)%s", why, partial ? " mid-packet" : "");
      break;
    case END_DROPPED:
      snprintf(status, sizeof status, "dropped (%s)", why);
      break;
    case END_SHUTDOWN:
      snprintf(status, sizeof status, "closed at shutdown%s", partial ? " mid-packet" : "");
      break;
  }
  const char *name = NULL;
  const int err = cts_sink_finish(s, &name);
  const double secs = (double)((int64_t)cts_mono_ms() - k->opened_ms) / 1000.0;
  if (name) {
    char cut[160] = "";
    if (received > complete)
      snprintf(cut, sizeof cut,
               "; dropped the last %llu bytes (incomplete or invalid packet at "
               "offset %llu)",
               (unsigned long long)(received - complete), (unsigned long long)complete);
    uint64_t count;
    const char *what = cts_sink_count(s, &count);
    cts_log_line(c->cfg.log, c->cfg.log_user_data,
                 "%s: %s: saved %s (%llu bytes, %llu %s, %llu packets, %.3f s)%s", k->peer, status,
                 name, (unsigned long long)complete, (unsigned long long)count, what,
                 (unsigned long long)cts_sink_packets(s), secs, cut);
    c->stats.saved++;
  } else if (err) {
    cts_log_line(c->cfg.log, c->cfg.log_user_data,
                 "%s: %s: cannot save the trace: %s (%llu bytes received)", k->peer, status,
                 cts_os_strerror(err), (unsigned long long)received);
    c->stats.dropped++;
  } else {
    cts_log_line(c->cfg.log, c->cfg.log_user_data,
                 "%s: %s: nothing saved (%llu bytes received, no complete trace header)", k->peer,
                 status, (unsigned long long)received);
    c->stats.dropped++;
  }
  c->stats.events += cts_sink_events(s);
  c->stats.allocations += cts_sink_allocations(s);
  cts_sink_destroy(s);
  close(k->fd);
  k->fd = -1;
  k->sink = NULL;
}

static void update_pending(conn_t *k, int64_t now) {
  const uint64_t complete = cts_sink_complete_bytes(k->sink);
  const bool pending = !cts_sink_has_info(k->sink) || cts_sink_received(k->sink) > complete;
  if (pending && (!k->pending || complete != k->last_complete)) k->pending_since_ms = now;
  k->pending = pending;
  k->last_complete = complete;
}

static void drop_splice(cts_collector_t *c) {
  close(c->pipe_rd);
  close(c->pipe_wr);
  c->pipe_rd = c->pipe_wr = -1;
}

/* Empties the pipe after a sink refused what it held. */
static void drain_pipe(cts_collector_t *c) {
  while (read(c->pipe_rd, c->buf, c->cfg.recv_buffer_size) > 0) {}
}

/* Ends a connection whose sink refused its bytes. */
static void end_invalid(cts_collector_t *c, conn_t *k) {
  const int err = cts_sink_error(k->sink);
  char why[400];
  if (err < 0 && err > -1000)
    snprintf(why, sizeof why, "%s", cts_sink_message(k->sink));
  else
    snprintf(why, sizeof why, "invalid data: %s", cts_sink_message(k->sink));
  end_conn(c, k, END_DROPPED, why);
}

/* Moves what a connection has sent from its socket into the pipe (the kernel passes the
 * socket's pages on rather than copying them): returns bytes moved, 0 at the end of the
 * stream, -EAGAIN when nothing is waiting, or another -errno. */
static ssize_t splice_in(cts_collector_t *c, conn_t *k) {
  for (;;) {
    const ssize_t n =
        splice(k->fd, NULL, c->pipe_wr, NULL, c->pipe_size, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return -errno;
  }
}

/* Handles what a read or a splice of a connection returned: true when it brought n bytes;
 * false when nothing was waiting (*again) or the connection ended (it is closed then). */
static bool took_bytes(cts_collector_t *c, conn_t *k, ssize_t n, int64_t now, bool *again) {
  *again = n == -EAGAIN;
  if (*again) return false;
  if (n <= 0) {
    if (n < 0)
      end_conn(c, k, END_LOST, cts_os_strerror((int)n));
    else
      end_conn(c, k, END_PEER_CLOSED, NULL);
    return false;
  }
  k->last_read_ms = now;
  k->bytes_read += (uint64_t)n;
  return true;
}

/* Reads what a connection has sent (a few buffers at most, for fairness). */
static void service(cts_collector_t *c, conn_t *k, int64_t now, unsigned max_reads) {
  /* An open connection: every path that ends one returns at once, and compact() drops
   * ended ones before the next poll. */
  CTS_ASSERT(k >= c->conns && k < c->conns + c->nconns && k->fd >= 0 && k->sink);
  for (unsigned r = 0; r < max_reads; r++) {
    const uint64_t before = cts_sink_received(k->sink);
    if (c->pipe_wr >= 0 && cts_sink_can_take_pipe(k->sink) &&
        (!c->cfg.max_bytes || c->cfg.max_bytes - before >= c->pipe_size)) {
      const ssize_t n = splice_in(c, k);
      if (n == -EINVAL || n == -ENOSYS) {
        drop_splice(c); /* not for this kind of socket: read instead from now on */
      } else {
        bool again;
        if (!took_bytes(c, k, n, now, &again)) {
          if (again) break;
          return;
        }
        c->stats.bytes += (uint64_t)n;
        if (cts_sink_feed_pipe(k->sink, c->pipe_rd, (size_t)n) != 0) {
          drain_pipe(c);
          end_invalid(c, k);
          return;
        }
        update_pending(k, now);
        if ((size_t)n < c->pipe_size) break;
        continue;
      }
    }
    const ssize_t n = cts_net_read(k->fd, c->buf, c->cfg.recv_buffer_size);
    bool again;
    if (!took_bytes(c, k, n, now, &again)) {
      if (again) break;
      return;
    }
    size_t take = (size_t)n;
    bool over = false;
    if (c->cfg.max_bytes && before + take > c->cfg.max_bytes) {
      take = (size_t)(c->cfg.max_bytes - before);
      over = true;
    }
    CTS_ASSERT(take <= (size_t)n && (size_t)n <= c->cfg.recv_buffer_size);
    c->stats.bytes += take;
    if (cts_sink_feed(k->sink, c->buf, take) != 0) {
      end_invalid(c, k);
      return;
    }
    if (over) {
      char why[96];
      snprintf(why, sizeof why, "trace larger than the limit of %llu bytes",
               (unsigned long long)c->cfg.max_bytes);
      end_conn(c, k, END_DROPPED, why);
      return;
    }
    update_pending(k, now);
    if ((size_t)n < c->cfg.recv_buffer_size) break;
  }
}

static void accept_clients(cts_collector_t *c, int64_t now) {
  for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
    int fd;
    cts_net_addr_t peer;
    const int rc = cts_net_accept(c->listen_fd, true, &fd, &peer);
    if (rc == -EAGAIN) return;
    if (rc == -ECONNABORTED) continue;
    if (rc) {
      cts_log_line(c->cfg.log, c->cfg.log_user_data, "cannot accept a connection: %s",
                   cts_os_strerror(rc));
      c->accept_paused_until = now + ACCEPT_PAUSE_MS;
      return;
    }
    char name[CTS_NET_ADDR_STRLEN];
    cts_net_addr_format(&peer, name, sizeof name);
    if (c->nconns == c->cfg.max_clients) {
      cts_log_line(c->cfg.log, c->cfg.log_user_data, "%s: refused: too many clients (max %u)", name,
                   c->cfg.max_clients);
      c->stats.refused++;
      close(fd);
      continue;
    }
    CTS_ASSERT(c->nconns < c->cfg.max_clients);
    conn_t *k = &c->conns[c->nconns];
    memset(k, 0, sizeof *k);
    memcpy(k->peer, name, sizeof name);
    char tag[CTS_NET_ADDR_STRLEN];
    peer_tag(name, tag, sizeof tag);
    cts_sink_config_t sc;
    cts_sink_config_init(&sc);
    sc.dir_fd = c->dir_fd;
    sc.tag = tag;
    sc.max_packet_size = c->cfg.max_packet_size;
    sc.validate = c->cfg.validate;
    sc.serial = ++c->serial;
    if (cts_sink_create(&k->sink, &sc) != 0) {
      cts_log_line(c->cfg.log, c->cfg.log_user_data, "%s: refused: out of memory", name);
      c->stats.refused++;
      close(fd);
      continue;
    }
    k->fd = fd;
    k->opened_ms = k->last_read_ms = k->pending_since_ms = now;
    k->pending = true;
    c->nconns++;
    c->stats.accepted++;
    if (c->cfg.log_connects) cts_log_line(c->cfg.log, c->cfg.log_user_data, "%s: connected", name);
  }
}

/* The earliest deadline of any connection, as a poll() timeout. */
static int next_timeout(const cts_collector_t *c, int64_t now) {
  int64_t first = INT64_MAX;
  for (unsigned i = 0; i < c->nconns; i++) {
    const conn_t *k = &c->conns[i];
    if (c->cfg.idle_timeout_ms && k->last_read_ms + c->cfg.idle_timeout_ms < first)
      first = k->last_read_ms + c->cfg.idle_timeout_ms;
    if (c->cfg.packet_timeout_ms && k->pending &&
        k->pending_since_ms + c->cfg.packet_timeout_ms < first)
      first = k->pending_since_ms + c->cfg.packet_timeout_ms;
  }
  if (c->accept_paused_until > now && c->accept_paused_until < first)
    first = c->accept_paused_until;
  if (first == INT64_MAX) return -1;
  return first <= now ? 0 : (int)(first - now < 3600000 ? first - now : 3600000);
}

static void check_timeouts(cts_collector_t *c, int64_t now) {
  for (unsigned i = 0; i < c->nconns; i++) {
    conn_t *k = &c->conns[i];
    if (k->fd < 0) continue;
    char why[128];
    if (c->cfg.idle_timeout_ms && now - k->last_read_ms >= c->cfg.idle_timeout_ms) {
      snprintf(why, sizeof why, "idle: nothing received for %.3f s",
               (double)c->cfg.idle_timeout_ms / 1000.0);
      end_conn(c, k, END_DROPPED, why);
    } else if (c->cfg.packet_timeout_ms && k->pending &&
               now - k->pending_since_ms >= c->cfg.packet_timeout_ms) {
      snprintf(why, sizeof why, "too slow: %s not complete after %.3f s",
               cts_sink_has_info(k->sink) ? "a packet was" : "the trace header was",
               (double)c->cfg.packet_timeout_ms / 1000.0);
      end_conn(c, k, END_DROPPED, why);
    }
  }
}

static void compact(cts_collector_t *c) {
  unsigned j = 0;
  for (unsigned i = 0; i < c->nconns; i++)
    if (c->conns[i].fd >= 0) c->conns[j++] = c->conns[i];
  c->nconns = j;
  CTS_ASSERT(c->nconns <= c->cfg.max_clients);
}

static void shut_down(cts_collector_t *c) {
  close(c->listen_fd);
  c->listen_fd = -1;
  const size_t per_buffer = SHUTDOWN_DRAIN_BYTES / c->cfg.recv_buffer_size;
  const unsigned reads = per_buffer ? (unsigned)per_buffer : 1;
  for (unsigned i = 0; i < c->nconns; i++) {
    conn_t *k = &c->conns[i];
    service(c, k, (int64_t)cts_mono_ms(), reads);
    if (k->fd >= 0) end_conn(c, k, END_SHUTDOWN, NULL);
  }
  c->nconns = 0;
}

int cts_collector_run(cts_collector_t *c) {
  for (;;) {
    int64_t now = (int64_t)cts_mono_ms();
    const bool accepting = c->accept_paused_until <= now;
    c->pfds[0] = (struct pollfd){.fd = c->wake_rd, .events = POLLIN};
    c->pfds[1] = (struct pollfd){.fd = accepting ? c->listen_fd : -1, .events = POLLIN};
    for (unsigned i = 0; i < c->nconns; i++)
      c->pfds[2 + i] = (struct pollfd){.fd = c->conns[i].fd, .events = POLLIN};
    const unsigned polled = c->nconns;
    const int n = poll(c->pfds, (nfds_t)polled + 2, next_timeout(c, now));
    if (n < 0 && errno != EINTR) {
      const int err = -errno;
      cts_log_line(c->cfg.log, c->cfg.log_user_data, "poll failed: %s", cts_os_strerror(err));
      shut_down(c);
      return err;
    }
    now = (int64_t)cts_mono_ms();
    if (n > 0 && c->pfds[0].revents) break;
    if (n > 0) {
      for (unsigned i = 0; i < polled; i++)
        if (c->pfds[2 + i].revents) service(c, &c->conns[i], now, READS_PER_WAKEUP);
    }
    check_timeouts(c, now);
    compact(c);
    if (n > 0 && c->pfds[1].revents) accept_clients(c, now);
  }
  char drain[64];
  while (read(c->wake_rd, drain, sizeof drain) > 0) {}
  shut_down(c);
  return 0;
}

void cts_collector_destroy(cts_collector_t *c) {
  if (!c) return;
  for (unsigned i = 0; i < c->nconns; i++) {
    if (c->conns[i].fd >= 0) close(c->conns[i].fd);
    cts_sink_destroy(c->conns[i].sink);
  }
  if (c->listen_fd >= 0) close(c->listen_fd);
  if (c->wake_rd >= 0) close(c->wake_rd);
  if (c->wake_wr >= 0) close(c->wake_wr);
  if (c->pipe_rd >= 0) drop_splice(c);
  if (c->dir_fd >= 0) close(c->dir_fd);
  free(c->conns);
  free(c->pfds);
  free(c->buf);
  free(c);
}
