/* SPDX-License-Identifier: MIT */
/* A program that finds its auxiliary vector as Go's runtime does (runtime.sysargs, in the
 * dynamically linked Go programs, those with cgo): past the NULL that ends the environment
 * that follows argv on the initial stack, as (type, value) pairs up to AT_NULL; with no
 * pair there, from /proc/self/auxv (here getauxval, which glibc keeps from the start).
 * Prints "page size N" and exits 0 if it found AT_PAGESZ, as Go must, or "no page size"
 * and exits 1, where Go dies ("fatal error: failed to get system page size"). */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/auxv.h>

int main(int argc, char **argv) {
  char **p = argv + argc + 1;
  while (*p) p++;
  const uintptr_t *const auxv = (const uintptr_t *)(p + 1);
  size_t pairs = 0;
  uintptr_t page_size = 0;
  for (; auxv[2 * pairs] != AT_NULL; pairs++)
    if (auxv[2 * pairs] == AT_PAGESZ) page_size = auxv[2 * pairs + 1];
  if (pairs == 0) page_size = getauxval(AT_PAGESZ);
  if (page_size == 0) {
    printf("no page size\n");
    return 1;
  }
  printf("page size %lu\n", (unsigned long)page_size);
  return 0;
}
