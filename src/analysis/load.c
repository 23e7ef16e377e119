/* SPDX-License-Identifier: MIT */
/* Loading memtrace and task traces (load.h); the kind of a trace is in load_detect.c. */
#include "load.h"

#include "fold.h"
#include "leaks_marks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/grow.h"
#include "../os/mprof_ring.h"
#include "pipeline.h"

void cts_logf(const cts_log_t *log, cts_log_level_t level, const char *fmt, ...) {
  if (!log || !log->fn) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log->fn(log->user_data, level, msg);
}

const char *cts_basename(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Whether an error is out of memory, in either vocabulary. */
static bool is_nomem(int err) {
  return err == -ENOMEM || err == CTS_E_NOMEM;
}

/* ---- task traces ----------------------------------------------------------------------- */

static int tasks_on_packet(void *ud, const cts_mprof_packet_t *p) {
  cts_task_trace_t *t = ud;
  t->packets_seen++;
  if (p->content_size <= CTS_MPROF_HEADER_SIZE) t->packets_empty++;
  if (p->truncated) t->packets_truncated++;
  if (p->content_size == p->size) t->packets_full_content++;
  if (t->packets_seen == 1 || p->size < t->packet_min) t->packet_min = p->size;
  if (p->size > t->packet_max) t->packet_max = p->size;
  if (t->keep_packets) {
    if (cts_grow((void **)&t->packets, &t->cap_packets, t->npackets, sizeof *t->packets))
      return -ENOMEM;
    t->packets[t->npackets++] = *p;
  }
  return cts_tasks_packet(&t->m, p);
}

static int tasks_on_event(void *ud, const cts_mprof_event_t *ev) {
  cts_task_trace_t *t = ud;
  const int e = cts_tasks_event(&t->m, ev);
  if (e || !t->hook) return e;
  return t->hook_err = t->hook(t->hook_user_data, t, ev);
}

static void tasks_on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const cts_task_trace_t *t = ud;
  (void)code;
  if (!t->quiet)
    cts_logf(&t->log, CTS_LOG_WARNING, "%s: at offset %llu: %s", t->path,
             (unsigned long long)offset, message);
}

static int task_trace_load(cts_task_trace_t *t, const char *path, const cts_tasks_config_t *cfg,
                           const cts_load_opts_t *opts, bool keep_packets, cts_task_trace_hook hook,
                           void *hook_user_data) {
  memset(t, 0, sizeof *t);
  t->path = path;
  t->quiet = opts->quiet;
  t->log = opts->log;
  t->keep_packets = keep_packets;
  t->hook = hook;
  t->hook_user_data = hook_user_data;
  if (cts_tasks_init(&t->m, cfg)) {
    cts_logf(&t->log, CTS_LOG_ERROR, "out of memory");
    return CTS_E_NOMEM;
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
  if ((t->m.ignored_creates || t->m.ignored_refs) && !t->quiet)
    cts_logf(&t->log, CTS_LOG_WARNING,
             "%s: %llu tasks created beyond the limit of %u tasks (and %llu references to "
             "more tasks) are left out",
             path, (unsigned long long)t->m.ignored_creates, t->m.cfg.max_tasks,
             (unsigned long long)t->m.ignored_refs);
  if (!t->err) return 0;
  if (t->hook_err && t->err == t->hook_err) return t->err; /* the caller says why */
  if (t->input_error) {
    cts_logf(&t->log, CTS_LOG_ERROR, "%s", t->msg);
    return t->err;
  }
  if (is_nomem(t->err) || t->m.err) {
    cts_logf(&t->log, CTS_LOG_ERROR, "%s: out of memory", path);
    return CTS_E_NOMEM;
  }
  cts_logf(&t->log, CTS_LOG_ERROR, "%s: %s (%s); the figures cover what was read before it", path,
           t->msg, cts_err_name(t->err));
  t->kept = true;
  return t->err;
}

int cts_task_trace_load(cts_task_trace_t *t, const char *path, const cts_tasks_config_t *cfg,
                        const cts_load_opts_t *opts, bool keep_packets, cts_task_trace_hook hook,
                        void *hook_user_data) {
  const int err = task_trace_load(t, path, cfg, opts, keep_packets, hook, hook_user_data);
  t->log = (cts_log_t){0}; /* the caller's, for this call only */
  return err;
}

void cts_task_trace_free(cts_task_trace_t *t) {
  cts_tasks_fini(&t->m);
  free(t->packets);
  memset(t, 0, sizeof *t);
}

double cts_task_trace_duration_s(const cts_task_trace_t *t) {
  return t->m.have_time ? (double)(t->m.last_ns - t->m.first_ns) * 1e-9 : 0.0;
}

/* ---- memtrace traces --------------------------------------------------------------------- */

static int on_info(void *ud, const cts_mt_info_t *info) {
  cts_mem_trace_t *t = ud;
  cts_alloc_profile_set_info(&t->prof, info);
  return 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  cts_mem_trace_t *t = ud;
  const int e = cts_alloc_profile_add_event(&t->prof, ev);
  if (e || !t->hook) return e;
  return t->hook_err = t->hook(t->hook_user_data, t, ev);
}

/* on_event without a hook (stats, top, diff): the profile alone, as a tail call; the
 * wrapper's frame and its test of the hook were ~15 instructions an event (4 % of stats
 * on a rate-1 trace). */
static int on_event_profile(void *ud, const cts_mt_event_t *ev) {
  return cts_alloc_profile_add_event(&((cts_mem_trace_t *)ud)->prof, ev);
}

/* on_event with opts->full_stacks and no hook (leaks' second pass): the marks decide
 * whether an allocation interns its full stack or its allocation point. */
static int on_event_marked(void *ud, const cts_mt_event_t *ev) {
  cts_mem_trace_t *t = ud;
  if (ev->kind != CTS_MT_ALLOC) return cts_alloc_profile_add_event(&t->prof, ev);
  const bool full = cts_leaks_marked(t->full_stacks, ev->obj_id);
  t->full_allocs += full;
  return cts_alloc_profile_add_alloc(&t->prof, ev, !full);
}

/* on_event with opts->events_only: the hook alone. */
static int on_event_only(void *ud, const cts_mt_event_t *ev) {
  cts_mem_trace_t *t = ud;
  if (!t->hook) return 0;
  return t->hook_err = t->hook(t->hook_user_data, t, ev);
}

static int on_packet(void *ud, const cts_mt_packet_t *p) {
  cts_mem_trace_t *t = ud;
  cts_alloc_profile_add_packet(&t->prof, p);
  return 0;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  const cts_mem_trace_t *t = ud;
  (void)code;
  if (!t->quiet)
    cts_logf(&t->log, CTS_LOG_WARNING, "%s: at offset %llu: %s", t->path,
             (unsigned long long)offset, message);
}

static int lookup(void *ud, uint64_t code, const cts_mt_location_t **locs, size_t *n) {
  const cts_mem_trace_t *t = ud;
  /* While a decode thread grows the reader's table, the pipe's copy answers: it holds what
   * the events delivered so far could use, as the reader's did for a single thread. */
  if (t->pipe) return cts_pipe_lookup_location(t->pipe, code, locs, n);
  return cts_mt_reader_lookup_location(t->reader, code, locs, n);
}

cts_frames_t cts_mem_trace_frames(cts_mem_trace_t *t) {
  if (t->fold) return cts_fold_frames(t->fold);
  return (cts_frames_t){.lookup = lookup, .user_data = t};
}

const char *cts_mem_trace_mangled(const cts_mem_trace_t *t, const char *shown) {
  return t->fold && shown ? cts_fold_mangled(t->fold, shown) : NULL;
}

/* Whether a reading error is the input's (it could not be read), as opposed to a defect of
 * the bytes; a corrupt compressed stream is a defect. */
static bool is_input_failure(int err, bool input_error) {
  if (err == CTS_E_BAD_COMPRESSION) return false;
  return input_error || (err < 0 && err > -1000) || err == CTS_E_IO;
}

static unsigned default_threads;

void cts_load_set_threads(unsigned threads) {
  default_threads = threads;
}

/* 1 or 2: how to read path (cts_load_opts_t.threads). */
static unsigned choose_threads(unsigned asked, const char *path) {
  if (!asked) asked = default_threads;
  if (asked == 1) return 1;
  struct stat st;
  const bool from_stdin = strcmp(path, "-") == 0;
  if ((from_stdin ? fstat(STDIN_FILENO, &st) : stat(path, &st)) != 0 || !S_ISREG(st.st_mode))
    return 1;
  if (asked >= 2) return 2;
  return cts_pipe_auto_threads((uint64_t)st.st_size);
}

/* Reads the trace into the reader's handler, on this thread or through a pipe (two
 * threads). Sets *stopmsg when a callback stopped a read on two threads: the reader did
 * not see it, and its message would not say so. */
static int read_trace(cts_mem_trace_t *t, const cts_load_opts_t *opts, char *stopmsg, size_t size) {
  if (!t->pipe)
    return cts_os_read_memtrace(t->path, t->reader, opts->progress, opts->progress_user_data,
                                &t->input_error);
  const int err = cts_pipe_run(t->pipe, t->path, t->reader, opts->progress,
                               opts->progress_user_data, &t->input_error);
  uint64_t offset;
  if (cts_pipe_stopped(t->pipe, &offset)) /* as the reader words a callback's stop */
    snprintf(stopmsg, size, "at offset %llu: stopped by the caller (%d)",
             (unsigned long long)offset, err);
  /* Lookups go to the reader's table again (a superset): the batches are freed now. */
  cts_pipe_destroy(t->pipe);
  t->pipe = NULL;
  return err;
}

static int mem_trace_load(cts_mem_trace_t *t, const char *path,
                          const cts_alloc_profile_config_t *cfg, const cts_load_opts_t *opts,
                          cts_mem_trace_hook hook, void *hook_user_data) {
  memset(t, 0, sizeof *t);
  t->path = path;
  t->hook = hook;
  t->hook_user_data = hook_user_data;
  t->quiet = opts->quiet;
  t->log = opts->log;
  /* Only where the profile interns stacks, without a hook (on_event_marked). */
  t->full_stacks = cfg->stacks && !opts->events_only && !hook ? opts->full_stacks : NULL;
  int err = cts_alloc_profile_init(&t->prof, cfg);
  if (err) {
    cts_logf(&t->log, CTS_LOG_ERROR, "out of memory");
    return CTS_E_NOMEM;
  }
  cts_mt_reader_config_t rc;
  cts_mt_reader_config_init(&rc);
  rc.allocator = cts_os_allocator();
  /* Decoded even when no stack is kept (stats): a corrupt backtrace is an error for every
   * command alike, not only for those that look at stacks. */
  rc.decode_backtraces = true;
  const cts_mt_handler_t h = {.user_data = t,
                              .on_info = on_info,
                              .on_event = opts->events_only ? on_event_only
                                          : hook            ? on_event
                                          : t->full_stacks  ? on_event_marked
                                                            : on_event_profile,
                              .on_packet = on_packet,
                              .on_warning = on_warning};
  t->threads = choose_threads(opts->threads, path);
  if (t->threads == 2 && cts_pipe_create(&t->pipe, &h)) {
    cts_logf(&t->log, CTS_LOG_ERROR, "out of memory");
    return CTS_E_NOMEM;
  }
  const cts_mt_handler_t rh = t->pipe ? cts_pipe_producer(t->pipe) : h;
  err = cts_mt_reader_create(&t->reader, &rc, &rh);
  if (err) {
    cts_logf(&t->log, CTS_LOG_ERROR, "cannot create a reader: %s", cts_os_strerror(err));
    return is_nomem(err) ? CTS_E_NOMEM : err;
  }
  if (opts->fold) {
    /* Stacks are cut as they are read (the trace defines a code before using it). */
    const cts_frames_t raw = {.lookup = lookup, .user_data = t};
    char msg[512];
    t->fold = malloc(sizeof *t->fold);
    err = t->fold ? cts_fold_init(t->fold, &raw, opts->fold, msg, sizeof msg) : -ENOMEM;
    if (err) {
      free(t->fold);
      t->fold = NULL;
      cts_logf(&t->log, CTS_LOG_ERROR, "%s", err == -ENOMEM ? "out of memory" : msg);
      return err == -ENOMEM ? CTS_E_NOMEM : CTS_E_INVAL;
    }
    if (cfg->stacks) t->prof.cfg.fold = t->fold;
  }
  struct stat st;
  t->file_size = strcmp(path, "-") != 0 && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
  char stopmsg[128] = "";
  err = read_trace(t, opts, stopmsg, sizeof stopmsg);
  t->err = err;
  t->info = cts_mt_reader_borrow_info(t->reader);
  cts_alloc_profile_finish(&t->prof);
  if (t->fold && t->fold->nomem && !err) err = -ENOMEM;
  if (t->prof.stacks.overflowed && !t->quiet)
    cts_logf(&t->log, CTS_LOG_WARNING,
             "%s: %llu allocations had stacks beyond the budget of %llu stack nodes: they are "
             "kept by allocation point only, under '(stacks beyond the memory budget)'",
             path, (unsigned long long)t->prof.stacks.overflowed,
             (unsigned long long)t->prof.stacks.max_nodes);
  if (!err) return 0;
  if (t->hook_err && err == t->hook_err) return err; /* the caller says why */
  if (t->input_error && err != CTS_E_IO && err != CTS_E_BAD_COMPRESSION) {
    cts_logf(&t->log, CTS_LOG_ERROR, "cannot read '%s': %s", path, cts_os_strerror(err));
    return err;
  }
  if (is_nomem(err)) {
    cts_logf(&t->log, CTS_LOG_ERROR, "%s: out of memory", path);
    return CTS_E_NOMEM;
  }
  cts_logf(&t->log, CTS_LOG_ERROR, "%s: %s (%s); the figures cover what was read before it", path,
           t->input_error ? cts_os_strerror(err)
           : stopmsg[0]   ? stopmsg
                          : cts_mt_reader_error_message(t->reader),
           cts_err_name(err));
  /* A read failure after the trace's header leaves figures nobody should act on; before it
   * there are none, and the trace is taken for a corrupt one. */
  t->kept = !t->info || !is_input_failure(err, t->input_error);
  return err;
}

int cts_mem_trace_load(cts_mem_trace_t *t, const char *path, const cts_alloc_profile_config_t *cfg,
                       const cts_load_opts_t *opts, cts_mem_trace_hook hook, void *hook_user_data) {
  const int err = mem_trace_load(t, path, cfg, opts, hook, hook_user_data);
  t->log = (cts_log_t){0}; /* the caller's, for this call only */
  t->full_stacks = NULL;
  return err;
}

void cts_mem_trace_free(cts_mem_trace_t *t) {
  cts_pipe_destroy(t->pipe); /* left by a load that failed before reading */
  cts_alloc_profile_fini(&t->prof);
  cts_mt_reader_destroy(t->reader);
  if (t->fold) cts_fold_fini(t->fold);
  free(t->fold);
  memset(t, 0, sizeof *t);
}
