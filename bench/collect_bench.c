/* SPDX-License-Identifier: MIT */
/* collect_bench: throughput of the trace collector over loopback (bench/README.md).
 *
 * One trace of --events events is made in memory with the project's writer. For each client
 * count (1 and 8 by default), that many client threads connect to 127.0.0.1 and send the
 * trace at once, and these receivers are timed, from the first connect until every trace
 * has been received and saved:
 *   loopback   a thread that reads and discards (the floor: what loopback TCP gives here);
 *   collector  the real collector (src/collector) in a thread, writing every trace to a
 *              file in --dir and validating it, once per --validate level (packets,
 *              events, full);
 * plus, for reference, the reader alone on the trace in memory (no socket, no file), with
 * backtraces skipped (the events level's work) and decoded (the full level's).
 * The median of --runs runs is printed as MB/s (10^6 bytes) and events/s. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "collector/collector.h"
#include "os/net.h"
#include "os/os.h"

#define MAX_RUNS    21
#define MAX_CLIENTS 64

typedef struct buffer {
  uint8_t *data;
  size_t len, cap;
} buffer_t;

static int append(void *ud, const void *p, size_t n) {
  buffer_t *b = ud;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 1 << 20;
    while (cap < b->len + n) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) return -ENOMEM;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A trace shaped like a real program's: 3 allocations per free, backtraces of 1-32 frames
 * drawn from a few thousand locations (so the backtrace cache works as it does in practice). */
static int make_trace(buffer_t *out, uint64_t nevents) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.executable_name = "collect_bench";
  cfg.pid = 1;
  cfg.start_time_us = 1700000000000000ull;
  cfg.write = append;
  cfg.write_user_data = out;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = malloc(size);
  uint64_t *live = malloc(sizeof *live * 65536);
  if (!mem || !live) return -ENOMEM;
  cts_mt_writer_t *w;
  int err = cts_mt_writer_init(&w, mem, size, &cfg);
  uint64_t rng = 88172645463325252ull, t = cfg.start_time_us, bt[32];
  size_t nlive = 0;
  for (uint64_t i = 0; i < nevents && !err; i++) {
    t += rng_next(&rng) % 4;
    if (nlive == 65536 || (nlive && rng_next(&rng) % 4 == 0)) {
      const size_t k = rng_next(&rng) % nlive;
      err = cts_mt_writer_collect(w, t, live[k]);
      live[k] = live[--nlive];
      continue;
    }
    const size_t depth = 1 + rng_next(&rng) % 32;
    const uint64_t site = rng_next(&rng) % 64;
    for (size_t d = 0; d < depth; d++)
      bt[d] = 0x400000 + 16 * (site * 40 + d + (d > 20 ? i % 3 : 0));
    err = cts_mt_writer_alloc(w, t, 1 + rng_next(&rng) % 64, 1, CTS_MT_SOURCE_MAJOR, bt, depth,
                              &live[nlive]);
    nlive++;
  }
  if (!err) err = cts_mt_writer_close(w);
  free(live);
  free(mem);
  return err;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- clients ------------------------------------------------------------------------------- */

typedef struct client {
  pthread_t th;
  cts_net_addr_t addr;
  const buffer_t *trace;
  int err;
} client_t;

static void *client_main(void *arg) {
  client_t *c = arg;
  int fd;
  c->err = cts_net_connect(&c->addr, 5000, &fd);
  if (c->err) return NULL;
  /* Pieces of 256 KiB, as a tracer's sink with a large buffer would send. */
  for (size_t off = 0; off < c->trace->len && !c->err; off += 256 << 10) {
    const size_t n = c->trace->len - off < (256u << 10) ? c->trace->len - off : 256u << 10;
    c->err = cts_net_write_all(fd, c->trace->data + off, n, 60000);
  }
  close(fd);
  return NULL;
}

static int run_clients(const cts_net_addr_t *addr, const buffer_t *trace, unsigned n) {
  client_t cl[MAX_CLIENTS];
  for (unsigned i = 0; i < n; i++) {
    cl[i] = (client_t){.addr = *addr, .trace = trace};
    pthread_create(&cl[i].th, NULL, client_main, &cl[i]);
  }
  int err = 0;
  for (unsigned i = 0; i < n; i++) {
    pthread_join(cl[i].th, NULL);
    if (cl[i].err) err = cl[i].err;
  }
  return err;
}

/* ---- the loopback floor: read and discard ---------------------------------------------------- */

typedef struct drain {
  int lfd;
  unsigned expect;
  pthread_t th;
} drain_t;

static void *drain_main(void *arg) {
  drain_t *d = arg;
  struct pollfd p[MAX_CLIENTS + 1];
  unsigned open = 0, done = 0;
  static uint8_t buf[1 << 20];
  p[0] = (struct pollfd){.fd = d->lfd, .events = POLLIN};
  while (done < d->expect) {
    if (poll(p, open + 1, 10000) <= 0) break;
    if (p[0].revents & POLLIN) {
      int fd;
      while (open < MAX_CLIENTS && cts_net_accept(d->lfd, true, &fd, NULL) == 0)
        p[++open] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    for (unsigned i = 1; i <= open; i++) {
      if (p[i].fd < 0 || !p[i].revents) continue;
      const ssize_t n = cts_net_read(p[i].fd, buf, sizeof buf);
      if (n == 0 || (n < 0 && n != -EAGAIN)) {
        close(p[i].fd);
        p[i].fd = -1;
        done++;
      }
    }
  }
  return NULL;
}

static double time_loopback(const buffer_t *trace, unsigned n) {
  cts_net_addr_t a, bound;
  char err[CTS_NET_ERR_LEN];
  drain_t d = {.expect = n};
  if (cts_net_parse_listen("127.0.0.1:0", &a, err, sizeof err) ||
      cts_net_listen(&a, 128, true, &d.lfd) || cts_net_local_addr(d.lfd, &bound))
    return -1;
  pthread_create(&d.th, NULL, drain_main, &d);
  const double t0 = now_s();
  const int e = run_clients(&bound, trace, n);
  pthread_join(d.th, NULL);
  const double t = now_s() - t0;
  close(d.lfd);
  return e ? -1 : t;
}

/* ---- the collector --------------------------------------------------------------------------- */

typedef struct collect_run {
  cts_collector_t *c;
  atomic_uint saved, failed;
  double end;
} collect_run_t;

static void on_log(void *ud, const char *line) {
  collect_run_t *r = ud;
  if (strstr(line, ": closed by peer: saved ")) {
    r->end = now_s(); /* the last one counts; read after the collector thread is joined */
    atomic_fetch_add(&r->saved, 1);
  } else {
    atomic_fetch_add(&r->failed, 1);
    fprintf(stderr, "collect_bench: %s\n", line);
  }
}

static void *collector_main(void *arg) {
  cts_collector_run(((collect_run_t *)arg)->c);
  return NULL;
}

static void remove_traces(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -f -- '%s'/collect_bench.*.ctf", dir);
  if (system(cmd) != 0) fprintf(stderr, "collect_bench: could not clean %s\n", dir);
}

static double time_collector(const buffer_t *trace, unsigned n, const char *dir,
                             cts_sink_validate_t validate) {
  collect_run_t r = {0};
  cts_collector_config_t cfg;
  cts_collector_config_init(&cfg);
  char err[256];
  if (cts_net_parse_listen("127.0.0.1:0", &cfg.listen_addr, err, sizeof err)) return -1;
  cfg.dir = dir;
  cfg.validate = validate;
  cfg.log = on_log;
  cfg.log_user_data = &r;
  if (cts_collector_create(&r.c, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "collect_bench: %s\n", err);
    return -1;
  }
  pthread_t th;
  pthread_create(&th, NULL, collector_main, &r);
  const double t0 = now_s();
  const int e = run_clients(cts_collector_address(r.c), trace, n);
  while (!e && atomic_load(&r.saved) + atomic_load(&r.failed) < n && now_s() - t0 < 600) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  cts_collector_stop(r.c);
  pthread_join(th, NULL);
  const double t = r.end - t0;
  cts_collector_destroy(r.c);
  remove_traces(dir);
  return e || atomic_load(&r.failed) || atomic_load(&r.saved) != n ? -1 : t;
}

/* ---- the reader alone --------------------------------------------------------------------------
 */

static double time_reader(const buffer_t *trace, bool decode) {
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cfg.decode_backtraces = decode;
  cts_mt_reader_t *r;
  if (cts_mt_reader_create(&r, &cfg, &(cts_mt_handler_t){0})) return -1;
  const double t0 = now_s();
  int e = 0;
  for (size_t off = 0; off < trace->len && !e; off += 1 << 20)
    e = cts_mt_reader_feed(r, trace->data + off,
                           trace->len - off < (1u << 20) ? trace->len - off : 1u << 20);
  if (!e) e = cts_mt_reader_finish(r);
  const double t = now_s() - t0;
  cts_mt_reader_destroy(r);
  return e ? -1 : t;
}

static const char *load_average(void) {
  static char buf[64] = "?";
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fgets(buf, sizeof buf, f)) {
      char *sp = strchr(buf, ' ');
      if (sp && (sp = strchr(sp + 1, ' ')) && (sp = strchr(sp + 1, ' '))) *sp = '\0';
    }
    fclose(f);
  }
  return buf;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void report(const char *what, unsigned clients, double secs, uint64_t bytes,
                   uint64_t events) {
  if (secs <= 0) {
    printf("%-18s %7u   failed\n", what, clients);
    return;
  }
  printf("%-18s %7u %10.1f %14.3g %9.3f\n", what, clients, (double)bytes / secs / 1e6,
         (double)events / secs, secs);
}

int main(int argc, char **argv) {
  uint64_t nevents = 4000000;
  int runs = 3;
  cts_sink_validate_t levels[3] = {CTS_SINK_VALIDATE_PACKETS, CTS_SINK_VALIDATE_EVENTS,
                                   CTS_SINK_VALIDATE_FULL};
  int nlevels = 3;
  const char *dir = NULL;
  unsigned counts[8] = {1, 8};
  int ncounts = 2;
  static const struct option opts[] = {{"events", required_argument, NULL, 'e'},
                                       {"runs", required_argument, NULL, 'n'},
                                       {"dir", required_argument, NULL, 'd'},
                                       {"clients", required_argument, NULL, 'c'},
                                       {"validate", required_argument, NULL, 'v'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "e:n:d:c:v:h", opts, NULL)) != -1) {
    switch (opt) {
      case 'e':
        nevents = strtoull(optarg, NULL, 10);
        break;
      case 'n':
        runs = atoi(optarg);
        break;
      case 'd':
        dir = optarg;
        break;
      case 'v': {
        nlevels = 0;
        char *save = NULL;
        for (char *t = strtok_r(optarg, ",", &save); t && nlevels < 3;
             t = strtok_r(NULL, ",", &save)) {
          if (!cts_sink_validate_parse(t, &levels[nlevels++])) {
            fprintf(stderr, "collect_bench: --validate takes packets, events, full\n");
            return 2;
          }
        }
        break;
      }
      case 'c': {
        ncounts = 0;
        for (char *s = optarg; *s && ncounts < 8; s += *s == ',') {
          const unsigned long v = strtoul(s, &s, 10);
          if (v < 1 || v > MAX_CLIENTS) break;
          counts[ncounts++] = (unsigned)v;
        }
        break;
      }
      default:
        fprintf(opt == 'h' ? stdout : stderr,
                "Usage: collect_bench [--events N] [--clients 1,8] [--runs N] [--dir DIR]\n"
                "                     [--validate packets,events,full]\n"
                "Times N-event traces sent over loopback to a discarding reader and to the\n"
                "collector (files in DIR, default a new directory under /tmp).\n");
        return opt == 'h' ? 0 : 2;
    }
  }
  if (runs < 1 || runs > MAX_RUNS || nevents == 0 || ncounts == 0 || nlevels == 0) {
    fprintf(stderr, "collect_bench: bad arguments\n");
    return 2;
  }
  char tmp[] = "/tmp/collect_bench-XXXXXX";
  const bool own_dir = dir == NULL;
  if (own_dir && !(dir = mkdtemp(tmp))) {
    perror("collect_bench: mkdtemp");
    return 1;
  }
  buffer_t trace = {0};
  if (make_trace(&trace, nevents) != 0) {
    fprintf(stderr, "collect_bench: cannot make the trace\n");
    return 1;
  }
  printf("trace: %llu events, %.1f MB (%.1f bytes/event); files in %s; load %s\n",
         (unsigned long long)nevents, (double)trace.len / 1e6, (double)trace.len / (double)nevents,
         dir, load_average());
  printf("%-18s %7s %10s %14s %9s\n", "receiver", "clients", "MB/s", "events/s", "seconds");
  double v[MAX_RUNS];
  for (int d = 0; d < 2; d++) {
    for (int i = 0; i < runs; i++) v[i] = time_reader(&trace, d == 1);
    report(d ? "reader/backtraces" : "reader/events", 1, median(v, runs), trace.len, nevents);
  }
  int status = 0;
  for (int k = 0; k < ncounts; k++) {
    const unsigned n = counts[k];
    for (int i = 0; i < runs; i++) v[i] = time_loopback(&trace, n);
    report("loopback", n, median(v, runs), trace.len * n, nevents * n);
    for (int l = 0; l < nlevels; l++) {
      for (int i = 0; i < runs; i++) {
        v[i] = time_collector(&trace, n, dir, levels[l]);
        if (v[i] < 0) status = 1;
      }
      char what[32];
      snprintf(what, sizeof what, "collector/%s", cts_sink_validate_name(levels[l]));
      report(what, n, median(v, runs), trace.len * n, nevents * n);
    }
  }
  if (own_dir) rmdir(dir);
  free(trace.data);
  return status;
}
