/* SPDX-License-Identifier: MIT */
/* The examination of an exec'd program (tracer/elf_runtime.h, cts__elf_examine) on ELF
 * files made here: a dynamic section with its DT_NEEDED libasan entry and its DT_STRTAB past
 * the 128th entry (a link with 150 -l libraries: 128 entries were read, and the sanitizer
 * runtime was missed; checked: fails with main's header) is read whole up to the stated
 * bound, CTS__ELF_MAX_DYN entries, in one pread; past the bound, the names are not seen
 * (the bound holds: no read past the scratch). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/tracer/elf_runtime.h"
#include "../test.h"

#ifdef CTS__OWN_ELF_MACHINE
/* Writes at `path` a 64-bit ELF program of this machine whose dynamic section has
 * `entries` entries: `padding` DT_NEEDED "libpad.so" first, then DT_NEEDED "libasan.so.8",
 * DT_STRTAB, DT_STRSZ and DT_NULL (entries = padding + 4). One PT_LOAD maps the whole file
 * at address 0. */
static bool write_program(const char *path, size_t padding) {
  static const char strings[] = "\0libpad.so\0libasan.so.8";
  const size_t entries = padding + 4;
  const size_t dyn_at = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr);
  const size_t str_at = dyn_at + entries * sizeof(Elf64_Dyn);
  const size_t size = str_at + sizeof strings;
  unsigned char *const file = calloc(1, size);
  if (!file) return false;
  Elf64_Ehdr *const eh = (Elf64_Ehdr *)file;
  memcpy(eh->e_ident, ELFMAG, SELFMAG);
  eh->e_ident[EI_CLASS] = ELFCLASS64;
  eh->e_ident[EI_DATA] = ELFDATA2LSB;
  eh->e_ident[EI_VERSION] = EV_CURRENT;
  eh->e_type = ET_DYN;
  eh->e_machine = CTS__OWN_ELF_MACHINE;
  eh->e_version = EV_CURRENT;
  eh->e_phoff = sizeof(Elf64_Ehdr);
  eh->e_ehsize = sizeof(Elf64_Ehdr);
  eh->e_phentsize = sizeof(Elf64_Phdr);
  eh->e_phnum = 2;
  Elf64_Phdr *const ph = (Elf64_Phdr *)(file + sizeof(Elf64_Ehdr));
  ph[0] = (Elf64_Phdr){.p_type = PT_LOAD, .p_flags = PF_R, .p_filesz = size, .p_memsz = size};
  ph[1] = (Elf64_Phdr){.p_type = PT_DYNAMIC,
                       .p_flags = PF_R,
                       .p_offset = dyn_at,
                       .p_vaddr = dyn_at,
                       .p_filesz = entries * sizeof(Elf64_Dyn),
                       .p_memsz = entries * sizeof(Elf64_Dyn)};
  Elf64_Dyn *const dyn = (Elf64_Dyn *)(file + dyn_at);
  for (size_t i = 0; i < padding; i++) dyn[i] = (Elf64_Dyn){DT_NEEDED, {1}};
  dyn[padding] = (Elf64_Dyn){DT_NEEDED, {11}};
  dyn[padding + 1] = (Elf64_Dyn){DT_STRTAB, {str_at}};
  dyn[padding + 2] = (Elf64_Dyn){DT_STRSZ, {sizeof strings}};
  dyn[padding + 3] = (Elf64_Dyn){DT_NULL, {0}};
  memcpy(file + str_at, strings, sizeof strings);
  FILE *const f = fopen(path, "wb");
  const bool written = f && fwrite(file, 1, size, f) == size;
  if (f) fclose(f);
  free(file);
  return written;
}

/* The verdict on a program of `padding` + 4 dynamic entries (its runtime's name into
 * runtime, 64 bytes). */
static cts__elf_verdict_t verdict_with(size_t padding, char *runtime) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/cts_elf_runtime_%d", (int)getpid());
  if (!write_program(path, padding)) return (cts__elf_verdict_t)-1;
  int fd = -1;
  runtime[0] = '\0';
  const cts__elf_verdict_t v = cts__elf_examine(path, &fd, runtime, 64);
  if (fd >= 0) close(fd);
  unlink(path);
  return v;
}

/* The examination's case of a small program: the sanitizer runtime found. */
CTS_TEST(a_few_dynamic_entries_name_the_runtime) {
  char runtime[64];
  CTS_ASSERT_EQ_INT(verdict_with(20, runtime), CTS__ELF_RUNTIME_FIRST);
  CTS_ASSERT_STR_EQ(runtime, "libasan.so.8");
}

/* 150 libraries before the runtime (its DT_STRTAB after them): found (main read 128). */
CTS_TEST(runtime_past_the_128th_dynamic_entry_is_found) {
  char runtime[64];
  CTS_ASSERT_EQ_INT(verdict_with(150, runtime), CTS__ELF_RUNTIME_FIRST);
  CTS_ASSERT_STR_EQ(runtime, "libasan.so.8");
}

/* The bound: a section of exactly CTS__ELF_MAX_DYN entries is read whole; one entry more
 * puts its DT_NULL, DT_STRSZ... past it: its names are not seen, and nothing is read past
 * the scratch (ASan's build). */
CTS_TEST(dynamic_section_read_whole_up_to_the_bound) {
  char runtime[64];
  CTS_ASSERT_EQ_INT(verdict_with(CTS__ELF_MAX_DYN - 4, runtime), CTS__ELF_RUNTIME_FIRST);
  CTS_ASSERT_EQ_INT(verdict_with(CTS__ELF_MAX_DYN - 1, runtime), CTS__ELF_LOADABLE);
  CTS_ASSERT_EQ_INT(verdict_with(CTS__ELF_MAX_DYN + 1000, runtime), CTS__ELF_LOADABLE);
}
#else
CTS_TEST(no_elf_machine_of_this_build) {
  CTS_SKIP("no ELF machine known for this build (tracer/elf_kind.h)");
}
#endif

CTS_TEST_MAIN()
