/* SPDX-License-Identifier: MIT */
/* Libraries bound on first use: see lazylib.h. */
#define _GNU_SOURCE
#include "lazylib.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/single_threaded.h>

#ifdef CTS_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "side_stack.h"
#include "tracer_internal.h"

static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  const char *soname;
  void *handle;
} dlopen_call_t;

static void dlopen_on_side_stack(void *call) {
  dlopen_call_t *const c = call;
  c->handle = dlopen(c->soname, RTLD_NOW | RTLD_LOCAL);
}

/* Binds `lib` with bind_lock held. */
static bool bind_locked(cts__lazylib_t *lib) {
  if (lib->state == 0) {
    /* The loader allocates (the library's constructors too): the tracer's own. On the side
     * stack: libunwind's is loaded by a sample, on whatever stack the program was on, and
     * the loader's mapping and relocation take several KB of it (side_stack.h). */
    cts__guard_enter();
    dlopen_call_t call = {.soname = lib->soname};
    cts__call_on_side_stack(dlopen_on_side_stack, &call);
    void *const h = call.handle;
    bool ok = h != NULL;
    for (size_t i = 0; ok && i < lib->count; i++) {
      void *const f = dlsym(h, lib->names[i]);
      ok = f != NULL;
      /* memcpy: the table is a struct of function pointers of as many kinds. */
      memcpy((char *)lib->table + i * sizeof f, &f, sizeof f);
    }
    if (!ok) memset(lib->table, 0, lib->count * sizeof(void *));
    cts__guard_leave();
    lib->state = ok ? 1 : -1;
  }
  return lib->state == 1;
}

bool cts__lazylib_bind(cts__lazylib_t *lib) {
  pthread_mutex_lock(&bind_lock);
  const bool bound = bind_locked(lib);
  pthread_mutex_unlock(&bind_lock);
  return bound;
}

void cts__lazylib_atfork_child(void) {
  pthread_mutex_init(&bind_lock, NULL);
}

#ifdef CTS_HAVE_LIBUNWIND

#define UNW_FUNCTIONS(X) X(unw_backtrace)
CTS__LAZYLIB_DEFINE(unw, unw_lib, "libunwind.so.8", UNW_FUNCTIONS);
/* Set once unw's table is whole: the walks' test, without the lock. */
static atomic_bool unw_bound;
/* The dynamic loader's addresses [lo, hi); computed at the first walk that needs them. */
static _Atomic uintptr_t loader_lo, loader_hi;

/* Binds libunwind; true once bound. `wait`: take the lock even if busy (else give up). */
static bool unw_bind(bool wait) {
  if (atomic_load_explicit(&unw_bound, memory_order_acquire)) return true;
  if (wait) {
    pthread_mutex_lock(&bind_lock);
  } else if (pthread_mutex_trylock(&bind_lock) != 0) {
    return false;
  }
  const bool ok = bind_locked(&unw_lib);
  pthread_mutex_unlock(&bind_lock);
  if (ok) atomic_store_explicit(&unw_bound, true, memory_order_release);
  return ok;
}

/* The loader's extent from its program headers, which its first mapping holds: its base
 * from the auxiliary vector (AT_BASE; 0 when the loader was run as the program, then
 * AT_PHDR is its own), no call into the loader. False when it cannot be had. */
static bool find_loader(void) {
  if (atomic_load_explicit(&loader_hi, memory_order_acquire)) return true;
  const uintptr_t base = (uintptr_t)getauxval(AT_BASE);
  const ElfW(Phdr) * ph;
  size_t count;
  uintptr_t bias = base;
  if (base) {
    const ElfW(Ehdr) *const eh = (const ElfW(Ehdr) *)base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return false;
    ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
    count = eh->e_phnum;
  } else {
    ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    count = (size_t)getauxval(AT_PHNUM);
    bias = 0;
    for (size_t i = 0; ph && i < count; i++)
      if (ph[i].p_type == PT_PHDR) bias = (uintptr_t)ph - ph[i].p_vaddr;
    if (!bias) return false;
  }
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (size_t i = 0; ph && i < count; i++) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (bias + ph[i].p_vaddr < lo) lo = bias + ph[i].p_vaddr;
    if (bias + ph[i].p_vaddr + ph[i].p_memsz > hi) hi = bias + ph[i].p_vaddr + ph[i].p_memsz;
  }
  if (hi <= lo) return false;
  atomic_store_explicit(&loader_lo, lo, memory_order_relaxed);
  atomic_store_explicit(&loader_hi, hi, memory_order_release);
  return true;
}

int cts__unw_backtrace(void **ips, int size, uintptr_t site) {
  if (!atomic_load_explicit(&unw_bound, memory_order_acquire)) {
    if (!__libc_single_threaded || !find_loader()) return 0;
    if (site >= atomic_load_explicit(&loader_lo, memory_order_relaxed) &&
        site < atomic_load_explicit(&loader_hi, memory_order_relaxed))
      return 0;
    if (!unw_bind(false)) return 0;
  }
  return unw.unw_backtrace(ips, size);
}

void cts__unw_prepare(bool needed, bool threads_coming) {
  if (needed && (threads_coming || !__libc_single_threaded)) unw_bind(true);
}

#else

int cts__unw_backtrace(void **ips, int size, uintptr_t site) {
  (void)ips;
  (void)size;
  (void)site;
  return 0;
}

void cts__unw_prepare(bool needed, bool threads_coming) {
  (void)needed;
  (void)threads_coming;
}

#endif /* CTS_HAVE_LIBUNWIND */
