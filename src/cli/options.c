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

#include "../analysis/mtprof.h"
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

int cli_output_option(int opt, const char *arg, bool *json, bool *csv, bool *quiet, long *limit) {
  switch (opt) {
    case 'J':
      *json = true;
      return -1;
    case 'C':
      *csv = true;
      return -1;
    case 'q':
      *quiet = true;
      return -1;
    case 'n':
      if (!limit) return CLI_OPTION_OTHER;
      if (!cli_parse_long(arg, 0, 1L << 30, limit))
        return cli_usage_error("--limit takes a number >= 0, not '%s'", arg);
      return -1;
    default:
      return cli_frame_option(opt, arg);
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
    default:
      return CLI_OPTION_OTHER;
  }
}

int cli_output_check(bool json, bool csv) {
  return json && csv ? cli_usage_error("--json and --csv exclude each other") : -1;
}

int cli_parse_group(const char *arg, cts_group_t *out) {
  if (strcmp(arg, "line") == 0)
    *out = CTS_GROUP_LINE;
  else if (strcmp(arg, "function") == 0)
    *out = CTS_GROUP_FUNCTION;
  else if (strcmp(arg, "file") == 0)
    *out = CTS_GROUP_FILE;
  else
    return cli_usage_error("--by takes line, function or file, not '%s'", arg);
  return -1;
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
  const int e = cts_outfile_commit(f);
  if (e) {
    cli_error("cannot write '%s': %s", f->path, cts_os_strerror(e));
    return CLI_EXIT_IO;
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
  p->label = label;
  p->active = false;
  p->last_percent = -1;
  struct stat st;
  /* Only worth a line for inputs that take a noticeable time to read. */
  if (isatty(STDERR_FILENO) && strcmp(path, "-") != 0 && stat(path, &st) == 0 &&
      st.st_size >= (64 << 20))
    p->active = true;
}

void cli_progress_cb(void *user_data, uint64_t done, uint64_t total) {
  cli_progress_t *p = user_data;
  if (!p->active || !total) return;
  const int percent = (int)(done * 100 / total);
  if (percent == p->last_percent) return;
  p->last_percent = percent;
  char a[32], b[32];
  fprintf(stderr, "\r%s: %s %3d%% (%s of %s)", command_name, p->label, percent,
          cli_human_bytes((double)done, a, sizeof a), cli_human_bytes((double)total, b, sizeof b));
}

void cli_progress_done(cli_progress_t *p) {
  if (p->active && p->last_percent >= 0) fputs("\r\033[K", stderr);
}

const char *cli_human_bytes(double bytes, char *buf, size_t size) {
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  unsigned u = 0;
  bytes = cts_est_clamp(bytes); /* never "inf PB" or "-nan B" */
  while (bytes >= 1000.0 && u + 1 < sizeof units / sizeof *units) bytes /= 1000.0, u++;
  if (u == 0)
    snprintf(buf, size, "%.0f %s", bytes, units[u]);
  else
    snprintf(buf, size, "%.*f %s", bytes < 10 ? 2 : bytes < 100 ? 1 : 0, bytes, units[u]);
  return buf;
}

const char *cli_grouped(uint64_t v, char *buf, size_t size) {
  char digits[32];
  const int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
  size_t o = 0;
  for (int i = 0; i < n && o + 2 < size; i++) {
    if (i > 0 && (n - i) % 3 == 0) buf[o++] = ' ';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

const char *cli_shortest_double(double v, char *buf, size_t size) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  return buf;
}

void cli_log_line(void *user_data, const char *line) {
  (void)user_data;
  fprintf(stderr, "%s: %s\n", command_name, line);
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

bool cli_find_module(const char *name, char *out, size_t size) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = '\0';
      /* A path that does not fit is skipped, never truncated into another file's name. */
      static const char *const layouts[] = {"%s/%s", "%s/../lib/%s"};
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
