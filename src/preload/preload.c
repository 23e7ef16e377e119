/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so: traces an unmodified program's heap allocations into a memtrace
 * trace. LD_PRELOAD it (or use `ctfscope record`), with the memtrace environment:
 *
 *   MEMTRACE=FILE         trace into FILE (unset or empty: the library stays inert)
 *   MEMTRACE=tcp://HOST:PORT       stream the trace to a collector (`ctfscope collect`)
 *   MEMTRACE=listen://[ADDR:]PORT  serve it to one client at a time (`ctfscope fetch`)
 *   MEMTRACE_RATE=R       sampling rate per 8-byte word, 0 < R <= 1 (default 1e-6)
 *   MEMTRACE_CONTEXT=TXT  free text stored in the trace
 *   MEMTRACE_DROP=1       drop mode: never wait for a slow sink, record the loss
 *   CTFSCOPE_UNWIND=M     backtraces: fp, libunwind or none (default: libunwind)
 *
 * A bad setting, or a collector that cannot be reached, prints one line on stderr and
 * leaves the program untraced and otherwise untouched. MEMTRACE is removed from the
 * environment once read (memtrace does the same), so forked children and what they exec
 * are not traced; a forked child is not traced (tracer.h). When the traced process itself
 * execs, the exec family flushes the trace and hands the new image the settings, with
 * the next file name (trace.execN.ctf) in MEMTRACE and CTFSCOPE_EXEC_BASE/_INDEX saying
 * where the sequence started (tracer.h, "Processes"). dlclose flushes before unloading a
 * library.
 *
 * The hooks never allocate themselves. Real functions are found lazily with
 * dlsym(RTLD_NEXT); dlsym's own calloc during that lookup is served from a static arena
 * that free/realloc recognise. Sampled blocks are ordinary blocks of the real allocator
 * (the tracer keeps a side table), so nothing here translates pointers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tracer/exec_name.h"
#include "../tracer/tracer_internal.h"
#include "os/net.h"
#include "preload_internal.h"

#define EXPORT         __attribute__((visibility("default")))
#define MESSAGE_PREFIX "ctfscope-preload: "

extern char **environ;

/* ---- the real functions ----------------------------------------------------------------- */

static struct {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  int (*execve)(const char *, char *const[], char *const[]);
  int (*execvpe)(const char *, char *const[], char *const[]);
  int (*dlclose)(void *);
} real;

static CTS__TLS int in_dlsym; /* this thread is looking up the real functions */

static void message(const char *text) {
  const size_t n = strlen(text);
  if (write(STDERR_FILENO, text, n) < 0) { /* nothing better to do */
  }
}

/* The static arena for allocations made while dlsym runs. Never reused or freed. */
#define ARENA_SIZE   65536u
#define ARENA_HEADER 16u
static _Alignas(64) unsigned char arena[ARENA_SIZE];
static size_t arena_used;

static int in_arena(const void *p) {
  return (uintptr_t)p - (uintptr_t)arena < ARENA_SIZE;
}

static void *arena_alloc(size_t size, size_t align) {
  if (align < ARENA_HEADER) align = ARENA_HEADER;
  if (size > ARENA_SIZE || (align & (align - 1)) != 0) return NULL;
  size_t used = __atomic_load_n(&arena_used, __ATOMIC_RELAXED), start;
  do {
    start = (used + ARENA_HEADER + align - 1) & ~(align - 1);
    if (start + size > ARENA_SIZE) {
      errno = ENOMEM;
      return NULL;
    }
  } while (!__atomic_compare_exchange_n(&arena_used, &used, start + size, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  memcpy(arena + start - sizeof size, &size, sizeof size);
  return arena + start; /* zero: the arena is never reused */
}

static size_t arena_size_of(const void *p) {
  size_t size;
  memcpy(&size, (const unsigned char *)p - sizeof size, sizeof size);
  return size;
}

#define RESOLVE(field, name)                   \
  do {                                         \
    void *const sym_ = dlsym(RTLD_NEXT, name); \
    memcpy(&real.field, &sym_, sizeof sym_);   \
  } while (0)

static CTS_NOINLINE void resolve_real_functions(void) {
  in_dlsym++;
  RESOLVE(free, "free");
  RESOLVE(calloc, "calloc");
  RESOLVE(realloc, "realloc");
  RESOLVE(posix_memalign, "posix_memalign");
  RESOLVE(aligned_alloc, "aligned_alloc");
  RESOLVE(memalign, "memalign");
  RESOLVE(valloc, "valloc");
  RESOLVE(pvalloc, "pvalloc");
  RESOLVE(execve, "execve");
  RESOLVE(execvpe, "execvpe");
  RESOLVE(dlclose, "dlclose");
  RESOLVE(malloc, "malloc"); /* last: its being set means all are */
  in_dlsym--;
  if (!real.malloc || !real.free || !real.calloc || !real.realloc) {
    message(MESSAGE_PREFIX "cannot find the real malloc, free, calloc or realloc; aborting\n");
    abort();
  }
}

/* True when the caller must use the arena (this thread is inside dlsym). */
static inline int need_real(void) {
  if (CTS_LIKELY(real.malloc != NULL)) return 0;
  if (in_dlsym) return 1;
  resolve_real_functions();
  return 0;
}

/* ---- allocation hooks ------------------------------------------------------------------------ */

EXPORT void *malloc(size_t size) {
  if (CTS_UNLIKELY(need_real())) return arena_alloc(size, 16);
  void *const p = real.malloc(size);
  cts__tracer_on_alloc(p, size, __builtin_frame_address(0));
  return p;
}

EXPORT void free(void *p) {
  if (CTS_UNLIKELY(in_arena(p))) return;
  if (CTS_UNLIKELY(!real.free)) {
    if (!p || need_real()) return;
  }
  cts__tracer_on_free(p);
  real.free(p);
}

EXPORT void *calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (CTS_UNLIKELY(need_real())) return arena_alloc(total, 16);
  void *const p = real.calloc(n, size);
  cts__tracer_on_alloc(p, total, __builtin_frame_address(0));
  return p;
}

/* realloc is recorded as the free of the old block (if sampled), then an allocation of the
 * new size sampled afresh. The free is recorded before the real call: if realloc then
 * fails, the still-valid old block is reported freed (a rare, documented inexactness). */
static inline void *do_realloc(void *old, size_t size, void *frame) {
  if (CTS_UNLIKELY(in_arena(old))) {
    const size_t old_size = arena_size_of(old);
    void *const p = need_real() ? arena_alloc(size, 16) : real.malloc(size);
    if (p) {
      memcpy(p, old, old_size < size ? old_size : size);
      if (!in_arena(p)) cts__tracer_on_alloc(p, size, frame);
    }
    return p;
  }
  if (CTS_UNLIKELY(need_real())) return arena_alloc(size, 16);
  if (old) cts__tracer_on_free(old);
  void *const p = real.realloc(old, size);
  cts__tracer_on_alloc(p, size, frame);
  return p;
}

EXPORT void *realloc(void *old, size_t size) {
  return do_realloc(old, size, __builtin_frame_address(0));
}

EXPORT void *reallocarray(void *old, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return do_realloc(old, total, __builtin_frame_address(0));
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (CTS_UNLIKELY(need_real())) {
    void *const p = arena_alloc(size, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  if (!real.posix_memalign) return ENOMEM;
  const int e = real.posix_memalign(out, align, size);
  if (e == 0) cts__tracer_on_alloc(*out, size, __builtin_frame_address(0));
  return e;
}

#define ALIGNED_HOOK(name, params, call, align_expr, size_expr)               \
  EXPORT void *name params {                                                  \
    if (CTS_UNLIKELY(need_real())) return arena_alloc(size_expr, align_expr); \
    if (!real.name) {                                                         \
      errno = ENOMEM;                                                         \
      return NULL;                                                            \
    }                                                                         \
    void *const p = real.name call;                                           \
    cts__tracer_on_alloc(p, size_expr, __builtin_frame_address(0));           \
    return p;                                                                 \
  }

ALIGNED_HOOK(aligned_alloc, (size_t align, size_t size), (align, size), align, size)
ALIGNED_HOOK(memalign, (size_t align, size_t size), (align, size), align, size)
ALIGNED_HOOK(valloc, (size_t size), (size), 4096, size)
ALIGNED_HOOK(pvalloc, (size_t size), (size), 4096, size)

/* ---- exec: flush, then trace the new image into the next file ------------------------ */

static pid_t traced_pid; /* the process tracing started in (not a vfork child sharing it) */

/* The settings this image was started with, handed on to an image it execs. */
#define SETTING_SIZE 4096
static struct {
  bool usable;                 /* the settings below fit: an exec can continue the trace */
  bool file;                   /* MEMTRACE names a file (else a tcp:// or listen:// URL) */
  char memtrace[SETTING_SIZE]; /* this image's MEMTRACE */
  char base[SETTING_SIZE];     /* the first image's file: the names' base */
  unsigned index;              /* this image's number (0 = the first) */
  char kept[4][SETTING_SIZE];  /* values of kept_names[i] at start-up, "" if unset */
} exec_state;

/* Settings handed on as they were at start-up. */
static const char *const kept_names[4] = {"MEMTRACE_RATE", "MEMTRACE_CONTEXT", "MEMTRACE_DROP",
                                          "CTFSCOPE_UNWIND"};

/* Environment variables the preload reads, replaced in the new image's environment. */
static const char *const passed_on[] = {
    "MEMTRACE",        "MEMTRACE_RATE",      "MEMTRACE_CONTEXT",   "MEMTRACE_DROP",
    "CTFSCOPE_UNWIND", "CTFSCOPE_EXEC_BASE", "CTFSCOPE_EXEC_INDEX"};

static bool is_passed_on(const char *entry) {
  for (size_t i = 0; i < sizeof passed_on / sizeof *passed_on; i++) {
    const size_t n = strlen(passed_on[i]);
    if (strncmp(entry, passed_on[i], n) == 0 && entry[n] == '=') return true;
  }
  return false;
}

/* Whether an exec by this thread continues the trace in the new image: only the traced
 * process itself, not a forked or vfork'd child, and not the tracer's own threads. */
static bool continues_trace(void) {
  return !cts__guarded() && exec_state.usable && traced_pid != 0 && getpid() == traced_pid &&
         cts_tracer_is_active();
}

/* Builds the new image's environment: envp without our variables, then ours with the next
 * trace's name. One block from the real malloc (untraced): the exec replaces it, or the
 * caller frees it if the exec fails. NULL if it cannot be built (the exec then goes ahead
 * with the environment it was given, untraced). */
static char **continued_environment(char *const envp[]) {
  char next[SETTING_SIZE];
  if (exec_state.file) {
    if (!cts__exec_trace_name(next, sizeof next, exec_state.base, exec_state.index + 1))
      return NULL;
  } else {
    snprintf(next, sizeof next, "%s", exec_state.memtrace);
  }
  char index[16];
  snprintf(index, sizeof index, "%u", exec_state.index + 1);
  const char *ours[2 * 7] = {
      "MEMTRACE", next, "CTFSCOPE_EXEC_BASE", exec_state.base, "CTFSCOPE_EXEC_INDEX", index};
  size_t nours = 3;
  for (size_t i = 0; i < 4; i++) {
    if (exec_state.kept[i][0]) {
      ours[2 * nours] = kept_names[i];
      ours[2 * nours + 1] = exec_state.kept[i];
      nours++;
    }
  }
  size_t count = 0, bytes = 0;
  for (size_t i = 0; envp && envp[i]; i++) count++;
  for (size_t i = 0; i < nours; i++) bytes += strlen(ours[2 * i]) + strlen(ours[2 * i + 1]) + 2;
  cts__guard_enter();
  char **const env = real.malloc((count + nours + 1) * sizeof *env + bytes);
  cts__guard_leave();
  if (!env) return NULL;
  char *strings = (char *)(env + count + nours + 1);
  size_t k = 0;
  for (size_t i = 0; i < count; i++)
    if (!is_passed_on(envp[i])) env[k++] = envp[i];
  for (size_t i = 0; i < nours; i++) {
    env[k++] = strings;
    strings += sprintf(strings, "%s=%s", ours[2 * i], ours[2 * i + 1]) + 1;
  }
  env[k] = NULL;
  return env;
}

/* Before exec and dlclose: the trace holds everything up to here. */
static void before_exec(void) {
  /* Not from the tracer's own threads (the writer thread would wait for itself). */
  if (!cts__guarded() && getpid() == traced_pid && cts_tracer_is_active()) cts_tracer_flush();
}

/* After a failed exec: tracing goes on in this image. */
static int exec_failed(char **env) {
  const int e = errno;
  if (env) real.free(env);
  errno = e;
  return -1;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  need_real();
  if (!real.execve) return errno = ENOSYS, -1;
  if (!continues_trace()) return real.execve(path, argv, envp);
  before_exec();
  char **const env = continued_environment(envp);
  real.execve(path, argv, env ? env : envp);
  return exec_failed(env);
}

EXPORT int execv(const char *path, char *const argv[]) {
  return execve(path, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  need_real();
  if (!real.execvpe) return errno = ENOSYS, -1;
  if (!continues_trace()) return real.execvpe(file, argv, envp);
  before_exec();
  char **const env = continued_environment(envp);
  real.execvpe(file, argv, env ? env : envp);
  return exec_failed(env);
}

EXPORT int execvp(const char *file, char *const argv[]) {
  return execvpe(file, argv, environ);
}

/* glibc's execl family calls its internal execve directly, past the interposed one, so it
 * is interposed too. The arguments after `first` run up to a NULL; execle's environment
 * follows it. */
static size_t count_args(const char *first, va_list ap) {
  if (!first) return 0;
  size_t n = 1;
  while (va_arg(ap, char *) != NULL) n++;
  return n;
}

/* Fills args[0..n] (NULL-terminated) and returns what follows the NULL when want_envp. */
static char *const *fill_args(char **args, const char *first, size_t n, bool want_envp,
                              va_list ap) {
  args[0] = (char *)first;
  for (size_t i = 1; i < n; i++) args[i] = va_arg(ap, char *);
  if (first) (void)va_arg(ap, char *); /* the terminating NULL */
  args[n] = NULL;
  return want_envp ? va_arg(ap, char *const *) : NULL;
}

EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const size_t n = count_args(arg, ap);
  va_end(ap);
  char *args[n + 1];
  va_start(ap, arg);
  fill_args(args, arg, n, false, ap);
  va_end(ap);
  return execve(path, args, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const size_t n = count_args(arg, ap);
  va_end(ap);
  char *args[n + 1];
  va_start(ap, arg);
  fill_args(args, arg, n, false, ap);
  va_end(ap);
  return execvpe(file, args, environ);
}

EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const size_t n = count_args(arg, ap);
  va_end(ap);
  char *args[n + 1];
  va_start(ap, arg);
  char *const *const envp = fill_args(args, arg, n, true, ap);
  va_end(ap);
  return execve(path, args, envp);
}

/* dlclose: flush first, so that the writer thread resolves the codes seen so far while
 * their library is still mapped (the symbolizer keeps them after that). dlopen is not
 * interposed: glibc's dlopen looks at its caller to pick the search path. */
EXPORT int dlclose(void *handle) {
  need_real();
  before_exec();
  if (!real.dlclose) return -1;
  return real.dlclose(handle);
}

/* ---- configuration from the environment ------------------------------------------------- */

const char *cts__preload_env(const char *name) {
  const size_t n = strlen(name);
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

static void refuse(const char *what, const char *value, const char *why) {
  char line[1024];
  snprintf(line, sizeof line, MESSAGE_PREFIX "%s=\"%.200s\": %s; this program is not traced\n",
           what, value, why);
  message(line);
}

static void log_line(void *user_data, const char *line) {
  (void)user_data;
  char out[1024];
  snprintf(out, sizeof out, MESSAGE_PREFIX "%s\n", line);
  message(out);
}

static bool copy_setting(char *dst, const char *src) {
  const size_t n = strlen(src);
  if (n >= SETTING_SIZE) return false;
  memcpy(dst, src, n + 1);
  return true;
}

/* Why cts_tracer_start() failed, in words. */
static void start_error(char *why, size_t size, int e, const char *what) {
  snprintf(why, size, "%s: %s", what,
           e == -EAGAIN || e == -EACCES ? "another process is tracing into it"
           : e > -1000                  ? strerror(-e)
                                        : cts_strerror(e));
}

static void start_from_environment(void) {
  const char *const out = cts__preload_env("MEMTRACE");
  if (!out || !out[0]) return;
  /* Children are not traced (nor told about a bad setting again). The strings stay valid:
   * unsetenv only drops the pointers. */
  unsetenv("MEMTRACE");
  const char *const exec_base = cts__preload_env("CTFSCOPE_EXEC_BASE");
  const char *const exec_index = cts__preload_env("CTFSCOPE_EXEC_INDEX");
  unsetenv("CTFSCOPE_EXEC_BASE");
  unsetenv("CTFSCOPE_EXEC_INDEX");
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  const char *const rate = cts__preload_env("MEMTRACE_RATE");
  if (rate && rate[0]) {
    char *end;
    errno = 0;
    const double r = strtod(rate, &end);
    if (errno || *end || !(r > 0.0 && r <= 1.0)) {
      refuse("MEMTRACE_RATE", rate, "not a number in (0, 1]");
      return;
    }
    cfg.sample_rate = r;
  }
  cfg.context = cts__preload_env("MEMTRACE_CONTEXT");
  const char *const unwind = cts__preload_env("CTFSCOPE_UNWIND");
  if (unwind && unwind[0]) {
    if (strcmp(unwind, "fp") == 0)
      cfg.unwind = CTS_TRACER_UNWIND_FRAME_POINTER;
    else if (strcmp(unwind, "libunwind") == 0)
      cfg.unwind = CTS_TRACER_UNWIND_LIBUNWIND;
    else if (strcmp(unwind, "none") == 0)
      cfg.unwind = CTS_TRACER_UNWIND_NONE;
    else {
      refuse("CTFSCOPE_UNWIND", unwind, "expected fp, libunwind or none");
      return;
    }
  }
  const char *const drop = cts__preload_env("MEMTRACE_DROP");
  if (drop && drop[0]) {
    if (strcmp(drop, "1") != 0 && strcmp(drop, "0") != 0) {
      refuse("MEMTRACE_DROP", drop, "expected 1 (drop mode) or 0 (lossless)");
      return;
    }
    cfg.drop_when_full = drop[0] == '1';
  }
  bool fits = true;
  for (size_t i = 0; i < 4; i++) {
    const char *const v = cts__preload_env(kept_names[i]);
    fits = copy_setting(exec_state.kept[i], v ? v : "") && fits;
  }

  cts_tracer_sink_t sink;
  const bool connect = strncmp(out, "tcp://", 6) == 0, listen = strncmp(out, "listen://", 9) == 0;
  char why[512];
  if (connect || listen) {
    /* Checked here first for the message: the tracer only returns -EINVAL. */
    const char *const address = out + (connect ? 6 : 9);
    cts_net_addr_t addr;
    char err[CTS_NET_ERR_LEN];
    const int pe = connect ? cts_net_parse_connect(address, &addr, err, sizeof err)
                           : cts_net_parse_listen(address, &addr, err, sizeof err);
    if (pe) {
      refuse("MEMTRACE", out, err);
      return;
    }
    cts_tracer_sink_init(&sink, connect ? CTS_TRACER_SINK_TCP_CONNECT : CTS_TRACER_SINK_TCP_LISTEN);
    sink.address = address;
    sink.log = log_line;
    exec_state.file = false;
  } else {
    cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
    sink.path = out;
    exec_state.file = true;
  }
  /* The exec sequence: where it started and which image this is. */
  unsigned index = 0;
  if (exec_index && exec_base) {
    char *end;
    const unsigned long v = strtoul(exec_index, &end, 10);
    if (*end == '\0' && v < 1000000) index = (unsigned)v;
  }
  exec_state.index = index;
  fits = copy_setting(exec_state.memtrace, out) && fits;
  fits = copy_setting(exec_state.base, exec_state.file && index ? exec_base : out) && fits;
  exec_state.usable = fits;

  const int e = cts_tracer_start(&cfg, &sink);
  if (e) {
    start_error(why, sizeof why, e,
                connect  ? "cannot connect"
                : listen ? "cannot listen"
                         : "cannot trace into this file");
    refuse("MEMTRACE", out, why);
    return;
  }
  if (listen) {
    char line[256];
    snprintf(line, sizeof line, "serving the trace on port %u (MEMTRACE=%.160s)",
             (unsigned)cts_tracer_listen_port(), out);
    log_line(NULL, line);
  }
  traced_pid = getpid();
}

__attribute__((constructor)) static void preload_init(void) {
  need_real();
  cts__guard_enter(); /* whatever libc allocates for us here is not the program's */
  start_from_environment();
  cts__guard_leave();
}

__attribute__((destructor)) static void preload_fini(void) {
  if (cts_tracer_is_active()) cts_tracer_stop();
}
