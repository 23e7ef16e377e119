/* SPDX-License-Identifier: MIT */
/* encode_bench: the memtrace writer's own cost per event (bench/README.md).
 *
 * The trace is read once into memory: each event's kind, time, length, samples, source,
 * object id, and its backtrace stored as the frames past the common prefix (the prefix is
 * the previous backtrace's, as in the file, so memory stays close to the trace's size). The
 * trace's location definitions stay in the reader, which serves as the writer's resolver.
 * Each run then replays every event through a fresh cts_mt_writer_* with the trace's own
 * times and header fields, so the writer takes the same decisions (packet splits, verifier
 * samples) as the one that wrote the file; only the writer runs in the timed loop, and its
 * write callback only counts bytes. The reported figure is the median CPU time per event of
 * the runs (CLOCK_PROCESS_CPUTIME_ID: the machine is shared, wall time is not the writer's).
 *
 * For deterministic figures run it once under callgrind: the inclusive instructions of
 * cts_mt_writer_alloc and cts_mt_writer_collect divided by the allocations and frees it
 * prints are the instructions per event of each kind:
 *   valgrind --tool=callgrind encode_bench --runs 1 TRACE
 *   callgrind_annotate --inclusive=yes callgrind.out.PID | grep cts_mt_writer_
 *
 * --out FILE writes the first run's bytes to FILE: the encoder's output for the same input,
 * to compare (cmp) before and after a change of the writer. A trace written by ctfscope's
 * tracer with the memtrace encoding comes out identical to the input file.
 * --compact replays with the compact encoding instead (CTS_MT_ENCODING_COMPACT).
 *
 * The tracer's stack walks store frames innermost first. --reversed hands the writer each
 * backtrace that way: --reversed=caller reverses it first, as src/tracer/writer.c's
 * write_alloc does, then calls cts_mt_writer_alloc (both in caller_reverse_alloc, to read
 * under callgrind); --reversed=writer calls cts__mt_writer_alloc_innermost_first. The
 * reversed copy the bench makes for both is outside those functions. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctfscope/ctfscope.h>

#include "common/compiler.h"
#include "core/memtrace_writer.h"
#include "os/os.h"

#define MAX_RUNS 100

typedef struct event {
  uint64_t time_us, length, nsamples, obj_id;
  uint64_t frames; /* index in the frame array of the frames past the common prefix */
  uint32_t depth, prefix;
  uint8_t kind, source;
} event_t;

typedef struct loaded {
  event_t *ev;
  size_t nev, cap_ev;
  uint64_t *frames;
  size_t nframes, cap_frames;
  uint64_t allocs, frees, total_frames;
  uint32_t max_depth;
  uint64_t end_us; /* the last packet's end: the tracer closes at the program's end */
  bool end_empty;  /* the last packet has no event: the tracer flushed before closing */
  int err;         /* CTS_E_NOMEM once a growth failed */
} loaded_t;

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 4096;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return false;
  *p = q;
  *cap = n;
  return true;
}

static int on_event(void *user_data, const cts_mt_event_t *ev) {
  loaded_t *l = user_data;
  const size_t depth = ev->backtrace_len;
  const size_t prefix = ev->common_prefix < depth ? (size_t)ev->common_prefix : depth;
  if (!grow((void **)&l->ev, &l->cap_ev, l->nev + 1, sizeof *l->ev) ||
      !grow((void **)&l->frames, &l->cap_frames, l->nframes + depth - prefix, sizeof *l->frames))
    return l->err = CTS_E_NOMEM;
  event_t *e = &l->ev[l->nev++];
  *e = (event_t){.time_us = ev->time_us,
                 .length = ev->length,
                 .nsamples = ev->nsamples,
                 .obj_id = ev->obj_id,
                 .frames = l->nframes,
                 .depth = (uint32_t)depth,
                 .prefix = (uint32_t)prefix,
                 .kind = (uint8_t)ev->kind,
                 .source = ev->source};
  memcpy(l->frames + l->nframes, ev->backtrace + prefix, (depth - prefix) * sizeof *l->frames);
  l->nframes += depth - prefix;
  if (ev->kind == CTS_MT_ALLOC) {
    l->allocs++;
    l->total_frames += depth;
    if (depth > l->max_depth) l->max_depth = (uint32_t)depth;
  } else if (ev->kind == CTS_MT_COLLECT) {
    l->frees++;
  }
  return 0;
}

static int on_packet(void *user_data, const cts_mt_packet_t *p) {
  loaded_t *l = user_data;
  if (p->time_end_us > l->end_us) l->end_us = p->time_end_us;
  l->end_empty = p->kind == CTS_MT_PACKET_EMPTY;
  return 0;
}

/* The trace's own definitions, as the tracer's symbolizer gave them. */
static size_t resolve(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  const cts_mt_location_t *locs;
  size_t n;
  if (cts_mt_reader_lookup_location(user_data, code, &locs, &n) != 0) return 0;
  if (n <= max) memcpy(out, locs, n * sizeof *locs);
  return n;
}

typedef struct sink {
  uint64_t bytes;
  FILE *out; /* NULL: count only */
  bool failed;
} sink_t;

static int sink_write(void *user_data, const void *buf, size_t len) {
  sink_t *s = user_data;
  s->bytes += len;
  if (s->out && fwrite(buf, 1, len, s->out) != len) {
    s->failed = true;
    return CTS_E_IO;
  }
  return 0;
}

typedef enum order { ORDER_OUTERMOST, ORDER_CALLER_REVERSES, ORDER_WRITER_REVERSES } order_t;

/* The tracer's path before cts__mt_writer_alloc_innermost_first: reverse into a buffer, a
 * pair of frames at a time, then the outermost-first entry point. */
static CTS_NOINLINE int caller_reverse_alloc(cts_mt_writer_t *w, const event_t *ev,
                                             const uint64_t *innermost, uint64_t *tmp) {
  typedef uint64_t pair_t __attribute__((vector_size(16)));
  const size_t n = ev->depth;
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    pair_t v;
    memcpy(&v, innermost + n - 2 - i, sizeof v);
    const pair_t swapped = {v[1], v[0]};
    memcpy(tmp + i, &swapped, sizeof swapped);
  }
  if (i < n) tmp[i] = innermost[0];
  return cts_mt_writer_alloc(w, ev->time_us, ev->length, ev->nsamples, ev->source, tmp, n, NULL);
}

/* One replay of every event through a fresh writer. Returns 0 or an error code. */
static int replay(const loaded_t *l, const cts_mt_info_t *info, cts_mt_reader_t *r, bool compact,
                  order_t order, void *mem, size_t mem_size, uint64_t *bt, uint64_t *rbt,
                  uint64_t *tmp, sink_t *sink) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.version = 2;
  cfg.sample_rate = info->sample_rate;
  cfg.word_size = info->word_size;
  cfg.executable_name = info->executable_name;
  cfg.host_name = info->host_name;
  cfg.runtime_params = info->runtime_params;
  cfg.pid = info->pid;
  cfg.start_time_us = info->start_time_us;
  cfg.context = info->context;
  cfg.write = sink_write;
  cfg.write_user_data = sink;
  cfg.resolve = resolve;
  cfg.resolve_user_data = r;
  cfg.max_backtrace_frames = l->max_depth ? l->max_depth : 1;
  cfg.encoding = compact ? CTS_MT_ENCODING_COMPACT : CTS_MT_ENCODING_MEMTRACE;
  cts_mt_writer_t *w;
  int e = cts_mt_writer_init(&w, mem, mem_size, &cfg);
  for (size_t i = 0; !e && i < l->nev; i++) {
    const event_t *ev = &l->ev[i];
    switch (ev->kind) {
      case CTS_MT_ALLOC:
        /* bt holds the previous backtrace: its first `prefix` frames are this one's. */
        memcpy(bt + ev->prefix, l->frames + ev->frames, (ev->depth - ev->prefix) * sizeof *bt);
        if (order == ORDER_OUTERMOST) {
          e = cts_mt_writer_alloc(w, ev->time_us, ev->length, ev->nsamples, ev->source, bt,
                                  ev->depth, NULL);
          break;
        }
        for (size_t k = 0; k < ev->depth; k++) rbt[k] = bt[ev->depth - 1 - k];
        e = order == ORDER_CALLER_REVERSES
                ? caller_reverse_alloc(w, ev, rbt, tmp)
                : cts__mt_writer_alloc_innermost_first(w, ev->time_us, ev->length, ev->nsamples,
                                                       ev->source, rbt, ev->depth, NULL);
        break;
      case CTS_MT_PROMOTE:
        e = cts_mt_writer_promote(w, ev->time_us, ev->obj_id);
        break;
      case CTS_MT_COLLECT:
        e = cts_mt_writer_collect(w, ev->time_us, ev->obj_id);
        break;
      default:
        break;
    }
  }
  if (!e && l->end_empty) e = cts_mt_writer_flush(w);
  if (!e) e = cts_mt_writer_close_at(w, l->end_us);
  return e;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(void) {
  fprintf(stderr,
          "usage: encode_bench [--runs N] [--out FILE] [--compact] "
          "[--reversed=caller|writer] TRACE\n");
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"runs", required_argument, NULL, 'r'},
                                       {"out", required_argument, NULL, 'o'},
                                       {"compact", no_argument, NULL, 'c'},
                                       {"reversed", required_argument, NULL, 'v'},
                                       {NULL, 0, NULL, 0}};
  int runs = 5, c;
  const char *out_path = NULL;
  bool compact = false;
  order_t order = ORDER_OUTERMOST;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
      case 'r':
        runs = atoi(optarg);
        if (runs < 1 || runs > MAX_RUNS) {
          fprintf(stderr, "encode_bench: --runs takes 1 to %d\n", MAX_RUNS);
          return 2;
        }
        break;
      case 'o':
        out_path = optarg;
        break;
      case 'c':
        compact = true;
        break;
      case 'v':
        if (strcmp(optarg, "caller") == 0) {
          order = ORDER_CALLER_REVERSES;
        } else if (strcmp(optarg, "writer") == 0) {
          order = ORDER_WRITER_REVERSES;
        } else {
          usage();
          return 2;
        }
        break;
      default:
        usage();
        return 2;
    }
  }
  if (optind + 1 != argc) {
    usage();
    return 2;
  }
  const char *path = argv[optind];

  loaded_t l = {0};
  cts_mt_reader_config_t rcfg;
  cts_mt_reader_config_init(&rcfg);
  rcfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = &l, .on_event = on_event, .on_packet = on_packet};
  cts_mt_reader_t *r;
  int e = cts_mt_reader_create(&r, &rcfg, &h);
  if (e) {
    fprintf(stderr, "encode_bench: cts_mt_reader_create: %s\n", cts_strerror(e));
    return 1;
  }
  bool input_error;
  e = cts_os_read_memtrace(path, r, NULL, NULL, &input_error);
  const cts_mt_info_t *info = cts_mt_reader_borrow_info(r);
  if (e || !info) {
    fprintf(stderr, "encode_bench: %s: %s\n", path,
            l.err         ? cts_strerror(l.err)
            : input_error ? cts_os_strerror(e)
            : e           ? cts_mt_reader_error_message(r)
                          : "no trace info");
    return 1;
  }

  cts_mt_writer_config_t sz;
  cts_mt_writer_config_init(&sz);
  sz.max_backtrace_frames = l.max_depth ? l.max_depth : 1;
  const size_t mem_size = cts_mt_writer_size(&sz);
  void *mem = aligned_alloc(64, (mem_size + 63) & ~(size_t)63);
  uint64_t *bt = malloc(((size_t)l.max_depth + 1) * sizeof *bt);
  uint64_t *rbt = malloc(((size_t)l.max_depth + 1) * sizeof *rbt);
  uint64_t *tmp = malloc(((size_t)l.max_depth + 1) * sizeof *tmp);
  if (!mem || !bt || !rbt || !tmp) {
    fprintf(stderr, "encode_bench: out of memory\n");
    return 1;
  }

  double t[MAX_RUNS];
  sink_t sink = {0};
  for (int i = 0; i < runs; i++) {
    sink = (sink_t){0};
    if (i == 0 && out_path && !(sink.out = fopen(out_path, "wbx"))) {
      fprintf(stderr, "encode_bench: cannot create %s: %s\n", out_path, strerror(errno));
      return 1;
    }
    const double t0 = cpu_seconds();
    e = replay(&l, info, r, compact, order, mem, mem_size, bt, rbt, tmp, &sink);
    t[i] = cpu_seconds() - t0;
    if (sink.out && fclose(sink.out) != 0) sink.failed = true;
    if (e || sink.failed) {
      fprintf(stderr, "encode_bench: writing: %s\n",
              sink.failed ? "output error" : cts_strerror(e));
      return 1;
    }
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_double);
  const double med = t[runs / 2];
  printf("events %zu allocs %" PRIu64 " frees %" PRIu64 " frames %" PRIu64 " bytes %" PRIu64 "\n",
         l.nev, l.allocs, l.frees, l.total_frames, sink.bytes);
  printf("runs %d median %.4f s cpu  %.1f ns/event  (min %.4f max %.4f)\n", runs, med,
         l.nev ? med * 1e9 / (double)l.nev : 0.0, t[0], t[runs - 1]);
  free(bt);
  free(rbt);
  free(tmp);
  free(mem);
  free(l.ev);
  free(l.frames);
  cts_mt_reader_destroy(r);
  return 0;
}
