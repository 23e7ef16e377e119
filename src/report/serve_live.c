/* SPDX-License-Identifier: MIT */
/* Live mode of `ctfscope serve` (see serve.h): one tracing connection, validated as it
 * arrives by the collector's trace sink (format detection, every memtrace event decoded,
 * task-trace packets framed). Bytes are held until the sink has seen their packet complete,
 * then appended to a snapshot file, so the snapshot is always a valid trace that ends on a
 * packet boundary.
 *
 * The document is rebuilt from the snapshot by the report's own loaders (the same figures
 * as `ctfscope report`), at most once per refresh period and only when something changed.
 * A rebuild reads the whole snapshot, so it runs in a forked child process that writes the
 * document to a memory file and reports on a pipe: the loop keeps answering requests and
 * reading the trace meanwhile. A rebuild that took d ms waits at least d ms before the next,
 * so on a large trace the page updates every 2d rather than every second.
 *
 * Memory in this process: the receive buffer, the bytes of at most one incomplete packet
 * (bounded by the sink's packet limit), and the last document; the aggregation lives in the
 * child. The "live" member: state (waiting, receiving, ended), generation, trace_port, peer,
 * format, bytes (the snapshot's size when the rebuild started: the child may read a few
 * more complete packets), packets, build_ms (how long the previous rebuild took),
 * updated_unix_ms, message (how the connection ended). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../collector/trace_sink.h"
#include "../common/compiler.h"
#include "../os/os.h"
#include "../os/output.h"
#include "serve.h"

#define RECV_SIZE      (256u * 1024u)
#define READS_PER_POLL 8
#define SNAPSHOT_NAME  "live.ctf"

enum live_state { L_WAITING, L_RECEIVING, L_ENDED };

struct cts__serve_live {
  cts_serve_config_t cfg;
  int listen_fd, fd, dir_fd, snap_fd;
  cts_net_addr_t addr;
  char addr_text[CTS_NET_ADDR_STRLEN];
  char peer[CTS_NET_ADDR_STRLEN];
  char dir[512];
  cts_sink_t *sink;
  cts_sink_format_t format;
  uint64_t serial;
  uint8_t *buf;
  uint8_t *pend; /* stream bytes from snap_len on, not yet known to be in complete packets */
  size_t pend_len, pend_cap;
  uint64_t snap_len, received, packets;
  enum live_state state;
  bool claimed; /* a connection delivered a trace header: no other one is taken */
  int64_t conn_since_ms;
  char message[CTS_NET_ADDR_STRLEN + 336];
  /* what the current document was built from */
  bool built_any;
  uint64_t built_len, generation;
  enum live_state built_state;
  int64_t next_build_ms, build_ms;
  /* the rebuilding child process, if one runs */
  pid_t child;
  int child_fd, child_memfd; /* its status pipe and its document */
  uint64_t child_len, child_generation;
  enum live_state child_state;
  int64_t child_started_ms;
  cts__serve_blob_t *ready; /* its finished document, not yet handed out */
};

/* One line on the service's log (stderr when it has none). */
#define log_line(owner, ...) cts_log_line((owner)->cfg.log, (owner)->cfg.log_user_data, __VA_ARGS__)

int cts__serve_live_create(cts__serve_live_t **out, const cts_serve_config_t *cfg, char *err,
                           size_t err_size) {
  *out = NULL;
  cts__serve_live_t *l = calloc(1, sizeof *l);
  if (!l || !(l->buf = malloc(RECV_SIZE))) {
    free(l);
    snprintf(err, err_size, "out of memory");
    return -ENOMEM;
  }
  l->cfg = *cfg;
  l->listen_fd = l->fd = l->dir_fd = l->snap_fd = -1;
  l->child = -1;
  l->child_fd = l->child_memfd = -1;
  int rc;
  const char *tmp = getenv("TMPDIR");
  snprintf(l->dir, sizeof l->dir, "%s/ctfscope-serve-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(l->dir)) {
    rc = -errno;
    snprintf(err, err_size, "cannot create a temporary directory '%s': %s", l->dir,
             cts_os_strerror(rc));
    l->dir[0] = '\0';
    goto fail;
  }
  l->dir_fd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  l->snap_fd = l->dir_fd < 0 ? -1
                             : openat(l->dir_fd, SNAPSHOT_NAME,
                                      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (l->snap_fd < 0) {
    rc = -errno;
    snprintf(err, err_size, "cannot create a file in '%s': %s", l->dir, cts_os_strerror(rc));
    goto fail;
  }
  rc = cts_net_listen(&cfg->trace_addr, 8, true, &l->listen_fd);
  if (!rc) rc = cts_net_local_addr(l->listen_fd, &l->addr);
  if (rc) {
    char a[CTS_NET_ADDR_STRLEN];
    snprintf(err, err_size, "cannot listen on %s: %s",
             cts_net_addr_format(&cfg->trace_addr, a, sizeof a), cts_os_strerror(rc));
    goto fail;
  }
  cts_net_addr_format(&l->addr, l->addr_text, sizeof l->addr_text);
  *out = l;
  return 0;
fail:
  cts__serve_live_destroy(l);
  return rc;
}

const cts_net_addr_t *cts__serve_live_address(const cts__serve_live_t *l) {
  return &l->addr;
}

unsigned cts__serve_live_pollfds(cts__serve_live_t *l, struct pollfd *p) {
  unsigned n = 0;
  if (l->listen_fd >= 0) p[n++] = (struct pollfd){.fd = l->listen_fd, .events = POLLIN};
  if (l->fd >= 0) p[n++] = (struct pollfd){.fd = l->fd, .events = POLLIN};
  if (l->child_fd >= 0) p[n++] = (struct pollfd){.fd = l->child_fd, .events = POLLIN};
  return n;
}

static void end_conn(cts__serve_live_t *l, const char *fmt, ...) CTS_PRINTF(2, 3);
static void end_conn(cts__serve_live_t *l, const char *fmt, ...) {
  char why[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (l->claimed) {
    snprintf(l->message, sizeof l->message, "%s: %s", l->peer, why);
    log_line(l, "%s: %s: %llu bytes in %llu complete packets shown", l->peer, why,
             (unsigned long long)l->snap_len, (unsigned long long)cts_sink_packets(l->sink));
    l->state = L_ENDED;
  } else {
    log_line(l, "%s: %s: no trace received (%llu bytes)", l->peer, why,
             (unsigned long long)l->received);
  }
  l->packets = cts_sink_packets(l->sink);
  cts_sink_destroy(l->sink); /* removes its copy of the stream: the snapshot has it */
  l->sink = NULL;
  close(l->fd);
  l->fd = -1;
  l->pend_len = 0;
}

/* Moves the bytes the sink now knows to be in complete packets to the snapshot. */
static int flush_complete(cts__serve_live_t *l) {
  const uint64_t complete = cts_sink_complete_bytes(l->sink);
  if (complete <= l->snap_len) return 0;
  const size_t n = (size_t)(complete - l->snap_len);
  if (n > l->pend_len) return -EINVAL; /* cannot happen: pend holds every byte after snap_len */
  const int err = cts_os_fd_write((void *)(intptr_t)l->snap_fd, l->pend, n);
  if (err) return err;
  memmove(l->pend, l->pend + n, l->pend_len - n);
  l->pend_len -= n;
  l->snap_len = complete;
  return 0;
}

static int pend_append(cts__serve_live_t *l, const uint8_t *p, size_t n) {
  if (l->pend_len + n > l->pend_cap) {
    size_t cap = l->pend_cap ? l->pend_cap : RECV_SIZE;
    while (l->pend_len + n > cap) cap *= 2;
    uint8_t *np = realloc(l->pend, cap);
    if (!np) return -ENOMEM;
    l->pend = np;
    l->pend_cap = cap;
  }
  memcpy(l->pend + l->pend_len, p, n);
  l->pend_len += n;
  return 0;
}

static void service(cts__serve_live_t *l, unsigned max_reads) {
  for (unsigned r = 0; r < max_reads && l->fd >= 0; r++) {
    const ssize_t n = cts_net_read(l->fd, l->buf, RECV_SIZE);
    if (n == -EAGAIN) return;
    if (n == 0) {
      end_conn(l, "closed by peer");
      return;
    }
    if (n < 0) {
      end_conn(l, "connection lost (%s)", cts_os_strerror((int)n));
      return;
    }
    l->received += (uint64_t)n;
    if (pend_append(l, l->buf, (size_t)n) != 0) {
      end_conn(l, "out of memory");
      return;
    }
    const int fed = cts_sink_feed(l->sink, l->buf, (size_t)n);
    if (!l->claimed && cts_sink_has_info(l->sink)) {
      l->claimed = true;
      l->state = L_RECEIVING;
      l->format = cts_sink_format(l->sink);
      log_line(l, "%s: receiving a %s trace", l->peer,
               l->format == CTS_SINK_FORMAT_MPROF ? "task" : "memtrace");
    }
    const int err = flush_complete(l);
    l->packets = cts_sink_packets(l->sink);
    if (err) {
      end_conn(l, "cannot write the snapshot: %s", cts_os_strerror(err));
      return;
    }
    if (fed) {
      const int se = cts_sink_error(l->sink);
      end_conn(l, "dropped (%s%s)",
               se < 0 && se > -1000 ? "" : "invalid data: ", cts_sink_message(l->sink));
      return;
    }
    if ((size_t)n < RECV_SIZE) return;
  }
}

static void accept_conn(cts__serve_live_t *l, int64_t now) {
  for (int i = 0; i < 8; i++) {
    int fd;
    cts_net_addr_t peer;
    const int rc = cts_net_accept(l->listen_fd, true, &fd, &peer);
    if (rc == -EAGAIN) return;
    if (rc == -ECONNABORTED || rc == -EINTR) continue;
    if (rc) {
      log_line(l, "cannot accept a tracing connection: %s", cts_os_strerror(rc));
      return;
    }
    char name[CTS_NET_ADDR_STRLEN];
    cts_net_addr_format(&peer, name, sizeof name);
    if (l->fd >= 0 || l->claimed) {
      log_line(l, "%s: refused: %s", name,
               l->fd >= 0 ? "a trace is already being received"
                          : "a trace was already received (one per server)");
      close(fd);
      continue;
    }
    cts_sink_config_t sc;
    cts_sink_config_init(&sc);
    sc.dir_fd = l->dir_fd;
    sc.fixed_name = "stream.ctf";
    sc.max_packet_size = l->cfg.max_packet_size;
    sc.serial = ++l->serial;
    if (cts_sink_create(&l->sink, &sc) != 0) {
      log_line(l, "%s: refused: out of memory", name);
      close(fd);
      continue;
    }
    memcpy(l->peer, name, sizeof name);
    l->fd = fd;
    l->received = 0;
    l->pend_len = 0;
    l->conn_since_ms = now;
    log_line(l, "%s: connected", name);
  }
}

static void finish_child(cts__serve_live_t *l);

void cts__serve_live_ready(cts__serve_live_t *l, const struct pollfd *p, unsigned n, int64_t now) {
  for (unsigned i = 0; i < n; i++) {
    if (!p[i].revents) continue;
    if (p[i].fd == l->fd)
      service(l, READS_PER_POLL);
    else if (p[i].fd == l->child_fd)
      finish_child(l);
    else if (p[i].fd == l->listen_fd)
      accept_conn(l, now);
  }
}

static bool changed(const cts__serve_live_t *l) {
  return !l->built_any || l->snap_len != l->built_len || l->state != l->built_state;
}

int64_t cts__serve_live_deadline(const cts__serve_live_t *l) {
  int64_t first = l->ready ? 0 : changed(l) && l->child < 0 ? l->next_build_ms : INT64_MAX;
  if (l->fd >= 0 && !l->claimed && l->conn_since_ms + l->cfg.trace_header_timeout_ms < first)
    first = l->conn_since_ms + l->cfg.trace_header_timeout_ms;
  return first;
}

/* A JSON string of our own text (addresses, messages): escapes like report_json_str for
 * ASCII, and replaces other bytes by '?', into buf. */
static void json_text(char *buf, size_t size, const char *s) {
  size_t n = 0;
  if (size < 3) return;
  buf[n++] = '"';
  for (; *s && n + 8 < size; s++) {
    const unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x7f)
      n += (size_t)snprintf(buf + n, size - n, c >= 0x7f ? "?" : "\\u%04x", c);
    else
      buf[n++] = (char)c;
  }
  buf[n++] = '"';
  buf[n] = '\0';
}

/* The report loaders' messages (errors only: they load quietly) on the service's log. */
static void load_log(void *user_data, cts_log_level_t level, const char *msg) {
  const cts__serve_live_t *l = user_data;
  log_line(l, "live report: %s: %s", level == CTS_LOG_ERROR ? "error" : "warning", msg);
}

/* Writes the document of the snapshot as it is now into fd: the report loaders read the
 * snapshot file (only complete packets), plus the "live" member. Returns 0 or -errno. */
static int write_doc(const cts__serve_live_t *l, uint64_t generation, int fd) {
  report_mem_t *mem = NULL;
  report_tasks_t *tasks = NULL;
  char path[600];
  snprintf(path, sizeof path, "%s/%s", l->dir, SNAPSHOT_NAME);
  if (l->snap_len > 0 && l->format == CTS_SINK_FORMAT_MEMTRACE) {
    const report_mem_opts_t mo = {.path = path,
                                  .quiet = true,
                                  .max_records = l->cfg.max_records,
                                  .top_sites = l->cfg.top,
                                  .log = {load_log, (void *)l}};
    report_mem_load(&mem, &mo);
  } else if (l->snap_len > 0 && l->format == CTS_SINK_FORMAT_MPROF) {
    const report_tasks_opts_t to = {.path = path, .quiet = true, .log = {load_log, (void *)l}};
    report_tasks_load(&tasks, &to);
  }
  static const char *const state_names[] = {"waiting", "receiving", "ended"};
  char title[300], peer[200], msg[1200], where[200], extra[2400];
  if (l->cfg.title)
    snprintf(title, sizeof title, "%s", l->cfg.title);
  else if (l->claimed)
    snprintf(title, sizeof title, "live: trace from %s", l->peer);
  else
    snprintf(title, sizeof title, "live: waiting for a trace on %s", l->addr_text);
  json_text(peer, sizeof peer, l->claimed ? l->peer : "");
  json_text(msg, sizeof msg, l->message);
  json_text(where, sizeof where, l->addr_text);
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  snprintf(extra, sizeof extra,
           ",\n\"live\":{\"state\":\"%s\",\"generation\":%llu,\"trace_port\":%s,\"peer\":%s,"
           "\"format\":\"%s\",\"bytes\":%llu,\"packets\":%llu,\"build_ms\":%lld,"
           "\"updated_unix_ms\":%lld,\"message\":%s}",
           state_names[l->state], (unsigned long long)generation, where, peer,
           !l->claimed                          ? ""
           : l->format == CTS_SINK_FORMAT_MPROF ? "tasks"
                                                : "memtrace",
           (unsigned long long)l->snap_len, (unsigned long long)l->packets, (long long)l->build_ms,
           (long long)wall.tv_sec * 1000 + wall.tv_nsec / 1000000, msg);
  const report_doc_t doc = {.title = title, .mem = mem, .tasks = tasks, .extra_members = extra};
  const int err = cts__serve_render_fd(&doc, fd);
  report_mem_free(mem);
  report_tasks_free(tasks);
  return err;
}

/* Bookkeeping of a finished rebuild (started at started_ms, of what was there then). */
static void built(cts__serve_live_t *l, int64_t started_ms, bool ok) {
  const int64_t end = cts__serve_now_ms();
  l->build_ms = end - started_ms;
  const int64_t period = started_ms + (int64_t)l->cfg.refresh_ms, busy = end + l->build_ms;
  l->next_build_ms = period > busy ? period : busy;
  if (!ok) return; /* out of memory or unreadable: try again at the next period */
  l->built_any = true;
  l->built_len = l->child_len;
  l->built_state = l->child_state;
}

/* Collects the rebuilding process's document (its status byte, or end of file if it died). */
static void finish_child(cts__serve_live_t *l) {
  char status = 1;
  while (read(l->child_fd, &status, 1) < 0 && errno == EINTR) {}
  while (waitpid(l->child, NULL, 0) < 0 && errno == EINTR) {}
  l->child = -1;
  close(l->child_fd);
  l->child_fd = -1;
  cts__serve_blob_t *b = status == 0 ? cts__serve_blob_from_fd(l->child_memfd) : NULL;
  close(l->child_memfd);
  l->child_memfd = -1;
  if (b) {
    b->generation = l->child_generation;
    cts__serve_blob_unref(l->ready);
    l->ready = b;
  }
  built(l, l->child_started_ms, b != NULL);
}

cts__serve_blob_t *cts__serve_live_refresh(cts__serve_live_t *l, int64_t now) {
  if (l->fd >= 0 && !l->claimed && now >= l->conn_since_ms + l->cfg.trace_header_timeout_ms)
    end_conn(l, "dropped (no trace header within %.3f s)",
             (double)l->cfg.trace_header_timeout_ms / 1000.0);
  if (l->ready) {
    cts__serve_blob_t *b = l->ready;
    l->ready = NULL;
    return b;
  }
  if (l->child > 0 || !changed(l) || (l->built_any && now < l->next_build_ms)) return NULL;
  const uint64_t generation = ++l->generation;
  l->child_len = l->snap_len;
  l->child_state = l->state;
  l->child_started_ms = now;
  l->child_generation = generation;
  const int memfd = memfd_create("ctfscope-live", MFD_CLOEXEC);
  if (memfd < 0) {
    built(l, now, false);
    return NULL;
  }
  /* With trace data, the rebuild reads the whole snapshot: it runs in a child process (a
   * copy-on-write fork), so that this loop keeps answering requests and reading the trace
   * meanwhile. Without data (waiting), or if fork fails, it is done here. */
  int pipefd[2] = {-1, -1};
  const pid_t pid = l->snap_len > 0 && pipe2(pipefd, O_CLOEXEC) == 0 ? fork() : -1;
  if (pid == 0) {
    close(pipefd[0]);
    const char status = write_doc(l, generation, memfd) == 0 ? 0 : 1;
    ssize_t w;
    while ((w = write(pipefd[1], &status, 1)) < 0 && errno == EINTR) {}
    _exit(w == 1 ? 0 : 1);
  }
  if (pid > 0) {
    close(pipefd[1]);
    l->child = pid;
    l->child_fd = pipefd[0];
    l->child_memfd = memfd;
    return NULL;
  }
  if (pipefd[0] >= 0) {
    close(pipefd[0]);
    close(pipefd[1]);
  }
  cts__serve_blob_t *b =
      write_doc(l, generation, memfd) == 0 ? cts__serve_blob_from_fd(memfd) : NULL;
  close(memfd);
  if (b) b->generation = generation;
  built(l, now, b != NULL);
  return b;
}

void cts__serve_live_shutdown(cts__serve_live_t *l) {
  if (l->listen_fd >= 0) close(l->listen_fd);
  l->listen_fd = -1;
  if (l->fd >= 0) {
    service(l, 64);
    if (l->fd >= 0) end_conn(l, "closed at shutdown");
  }
}

void cts__serve_live_destroy(cts__serve_live_t *l) {
  if (!l) return;
  if (l->child > 0) {
    kill(l->child, SIGKILL);
    while (waitpid(l->child, NULL, 0) < 0 && errno == EINTR) {}
  }
  if (l->child_fd >= 0) close(l->child_fd);
  if (l->child_memfd >= 0) close(l->child_memfd);
  cts__serve_blob_unref(l->ready);
  if (l->fd >= 0) close(l->fd);
  cts_sink_destroy(l->sink);
  if (l->listen_fd >= 0) close(l->listen_fd);
  if (l->snap_fd >= 0) close(l->snap_fd);
  if (l->dir_fd >= 0) {
    unlinkat(l->dir_fd, SNAPSHOT_NAME, 0);
    unlinkat(l->dir_fd, "stream.ctf", 0);
    close(l->dir_fd);
  }
  if (l->dir[0]) rmdir(l->dir);
  free(l->pend);
  free(l->buf);
  free(l);
}
