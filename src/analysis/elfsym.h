/* SPDX-License-Identifier: MIT */
/* Location codes (return addresses) to source locations from an ELF file on disk, after the
 * fact: what `ctfscope symbolize` uses for a trace whose writer sent its codes without
 * locations (a kernel with no symbol table of its own, a program traced where its debug
 * information was not at hand). Reads the file with elfutils' libdwfl offline, never a
 * live process: function, file and line from DWARF, one location per inlining level, or
 * the function from the symbol table (.symtab, else .dynsym) where there is no DWARF.
 *
 * The file is untrusted input: whatever libdw cannot make sense of is a failed look-up or
 * an error message, never a crash of ours. Not thread-safe: one thread per cts_elfsym_t
 * (libdwfl keeps caches in the handle). Built without libdw (CTS_HAVE_LIBDW unset),
 * cts_elfsym_open() fails with a message saying so. */
#ifndef CTS_ELFSYM_H
#define CTS_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

typedef struct cts_elfsym cts_elfsym_t;

/* What cts_elfsym_resolve() found for a code. */
typedef enum cts_elfsym_result {
  CTS_ELFSYM_OUTSIDE = 0, /* the address is in none of the file's loaded segments */
  CTS_ELFSYM_LINE,        /* function, file and line from DWARF */
  CTS_ELFSYM_SYMBOL,      /* a function symbol only (no DWARF there) */
  CTS_ELFSYM_OFFSET,      /* inside the file but in no function: "FILE+0xOFFSET" */
} cts_elfsym_result_t;

/* Opens the ELF executable or shared object at @p path for codes that are its addresses
 * plus @p base (the load bias: 0 for an executable linked where it runs, the load address
 * of a position-independent file). File names under @p strip_prefix (a directory, with or
 * without its final '/'; NULL or "" for none) are written relative to it, as the source
 * tree names them. Returns 0, or an error with a one-line message in @p msg: -errno when the
 * file cannot be read, CTS_E_INVAL when it is not an ELF executable or shared object or has
 * neither DWARF nor a symbol table (nothing to name addresses with), CTS_E_NOMEM. */
int cts_elfsym_open(cts_elfsym_t **out, const char *path, uint64_t base, const char *strip_prefix,
                    char *msg, size_t msg_size);

/* Whether the file has DWARF debug information (false: functions from the symbol table
 * only, with no file or line). */
bool cts_elfsym_has_dwarf(const cts_elfsym_t *e);

/* Resolves @p code, a return address (the call before it is looked up, as the tracers'
 * codes are), into at most @p max locations, outermost inlined frame first, and returns
 * what it found with the count in *@p n (0 for CTS_ELFSYM_OUTSIDE). The strings belong to
 * @p e and stay valid until the next call. */
cts_elfsym_result_t cts_elfsym_resolve(cts_elfsym_t *e, uint64_t code, cts_mt_location_t *out,
                                       size_t max, size_t *n);

/* Accepts NULL. */
void cts_elfsym_close(cts_elfsym_t *e);

#endif /* CTS_ELFSYM_H */
