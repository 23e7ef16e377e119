/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* tee(2) */
#include "load.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../analysis/hist.h"
#include "../os/mprof_ring.h"
#include "cli.h"

/* ---- the kind of a trace ---------------------------------------------------------------- */

/* Whether the bytes look like TSDL text (a CTF `metadata` file): its comment header, or one
 * of the top-level blocks, within the first bytes. Packetized metadata has its own magic. */
static bool is_ctf_metadata(const uint8_t *b, size_t n) {
  if (n >= 4 && b[0] == 0x57 && b[1] == 0x1d && b[2] == 0xd1 && b[3] == 0x75) return true;
  static const char *const marks[] = {"/* CTF",  "typealias", "trace {", "trace{",
                                      "clock {", "stream {",  "event {", "env {"};
  for (size_t i = 0; i < n; i++)
    if (b[i] == 0 || (b[i] < 0x20 && b[i] != '\n' && b[i] != '\t' && b[i] != '\r')) return false;
  for (size_t k = 0; k < CTS_ARRAY_SIZE(marks); k++) {
    const size_t len = strlen(marks[k]);
    for (size_t i = 0; i + len <= n; i++)
      if (memcmp(b + i, marks[k], len) == 0) return true;
  }
  return false;
}

/* Up to `size` bytes at the head of fd without taking them: pread on a file (standard input
 * only at its start), tee(2) on a pipe (waiting up to 2 s for at least `want` bytes, or the
 * writer's end). 0 for anything else (a terminal, a socket): it is read as a stream. */
static size_t peek(int fd, uint8_t *head, size_t size, size_t want, bool *is_file) {
  struct stat st;
  *is_file = false;
  if (fstat(fd, &st) != 0) return 0;
  if (S_ISREG(st.st_mode)) {
    *is_file = true;
    const off_t at = lseek(fd, 0, SEEK_CUR);
    const ssize_t n = at == 0 ? pread(fd, head, size, 0) : -1;
    return n > 0 ? (size_t)n : 0;
  }
  if (!S_ISFIFO(st.st_mode)) return 0;
  int copy[2];
  if (pipe2(copy, O_CLOEXEC | O_NONBLOCK) != 0) return 0;
  size_t n = 0;
  for (int tries = 0; tries < 200; tries++) {
    const ssize_t t = tee(fd, copy[1], size, SPLICE_F_NONBLOCK);
    if (t > 0) { /* a fresh copy of what is there: the first bytes, again */
      n = 0;
      ssize_t r;
      while (n < (size_t)t && (r = read(copy[0], head + n, (size_t)t - n)) > 0) n += (size_t)r;
    } else if (t == 0 || errno != EAGAIN) {
      break; /* the writer is gone and nothing is left, or not a pipe tee works on */
    }
    if (n >= want) break;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 10) > 0 && (pf.revents & POLLHUP) && n > 0) break; /* all there is */
    if (n > 0) usleep(10000); /* bytes, but too few yet: poll would return at once */
  }
  close(copy[0]);
  close(copy[1]);
  return n;
}

/* A task trace on a pipe (`what` names it): copied into an unlinked temporary file, since
 * task traces are read at offsets (a ring wraps). *out gets the file, at offset 0. Returns
 * -1, or the exit code (the error printed). */
static int spool(int fd, const char *what, int *out) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !dir[0]) dir = "/tmp";
  const int tmp = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (tmp < 0) {
    cli_error("cannot keep the task trace from %s in %s: %s", what, dir, strerror(errno));
    return CLI_EXIT_IO;
  }
  static uint8_t buf[1u << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      cli_error("cannot read %s: %s", what, strerror(errno));
      close(tmp);
      return CLI_EXIT_IO;
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = write(tmp, buf + done, (size_t)(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        cli_error("cannot keep the task trace from %s in %s: %s", what, dir, strerror(errno));
        close(tmp);
        return CLI_EXIT_IO;
      }
      done += w;
    }
  }
  if (lseek(tmp, 0, SEEK_SET) != 0) {
    cli_error("cannot read %s back: %s", what, strerror(errno));
    close(tmp);
    return CLI_EXIT_IO;
  }
  *out = tmp;
  return -1;
}

/* A task trace piped into standard input: spooled, and the copy becomes standard input. */
static int spool_stdin(void) {
  int tmp;
  const int code = spool(STDIN_FILENO, "standard input", &tmp);
  if (code >= 0) return code;
  const bool ok = dup2(tmp, STDIN_FILENO) == STDIN_FILENO;
  close(tmp);
  if (!ok) {
    cli_error("cannot read standard input back: %s", strerror(errno));
    return CLI_EXIT_IO;
  }
  return -1;
}

/* A path that is a pipe (a FIFO, <(...)): opened once here and read through that descriptor
 * from now on (cts_os_input_register); a task trace is spooled first. Returns -1 with the
 * head bytes peeked in head[0..*n), or the exit code. */
static int open_pipe(const char *path, int fd, uint8_t *head, size_t size, size_t *n) {
  bool is_file;
  *n = peek(fd, head, size, 20, &is_file);
  if (*n >= 20 && cts_mprof_is_trace(head, *n)) {
    int tmp;
    const int code = spool(fd, path, &tmp);
    close(fd);
    if (code >= 0) return code;
    fd = tmp;
  }
  if (cts_os_input_register(path, fd) != 0) {
    close(fd);
    cli_error("%s: too many piped inputs", path);
    return CLI_EXIT_USAGE;
  }
  return -1;
}

static int detect(const char *path, cli_trace_kind_t *kind, bool strict) {
  *kind = CLI_TRACE_MEMTRACE;
  if (strcmp(path, "-") == 0) {
    /* memtrace streams on as it is; a task trace is recognised by its first bytes. */
    uint8_t head[64];
    bool is_file;
    const size_t n = peek(STDIN_FILENO, head, sizeof head, 20, &is_file);
    if (n < 20 || !cts_mprof_is_trace(head, n)) return -1;
    *kind = CLI_TRACE_TASKS;
    return is_file ? -1 : spool_stdin();
  }
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/stream", path);
    if (access(sub, R_OK) == 0)
      cli_error("'%s' is a directory (a CTF trace): pass its stream file, '%s'", path, sub);
    else
      cli_error("'%s' is a directory: pass a trace file", path);
    return CLI_EXIT_IO;
  }
  const int fd = cts_os_open_input(path);
  if (fd < 0) {
    if (!strict) return -1; /* the reader says it its way */
    cli_error("cannot read '%s': %s", path, strerror(-fd));
    return CLI_EXIT_IO;
  }
  uint8_t head[256];
  ssize_t n;
  if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
    size_t got;
    const int code = open_pipe(path, fd, head, sizeof head, &got);
    if (code >= 0) return code;
    n = (ssize_t)got;
  } else {
    do n = pread(fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    const int read_errno = errno;
    close(fd);
    if (n < 0) {
      if (!strict) return -1;
      cli_error("cannot read '%s': %s", path, strerror(read_errno));
      return CLI_EXIT_IO;
    }
  }
  if (n >= 20 && cts_mprof_is_trace(head, (size_t)n)) {
    *kind = CLI_TRACE_TASKS;
    return -1;
  }
  /* memtrace packets start with the CTF magic c1 1f fc c1; gzip with 1f 8b, zstd with
   * 28 b5 2f fd. An empty file or a short one is left to the memtrace reader, whose errors
   * name the offset. */
  if (n < 4 || (head[0] == 0xc1 && head[1] == 0x1f && head[2] == 0xfc && head[3] == 0xc1) ||
      (head[0] == 0x1f && head[1] == 0x8b) ||
      (head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd))
    return -1;
  if (is_ctf_metadata(head, (size_t)n)) {
    const char *slash = strrchr(path, '/');
    cli_error(
        "%s: this is CTF metadata (the TSDL text describing a trace), not a trace: pass the "
        "stream file next to it (in %.*s)",
        path, slash ? (int)(slash - path) : 1, slash ? path : ".");
    return CLI_EXIT_DATA;
  }
  if (!strict) return -1;
  cli_error(
      "%s: not a trace: neither memtrace nor mirage-profile CTF (it starts with bytes %02x %02x "
      "%02x %02x, not the CTF packet magic c1 1f fc c1, gzip's 1f 8b or zstd's 28 b5 2f fd)",
      path, head[0], head[1], head[2], head[3]);
  return CLI_EXIT_DATA;
}

int cli_trace_detect(const char *path, cli_trace_kind_t *kind) {
  return detect(path, kind, true);
}

int cli_trace_detect_lenient(const char *path, cli_trace_kind_t *kind) {
  return detect(path, kind, false);
}

/* ---- task traces ----------------------------------------------------------------------- */

static int tasks_on_packet(void *ud, const cts_mprof_packet_t *p) {
  cli_tasks_t *t = ud;
  t->packets_seen++;
  if (p->content_size <= CTS_MPROF_HEADER_SIZE) t->packets_empty++;
  if (p->truncated) t->packets_truncated++;
  if (p->content_size == p->size) t->packets_full_content++;
  if (t->packets_seen == 1 || p->size < t->packet_min) t->packet_min = p->size;
  if (p->size > t->packet_max) t->packet_max = p->size;
  if (t->keep_packets) {
    if (t->npackets == t->cap_packets) {
      const size_t cap = t->cap_packets ? 2 * t->cap_packets : 64;
      cts_mprof_packet_t *v = realloc(t->packets, cap * sizeof *v);
      if (!v) return -ENOMEM;
      t->packets = v;
      t->cap_packets = cap;
    }
    t->packets[t->npackets++] = *p;
  }
  return cts_tasks_packet(&t->m, p);
}

static int tasks_on_event(void *ud, const cts_mprof_event_t *ev) {
  cli_tasks_t *t = ud;
  const int e = cts_tasks_event(&t->m, ev);
  if (e || !t->hook) return e;
  return t->hook_err = t->hook(t->hook_user_data, t, ev);
}

static void tasks_on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const cli_tasks_t *t = ud;
  (void)code;
  if (!t->quiet) cli_warn("%s: at offset %llu: %s", t->path, (unsigned long long)offset, message);
}

int cli_tasks_load(cli_tasks_t *t, const char *path, const cts_tasks_config_t *cfg, bool quiet,
                   bool keep_packets, cli_tasks_hook hook, void *hook_user_data) {
  memset(t, 0, sizeof *t);
  t->path = path;
  t->quiet = quiet;
  t->keep_packets = keep_packets;
  t->hook = hook;
  t->hook_user_data = hook_user_data;
  if (cts_tasks_init(&t->m, cfg)) {
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  struct stat st;
  const bool sized = strcmp(path, "-") == 0 ? fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)
                                            : stat(path, &st) == 0;
  t->file_size = sized ? (uint64_t)st.st_size : 0;
  const cts_mprof_handler_t h = {.user_data = t,
                                 .on_packet = tasks_on_packet,
                                 .on_event = tasks_on_event,
                                 .on_warning = tasks_on_warning};
  const int err =
      cts_os_mprof_read_file(path, &h, false, &t->sum, t->msg, sizeof t->msg, &t->input_error);
  t->err = err;
  const int fin = cts_tasks_finish(&t->m);
  if (!err && fin) t->err = fin;
  if ((t->m.ignored_creates || t->m.ignored_refs) && !quiet)
    cli_warn(
        "%s: %llu tasks created beyond the limit of %u tasks (and %llu references to "
        "more tasks) are left out",
        path, (unsigned long long)t->m.ignored_creates, t->m.cfg.max_tasks,
        (unsigned long long)t->m.ignored_refs);
  if (!t->err) return CLI_EXIT_OK;
  if (t->hook_err && t->err == t->hook_err) return CLI_EXIT_IO; /* the caller says why */
  if (t->input_error) {
    cli_error("%s", t->msg);
    return CLI_EXIT_IO;
  }
  if (t->err == -ENOMEM || t->err == CTS_E_NOMEM || t->m.err) {
    cli_error("%s: out of memory", path);
    return CLI_EXIT_INTERNAL;
  }
  cli_error("%s: %s (%s); the figures cover what was read before it", path, t->msg,
            cts_err_name(t->err));
  return CLI_EXIT_DATA;
}

void cli_tasks_free(cli_tasks_t *t) {
  cts_tasks_fini(&t->m);
  free(t->packets);
  memset(t, 0, sizeof *t);
}

double cli_tasks_duration_s(const cli_tasks_t *t) {
  return t->m.have_time ? (double)(t->m.last_ns - t->m.first_ns) * 1e-9 : 0.0;
}

const char *cli_human_ns(double ns, char *buf, size_t size) {
  if (ns < 1000)
    snprintf(buf, size, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf(buf, size, "%.3g us", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, size, "%.3g ms", ns / 1e6);
  else
    snprintf(buf, size, "%.3g s", ns / 1e9);
  return buf;
}

static int on_info(void *ud, const cts_mt_info_t *info) {
  cli_trace_t *t = ud;
  cts_mtprof_set_info(&t->prof, info);
  return 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  cli_trace_t *t = ud;
  const int e = cts_mtprof_add_event(&t->prof, ev);
  if (e || !t->hook) return e;
  return t->hook_err = t->hook(t->hook_user_data, t, ev);
}

static int on_packet(void *ud, const cts_mt_packet_t *p) {
  cli_trace_t *t = ud;
  cts_mtprof_add_packet(&t->prof, p);
  return 0;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const cli_trace_t *t = ud;
  (void)code;
  if (!t->quiet) cli_warn("%s: at offset %llu: %s", t->path, (unsigned long long)offset, message);
}

static int lookup(void *ud, uint64_t code, const cts_mt_location_t **locs, size_t *n) {
  const cli_trace_t *t = ud;
  return cts_mt_reader_lookup_location(t->reader, code, locs, n);
}

cts_frames_t cli_trace_frames(cli_trace_t *t) {
  if (t->fold) return cts_fold_frames(t->fold);
  return (cts_frames_t){.lookup = lookup, .user_data = t};
}

const char *cli_trace_mangled(const cli_trace_t *t, const char *shown) {
  return t->fold && shown ? cts_fold_mangled(t->fold, shown) : NULL;
}

void cli_json_mangled(cts_out_t *o, const cli_trace_t *t, const char *shown) {
  const char *mangled = cli_trace_mangled(t, shown);
  if (!mangled) return;
  cts_out_str(o, ", \"mangled\": ");
  cts_out_json_str(o, mangled);
}

const char *cli_basename(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int cli_trace_load(cli_trace_t *t, const char *path, const cts_mtprof_config_t *cfg, bool quiet) {
  return cli_trace_load_hooked(t, path, cfg, quiet, NULL, NULL);
}

int cli_trace_load_hooked(cli_trace_t *t, const char *path, const cts_mtprof_config_t *cfg,
                          bool quiet, cli_event_hook hook, void *hook_user_data) {
  memset(t, 0, sizeof *t);
  t->path = path;
  t->hook = hook;
  t->hook_user_data = hook_user_data;
  t->quiet = quiet;
  int err = cts_mtprof_init(&t->prof, cfg);
  if (err) {
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  cts_mt_reader_config_t rc;
  cts_mt_reader_config_init(&rc);
  rc.allocator = cts_os_allocator();
  /* Decoded even when no stack is kept (stats): a corrupt backtrace is an error for every
   * command alike, not only for those that look at stacks. */
  rc.decode_backtraces = true;
  const cts_mt_handler_t h = {.user_data = t,
                              .on_info = on_info,
                              .on_event = on_event,
                              .on_packet = on_packet,
                              .on_warning = on_warning};
  err = cts_mt_reader_create(&t->reader, &rc, &h);
  if (err) {
    cli_error("cannot create a reader: %s", cts_os_strerror(err));
    return CLI_EXIT_INTERNAL;
  }
  /* Stacks are cut as they are read (the trace defines a code before using it). */
  const cts_frames_t raw = {.lookup = lookup, .user_data = t};
  char msg[512];
  t->fold = malloc(sizeof *t->fold);
  err = t->fold ? cts_fold_init(t->fold, &raw, &cli_fold_settings, msg, sizeof msg) : -ENOMEM;
  if (err) {
    free(t->fold);
    t->fold = NULL;
    if (err == -ENOMEM)
      cli_error("out of memory");
    else
      cli_error("%s", msg);
    return CLI_EXIT_INTERNAL;
  }
  if (cfg->stacks) t->prof.cfg.fold = t->fold;
  struct stat st;
  t->file_size = strcmp(path, "-") != 0 && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
  cli_progress_t progress;
  cli_progress_init(&progress, "reading", path);
  err = cts_os_read_memtrace(path, t->reader, cli_progress_cb, &progress, &t->input_error);
  cli_progress_done(&progress);
  t->err = err;
  t->info = cts_mt_reader_borrow_info(t->reader);
  cts_mtprof_finish(&t->prof);
  if (t->fold->nomem && !err) err = -ENOMEM;
  if (t->prof.stacks.overflowed && !quiet)
    cli_warn(
        "%s: %llu allocations had stacks beyond the budget of %llu stack nodes: they are "
        "kept by allocation point only, under '(stacks beyond the memory budget)'",
        path, (unsigned long long)t->prof.stacks.overflowed,
        (unsigned long long)t->prof.stacks.max_nodes);
  if (!err) return CLI_EXIT_OK;
  if (t->hook_err && err == t->hook_err) return CLI_EXIT_IO; /* the caller says why */
  if (t->input_error && err != CTS_E_IO && err != CTS_E_BAD_COMPRESSION) {
    cli_error("cannot read '%s': %s", path, cts_os_strerror(err));
    return CLI_EXIT_IO;
  }
  if (err == -ENOMEM || err == CTS_E_NOMEM) {
    cli_error("%s: out of memory", path);
    return CLI_EXIT_INTERNAL;
  }
  cli_error("%s: %s (%s); the figures cover what was read before it", path,
            t->input_error ? cts_os_strerror(err) : cts_mt_reader_error_message(t->reader),
            cts_err_name(err));
  return t->info ? cli_exit_code(err, t->input_error) : CLI_EXIT_DATA;
}

void cli_trace_free(cli_trace_t *t) {
  cts_mtprof_fini(&t->prof);
  cts_mt_reader_destroy(t->reader);
  if (t->fold) cts_fold_fini(t->fold);
  free(t->fold);
  memset(t, 0, sizeof *t);
}

bool cli_show_ci(const cts_mtprof_t *p, uint64_t samples) {
  return p->sample_rate < 1.0 && samples < CTS_CI_SHOW_BELOW;
}

const char *cli_est_bytes(const cts_mtprof_t *p, uint64_t samples, bool with_ci, char *buf,
                          size_t size) {
  const double bps = cts_mtprof_bytes_per_sample(p);
  char a[32], b[32], c[32];
  cli_human_bytes((double)samples * bps, a, sizeof a);
  if (with_ci && cli_show_ci(p, samples)) {
    double lo, hi;
    cts_poisson_ci95(samples, &lo, &hi);
    snprintf(buf, size, "%s (95%% CI %s-%s)", a, cli_human_bytes(lo * bps, b, sizeof b),
             cli_human_bytes(hi * bps, c, sizeof c));
  } else {
    snprintf(buf, size, "%s", a);
  }
  return buf;
}

void cli_json_estimate(cts_out_t *o, const cts_mtprof_t *p, const char *name, uint64_t samples) {
  const double bps = cts_mtprof_bytes_per_sample(p);
  cts_out_printf(o, "\"%s_samples\": %llu, \"%s_bytes\": %.0f", name, (unsigned long long)samples,
                 name, (double)samples * bps);
  if (p->sample_rate < 1.0) {
    double lo, hi;
    cts_poisson_ci95(samples, &lo, &hi);
    cts_out_printf(o, ", \"%s_bytes_ci95\": [%.0f, %.0f]", name, lo * bps, hi * bps);
  }
}

void cli_json_trace_header(cts_out_t *o, const cli_trace_t *t) {
  const cts_mtprof_t *p = &t->prof;
  char buf[64];
  cts_out_str(o, "\"trace\": ");
  cts_out_json_str(o, t->path);
  cts_out_str(o, ", \"executable\": ");
  cts_out_json_str(o, t->info ? t->info->executable_name : "");
  cts_out_printf(o, ", \"sample_rate\": %s, \"word_size\": %u, \"bytes_per_sample\": %.17g",
                 cli_shortest_double(p->sample_rate, buf, sizeof buf), p->word_bytes * 8,
                 cts_mtprof_bytes_per_sample(p));
  cts_out_printf(o, ", \"duration_s\": %.6f, \"reader_result\": ", cts_mtprof_duration_s(p));
  cli_json_reader_result(o, t->err);
  cts_out_str(o, ",\n");
}

void cli_csv_str(cts_out_t *o, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    cts_out_str(o, s);
    return;
  }
  cts_out_char(o, '"');
  for (; *s; s++) {
    if (*s == '"') cts_out_char(o, '"');
    cts_out_char(o, *s);
  }
  cts_out_char(o, '"');
}

void cli_text_trace_header(cts_out_t *o, const cli_trace_t *t) {
  const cts_mtprof_t *p = &t->prof;
  char a[64], b[64];
  cts_out_printf(o, "Trace    %s: %s, pid %lld, %.3f s\n", cli_basename(t->path),
                 t->info ? t->info->executable_name : "?", t->info ? (long long)t->info->pid : 0,
                 cts_mtprof_duration_s(p));
  if (p->sample_rate >= 1.0)
    cts_out_printf(o, "Bytes    exact: every word was sampled (rate 1), %u-byte words\n",
                   p->word_bytes);
  else
    cts_out_printf(o,
                   "Bytes    estimated: samples / %s x %u bytes = %s bytes per sample; figures "
                   "from\n         fewer than %u samples show their 95%% confidence interval\n",
                   cli_shortest_double(p->sample_rate, a, sizeof a), p->word_bytes,
                   (snprintf(b, sizeof b, "%.6g", cts_mtprof_bytes_per_sample(p)), b),
                   CTS_CI_SHOW_BELOW);
}

int cli_finish_output(cts_out_t *o, int code) {
  if (cts_out_flush(o)) {
    cli_error("cannot write the output: %s", cts_os_strerror(o->err));
    return CLI_EXIT_IO;
  }
  return code;
}

void cli_json_reader_result(cts_out_t *o, int err) {
  if (!err) {
    cts_out_str(o, "\"ok\"");
    return;
  }
  char buf[96];
  snprintf(buf, sizeof buf, "error: %s", cts_err_name(err));
  cts_out_json_str(o, buf);
}
