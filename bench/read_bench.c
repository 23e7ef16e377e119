/* SPDX-License-Identifier: MIT */
/* read_bench: throughput of the memtrace reader on one trace file (bench/README.md).
 *
 * Each run creates a reader, reads the file with read(2) into a 1 MiB buffer and feeds
 * every piece to cts_mt_reader_feed() -- the path `ctfscope dump` and `info` take -- or,
 * with --via-os, hands the file to cts_os_read_memtrace(). The event callback folds every
 * event into a checksum (backtrace length, samples, the allocation point's code) so that
 * nothing can be skipped. The median of the runs' wall times gives events/s, MB/s
 * (10^6 bytes) and backtrace frames decoded per second; peak RSS comes from getrusage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "os/os.h"

#define READ_CHUNK (1u << 20)
#define MAX_RUNS   100

typedef struct tally {
  uint64_t events, allocs, frames, samples, checksum;
} tally_t;

/* A minimal consumer: counts events and backtrace frames, sums the allocations' samples
 * and folds each allocation point (the last frame) into a checksum. */
static int on_event(void *user_data, const cts_mt_event_t *ev) {
  tally_t *t = user_data;
  const uint64_t alloc = ev->kind == CTS_MT_ALLOC;
  t->events++;
  t->allocs += alloc;
  t->frames += ev->backtrace_len;
  t->samples += ev->nsamples & -alloc;
  if (ev->backtrace_len) t->checksum ^= ev->backtrace[ev->backtrace_len - 1] + ev->obj_id;
  return 0;
}

typedef enum mode { MODE_FEED, MODE_VIA_OS, MODE_READ_ONLY } mode_t_;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* User + system CPU seconds of this process so far: less disturbed than wall time when
 * the machine is shared. */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* One pass over the file. Returns 0 or prints the error and returns non-zero. */
static int run_once(const char *path, mode_t_ mode, bool decode, uint8_t *buf, tally_t *t,
                    uint64_t *bytes) {
  memset(t, 0, sizeof *t);
  *bytes = 0;
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cfg.decode_backtraces = decode;
  const cts_mt_handler_t h = {.user_data = t, .on_event = on_event};
  cts_mt_reader_t *r = NULL;
  int e = 0;
  if (mode != MODE_READ_ONLY && (e = cts_mt_reader_create(&r, &cfg, &h)) != 0) {
    fprintf(stderr, "read_bench: cts_mt_reader_create: %s\n", cts_strerror(e));
    return 1;
  }
  if (mode == MODE_VIA_OS) {
    bool input_error;
    e = cts_os_read_memtrace(path, r, NULL, NULL, &input_error);
    *bytes = cts_mt_reader_offset(r);
    if (e) {
      fprintf(stderr, "read_bench: %s: %s\n", path,
              input_error ? cts_os_strerror(e) : cts_mt_reader_error_message(r));
    }
    cts_mt_reader_destroy(r);
    return e != 0;
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "read_bench: cannot open %s: %s\n", path, strerror(errno));
    cts_mt_reader_destroy(r);
    return 1;
  }
  for (;;) {
    const ssize_t n = read(fd, buf, READ_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fprintf(stderr, "read_bench: reading %s: %s\n", path, strerror(errno));
      e = 1;
      break;
    }
    if (n == 0) {
      if (r && (e = cts_mt_reader_finish(r)) != 0)
        fprintf(stderr, "read_bench: %s: %s\n", path, cts_mt_reader_error_message(r));
      break;
    }
    *bytes += (uint64_t)n;
    if (mode == MODE_READ_ONLY) {
      t->checksum += buf[n - 1]; /* touch the data so the pass is not only a syscall */
      continue;
    }
    if ((e = cts_mt_reader_feed(r, buf, (size_t)n)) != 0) {
      fprintf(stderr, "read_bench: %s: %s\n", path, cts_mt_reader_error_message(r));
      break;
    }
  }
  close(fd);
  cts_mt_reader_destroy(r);
  return e != 0;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median, minimum and maximum of v[0..n). */
static void summarize(const double *v, int n, double *med, double *lo, double *hi) {
  double sorted[MAX_RUNS];
  memcpy(sorted, v, (size_t)n * sizeof *v);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  *med = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  *lo = sorted[0];
  *hi = sorted[n - 1];
}

static void usage(FILE *f) {
  fprintf(f,
          "Usage: read_bench [--decode | --skip] [--via-os | --read-only] [-n RUNS] "
          "[--warmup N] TRACE\n"
          "Reads TRACE RUNS times (default 5, after 1 warm-up run) and prints the median,\n"
          "minimum and maximum wall time (and CPU time), events/s, MB/s (10^6 bytes) and\n"
          "backtrace frames/s from the wall times, and the peak RSS.\n"
          "  --decode       decode backtraces (default)\n"
          "  --skip         skip backtraces (reader config decode_backtraces = false)\n"
          "  --via-os       read with cts_os_read_memtrace() instead of read() + feed\n"
          "  --read-only    only read() the file: the I/O floor of the feed path\n"
          "  -n, --runs N   counted runs (1..%d)\n"
          "  --warmup N     uncounted runs first (default 1)\n",
          MAX_RUNS);
}

int main(int argc, char **argv) {
  enum { OPT_DECODE = 256, OPT_SKIP, OPT_VIA_OS, OPT_READ_ONLY, OPT_WARMUP };
  static const struct option opts[] = {
      {"decode", no_argument, NULL, OPT_DECODE}, {"skip", no_argument, NULL, OPT_SKIP},
      {"via-os", no_argument, NULL, OPT_VIA_OS}, {"read-only", no_argument, NULL, OPT_READ_ONLY},
      {"runs", required_argument, NULL, 'n'},    {"warmup", required_argument, NULL, OPT_WARMUP},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
  };
  bool decode = true;
  mode_t_ mode = MODE_FEED;
  int runs = 5, warmup = 1, c;
  while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
    switch (c) {
      case OPT_DECODE:
        decode = true;
        break;
      case OPT_SKIP:
        decode = false;
        break;
      case OPT_VIA_OS:
        mode = MODE_VIA_OS;
        break;
      case OPT_READ_ONLY:
        mode = MODE_READ_ONLY;
        break;
      case 'n':
        runs = atoi(optarg);
        break;
      case OPT_WARMUP:
        warmup = atoi(optarg);
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind + 1 != argc || runs < 1 || runs > MAX_RUNS || warmup < 0 || warmup > 10) {
    usage(stderr);
    return 2;
  }
  const char *path = argv[optind];
  uint8_t *buf = malloc(READ_CHUNK);
  if (!buf) return 1;

  double times[MAX_RUNS], cpu_times[MAX_RUNS];
  tally_t t, first = {0};
  uint64_t bytes = 0;
  for (int i = 0; i < warmup + runs; i++) {
    const double t0 = now_s(), c0 = cpu_s();
    if (run_once(path, mode, decode, buf, &t, &bytes)) return 1;
    const double dt = now_s() - t0, dc = cpu_s() - c0;
    if (i >= warmup) {
      times[i - warmup] = dt;
      cpu_times[i - warmup] = dc;
    }
    if (i == 0) {
      first = t;
    } else if (memcmp(&first, &t, sizeof t) != 0) {
      fprintf(stderr, "read_bench: run %d decoded differently from the first\n", i);
      return 1;
    }
  }
  free(buf);
  double med, lo, hi, cpu_med, cpu_lo, cpu_hi;
  summarize(times, runs, &med, &lo, &hi);
  summarize(cpu_times, runs, &cpu_med, &cpu_lo, &cpu_hi);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);

  const char *what = mode == MODE_READ_ONLY ? "read-only"
                     : mode == MODE_VIA_OS  ? (decode ? "via-os decode" : "via-os skip")
                                            : (decode ? "decode" : "skip");
  printf("trace      %s: %.1f MB, %" PRIu64 " events (%" PRIu64 " allocs), %" PRIu64
         " backtrace frames\n",
         path, (double)bytes / 1e6, t.events, t.allocs, t.frames);
  printf("mode       %s, %d runs after %d warm-up\n", what, runs, warmup);
  printf("wall       median %.4f s  (min %.4f, max %.4f)\n", med, lo, hi);
  printf("cpu        median %.4f s  (min %.4f, max %.4f)  user + system\n", cpu_med, cpu_lo,
         cpu_hi);
  printf("events/s   median %.2f M  (min %.2f, max %.2f)\n", (double)t.events / med / 1e6,
         (double)t.events / hi / 1e6, (double)t.events / lo / 1e6);
  printf("MB/s       median %.1f  (min %.1f, max %.1f)\n", (double)bytes / med / 1e6,
         (double)bytes / hi / 1e6, (double)bytes / lo / 1e6);
  printf("frames/s   median %.1f M\n", (double)t.frames / med / 1e6);
  /* On a shared machine wall time includes waiting for a processor: CPU time does not. */
  printf("per cpu-s  %.2f M events/s, %.1f MB/s, %.1f M frames/s (median CPU time)\n",
         (double)t.events / cpu_med / 1e6, (double)bytes / cpu_med / 1e6,
         (double)t.frames / cpu_med / 1e6);
  printf("peak RSS   %ld KiB\n", ru.ru_maxrss);
  printf("checksum   %016" PRIx64 " (samples %" PRIu64 ")\n", t.checksum, t.samples);
  return 0;
}
