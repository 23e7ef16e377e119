/* SPDX-License-Identifier: MIT */
/* The control block's lock and waits: a mutex (robust and process-shared with a writer
 * process) and futex words the program's threads and the writer sleep on. Part
 * cts__ctl (tracer_state.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "tracer_state.h"

/* How often a waiting thread checks the writer process exists. */
#define WRITER_CHECK_MS 100u

cts__control_t cts__local_control = {.lock = PTHREAD_MUTEX_INITIALIZER};
cts__control_t *cts__ctl = &cts__local_control;

/* The control block is this process's own (not shared with a writer process). Around a
 * fork only such a block is locked: a shared one is left to the writer process, and a
 * child gets a fresh block (cts__session_atfork_child). */
bool cts__ctl_is_local(void) {
  return cts__ctl == &cts__local_control;
}

/* A robust mutex whose owner died (the writer process or the program, killed) is handed
 * over with EOWNERDEAD: the fields under it are plain flags and counters, still usable. */
void cts__ctl_lock(void) {
  if (pthread_mutex_lock(&cts__ctl->lock) == EOWNERDEAD) pthread_mutex_consistent(&cts__ctl->lock);
}

void cts__ctl_unlock(void) {
  pthread_mutex_unlock(&cts__ctl->lock);
}

static int futex_flags(void) {
  return cts__ctl_is_local() ? FUTEX_PRIVATE_FLAG : 0;
}

/* Wakes one waiter on `word` (or all). Lock held. */
void cts__ctl_wake(_Atomic uint32_t *word, bool all) {
  atomic_fetch_add(word, 1);
  syscall(SYS_futex, word, FUTEX_WAKE | futex_flags(), all ? INT_MAX : 1, NULL, NULL, 0);
}

/* Waits (lock held; released meanwhile) until `word` is changed or it is `deadline`
 * (CLOCK_MONOTONIC; NULL: none): 0, or ETIMEDOUT. */
int cts__ctl_timedwait(_Atomic uint32_t *word, const struct timespec *deadline) {
  const uint32_t seen = atomic_load(word);
  cts__ctl_unlock();
  /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time. */
  const long r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | futex_flags(), seen, deadline, NULL,
                         FUTEX_BITSET_MATCH_ANY);
  const int e = r == 0 ? 0 : errno;
  cts__ctl_lock();
  return e == ETIMEDOUT ? ETIMEDOUT : 0;
}

/* The deadline is the kernel's CLOCK_MONOTONIC, read by the system call: the futex compares
 * with it, and clock_gettime may be another library's. libfaketime (`faketime`) moves
 * CLOCK_MONOTONIC by years; a forked writer, which keeps the program's libraries, then
 * waited for ever at the program's exec, its trace left with the header only and
 * `record` waiting 10 s for it. A wait's one more system call is nothing beside it. */
struct timespec cts__deadline_in_ms(uint64_t ms) {
  struct timespec now = {0, 0};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
  const uint64_t ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + ms * 1000000u;
  return (struct timespec){.tv_sec = (time_t)(ns / 1000000000u),
                           .tv_nsec = (long)(ns % 1000000000u)};
}

static bool before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Waits (lock held) for `progress` until `deadline` (NULL: none); ETIMEDOUT once past it.
 * With a writer process, 100 ms at a time, looking in between whether it still exists: one
 * that was killed counts as exited, so that no thread waits for it for ever. */
int cts__wait_progress(const struct timespec *deadline) {
  if (!cts__session.writer_process) return cts__ctl_timedwait(&cts__ctl->progress, deadline);
  struct timespec step = cts__deadline_in_ms(WRITER_CHECK_MS);
  const bool last = deadline && before(deadline, &step);
  const int r = cts__ctl_timedwait(&cts__ctl->progress, last ? deadline : &step);
  if (r != ETIMEDOUT) return r;
  if (cts__ctl->thread_running && cts__writer_process_gone()) {
    atomic_store_explicit(&cts__tracer_active, 0, memory_order_relaxed); /* nobody takes records */
    cts__tracer_log(&cts__sink.sink,
                    "the writer process (pid %d) is gone: tracing stopped, the program runs on",
                    (int)atomic_load(&cts__ctl->writer_pid));
    cts__ctl->thread_running = false;
    if (!cts__ctl->stats.error) cts__ctl->stats.error = -ESRCH;
    atomic_store(&cts__ctl->failed, true);
    cts__ctl_wake(&cts__ctl->progress, true);
  }
  return last ? ETIMEDOUT : 0;
}

void cts__init_control(cts__control_t *c, bool shared) {
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  if (shared) {
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  }
  pthread_mutex_init(&c->lock, &ma);
  pthread_mutexattr_destroy(&ma);
}
