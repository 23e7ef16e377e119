/* SPDX-License-Identifier: MIT */
/* `ctfscope serve`: a small single-threaded HTTP/1.1 server (one poll() loop) that shows the
 * report viewer for traces too large to embed in one HTML file, and, in live mode, the trace
 * a running program streams to it.
 *
 * It serves exactly two resources, both generated in memory (no request ever reaches the
 * file system):
 *   GET /            the viewer page (viewer.html/.css/.js and viewer_live.js), with no data;
 *                    the page fetches the data and, in live mode, polls it every second;
 *   GET /data.json   the document `ctfscope report` embeds (report_write_doc()), plus a
 *                    "live" member in live mode. /data.json?since=G answers 204 while the
 *                    document is still generation G, so idle polling costs a few bytes.
 * Anything else gets 404 (unknown path), 405 (a method other than GET), 400 (malformed),
 * 431 (request line and headers over 8 KiB), 408 (not complete within the request
 * timeout) or 403 (a Host header naming another site while bound to loopback: a page on
 * the web cannot read the data through DNS rebinding). Every response closes its
 * connection. At most max_clients connections are open at once; more get 503.
 *
 * Live mode also listens on a second port for ONE tracing connection (memtrace or
 * mirage-profile task trace, told apart and validated by the collector's trace sink). The
 * complete packets are appended to a snapshot file in a private temporary directory, and
 * the document is rebuilt from it (in a forked child process, so the server stays
 * responsive) at most once per refresh period while data arrives; see serve_live.c. */
#ifndef CTS_REPORT_SERVE_H
#define CTS_REPORT_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../os/net.h"
#include "report.h"

typedef void (*cts_serve_log_cb)(void *user_data, const char *line);

typedef struct cts_serve_config {
  cts_net_addr_t http_addr;         /* required */
  bool live;                        /* accept a tracing connection on trace_addr */
  cts_net_addr_t trace_addr;        /* live mode */
  const char *title;                /* live mode: the page title (NULL: from the peer) */
  uint32_t max_records, top;        /* live mode: report options (0: their defaults) */
  unsigned max_clients;             /* HTTP connections at once (default 64) */
  uint32_t request_timeout_ms;      /* a request must arrive whole within (default 10 000) */
  uint32_t send_timeout_ms;         /* a response that makes no progress for (default 30 000) */
  uint32_t refresh_ms;              /* live mode: rebuild period (default 1000) */
  uint32_t trace_header_timeout_ms; /* live: the trace header must arrive within (10 000) */
  uint32_t max_packet_size;         /* live: largest trace packet accepted (default 1 MiB) */
  bool verbose;                     /* log every request */
  cts_serve_log_cb log;             /* NULL: stderr */
  void *log_user_data;
} cts_serve_config_t;

typedef struct cts_serve cts_serve_t;

void cts_serve_config_init(cts_serve_config_t *cfg);

/* Binds the sockets (and in live mode creates the temporary directory). Returns 0 or a
 * negative error with a message in err. */
int cts_serve_create(cts_serve_t **out, const cts_serve_config_t *cfg, char *err, size_t err_size);

/* Static mode: renders the document once; it is what /data.json returns. Returns 0 or
 * -ENOMEM. The traces in doc may be freed afterwards. */
int cts_serve_set_doc(cts_serve_t *s, const report_doc_t *doc);

/* The bound addresses (with the kernel's ports when port 0 was asked for). */
const cts_net_addr_t *cts_serve_http_address(const cts_serve_t *s);
const cts_net_addr_t *cts_serve_trace_address(const cts_serve_t *s); /* NULL unless live */

/* Runs until cts_serve_stop(); returns 0 or -errno if the loop itself failed. */
int cts_serve_run(cts_serve_t *s);

/* Async-signal-safe. */
void cts_serve_stop(cts_serve_t *s);

/* Closes everything and removes the temporary directory. Accepts NULL. */
void cts_serve_destroy(cts_serve_t *s);

/* ---- internal, shared by serve.c and serve_live.c ---------------------------------- */

/* An immutable response body with a reference count (a connection still sending an old
 * snapshot keeps it alive). */
typedef struct cts__serve_blob {
  size_t refs, len;
  uint64_t generation;
  char data[];
} cts__serve_blob_t;

/* Renders the document (with extra members, see report_doc_t) into a new blob (refs 1), or
 * NULL when out of memory. */
cts__serve_blob_t *cts__serve_render(const report_doc_t *doc);
/* The same in two steps: the document into a file descriptor (0 or -errno), and a blob of
 * a whole file (NULL when out of memory or unreadable). */
int cts__serve_render_fd(const report_doc_t *doc, int fd);
cts__serve_blob_t *cts__serve_blob_from_fd(int fd);
void cts__serve_blob_unref(cts__serve_blob_t *b);

typedef struct cts__serve_live cts__serve_live_t;
struct pollfd;

int cts__serve_live_create(cts__serve_live_t **out, const cts_serve_config_t *cfg, char *err,
                           size_t err_size);
const cts_net_addr_t *cts__serve_live_address(const cts__serve_live_t *l);
/* Fills at most 3 pollfds (the listening socket, the tracing connection, the rebuilding
 * process); returns how many. */
unsigned cts__serve_live_pollfds(cts__serve_live_t *l, struct pollfd *p);
/* Handles what poll() reported on those descriptors. */
void cts__serve_live_ready(cts__serve_live_t *l, const struct pollfd *p, unsigned n, int64_t now);
/* When the loop must wake up next (ms, monotonic); INT64_MAX when nothing is due. */
int64_t cts__serve_live_deadline(const cts__serve_live_t *l);
/* When due (or when nothing was built yet), rebuilds the document: returns a new blob of a
 * new generation (one reference for the caller), or NULL when nothing changed. */
cts__serve_blob_t *cts__serve_live_refresh(cts__serve_live_t *l, int64_t now);
/* Reads what the tracing connection had sent, and ends it. */
void cts__serve_live_shutdown(cts__serve_live_t *l);
void cts__serve_live_destroy(cts__serve_live_t *l);
/* Monotonic milliseconds. */
int64_t cts__serve_now_ms(void);

#endif /* CTS_REPORT_SERVE_H */
