/* SPDX-License-Identifier: MIT */
/* Libraries that only the writer needs (libdw for locations, libzstd for compression),
 * bound with dlopen when first needed instead of being linked: linked, the loader mapped
 * and relocated them, with libelf, libz, liblzma and libbz2 behind libdw, in every traced
 * image before main (0.5 ms of CPU per image, and a larger address space for the writer
 * process's two forks to copy), though most images never resolve a location or compress.
 *
 * A user lists the functions it calls in an X-macro, declares a table of pointers typed
 * from the library's own header (so a call through it is checked as a direct one would
 * be), and binds it once before the first call. Binding is serialised by a mutex: any
 * thread. The library stays loaded for the life of the process (never dlclosed). A writer
 * process binds after the fork: glibc's fork re-initialises the loader's lock in the child,
 * so a program thread that was inside dlopen at that moment does not leave it held. */
#ifndef CTS_TRACER_LAZYLIB_H
#define CTS_TRACER_LAZYLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const char *soname;       /* what dlopen is given, e.g. "libdw.so.1" */
  const char *const *names; /* the functions, in the table's order */
  size_t count;
  void *table; /* `count` function pointers, written once bound */
  int state;   /* 0: not tried yet, 1: bound, -1: failed (not retried); under the mutex */
} cts__lazylib_t;

/* Binds `lib` (dlopen, then dlsym of every name) if that was not tried yet. True when every
 * function is bound; false (and the same answer ever after) when the library or one of the
 * functions is missing, in which case the table is left all NULL. Allocations made by the
 * loader meanwhile are not traced (the thread's guard is raised). */
bool cts__lazylib_bind(cts__lazylib_t *lib);

/* After a fork, in the child: the binding lock as new (a thread that held it is not there). */
void cts__lazylib_atfork_child(void);

/* libunwind, for the sampling path's walks that frame pointers and call frame information
 * cannot do (unwind.c): bound at the first such walk, not linked, so that an image that
 * never needs it (most images at the default rate sample nothing) does not load it and
 * liblzma behind it (~0.1 ms of CPU per image: bench/JOURNAL.md, "Issue 16: exec chain
 * start-up (wip/h21exec)").
 *
 * A walk runs inside the program's malloc, wherever the program is, so it binds only where
 * a dlopen cannot deadlock or nest into the loader's own work: while the process has one
 * thread (no other thread can hold the loader's lock and wait for a lock this one holds)
 * and when the allocation was not made by the dynamic loader itself (whose own allocations,
 * in a dlopen or a thread's TLS set-up, are made with its lock held mid-change). Before the
 * process's second thread exists, cts__unw_prepare binds it (the preload's pthread_create
 * and the session's start call it). A walk that cannot bind does without libunwind: 0
 * frames, which the unwinders take as "libunwind could not" (a frame-pointer backtrace). */

/* unw_backtrace(ips, size) for an allocation whose hook returns to `site`: its count, or 0
 * if libunwind is not bound and may not be bound here and now (always 0 in a build without
 * libunwind). Any thread; no lock once bound. */
int cts__unw_backtrace(void **ips, int size, uintptr_t site);

/* Binds libunwind now if `needed` and the process has, or is about to have, more than one
 * thread (`threads_coming`: the caller makes one next): from a context where a dlopen may
 * block (not a malloc hook). Nothing without libunwind, or once bound. */
void cts__unw_prepare(bool needed, bool threads_coming);

/* Defines `table`, a struct of pointers to the functions of the X-macro `LIST` (each typed
 * after the library's declaration of it), and `lib`, its cts__lazylib_t for `soname`. */
#define CTS__LAZY_MEMBER(fn) __typeof__(&fn) fn;
#define CTS__LAZY_NAME(fn)   #fn,
#define CTS__LAZYLIB_DEFINE(table, lib, soname, LIST)                                           \
  static struct { LIST(CTS__LAZY_MEMBER) } table;                                               \
  static const char *const table##_names[] = {LIST(CTS__LAZY_NAME)};                            \
  _Static_assert(sizeof table == sizeof table##_names / sizeof *table##_names * sizeof(void *), \
                 "one pointer per name");                                                       \
  static cts__lazylib_t lib = {soname, table##_names,                                           \
                               sizeof table##_names / sizeof *table##_names, &table, 0}

#endif /* CTS_TRACER_LAZYLIB_H */
