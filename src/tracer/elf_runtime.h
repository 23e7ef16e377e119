/* SPDX-License-Identifier: MIT */
/* Whether a program file links a sanitizer runtime that must come first in the loader's
 * list of libraries (AddressSanitizer's libasan, HWASan's libhwasan): with the preload
 * library before it in LD_PRELOAD, such a program aborts at its start ("ASan runtime does
 * not come first in initial library list"), so it can only run untraced. Used by `ctfscope
 * record` for the program it starts. Plain functions: no allocation, a few system calls;
 * errno may change. */
#ifndef CTS_TRACER_ELF_RUNTIME_H
#define CTS_TRACER_ELF_RUNTIME_H

#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The file offset of virtual address `vaddr` in the loaded segments `ph` (n of them), or
 * UINT64_MAX. */
static inline uint64_t cts__elf_vaddr_offset(const Elf64_Phdr *ph, unsigned n, Elf64_Addr vaddr) {
  for (unsigned i = 0; i < n; i++)
    if (ph[i].p_type == PT_LOAD && vaddr >= ph[i].p_vaddr && vaddr - ph[i].p_vaddr < ph[i].p_filesz)
      return ph[i].p_offset + (vaddr - ph[i].p_vaddr);
  return UINT64_MAX;
}

/* pread at an offset the file gave: none past what off_t holds. */
static inline ssize_t cts__elf_pread(int fd, void *buf, size_t size, uint64_t offset) {
  return offset > (uint64_t)INT64_MAX - size ? -1 : pread(fd, buf, size, (off_t)offset);
}

/* Whether the 64-bit ELF program at `path` names libasan.so* or libhwasan.so* among its
 * DT_NEEDED libraries; the name goes into runtime (size bytes). False when the file
 * cannot be read, is no 64-bit ELF file or its dynamic section does not make sense (every
 * offset and count is checked: the file is the user's, any bytes). At most 64 program
 * headers and 512 dynamic entries are read. */
static inline bool cts__elf_needs_a_runtime_first(const char *path, char *runtime, size_t size) {
  static const char *const first[] = {"libasan.so", "libhwasan.so"};
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  bool found = false;
  Elf64_Ehdr eh;
  Elf64_Phdr ph[64];
  Elf64_Dyn dyn[512];
  if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phnum == 0 || eh.e_phnum > 64)
    goto done;
  const size_t ph_bytes = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
  if (cts__elf_pread(fd, ph, ph_bytes, eh.e_phoff) != (ssize_t)ph_bytes) goto done;
  const Elf64_Phdr *dynamic = NULL;
  for (unsigned i = 0; i < eh.e_phnum; i++)
    if (ph[i].p_type == PT_DYNAMIC) dynamic = &ph[i];
  if (!dynamic) goto done;
  const size_t dyn_bytes = dynamic->p_filesz < sizeof dyn ? (size_t)dynamic->p_filesz : sizeof dyn;
  const ssize_t got = cts__elf_pread(fd, dyn, dyn_bytes, dynamic->p_offset);
  if (got <= 0) goto done;
  const size_t count = (size_t)got / sizeof(Elf64_Dyn);
  Elf64_Addr strtab = 0;
  Elf64_Xword strsz = 0;
  for (size_t i = 0; i < count && dyn[i].d_tag != DT_NULL; i++) {
    if (dyn[i].d_tag == DT_STRTAB) strtab = dyn[i].d_un.d_ptr;
    if (dyn[i].d_tag == DT_STRSZ) strsz = dyn[i].d_un.d_val;
  }
  const uint64_t strings = cts__elf_vaddr_offset(ph, eh.e_phnum, strtab);
  if (strings == UINT64_MAX || strsz == 0) goto done;
  for (size_t i = 0; i < count && dyn[i].d_tag != DT_NULL && !found; i++) {
    if (dyn[i].d_tag != DT_NEEDED || dyn[i].d_un.d_val >= strsz) continue;
    char name[64] = "";
    if (cts__elf_pread(fd, name, sizeof name - 1, strings + dyn[i].d_un.d_val) <= 0) continue;
    for (size_t k = 0; k < sizeof first / sizeof first[0] && !found; k++)
      if (strncmp(name, first[k], strlen(first[k])) == 0) {
        snprintf(runtime, size, "%s", name);
        found = true;
      }
  }
done:
  close(fd);
  return found;
}

#endif /* CTS_TRACER_ELF_RUNTIME_H */
