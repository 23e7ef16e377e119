/* SPDX-License-Identifier: MIT */
/* ctfscope subsample and ctfscope filter: write a smaller, valid memtrace trace.
 * subsample keeps each sample with probability 1/factor (the sample rate is divided by the
 * factor, so estimates stay unbiased), like memtrace's subsample; filter keeps the
 * allocations made in a time window. Both keep the promotions and collections of the kept
 * blocks, renumber object ids (the writer assigns them) and carry the locations over; the
 * memory they use is the table of kept blocks still live, whatever the trace's length. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/u64map.h"
#include "../common/hash.h"
#include "../analysis/transcode.h"
#include "cli.h"
#include "load.h"

static const char subsample_help[] =
    "Usage: ctfscope subsample --factor N -o OUTPUT [OPTIONS] TRACE\n"
    "\n"
    "Write a copy of a memtrace trace with each sample kept with probability 1/N: the sample\n"
    "rate is divided by N, so byte estimates stay unbiased while the trace shrinks. Blocks\n"
    "left with no sample are dropped with their promotions and collections. Object ids are\n"
    "renumbered. Deterministic for a given --seed.\n"
    "\n"
    "Options:\n"
    "      --factor N      keep 1 sample in N on average (N >= 1)\n"
    "  -o, --output FILE   the trace to write (required)\n"
    "      --seed S        seed of the random choices (default 1)\n"
    "      --encoding E    backtrace encoding: compact (default; smaller when backtraces\n"
    "                      recur) or memtrace (memtrace's own bucket choices); every\n"
    "                      memtrace reader reads both\n"
    "  -q, --quiet         do not print warnings\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 when the trace was read and written completely, 1 when it is corrupt,\n"
    "a corrupt gzip stream included (what was read before the error is written as a valid\n"
    "trace), or when its trace info cannot be written back (nothing is written), 2 for a\n"
    "usage error, 3 when a file cannot be read or written, 4 out of memory. An output that\n"
    "is the trace itself is refused (2); the output is written aside and replaces an\n"
    "existing file only when the run ends with 0 or 1.\n";

static const char filter_help[] =
    "Usage: ctfscope filter [--from SECONDS] [--to SECONDS] -o OUTPUT [OPTIONS] TRACE\n"
    "\n"
    "Write a copy of a memtrace trace keeping only the allocations made between --from and\n"
    "--to (seconds after the trace's start, both included), with their promotions and\n"
    "collections whenever they happen. Object ids are renumbered; the sample rate and the\n"
    "header are kept.\n"
    "\n"
    "Options:\n"
    "      --from S        first second kept (default: the start)\n"
    "      --to S          last second kept (default: the end)\n"
    "      --encoding E    backtrace encoding: compact (default; smaller when backtraces\n"
    "                      recur) or memtrace (memtrace's own bucket choices); every\n"
    "                      memtrace reader reads both\n"
    "  -o, --output FILE   the trace to write (required)\n"
    "  -q, --quiet         do not print warnings\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: as for subsample.\n";

typedef struct rewrite {
  /* options */
  double factor;
  uint64_t seed;
  double from_s, to_s;
  bool is_filter;
  cts_mt_encoding_t encoding;
  const char *output;
  bool quiet;
  /* state */
  const char *path;
  cts_mt_reader_t *reader;
  cts_mt_writer_t *writer;
  void *writer_mem;
  cts_outfile_t file;
  cts_u64map_t ids; /* kept source object id → new id */
  uint64_t start_us, rng;
  uint64_t kept_allocs, dropped_allocs, kept_samples;
  int werr;       /* the output could not be written */
  int header_err; /* the writer refused the input's header */
} rewrite_t;

static int parse_double(const char *s, double *out) {
  char *end;
  *out = strtod(s, &end);
  return *s != '\0' && *end == '\0' && isfinite(*out);
}

static int on_option(void *ctx, int opt, const char *arg) {
  rewrite_t *o = ctx;
  double v;
  switch (opt) {
    case 'F':
      if (!parse_double(arg, &v) || v < 1)
        return cli_usage_error("--factor takes a number >= 1, not '%s'", arg);
      o->factor = v;
      break;
    case 'S': {
      char *end;
      o->seed = strtoull(arg, &end, 10);
      if (*arg == '\0' || *end != '\0')
        return cli_usage_error("--seed takes a number, not '%s'", arg);
      break;
    }
    case 'f':
      if (!parse_double(arg, &v) || v < 0)
        return cli_usage_error("--from takes seconds >= 0, not '%s'", arg);
      o->from_s = v;
      break;
    case 't':
      if (!parse_double(arg, &v) || v < 0)
        return cli_usage_error("--to takes seconds >= 0, not '%s'", arg);
      o->to_s = v;
      break;
    case 'E': {
      static const cli_keyword_t encodings[] = {
          {"compact", CTS_MT_ENCODING_COMPACT}, {"memtrace", CTS_MT_ENCODING_MEMTRACE}, {0}};
      int e;
      const int rc = cli_parse_keyword("--encoding", arg, encodings, NULL, &e);
      if (rc >= 0) return rc;
      o->encoding = (cts_mt_encoding_t)e;
      break;
    }
    case 'o':
      o->output = arg;
      break;
    case 'q':
      o->quiet = true;
      break;
  }
  return -1;
}

/* A uniform double in (0, 1), from the seeded splitmix64 sequence (the same draws as
 * ever for a given --seed). */
static double uniform(rewrite_t *rw) {
  return ((double)(cts_splitmix64(&rw->rng) >> 11) + 0.5) * 0x1p-53;
}

/* Poisson(mean) for a small mean, by Knuth's product of uniforms (about mean draws). */
static uint64_t poisson_small(rewrite_t *rw, double mean) {
  const double limit = exp(-mean);
  uint64_t k = 0;
  for (double prod = uniform(rw); prod > limit; prod *= uniform(rw)) k++;
  return k;
}

/* Counts up to this many samples are thinned one draw each (exact); above it the count is
 * drawn at once, so that the work per event is bounded whatever a trace claims (a 328-byte
 * trace can declare 2^63 samples). */
#define EXACT_DRAWS 4096u
#define SMALL_MEAN  30.0

/* Binomial(n, 1/factor). */
static uint64_t thin(rewrite_t *rw, uint64_t n) {
  if (rw->factor <= 1.0) return n;
  if (n <= EXACT_DRAWS) {
    const uint64_t threshold = (uint64_t)(18446744073709551615.0 / rw->factor);
    uint64_t kept = 0;
    for (uint64_t i = 0; i < n; i++) kept += cts_splitmix64(&rw->rng) < threshold;
    return kept;
  }
  /* Large counts: Poisson where the mean kept (or dropped) is small, else the normal
   * approximation, whose error is negligible at n > 4096 with both means above 30. */
  const double p = 1.0 / rw->factor, mean = (double)n * p, dropped = (double)n * (1.0 - p);
  if (mean < SMALL_MEAN) return poisson_small(rw, mean);
  if (dropped < SMALL_MEAN) {
    const uint64_t d = poisson_small(rw, dropped);
    return d < n ? n - d : 0;
  }
  const double u1 = uniform(rw), u2 = uniform(rw);
  const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  const double k = floor(mean + z * sqrt(mean * (1.0 - p)) + 0.5);
  if (k <= 0) return 0;
  return k >= (double)n ? n : (uint64_t)k;
}

static int on_info(void *ud, const cts_mt_info_t *in) {
  rewrite_t *rw = ud;
  cts_mt_writer_config_t cfg;
  cts_transcode_config(&cfg, in, 0, rw->encoding, rw->reader);
  if (!rw->is_filter) cfg.sample_rate = in->sample_rate / rw->factor;
  cfg.write = cts_os_fd_write;
  cfg.write_user_data = (void *)(intptr_t)rw->file.fd;
  rw->start_us = in->start_time_us;
  const size_t size = cts_mt_writer_size(&cfg);
  rw->writer_mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  if (!rw->writer_mem) return CTS_E_NOMEM;
  const int e = cts_mt_writer_init(&rw->writer, rw->writer_mem, size, &cfg);
  /* A header the writer refuses is the input's fault; only a failed write is the output's. */
  if (e < 0 && e > -1000) rw->werr = e;
  if (e && !rw->werr) rw->header_err = e;
  return e;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  rewrite_t *rw = ud;
  int e = 0;
  if (ev->kind == CTS_MT_ALLOC) {
    uint64_t n = ev->nsamples;
    if (rw->is_filter) {
      const double t = ev->time_us > rw->start_us ? (double)(ev->time_us - rw->start_us) * 1e-6 : 0;
      if (t < rw->from_s || t > rw->to_s) n = 0;
    } else {
      n = thin(rw, n);
    }
    if (!n) {
      rw->dropped_allocs++;
      return 0;
    }
    uint64_t id;
    e = cts_mt_writer_alloc(rw->writer, ev->time_us, ev->length, n, (cts_mt_source_t)ev->source,
                            ev->backtrace, ev->backtrace_len, &id);
    if (!e) {
      bool added;
      if (!cts_u64map_insert(&rw->ids, ev->obj_id, id, &added)) return CTS_E_NOMEM;
      rw->kept_allocs++;
      rw->kept_samples += n;
    }
  } else {
    const uint64_t *id = cts_u64map_find(&rw->ids, ev->obj_id);
    if (!id) return 0; /* its allocation was dropped */
    const uint64_t new_id = *id;
    if (ev->kind == CTS_MT_PROMOTE) {
      e = cts_mt_writer_promote(rw->writer, ev->time_us, new_id);
    } else {
      e = cts_mt_writer_collect(rw->writer, ev->time_us, new_id);
      cts_u64map_remove(&rw->ids, ev->obj_id);
    }
  }
  if (e) rw->werr = e;
  return e;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const rewrite_t *rw = ud;
  (void)code;
  if (!rw->quiet) cli_warn("%s: at offset %llu: %s", rw->path, (unsigned long long)offset, message);
}

static int rewrite_run(rewrite_t *rw, const char *path) {
  rw->path = path;
  rw->rng = rw->seed;
  cts_u64map_init(&rw->ids);
  const int oc = cli_output_open(&rw->file, rw->output, &path, 1);
  if (oc >= 0) return oc;
  cts_mt_reader_config_t rc;
  cts_mt_reader_config_init(&rc);
  rc.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {
      .user_data = rw, .on_info = on_info, .on_event = on_event, .on_warning = on_warning};
  int code = CLI_EXIT_OK;
  int err = cts_mt_reader_create(&rw->reader, &rc, &h);
  if (err) {
    cli_error("cannot create a reader: %s", cts_os_strerror(err));
    code = CLI_EXIT_INTERNAL;
    goto end;
  }
  cli_progress_t progress;
  cli_progress_init(&progress, "reading", path);
  bool input_error;
  err = cts_os_read_memtrace(path, rw->reader, cli_progress_cb, &progress, &input_error);
  cli_progress_done(&progress);
  if (err && rw->werr && err == rw->werr) {
    cli_error("cannot write '%s': %s", rw->output, cts_os_strerror(err));
    code = err == CTS_E_NOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_IO;
    goto end;
  }
  if (err && rw->header_err && err == rw->header_err) {
    cli_error("%s: its trace info cannot be written back (%s): %s", path, cts_err_name(err),
              cts_os_strerror(err));
    code = CLI_EXIT_DATA;
    goto end;
  }
  if (err) {
    cli_error("%s: %s (%s)%s", path,
              input_error ? cts_os_strerror(err) : cts_mt_reader_error_message(rw->reader),
              cts_err_name(err), rw->writer ? "; what was read before it is written" : "");
    code = cli_exit_code(err, input_error);
  }
  if (rw->writer) {
    const int e = cts_mt_writer_close(rw->writer);
    if (e) {
      cli_error("cannot write '%s': %s", rw->output, cts_os_strerror(e));
      code = CLI_EXIT_IO;
    }
  }
  if (!rw->quiet && code == CLI_EXIT_OK)
    cli_note("kept %llu allocations (%llu samples), dropped %llu",
             (unsigned long long)rw->kept_allocs, (unsigned long long)rw->kept_samples,
             (unsigned long long)rw->dropped_allocs);
end:
  if (rw->header_err)
    cts_outfile_discard(&rw->file); /* no trace info: nothing usable was written */
  else
    code = cli_output_close(&rw->file, code);
  cts_mt_reader_destroy(rw->reader);
  free(rw->writer_mem);
  cts_u64map_fini(&rw->ids);
  return code;
}

/* Task traces are not sampled: say so instead of failing on their first bytes. */
static int rewrite_checked(rewrite_t *rw, const char *path) {
  cli_trace_kind_t kind;
  const int kc = cli_trace_detect(path, &kind);
  if (kc >= 0) return kc;
  if (kind == CLI_TRACE_TASKS) {
    cli_error(
        "%s is a mirage-profile task trace: %s works on memtrace traces (a task ring "
        "keeps only its latest events already; 'export -f csv' lists them)",
        path, cli_command());
    return CLI_EXIT_DATA;
  }
  return rewrite_run(rw, path);
}

int cmd_subsample(int argc, char **argv) {
  static const struct option longopts[] = {
      {"factor", required_argument, NULL, 'F'},
      {"seed", required_argument, NULL, 'S'},
      {"encoding", required_argument, NULL, 'E'},
      {"output", required_argument, NULL, 'o'},
      CLI_LONGOPT_QUIET,
      {0},
  };
  rewrite_t rw = {.factor = 0, .seed = 1, .encoding = CTS_MT_ENCODING_COMPACT};
  int first;
  const int rc = cli_parse(argc, argv, "o:q", longopts, subsample_help, on_option, &rw, &first);
  if (rc >= 0) return rc;
  if (rw.factor < 1) return cli_usage_error("--factor is required");
  if (!rw.output) return cli_usage_error("--output is required");
  if (argc - first != 1) return cli_usage_error("give one trace");
  return rewrite_checked(&rw, argv[first]);
}

int cmd_filter(int argc, char **argv) {
  static const struct option longopts[] = {
      {"from", required_argument, NULL, 'f'},
      {"to", required_argument, NULL, 't'},
      {"encoding", required_argument, NULL, 'E'},
      {"output", required_argument, NULL, 'o'},
      CLI_LONGOPT_QUIET,
      {0},
  };
  rewrite_t rw = {.is_filter = true,
                  .factor = 1,
                  .from_s = 0,
                  .to_s = INFINITY,
                  .encoding = CTS_MT_ENCODING_COMPACT};
  int first;
  const int rc = cli_parse(argc, argv, "o:q", longopts, filter_help, on_option, &rw, &first);
  if (rc >= 0) return rc;
  if (!rw.output) return cli_usage_error("--output is required");
  if (argc - first != 1) return cli_usage_error("give one trace");
  if (rw.to_s < rw.from_s) return cli_usage_error("--to is before --from");
  return rewrite_checked(&rw, argv[first]);
}
