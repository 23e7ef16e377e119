/* SPDX-License-Identifier: MIT */
/* Whether a program file is of another kind than the preload library (another ELF class or
 * machine: a 32-bit program beside a 64-bit build), into which the library cannot be
 * loaded: its loader, finding the library in LD_PRELOAD, prints "ERROR: ld.so: object ...
 * cannot be preloaded (wrong ELF class: ELFCLASS64): ignored." on the program's standard
 * error. Asked of the file's first bytes; tracer/elf_runtime.h's cts__elf_examine reads
 * them for the preload library (its exec hooks) and `ctfscope record` (the program it
 * starts). Pure function; no allocation. */
#ifndef CTS_TRACER_ELF_KIND_H
#define CTS_TRACER_ELF_KIND_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__)
#define CTS__OWN_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define CTS__OWN_ELF_MACHINE EM_AARCH64
#endif

/* Whether `head`, the first n bytes of a file, is the start of an ELF file of another class
 * or machine than this build. False when it is no ELF file (a script: its interpreter is
 * taken to be of this kind) or too short to tell. */
static inline bool cts__elf_head_of_another_kind(const unsigned char *head, size_t n) {
#ifdef CTS__OWN_ELF_MACHINE
  if (n < EI_NIDENT + 4 || memcmp(head, ELFMAG, SELFMAG) != 0) return false;
  const unsigned machine = head[EI_DATA] == ELFDATA2MSB
                               ? (unsigned)head[EI_NIDENT + 2] << 8 | head[EI_NIDENT + 3]
                               : (unsigned)head[EI_NIDENT + 3] << 8 | head[EI_NIDENT + 2];
  return head[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
         machine != CTS__OWN_ELF_MACHINE;
#else
  (void)head;
  (void)n;
  return false;
#endif
}

#endif /* CTS_TRACER_ELF_KIND_H */
