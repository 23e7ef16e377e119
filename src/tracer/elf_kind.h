/* SPDX-License-Identifier: MIT */
/* Whether a program file is of another kind than the preload library (another ELF class or
 * machine: a 32-bit program beside a 64-bit build), into which the library cannot be
 * loaded: its loader, finding the library in LD_PRELOAD, prints "ERROR: ld.so: object ...
 * cannot be preloaded (wrong ELF class: ELFCLASS64): ignored." on the program's standard
 * error. Shared by the preload library (its exec hooks) and `ctfscope record` (the program
 * it starts). Plain functions; no allocation; errno may change. */
#ifndef CTS_TRACER_ELF_KIND_H
#define CTS_TRACER_ELF_KIND_H

#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Whether `path` is an ELF file of another class or machine than this build. Three system
 * calls (openat, pread, close, the latter two by syscall: the preload's close is
 * interposed); false when it cannot be read (the exec says why) or is no ELF file. The
 * preload's exec hooks ask tracer/elf_runtime.h's cts__elf_examine instead (this and the
 * sanitizer question in one read). O_NONBLOCK and O_NOCTTY: an exec of a FIFO or a
 * terminal (which fails) must not wait in this open, nor take a terminal. */
static inline bool cts__elf_of_another_kind(const char *path) {
  const int fd =
      (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  unsigned char header[EI_NIDENT + 4];
  const ssize_t n = pread(fd, header, sizeof header, 0);
  syscall(SYS_close, fd);
  return n > 0 && cts__elf_head_of_another_kind(header, (size_t)n);
}

#endif /* CTS_TRACER_ELF_KIND_H */
