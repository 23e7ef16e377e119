/* SPDX-License-Identifier: MIT */
/* Shared by the files of the preload library:
 *   preload_hooks.c    the malloc family's hooks, the real functions, sampled blocks' headers
 *   preload_exec.c     the exec family, dlopen and dlclose: flush, then trace the next image
 *   preload_env.c      the settings in the environment, the constructor and destructor
 *   preload_pthread.c  task tracing of the program's threads
 *   preload_fds.c      close and the calls like it: the lazy writer made before they act
 *   preload_syscall.c  libc's syscall(): the lazy writer made before a seccomp filter, raw
 *                      execs to the exec hooks
 * Everything here is internal to the library (hidden); nothing here may allocate (STYLE
 * rule 36). */
#ifndef CTS_PRELOAD_INTERNAL_H
#define CTS_PRELOAD_INTERNAL_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../tracer/raw_system_call.h"
#include "../tracer/tracer_internal.h"

#define CTS__PRELOAD_HIDDEN __attribute__((visibility("hidden")))
/* The library's exports (preload.map lists them). */
#define CTS__PRELOAD_EXPORT __attribute__((visibility("default")))
/* What the library's messages on stderr start with. */
#define CTS__PRELOAD_PREFIX "ctfscope-preload: "

/* ---- the real functions (preload_hooks.c) ------------------------------------------------ */

/* The functions the program's calls would reach without this library, found at the first
 * call (cts__need_real). `malloc` is set last: once it is, all are. */
typedef struct cts__real_functions {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*memalign)(size_t, size_t);
  size_t (*malloc_usable_size)(void *);
  int (*execve)(const char *, char *const[], char *const[]);
  int (*execvpe)(const char *, char *const[], char *const[]);
} cts__real_functions_t;

/* The real functions a traced image seldom calls, each looked up at its own first call
 * rather than with the others (two dlsym each, paid by every traced image's start):
 * cts__lazy_real(CTS__LAZY_name, &fn, sizeof fn) sets the function pointer fn, to NULL when
 * the process has none. Thread-safe; it may allocate (dlsym), untraced. Not for use inside
 * dlsym (cts__need_real() first). exec functions are not among them: a vfork child calls
 * them, and must not run the dynamic loader's look-up in memory it shares. */
#define CTS__LAZY_FUNCTIONS(X) \
  X(posix_memalign)            \
  X(aligned_alloc)             \
  X(valloc)                    \
  X(pvalloc) X(dlopen) X(dlclose) X(dup3) X(close_range) X(closefrom) X(posix_spawn) X(posix_spawnp)
#define CTS__LAZY_INDEX(name) CTS__LAZY_##name,
enum { CTS__LAZY_FUNCTIONS(CTS__LAZY_INDEX) CTS__LAZY_COUNT };
void cts__lazy_real(unsigned which, void *fn, size_t fn_size) CTS__PRELOAD_HIDDEN;

extern cts__real_functions_t cts__real CTS__PRELOAD_HIDDEN;
extern CTS__TLS int cts__in_dlsym CTS__PRELOAD_HIDDEN; /* this thread is inside dlsym */
/* The program's free is another library's: nothing may be sampled. */
extern bool cts__free_shadowed CTS__PRELOAD_HIDDEN;
/* Another copy of this library comes first in LD_PRELOAD: it traces, this one does not
 * start (preload_hooks.c, another_copy_of_us). */
extern bool cts__behind_another_copy CTS__PRELOAD_HIDDEN;

CTS_NOINLINE void cts__resolve_real_functions(void) CTS__PRELOAD_HIDDEN;

/* True when the caller must use the static arena (this thread is inside dlsym); finds the
 * real functions at the first call. */
static inline int cts__need_real(void) {
  if (CTS_LIKELY(cts__real.malloc != NULL)) return 0;
  if (cts__in_dlsym) return 1;
  cts__resolve_real_functions();
  return 0;
}

/* Fork handlers for the far-block table's lock (registered once tracing starts). */
void cts__far_lock_before_fork(void) CTS__PRELOAD_HIDDEN;
void cts__far_unlock_after_fork(void) CTS__PRELOAD_HIDDEN;

/* ---- the exec family (preload_exec.c) -------------------------------------------------- */

/* The process tracing started in (not a vfork child sharing it); 0 before. */
extern pid_t cts__traced_pid CTS__PRELOAD_HIDDEN;

#define CTS__SETTING_SIZE 4096
/* Settings handed on as they were at start-up. */
#define CTS__KEPT_COUNT 8
extern const char *const cts__kept_names[CTS__KEPT_COUNT] CTS__PRELOAD_HIDDEN;

/* The settings this image was started with, handed on to an image it execs. Written by the
 * constructor (preload_env.c), read by the exec family. */
typedef struct cts__exec_state {
  bool usable;                       /* the settings below fit: an exec can continue the trace */
  bool file;                         /* MEMTRACE names a file (else a tcp:// or listen:// URL) */
  const char *memtrace;              /* this image's MEMTRACE */
  const char *base;                  /* the first image's file: the names' base */
  unsigned index;                    /* this image's number (0 = the first) */
  const char *kept[CTS__KEPT_COUNT]; /* values of cts__kept_names[i], "" if unset */
  /* The strings above (NULL until set), copied one after the other: the image touches only
   * the pages they fill, one or two (an array of its own for each cost nine page faults
   * per traced image). Each is shorter than CTS__SETTING_SIZE. */
  size_t used;
  char strings[(2 + CTS__KEPT_COUNT) * CTS__SETTING_SIZE];
} cts__exec_state_t;

extern cts__exec_state_t cts__exec_state CTS__PRELOAD_HIDDEN;

/* `ctfscope record`'s notes pipe (CTFSCOPE_RECORD_NOTES), if this image has one. */
void cts__notes_from_environment(void) CTS__PRELOAD_HIDDEN;
/* Tells record that this image's trace lost its tail; e: the tracer's error. Once. */
void cts__note_lost_tail(int e) CTS__PRELOAD_HIDDEN;

/* A program's raw execve or execveat system call, from the syscall() hook: through the
 * exec hooks, as execve() and execveat() (-1 and errno on an error). */
long cts__exec_system_call(long number, long a1, long a2, long a3, long a4,
                           long a5) CTS__PRELOAD_HIDDEN;

/* ---- the environment (preload_env.c) ---------------------------------------------------- */

/* The value of environment variable `name`, or NULL. Reads `environ` directly: getenv may
 * not be called this early, and nothing here may allocate (STYLE rule 36). */
const char *cts__preload_env(const char *name);
/* Whether environ entry `entry` ("NAME=VALUE") is one of the library's settings. */
bool cts__preload_is_setting(const char *entry) CTS__PRELOAD_HIDDEN;
/* The library's one log helper: "ctfscope-preload: LINE\n" on stderr, from a fixed buffer
 * (a line is cut at 1 KiB). Any thread; allocates nothing. */
void cts__preload_log(const char *fmt, ...)
    __attribute__((format(printf, 1, 2))) CTS__PRELOAD_HIDDEN;

/* Starts task tracing if CTFSCOPE_TASKS asks for it (preload_pthread.c); called once, from
 * the library's constructor. Returns whether CTFSCOPE_TASKS was set (even if refused). */
bool cts__preload_pthread_init(void);

/* A spin lock for the preload's rare table updates (it may not allocate, nor take a lock
 * the program could hold). */
static inline void cts__spin_lock(int *lock) {
  while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
    while (__atomic_load_n(lock, __ATOMIC_RELAXED)) sched_yield();
}

static inline void cts__spin_unlock(int *lock) {
  __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

#endif /* CTS_PRELOAD_INTERNAL_H */
