/* SPDX-License-Identifier: MIT */
/* The kernel's function symbols and line table, sorted by address, for unikernel_embedded:
 * generated at build time from the first link (gen_ksyms.cmake: nm and the DWARF line
 * table) and linked into the final image, so that the memtrace writer can name the
 * locations of its backtraces, down to the line of each call, with no ELF file on the
 * host. The default kernel links them empty (ksyms_empty.c) and leaves the naming to the
 * host (`ctfscope symbolize`). */
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

/** One row of the line table: code from @p addr up to the next row is from this line. */
typedef struct kline {
  uint64_t addr;
  uint32_t line;
  uint32_t file; /* index in kfiles */
} kline_t;

extern const ksym_t ksyms[];
extern const size_t ksyms_count;
extern const kline_t klines[];
extern const size_t klines_count;
extern const char *const kfiles[];

#endif /* UNIKERNEL_KSYMS_H */
