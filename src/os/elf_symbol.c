/* SPDX-License-Identifier: MIT */
#include "elf_symbol.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Symbols read per pread: the buffer is on the caller's stack. */
#define SYMS_PER_READ 170u

/* Reads exactly @p len bytes at @p off; false on a short read or an error. */
static bool read_at(int fd, void *buf, size_t len, uint64_t off) {
  char *p = buf;
  while (len) {
    const ssize_t n = pread(fd, p, len, (off_t)off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    off += (uint64_t)n;
    len -= (size_t)n;
  }
  return true;
}

/* Whether [off, off + len) lies in a file of @p file_size bytes. */
static bool in_file(uint64_t off, uint64_t len, uint64_t file_size) {
  return off <= file_size && len <= file_size - off;
}

/* Looks for @p vaddr in the symbol table @p symtab (whose strings are in section @p strtab).
 * Returns true and fills @p out when found. */
static bool search_table(int fd, uint64_t file_size, const Elf64_Shdr *symtab,
                         const Elf64_Shdr *strtab, uint64_t vaddr, char *out, size_t size) {
  if (symtab->sh_entsize != sizeof(Elf64_Sym) ||
      !in_file(symtab->sh_offset, symtab->sh_size, file_size) ||
      !in_file(strtab->sh_offset, strtab->sh_size, file_size))
    return false;
  const uint64_t count = symtab->sh_size / sizeof(Elf64_Sym);
  Elf64_Sym syms[SYMS_PER_READ];
  uint32_t name = 0;
  bool found = false, sized = false;
  for (uint64_t i = 0; i < count;) {
    const uint64_t n = count - i < SYMS_PER_READ ? count - i : SYMS_PER_READ;
    if (!read_at(fd, syms, n * sizeof *syms, symtab->sh_offset + i * sizeof *syms)) return false;
    for (uint64_t k = 0; k < n; k++) {
      const Elf64_Sym *const s = &syms[k];
      const unsigned type = ELF64_ST_TYPE(s->st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_shndx == SHN_UNDEF ||
          s->st_name == 0 || vaddr < s->st_value)
        continue;
      /* A sized symbol holding the address wins over a label of size 0 at it. */
      if (s->st_size ? vaddr - s->st_value < s->st_size : vaddr == s->st_value && !found) {
        name = s->st_name;
        found = true;
        sized = s->st_size != 0;
        if (sized) break;
      }
    }
    if (found && sized) break;
    i += n;
  }
  if (!found || name >= strtab->sh_size) return false;
  /* The name, NUL-terminated within the string table. */
  const uint64_t room = strtab->sh_size - name;
  const size_t want = room < size ? (size_t)room : size;
  if (want == 0 || !read_at(fd, out, want, strtab->sh_offset + name)) return false;
  const char *const nul = memchr(out, '\0', want);
  if (!nul) {
    if (want < size) return false; /* the table ends inside the name */
    out[size - 1] = '\0';          /* cut to the caller's room */
  }
  return out[0] != '\0';
}

bool cts_os_elf_function_name(const char *path, uint64_t vaddr, char *out, size_t size) {
  if (!size) return false;
  out[0] = '\0';
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = false;
  struct stat st;
  Elf64_Ehdr eh;
  if (fstat(fd, &st) != 0 || !read_at(fd, &eh, sizeof eh, 0) ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] !=
          (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB) ||
      eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !in_file(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), (uint64_t)st.st_size))
    goto done;
  /* .symtab first (static functions too), then .dynsym (a stripped file keeps it). */
  for (unsigned want = SHT_SYMTAB; !ok; want = SHT_DYNSYM) {
    for (unsigned i = 0; i < eh.e_shnum && !ok; i++) {
      Elf64_Shdr sh, strtab;
      if (!read_at(fd, &sh, sizeof sh, eh.e_shoff + (uint64_t)i * sizeof sh)) goto done;
      if (sh.sh_type != want) continue;
      if (sh.sh_link >= eh.e_shnum ||
          !read_at(fd, &strtab, sizeof strtab, eh.e_shoff + (uint64_t)sh.sh_link * sizeof strtab) ||
          strtab.sh_type != SHT_STRTAB)
        continue;
      ok = search_table(fd, (uint64_t)st.st_size, &sh, &strtab, vaddr, out, size);
    }
    if (want == SHT_DYNSYM) break;
  }
done:
  close(fd);
  if (!ok) out[0] = '\0';
  return ok;
}
