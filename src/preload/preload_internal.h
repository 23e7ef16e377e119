/* SPDX-License-Identifier: MIT */
/* Shared by the files of the preload library. */
#ifndef CTS_PRELOAD_INTERNAL_H
#define CTS_PRELOAD_INTERNAL_H

#include <sched.h>
#include <stdbool.h>

/* The value of environment variable `name`, or NULL. Reads `environ` directly: getenv may
 * not be called this early, and nothing here may allocate (STYLE rule 36). */
const char *cts__preload_env(const char *name);

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
