/* SPDX-License-Identifier: MIT */
/* The TCP_LISTEN sink (tracer.h, "TCP sinks"): the program serves its trace to one client
 * at a time, as memtrace-mirage does. A service thread owns the listening socket; when a
 * client connects it starts a session streaming to that client (a fresh trace), and when
 * the client half-closes, disconnects or fails, it stops the session, which sends the
 * last packet and closes the connection. A client arriving while another is served is
 * accepted and closed at once, with a log line. The thread runs guarded (nothing it
 * allocates is traced) and with every signal blocked. */
#define _GNU_SOURCE
#include "session.h"
#include "service.h"
#include "tracer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/held_fd.h"
#include "os/net.h"

/* How often the thread checks the session for a sink error the socket did not show. */
#define ERROR_CHECK_MS 250
/* How often an idle thread checks that its descriptors are still its own (common/held_fd.h): a
 * program that closed them all cannot wake it through the pipe at its end. */
#define IDLE_CHECK_MS 1000

static struct {
  int listen_fd;
  int wake_rd, wake_wr;
  /* What they named when made: the program may close them and take their numbers for
   * its own sockets and files (common/held_fd.h). */
  cts_fd_ident_t listen_id, wake_rd_id, wake_wr_id;
  int client_fd; /* the served client's socket (owned by its session), or -1 */
  char client_name[CTS_NET_ADDR_STRLEN];
  uint16_t port;
  pthread_t thread;
  cts_tracer_config_t cfg; /* copies, with the strings below */
  cts_tracer_sink_t sink;
  char context[4096];
  char exe[4096];
  atomic_bool stop;
  int last_error; /* of the last client's session */
  /* Counters, read by cts_tracer_get_stats() from any thread. */
  atomic_uint_fast64_t clients, refused;
  atomic_bool serving;
} S = {.listen_fd = -1, .wake_rd = -1, .wake_wr = -1, .client_fd = -1};

/* Closes the service's descriptors that are still its own, and forgets them all. */
static void close_descriptors(void) {
  cts_fd_close_held(&S.listen_fd, S.listen_id);
  cts_fd_close_held(&S.wake_rd, S.wake_rd_id);
  cts_fd_close_held(&S.wake_wr, S.wake_wr_id);
}

/* Whether the program left the service's descriptors alone: polling or accepting on a
 * number it closed and reused would take its own clients. */
static bool descriptors_intact(void) {
  return cts_fd_still(S.listen_fd, S.listen_id) && cts_fd_still(S.wake_rd, S.wake_rd_id) &&
         cts_fd_still(S.wake_wr, S.wake_wr_id);
}

/* Ends the served client's session: the last packet goes out, the connection closes. */
static void end_client(void) {
  cts__control_lock();
  const int e = cts__session_stop();
  cts__control_unlock();
  if (e != CTS_E_STATE) S.last_error = e;
  S.client_fd = -1; /* closed by the session */
  atomic_store(&S.serving, false);
}

static void accept_clients(void) {
  for (;;) {
    int fd;
    cts_net_addr_t peer;
    const int rc = cts_net_accept(S.listen_fd, true, &fd, &peer);
    if (rc == -EAGAIN) return;
    if (rc == -ECONNABORTED || rc == -EINTR) continue;
    if (rc) {
      cts__tracer_log(&S.sink, "cannot accept a client: %s", strerror(-rc));
      return;
    }
    char name[CTS_NET_ADDR_STRLEN];
    cts_net_addr_format(&peer, name, sizeof name);
    if (S.client_fd >= 0) {
      cts__tracer_log(&S.sink, "refused a client from %s: the trace is being served to %s", name,
                      S.client_name);
      close(fd);
      atomic_fetch_add(&S.refused, 1);
      continue;
    }
    cts__control_lock();
    const int e =
        atomic_load(&S.stop) ? CTS_E_STATE : cts__session_start_socket(&S.cfg, &S.sink, fd);
    cts__control_unlock();
    if (e) {
      if (e != CTS_E_STATE)
        cts__tracer_log(&S.sink, "cannot trace for the client from %s: %s", name,
                        e > -1000 ? strerror(-e) : cts_strerror(e));
      continue; /* fd was closed by the failed start */
    }
    S.client_fd = fd;
    memcpy(S.client_name, name, sizeof name);
    atomic_fetch_add(&S.clients, 1);
    atomic_store(&S.serving, true);
  }
}

/* True when the client has half-closed, closed or failed. Whatever it sends is ignored. */
static bool client_gone(short revents) {
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return false;
  char buf[1024];
  for (int i = 0; i < 64; i++) {
    const ssize_t n = cts_net_read(S.client_fd, buf, sizeof buf);
    if (n == -EAGAIN) return false;
    if (n <= 0) return true;
  }
  return false;
}

static void *service_main(void *arg) {
  (void)arg;
  cts__guard_enter(); /* for life */
  while (!atomic_load(&S.stop)) {
    struct pollfd p[3] = {{.fd = S.wake_rd, .events = POLLIN},
                          {.fd = S.listen_fd, .events = POLLIN},
                          {.fd = S.client_fd, .events = POLLIN}};
    const int n = poll(p, 3, S.client_fd >= 0 ? ERROR_CHECK_MS : IDLE_CHECK_MS);
    if (n < 0 && errno != EINTR) {
      cts__tracer_log(&S.sink, "the trace service stops: poll: %s", strerror(errno));
      break;
    }
    if (atomic_load(&S.stop)) break;
    if (!descriptors_intact()) {
      cts__tracer_log(&S.sink,
                      "the program closed the trace service's descriptors: the "
                      "service stops, the program runs on untraced");
      break;
    }
    if (n > 0 && p[0].revents) {
      char drain[64];
      while (read(S.wake_rd, drain, sizeof drain) > 0) {}
    }
    if (S.client_fd >= 0 && ((n > 0 && client_gone(p[2].revents)) || cts__session_error() != 0))
      end_client();
    if (n > 0 && (p[1].revents & POLLIN)) accept_clients();
  }
  if (S.client_fd >= 0) end_client();
  return NULL;
}

int cts__service_start(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink) {
  if (!sink->address || !sink->address[0]) return CTS_E_INVAL;
  cts_net_addr_t addr;
  char err[CTS_NET_ERR_LEN];
  int e = cts_net_parse_listen(sink->address, &addr, err, sizeof err);
  if (e) return e;
  S.cfg = *cfg;
  S.sink = *sink;
  S.sink.address = NULL; /* not kept: the caller's */
  S.sink.path = NULL;
  if (cfg->context) {
    strncpy(S.context, cfg->context, sizeof S.context - 1);
    S.cfg.context = S.context;
  }
  if (cfg->executable_name) {
    strncpy(S.exe, cfg->executable_name, sizeof S.exe - 1);
    S.cfg.executable_name = S.exe;
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return -errno;
  /* Off 0-2: a program started with one closed would find ours there. */
  S.wake_rd = cts_fd_set_aside(wake[0]);
  S.wake_wr = cts_fd_set_aside(wake[1]);
  if (S.wake_rd < 0 || S.wake_wr < 0) {
    e = -EMFILE;
    goto fail;
  }
  S.wake_rd_id = cts_fd_ident(wake[0]);
  S.wake_wr_id = cts_fd_ident(wake[1]);
  e = cts_net_listen(&addr, 8, true, &S.listen_fd);
  if (!e && (S.listen_fd = cts_fd_set_aside(S.listen_fd)) < 0) e = -EMFILE;
  cts_net_addr_t bound;
  if (!e) e = cts_net_local_addr(S.listen_fd, &bound);
  if (e) goto fail;
  S.listen_id = cts_fd_ident(S.listen_fd);
  S.port = cts_net_addr_port(&bound);
  S.client_fd = -1;
  S.last_error = 0;
  atomic_store(&S.stop, false);
  atomic_store(&S.clients, 0);
  atomic_store(&S.refused, 0);
  atomic_store(&S.serving, false);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  e = -pthread_create(&S.thread, NULL, service_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) goto fail;
  pthread_setname_np(S.thread, "ctfscope-serve");
  return 0;
fail:
  if (S.listen_fd >= 0) close(S.listen_fd); /* just made: still ours */
  if (S.wake_rd >= 0) close(S.wake_rd);
  if (S.wake_wr >= 0) close(S.wake_wr);
  S.listen_fd = S.wake_rd = S.wake_wr = -1;
  S.port = 0;
  return e;
}

int cts__service_stop(void) {
  atomic_store(&S.stop, true);
  const char x = 's';
  /* Not into a number the program took over: the thread then sees `stop` within
   * IDLE_CHECK_MS. */
  if (cts_fd_still(S.wake_wr, S.wake_wr_id) && write(S.wake_wr, &x, 1) < 0) {
    /* a full pipe already holds a wake-up */
  }
  pthread_join(S.thread, NULL);
  close_descriptors();
  S.port = 0;
  return S.last_error;
}

void cts__service_atfork_child(void) {
  close_descriptors();
  S.client_fd = -1; /* closed with the session's socket */
  S.port = 0;
  atomic_store(&S.serving, false);
}

uint16_t cts__service_port(void) {
  return S.listen_fd >= 0 ? S.port : 0;
}

void cts__service_add_stats(cts_tracer_stats_t *out) {
  out->clients = atomic_load(&S.clients);
  out->refused = atomic_load(&S.refused);
  out->serving = atomic_load(&S.serving);
}
