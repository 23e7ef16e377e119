/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so: traces an unmodified program's heap allocations into a memtrace
 * trace. LD_PRELOAD it (or use `ctfscope record`), with the memtrace environment:
 *
 *   MEMTRACE=FILE         trace into FILE (unset or empty: the library stays inert)
 *   MEMTRACE_RATE=R       sampling rate per 8-byte word, 0 < R <= 1 (default 1e-6)
 *   MEMTRACE_CONTEXT=TXT  free text stored in the trace
 *   CTFSCOPE_UNWIND=M     backtraces: fp, libunwind or none (default: libunwind)
 *
 * A bad setting prints one line on stderr and leaves the program untraced and otherwise
 * untouched. MEMTRACE is removed from the environment once read (memtrace does the same),
 * so child processes and exec'd programs are not traced into the same file; a forked
 * child is not traced (tracer.h). The exec family flushes the trace before replacing the
 * process image, and dlclose flushes before unloading a library.
 *
 * The hooks never allocate themselves. Real functions are found lazily with
 * dlsym(RTLD_NEXT); dlsym's own calloc during that lookup is served from a static arena
 * that free/realloc recognise. Sampled blocks are ordinary blocks of the real allocator
 * (the tracer keeps a side table), so nothing here translates pointers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tracer/tracer_internal.h"

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
  int (*execv)(const char *, char *const[]);
  int (*execvp)(const char *, char *const[]);
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
  RESOLVE(execv, "execv");
  RESOLVE(execvp, "execvp");
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

/* ---- exec: flush first, so the trace holds everything up to the new image --------------- */

static pid_t traced_pid; /* the process tracing started in (not a vfork child sharing it) */

/* Before exec and dlclose. */
static void before_exec(void) {
  /* Not from the tracer's own threads (the writer thread would wait for itself). */
  if (!cts__guarded() && getpid() == traced_pid && cts_tracer_is_active()) cts_tracer_flush();
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  need_real();
  before_exec();
  if (!real.execve) return errno = ENOSYS, -1;
  return real.execve(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[]) {
  need_real();
  before_exec();
  if (!real.execv) return errno = ENOSYS, -1;
  return real.execv(path, argv);
}

EXPORT int execvp(const char *file, char *const argv[]) {
  need_real();
  before_exec();
  if (!real.execvp) return errno = ENOSYS, -1;
  return real.execvp(file, argv);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  need_real();
  before_exec();
  if (!real.execvpe) return errno = ENOSYS, -1;
  return real.execvpe(file, argv, envp);
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

static const char *env_value(const char *name) {
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

static void start_from_environment(void) {
  const char *const out = env_value("MEMTRACE");
  if (!out || !out[0]) return;
  /* Children are not traced into the same file (nor told about a bad setting again). The
   * string stays valid: unsetenv only drops the pointer. */
  unsetenv("MEMTRACE");
  if (strncmp(out, "tcp://", 6) == 0 || strncmp(out, "listen://", 9) == 0) {
    refuse("MEMTRACE", out, "TCP output (tcp://, listen://) is not supported yet");
    return;
  }
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  const char *const rate = env_value("MEMTRACE_RATE");
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
  cfg.context = env_value("MEMTRACE_CONTEXT");
  const char *const unwind = env_value("CTFSCOPE_UNWIND");
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
  cts_tracer_sink_t sink;
  cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
  sink.path = out;
  const int e = cts_tracer_start(&cfg, &sink);
  if (e) {
    char why[256];
    snprintf(why, sizeof why, "cannot trace into this file: %s",
             e == -EAGAIN || e == -EACCES ? "another process is tracing into it"
             : e > -1000                  ? strerror(-e)
                                          : cts_strerror(e));
    refuse("MEMTRACE", out, why);
    return;
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
