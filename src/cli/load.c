/* SPDX-License-Identifier: MIT */
#include "load.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_load_exit(int err, bool kept, bool input_error, bool by_hook) {
  if (!err) return CLI_EXIT_OK;
  if (by_hook || (input_error && !kept)) return CLI_EXIT_IO;
  if (kept) return CLI_EXIT_DATA;
  if (err == CTS_E_LIMIT) return CLI_EXIT_USAGE;    /* cts_trace_detect: too many piped inputs */
  if (err == CTS_E_INVAL) return CLI_EXIT_INTERNAL; /* a bad reader configuration: a bug */
  return cli_exit_code(err, false);
}

typedef struct ends {
  bool quiet;
  cli_progress_t progress;
} ends_t;

static void print(void *user_data, cts_log_level_t level, const char *msg) {
  ends_t *e = user_data;
  if (level == CTS_LOG_WARNING && e->quiet) return;
  /* A message in the middle of the progress line would be glued to it: the line is erased
   * first and drawn again at the next step. */
  cli_progress_erase(&e->progress);
  if (level == CTS_LOG_ERROR)
    cli_error("%s", msg);
  else
    cli_warn("%s", msg);
}

/* cli_load_run, its progress line saying `verb` ("reading") before the trace's name. */
static int load_run(const char *progress_path, const char *verb, bool quiet,
                    int (*load)(void *ctx, const cts_load_opts_t *opts), void *ctx) {
  ends_t e = {.quiet = quiet};
  if (progress_path) cli_progress_init(&e.progress, verb, progress_path);
  const cts_load_opts_t opts = {.log = {.fn = print, .user_data = &e},
                                .quiet = quiet,
                                .progress = progress_path ? cli_progress_cb : NULL,
                                .progress_user_data = &e.progress};
  const int r = load(ctx, &opts);
  cli_progress_done(&e.progress);
  return r;
}

int cli_load_run(const char *progress_path, bool quiet,
                 int (*load)(void *ctx, const cts_load_opts_t *opts), void *ctx) {
  return load_run(progress_path, "reading", quiet, load, ctx);
}

typedef struct detect_call {
  const char *path;
  cli_trace_kind_t *kind;
  bool strict;
} detect_call_t;

static int run_detect(void *ctx, const cts_load_opts_t *opts) {
  const detect_call_t *c = ctx;
  return cts_trace_detect(c->path, c->kind, c->strict, &opts->log);
}

static int detect(const char *path, cli_trace_kind_t *kind, bool strict) {
  detect_call_t c = {path, kind, strict};
  const int err = cli_load_run(NULL, false, run_detect, &c);
  return err ? cli_load_exit(err, false, false, false) : -1;
}

int cli_trace_detect(const char *path, cli_trace_kind_t *kind) {
  return detect(path, kind, true);
}

int cli_trace_detect_lenient(const char *path, cli_trace_kind_t *kind) {
  return detect(path, kind, false);
}

typedef struct tasks_call {
  cli_tasks_t *t;
  const char *path;
  const cts_tasks_config_t *cfg;
  bool keep_packets;
  cli_tasks_hook hook;
  void *hook_user_data;
} tasks_call_t;

static int run_tasks(void *ctx, const cts_load_opts_t *opts) {
  const tasks_call_t *c = ctx;
  return cts_task_trace_load(c->t, c->path, c->cfg, opts, c->keep_packets, c->hook,
                             c->hook_user_data);
}

int cli_tasks_load(cli_tasks_t *t, const char *path, const cts_tasks_config_t *cfg, bool quiet,
                   bool keep_packets, cli_tasks_hook hook, void *hook_user_data) {
  tasks_call_t c = {t, path, cfg, keep_packets, hook, hook_user_data};
  const int err = cli_load_run(NULL, quiet, run_tasks, &c);
  return cli_load_exit(err, t->kept, t->input_error, t->hook_err && err == t->hook_err);
}

typedef struct trace_call {
  cli_trace_t *t;
  const char *path;
  const cts_alloc_profile_config_t *cfg;
  cli_event_hook hook;
  void *hook_user_data;
  bool events_only;
} trace_call_t;

static int run_trace(void *ctx, const cts_load_opts_t *opts) {
  const trace_call_t *c = ctx;
  cts_load_opts_t o = *opts;
  o.fold = &cli_fold_settings; /* names as people read them (the frame options) */
  o.events_only = c->events_only;
  return cts_mem_trace_load(c->t, c->path, c->cfg, &o, c->hook, c->hook_user_data);
}

int cli_trace_load(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                   bool quiet) {
  return cli_trace_load_hooked(t, path, cfg, quiet, NULL, NULL);
}

static int trace_load(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                      bool quiet, cli_event_hook hook, void *hook_user_data, bool events_only,
                      const char *verb) {
  trace_call_t c = {t, path, cfg, hook, hook_user_data, events_only};
  const int err = load_run(path, verb, quiet, run_trace, &c);
  return cli_load_exit(err, t->kept, t->input_error, t->hook_err && err == t->hook_err);
}

int cli_trace_load_hooked(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                          bool quiet, cli_event_hook hook, void *hook_user_data) {
  return trace_load(t, path, cfg, quiet, hook, hook_user_data, false, "reading");
}

int cli_trace_load_events(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                          bool quiet, cli_event_hook hook, void *hook_user_data) {
  return trace_load(t, path, cfg, quiet, hook, hook_user_data, true, "reading");
}

int cli_trace_count_events(cli_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                           cli_event_hook hook, void *hook_user_data) {
  return trace_load(t, path, cfg, true, hook, hook_user_data, true, "counting");
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
  const cts_alloc_profile_t *p = &t->prof;
  char a[64], b[64];
  cli_out_heading(o, "Trace    %s: %s, pid %lld, %.3f s\n", cli_basename(t->path),
                  t->info ? t->info->executable_name : "?", t->info ? (long long)t->info->pid : 0,
                  cts_alloc_profile_duration_s(p));
  if (p->sample_rate >= 1.0)
    cli_out_heading(o, "Bytes    exact: every word was sampled (rate 1), %u-byte words\n",
                    p->word_bytes);
  else
    cli_out_heading(o,
                    "Bytes    estimated: samples / %s x %u bytes = %s bytes per sample; figures "
                    "from\n         fewer than %u samples show their 95%% confidence interval\n",
                    cli_shortest_double(p->sample_rate, a, sizeof a), p->word_bytes,
                    (snprintf(b, sizeof b, "%.6g", cts_alloc_profile_bytes_per_sample(p)), b),
                    CTS_CI_SHOW_BELOW);
}

int cli_finish_output(cts_out_t *o, int code) {
  if (cts_out_flush(o)) {
    cli_error("cannot write the output: %s", cts_os_strerror(o->err));
    return CLI_EXIT_IO;
  }
  return code;
}

void cli_jw_mangled(cts_json_t *w, const cli_trace_t *t, const char *shown) {
  const char *mangled = cts_mem_trace_mangled(t, shown);
  if (mangled) cts_json_kv_str(w, "mangled", mangled);
}
