/* SPDX-License-Identifier: MIT */
/* The floor of a tracer that records every allocation: an LD_PRELOAD library doing what
 * any such tracer must do at least, and nothing more. bench/real/run.sh builds it twice
 * and runs it as the configurations floor-record and floor-record-walk.
 *
 * Per call of malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign or
 * valloc it forwards to the next definition (dlsym(RTLD_NEXT); a static bootstrap buffer
 * serves dlsym's own allocations), reads the time stamp counter (rdtsc: ctfscope's own
 * clock where the TSC is usable, and the cheapest clock there is; clock_gettime through the
 * vDSO reads it too, plus its scaling) and appends a 24-byte record (time, pointer, size;
 * size all ones for a free, and a realloc appends a free and an allocation) to a 64 MiB
 * buffer of the calling thread, written with write() to the file named by FLOOR_RECORD_OUT
 * (O_APPEND) when full, at the thread's exit and at the process's exit. No stacks, no ids, no
 * encoding, no ring, no second process. Allocations made inside the hook itself are forwarded, not
 * recorded.
 *
 * Built with -DFLOOR_WALK (floor-record-walk), each allocation also walks its stack with
 * libunwind's unw_backtrace into a 64-frame array that is then discarded: heaptrack's walk,
 * with heaptrack's settings (per-thread cache of 1024 entries).
 *
 * A bench helper, not a tracer: records after the process's last destructor ran, and those
 * of threads still running at exit, are lost; without FLOOR_RECORD_OUT nothing is written
 * (the records are still made). Errors of open and write are ignored: the program must run
 * on. Linux, x86-64 only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>
#ifdef FLOOR_WALK
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#define EXPORT    __attribute__((visibility("default")))
#define TLS       __attribute__((tls_model("initial-exec"))) __thread
#define BUF_BYTES ((size_t)64 << 20)

struct record {
  uint64_t time, ptr, size;
};
#define BUF_RECORDS (BUF_BYTES / sizeof(struct record))
#define FREED       UINT64_MAX

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);

/* dlsym allocates (its error buffer) before the real functions are known: from here. */
static _Alignas(16) unsigned char bootstrap[64 << 10];
static size_t bootstrap_used;
static int resolving;

static TLS struct record *buf;
static TLS size_t used;
static TLS int in_hook;
static pthread_key_t flush_key;
static int fd = -1;

static int from_bootstrap(const void *p) {
  return (const unsigned char *)p >= bootstrap &&
         (const unsigned char *)p < bootstrap + sizeof bootstrap;
}

/* A block of the bootstrap buffer, its size in the 16 bytes before it; NULL when full. */
static void *bootstrap_alloc(size_t size) {
  const size_t need = 16 + ((size + 15) & ~(size_t)15);
  if (size > sizeof bootstrap || need > sizeof bootstrap - bootstrap_used) return NULL;
  unsigned char *p = bootstrap + bootstrap_used + 16;
  memcpy(p - 16, &size, sizeof size);
  bootstrap_used += need;
  return p;
}

static void resolve(void) {
  resolving = 1;
  real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  resolving = 0;
}

static void flush(struct record *b, size_t n) {
  if (fd < 0) {
    const char *path = getenv("FLOOR_RECORD_OUT");
    if (path == NULL) return;
    const int f = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    /* Two threads opening at once: one keeps its descriptor, the other closes its own. */
    if (f >= 0 && !__sync_bool_compare_and_swap(&fd, -1, f)) close(f);
    if (fd < 0) return;
  }
  const char *p = (const char *)b;
  size_t left = n * sizeof *b;
  while (left > 0) {
    const ssize_t w = write(fd, p, left);
    if (w <= 0) return;
    p += w;
    left -= (size_t)w;
  }
}

static void thread_done(void *b) {
  flush(b, used);
  munmap(b, BUF_BYTES);
  buf = NULL;
  used = 0;
}

/* The calling thread's buffer, made on its first record; NULL if mmap failed. */
static struct record *slot(void) {
  if (buf == NULL) {
    void *m = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    buf = m;
    pthread_setspecific(flush_key, m);
  } else if (used == BUF_RECORDS) {
    flush(buf, used);
    used = 0;
  }
  return &buf[used++];
}

static void record(uint64_t time, const void *ptr, uint64_t size) {
  struct record *r = slot();
  if (r == NULL) return;
  r->time = time;
  r->ptr = (uintptr_t)ptr;
  r->size = size;
}

static void walk(void) {
#ifdef FLOOR_WALK
  void *frames[64];
  const int n = unw_backtrace(frames, 64);
  /* Discarded, but not optimised away. */
  __asm__ volatile("" : : "r"(n), "r"(frames) : "memory");
#endif
}

static void allocated(const void *p, size_t size) {
  if (in_hook || p == NULL) return;
  in_hook = 1;
  walk();
  record(__rdtsc(), p, size);
  in_hook = 0;
}

static void freed(const void *p) {
  if (in_hook || p == NULL) return;
  in_hook = 1;
  record(__rdtsc(), p, FREED);
  in_hook = 0;
}

/* A forked child starts with its parent's unwritten records: they are the parent's to write. */
static void forked_child(void) {
  used = 0;
}

__attribute__((constructor)) static void floor_init(void) {
  if (real_malloc == NULL) resolve();
  pthread_key_create(&flush_key, thread_done);
  pthread_atfork(NULL, NULL, forked_child);
#ifdef FLOOR_WALK
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  unw_set_cache_size(unw_local_addr_space, 1024, 0);
#endif
}

__attribute__((destructor)) static void floor_fini(void) {
  if (buf != NULL) flush(buf, used);
  used = 0;
}

EXPORT void *malloc(size_t size) {
  if (real_malloc == NULL) {
    if (resolving) return bootstrap_alloc(size);
    resolve();
  }
  void *p = real_malloc(size);
  allocated(p, size);
  return p;
}

EXPORT void *calloc(size_t n, size_t size) {
  if (real_calloc == NULL) {
    /* bootstrap is zero and never reused: calloc's zeroing holds. */
    if (resolving) return size != 0 && n > SIZE_MAX / size ? NULL : bootstrap_alloc(n * size);
    resolve();
  }
  void *p = real_calloc(n, size);
  allocated(p, n * size);
  return p;
}

EXPORT void free(void *p) {
  if (p == NULL || from_bootstrap(p)) return;
  if (real_free == NULL) resolve();
  freed(p);
  real_free(p);
}

EXPORT void *realloc(void *old, size_t size) {
  if (old != NULL && from_bootstrap(old)) {
    size_t had;
    memcpy(&had, (unsigned char *)old - 16, sizeof had);
    void *p = malloc(size);
    if (p != NULL) memcpy(p, old, had < size ? had : size);
    return p;
  }
  if (real_realloc == NULL) {
    if (resolving) return bootstrap_alloc(size);
    resolve();
  }
  void *p = real_realloc(old, size);
  if (old != NULL && (p != NULL || size == 0)) freed(old);
  allocated(p, size);
  return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (real_posix_memalign == NULL) resolve();
  const int e = real_posix_memalign(out, align, size);
  if (e == 0) allocated(*out, size);
  return e;
}

EXPORT void *aligned_alloc(size_t align, size_t size) {
  if (real_aligned_alloc == NULL) resolve();
  void *p = real_aligned_alloc(align, size);
  allocated(p, size);
  return p;
}

EXPORT void *memalign(size_t align, size_t size) {
  if (real_memalign == NULL) resolve();
  void *p = real_memalign(align, size);
  allocated(p, size);
  return p;
}

EXPORT void *valloc(size_t size) {
  if (real_valloc == NULL) resolve();
  void *p = real_valloc(size);
  allocated(p, size);
  return p;
}
