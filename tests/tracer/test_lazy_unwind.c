/* SPDX-License-Identifier: MIT */
/* libunwind bound on first use (src/tracer/lazylib.h): a walk binds it only while the
 * process has one thread and when the allocation was not the dynamic loader's; a session
 * (or the preload's pthread_create) binds it before threads come. White-box: calls the
 * tracer's entry points directly, and looks for libunwind with dlopen(RTLD_NOLOAD). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/single_threaded.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../test.h"
#include "tracer/lazylib.h"

/* An address in the dynamic loader's first segment (its ELF header, at the base the kernel
 * gives in the auxiliary vector): an allocation "made by the loader". Not the address of
 * one of its functions or data, which a sanitizer may intercept and a PIE executable may
 * copy. */
static uintptr_t loader_site(void) {
  return (uintptr_t)getauxval(AT_BASE) + 64u;
}

static bool libunwind_loaded(void) {
  void *const h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != NULL;
}

/* A return address in this program. */
static uintptr_t program_site(void) {
  return (uintptr_t)__builtin_return_address(0);
}

static void *park(void *arg) {
  int *const fd = arg;
  char c;
  while (read(*fd, &c, 1) < 0) {}
  return NULL;
}

/* First: it forks before any test of this process binds libunwind. */
CTS_TEST(prepare_binds_before_threads_only_when_needed) {
#ifndef CTS_TEST_HAVE_LIBUNWIND
  CTS_SKIP("built without libunwind");
#else
  const pid_t pid = fork();
  CTS_ASSERT(pid >= 0);
  if (pid == 0) {
    if (libunwind_loaded()) _exit(3);
    cts__unw_prepare(false, true); /* the unwinder never calls it */
    if (libunwind_loaded()) _exit(4);
    cts__unw_prepare(true, __libc_single_threaded ? false : true);
    /* With one thread and none coming, binding waits for a walk. */
    if (__libc_single_threaded && libunwind_loaded()) _exit(5);
    cts__unw_prepare(true, true); /* a thread comes next */
    _exit(libunwind_loaded() ? 0 : 6);
  }
  int status = 0;
  CTS_ASSERT(waitpid(pid, &status, 0) == pid);
  CTS_ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
#endif
}

CTS_TEST(walks_bind_libunwind_only_where_safe) {
#ifndef CTS_TEST_HAVE_LIBUNWIND
  CTS_SKIP("built without libunwind");
#else
  void *ips[64];
  CTS_ASSERT_MSG(!libunwind_loaded(), "libunwind loaded before any walk");
  /* An allocation the loader made: never binds. */
  CTS_ASSERT_EQ_INT(cts__unw_backtrace(ips, 64, loader_site()), 0);
  CTS_ASSERT_MSG(!libunwind_loaded(), "bound for an allocation of the loader's");

  /* A process with a second thread: a walk does not bind (in a child, so that this
   * process keeps one thread). */
  const pid_t pid = fork();
  CTS_ASSERT(pid >= 0);
  if (pid == 0) {
    int p[2];
    pthread_t th;
    if (pipe(p) != 0 || pthread_create(&th, NULL, park, &p[0]) != 0) _exit(2);
    const int n = cts__unw_backtrace(ips, 64, program_site());
    const bool loaded = libunwind_loaded();
    if (write(p[1], "x", 1) != 1) _exit(2);
    pthread_join(th, NULL);
    _exit(n == 0 && !loaded ? 0 : 1);
  }
  int status = 0;
  CTS_ASSERT(waitpid(pid, &status, 0) == pid);
  CTS_ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                 "a walk with two threads bound libunwind (status %d)", status);

  if (__libc_single_threaded) {
    /* One thread, an allocation of the program's: bound, and the walk has frames. */
    CTS_ASSERT(cts__unw_backtrace(ips, 64, program_site()) > 0);
  } else {
    /* Threads already (a sanitizer's): walks do without; a session binds it first. */
    CTS_ASSERT_EQ_INT(cts__unw_backtrace(ips, 64, program_site()), 0);
    cts__unw_prepare(true, false);
    CTS_ASSERT(cts__unw_backtrace(ips, 64, program_site()) > 0);
  }
  CTS_ASSERT(libunwind_loaded());
#endif
}

CTS_TEST_MAIN()
