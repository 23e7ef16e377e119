/* SPDX-License-Identifier: MIT */
/* `ctfscope fetch` against a small service-mode server in the test: the server serves its
 * trace to one client at a time and refuses (closes at once) a second concurrent one, as a
 * traced program in service mode does. */
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "harness.h"
#include "../test.h"

enum {
  SERVE_ALL,        /* send the whole trace, close */
  SERVE_UNTIL_EOF,  /* send `first` bytes; on the client's half-close send the rest, close */
  SERVE_AND_IGNORE, /* send `first` bytes, then nothing, never close */
};

typedef struct server {
  int lfd;
  uint16_t port;
  const uint8_t *data;
  size_t len, first;
  _Atomic int mode;
  atomic_int served, refused, active;
  atomic_bool waiting, stop;
  pthread_t th;
} server_t;

static void *server_main(void *arg) {
  server_t *s = arg;
  int cfd = -1;
  size_t sent = 0, limit = 0;
  bool eof = false;
  int mode = SERVE_ALL;
  while (!atomic_load(&s->stop)) {
    struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
                          {.fd = cfd, .events = eof ? 0 : POLLIN}};
    if (cfd >= 0 && sent < limit) p[1].events |= POLLOUT;
    if (poll(p, 2, 50) <= 0) continue;
    if (p[0].revents & POLLIN) {
      int fd;
      if (cts_net_accept(s->lfd, true, &fd, NULL) == 0) {
        if (cfd >= 0) {
          /* One client at a time. Counted before the close: the refused client exits
           * on it, and the test reads the count as soon as it has. */
          atomic_fetch_add(&s->refused, 1);
          close(fd);
        } else {
          cfd = fd;
          sent = 0;
          eof = false;
          mode = atomic_load(&s->mode);
          limit = mode == SERVE_ALL ? s->len : s->first;
          atomic_store(&s->active, 1);
        }
      }
    }
    if (cfd < 0) continue;
    if (p[1].revents & POLLIN) {
      char buf[256];
      const ssize_t n = cts_net_read(cfd, buf, sizeof buf);
      if (n == 0 || (n < 0 && n != -EAGAIN)) {
        eof = true;
        if (mode == SERVE_UNTIL_EOF) limit = s->len; /* the client is done: finish the trace */
      }
    }
    if (sent < limit) {
      const ssize_t n = cts_net_write(cfd, s->data + sent, limit - sent);
      if (n > 0) sent += (size_t)n;
      if (n < 0 && n != -EAGAIN) limit = sent = 0, eof = true, mode = SERVE_ALL;
    }
    if (sent == limit && limit < s->len) atomic_store(&s->waiting, true);
    const bool done = sent == limit && limit == s->len;
    if (done || (eof && mode == SERVE_ALL)) {
      close(cfd);
      cfd = -1;
      atomic_store(&s->waiting, false);
      atomic_store(&s->active, 0);
      atomic_fetch_add(&s->served, 1);
    }
  }
  if (cfd >= 0) close(cfd);
  return NULL;
}

static bool server_start(server_t *s, const h_bytes_t *trace, size_t first, int mode) {
  memset(s, 0, sizeof *s);
  s->data = trace->data;
  s->len = trace->len;
  s->first = first;
  atomic_store(&s->mode, mode);
  cts_net_addr_t a, bound;
  char err[CTS_NET_ERR_LEN];
  if (cts_net_parse_listen("127.0.0.1:0", &a, err, sizeof err) != 0) return false;
  if (cts_net_listen(&a, 8, true, &s->lfd) != 0) return false;
  cts_net_local_addr(s->lfd, &bound);
  s->port = cts_net_addr_port(&bound);
  return pthread_create(&s->th, NULL, server_main, s) == 0;
}

static void server_stop(server_t *s) {
  atomic_store(&s->stop, true);
  pthread_join(s->th, NULL);
  close(s->lfd);
}

static bool wait_flag(atomic_bool *flag, int timeout_ms) {
  const int64_t end = h_now_ms() + timeout_ms;
  while (!atomic_load(flag))
    if (h_now_ms() > end)
      return false;
    else
      h_sleep_ms(5);
  return true;
}

/* Runs `ctfscope fetch 127.0.0.1:PORT ARGS...` in the background. */
static bool fetch_spawn(h_proc_t *p, uint16_t port, const char *cwd, const char *const args[]) {
  char target[32];
  snprintf(target, sizeof target, "127.0.0.1:%u", port);
  char *argv[16] = {(char *)CTS_TEST_CTFSCOPE, (char *)"fetch", target};
  int n = 3;
  for (int i = 0; args && args[i] && n < 15; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
  return h_proc_spawn(p, argv, cwd, NULL);
}

static bool same_file(const char *path, const uint8_t *want, size_t len) {
  h_bytes_t got;
  if (!h_read_file(path, &got)) return false;
  const bool same = got.len == len && memcmp(got.data, want, len) == 0;
  if (!same) fprintf(stderr, "  %s: %zu bytes, expected %zu\n", path, got.len, len);
  h_bytes_free(&got);
  return same;
}

CTS_TEST(fetch_saves_the_whole_trace) {
  char dir[256], out[300];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "fetch"));
  h_bytes_t t;
  h_make_trace(&t, 1, 200000, "/srv/fetchme", 4242);
  server_t s;
  CTS_ASSERT(server_start(&s, &t, 0, SERVE_ALL));
  snprintf(out, sizeof out, "%s/explicit.ctf", dir);
  h_proc_t p;
  const char *const args[] = {"-o", out, NULL};
  CTS_ASSERT(fetch_spawn(&p, s.port, NULL, args));
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 60000), 0);
  CTS_ASSERT_MSG(h_proc_count(&p, "end of stream: saved ") == 1, "%s", (char *)p.log.data);
  CTS_ASSERT(h_proc_count(&p, " 200000 events,") == 1);
  CTS_ASSERT(same_file(out, t.data, t.len));
  uint64_t events;
  CTS_ASSERT_EQ_INT(h_decode_file(out, &events), 0);
  CTS_ASSERT_EQ_U64(events, 200000);
  h_proc_free(&p);
  /* Without -o: named from the trace, in the current directory. */
  CTS_ASSERT(fetch_spawn(&p, s.port, dir, NULL));
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 60000), 0);
  char path[4096];
  CTS_ASSERT(h_find_file(dir, "fetchme.4242.20231114T221321Z.ctf", path, sizeof path));
  CTS_ASSERT(same_file(path, t.data, t.len));
  h_proc_free(&p);
  server_stop(&s);
  h_bytes_free(&t);
  h_rm_dir(dir);
}

CTS_TEST(second_client_is_refused_and_ctrl_c_ends_the_first) {
  char dir[256], a_out[300], c_out[300];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "fetch"));
  h_bytes_t t;
  h_make_trace(&t, 2, 50000, "svc", 77);
  uint64_t ends[4096];
  const size_t n = h_packet_ends(&t, ends, 4096);
  CTS_ASSERT(n > 4);
  server_t s;
  CTS_ASSERT(server_start(&s, &t, ends[n / 2] + 10, SERVE_UNTIL_EOF));
  snprintf(a_out, sizeof a_out, "%s/a.ctf", dir);
  snprintf(c_out, sizeof c_out, "%s/c.ctf", dir);
  h_proc_t a, b;
  const char *const a_args[] = {"-o", a_out, NULL};
  CTS_ASSERT(fetch_spawn(&a, s.port, NULL, a_args));
  CTS_ASSERT(wait_flag(&s.waiting, 10000));
  /* The program serves one client at a time: a second fetch is told so. */
  char b_out[300];
  snprintf(b_out, sizeof b_out, "%s/b.ctf", dir);
  const char *const b_args[] = {"-o", b_out, NULL};
  CTS_ASSERT(fetch_spawn(&b, s.port, NULL, b_args));
  CTS_ASSERT_EQ_INT(h_proc_wait(&b, 10000), 3);
  CTS_ASSERT_MSG(h_proc_count(&b, "is another client already connected?") == 1, "%s",
                 (char *)b.log.data);
  CTS_ASSERT(access(b_out, F_OK) != 0);
  CTS_ASSERT_EQ_INT(atomic_load(&s.refused), 1);
  /* Ctrl-C: fetch half-closes, the program ends its trace, fetch saves all of it. */
  kill(a.pid, SIGINT);
  CTS_ASSERT_EQ_INT(h_proc_wait(&a, 10000), 0);
  CTS_ASSERT_MSG(h_proc_count(&a, "stopped (Ctrl-C); the program ended the stream: saved") == 1,
                 "%s", (char *)a.log.data);
  CTS_ASSERT(same_file(a_out, t.data, t.len));
  /* The program takes a new client once the first has left. */
  atomic_store(&s.mode, SERVE_ALL);
  h_proc_t c;
  const char *const c_args[] = {"-o", c_out, NULL};
  CTS_ASSERT(fetch_spawn(&c, s.port, NULL, c_args));
  CTS_ASSERT_EQ_INT(h_proc_wait(&c, 30000), 0);
  CTS_ASSERT(same_file(c_out, t.data, t.len));
  CTS_ASSERT_EQ_INT(atomic_load(&s.served), 2);
  h_proc_free(&a);
  h_proc_free(&b);
  h_proc_free(&c);
  server_stop(&s);
  h_bytes_free(&t);
  h_rm_dir(dir);
}

CTS_TEST(ctrl_c_with_a_silent_program_keeps_the_complete_packets) {
  char dir[256], out[300];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "fetch"));
  h_bytes_t t;
  h_make_trace(&t, 3, 50000, "silent", 78);
  uint64_t ends[4096];
  const size_t n = h_packet_ends(&t, ends, 4096);
  CTS_ASSERT(n > 4);
  server_t s;
  CTS_ASSERT(server_start(&s, &t, ends[2] + 10, SERVE_AND_IGNORE));
  snprintf(out, sizeof out, "%s/s.ctf", dir);
  h_proc_t p;
  const char *const args[] = {"-o", out, "--drain", "0.3", NULL};
  CTS_ASSERT(fetch_spawn(&p, s.port, NULL, args));
  CTS_ASSERT(wait_flag(&s.waiting, 10000));
  h_sleep_ms(100); /* let fetch read what was sent */
  kill(p.pid, SIGINT);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 10000), 0);
  CTS_ASSERT_MSG(h_proc_count(&p, "stopped (Ctrl-C): saved") == 1, "%s", (char *)p.log.data);
  CTS_ASSERT_MSG(h_proc_count(&p, "dropped the last 10 bytes (incomplete or invalid packet") == 1,
                 "%s", (char *)p.log.data);
  CTS_ASSERT(same_file(out, t.data, ends[2]));
  uint64_t events;
  CTS_ASSERT_EQ_INT(h_decode_file(out, &events), 0);
  h_proc_free(&p);
  server_stop(&s);
  h_bytes_free(&t);
  h_rm_dir(dir);
}

CTS_TEST(failures_have_clear_exit_codes) {
  char dir[256], out[300];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "fetch"));
  snprintf(out, sizeof out, "%s/x.ctf", dir);
  /* Nothing listening. */
  cts_net_addr_t a, bound;
  char err[CTS_NET_ERR_LEN];
  int lfd;
  CTS_ASSERT(cts_net_parse_listen("127.0.0.1:0", &a, err, sizeof err) == 0);
  CTS_ASSERT(cts_net_listen(&a, 1, false, &lfd) == 0);
  cts_net_local_addr(lfd, &bound);
  close(lfd);
  h_proc_t p;
  const char *const args[] = {"-o", out, NULL};
  CTS_ASSERT(fetch_spawn(&p, cts_net_addr_port(&bound), NULL, args));
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 10000), 3);
  CTS_ASSERT(h_proc_count(&p, "cannot connect to 127.0.0.1:") == 1);
  h_proc_free(&p);
  /* Garbage instead of a trace. */
  h_bytes_t g = {0};
  h_bytes_append(&g, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
  server_t s;
  CTS_ASSERT(server_start(&s, &g, 0, SERVE_ALL));
  CTS_ASSERT(fetch_spawn(&p, s.port, NULL, args));
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 10000), 1);
  CTS_ASSERT_MSG(h_proc_count(&p, "unknown stream format: starts with 48 54 54 50") == 1, "%s",
                 (char *)p.log.data);
  CTS_ASSERT(access(out, F_OK) != 0);
  h_proc_free(&p);
  server_stop(&s);
  h_bytes_free(&g);
  /* Usage. */
  char *const bad[] = {(char *)CTS_TEST_CTFSCOPE, "fetch", "nohostport", NULL};
  CTS_ASSERT(h_proc_spawn(&p, bad, NULL, NULL));
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 10000), 2);
  h_proc_free(&p);
  h_rm_dir(dir);
}

CTS_TEST_MAIN()
