/* SPDX-License-Identifier: MIT */
/* The name of the function at an address, from the symbol tables of an ELF file on disk
 * (.symtab, where static functions are, then .dynsym): what labels a thread by its start
 * routine when dladdr(), which sees only exported symbols, cannot. Used by the preload
 * library at pthread_create (preload_pthread.c), so it allocates nothing and maps nothing:
 * the file is read with pread into the caller's stack (4 KiB), and a file changed or
 * truncated under us is a failed look-up, never a fault. Every offset and size in the file
 * is checked against the file's size: it is untrusted input. Thread-safe (no state). */
#ifndef CTS_OS_ELF_SYMBOL_H
#define CTS_OS_ELF_SYMBOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Finds the function symbol (STT_FUNC or STT_GNU_IFUNC, defined) of the 64-bit ELF file at
 * @p path whose range [st_value, st_value + st_size) holds @p vaddr (an address as the
 * file's symbols count them: the run-time address minus the module's load bias) and copies
 * its name into @p out (NUL-terminated, cut to @p size - 1 bytes). A symbol of size 0
 * matches its own address only. Returns false if the file cannot be read, is not a 64-bit
 * ELF file of this machine's byte order, or has no such symbol (a stripped file with no
 * dynamic symbol there). Cost: a scan of the symbol tables, about 24 bytes read per
 * symbol. */
bool cts_os_elf_function_name(const char *path, uint64_t vaddr, char *out, size_t size);

#endif /* CTS_OS_ELF_SYMBOL_H */
