/* SPDX-License-Identifier: MIT */
/* Libraries bound on first use: see lazylib.h. */
#define _GNU_SOURCE
#include "lazylib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "tracer_internal.h"

static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;

bool cts__lazylib_bind(cts__lazylib_t *lib) {
  pthread_mutex_lock(&bind_lock);
  if (lib->state == 0) {
    /* The loader allocates (the library's constructors too): the tracer's own. */
    cts__guard_enter();
    void *const h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
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
  const bool bound = lib->state == 1;
  pthread_mutex_unlock(&bind_lock);
  return bound;
}
