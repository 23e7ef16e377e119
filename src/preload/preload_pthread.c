/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so, task tracing: an unmodified program's POSIX threads become tasks
 * of a mirage-profile trace (include/ctfscope/tasks.h; docs/formats/mprof.md §7), next to
 * (or instead of) the allocation trace of preload.c. Environment, read once at start-up:
 *
 *   CTFSCOPE_TASKS=FILE          trace into FILE (unset or empty: these hooks stay inert)
 *   CTFSCOPE_TASKS_SIZE=BYTES    ring size (default 16 MiB; K, M, G suffixes)
 *   CTFSCOPE_TASKS_PACKETS=N     packets in the ring (default 256, at most 4096): threads
 *                                beyond as many as there are packets share one packet
 *                                (task_hooks.c); events that still find no room are
 *                                counted in the trace (ctfscope_lost)
 *   CTFSCOPE_TASKS_STREAM=1      write finished packets to FILE as a stream, keeping the
 *                                whole run, instead of an mmap'd ring that keeps the last
 *                                SIZE bytes and survives a crash
 *   CTFSCOPE_TASKS_CLOCK=M       tsc (the default when the CPU's counter is usable) or
 *                                monotonic (clock_gettime)
 *
 * What is recorded (ids: the main thread is task 0; each thread created gets a new id):
 *   pthread_create       creates(parent -> child, Task), label(child, start routine's name
 *                        from the dynamic symbols or the module's .symtab, else
 *                        module+offset); the child writes switch(child) when it starts
 *   pthread_setname_np   label(thread, name)
 *   start routine returns, pthread_exit: fulfills(thread); cancellation: fails(thread,
 *                        "cancelled"); the end of the process resolves task 0
 *   pthread_join         read(joiner, joined) once joined
 *   pthread_mutex_lock   only when contended (a trylock fails first): try_read(waiter,
 *                        holder) before blocking, read(waiter, holder) once acquired
 *   condition variables  each becomes a task of type Condition (labelled "cond 0xADDR") the
 *                        first time it is used; signal and broadcast write
 *                        signal_noswitch(cond, sender); a wait writes try_read(waiter, cond)
 *                        and, when woken after a signal, signal(waiter, last sender)
 *
 * Cost: with tracing off, pthread_mutex_lock is a tail call through a pointer to the real
 * one (lock_entry); with it on, an uncontended lock costs a look at the lock word and a call
 * through a function pointer, then a trylock when the lock is taken (the contended path sleeps in
 * the kernel anyway). Nothing here allocates: thread start
 * records come from a static pool, threads and condition variables are found in fixed
 * tables (a full table means that thread or condition is not traced, not an error), and
 * the ring lives in the mapped file. Calls made inside the allocation tracer (its own
 * threads, its locks) are passed through untraced. The settings are removed from the
 * environment once read (preload.c, cts__preload_forget_settings); a forked child stops
 * tracing, and exec'd images are not traced. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/errors.h>
#include <ctfscope/tasks.h>

#include "../common/held_fd.h"
#include "../common/setting_text.h"
#include "../os/elf_symbol.h"
#include "../os/mprof_ring.h"
#include "../os/tsc_clock.h"
#include "../tracer/tracer_internal.h"
#include "preload_internal.h"

#define EXPORT         __attribute__((visibility("default")))
#define MESSAGE_PREFIX "ctfscope-preload: "

extern char **environ;

/* ---- the real functions ----------------------------------------------------------------- */

static struct {
  int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  int (*join)(pthread_t, void **);
  void (*exit)(void *) __attribute__((noreturn));
  int (*detach)(pthread_t);
  int (*setname)(pthread_t, const char *);
  int (*mutex_lock)(pthread_mutex_t *);
  int (*mutex_trylock)(pthread_mutex_t *);
  int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
  int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
  int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
  int (*cond_signal)(pthread_cond_t *);
  int (*cond_broadcast)(pthread_cond_t *);
  int (*cond_destroy)(pthread_cond_t *);
  unsigned looked; /* the REAL_ bits of the fields above looked up */
} real;

/* Each hook looks its real function up at its first call, not all thirteen at the first
 * lock: a traced image takes a lock (the tracer's own) but most never call the rest, and
 * each look-up is a dlsym (~1 000 instructions, two for the versioned ones): 14.9 k
 * instructions in every image's start-up (callgrind, a traced /bin/true), 2.2 k now. */
enum {
  REAL_CREATE = 1u << 0,
  REAL_JOIN = 1u << 1,
  REAL_EXIT = 1u << 2,
  REAL_DETACH = 1u << 3,
  REAL_SETNAME = 1u << 4,
  REAL_LOCK = 1u << 5, /* mutex_lock and mutex_trylock */
  REAL_COND_WAIT = 1u << 6,
  REAL_COND_TIMEDWAIT = 1u << 7,
  REAL_COND_CLOCKWAIT = 1u << 8,
  REAL_COND_SIGNAL = 1u << 9,
  REAL_COND_BROADCAST = 1u << 10,
  REAL_COND_DESTROY = 1u << 11,
};

static void message(const char *text) {
  if (write(STDERR_FILENO, text, strlen(text)) < 0) { /* nothing better to do */
  }
}

/* The condition-variable functions have two versions in glibc (the 2.3.2 ones and the
 * old LinuxThreads-compatible ones): ask for the current one by name, as a program linked
 * today does, and fall back to the default for other C libraries. */
static void *lookup(const char *name, bool versioned_cond) {
  void *sym = NULL;
#if defined(__GLIBC__) && defined(__x86_64__)
  if (versioned_cond) sym = dlvsym(RTLD_NEXT, name, "GLIBC_2.3.2");
#else
  (void)versioned_cond;
#endif
  return sym ? sym : dlsym(RTLD_NEXT, name);
}

/* What each bit looks up, and whether the C library must have it (the others: the hook
 * says ENOSYS, or does nothing). */
static const struct {
  unsigned bit;
  const char *name;
  size_t offset;
  bool versioned, required;
} real_names[] = {
    {REAL_CREATE, "pthread_create", offsetof(__typeof__(real), create), false, true},
    {REAL_JOIN, "pthread_join", offsetof(__typeof__(real), join), false, true},
    {REAL_EXIT, "pthread_exit", offsetof(__typeof__(real), exit), false, true},
    {REAL_DETACH, "pthread_detach", offsetof(__typeof__(real), detach), false, false},
    {REAL_SETNAME, "pthread_setname_np", offsetof(__typeof__(real), setname), false, false},
    {REAL_LOCK, "pthread_mutex_lock", offsetof(__typeof__(real), mutex_lock), false, true},
    {REAL_LOCK, "pthread_mutex_trylock", offsetof(__typeof__(real), mutex_trylock), false, true},
    {REAL_COND_WAIT, "pthread_cond_wait", offsetof(__typeof__(real), cond_wait), true, true},
    {REAL_COND_TIMEDWAIT, "pthread_cond_timedwait", offsetof(__typeof__(real), cond_timedwait),
     true, true},
    {REAL_COND_CLOCKWAIT, "pthread_cond_clockwait", offsetof(__typeof__(real), cond_clockwait),
     false, false},
    {REAL_COND_SIGNAL, "pthread_cond_signal", offsetof(__typeof__(real), cond_signal), true, true},
    {REAL_COND_BROADCAST, "pthread_cond_broadcast", offsetof(__typeof__(real), cond_broadcast),
     true, true},
    {REAL_COND_DESTROY, "pthread_cond_destroy", offsetof(__typeof__(real), cond_destroy), true,
     false},
};

/* What pthread_mutex_lock jumps to: it is the hook programs call most (sqlite3 takes a
 * mutex around each statement step and most allocations), so with task tracing off it
 * costs one load and a tail call to the real function, nothing that tests a flag. Before
 * the real lock is resolved it points at lock_resolving; it then points at the real lock,
 * or at lock_traced while tasks are traced. */
static int lock_resolving(pthread_mutex_t *m);
static int lock_traced(pthread_mutex_t *m);
static int (*lock_entry)(pthread_mutex_t *) = lock_resolving;

static int tasks_on; /* tracing started in this process (cleared at exit and in a fork child) */

static void lock_entry_sync(void);

/* Looks up the functions of `bits`. Two threads may both look one up: they find the same
 * address. */
static CTS_NOINLINE void resolve_real(unsigned bits) {
  cts__guard_enter(); /* dlsym may allocate: that is not the program's */
  for (size_t i = 0; i < sizeof real_names / sizeof real_names[0]; i++) {
    if (!(real_names[i].bit & bits)) continue;
    void *const sym = lookup(real_names[i].name, real_names[i].versioned);
    if (!sym && real_names[i].required) {
      message(MESSAGE_PREFIX "cannot find the real pthread functions; aborting\n");
      abort();
    }
    /* Read only once its bit is seen set (acquire): the fetch_or below publishes it. */
    memcpy((char *)&real + real_names[i].offset, &sym, sizeof sym);
  }
  cts__guard_leave();
  __atomic_fetch_or(&real.looked, bits, __ATOMIC_RELEASE);
  if (bits & REAL_LOCK) lock_entry_sync();
}

/* The real functions of `bits`, looked up if they are not yet. */
static inline void need_real(unsigned bits) {
  if (CTS_UNLIKELY((__atomic_load_n(&real.looked, __ATOMIC_ACQUIRE) & bits) != bits))
    resolve_real(bits);
}

/* Points lock_entry where tasks_on says, once the real lock is known; called after each
 * change of tasks_on. */
static void lock_entry_sync(void) {
  if (!(__atomic_load_n(&real.looked, __ATOMIC_ACQUIRE) & REAL_LOCK)) return;
  const bool traced = __atomic_load_n(&tasks_on, __ATOMIC_ACQUIRE);
  __atomic_store_n(&lock_entry, traced ? lock_traced : real.mutex_lock, __ATOMIC_RELEASE);
}

/* ---- state ------------------------------------------------------------------------------ */

/* The calling thread's task. `known` is 0 until the thread is registered: created through
 * pthread_create, or met in a hook for the first time (a thread started some other way). */
typedef struct thread_task {
  int64_t id;
  bool known;
  bool ended; /* its fulfills/fails has been written */
} thread_task_t;
static CTS__TLS thread_task_t self;

/* Whether a hook should record: tracing on, and not called from inside the allocation
 * tracer (its writer thread, or its locks taken in the program's threads). */
static inline bool tracing(void) {
  return __atomic_load_n(&tasks_on, __ATOMIC_RELAXED) && !cts__guarded();
}

static pid_t current_tid(void) {
  return (pid_t)syscall(SYS_gettid);
}

/* Task of each kernel thread id, + 1 (0: unknown), to name a mutex's holder from the
 * owner id glibc keeps in the mutex. Thread ids are below 2^22 on Linux (PID_MAX_LIMIT);
 * the table is reserved address space, and only pages of ids in use are ever touched. */
#define TID_LIMIT (1u << 22)
static int64_t *task_of_tid;

static void set_tid_task(pid_t tid, int64_t task) {
  if (task_of_tid && tid > 0 && (uint32_t)tid < TID_LIMIT)
    __atomic_store_n(&task_of_tid[tid], task + 1, __ATOMIC_RELAXED);
}

static int64_t tid_task(pid_t tid) {
  if (!task_of_tid || tid <= 0 || (uint32_t)tid >= TID_LIMIT) return CTS_TASK_NONE;
  const int64_t v = __atomic_load_n(&task_of_tid[tid], __ATOMIC_RELAXED);
  return v ? v - 1 : CTS_TASK_NONE;
}

/* ---- small formatting, without stdio ---------------------------------------------------- */

typedef struct text {
  char buf[160];
  size_t len;
} text_t;

static void put_str(text_t *t, const char *s) {
  while (*s && t->len + 1 < sizeof t->buf) t->buf[t->len++] = *s++;
  t->buf[t->len] = '\0';
}

static void put_hex(text_t *t, uint64_t v) {
  char digits[16];
  int n = 0;
  do digits[n++] = "0123456789abcdef"[v & 15];
  while ((v >>= 4) != 0);
  put_str(t, "0x");
  while (n > 0 && t->len + 1 < sizeof t->buf) t->buf[t->len++] = digits[--n];
  t->buf[t->len] = '\0';
}

static void put_dec(text_t *t, uint64_t v) {
  char digits[20];
  int n = 0;
  do digits[n++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  while (n > 0 && t->len + 1 < sizeof t->buf) t->buf[t->len++] = digits[--n];
  t->buf[t->len] = '\0';
}

/* ---- threads ---------------------------------------------------------------------------- */

/* A thread met for the first time in a hook: it becomes a task now. */
static CTS_NOINLINE int64_t register_unknown_thread(void) {
  const int64_t id = cts_task_new_id();
  const pid_t tid = current_tid();
  self.id = id;
  self.known = true;
  set_tid_task(tid, id);
  cts_task_created(id, CTS_TASK_TASK); /* from -1: this thread's writer runs nothing yet */
  text_t label = {.len = 0};
  put_str(&label, "thread ");
  put_dec(&label, (uint64_t)tid);
  cts_task_label(id, label.buf);
  cts_task_switch(id);
  return id;
}

static inline int64_t my_task(void) {
  return CTS_LIKELY(self.known) ? self.id : register_unknown_thread();
}

/* pthread_t -> task, for join, detach and setname: open addressing under a spin lock
 * (creating and joining threads is rare next to the cost of a thread). Joinable threads
 * are entered by their creator and removed when joined or detached; a pthread_t is not
 * reused before that, so an entry always names the live thread. */
#define THREAD_SLOTS 4096u
static CTS__COLD_BSS struct {
  pthread_t key;
  int64_t task;
  bool used;
} threads[THREAD_SLOTS];
static uint32_t threads_used; /* entries in use; at most 3/4 of the slots */
static int threads_lock;

static uint32_t hash_word(uint64_t v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  return (uint32_t)v;
}

static uint32_t thread_slot(pthread_t th) {
  uint64_t key = 0;
  memcpy(&key, &th, sizeof th < sizeof key ? sizeof th : sizeof key);
  return hash_word(key) & (THREAD_SLOTS - 1);
}

/* Index of th's entry or of the empty slot where it would go; lock held. */
static uint32_t thread_find(pthread_t th) {
  uint32_t i = thread_slot(th);
  for (uint32_t n = 0; n < THREAD_SLOTS && threads[i].used; n++) {
    if (pthread_equal(threads[i].key, th)) return i;
    i = (i + 1) & (THREAD_SLOTS - 1);
  }
  return i;
}

static void thread_insert(pthread_t th, int64_t task) {
  cts__spin_lock(&threads_lock);
  const uint32_t i = thread_find(th);
  if (threads[i].used) {
    threads[i].task = task;
  } else if (threads_used < THREAD_SLOTS * 3 / 4) { /* full enough: this one is not tracked */
    threads[i].key = th;
    threads[i].task = task;
    threads[i].used = true;
    threads_used++;
  }
  cts__spin_unlock(&threads_lock);
}

/* The task of th, or -1; with remove, the entry goes (backward-shift deletion, so that
 * probe sequences stay unbroken without tombstones). */
static int64_t thread_lookup(pthread_t th, bool remove) {
  cts__spin_lock(&threads_lock);
  uint32_t i = thread_find(th);
  int64_t task = CTS_TASK_NONE;
  if (threads[i].used) {
    task = threads[i].task;
    if (remove) {
      threads[i].used = false;
      threads_used--;
      for (uint32_t j = (i + 1) & (THREAD_SLOTS - 1); threads[j].used;
           j = (j + 1) & (THREAD_SLOTS - 1)) {
        const uint32_t home = thread_slot(threads[j].key);
        /* j's entry may move to the hole at i unless its home lies cyclically in (i, j] */
        const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        threads[i] = threads[j];
        threads[j].used = false;
        i = j;
      }
    }
  }
  cts__spin_unlock(&threads_lock);
  return task;
}

/* What a new thread needs from its creator; a static pool, as the hook may not allocate. */
#define START_RECORDS 1024u
typedef struct start_record {
  void *(*fn)(void *);
  void *arg;
  int64_t task;
  int used;
} start_record_t;
static CTS__COLD_BSS start_record_t start_records[START_RECORDS];

static start_record_t *take_start_record(void) {
  static uint32_t hint;
  const uint32_t first = __atomic_fetch_add(&hint, 1, __ATOMIC_RELAXED);
  for (uint32_t n = 0; n < START_RECORDS; n++) {
    start_record_t *r = &start_records[(first + n) % START_RECORDS];
    int expected = 0;
    if (__atomic_compare_exchange_n(&r->used, &expected, 1, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
      return r;
  }
  return NULL;
}

static void give_start_record(start_record_t *r) {
  __atomic_store_n(&r->used, 0, __ATOMIC_RELEASE);
}

/* The calling thread's task ended: fulfills (or fails), and its packet goes back to the
 * ring so that an exited thread holds none. */
static void thread_ends(const char *failure) {
  if (!self.known || self.ended) return;
  self.ended = true;
  if (failure)
    cts_task_failed(self.id, failure);
  else
    cts_task_resolved(self.id);
  cts_task_thread_exit();
}

/* Runs when a traced thread is cancelled or calls pthread_exit (which ended it already). */
static void on_unwind(void *unused) {
  (void)unused;
  if (__atomic_load_n(&tasks_on, __ATOMIC_RELAXED)) thread_ends("cancelled");
}

/* In a section of its own, so that its code's bounds are known (__start_/__stop_, set by the
 * linker): its return address is cut from the program's backtraces (cut_thread_start_frames). */
__attribute__((section("cts_thread_start"), noinline)) static void *thread_start(void *arg) {
  start_record_t *const r = arg;
  void *(*const fn)(void *) = r->fn;
  void *const fn_arg = r->arg;
  self.id = r->task;
  self.known = true;
  self.ended = false;
  give_start_record(r);
  set_tid_task(current_tid(), self.id);
  cts_task_switch(self.id);
  void *result;
  pthread_cleanup_push(on_unwind, NULL);
  result = fn(fn_arg);
  pthread_cleanup_pop(0);
  if (__atomic_load_n(&tasks_on, __ATOMIC_RELAXED)) thread_ends(NULL);
  return result;
}

/* Start routines already named from a symbol table: reading the file again for each thread
 * a program starts from the same routine would slow pthread_create (a scan of the table).
 * Direct mapped by address; a slot is claimed by one thread (state 1) and published
 * (state 2) once its name is written, so readers never see half a name. Collisions are
 * only looked up again. */
#define NAME_CACHE_SLOTS 64u
#define NAME_MAX_LEN     128u
static CTS__COLD_BSS struct {
  int state; /* 0 empty, 1 being written, 2 ready */
  uintptr_t addr;
  char name[NAME_MAX_LEN];
} name_cache[NAME_CACHE_SLOTS];

/* strlcpy: a name into a buffer of NAME_MAX_LEN bytes. */
static void copy_name(char *dst, const char *src) {
  size_t i = 0;
  for (; i + 1 < NAME_MAX_LEN && src[i]; i++) dst[i] = src[i];
  dst[i] = '\0';
}

/* The name of the function at @p addr in @p map's module from its ELF symbol tables
 * (.symtab holds the static functions dladdr cannot see), cached. False if none. */
static bool symtab_name(void *addr, const struct link_map *map, char out[NAME_MAX_LEN]) {
  const uintptr_t a = (uintptr_t)addr;
  const unsigned slot = (unsigned)((a >> 4) * 0x9E3779B97F4A7C15ull >> 58) % NAME_CACHE_SLOTS;
  if (__atomic_load_n(&name_cache[slot].state, __ATOMIC_ACQUIRE) == 2 &&
      name_cache[slot].addr == a) {
    copy_name(out, name_cache[slot].name);
    return true;
  }
  /* The main program's link_map has no name: its file is /proc/self/exe (argv[0] may be
   * relative to a directory the program has left). */
  const char *const path = map->l_name && map->l_name[0] ? map->l_name : "/proc/self/exe";
  if (!cts_os_elf_function_name(path, (uint64_t)(a - map->l_addr), out, NAME_MAX_LEN)) return false;
  int empty = 0;
  if (__atomic_compare_exchange_n(&name_cache[slot].state, &empty, 1, false, __ATOMIC_ACQUIRE,
                                  __ATOMIC_RELAXED)) {
    name_cache[slot].addr = a;
    copy_name(name_cache[slot].name, out);
    __atomic_store_n(&name_cache[slot].state, 2, __ATOMIC_RELEASE);
  }
  return true;
}

/* The start routine's name: its dynamic symbol (dladdr), else its symbol in the module's
 * .symtab (static functions, executables not linked with -rdynamic), else
 * "module+0xoffset". */
static void routine_label(text_t *t, void *(*fn)(void *)) {
  void *addr;
  memcpy(&addr, &fn, sizeof addr);
  Dl_info info;
  struct link_map *map = NULL;
  if (dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) && info.dli_sname && info.dli_sname[0]) {
    put_str(t, info.dli_sname);
    return;
  }
  char name[NAME_MAX_LEN];
  if (map && symtab_name(addr, map, name)) {
    put_str(t, name);
    return;
  }
  const char *module = info.dli_fname && info.dli_fname[0] ? info.dli_fname : "";
  const char *slash = strrchr(module, '/');
  if (module[0] == '\0' || !info.dli_fbase) {
    put_str(t, "thread ");
    put_hex(t, (uint64_t)(uintptr_t)addr);
    return;
  }
  put_str(t, slash ? slash + 1 : module);
  put_str(t, "+");
  put_hex(t, (uint64_t)((uintptr_t)addr - (uintptr_t)info.dli_fbase));
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg) {
  need_real(REAL_CREATE);
  cts__tracer_before_thread();
  if (!tracing()) return real.create(th, attr, fn, arg);
  start_record_t *const r = take_start_record();
  if (!r) return real.create(th, attr, fn, arg);
  my_task();
  r->fn = fn;
  r->arg = arg;
  r->task = cts_task_new_id();
  const int64_t child = r->task;
  /* Written before the thread exists, so that its own events come after. */
  cts_task_created(child, CTS_TASK_TASK);
  text_t label = {.len = 0};
  routine_label(&label, fn);
  cts_task_label(child, label.buf);
  const int e = real.create(th, attr, thread_start, r);
  if (e != 0) {
    give_start_record(r);
    cts_task_failed(child, "pthread_create failed");
    return e;
  }
  int detached = PTHREAD_CREATE_JOINABLE;
  if (attr) pthread_attr_getdetachstate(attr, &detached);
  if (detached == PTHREAD_CREATE_JOINABLE) thread_insert(*th, child);
  return 0;
}

EXPORT int pthread_join(pthread_t th, void **result) {
  need_real(REAL_JOIN);
  if (!tracing()) return real.join(th, result);
  const int64_t joined = thread_lookup(th, false);
  const int e = real.join(th, result);
  if (e == 0 && joined != CTS_TASK_NONE) {
    thread_lookup(th, true);
    cts_task_read(my_task(), joined);
  }
  return e;
}

EXPORT int pthread_detach(pthread_t th) {
  need_real(REAL_DETACH);
  const int e = real.detach ? real.detach(th) : ENOSYS;
  if (e == 0 && __atomic_load_n(&tasks_on, __ATOMIC_RELAXED)) thread_lookup(th, true);
  return e;
}

EXPORT void pthread_exit(void *result) {
  need_real(REAL_EXIT);
  if (tracing()) thread_ends(NULL);
  real.exit(result);
}

EXPORT int pthread_setname_np(pthread_t th, const char *name) {
  need_real(REAL_SETNAME);
  const int e = real.setname ? real.setname(th, name) : ENOSYS;
  if (e == 0 && tracing()) {
    const int64_t task = pthread_equal(th, pthread_self()) ? my_task() : thread_lookup(th, false);
    if (task != CTS_TASK_NONE) cts_task_label(task, name);
  }
  return e;
}

/* ---- mutexes ---------------------------------------------------------------------------- */

/* The task holding @p m, from the owner's kernel thread id that glibc records in every
 * mutex it locks; -1 when unknown (another C library, or the holder is just unlocking). */
static int64_t mutex_holder(const pthread_mutex_t *m, pid_t *tid) {
#if defined(__GLIBC__)
  *tid = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
  return tid_task(*tid);
#else
  (void)m;
  *tid = 0;
  return CTS_TASK_NONE;
#endif
}

static CTS_NOINLINE int contended_lock(pthread_mutex_t *m) {
  pid_t holder_tid;
  const int64_t holder = mutex_holder(m, &holder_tid);
  /* An error-checking mutex this thread holds already: the real lock reports EDEADLK. */
  if (holder_tid != 0 && holder_tid == current_tid()) return real.mutex_lock(m);
  const int64_t me = my_task();
  cts_task_try_read(me, holder);
  const int e = real.mutex_lock(m);
  if (e == 0 || e == EOWNERDEAD) cts_task_read(me, holder);
  return e;
}

/* Whether @p m may be held: on glibc a look at the lock word, which the lock itself reads
 * next (a trylock would cost a second atomic instruction on every lock, about 3 ns); a
 * holder that comes between the two makes a contention that is not recorded. */
static inline bool lock_looks_taken(pthread_mutex_t *m) {
#if defined(__GLIBC__)
  return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0;
#else
  (void)m;
  return true;
#endif
}

/* The lock looked taken: a trylock tells (same outcome as the lock for every mutex type: a
 * recursive one held by this thread is taken again, an error-checking one reports EBUSY
 * here and then EDEADLK below). */
static CTS_NOINLINE int lock_maybe_contended(pthread_mutex_t *m) {
  const int e = real.mutex_trylock(m);
  if (e != EBUSY) return e;
  if (cts__guarded()) return real.mutex_lock(m);
  return contended_lock(m);
}

/* While tasks are traced; tracing may stop (exit, a fork child) while a thread is on its
 * way here, hence the second look at tasks_on. */
static int lock_traced(pthread_mutex_t *m) {
  if (__atomic_load_n(&tasks_on, __ATOMIC_RELAXED) && CTS_UNLIKELY(lock_looks_taken(m)))
    return lock_maybe_contended(m);
  return real.mutex_lock(m);
}

/* The first lock, taken before the preload's constructor ran (another library's
 * constructor, or the dynamic loader's own calls): resolves, then goes where it points. */
static int lock_resolving(pthread_mutex_t *m) {
  need_real(REAL_LOCK);
  return __atomic_load_n(&lock_entry, __ATOMIC_ACQUIRE)(m);
}

EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
  return __atomic_load_n(&lock_entry, __ATOMIC_ACQUIRE)(m);
}

/* ---- condition variables ---------------------------------------------------------------- */

/* Condition variable -> its task and its last signaller. Lookups are lock-free; inserts
 * and removals (pthread_cond_destroy) take a spin lock. A removed entry leaves a tombstone
 * that a later insert reuses; probing stops after COND_PROBES slots (that condition is
 * then not traced). */
#define COND_SLOTS  4096u
#define COND_PROBES 64u
#define COND_TOMB   ((uintptr_t)1)
typedef struct cond_entry {
  uintptr_t key; /* the address; 0 empty, COND_TOMB removed */
  int64_t task;
  int64_t signaller;
  uint64_t signals;
} cond_entry_t;
static CTS__COLD_BSS cond_entry_t conds[COND_SLOTS];
static int conds_lock;

static cond_entry_t *cond_lookup(uintptr_t key) {
  uint32_t i = hash_word(key) & (COND_SLOTS - 1);
  for (uint32_t n = 0; n < COND_PROBES; n++, i = (i + 1) & (COND_SLOTS - 1)) {
    const uintptr_t k = __atomic_load_n(&conds[i].key, __ATOMIC_ACQUIRE);
    if (k == key) return &conds[i];
    if (k == 0) return NULL;
  }
  return NULL;
}

static CTS_NOINLINE cond_entry_t *cond_insert(uintptr_t key) {
  cts__spin_lock(&conds_lock);
  cond_entry_t *e = cond_lookup(key);
  const bool created = !e;
  if (!e) {
    uint32_t i = hash_word(key) & (COND_SLOTS - 1);
    for (uint32_t n = 0; n < COND_PROBES; n++, i = (i + 1) & (COND_SLOTS - 1)) {
      const uintptr_t k = __atomic_load_n(&conds[i].key, __ATOMIC_RELAXED);
      if (k != 0 && k != COND_TOMB) continue;
      e = &conds[i];
      e->task = cts_task_new_id();
      __atomic_store_n(&e->signaller, CTS_TASK_NONE, __ATOMIC_RELAXED);
      __atomic_store_n(&e->signals, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&e->key, key, __ATOMIC_RELEASE);
      break;
    }
  }
  cts__spin_unlock(&conds_lock);
  if (e && created) {
    /* Outside the lock: the events are written by whichever thread met it first. */
    static const char prefix[] = "cond ";
    text_t label = {.len = 0};
    put_str(&label, prefix);
    put_hex(&label, key);
    my_task();
    cts_task_created(e->task, CTS_TASK_CONDITION);
    cts_task_label(e->task, label.buf);
  }
  return e;
}

/* The condition's entry, creating it (and its task) on first use; NULL if the table has no
 * room. A second thread racing on the first use may find it before its creates event is
 * written; the trace then names the task slightly before it is created. */
static cond_entry_t *cond_entry(pthread_cond_t *c) {
  const uintptr_t key = (uintptr_t)c;
  cond_entry_t *e = cond_lookup(key);
  return e ? e : cond_insert(key);
}

static void note_signal(pthread_cond_t *c) {
  cond_entry_t *const e = cond_entry(c);
  if (!e) return;
  const int64_t me = my_task();
  __atomic_store_n(&e->signaller, me, __ATOMIC_RELAXED);
  __atomic_add_fetch(&e->signals, 1, __ATOMIC_RELEASE);
  cts_task_signal_noswitch(e->task, me);
}

EXPORT int pthread_cond_signal(pthread_cond_t *c) {
  need_real(REAL_COND_SIGNAL);
  if (tracing()) note_signal(c);
  return real.cond_signal(c);
}

EXPORT int pthread_cond_broadcast(pthread_cond_t *c) {
  need_real(REAL_COND_BROADCAST);
  if (tracing()) note_signal(c);
  return real.cond_broadcast(c);
}

/* Before waiting: the waiter waits for the condition. Returns the signal count seen. */
static uint64_t wait_begins(cond_entry_t *e) {
  const uint64_t seen = __atomic_load_n(&e->signals, __ATOMIC_ACQUIRE);
  cts_task_try_read(my_task(), e->task);
  return seen;
}

/* After waking: signal(waiter, sender) if a signal came since (not for a timeout or a
 * spurious wake-up). */
static void wait_ends(cond_entry_t *e, uint64_t seen) {
  if (__atomic_load_n(&e->signals, __ATOMIC_ACQUIRE) == seen) return;
  cts_task_signal(my_task(), __atomic_load_n(&e->signaller, __ATOMIC_RELAXED));
}

EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
  need_real(REAL_COND_WAIT);
  cond_entry_t *const e = tracing() ? cond_entry(c) : NULL;
  if (!e) return real.cond_wait(c, m);
  const uint64_t seen = wait_begins(e);
  const int r = real.cond_wait(c, m);
  wait_ends(e, seen);
  return r;
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *deadline) {
  need_real(REAL_COND_TIMEDWAIT);
  cond_entry_t *const e = tracing() ? cond_entry(c) : NULL;
  if (!e) return real.cond_timedwait(c, m, deadline);
  const uint64_t seen = wait_begins(e);
  const int r = real.cond_timedwait(c, m, deadline);
  wait_ends(e, seen);
  return r;
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
                                  const struct timespec *deadline) {
  need_real(REAL_COND_CLOCKWAIT);
  if (!real.cond_clockwait) return ENOSYS;
  cond_entry_t *const e = tracing() ? cond_entry(c) : NULL;
  if (!e) return real.cond_clockwait(c, m, clock, deadline);
  const uint64_t seen = wait_begins(e);
  const int r = real.cond_clockwait(c, m, clock, deadline);
  wait_ends(e, seen);
  return r;
}

EXPORT int pthread_cond_destroy(pthread_cond_t *c) {
  need_real(REAL_COND_DESTROY);
  if (__atomic_load_n(&tasks_on, __ATOMIC_RELAXED)) {
    cts__spin_lock(&conds_lock);
    cond_entry_t *const e = cond_lookup((uintptr_t)c);
    if (e) __atomic_store_n(&e->key, COND_TOMB, __ATOMIC_RELEASE);
    cts__spin_unlock(&conds_lock);
  }
  return real.cond_destroy ? real.cond_destroy(c) : 0;
}

/* ---- start-up and shutdown -------------------------------------------------------------- */

static void refuse(const char *what, const char *value, const char *why) {
  text_t line = {.len = 0};
  put_str(&line, MESSAGE_PREFIX);
  put_str(&line, what);
  put_str(&line, "=\"");
  put_str(&line, value);
  put_str(&line, "\": ");
  put_str(&line, why);
  message(line.buf);
  message("; threads are not traced\n");
}

/* A decimal count with an optional K, M or G suffix (powers of 1024); false if malformed
 * or above @p max. */
static bool parse_size(const char *s, uint64_t max, uint64_t *out) {
  uint64_t v = 0;
  char number[64]; /* without white space around it: common/setting_text.h */
  if (!cts_setting_trimmed(s, number, sizeof number)) return false;
  const char *p = number;
  if (*p < '0' || *p > '9') return false;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  unsigned shift = 0;
  if (*p == 'K' || *p == 'k') shift = 10;
  if (*p == 'M' || *p == 'm') shift = 20;
  if (*p == 'G' || *p == 'g') shift = 30;
  if (shift) p++;
  if (*p != '\0' || v > (max >> shift)) return false;
  *out = v << shift;
  return true;
}

static uint64_t clock_monotonic_ns(void *unused) {
  (void)unused;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t clock_realtime_ns(void *unused) {
  (void)unused;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Stream mode: finished packets go to the file as they are. */
static int stream_fd = -1;
/* What stream_fd named when opened: the program may close it and take the number for a
 * file of its own (common/held_fd.h). */
static cts_fd_ident_t stream_id;
static int stream_write(void *unused, const void *buf, size_t len) {
  (void)unused;
  const char *p = buf;
  while (len) {
    if (!cts_fd_still(stream_fd, stream_id)) return -EBADF; /* the program's now */
    const ssize_t n = write(stream_fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? -errno : CTS_E_IO;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

#define MAX_PACKETS 4096u
static CTS__COLD_BSS uint64_t ring_state[CTS_MPROF_RING_STATE_SIZE(MAX_PACKETS) / 8];
static cts_mprof_ring_t *ring;
static bool stream_mode;

static void stop_in_child(void) {
  if (!__atomic_load_n(&tasks_on, __ATOMIC_RELAXED)) return;
  __atomic_store_n(&tasks_on, 0, __ATOMIC_RELAXED);
  lock_entry_sync();
  cts_task_stop(); /* the parent's ring state, copied: nothing is written to the file */
  cts_fd_close_held(&stream_fd, stream_id);
}

/* thread_start is our frame, not the program's: the allocation trace's backtraces leave it
 * out (unwind.c), as `top`, `leaks` and the flame graphs would show it in every thread. */
extern const char __start_cts_thread_start[], __stop_cts_thread_start[];
static void cut_thread_start_frames(void) {
  cts__unwind_cut_code((uintptr_t)__start_cts_thread_start, (uintptr_t)__stop_cts_thread_start);
}

static void start_from_environment(void) {
  const char *const out = cts__preload_env("CTFSCOPE_TASKS");
  if (!out || !out[0]) return;
  uint64_t size = 16u << 20, packets = 256;
  const char *const size_text = cts__preload_env("CTFSCOPE_TASKS_SIZE");
  if (size_text && size_text[0] && !parse_size(size_text, (uint64_t)1 << 40, &size)) {
    refuse("CTFSCOPE_TASKS_SIZE", size_text, "not a size in bytes (K, M, G suffixes allowed)");
    return;
  }
  const char *v = cts__preload_env("CTFSCOPE_TASKS_PACKETS");
  if (v && v[0] && (!parse_size(v, MAX_PACKETS, &packets) || packets == 0)) {
    refuse("CTFSCOPE_TASKS_PACKETS", v, "not a number of packets from 1 to 4096");
    return;
  }
  if (size / packets < CTS_MPROF_MIN_PACKET_SIZE || size / packets > UINT32_MAX / 8u) {
    refuse("CTFSCOPE_TASKS_SIZE", size_text ? size_text : "16M",
           "each packet must get 256 bytes to 512 MiB");
    return;
  }
  v = cts__preload_env("CTFSCOPE_TASKS_STREAM");
  stream_mode = v && v[0] && strcmp(v, "0") != 0;
  const char *const clock_choice = cts__preload_env("CTFSCOPE_TASKS_CLOCK");
  if (clock_choice && clock_choice[0] && strcmp(clock_choice, "tsc") != 0 &&
      strcmp(clock_choice, "monotonic") != 0) {
    refuse("CTFSCOPE_TASKS_CLOCK", clock_choice, "expected tsc or monotonic");
    return;
  }

  /* Off 0-2: a program started with stdout closed would write into the stream. */
  const int fd = cts_fd_set_aside(open(out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd < 0) {
    refuse("CTFSCOPE_TASKS", out, "cannot create this file");
    return;
  }
  void *buffer;
  int map_err = 0;
  if (stream_mode) {
    buffer = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stream_fd = fd;
    stream_id = cts_fd_ident(fd);
  } else {
    /* Blocks reserved before mapping: a full file system must not SIGBUS the program. */
    map_err = cts_os_map_file_reserved(fd, (size_t)size, &buffer);
    close(fd); /* the mapping keeps the file */
    if (map_err) {
      buffer = MAP_FAILED;
      unlink(out);
    }
  }
  task_of_tid = mmap(NULL, TID_LIMIT * sizeof *task_of_tid, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (task_of_tid == MAP_FAILED) task_of_tid = NULL; /* holders are then unknown */
  if (buffer == MAP_FAILED) {
    if (stream_fd >= 0) close(stream_fd);
    stream_fd = -1;
    refuse("CTFSCOPE_TASKS", out,
           map_err == -ENOSPC ? "no room for the trace buffer on its file system"
                              : "cannot map the trace buffer");
    return;
  }
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buffer;
  cfg.buffer_size = size;
  cfg.packets = (uint32_t)packets;
  cfg.clock = clock_monotonic_ns;
  if (!(clock_choice && strcmp(clock_choice, "monotonic") == 0)) {
    cts_tsc_clock_t tsc;
    if (cts_os_tsc_clock(&tsc) == 0) cfg.tsc = tsc;
  }
  if (stream_mode) cfg.sink = stream_write;
  if (cts_mprof_ring_init(&ring, ring_state, sizeof ring_state, &cfg) != 0) {
    refuse("CTFSCOPE_TASKS", out, "cannot set up the ring");
    return;
  }
  cut_thread_start_frames();
  pthread_atfork(NULL, NULL, stop_in_child);
  self.id = CTS_TASK_MAIN;
  self.known = true;
  set_tid_task(current_tid(), CTS_TASK_MAIN);
  cts_task_start(ring); /* switch(0) */
  /* What aligns this trace with the allocation trace of the same process (§14.2). */
  cts_task_clock_anchor((int64_t)getpid(), clock_realtime_ns, NULL);
  cts_task_label(CTS_TASK_MAIN, program_invocation_short_name);
  __atomic_store_n(&tasks_on, 1, __ATOMIC_RELEASE);
  lock_entry_sync();
}

bool cts__preload_pthread_init(void) {
  need_real(REAL_LOCK);
  const char *const out = cts__preload_env("CTFSCOPE_TASKS");
  cts__guard_enter(); /* pthread_atfork allocates: not the program's allocation */
  start_from_environment();
  cts__guard_leave();
  return out && out[0];
}

/* The end of the process resolves the task of the thread that ends it (task 0 when main
 * returns). Other threads may still be running: the ring stays mapped, and a stream gets
 * the packets held so far. */
__attribute__((destructor)) static void preload_pthread_fini(void) {
  if (!__atomic_load_n(&tasks_on, __ATOMIC_RELAXED)) return;
  if (!cts__guarded()) thread_ends(NULL);
  __atomic_store_n(&tasks_on, 0, __ATOMIC_RELAXED);
  lock_entry_sync();
  cts_task_stop();
  if (stream_mode && ring) {
    cts_mprof_ring_flush(ring);
    cts_fd_close_held(&stream_fd, stream_id);
  }
}
