/* SPDX-License-Identifier: MIT */
/* Whether a program file links a sanitizer runtime that must come first in the loader's
 * list of libraries (AddressSanitizer's libasan, HWASan's libhwasan): with the preload
 * library before it in LD_PRELOAD, such a program aborts at its start ("ASan runtime does
 * not come first in initial library list"), so it can only run untraced. Used by `ctfscope
 * record` for the program it starts and by the preload's exec and posix_spawn hooks
 * (cts__elf_examine: one open and read for this and tracer/elf_kind.h's question). Plain
 * functions: no allocation, a few system calls; errno may change. */
#ifndef CTS_TRACER_ELF_RUNTIME_H
#define CTS_TRACER_ELF_RUNTIME_H

#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elf_kind.h"
#include "elf_script.h"

/* The file offset of virtual address `vaddr` in the loaded segments `ph` (n of them), or
 * UINT64_MAX. */
static inline uint64_t cts__elf_vaddr_offset(const Elf64_Phdr *ph, unsigned n, Elf64_Addr vaddr) {
  for (unsigned i = 0; i < n; i++)
    if (ph[i].p_type == PT_LOAD && vaddr >= ph[i].p_vaddr && vaddr - ph[i].p_vaddr < ph[i].p_filesz)
      return ph[i].p_offset + (vaddr - ph[i].p_vaddr);
  return UINT64_MAX;
}

/* `size` bytes at file `offset` into buf: from `head` (the file's first head_len bytes,
 * already read) when they lie there, else by pread; the bytes had (0 at the end of the
 * file), -1 on error. No offset past what off_t holds. */
static inline ssize_t cts__elf_read(int fd, const unsigned char *head, size_t head_len, void *buf,
                                    size_t size, uint64_t offset) {
  if (offset < head_len && size <= head_len - offset) {
    memcpy(buf, head + offset, size);
    return (ssize_t)size;
  }
  return offset > (uint64_t)INT64_MAX - size ? -1 : pread(fd, buf, size, (off_t)offset);
}

/* Where an examination reads a program's start, headers and dynamic entries: ~76 KiB, too
 * much for the stack of a thread or coroutine that execs (glibc's smallest thread stack is
 * 16 KiB), so the preload's exec hooks keep it off the stack (preload_exec.c: pages touched
 * only as far as a program's bytes are read); `ctfscope record` has one on its stack
 * (cts__elf_examine). The dynamic section is read whole up to CTS__ELF_MAX_DYN entries, in
 * one pread: DT_NEEDED come first, DT_STRTAB and DT_STRSZ after them, so a program linked
 * with more libraries than the entries read had its sanitizer runtime missed (128 entries
 * were read: a link with 150 -l libraries); 4096 entries is a 64 KiB section, over 4 000
 * libraries. A larger section is read up to the bound (its names past it are not seen). */
#define CTS__ELF_HEAD_BYTES 8192
#define CTS__ELF_MAX_PHDRS  64
#define CTS__ELF_MAX_DYN    4096
typedef struct {
  unsigned char head[CTS__ELF_HEAD_BYTES];
  Elf64_Phdr ph[CTS__ELF_MAX_PHDRS];
  Elf64_Dyn dyn[CTS__ELF_MAX_DYN];
} cts__elf_scratch_t;

/* Whether the 64-bit ELF program open at `fd`, whose first head_len bytes are `head`,
 * names libasan.so* or libhwasan.so* among its DT_NEEDED libraries; the name goes into
 * runtime (size bytes). False when the file cannot be read, is no 64-bit ELF file or its
 * dynamic section does not make sense (every offset and count is checked: the file is the
 * user's, any bytes). At most CTS__ELF_MAX_PHDRS program headers and CTS__ELF_MAX_DYN
 * dynamic entries are read, into `scratch` (its head unused). What lies in the head costs no
 * system call: a small program's headers and library names do (its dynamic section is one
 * pread, whatever its size). */
static inline bool cts__elf_fd_needs_a_runtime_first_in(int fd, const unsigned char *head,
                                                        size_t head_len, char *runtime, size_t size,
                                                        cts__elf_scratch_t *scratch) {
  static const char *const first[] = {"libasan.so", "libhwasan.so"};
  Elf64_Ehdr eh;
  Elf64_Phdr *const ph = scratch->ph;
  Elf64_Dyn *const dyn = scratch->dyn;
  if (cts__elf_read(fd, head, head_len, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > CTS__ELF_MAX_PHDRS)
    return false;
  const size_t ph_bytes = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
  if (cts__elf_read(fd, head, head_len, ph, ph_bytes, eh.e_phoff) != (ssize_t)ph_bytes)
    return false;
  const Elf64_Phdr *dynamic = NULL;
  for (unsigned i = 0; i < eh.e_phnum; i++)
    if (ph[i].p_type == PT_DYNAMIC) dynamic = &ph[i];
  if (!dynamic) return false;
  const size_t dyn_room = sizeof scratch->dyn;
  const size_t dyn_bytes = dynamic->p_filesz < dyn_room ? (size_t)dynamic->p_filesz : dyn_room;
  const ssize_t got = cts__elf_read(fd, head, head_len, dyn, dyn_bytes, dynamic->p_offset);
  if (got <= 0) return false;
  const size_t count = (size_t)got / sizeof(Elf64_Dyn);
  Elf64_Addr strtab = 0;
  Elf64_Xword strsz = 0;
  for (size_t i = 0; i < count && dyn[i].d_tag != DT_NULL; i++) {
    if (dyn[i].d_tag == DT_STRTAB) strtab = dyn[i].d_un.d_ptr;
    if (dyn[i].d_tag == DT_STRSZ) strsz = dyn[i].d_un.d_val;
  }
  const uint64_t strings = cts__elf_vaddr_offset(ph, eh.e_phnum, strtab);
  if (strings == UINT64_MAX || strsz == 0) return false;
  for (size_t i = 0; i < count && dyn[i].d_tag != DT_NULL; i++) {
    if (dyn[i].d_tag != DT_NEEDED || dyn[i].d_un.d_val >= strsz) continue;
    char name[64] = "";
    const uint64_t at = strings + dyn[i].d_un.d_val;
    const ssize_t n =
        at < strings ? -1 : cts__elf_read(fd, head, head_len, name, sizeof name - 1, at);
    if (n <= 0) continue;
    for (size_t k = 0; k < sizeof first / sizeof first[0]; k++)
      if (strncmp(name, first[k], strlen(first[k])) == 0) {
        snprintf(runtime, size, "%s", name);
        return true;
      }
  }
  return false;
}

/* Whether the ELF program at `path` is statically linked: no PT_INTERP, so no dynamic
 * loader runs that could read LD_PRELOAD (a static-pie too). False when it cannot be read,
 * is no ELF file of this build's class or its headers do not make sense. */
static inline bool cts__elf_is_statically_linked(const char *path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  Elf64_Ehdr eh;
  Elf64_Phdr ph[64];
  bool interpreter = true;
  if (cts__elf_read(fd, NULL, 0, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
      memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
      eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum <= 64) {
    const size_t ph_bytes = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
    if (cts__elf_read(fd, NULL, 0, ph, ph_bytes, eh.e_phoff) == (ssize_t)ph_bytes) {
      interpreter = false;
      for (unsigned i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_INTERP) interpreter = true;
    }
  }
  close(fd);
  return !interpreter;
}

/* What an exec of a program file means for the preload library. */
typedef enum {
  CTS__ELF_LOADABLE,      /* the library can be loaded into it (or it could not be read) */
  CTS__ELF_OTHER_KIND,    /* another ELF class or machine (tracer/elf_kind.h) */
  CTS__ELF_RUNTIME_FIRST, /* it links a sanitizer runtime that must come first (above) */
} cts__elf_verdict_t;

/* The program at `path`, both questions in one open and an 8 KiB read at its start, plus the
 * dynamic section's pread for a 64-bit ELF program of this kind (and one for each library
 * name that lies past the first 8 KiB: /bin/dash's, env's, sqlite3's lie within), read into
 * `scratch` (nothing large on the stack). The descriptor is left open (close-on-exec)
 * at *fd, -1 if none: an exec that succeeds closes it for nothing; the caller closes it
 * (by syscall: the preload's close is interposed) if the exec fails. The name of the
 * runtime goes into runtime (size bytes). O_NONBLOCK and O_NOCTTY: an exec of a FIFO or a
 * terminal (which fails) must not wait in this open, nor take a terminal. */
static inline cts__elf_verdict_t cts__elf_examine_in(const char *path, int *fd, char *runtime,
                                                     size_t size, cts__elf_scratch_t *scratch) {
  *fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (*fd < 0) return CTS__ELF_LOADABLE;
  const ssize_t n = pread(*fd, scratch->head, sizeof scratch->head, 0);
  if (n <= 0) return CTS__ELF_LOADABLE;
  if (cts__elf_head_of_another_kind(scratch->head, (size_t)n)) return CTS__ELF_OTHER_KIND;
  if (cts__script_of_another_kind(scratch->head, (size_t)n)) return CTS__ELF_OTHER_KIND;
  return cts__elf_fd_needs_a_runtime_first_in(*fd, scratch->head, (size_t)n, runtime, size, scratch)
             ? CTS__ELF_RUNTIME_FIRST
             : CTS__ELF_LOADABLE;
}

/* cts__elf_examine_in with its scratch on the stack (~76 KiB: `ctfscope record`). */
static inline cts__elf_verdict_t cts__elf_examine(const char *path, int *fd, char *runtime,
                                                  size_t size) {
  cts__elf_scratch_t scratch;
  return cts__elf_examine_in(path, fd, runtime, size, &scratch);
}

#endif /* CTS_TRACER_ELF_RUNTIME_H */
