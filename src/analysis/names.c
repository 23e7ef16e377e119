/* SPDX-License-Identifier: MIT */
/* Demangled names, cached (names.h). */
#include "names.h"

#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "../common/hash.h"
#include "u64map.h"

char *cts_demangle(const char *sym, bool params) {
  /* Only Itanium C++ and Rust symbols: _Z… (C++ and Rust legacy) and _R… (Rust v0). Other
   * names (C, OCaml's "Module.fn") are never guessed at. */
  if (!sym || sym[0] != '_' || (sym[1] != 'Z' && sym[1] != 'R')) return NULL;
  if (strnlen(sym, CTS_NAMES_MAX_MANGLED + 1) > CTS_NAMES_MAX_MANGLED) return NULL;
  /* Without DMGL_PARAMS libiberty leaves out parameters and return type: the qualified
   * name. The style is left to libiberty's auto mode, which tries Rust before C++ (legacy
   * Rust symbols are valid C++ ones too). */
  char *out = cplus_demangle(sym, params ? DMGL_PARAMS | DMGL_ANSI : DMGL_ANSI);
  if (out && strnlen(out, CTS_NAMES_MAX_SHOWN + 1) > CTS_NAMES_MAX_SHOWN) {
    free(out);
    return NULL;
  }
  return out;
}

static uint64_t hash_str(const char *s) {
  return cts_mix64(cts_u64map_str_key(s));
}

void cts_names_init(cts_names_t *n, bool demangle) {
  *n = (cts_names_t){.demangle = demangle};
}

static void free_entry(cts_name_t *e) {
  if (e->shown != e->mangled) free((char *)e->shown);
  if (e->base != e->mangled && e->base != e->shown) free((char *)e->base);
  free(e); /* the mangled text is allocated with the entry */
}

void cts_names_fini(cts_names_t *n) {
  for (size_t i = 0; i < n->cap; i++)
    if (n->slots[i]) free_entry(n->slots[i]);
  free(n->slots);
  *n = (cts_names_t){0};
}

static int grow(cts_names_t *n) {
  const size_t cap = n->cap ? n->cap * 2 : 256;
  cts_name_t **slots = calloc(cap, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < n->cap; i++) {
    cts_name_t *e = n->slots[i];
    if (!e) continue;
    size_t j = hash_str(e->mangled) & (cap - 1);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = e;
  }
  free(n->slots);
  n->slots = slots;
  n->cap = cap;
  return 0;
}

static cts_name_t *new_entry(const char *sym, bool demangle) {
  const size_t len = strlen(sym);
  cts_name_t *e = malloc(sizeof *e + len + 1);
  if (!e) return NULL;
  char *copy = (char *)(e + 1);
  memcpy(copy, sym, len + 1);
  *e = (cts_name_t){.mangled = copy, .shown = copy, .base = copy};
  if (!demangle) return e;
  char *shown = cts_demangle(sym, true);
  if (!shown) return e;
  char *base = cts_demangle(sym, false);
  e->shown = shown;
  e->base = base ? base : shown; /* shared with shown: freed once (free_entry) */
  e->demangled = true;
  return e;
}

const cts_name_t *cts_names_get(cts_names_t *n, const char *sym) {
  if (!sym) sym = "";
  if ((n->count + 1) * 4 > n->cap * 3 && grow(n)) return NULL;
  size_t i = hash_str(sym) & (n->cap - 1);
  for (; n->slots[i]; i = (i + 1) & (n->cap - 1))
    if (strcmp(n->slots[i]->mangled, sym) == 0) return n->slots[i];
  cts_name_t *e = new_entry(sym, n->demangle);
  if (!e) return NULL;
  n->slots[i] = e;
  n->count++;
  return e;
}
