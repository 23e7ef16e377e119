/* SPDX-License-Identifier: MIT */
/* The kernel's function symbols, sorted by address: generated at build time from the first
 * link's symbol table (gen_ksyms.cmake) and linked into the final image, so that the
 * memtrace writer can name the locations of its backtraces with no debugger on the host. */
#ifndef UNIKERNEL_KSYMS_H
#define UNIKERNEL_KSYMS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ksym {
  uint64_t addr;
  uint32_t line; /* of the definition; 0 if unknown */
  const char *name;
  const char *file;
} ksym_t;

extern const ksym_t ksyms[];
extern const size_t ksyms_count;

#endif /* UNIKERNEL_KSYMS_H */
