/* SPDX-License-Identifier: MIT */
#include <regex.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../analysis/alloc_profile.h"
#include "../analysis/load.h"
#include "../analysis/units.h"
#include "cli.h"

static const char *command_name = "ctfscope";
static char command_buf[64];

void cli_set_command(const char *name) {
  snprintf(command_buf, sizeof command_buf, "ctfscope %s", name);
  command_name = command_buf;
}

const char *cli_command(void) {
  return command_name;
}

static void vmessage(const char *kind, const char *fmt, va_list ap) {
  fflush(stdout);
  /* Messages quote names from traces (and reader messages): their controls are escaped. */
  char msg[2048], shown[4 * sizeof msg];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "%s: %s: %s\n", command_name, kind, cts_term_text(msg, shown, sizeof shown));
}

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("error", fmt, ap);
  va_end(ap);
}

void cli_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("warning", fmt, ap);
  va_end(ap);
}

int cli_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmessage("error", fmt, ap);
  va_end(ap);
  fprintf(stderr, "Try '%s --help' for more information.\n", command_name);
  return CLI_EXIT_USAGE;
}

int cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts,
              const char *help, cli_option_cb on_option, void *ctx, int *first_arg) {
  /* Frame options are per run: a command run in-process (fuzz_analysis) after another
   * starts from the defaults, and never keeps a pointer into an earlier argv. */
  cli_fold_settings = (cts_fold_config_t){0};
  cts_load_set_threads(0);
  /* Every command accepts -h/--help; the tables only list their own options. */
  struct option all[32];
  int n = 0;
  for (; longopts && longopts[n].name && n < 30; n++) all[n] = longopts[n];
  all[n++] = (struct option){"help", no_argument, NULL, 'h'};
  all[n] = (struct option){0};
  char shorts[64];
  snprintf(shorts, sizeof shorts, ":h%s", shortopts ? shortopts : "");
  optind = 1;
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, shorts, all, NULL)) != -1) {
    if (opt == 'h') {
      fputs(help, stdout);
      return CLI_EXIT_OK;
    }
    if (opt == '?') {
      if (optopt) return cli_usage_error("unknown option '-%c'", optopt);
      return cli_usage_error("unknown option '%s'", argv[optind - 1]);
    }
    if (opt == ':') return cli_usage_error("option '%s' needs a value", argv[optind - 1]);
    const int rc = on_option(ctx, opt, optarg);
    if (rc >= 0) return rc;
  }
  *first_arg = optind;
  return -1;
}

bool cli_parse_long(const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  const long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno || v < min || v > max) return false;
  *out = v;
  return true;
}

int cli_output_option(int opt, const char *arg, cli_out_opts_t *o, bool with_limit) {
  switch (opt) {
    case 'J':
      o->json = true;
      return -1;
    case 'C':
      o->csv = true;
      return -1;
    case 'q':
      o->quiet = true;
      return -1;
    case 'n':
      if (!with_limit) return CLI_OPTION_OTHER;
      if (!cli_parse_long(arg, 0, 1L << 30, &o->limit))
        return cli_usage_error("--limit takes a number >= 0, not '%s'", arg);
      return -1;
    default: {
      const int width = cli_width_option(opt, arg);
      return width != CLI_OPTION_OTHER ? width : cli_frame_option(opt, arg);
    }
  }
}

cts_fold_config_t cli_fold_settings;

/* Compiles re to report a bad expression now, as a usage error. */
static int check_regex(const char *option, const char *re) {
  regex_t r;
  const int rc = regcomp(&r, re, REG_EXTENDED | REG_NOSUB);
  if (rc == 0) {
    regfree(&r);
    return -1;
  }
  char msg[256];
  regerror(rc, &r, msg, sizeof msg);
  return cli_usage_error("%s '%s': %s", option, re, msg);
}

int cli_frame_option(int opt, const char *arg) {
  switch (opt) {
    case CLI_OPT_NO_DEMANGLE:
      cli_fold_settings.no_demangle = true;
      return -1;
    case CLI_OPT_KEEP_ALLOCATOR:
      cli_fold_settings.keep_allocator = true;
      return -1;
    case CLI_OPT_DROP_FRAMES:
      cli_fold_settings.drop_re = arg;
      return check_regex("--drop-frames", arg);
    case CLI_OPT_KEEP_FRAMES:
      cli_fold_settings.keep_re = arg;
      return check_regex("--keep-frames", arg);
    case CLI_OPT_THREADS:
      if (strcmp(arg, "1") != 0 && strcmp(arg, "2") != 0)
        return cli_usage_error("--threads takes 1 or 2, not '%s'", arg);
      cts_load_set_threads(arg[0] == '1' ? 1 : 2);
      return -1;
    default:
      return CLI_OPTION_OTHER;
  }
}

size_t cli_rows_shown(const cli_out_opts_t *o, size_t n) {
  return o->limit && (size_t)o->limit < n ? (size_t)o->limit : n;
}

int cli_output_check(const cli_out_opts_t *o) {
  return o->json && o->csv ? cli_usage_error("--json and --csv exclude each other") : -1;
}

int cli_parse_keyword(const char *option, const char *arg, const cli_keyword_t *table,
                      const char *suffix, int *out) {
  size_t n = 0;
  for (; table[n].name; n++)
    if (strcmp(arg, table[n].name) == 0) {
      *out = table[n].value;
      return -1;
    }
  /* "--by takes line, function or file, not 'x'": the names as the help lists them. */
  char names[256];
  size_t len = 0;
  names[0] = 0;
  for (size_t i = 0; i < n && len < sizeof names; i++) {
    const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
    const int k = snprintf(names + len, sizeof names - len, "%s%s", sep, table[i].name);
    if (k < 0) break;
    len += (size_t)k;
  }
  return cli_usage_error("%s takes %s%s, not '%s'", option, names, suffix ? suffix : "", arg);
}

int cli_parse_group(const char *arg, cts_group_t *out) {
  static const cli_keyword_t groups[] = {
      {"line", CTS_GROUP_LINE}, {"function", CTS_GROUP_FUNCTION}, {"file", CTS_GROUP_FILE}, {0}};
  int v;
  const int rc = cli_parse_keyword("--by", arg, groups, NULL, &v);
  if (rc < 0) *out = (cts_group_t)v;
  return rc;
}

int cli_one_trace(int argc, char **argv, int first, const cli_out_opts_t *o, const char *many,
                  const char *conflict, cli_trace_kind_t *kind) {
  if (first >= argc) return cli_usage_error("no trace given");
  if (argc - first > 1) return cli_usage_error("%s", many);
  const int checked = cli_output_check(o);
  if (checked >= 0) return checked;
  if (conflict) return cli_usage_error("%s", conflict);
  return cli_trace_detect(argv[first], kind);
}

static cts_out_t out_buffer;

cts_out_t *cli_out_buffer(int fd, bool term) {
  cts_out_init(&out_buffer, fd);
  out_buffer.term = term;
  return &out_buffer;
}

cts_out_t *cli_stdout(bool term) {
  return cli_out_buffer(STDOUT_FILENO, term);
}

cts_out_t *cli_stdout_for(const cli_out_opts_t *o) {
  return cli_stdout(!o->json && (!o->csv || isatty(STDOUT_FILENO)));
}

void cli_jw_estimate(cts_json_t *w, const cts_alloc_profile_t *p, const char *name,
                     uint64_t samples) {
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  char key[96];
  snprintf(key, sizeof key, "%s_samples", name);
  cts_json_kv_u64(w, key, samples);
  snprintf(key, sizeof key, "%s_bytes", name);
  cts_json_kv_fixed(w, key, (double)samples * bps, 0);
  if (p->sample_rate < 1.0) {
    double lo, hi;
    cts_poisson_ci95(samples, &lo, &hi);
    snprintf(key, sizeof key, "%s_bytes_ci95", name);
    cts_json_key(w, key);
    cts_json_array(w);
    cts_json_fixed(w, lo * bps, 0);
    cts_json_fixed(w, hi * bps, 0);
    cts_json_end(w);
  }
}

void cli_jw_trace_header(cts_json_t *w, const cli_trace_t *t) {
  const cts_alloc_profile_t *p = &t->prof;
  cts_json_kv_str(w, "trace", t->path);
  cts_json_kv_str(w, "executable", t->info ? t->info->executable_name : "");
  cts_json_key(w, "sample_rate");
  cts_json_shortest(w, p->sample_rate);
  cts_json_kv_u64(w, "word_size", p->word_bytes * 8u);
  cts_json_key(w, "bytes_per_sample");
  cts_json_g(w, cts_alloc_profile_bytes_per_sample(p), 17);
  cts_json_kv_fixed(w, "duration_s", cts_alloc_profile_duration_s(p), 6);
  cts_json_key(w, "reader_result");
  cli_jw_reader_result(w, t->err);
  cts_json_ws(w, "\n ");
}

void cli_jw_site(cts_json_t *w, const cli_trace_t *t, const cts_row_t *r) {
  cts_json_kv_str(w, "function", r->code ? r->function : "(no backtrace)");
  if (t && r->code) cli_jw_mangled(w, t, r->function);
  cts_json_kv_str(w, "file", r->file);
  cts_json_kv_u64(w, "line", r->line);
}

void cli_jw_end(cts_json_t *w, bool rows) {
  if (rows) {
    cts_json_ws(w, "\n ");
    cts_json_end(w);
  }
  cts_json_ws(w, "\n");
  cts_json_end(w);
  cts_json_finish(w);
  cts_out_char(w->o, '\n');
}

void cli_jw_reader_result(cts_json_t *w, int err) {
  if (!err) {
    cts_json_str(w, "ok");
    return;
  }
  char buf[96];
  snprintf(buf, sizeof buf, "error: %s", cts_err_name(err));
  cts_json_str(w, buf);
}

int cli_output_open(cts_outfile_t *f, const char *path, const char *const *inputs, size_t n) {
  const int same = cts_outfile_same_input(path, inputs, n);
  if (same >= 0) {
    if (path && strcmp(path, "-") != 0)
      cli_error("the output '%s' is the input '%s': writing it would destroy the trace", path,
                inputs[same]);
    else
      cli_error("standard output is the input '%s': writing it would destroy the trace",
                inputs[same]);
    return CLI_EXIT_USAGE;
  }
  const int e = cts_outfile_open(f, path);
  if (e) {
    cli_error("cannot create '%s': %s", path, cts_os_strerror(e));
    return CLI_EXIT_IO;
  }
  return -1;
}

int cli_output_close(cts_outfile_t *f, int code) {
  if (code != CLI_EXIT_OK && code != CLI_EXIT_DATA) {
    cts_outfile_discard(f);
    return code;
  }
  /* Where the output went, for a person watching (a script knows what it passed to -o):
   * only a regular file, only on a terminal, so that piped runs print nothing new. */
  struct stat st;
  const bool tell =
      f->owns_fd && isatty(STDERR_FILENO) && fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode);
  const int e = cts_outfile_commit(f);
  if (e) {
    cli_error("cannot write '%s': %s", f->path, cts_os_strerror(e));
    return CLI_EXIT_IO;
  }
  if (tell) {
    char name[512], size[32];
    cli_note("wrote %s (%s)", cts_term_text(f->path, name, sizeof name),
             cli_human_bytes((double)st.st_size, size, sizeof size));
  }
  return code;
}

int cli_exit_code(int err, bool input_error) {
  if (err == 0) return CLI_EXIT_OK;
  if (err == -ENOMEM || err == CTS_E_NOMEM) return CLI_EXIT_INTERNAL;
  if (err == CTS_E_BAD_COMPRESSION) return CLI_EXIT_DATA; /* read fine: the bytes are bad */
  if (input_error || (err < 0 && err > -1000) || err == CTS_E_IO) return CLI_EXIT_IO;
  return CLI_EXIT_DATA;
}

void cli_progress_init(cli_progress_t *p, const char *label, const char *path) {
  *p = (cli_progress_t){.label = label,
                        .name = strcmp(path, "-") == 0 ? "standard input" : cts_basename(path)};
  if (!isatty(STDERR_FILENO)) return;
  p->active = true;
  p->delay_ns = (uint64_t)CLI_PROGRESS_DELAY_MS * 1000000u;
  const char *env = getenv("CTFSCOPE_PROGRESS_DELAY_MS");
  long ms;
  if (env && cli_parse_long(env, 0, 3600000L, &ms)) p->delay_ns = (uint64_t)ms * 1000000u;
  p->start_ns = cts_mono_ns();
}

void cli_progress_cb(void *user_data, uint64_t done, uint64_t total) {
  cli_progress_t *p = user_data;
  if (!p->active) return;
  const uint64_t now = cts_mono_ns();
  /* Quick reads print nothing, and a redraw per callback (every 4 MB) would flicker and
   * cost more than it tells. */
  if (now - p->start_ns < p->delay_ns) return;
  if (p->shown && now - p->last_ns < (uint64_t)CLI_PROGRESS_EVERY_MS * 1000000u) return;
  p->shown = true;
  p->last_ns = now;
  const double secs = (double)(now - p->start_ns) / 1e9;
  const double rate = secs > 0 ? (double)done / secs : 0;
  char name[256], a[32], b[32], r[32];
  fprintf(stderr, "\r%s: %s %s ", command_name, p->label,
          cts_term_text(p->name, name, sizeof name));
  if (total && done <= total) {
    const double left = rate > 0 ? (double)(total - done) / rate : 0;
    fprintf(stderr, "%3d%% %s of %s, %s/s, %.0f s left", (int)(done * 100 / total),
            cli_human_bytes((double)done, a, sizeof a), cli_human_bytes((double)total, b, sizeof b),
            cli_human_bytes(rate, r, sizeof r), left);
  } else {
    fprintf(stderr, "%s read, %s/s", cli_human_bytes((double)done, a, sizeof a),
            cli_human_bytes(rate, r, sizeof r));
  }
  fputs("\033[K", stderr); /* the rest of a longer earlier line */
}

void cli_progress_erase(cli_progress_t *p) {
  if (!p->shown) return;
  fputs("\r\033[K", stderr);
  p->shown = false;
}

void cli_progress_done(cli_progress_t *p) {
  cli_progress_erase(p);
  p->active = false;
}

const char *cli_human_bytes(double bytes, char *buf, size_t size) {
  return cts_human_bytes(bytes, buf, size);
}

const char *cli_grouped(uint64_t v, char *buf, size_t size) {
  return cts_grouped(v, buf, size);
}

const char *cli_shortest_double(double v, char *buf, size_t size) {
  return cts_shortest_double(v, buf, size);
}

void cli_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", command_name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void cli_log_line(void *user_data, const char *line) {
  (void)user_data;
  cli_note("%s", line);
}

void cli_catch_stop_signals(void (*stop)(int sig)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

#ifndef CTS_LIBDIR_FROM_BINDIR
#define CTS_LIBDIR_FROM_BINDIR "../lib"
#endif

bool cli_find_module(const char *name, char *out, size_t size) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = '\0';
      /* A path that does not fit is skipped, never truncated into another file's name. */
      static const char *const layouts[] = {"%s/%s", "%s/" CTS_LIBDIR_FROM_BINDIR "/%s"};
      for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        const int len = snprintf(out, size, layouts[i], self, name);
        if (len > 0 && (size_t)len < size && access(out, R_OK) == 0) return true;
      }
    }
  }
#ifdef CTS_INSTALL_LIBDIR
  const int len = snprintf(out, size, "%s/%s", CTS_INSTALL_LIBDIR, name);
  if (len > 0 && (size_t)len < size && access(out, R_OK) == 0) return true;
#endif
  return false;
}
