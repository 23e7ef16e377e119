/* SPDX-License-Identifier: MIT */
/* `ctfscope serve` over loopback with real sockets: the page and /data.json (whose totals
 * must equal `ctfscope info --json`), hostile and broken HTTP clients (each gets its status
 * or is dropped, while a concurrent good client is served), and live mode (a trace written
 * by the project's writer streamed in pieces to the trace port: /data.json grows, then
 * equals the whole trace). Every wait has a deadline; servers stop on SIGTERM. */
#include <sys/socket.h>

#include "../collector/harness.h"
#include "../json_flat.h"
#include "../run_cmd.h"
#include "../test.h"

/* ---- a tiny HTTP client ----------------------------------------------------------------- */

typedef struct http_resp {
  int status; /* 0: the connection closed without a status line */
  char content_type[128];
  char generation[32];
  h_bytes_t raw;
  const char *body;
  size_t body_len;
} http_resp_t;

static void resp_free(http_resp_t *r) {
  h_bytes_free(&r->raw);
}

static void header_value(const char *head, size_t head_len, const char *name, char *out,
                         size_t size) {
  out[0] = '\0';
  const size_t n = strlen(name);
  for (const char *p = head; p && p < head + head_len;) {
    const char *eol = strstr(p, "\r\n");
    if (!eol) break;
    if ((size_t)(eol - p) > n + 1 && strncasecmp(p, name, n) == 0 && p[n] == ':') {
      const char *v = p + n + 1;
      while (*v == ' ') v++;
      snprintf(out, size, "%.*s", (int)(eol - v), v);
      return;
    }
    p = eol + 2;
  }
}

/* Reads everything the server sends until it closes (bounded), and parses the response. */
static bool read_response(int fd, http_resp_t *r, int timeout_ms) {
  memset(r, 0, sizeof *r);
  h_bytes_append(&r->raw, "", 0);
  const int64_t end = h_now_ms() + timeout_ms;
  char buf[65536];
  for (;;) {
    const int left = (int)(end - h_now_ms());
    if (left <= 0) return false;
    if (cts_net_wait(fd, false, left) <= 0) continue;
    const ssize_t n = cts_net_read(fd, buf, sizeof buf);
    if (n == -EAGAIN) continue;
    if (n <= 0) break; /* end of stream, or a reset */
    h_bytes_append(&r->raw, buf, (size_t)n);
  }
  const char *raw = (const char *)r->raw.data;
  if (sscanf(raw, "HTTP/1.1 %d ", &r->status) != 1) r->status = 0;
  const char *head_end = strstr(raw, "\r\n\r\n");
  if (head_end) {
    header_value(raw, (size_t)(head_end - raw) + 2, "Content-Type", r->content_type,
                 sizeof r->content_type);
    header_value(raw, (size_t)(head_end - raw) + 2, "X-Ctfscope-Generation", r->generation,
                 sizeof r->generation);
    r->body = head_end + 4;
    r->body_len = r->raw.len - (size_t)(r->body - raw);
  }
  return true;
}

/* Sends raw bytes as one request and reads the response. */
static bool http_raw(uint16_t port, const char *req, size_t len, http_resp_t *r) {
  const int fd = h_connect(port);
  if (fd < 0) return false;
  const bool ok = cts_net_write_all(fd, req, len, 10000) == 0 && read_response(fd, r, 10000);
  close(fd);
  return ok;
}

static bool http_get(uint16_t port, const char *target, http_resp_t *r) {
  char req[512];
  const int n =
      snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", target, port);
  return http_raw(port, req, (size_t)n, r);
}

/* ---- the server ------------------------------------------------------------------------- */

static bool start_serve(h_proc_t *p, char *const args[], uint16_t *port, uint16_t *trace_port) {
  char *argv[32];
  int n = 0;
  argv[n++] = (char *)CTS_TEST_CTFSCOPE;
  argv[n++] = (char *)"serve";
  for (int i = 0; args[i] && n < 30; i++) argv[n++] = args[i];
  argv[n] = NULL;
  if (!h_proc_spawn(p, argv, NULL, NULL)) return false;
  if (!h_proc_wait_for(p, "serving http://127.0.0.1:", 1, 20000)) return false;
  char *line = h_proc_line(p, "serving http://127.0.0.1:");
  *port = (uint16_t)strtoul(strstr(line, "127.0.0.1:") + 10, NULL, 10);
  free(line);
  if (trace_port) {
    if (!h_proc_wait_for(p, "waiting for a trace on 127.0.0.1:", 1, 5000)) return false;
    line = h_proc_line(p, "waiting for a trace on 127.0.0.1:");
    *trace_port = (uint16_t)strtoul(strstr(line, "127.0.0.1:") + 10, NULL, 10);
    free(line);
  }
  return *port != 0;
}

/* SIGTERM: the server must exit 0 promptly. */
static int stop_serve(h_proc_t *p) {
  kill(p->pid, SIGTERM);
  return h_proc_wait(p, 10000);
}

/* A number from a parsed document, or -1. */
static long long num(const json_flat_t *j, const char *path) {
  const json_pair_t *v = json_flat_get(j, path);
  return v && !v->is_string && strcmp(v->value, "null") != 0 ? atoll(v->value) : -1;
}

static const char *str(const json_flat_t *j, const char *path) {
  const json_pair_t *v = json_flat_get(j, path);
  return v ? v->value : "";
}

/* GET /data.json, parsed. */
static bool get_data(uint16_t port, json_flat_t *j) {
  http_resp_t r;
  bool ok =
      http_get(port, "/data.json", &r) && r.status == 200 && json_flat_parse(j, r.body, r.body_len);
  resp_free(&r);
  return ok;
}

/* `ctfscope info --json` of a trace, parsed. */
static bool info_json(const char *path, json_flat_t *j) {
  char *argv[] = {(char *)CTS_TEST_CTFSCOPE, "info", "--json", "-q", (char *)path, NULL};
  run_result_t rr;
  if (!run_cmd(argv, NULL, 60, &rr)) return false;
  const bool ok = rr.exit_code == 0 && json_flat_parse(j, rr.out, rr.out_len);
  free(rr.out);
  free(rr.err);
  return ok;
}

static bool write_file(const char *path, const h_bytes_t *b) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  const bool ok = fwrite(b->data, 1, b->len, f) == b->len;
  return fclose(f) == 0 && ok;
}

/* ---- static mode ------------------------------------------------------------------------ */

typedef struct fixture {
  char dir[256], trace[320];
  h_proc_t proc;
  uint16_t port, trace_port;
} fixture_t;

static void check_page_and_data(fixture_t *f) {
  http_resp_t r;
  CTS_ASSERT(http_get(f->port, "/", &r));
  CTS_ASSERT_EQ_INT(r.status, 200);
  CTS_ASSERT_STR_EQ(r.content_type, "text/html; charset=utf-8");
  const bool has_viewer = r.body && strstr(r.body, "ctsLoadData") && strstr(r.body, "ctsLive") &&
                          strstr(r.body, "connect-src 'self'") &&
                          strstr(r.body, "id=\"cts-data\"></script>");
  resp_free(&r);
  CTS_ASSERT_MSG(has_viewer, "the page lacks the viewer, the live loader or its policy");

  CTS_ASSERT(http_get(f->port, "/data.json", &r));
  CTS_ASSERT_EQ_INT(r.status, 200);
  CTS_ASSERT_STR_EQ(r.content_type, "application/json");
  json_flat_t data, info;
  const bool parsed = json_flat_parse(&data, r.body, r.body_len);
  char generation[32];
  snprintf(generation, sizeof generation, "%s", r.generation);
  resp_free(&r);
  CTS_ASSERT_MSG(parsed, "data.json does not parse: %s", data.error);
  CTS_ASSERT(info_json(f->trace, &info));
  const long long samples = num(&data, "mem.samples"), info_samples = num(&info, "samples_total");
  const long long allocs = num(&data, "mem.allocs"), info_allocs = num(&info, "allocs_total");
  const long long collects = num(&data, "mem.events.collect"),
                  info_collects = num(&info, "events.collect");
  const bool same_program =
      strcmp(str(&data, "mem.executable"), str(&info, "info.executable_name")) == 0;
  json_flat_free(&data);
  json_flat_free(&info);
  CTS_ASSERT_MSG(samples > 0, "no samples in data.json");
  CTS_ASSERT_EQ_INT(samples, info_samples);
  CTS_ASSERT_EQ_INT(allocs, info_allocs);
  CTS_ASSERT_EQ_INT(collects, info_collects);
  CTS_ASSERT(same_program);

  /* ?since= the current generation: nothing new. */
  char target[64];
  snprintf(target, sizeof target, "/data.json?since=%s", generation);
  CTS_ASSERT(http_get(f->port, target, &r));
  const int since_status = r.status;
  resp_free(&r);
  CTS_ASSERT_EQ_INT(since_status, 204);
}

/* Request, expected status. */
static const struct {
  const char *req;
  int status;
} bad_requests[] = {
    {"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc", 405},
    {"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405},
    {"DELETE /data.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405},
    {"GET /../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
    {"GET /../../../../etc/passwd HTTP/1.0\r\n\r\n", 404},
    {"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
    {"GET /etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
    {"GET /viewer.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
    {"GET /data.json?since=abc HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
    {"GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404},
    {"GET / HTTP/1.1\r\nHost: evil.example:80\r\n\r\n", 403},
    {"GET /data.json HTTP/1.1\r\nHost: 127.0.0.1.evil.example\r\n\r\n", 403},
    {"GET / HTTP/1.1\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
    {"GET  / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400},
    {"GET / HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 400},
    {"GET / HTTP/1.2\r\nHost: 127.0.0.1\r\n\r\n", 505},
    {"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"\x16\x03\x01\x02\x05\x01\x03\x01\xfc\x03\x03\r\n\r\n", 400},
    {"GET /\x01 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400},
};

static void check_bad_requests(fixture_t *f) {
  for (size_t i = 0; i < sizeof bad_requests / sizeof *bad_requests; i++) {
    http_resp_t r;
    CTS_ASSERT(http_raw(f->port, bad_requests[i].req, strlen(bad_requests[i].req), &r));
    const int status = r.status;
    const bool leaked = r.body && strstr(r.body, "root:");
    resp_free(&r);
    CTS_ASSERT_MSG(status == bad_requests[i].status && !leaked,
                   "request %zu ('%.20s...'): %d, not %d", i, bad_requests[i].req, status,
                   bad_requests[i].status);
  }
  /* 100 KiB of header: 431 (the server reads at most 8 KiB, answers, and discards the
   * rest so that the client reads the answer rather than a reset). */
  h_bytes_t big = {0};
  const char *start = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ";
  h_bytes_append(&big, start, strlen(start));
  for (int i = 0; i < 100 * 1024; i++) h_bytes_append(&big, "a", 1);
  h_bytes_append(&big, "\r\n\r\n", 4);
  http_resp_t r;
  const bool sent = http_raw(f->port, (const char *)big.data, big.len, &r);
  h_bytes_free(&big);
  const int status = r.status;
  resp_free(&r);
  CTS_ASSERT(sent);
  CTS_ASSERT_EQ_INT(status, 431);
}

/* A client that never finishes its request is dropped after the request timeout (1 s
 * here), and a good client is served meanwhile. */
static void check_slow_client(fixture_t *f) {
  const int slow = h_connect(f->port);
  CTS_ASSERT(slow >= 0);
  const char *partial = "GET /data.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  CTS_ASSERT(cts_net_write_all(slow, partial, strlen(partial), 5000) == 0);
  const int64_t t0 = h_now_ms();
  json_flat_t data;
  const bool served = get_data(f->port, &data);
  const int64_t good_ms = h_now_ms() - t0;
  if (served) json_flat_free(&data);
  http_resp_t r;
  const bool got = read_response(slow, &r, 5000);
  const int64_t slow_ms = h_now_ms() - t0;
  close(slow);
  const int status = r.status;
  resp_free(&r);
  /* Served while the slow client was pending, i.e. before it was dropped: an order, not a
   * time, so that a loaded machine cannot make it fail. */
  CTS_ASSERT_MSG(served && good_ms < slow_ms,
                 "the good client took %lld ms, the slow one was dropped after %lld (served: %d)",
                 (long long)good_ms, (long long)slow_ms, served);
  CTS_ASSERT_MSG(got && status == 408, "the slow client got %d after %lld ms", status,
                 (long long)slow_ms);
  CTS_ASSERT_MSG(slow_ms >= 500 && slow_ms < 15000, "the slow client was dropped after %lld ms",
                 (long long)slow_ms);
}

/* GET / until it answers `want` or 10 s have passed; the last status (0: no answer). */
static int status_of_root_until(fixture_t *f, int want) {
  const int64_t end = h_now_ms() + 10000;
  int status = 0;
  do {
    http_resp_t r;
    memset(&r, 0, sizeof r); /* http_get leaves it alone when it cannot connect */
    status = http_get(f->port, "/", &r) ? r.status : 0;
    resp_free(&r);
    if (status == want) break;
    h_sleep_ms(50);
  } while (h_now_ms() < end);
  return status;
}

/* Over --max-clients: 503, and the others are not disturbed. (The server counts a client
 * once it has accepted it: on a loaded machine that may take a while, so both answers are
 * waited for rather than expected after a fixed pause.) */
static void check_max_clients(fixture_t *f) {
  int idle[4];
  for (int i = 0; i < 4; i++) idle[i] = h_connect(f->port);
  const int status = status_of_root_until(f, 503);
  for (int i = 0; i < 4; i++)
    if (idle[i] >= 0) close(idle[i]);
  CTS_ASSERT_EQ_INT(status, 503);
  /* Once they are gone, requests are served again. */
  CTS_ASSERT_EQ_INT(status_of_root_until(f, 200), 200);
}

static bool setup_static(fixture_t *f, char *extra1, char *extra2) {
  memset(f, 0, sizeof *f);
  if (!h_mkdtemp(f->dir, sizeof f->dir, "serve")) return false;
  h_bytes_t t;
  h_make_trace(&t, 7, 20000, "/usr/bin/served <b>program</b>", 77);
  snprintf(f->trace, sizeof f->trace, "%s/trace.ctf", f->dir);
  const bool ok = write_file(f->trace, &t);
  h_bytes_free(&t);
  char *args[] = {"-q", "--request-timeout", "1", f->trace, extra1, extra2, NULL};
  return ok && start_serve(&f->proc, args, &f->port, NULL);
}

static void teardown(fixture_t *f, int *exit_code) {
  *exit_code = f->proc.started ? stop_serve(&f->proc) : -1;
  h_proc_free(&f->proc);
  h_rm_dir(f->dir);
}

CTS_TEST(serve_page_and_data) {
  fixture_t f;
  const bool started = setup_static(&f, NULL, NULL);
  if (started) check_page_and_data(&f);
  int code;
  teardown(&f, &code);
  CTS_ASSERT(started);
  CTS_ASSERT_EQ_INT(code, 0);
}

CTS_TEST(serve_rejects_bad_requests) {
  fixture_t f;
  const bool started = setup_static(&f, NULL, NULL);
  if (started) check_bad_requests(&f);
  /* The server still serves after all that. */
  if (started && !cts_test_state.failed) check_page_and_data(&f);
  int code;
  teardown(&f, &code);
  CTS_ASSERT(started);
  CTS_ASSERT_EQ_INT(code, 0);
}

CTS_TEST(serve_drops_slow_client) {
  fixture_t f;
  const bool started = setup_static(&f, NULL, NULL);
  if (started) check_slow_client(&f);
  int code;
  teardown(&f, &code);
  CTS_ASSERT(started);
  CTS_ASSERT_EQ_INT(code, 0);
}

CTS_TEST(serve_max_clients) {
  fixture_t f;
  const bool started = setup_static(&f, "--max-clients", "4");
  if (started) check_max_clients(&f);
  int code;
  teardown(&f, &code);
  CTS_ASSERT(started);
  CTS_ASSERT_EQ_INT(code, 0);
}

/* ---- live mode -------------------------------------------------------------------------- */

/* Polls /data.json until path's number reaches at least min (and, if state, live.state is
 * it); returns the number, or -1 on timeout. */
static long long wait_data(uint16_t port, const char *path, long long min, const char *state,
                           int timeout_ms) {
  const int64_t end = h_now_ms() + timeout_ms;
  while (h_now_ms() < end) {
    json_flat_t j;
    if (get_data(port, &j)) {
      const long long v = num(&j, path);
      const bool state_ok = !state || strcmp(str(&j, "live.state"), state) == 0;
      json_flat_free(&j);
      if (v >= min && state_ok) return v;
    }
    h_sleep_ms(50);
  }
  return -1;
}

static void check_live_memtrace(fixture_t *f) {
  /* Before any trace: waiting, no data. */
  json_flat_t j;
  CTS_ASSERT(get_data(f->port, &j));
  const bool waiting =
      strcmp(str(&j, "live.state"), "waiting") == 0 && strcmp(str(&j, "mem"), "null") == 0;
  json_flat_free(&j);
  CTS_ASSERT_MSG(waiting, "live mode does not start as waiting with no data");

  h_bytes_t t;
  h_make_trace(&t, 11, 60000, "live-program", 4321);
  snprintf(f->trace, sizeof f->trace, "%s/live-source.ctf", f->dir);
  CTS_ASSERT(write_file(f->trace, &t));
  json_flat_t info;
  CTS_ASSERT(info_json(f->trace, &info));
  const long long total = num(&info, "samples_total"), allocs = num(&info, "allocs_total");
  json_flat_free(&info);

  const int fd = h_connect(f->trace_port);
  CTS_ASSERT(fd >= 0);
  /* The first 40 %, in pieces, cut inside a packet. */
  const size_t first = t.len * 2 / 5 + 17;
  const bool sent1 = h_send_chunked(fd, t.data, first, 3);
  const long long s1 = wait_data(f->port, "mem.samples", 1, "receiving", 10000);
  /* A second tracing connection is refused while the first one streams. */
  const int other = h_connect(f->trace_port);
  const bool refused = other >= 0 && h_wait_closed(other, 5000);
  if (other >= 0) close(other);
  /* The rest, then the end of the stream. */
  const bool sent2 = h_send_chunked(fd, t.data + first, t.len - first, 5);
  close(fd);
  const long long s2 = wait_data(f->port, "mem.samples", total, "ended", 10000);
  json_flat_t last;
  const bool got_last = get_data(f->port, &last);
  const long long last_allocs = got_last ? num(&last, "mem.allocs") : -1;
  const long long generation = got_last ? num(&last, "live.generation") : -1;
  const bool program_ok = got_last && strcmp(str(&last, "mem.executable"), "live-program") == 0;
  if (got_last) json_flat_free(&last);
  h_bytes_free(&t);
  CTS_ASSERT(sent1 && sent2);
  CTS_ASSERT_MSG(s1 > 0 && s1 < total, "after 40 %% of the trace: %lld samples of %lld", s1, total);
  CTS_ASSERT(refused);
  CTS_ASSERT_EQ_INT(s2, total);
  CTS_ASSERT_EQ_INT(last_allocs, allocs);
  CTS_ASSERT_MSG(generation >= 2, "generation %lld", generation);
  CTS_ASSERT(program_ok);
  CTS_ASSERT(h_proc_wait_for(&f->proc, "receiving a memtrace trace", 1, 1000));
}

static void check_live_junk(fixture_t *f) {
  /* Junk on the trace port is dropped and does not take the one trace slot. */
  const int junk = h_connect(f->trace_port);
  CTS_ASSERT(junk >= 0);
  const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  CTS_ASSERT(cts_net_write_all(junk, http, strlen(http), 5000) == 0);
  const bool dropped = h_wait_closed(junk, 5000);
  close(junk);
  CTS_ASSERT(dropped);
  json_flat_t j;
  CTS_ASSERT(get_data(f->port, &j));
  const bool still_waiting = strcmp(str(&j, "live.state"), "waiting") == 0;
  json_flat_free(&j);
  CTS_ASSERT(still_waiting);
}

static bool setup_live(fixture_t *f) {
  memset(f, 0, sizeof *f);
  if (!h_mkdtemp(f->dir, sizeof f->dir, "serve-live")) return false;
  char *args[] = {"--listen", "127.0.0.1:0", "--refresh", "0.2", NULL};
  return start_serve(&f->proc, args, &f->port, &f->trace_port);
}

CTS_TEST(serve_live_memtrace) {
  fixture_t f;
  const bool started = setup_live(&f);
  if (started) check_live_junk(&f);
  if (started && !cts_test_state.failed) check_live_memtrace(&f);
  int code;
  teardown(&f, &code);
  CTS_ASSERT(started);
  CTS_ASSERT_EQ_INT(code, 0);
}

static void check_live_tasks(fixture_t *f) {
  char *gen[] = {(char *)CTS_TEST_GEN_REPORT_TRACES, f->dir, "200", NULL};
  run_result_t rr;
  CTS_ASSERT(run_cmd(gen, NULL, 60, &rr) && rr.exit_code == 0);
  free(rr.out);
  free(rr.err);
  char path[400];
  snprintf(path, sizeof path, "%s/hostile.tasks.ctf", f->dir);
  h_bytes_t t;
  CTS_ASSERT(h_read_file(path, &t));
  /* The whole trace's figures, from `ctfscope serve` of the file itself. */
  fixture_t ref;
  memset(&ref, 0, sizeof ref);
  char *args[] = {"-q", path, NULL};
  const bool ref_started = start_serve(&ref.proc, args, &ref.port, NULL);
  json_flat_t j;
  const bool ref_ok = ref_started && get_data(ref.port, &j);
  const long long events = ref_ok ? num(&j, "tasks.events") : -1;
  const long long ntasks = ref_ok ? num(&j, "tasks.n") : -1;
  if (ref_ok) json_flat_free(&j);
  if (ref_started) stop_serve(&ref.proc);
  h_proc_free(&ref.proc);
  CTS_ASSERT(ref_ok && events > 0);

  const int fd = h_connect(f->trace_port);
  CTS_ASSERT(fd >= 0);
  /* Cut inside the fourth packet: the ring's events are in its first few packets (the
   * rest are empty), so half the bytes would already hold them all. */
  size_t first = 0;
  for (int k = 0; k < 3 && first + 30 <= t.len; k++) {
    uint32_t bits;
    memcpy(&bits, t.data + first + 20, 4);
    first += bits / 8;
  }
  first += 100;
  CTS_ASSERT(first < t.len);
  const bool sent1 = h_send_chunked(fd, t.data, first, 9);
  const long long e1 = wait_data(f->port, "tasks.events", 1, "receiving", 10000);
  const bool sent2 = h_send_chunked(fd, t.data + first, t.len - first, 13);
  close(fd);
  const long long e2 = wait_data(f->port, "tasks.events", events, "ended", 10000);
  const long long n2 = get_data(f->port, &j) ? num(&j, "tasks.n") : -1;
  if (n2 >= 0) json_flat_free(&j);
  h_bytes_free(&t);
  CTS_ASSERT(sent1 && sent2);
  CTS_ASSERT_MSG(e1 > 0 && e1 < events, "after half the trace: %lld events of %lld", e1, events);
  CTS_ASSERT_EQ_INT(e2, events);
  CTS_ASSERT_EQ_INT(n2, ntasks);
}

CTS_TEST(serve_live_tasks) {
  fixture_t f;
  const bool started = setup_live(&f);
  if (started) check_live_tasks(&f);
  int code;
  teardown(&f, &code);
  CTS_ASSERT(started);
  CTS_ASSERT_EQ_INT(code, 0);
}

CTS_TEST(serve_usage_errors) {
  char *no_args[] = {(char *)CTS_TEST_CTFSCOPE, "serve", NULL};
  char *bad_port[] = {(char *)CTS_TEST_CTFSCOPE, "serve", "--listen", "127.0.0.1:99999", NULL};
  char *trace_port_static[] = {
      (char *)CTS_TEST_CTFSCOPE, "serve", "--trace-port", "0", "x.ctf", NULL};
  char *missing[] = {(char *)CTS_TEST_CTFSCOPE, "serve", "/nonexistent/trace.ctf", NULL};
  char *const *cases[] = {no_args, bad_port, trace_port_static, missing};
  const int want[] = {2, 2, 2, 3};
  for (int i = 0; i < 4; i++) {
    run_result_t rr;
    CTS_ASSERT(run_cmd(cases[i], NULL, 30, &rr));
    const int code = rr.exit_code;
    free(rr.out);
    free(rr.err);
    CTS_ASSERT_MSG(code == want[i], "case %d: exit %d, not %d", i, code, want[i]);
  }
}

CTS_TEST_MAIN()
