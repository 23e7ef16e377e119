/* SPDX-License-Identifier: MIT */
/* Thread labels from ELF symbol tables (src/os/elf_symbol.c): a static function of this very
 * executable is named from its .symtab, and files that are not ELF, cut short or damaged
 * are failed look-ups, never a crash or a read outside the file. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include "os/elf_symbol.h"
#include "../test.h"

/* Static and not inlined: only .symtab names it. */
__attribute__((noinline)) static int a_static_routine_name(int x) {
  return x * 3 + 1;
}

static int (*volatile keep)(int) = a_static_routine_name;

/* The address of a_static_routine_name as this executable's symbols count it. */
static uint64_t own_vaddr(void) {
  void *addr;
  memcpy(&addr, (void *)&keep, sizeof addr);
  Dl_info info;
  struct link_map *map = NULL;
  if (!dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) abort();
  return (uint64_t)((uintptr_t)addr - map->l_addr);
}

static void tmp_file(char *path, const void *data, size_t len) {
  strcpy(path, "/tmp/cts-elf-symbol-XXXXXX");
  const int fd = mkstemp(path);
  if (fd < 0 || write(fd, data, len) != (ssize_t)len) abort();
  close(fd);
}

static void *slurp_self(size_t *len) {
  const int fd = open("/proc/self/exe", O_RDONLY);
  const off_t size = lseek(fd, 0, SEEK_END);
  void *data = malloc((size_t)size);
  if (fd < 0 || !data || pread(fd, data, (size_t)size, 0) != size) abort();
  close(fd);
  *len = (size_t)size;
  return data;
}

CTS_TEST(static_functions_are_named_from_symtab) {
  CTS_ASSERT(keep(1) == 4);
  char name[64];
  CTS_ASSERT(cts_os_elf_function_name("/proc/self/exe", own_vaddr(), name, sizeof name));
  CTS_ASSERT_STR_EQ(name, "a_static_routine_name");
  /* Inside the function, not only at its entry. */
  CTS_ASSERT(cts_os_elf_function_name("/proc/self/exe", own_vaddr() + 1, name, sizeof name));
  CTS_ASSERT_STR_EQ(name, "a_static_routine_name");
  /* Cut to the caller's room. */
  char small[7];
  CTS_ASSERT(cts_os_elf_function_name("/proc/self/exe", own_vaddr(), small, sizeof small));
  CTS_ASSERT_STR_EQ(small, "a_stat");
  /* No function at address 0. */
  CTS_ASSERT(!cts_os_elf_function_name("/proc/self/exe", 0, name, sizeof name));
  CTS_ASSERT_STR_EQ(name, "");
}

CTS_TEST(bad_files_are_failed_look_ups) {
  char name[64], path[64];
  CTS_ASSERT(!cts_os_elf_function_name("/nonexistent/file", 0x1000, name, sizeof name));
  CTS_ASSERT(!cts_os_elf_function_name("/proc/self/exe", own_vaddr(), name, 0));
  tmp_file(path, "not an ELF file at all, just text", 33);
  CTS_ASSERT(!cts_os_elf_function_name(path, own_vaddr(), name, sizeof name));
  unlink(path);

  size_t len;
  uint8_t *self = slurp_self(&len);
  /* Cut anywhere: the section headers (at the end) or the tables are missing. */
  const size_t cuts[] = {0, 16, 64, 4096, len / 2, len - 64, len - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    tmp_file(path, self, cuts[i]);
    CTS_ASSERT_MSG(!cts_os_elf_function_name(path, own_vaddr(), name, sizeof name),
                   "a file cut at %zu bytes named '%s'", cuts[i], name);
    unlink(path);
  }
  /* Section headers pointing past the end of the file, and symbol tables whose offsets
   * and sizes are garbage: every header's fields are overwritten in turn. */
  Elf64_Ehdr eh;
  memcpy(&eh, self, sizeof eh);
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr *const sh = (Elf64_Shdr *)(self + eh.e_shoff) + i;
    const Elf64_Shdr saved = *sh;
    sh->sh_offset = len - 8;
    sh->sh_size = UINT64_MAX - 4;
    sh->sh_link = 0xffff;
    tmp_file(path, self, len);
    /* Whatever it answers, it answers without reading out of bounds (ASan builds). */
    (void)cts_os_elf_function_name(path, own_vaddr(), name, sizeof name);
    unlink(path);
    *sh = saved;
  }
  ((Elf64_Ehdr *)self)->e_shoff = len - 10;
  tmp_file(path, self, len);
  CTS_ASSERT(!cts_os_elf_function_name(path, own_vaddr(), name, sizeof name));
  unlink(path);
  free(self);
}

CTS_TEST_MAIN()
