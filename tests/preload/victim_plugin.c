/* SPDX-License-Identifier: MIT */
/* Loaded by victim_dlopen. */
#include <stdlib.h>

void *plugin_allocate(size_t size);
void plugin_release(void *p);

__attribute__((noinline)) void *plugin_allocate(size_t size) {
  void *p = malloc(size);
  __asm__ volatile("" ::: "memory");
  return p;
}

void plugin_release(void *p) {
  free(p);
}
