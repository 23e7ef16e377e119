/* SPDX-License-Identifier: MIT */
/* `ctfscope collect` over loopback with real sockets: many concurrent clients, broken and
 * hostile clients, limits, timeouts, names, shutdown. Each test starts its own collector on
 * an ephemeral port and checks its log lines, its files and its exit status. */
#include <sys/socket.h>

#include "harness.h"
#include "../test.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static uint16_t local_port(int fd) {
  cts_net_addr_t a;
  return cts_net_local_addr(fd, &a) == 0 ? cts_net_addr_port(&a) : 0;
}

/* The collector's log line for the client whose local port is port (waits for it). */
static char *line_for(h_proc_t *p, uint16_t port, int timeout_ms) {
  char needle[48];
  snprintf(needle, sizeof needle, "127.0.0.1:%u: ", port);
  if (!h_proc_wait_for(p, needle, 1, timeout_ms)) return NULL;
  return h_proc_line(p, needle);
}

/* Checks that the file saved for a client holds exactly want[0..len). */
static bool file_is(const char *dir, const char *prefix, const uint8_t *want, size_t len, char *why,
                    size_t why_size) {
  char path[4096];
  if (!h_find_file(dir, prefix, path, sizeof path)) {
    snprintf(why, why_size, "no file %s* in %s", prefix, dir);
    return false;
  }
  h_bytes_t got;
  if (!h_read_file(path, &got)) {
    snprintf(why, why_size, "cannot read %.400s", path);
    return false;
  }
  bool same = got.len == len && memcmp(got.data, want, len) == 0;
  if (!same)
    snprintf(why, why_size, "%.400s: %zu bytes, expected %zu (or different bytes)", path, got.len,
             len);
  h_bytes_free(&got);
  return same;
}

/* The path of the file saved for the client whose local port is port. */
static bool file_of_port(const char *dir, uint16_t port, char *path, size_t size) {
  char needle[48];
  snprintf(needle, sizeof needle, ".127.0.0.1-%u.ctf", port);
  DIR *d = opendir(dir);
  struct dirent *e;
  bool found = false;
  while (d && !found && (e = readdir(d)) != NULL)
    if (strstr(e->d_name, needle)) {
      snprintf(path, size, "%s/%s", dir, e->d_name);
      found = true;
    }
  if (d) closedir(d);
  return found;
}

/* Checks that the file saved for the client on port holds exactly want[0..len). */
static bool port_file_is(const char *dir, uint16_t port, const uint8_t *want, size_t len, char *why,
                         size_t why_size) {
  char path[4096];
  if (!file_of_port(dir, port, path, sizeof path)) {
    snprintf(why, why_size, "no file for port %u in %s", port, dir);
    return false;
  }
  const char *slash = strrchr(path, '/');
  return file_is(dir, slash + 1, want, len, why, why_size);
}

/* ---- 64 concurrent clients ------------------------------------------------------------- */

#define NCLIENTS 64
#define NEVENTS  100000

typedef struct job {
  uint16_t port;
  unsigned seed;
  bool sent;
  size_t len;
} job_t;

static void exe_name(unsigned seed, char *buf, size_t size) {
  snprintf(buf, size, "/opt/bin/client-%u", seed);
}

static void *client_main(void *arg) {
  job_t *j = arg;
  char exe[64];
  exe_name(j->seed, exe, sizeof exe);
  h_bytes_t t;
  h_make_trace(&t, j->seed, NEVENTS, exe, 10000 + j->seed);
  j->len = t.len;
  const int fd = h_connect(j->port);
  if (fd >= 0) {
    j->sent = h_send_chunked(fd, t.data, t.len, j->seed);
    close(fd);
  }
  h_bytes_free(&t);
  return NULL;
}

CTS_TEST(concurrent_clients_files_are_byte_identical) {
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  h_proc_t p;
  uint16_t port;
  CTS_ASSERT(h_collector_start(&p, dir, &port, NULL));
  static job_t jobs[NCLIENTS];
  pthread_t th[NCLIENTS];
  for (unsigned i = 0; i < NCLIENTS; i++) {
    jobs[i] = (job_t){.port = port, .seed = i + 1};
    CTS_ASSERT(pthread_create(&th[i], NULL, client_main, &jobs[i]) == 0);
  }
  uint64_t total = 0;
  for (unsigned i = 0; i < NCLIENTS; i++) {
    pthread_join(th[i], NULL);
    CTS_ASSERT_MSG(jobs[i].sent, "client %u could not send its trace", i);
    total += jobs[i].len;
  }
  CTS_ASSERT_MSG(h_proc_wait_for(&p, ": closed by peer: saved ", NCLIENTS, 120000),
                 "not every connection was saved:\n%s", (char *)p.log.data);
  const long peak_kib = h_proc_peak_rss_kib(p.pid);
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);
  fprintf(stderr, "  %d clients sent %llu bytes; collector peak RSS %ld KiB\n", NCLIENTS,
          (unsigned long long)total, peak_kib);
#ifndef UNDER_ASAN
  /* Bounded: far below the data that went through (a collector that kept traces in memory
   * would need all of it). */
  CTS_ASSERT_MSG(peak_kib > 0 && (uint64_t)peak_kib * 1024 < total / 2 && peak_kib < 96 * 1024,
                 "collector peak RSS %ld KiB for %llu bytes of traces", peak_kib,
                 (unsigned long long)total);
#endif
  for (unsigned i = 0; i < NCLIENTS; i++) {
    char exe[64], prefix[64], why[512];
    exe_name(jobs[i].seed, exe, sizeof exe);
    h_bytes_t t;
    h_make_trace(&t, jobs[i].seed, NEVENTS, exe, 10000 + jobs[i].seed);
    snprintf(prefix, sizeof prefix, "client-%u.%u.", jobs[i].seed, 10000 + jobs[i].seed);
    const bool same = file_is(dir, prefix, t.data, t.len, why, sizeof why);
    h_bytes_free(&t);
    CTS_ASSERT_MSG(same, "%s", why);
    char path[4096];
    CTS_ASSERT(h_find_file(dir, prefix, path, sizeof path));
    uint64_t events;
    CTS_ASSERT_EQ_INT(h_decode_file(path, &events), 0);
    CTS_ASSERT_EQ_U64(events, NEVENTS);
  }
  int n;
  free(h_list_dir(dir, &n));
  CTS_ASSERT_EQ_INT(n, NCLIENTS); /* no temporary file left */
  h_proc_free(&p);
  h_rm_dir(dir);
}

/* ---- hostile and broken clients among good ones --------------------------------------- */

typedef struct slow_job {
  uint16_t port, local;
  const uint8_t *data;
  size_t len;
  int mode; /* 0: one byte a second; 1: never sends; 2: good, sent slowly in pieces */
  bool closed_by_collector, sent;
} slow_job_t;

static void *slow_main(void *arg) {
  slow_job_t *j = arg;
  const int fd = h_connect(j->port);
  if (fd < 0) return NULL;
  j->local = local_port(fd);
  if (j->mode == 0) {
    for (size_t i = 0; i < j->len && i < 10; i++) {
      if (cts_net_write_all(fd, j->data + i, 1, 1000) != 0) break;
      if (h_wait_closed(fd, 1000)) {
        j->closed_by_collector = true;
        break;
      }
    }
  } else if (j->mode == 1) {
    j->closed_by_collector = h_wait_closed(fd, 10000);
  } else {
    j->sent = true;
    for (size_t off = 0; off < j->len && j->sent; off += 8192) {
      const size_t n = j->len - off < 8192 ? j->len - off : 8192;
      j->sent = cts_net_write_all(fd, j->data + off, n, 10000) == 0;
      h_sleep_ms(10);
    }
  }
  close(fd);
  return NULL;
}

/* Sends bytes on a fresh connection and closes it; returns the local port. */
static uint16_t send_and_close(uint16_t port, const void *data, size_t len, bool reset) {
  const int fd = h_connect(port);
  if (fd < 0) return 0;
  const uint16_t local = local_port(fd);
  cts_net_write_all(fd, data, len, 5000);
  if (reset) {
    const struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  close(fd);
  return local;
}

CTS_TEST(bad_clients_are_dropped_without_affecting_others) {
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  h_proc_t p;
  uint16_t port;
  const char *const extra[] = {"--packet-timeout", "1", NULL};
  CTS_ASSERT(h_collector_start(&p, dir, &port, extra));

  h_bytes_t good[4], victim;
  for (unsigned i = 0; i < 4; i++) {
    char exe[32];
    snprintf(exe, sizeof exe, "good%u", i);
    h_make_trace(&good[i], 100 + i, 30000, exe, 500 + i);
  }
  h_make_trace(&victim, 200, 20000, "victim", 600);
  uint64_t ends[4096];
  const size_t npackets = h_packet_ends(&victim, ends, 4096);
  CTS_ASSERT(npackets > 6);

  /* Good clients, sending slowly so that they overlap everything below. */
  slow_job_t jobs[6];
  pthread_t th[6];
  for (unsigned i = 0; i < 4; i++)
    jobs[i] = (slow_job_t){.port = port, .data = good[i].data, .len = good[i].len, .mode = 2};
  jobs[4] = (slow_job_t){.port = port, .data = victim.data, .len = victim.len, .mode = 0};
  jobs[5] = (slow_job_t){.port = port, .mode = 1};
  for (unsigned i = 0; i < 6; i++)
    CTS_ASSERT(pthread_create(&th[i], NULL, slow_main, &jobs[i]) == 0);

  /* Garbage. */
  uint8_t garbage[4096];
  uint64_t rng = 42;
  for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)h_rng(&rng);
  garbage[0] = 'G';
  const uint16_t garbage_port = send_and_close(port, garbage, sizeof garbage, false);
  /* A wrong magic from the first byte. */
  h_bytes_t bad = {0};
  h_bytes_append(&bad, victim.data, victim.len);
  bad.data[0] = 0xc2;
  const uint16_t wrong_magic_port = send_and_close(port, bad.data, bad.len, false);
  /* A wrong magic in the fourth packet: the first three are kept. */
  bad.data[0] = 0xc1;
  bad.data[ends[2] + 3] ^= 0xff;
  const uint16_t wrong_magic_later_port = send_and_close(port, bad.data, bad.len, false);
  /* A 4 GB packet length (0xfffffff8 bits) right after the trace-info packet. */
  h_bytes_t huge = {0};
  h_bytes_append(&huge, victim.data, ends[1]);
  uint8_t header[66];
  memcpy(header, victim.data + ends[0], sizeof header);
  const uint32_t bits = 0xfffffff8u;
  memcpy(header + 4, &bits, 4);
  h_bytes_append(&huge, header, sizeof header);
  const uint16_t huge_port = send_and_close(port, huge.data, huge.len, false);
  /* A 4 GB length in the very first packet. */
  memcpy(header, victim.data, sizeof header);
  memcpy(header + 4, &bits, 4);
  const uint16_t huge_first_port = send_and_close(port, header, sizeof header, false);
  /* A program killed in the middle of a packet. */
  const size_t cut_packet = 4;
  const size_t cut_at = ends[cut_packet] + (ends[cut_packet + 1] - ends[cut_packet]) / 2;
  const int killed_fd = h_connect(port);
  CTS_ASSERT(killed_fd >= 0);
  const uint16_t killed_port = local_port(killed_fd);
  const pid_t child = fork();
  CTS_ASSERT(child >= 0);
  if (child == 0) {
    cts_net_write_all(killed_fd, victim.data, cut_at, 5000);
    raise(SIGKILL);
    _exit(1);
  }
  close(killed_fd);
  int status;
  waitpid(child, &status, 0);
  CTS_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  /* A connection reset in the middle of a packet. */
  const uint16_t reset_port = send_and_close(port, victim.data, cut_at, true);

  for (unsigned i = 0; i < 6; i++) pthread_join(th[i], NULL);
  for (unsigned i = 0; i < 4; i++) CTS_ASSERT_MSG(jobs[i].sent, "good client %u failed", i);
  CTS_ASSERT_MSG(jobs[4].closed_by_collector, "the 1 byte/s client was not dropped");
  CTS_ASSERT_MSG(jobs[5].closed_by_collector, "the silent client was not dropped");

  struct {
    uint16_t port;
    const char *want;
  } expect[] = {
      {garbage_port, "dropped (invalid data: at offset 0: unknown stream format: starts with 47"},
      {wrong_magic_port,
       "dropped (invalid data: at offset 0: unknown stream format: starts with c2 "},
      {wrong_magic_later_port, "bad packet magic"},
      {huge_port, "exceeds the reader's limit"},
      {huge_first_port, "exceeds the reader's limit"},
      {killed_port, ": closed by peer mid-packet: saved victim.600."},
      {jobs[4].local,
       "dropped (too slow: the trace header was not complete after 1.000 s): "
       "nothing saved"},
      {jobs[5].local,
       "dropped (too slow: the trace header was not complete after 1.000 s): "
       "nothing saved (0 bytes received"},
  };
  for (size_t i = 0; i < CTS_ARRAY_SIZE(expect); i++) {
    char *line = line_for(&p, expect[i].port, 10000);
    CTS_ASSERT_MSG(line && strstr(line, expect[i].want), "case %zu: want '%s' in '%s'", i,
                   expect[i].want, line ? line : "(no line)");
    free(line);
  }
  char *line = line_for(&p, wrong_magic_later_port, 1000);
  CTS_ASSERT_MSG(strstr(line, "saved victim.600.") && strstr(line, " 3 packets,"), "%s", line);
  free(line);
  line = line_for(&p, reset_port, 10000);
  CTS_ASSERT_MSG(line && (strstr(line, "connection lost") || strstr(line, "mid-packet")), "%s",
                 line ? line : "(no line for the reset client)");
  free(line);
  for (unsigned i = 0; i < 4; i++) {
    char *l = line_for(&p, jobs[i].local, 10000);
    CTS_ASSERT_MSG(l && strstr(l, ": closed by peer: saved good"), "%s", l ? l : "(none)");
    free(l);
  }
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);

  /* The files: good ones whole, broken ones cut at their last complete packet. */
  char why[512], prefix[128];
  for (unsigned i = 0; i < 4; i++) {
    snprintf(prefix, sizeof prefix, "good%u.%u.", i, 500 + i);
    CTS_ASSERT_MSG(file_is(dir, prefix, good[i].data, good[i].len, why, sizeof why), "%s", why);
  }
  CTS_ASSERT_MSG(port_file_is(dir, killed_port, victim.data, ends[cut_packet], why, sizeof why),
                 "%s", why);
  CTS_ASSERT_MSG(port_file_is(dir, wrong_magic_later_port, victim.data, ends[2], why, sizeof why),
                 "%s", why);
  CTS_ASSERT_MSG(port_file_is(dir, huge_port, victim.data, ends[1], why, sizeof why), "%s", why);
  /* Reset: whatever arrived before the reset, cut at a packet boundary. */
  char path[4096];
  if (file_of_port(dir, reset_port, path, sizeof path)) {
    h_bytes_t got;
    CTS_ASSERT(h_read_file(path, &got));
    bool boundary = false;
    for (size_t i = 0; i < npackets; i++) boundary |= ends[i] == got.len;
    CTS_ASSERT_MSG(boundary && memcmp(got.data, victim.data, got.len) == 0,
                   "reset client's file is not a prefix cut at a packet boundary");
    h_bytes_free(&got);
  }
  int n;
  char *names = h_list_dir(dir, &n);
  CTS_ASSERT_MSG(strstr(names, ".part") == NULL, "temporary files left:\n%s", names);
  free(names);
  for (unsigned i = 0; i < 4; i++) h_bytes_free(&good[i]);
  h_bytes_free(&victim);
  h_bytes_free(&bad);
  h_bytes_free(&huge);
  h_proc_free(&p);
  h_rm_dir(dir);
}

/* ---- limits ------------------------------------------------------------------------------ */

CTS_TEST(max_clients_refuses_extra_connections) {
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  h_proc_t p;
  uint16_t port;
  const char *const extra[] = {"--max-clients", "2", "--verbose", NULL};
  CTS_ASSERT(h_collector_start(&p, dir, &port, extra));
  const int a = h_connect(port), b = h_connect(port);
  CTS_ASSERT(a >= 0 && b >= 0);
  CTS_ASSERT(h_proc_wait_for(&p, ": connected", 2, 5000));
  const int c = h_connect(port);
  CTS_ASSERT(c >= 0);
  const uint16_t c_port = local_port(c);
  CTS_ASSERT_MSG(h_wait_closed(c, 5000), "the third client was not refused");
  char *line = line_for(&p, c_port, 5000);
  CTS_ASSERT_MSG(line && strstr(line, "refused: too many clients (max 2)"), "%s",
                 line ? line : "(none)");
  free(line);
  close(c);
  /* When one leaves, a new client is taken and its trace saved. */
  close(a);
  CTS_ASSERT(h_proc_wait_for(&p, "nothing saved", 1, 5000));
  h_bytes_t t;
  h_make_trace(&t, 7, 5000, "after", 77);
  const uint16_t d_port = send_and_close(port, t.data, t.len, false);
  char want[96];
  snprintf(want, sizeof want, "127.0.0.1:%u: closed by peer: saved after.77.", d_port);
  CTS_ASSERT_MSG(h_proc_wait_for(&p, want, 1, 10000), "%s", (char *)p.log.data);
  close(b);
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);
  char why[512];
  CTS_ASSERT_MSG(file_is(dir, "after.77.", t.data, t.len, why, sizeof why), "%s", why);
  h_bytes_free(&t);
  h_proc_free(&p);
  h_rm_dir(dir);
}

CTS_TEST(max_bytes_cuts_the_trace_at_a_packet) {
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  h_proc_t p;
  uint16_t port;
  const char *const extra[] = {"--max-bytes", "64k", NULL};
  CTS_ASSERT(h_collector_start(&p, dir, &port, extra));
  h_bytes_t t;
  h_make_trace(&t, 8, 50000, "big", 88);
  CTS_ASSERT(t.len > 3 * 65536);
  const int fd = h_connect(port);
  CTS_ASSERT(fd >= 0);
  const uint16_t lp = local_port(fd);
  h_send_chunked(fd, t.data, t.len, 3); /* may fail when the collector drops us */
  close(fd);
  char *line = line_for(&p, lp, 10000);
  CTS_ASSERT_MSG(line && strstr(line,
                                "dropped (trace larger than the limit of 65536 bytes): "
                                "saved big.88."),
                 "%s", line ? line : "(none)");
  free(line);
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);
  uint64_t ends[4096];
  const size_t n = h_packet_ends(&t, ends, 4096);
  size_t keep = 0;
  for (size_t i = 0; i < n; i++)
    if (ends[i] <= 65536) keep = ends[i];
  char why[512];
  CTS_ASSERT_MSG(file_is(dir, "big.88.", t.data, keep, why, sizeof why), "%s", why);
  char path[4096];
  CTS_ASSERT(h_find_file(dir, "big.88.", path, sizeof path));
  uint64_t events;
  CTS_ASSERT_EQ_INT(h_decode_file(path, &events), 0);
  h_bytes_free(&t);
  h_proc_free(&p);
  h_rm_dir(dir);
}

CTS_TEST(idle_timeout_drops_silent_connections) {
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  h_proc_t p;
  uint16_t port;
  const char *const extra[] = {"--idle-timeout", "0.5", "--packet-timeout", "0", NULL};
  CTS_ASSERT(h_collector_start(&p, dir, &port, extra));
  h_bytes_t t;
  h_make_trace(&t, 9, 3000, "quiet", 99);
  uint64_t ends[64];
  CTS_ASSERT(h_packet_ends(&t, ends, 64) >= 2);
  const int fd = h_connect(port);
  CTS_ASSERT(fd >= 0);
  const uint16_t lp = local_port(fd);
  CTS_ASSERT(cts_net_write_all(fd, t.data, ends[1], 5000) == 0);
  CTS_ASSERT_MSG(h_wait_closed(fd, 5000), "the idle client was not dropped");
  close(fd);
  char *line = line_for(&p, lp, 5000);
  CTS_ASSERT_MSG(line &&
                     strstr(line,
                            "dropped (idle: nothing received for 0.500 s): saved "
                            "quiet.99.") &&
                     strstr(line, "2 packets"),
                 "%s", line ? line : "(none)");
  free(line);
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);
  char why[512];
  CTS_ASSERT_MSG(file_is(dir, "quiet.99.", t.data, ends[1], why, sizeof why), "%s", why);
  h_bytes_free(&t);
  h_proc_free(&p);
  h_rm_dir(dir);
}

/* ---- shutdown ---------------------------------------------------------------------------- */

static uint64_t part_bytes(const char *dir) {
  DIR *d = opendir(dir);
  uint64_t total = 0;
  struct dirent *e;
  char path[4096];
  while (d && (e = readdir(d)) != NULL) {
    if (!strstr(e->d_name, ".part")) continue;
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) == 0) total += (uint64_t)st.st_size;
  }
  if (d) closedir(d);
  return total;
}

CTS_TEST(sigterm_finishes_every_file) {
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  h_proc_t p;
  uint16_t port;
  CTS_ASSERT(h_collector_start(&p, dir, &port, NULL));
  h_bytes_t t1, t2;
  h_make_trace(&t1, 11, 20000, "open1", 111);
  h_make_trace(&t2, 12, 20000, "open2", 112);
  uint64_t e1[4096], e2[4096];
  CTS_ASSERT(h_packet_ends(&t1, e1, 4096) > 4 && h_packet_ends(&t2, e2, 4096) > 4);
  /* Complete packets on one connection, a cut packet on another, nothing on a third; all
   * stay open. */
  const int a = h_connect(port), b = h_connect(port), c = h_connect(port);
  CTS_ASSERT(a >= 0 && b >= 0 && c >= 0);
  const size_t b_cut = e2[3] + 100;
  CTS_ASSERT(cts_net_write_all(a, t1.data, e1[3], 5000) == 0);
  CTS_ASSERT(cts_net_write_all(b, t2.data, b_cut, 5000) == 0);
  const int64_t end = h_now_ms() + 10000;
  while (part_bytes(dir) < e1[3] + b_cut && h_now_ms() < end) h_sleep_ms(10);
  CTS_ASSERT_EQ_U64(part_bytes(dir), e1[3] + b_cut);
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);
  CTS_ASSERT_EQ_INT(h_proc_count(&p, ": closed at shutdown"), 3);
  CTS_ASSERT_EQ_INT(h_proc_count(&p, ": closed at shutdown: saved open1.111."), 1);
  CTS_ASSERT_EQ_INT(h_proc_count(&p, ": closed at shutdown mid-packet: saved open2.112."), 1);
  CTS_ASSERT_EQ_INT(h_proc_count(&p, ": closed at shutdown: nothing saved (0 bytes"), 1);
  CTS_ASSERT(h_proc_count(&p, "stopped: 3 connections, 2 traces saved, 1 dropped") == 1);
  char why[512];
  CTS_ASSERT_MSG(file_is(dir, "open1.111.", t1.data, e1[3], why, sizeof why), "%s", why);
  CTS_ASSERT_MSG(file_is(dir, "open2.112.", t2.data, e2[3], why, sizeof why), "%s", why);
  int n;
  free(h_list_dir(dir, &n));
  CTS_ASSERT_EQ_INT(n, 2);
  close(a);
  close(b);
  close(c);
  h_bytes_free(&t1);
  h_bytes_free(&t2);
  h_proc_free(&p);
  h_rm_dir(dir);
}

/* ---- names ------------------------------------------------------------------------------- */

CTS_TEST(file_names_are_sanitised_and_stay_in_the_directory) {
  char top[256], dir[300];
  CTS_ASSERT(h_mkdtemp(top, sizeof top, "collect"));
  snprintf(dir, sizeof dir, "%s/out", top);
  CTS_ASSERT(mkdir(dir, 0755) == 0);
  h_proc_t p;
  uint16_t port;
  CTS_ASSERT(h_collector_start(&p, dir, &port, NULL));
  char longname[400];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  const char *exes[] = {"..",      "../../../../tmp/evil", "a b\n\001c/", "dir/",
                        ".hidden", "ok-name_1.2+3",        longname,      "a b\n\001c"};
  const char *want[] = {"_..1.",
                        "evil.2.",
                        "trace.3.",
                        "trace.4.",
                        "_hidden.5.",
                        "ok-name_1.2+3.6.",
                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.7.",
                        "a_b__c.8."};
  for (unsigned i = 0; i < CTS_ARRAY_SIZE(exes); i++) {
    h_bytes_t t;
    h_make_trace(&t, 20 + i, 100, exes[i], i + 1);
    send_and_close(port, t.data, t.len, false);
    h_bytes_free(&t);
  }
  CTS_ASSERT(h_proc_wait_for(&p, "closed by peer: saved", (int)CTS_ARRAY_SIZE(exes), 10000));
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);
  int n;
  char *names = h_list_dir(dir, &n);
  CTS_ASSERT_EQ_INT(n, (int)CTS_ARRAY_SIZE(exes));
  for (unsigned i = 0; i < CTS_ARRAY_SIZE(want); i++) {
    char path[4096];
    CTS_ASSERT_MSG(h_find_file(dir, want[i], path, sizeof path), "no file %s* among:\n%s", want[i],
                   names);
  }
  for (const char *s = names; *s; s = strchr(s, '\n') + 1) {
    const size_t len = (size_t)(strchr(s, '\n') - s);
    CTS_ASSERT_MSG(len < 200 && s[0] != '.', "bad name %.*s", (int)len, s);
    for (size_t k = 0; k < len; k++) CTS_ASSERT(s[k] != '/' && s[k] != ' ' && s[k] > 32);
  }
  free(names);
  names = h_list_dir(top, &n);
  CTS_ASSERT_MSG(n == 1 && strcmp(names, "out\n") == 0, "files outside the directory:\n%s", names);
  free(names);
  h_proc_free(&p);
  h_rm_dir(dir);
  h_rm_dir(top);
}

/* ---- task traces ------------------------------------------------------------------------- */

CTS_TEST(task_trace_streams_are_saved_by_packet) {
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  h_proc_t p;
  uint16_t port;
  CTS_ASSERT(h_collector_start(&p, dir, &port, NULL));
  static const uint8_t uuid[16] = {0x05, 0x88, 0x3b, 0x8d, 0x52, 0x1a, 0x48, 0x7b,
                                   0xb3, 0x97, 0x45, 0x6a, 0xb1, 0x50, 0x68, 0x0c};
  h_bytes_t s = {0};
  for (unsigned k = 0; k < 3; k++) {
    uint8_t pk[512] = {0xc1, 0x1f, 0xfc, 0xc1};
    memcpy(pk + 4, uuid, 16);
    const uint32_t bits = sizeof pk * 8, content = 240 + 8 * 10 * k;
    const uint16_t seq = (uint16_t)k;
    memcpy(pk + 20, &bits, 4);
    memcpy(pk + 24, &seq, 2);
    memcpy(pk + 26, &content, 4);
    h_bytes_append(&s, pk, sizeof pk);
  }
  const uint16_t lp = send_and_close(port, s.data, s.len - 100, false);
  char *line = line_for(&p, lp, 10000);
  CTS_ASSERT_MSG(line && strstr(line, "closed by peer mid-packet: saved tasks.") &&
                     strstr(line, "(1024 bytes, 0 events, 2 packets"),
                 "%s", line ? line : "(none)");
  free(line);
  kill(p.pid, SIGTERM);
  CTS_ASSERT_EQ_INT(h_proc_wait(&p, 20000), 0);
  char why[512];
  CTS_ASSERT_MSG(file_is(dir, "tasks.", s.data, 1024, why, sizeof why), "%s", why);
  h_bytes_free(&s);
  h_proc_free(&p);
  h_rm_dir(dir);
}

/* ---- validation levels ----------------------------------------------------------------- */

static uint64_t ld64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Allocations in a v2 trace, from its packet headers (object-id ranges, memtrace.md §4). */
static uint64_t allocations_of(const h_bytes_t *t, const uint64_t *ends, size_t n) {
  uint64_t total = 0;
  for (size_t i = 1; i < n; i++)
    total += ld64(t->data + ends[i - 1] + 58) - ld64(t->data + ends[i - 1] + 50);
  return total;
}

/* Starts a collector with the given --validate level (NULL: the default), sends each
 * stream on its own connection, and returns the log line of each. */
static void collect_lines(const char *level, const h_bytes_t *const *streams, size_t n,
                          char **lines, const char *dir) {
  h_proc_t p;
  uint16_t port;
  const char *const extra[] = {"--validate", level, NULL};
  if (!h_collector_start(&p, dir, &port, level ? extra : NULL)) {
    for (size_t i = 0; i < n; i++) lines[i] = NULL;
    return;
  }
  uint16_t ports[8];
  for (size_t i = 0; i < n; i++)
    ports[i] = send_and_close(port, streams[i]->data, streams[i]->len, false);
  for (size_t i = 0; i < n; i++) lines[i] = line_for(&p, ports[i], 10000);
  kill(p.pid, SIGTERM);
  h_proc_wait(&p, 20000);
  h_proc_free(&p);
}

CTS_TEST(validation_levels_decide_what_is_checked) {
  h_bytes_t good;
  h_make_trace(&good, 300, 20000, "levels", 700);
  uint64_t ends[4096];
  const size_t n = h_packet_ends(&good, ends, 4096);
  CTS_ASSERT(n > 6 && ends[n - 1] == good.len);
  /* The first packet after the third that holds allocations. */
  size_t k = 3;
  while (k < n && ld64(good.data + ends[k - 1] + 58) == ld64(good.data + ends[k - 1] + 50)) k++;
  CTS_ASSERT(k < n);
  const uint64_t at = ends[k - 1];
  /* An unknown event code in packet k's first event: only decoding sees it. */
  h_bytes_t bad_event = {0};
  h_bytes_append(&bad_event, good.data, good.len);
  bad_event.data[at + 66 + 3] = (uint8_t)(127u << 1 | (bad_event.data[at + 66 + 3] & 1u));
  /* Packet k says version 3 in a v002 trace; packet k's object ids run backwards. */
  h_bytes_t bad_version = {0}, bad_ids = {0};
  h_bytes_append(&bad_version, good.data, good.len);
  bad_version.data[at + 28] = 3;
  h_bytes_append(&bad_ids, good.data, good.len);
  memcpy(bad_ids.data + at + 50, good.data + at + 58, 8);
  memcpy(bad_ids.data + at + 58, good.data + at + 50, 8);

  uint64_t events = 0;
  {
    char dir0[256], path[300];
    CTS_ASSERT(h_mkdtemp(dir0, sizeof dir0, "collect"));
    snprintf(path, sizeof path, "%s/t.ctf", dir0);
    FILE *f = fopen(path, "wb");
    CTS_ASSERT(f && fwrite(good.data, 1, good.len, f) == good.len && fclose(f) == 0);
    CTS_ASSERT_EQ_INT(h_decode_file(path, &events), 0);
    h_rm_dir(dir0);
  }
  char want[128];
  char dir[256];
  char *lines[4];

  /* packets (the default): framing and headers; a bad event inside a packet passes. */
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  const h_bytes_t *const packets_streams[] = {&good, &bad_event, &bad_version, &bad_ids};
  collect_lines(NULL, packets_streams, 4, lines, dir);
  CTS_ASSERT_MSG(lines[0] && strstr(lines[0], ": closed by peer: saved levels.700."), "%s",
                 lines[0] ? lines[0] : "(none)");
  snprintf(want, sizeof want, "(%zu bytes, %llu allocations, %zu packets", good.len,
           (unsigned long long)allocations_of(&good, ends, n), n);
  CTS_ASSERT_MSG(lines[0] && strstr(lines[0], want), "want '%s' in %s", want,
                 lines[0] ? lines[0] : "(none)");
  CTS_ASSERT_MSG(lines[1] && strstr(lines[1], ": closed by peer: saved levels.700."), "%s",
                 lines[1] ? lines[1] : "(none)");
  CTS_ASSERT_MSG(lines[2] && strstr(lines[2], "dropped (invalid data: at offset ") &&
                     strstr(lines[2], "packet version 3, the trace's is 2"),
                 "%s", lines[2] ? lines[2] : "(none)");
  CTS_ASSERT_MSG(lines[3] && strstr(lines[3], "object ids") && strstr(lines[3], "run backwards"),
                 "%s", lines[3] ? lines[3] : "(none)");
  snprintf(want, sizeof want, "(%llu bytes,", (unsigned long long)at);
  CTS_ASSERT_MSG(lines[2] && strstr(lines[2], want), "want '%s' in %s", want, lines[2]);
  CTS_ASSERT_MSG(lines[3] && strstr(lines[3], want), "want '%s' in %s", want, lines[3]);
  for (int i = 0; i < 4; i++) free(lines[i]);
  h_rm_dir(dir);

  /* full: the bad event is caught, the file keeps the packets before it. */
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  const h_bytes_t *const full_streams[] = {&good, &bad_event};
  collect_lines("full", full_streams, 2, lines, dir);
  snprintf(want, sizeof want, "(%zu bytes, %llu events, %zu packets", good.len,
           (unsigned long long)events, n);
  CTS_ASSERT_MSG(lines[0] && strstr(lines[0], want), "want '%s' in %s", want,
                 lines[0] ? lines[0] : "(none)");
  CTS_ASSERT_MSG(lines[1] && strstr(lines[1], "dropped (invalid data: ") &&
                     strstr(lines[1], "unknown event code 127"),
                 "%s", lines[1] ? lines[1] : "(none)");
  snprintf(want, sizeof want, "(%llu bytes,", (unsigned long long)at);
  CTS_ASSERT_MSG(lines[1] && strstr(lines[1], want), "want '%s' in %s", want, lines[1]);
  for (int i = 0; i < 2; i++) free(lines[i]);
  h_rm_dir(dir);

  /* events: the same, with backtraces skipped. */
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  collect_lines("events", full_streams, 2, lines, dir);
  snprintf(want, sizeof want, "(%zu bytes, %llu events, %zu packets", good.len,
           (unsigned long long)events, n);
  CTS_ASSERT_MSG(lines[0] && strstr(lines[0], want), "want '%s' in %s", want,
                 lines[0] ? lines[0] : "(none)");
  CTS_ASSERT_MSG(lines[1] && strstr(lines[1], "unknown event code 127"), "%s",
                 lines[1] ? lines[1] : "(none)");
  for (int i = 0; i < 2; i++) free(lines[i]);
  h_rm_dir(dir);
  h_bytes_free(&good);
  h_bytes_free(&bad_event);
  h_bytes_free(&bad_version);
  h_bytes_free(&bad_ids);
}

/* ---- command line -------------------------------------------------------------------------- */

CTS_TEST(usage_errors) {
  const char *const cases[][4] = {
      {"collect", NULL},
      {"collect", "--listen", "nope", NULL},
      {"collect", "--listen", "1:2:3", NULL},
      {"collect", "--listen", "127.0.0.1:0", "--max-clients"},
      {"collect", "--listen", "127.0.0.1:70000", NULL},
      {"collect", "--listen", "127.0.0.1:0", "--validate"},
  };
  for (size_t i = 0; i < CTS_ARRAY_SIZE(cases); i++) {
    char *argv[8] = {(char *)CTS_TEST_CTFSCOPE};
    int n = 1;
    for (int k = 0; k < 4 && cases[i][k]; k++) argv[n++] = (char *)cases[i][k];
    if (i == 3) argv[n++] = (char *)"0";
    if (i == 5) argv[n++] = (char *)"everything";
    argv[n] = NULL;
    h_proc_t p;
    CTS_ASSERT(h_proc_spawn(&p, argv, NULL, NULL));
    CTS_ASSERT_EQ_INT(h_proc_wait(&p, 10000), 2);
    h_proc_free(&p);
  }
  /* A busy port is an I/O error. */
  h_proc_t a, b;
  char dir[256];
  CTS_ASSERT(h_mkdtemp(dir, sizeof dir, "collect"));
  uint16_t port;
  CTS_ASSERT(h_collector_start(&a, dir, &port, NULL));
  char spec[32];
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  char *argv[] = {(char *)CTS_TEST_CTFSCOPE, "collect", "--listen", spec, "--dir", dir, NULL};
  CTS_ASSERT(h_proc_spawn(&b, argv, NULL, NULL));
  CTS_ASSERT_EQ_INT(h_proc_wait(&b, 10000), 3);
  CTS_ASSERT(h_proc_count(&b, "cannot listen on 127.0.0.1:") == 1);
  kill(a.pid, SIGINT);
  CTS_ASSERT_EQ_INT(h_proc_wait(&a, 10000), 0);
  h_proc_free(&a);
  h_proc_free(&b);
  h_rm_dir(dir);
}

CTS_TEST_MAIN()
