/* SPDX-License-Identifier: MIT */
/* The HTTP side of `ctfscope serve` (see serve.h): one poll() loop, non-blocking sockets,
 * one request per connection. Requests are parsed from a fixed 8 KiB buffer per
 * connection; responses are a small header buffer plus a body that is either the page
 * (built once) or a reference-counted data snapshot. */
#define _GNU_SOURCE /* pipe2(), memfd_create() */
#include "../os/output.h"
#include "serve.h"
#include "serve_http.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>

#include "../common/compiler.h"
#include "../os/os.h"

#define MAX_REQUEST      8192u      /* request line and headers */
#define DRAIN_MS         2000       /* lingering close: how long unread input is discarded */
#define DRAIN_BYTES      (1u << 20) /* and how much of it */
#define ACCEPTS_PER_POLL 32

/* Policy of the served page: the embedded report's, plus fetching from this server. */
#define PAGE_CSP                                                                                \
  "default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'; script-src "              \
  "'unsafe-inline'; img-src data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors " \
  "'none'"

enum conn_state { C_FREE = 0, C_READ, C_WRITE, C_DRAIN };

typedef struct http_conn {
  int fd;
  enum conn_state state;
  int64_t deadline;
  size_t req_len;
  char head[1024];
  size_t head_len, head_off;
  const char *body;
  size_t body_len, body_off;
  cts__serve_blob_t *blob; /* held while body points into it */
  size_t drained;
  char error_body[64];
  char req[MAX_REQUEST + 1];
} http_conn_t;

struct cts_serve {
  cts_serve_config_t cfg;
  int listen_fd, wake_rd, wake_wr;
  cts_net_addr_t addr;
  bool loopback;
  char *page;
  size_t page_len;
  cts__serve_blob_t *data; /* the current document */
  cts__serve_live_t *live;
  http_conn_t *conns;
  unsigned nconns; /* in use, at the front after compaction */
  struct pollfd *pfds;
};

int64_t cts__serve_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line on the service's log (stderr when it has none). */
#define log_line(owner, ...) cts_log_line((owner)->cfg.log, (owner)->cfg.log_user_data, __VA_ARGS__)

void cts_serve_config_init(cts_serve_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->max_clients = 64;
  cfg->request_timeout_ms = 10000;
  cfg->send_timeout_ms = 30000;
  cfg->refresh_ms = 1000;
  cfg->trace_header_timeout_ms = 10000;
  cfg->max_packet_size = 1u << 20;
}

/* ---- blobs ------------------------------------------------------------------------- */

int cts__serve_render_fd(const report_doc_t *doc, int fd) {
  cts_out_t *o = malloc(sizeof *o);
  if (!o) return -ENOMEM;
  cts_out_init(o, fd);
  report_write_doc(o, doc);
  const int err = cts_out_flush(o);
  free(o);
  return err;
}

cts__serve_blob_t *cts__serve_blob_from_fd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return NULL;
  const size_t len = (size_t)st.st_size;
  cts__serve_blob_t *b = malloc(sizeof *b + len + 1);
  if (!b) return NULL;
  b->refs = 1;
  b->len = len;
  b->generation = 0;
  size_t got = 0;
  while (got < len) {
    const ssize_t n = pread(fd, b->data + got, len - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      free(b);
      return NULL;
    }
    got += (size_t)n;
  }
  b->data[len] = '\0';
  return b;
}

cts__serve_blob_t *cts__serve_render(const report_doc_t *doc) {
  /* The writer is a buffered fd writer: render into an anonymous memory file, then copy
   * the result into one allocation of the exact size. */
  const int fd = memfd_create("ctfscope-serve", MFD_CLOEXEC);
  if (fd < 0) return NULL;
  cts__serve_blob_t *b = cts__serve_render_fd(doc, fd) == 0 ? cts__serve_blob_from_fd(fd) : NULL;
  close(fd);
  return b;
}

void cts__serve_blob_unref(cts__serve_blob_t *b) {
  if (b && --b->refs == 0) free(b);
}

/* ---- the page ---------------------------------------------------------------------- */

static bool append(char **buf, size_t *len, size_t *cap, const void *p, size_t n) {
  if (*len + n + 1 > *cap) {
    size_t c = *cap ? *cap : 1 << 16;
    while (*len + n + 1 > c) c *= 2;
    char *nb = realloc(*buf, c);
    if (!nb) return false;
    *buf = nb;
    *cap = c;
  }
  memcpy(*buf + *len, p, n);
  *len += n;
  (*buf)[*len] = '\0';
  return true;
}

/* The viewer template with the style and both scripts, no data (the page fetches it), and
 * the Content-Security-Policy meta tag allowing fetches from this server. */
static int build_page(cts_serve_t *s) {
  static const char csp_from[] = "default-src 'none';";
  static const char csp_to[] = "default-src 'none'; connect-src 'self';";
  static const char *const holes[] = {"/*@CSS@*/", "@DATA@", "/*@JS@*/"};
  const char *html = (const char *)cts_report_html;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  bool ok = true;
  const char *csp = strstr(html, csp_from);
  for (unsigned h = 0; h < 3 && ok; h++) {
    const char *at = strstr(html, holes[h]);
    if (!at) at = html + strlen(html);
    if (csp && csp >= html && csp < at) {
      ok = append(&buf, &len, &cap, html, (size_t)(csp - html)) &&
           append(&buf, &len, &cap, csp_to, sizeof csp_to - 1);
      html = csp + sizeof csp_from - 1;
      csp = NULL;
    }
    ok = ok && append(&buf, &len, &cap, html, (size_t)(at - html));
    html = *at ? at + strlen(holes[h]) : at;
    if (h == 0) {
      ok = ok && append(&buf, &len, &cap, cts_report_css, cts_report_css_size);
    } else if (h == 2) {
      ok = ok && append(&buf, &len, &cap, cts_report_js, cts_report_js_size) &&
           append(&buf, &len, &cap, "\n", 1) &&
           append(&buf, &len, &cap, cts_report_live_js, cts_report_live_js_size);
    }
  }
  ok = ok && append(&buf, &len, &cap, html, strlen(html));
  if (!ok) {
    free(buf);
    return -ENOMEM;
  }
  s->page = buf;
  s->page_len = len;
  return 0;
}

/* ---- lifetime ---------------------------------------------------------------------- */

static bool is_loopback(const cts_net_addr_t *a) {
  const struct sockaddr *sa = (const struct sockaddr *)&a->storage;
  if (sa->sa_family == AF_INET) {
    const uint8_t *ip = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    return ip[0] == 127;
  }
  if (sa->sa_family == AF_INET6) {
    static const uint8_t one[16] = {[15] = 1};
    return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, one, 16) == 0;
  }
  return false;
}

int cts_serve_create(cts_serve_t **out, const cts_serve_config_t *cfg, char *err, size_t err_size) {
  *out = NULL;
  if (cfg->max_clients == 0 || cfg->request_timeout_ms == 0 || cfg->refresh_ms == 0) {
    snprintf(err, err_size, "invalid server configuration");
    return -EINVAL;
  }
  cts_serve_t *s = calloc(1, sizeof *s);
  int rc = -ENOMEM;
  if (!s) goto nomem;
  s->cfg = *cfg;
  s->listen_fd = s->wake_rd = s->wake_wr = -1;
  s->conns = calloc(cfg->max_clients, sizeof *s->conns);
  s->pfds = calloc((size_t)cfg->max_clients + 5, sizeof *s->pfds);
  if (!s->conns || !s->pfds || build_page(s) != 0) goto nomem;
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    rc = -errno;
    snprintf(err, err_size, "cannot make a pipe: %s", cts_os_strerror(rc));
    goto fail;
  }
  s->wake_rd = wake[0];
  s->wake_wr = wake[1];
  rc = cts_net_listen(&cfg->http_addr, 64, true, &s->listen_fd);
  if (!rc) rc = cts_net_local_addr(s->listen_fd, &s->addr);
  if (rc) {
    char a[CTS_NET_ADDR_STRLEN];
    snprintf(err, err_size, "cannot listen on %s: %s",
             cts_net_addr_format(&cfg->http_addr, a, sizeof a), cts_os_strerror(rc));
    goto fail;
  }
  s->loopback = is_loopback(&s->addr);
  if (cfg->live) {
    rc = cts__serve_live_create(&s->live, cfg, err, err_size);
    if (rc) goto fail;
    s->data = cts__serve_live_refresh(s->live, cts__serve_now_ms());
    if (!s->data) goto nomem;
  }
  *out = s;
  return 0;
nomem:
  rc = -ENOMEM;
  snprintf(err, err_size, "out of memory");
fail:
  cts_serve_destroy(s);
  return rc;
}

int cts_serve_set_doc(cts_serve_t *s, const report_doc_t *doc) {
  cts__serve_blob_t *b = cts__serve_render(doc);
  if (!b) return -ENOMEM;
  b->generation = s->data ? s->data->generation + 1 : 1;
  cts__serve_blob_unref(s->data);
  s->data = b;
  return 0;
}

const cts_net_addr_t *cts_serve_http_address(const cts_serve_t *s) {
  return &s->addr;
}

const cts_net_addr_t *cts_serve_trace_address(const cts_serve_t *s) {
  return s->live ? cts__serve_live_address(s->live) : NULL;
}

void cts_serve_stop(cts_serve_t *s) {
  const char x = 's';
  const int saved = errno;
  if (write(s->wake_wr, &x, 1) < 0) { /* a full pipe already holds a stop request */
  }
  errno = saved;
}

static void conn_close(http_conn_t *k) {
  if (k->fd >= 0) close(k->fd);
  cts__serve_blob_unref(k->blob);
  k->blob = NULL;
  k->fd = -1;
  k->state = C_FREE;
}

void cts_serve_destroy(cts_serve_t *s) {
  if (!s) return;
  for (unsigned i = 0; s->conns && i < s->nconns; i++) conn_close(&s->conns[i]);
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (s->wake_rd >= 0) close(s->wake_rd);
  if (s->wake_wr >= 0) close(s->wake_wr);
  cts__serve_live_destroy(s->live);
  cts__serve_blob_unref(s->data);
  free(s->page);
  free(s->conns);
  free(s->pfds);
  free(s);
}

/* ---- responses --------------------------------------------------------------------- */

static const char *status_text(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Internal Server Error";
  }
}

/* Prepares the response: the header, and the body (borrowed from the page or a blob). */
static void respond(cts_serve_t *s, http_conn_t *k, int code, const char *type, const char *body,
                    size_t body_len, cts__serve_blob_t *blob, int64_t now) {
  char extra[160] = "";
  if (code == 405) snprintf(extra, sizeof extra, "Allow: GET\r\n");
  if (blob)
    snprintf(extra, sizeof extra, "X-Ctfscope-Generation: %llu\r\n",
             (unsigned long long)blob->generation);
  const bool html = type && strncmp(type, "text/html", 9) == 0;
  const int n = snprintf(k->head, sizeof k->head,
                         "HTTP/1.1 %d %s\r\n"
                         "%s%s%s"
                         "Content-Length: %zu\r\n"
                         "Cache-Control: no-store\r\n"
                         "X-Content-Type-Options: nosniff\r\n"
                         "Referrer-Policy: no-referrer\r\n"
                         "%s%s%s"
                         "%s"
                         "Connection: close\r\n\r\n",
                         code, status_text(code), type ? "Content-Type: " : "", type ? type : "",
                         type ? "\r\n" : "", body_len, html ? "Content-Security-Policy: " : "",
                         html ? PAGE_CSP : "", html ? "\r\n" : "", extra);
  if (n <= 0 || (size_t)n >= sizeof k->head) { /* cannot happen: the header is ours */
    conn_close(k);
    return;
  }
  k->head_len = (size_t)n;
  k->head_off = 0;
  k->body = body;
  k->body_len = body_len;
  k->body_off = 0;
  if (blob) {
    blob->refs++;
    k->blob = blob;
  }
  k->state = C_WRITE;
  k->deadline = now + s->cfg.send_timeout_ms;
}

static void respond_error(cts_serve_t *s, http_conn_t *k, int code, int64_t now) {
  const int n = snprintf(k->error_body, sizeof k->error_body, "%d %s\n", code, status_text(code));
  respond(s, k, code, "text/plain; charset=utf-8", k->error_body, (size_t)n, NULL, now);
}

/* ---- requests ---------------------------------------------------------------------- */

static void handle_request(cts_serve_t *s, http_conn_t *k, size_t len, int64_t now) {
  cts__http_resource_t res;
  const int code = cts__http_parse_request(k->req, len, s->loopback, s->data->generation, &res);
  if (res == CTS__HTTP_PAGE)
    respond(s, k, code, "text/html; charset=utf-8", s->page, s->page_len, NULL, now);
  else if (res == CTS__HTTP_DATA)
    respond(s, k, code, "application/json", s->data->data, s->data->len, s->data, now);
  else if (res == CTS__HTTP_UNCHANGED)
    respond(s, k, code, NULL, NULL, 0, s->data, now);
  else
    respond_error(s, k, code, now);
}

static void log_request(cts_serve_t *s, const http_conn_t *k, size_t len) {
  if (!s->cfg.verbose) return;
  const char *eol = memmem(k->req, len, "\r\n", 2);
  const int n = eol ? (int)(eol - k->req) : 0;
  int code = 0;
  sscanf(k->head, "HTTP/1.1 %d", &code);
  log_line(s, "%d %.*s", code, n > 200 ? 200 : n, k->req);
}

static void conn_read(cts_serve_t *s, http_conn_t *k, int64_t now) {
  for (;;) {
    if (k->req_len == MAX_REQUEST) {
      respond_error(s, k, 431, now);
      if (s->cfg.verbose) log_line(s, "431 request of more than %u bytes", MAX_REQUEST);
      return;
    }
    const ssize_t n = cts_net_read(k->fd, k->req + k->req_len, MAX_REQUEST - k->req_len);
    if (n == -EAGAIN) return;
    if (n <= 0) { /* closed or reset before a whole request: nothing to answer */
      conn_close(k);
      return;
    }
    const size_t from = k->req_len > 3 ? k->req_len - 3 : 0;
    k->req_len += (size_t)n;
    k->req[k->req_len] = '\0';
    const char *hdr_end = memmem(k->req + from, k->req_len - from, "\r\n\r\n", 4);
    if (hdr_end) {
      const size_t len = (size_t)(hdr_end - k->req) + 4;
      handle_request(s, k, len, now);
      log_request(s, k, len);
      return;
    }
  }
}

/* Writes what the socket takes; at the end, half-closes and discards the rest of the
 * input for a while, so that a client still sending (an oversized request) reads the
 * response instead of a reset. */
static void conn_write(cts_serve_t *s, http_conn_t *k, int64_t now) {
  for (;;) {
    const char *p;
    size_t left;
    if (k->head_off < k->head_len) {
      p = k->head + k->head_off;
      left = k->head_len - k->head_off;
    } else if (k->body_off < k->body_len) {
      p = k->body + k->body_off;
      left = k->body_len - k->body_off;
    } else {
      shutdown(k->fd, SHUT_WR);
      cts__serve_blob_unref(k->blob);
      k->blob = NULL;
      k->state = C_DRAIN;
      k->drained = 0;
      k->deadline = now + DRAIN_MS;
      return;
    }
    const ssize_t n = cts_net_write(k->fd, p, left);
    if (n == -EAGAIN) return;
    if (n <= 0) {
      conn_close(k);
      return;
    }
    if (k->head_off < k->head_len)
      k->head_off += (size_t)n;
    else
      k->body_off += (size_t)n;
    k->deadline = now + s->cfg.send_timeout_ms;
  }
}

static void conn_drain(http_conn_t *k) {
  char buf[16384];
  for (;;) {
    const ssize_t n = cts_net_read(k->fd, buf, sizeof buf);
    if (n == -EAGAIN) return;
    if (n <= 0 || (k->drained += (size_t)n) > DRAIN_BYTES) {
      conn_close(k);
      return;
    }
  }
}

static void accept_clients(cts_serve_t *s, int64_t now) {
  for (int i = 0; i < ACCEPTS_PER_POLL; i++) {
    int fd;
    const int rc = cts_net_accept(s->listen_fd, true, &fd, NULL);
    if (rc == -EAGAIN) return;
    if (rc == -ECONNABORTED || rc == -EINTR) continue;
    if (rc) {
      log_line(s, "cannot accept a connection: %s", cts_os_strerror(rc));
      return;
    }
    if (s->nconns == s->cfg.max_clients) {
      static const char busy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)cts_net_write(fd, busy, sizeof busy - 1);
      close(fd);
      continue;
    }
    http_conn_t *k = &s->conns[s->nconns++];
    k->fd = fd;
    k->state = C_READ;
    k->req_len = 0;
    k->blob = NULL;
    k->deadline = now + s->cfg.request_timeout_ms;
  }
}

static void check_timeouts(cts_serve_t *s, int64_t now) {
  for (unsigned i = 0; i < s->nconns; i++) {
    http_conn_t *k = &s->conns[i];
    if (k->state == C_FREE || now < k->deadline) continue;
    if (k->state == C_READ) { /* one try to say why, then close */
      char msg[128];
      const int n = snprintf(msg, sizeof msg,
                             "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n"
                             "Connection: close\r\n\r\n");
      (void)cts_net_write(k->fd, msg, (size_t)n);
      if (s->cfg.verbose)
        log_line(s, "408 request not complete within %u ms", s->cfg.request_timeout_ms);
    }
    conn_close(k);
  }
}

static void compact(cts_serve_t *s) {
  unsigned j = 0;
  for (unsigned i = 0; i < s->nconns; i++)
    if (s->conns[i].state != C_FREE) s->conns[j++] = s->conns[i];
  s->nconns = j;
}

static int next_timeout(const cts_serve_t *s, int64_t now) {
  int64_t first = s->live ? cts__serve_live_deadline(s->live) : INT64_MAX;
  for (unsigned i = 0; i < s->nconns; i++)
    if (s->conns[i].deadline < first) first = s->conns[i].deadline;
  if (first == INT64_MAX) return -1;
  return first <= now ? 0 : (int)(first - now < 60000 ? first - now : 60000);
}

int cts_serve_run(cts_serve_t *s) {
  int err = 0;
  for (;;) {
    int64_t now = cts__serve_now_ms();
    struct pollfd *p = s->pfds;
    p[0] = (struct pollfd){.fd = s->wake_rd, .events = POLLIN};
    p[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    unsigned nlive = s->live ? cts__serve_live_pollfds(s->live, p + 2) : 0;
    const unsigned base = 2 + nlive, polled = s->nconns;
    for (unsigned i = 0; i < polled; i++) {
      const http_conn_t *k = &s->conns[i];
      p[base + i] = (struct pollfd){.fd = k->fd, .events = k->state == C_WRITE ? POLLOUT : POLLIN};
    }
    const int n = poll(p, base + polled, next_timeout(s, now));
    if (n < 0 && errno != EINTR) {
      err = -errno;
      log_line(s, "poll failed: %s", cts_os_strerror(err));
      break;
    }
    now = cts__serve_now_ms();
    if (n > 0 && p[0].revents) break;
    if (n > 0) {
      for (unsigned i = 0; i < polled; i++) {
        http_conn_t *k = &s->conns[i];
        const short ev = p[base + i].revents;
        if (!ev || k->state == C_FREE) continue;
        if (k->state == C_READ) conn_read(s, k, now);
        if (k->state == C_WRITE)
          conn_write(s, k, now); /* right after the request, too */
        else if (k->state == C_DRAIN)
          conn_drain(k);
      }
      if (nlive) cts__serve_live_ready(s->live, p + 2, nlive, now);
    }
    if (s->live) {
      cts__serve_blob_t *b = cts__serve_live_refresh(s->live, now);
      if (b) {
        cts__serve_blob_unref(s->data);
        s->data = b;
      }
    }
    check_timeouts(s, now);
    compact(s);
    if (n > 0 && p[1].revents) accept_clients(s, now);
  }
  char drain[64];
  while (read(s->wake_rd, drain, sizeof drain) > 0) {}
  if (s->live) cts__serve_live_shutdown(s->live);
  for (unsigned i = 0; i < s->nconns; i++) conn_close(&s->conns[i]);
  s->nconns = 0;
  return err;
}
