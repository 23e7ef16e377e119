/* SPDX-License-Identifier: MIT */
/* Function names as their users read them: C++ (Itanium ABI) and Rust (legacy and v0)
 * symbols demangled by libiberty's cplus_demangle, the one demangler of the code base.
 *
 * cts_names_t caches each distinct symbol, so a name met in many frames is demangled once.
 * Hostile input is bounded: a symbol longer than CTS_NAMES_MAX_MANGLED bytes, or whose
 * demangled form would exceed CTS_NAMES_MAX_SHOWN bytes, is shown as it is (mangled);
 * libiberty itself limits its recursion depth. Names that are not mangled (C, OCaml) are
 * returned unchanged.
 *
 * Ownership: the strings returned belong to the cache and live until cts_names_fini.
 * Not thread-safe: one cache per thread. */
#ifndef CTS_NAMES_H
#define CTS_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTS_NAMES_MAX_MANGLED 4096u
#define CTS_NAMES_MAX_SHOWN   65536u

typedef struct cts_name {
  const char *mangled; /* the symbol as the trace has it */
  const char *shown;   /* demangled with parameters ("ns::f(int)"), or mangled as is */
  const char *base;    /* demangled without parameters or return type ("ns::f"), or mangled */
  bool demangled;      /* shown differs from mangled */
} cts_name_t;

typedef struct cts_names {
  bool demangle;      /* false: every name is shown as it is (--no-demangle) */
  cts_name_t **slots; /* open addressing by the symbol's hash; NULL = empty */
  size_t cap, count;
} cts_names_t;

void cts_names_init(cts_names_t *n, bool demangle);
void cts_names_fini(cts_names_t *n);
/* The entry of symbol sym (NULL is taken as ""), or NULL when out of memory. */
const cts_name_t *cts_names_get(cts_names_t *n, const char *sym);

/* One symbol demangled, uncached: a malloc'd string the caller frees, or NULL when sym is
 * not a C++ or Rust symbol, is too long (see above) or memory ran out. params: with the
 * parameter list (and a template function's return type); without, the qualified name. */
char *cts_demangle(const char *sym, bool params);

#endif /* CTS_NAMES_H */
