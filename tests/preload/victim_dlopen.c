/* SPDX-License-Identifier: MIT */
/* dlopens the plugin given as argv[1] after tracing started, allocates 44444-byte blocks
 * through it, and closes it. With argv[2] "deepbind": the plugin is opened with
 * RTLD_DEEPBIND (as PHP opens its extensions), frees blocks the program allocated and the
 * program frees blocks it allocated: the plugin's malloc and free must be the program's.
 * argv[1] may be a bare file name, found through the program's RUNPATH (the directory of
 * the plugin, set by the build): dlopen searches the RUNPATH of its caller. With argv[2]
 * "dlmopen": the plugin is opened in a new link-map namespace (dlmopen(LM_ID_NEWLM)), which
 * has its own C library: its blocks are allocated and freed there, never across (a block
 * freed across namespaces is freed by another C library's allocator, and the program
 * dies, traced or not). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "victim.h"

int main(int argc, char **argv) {
  victim_quiet_stdio();
  if (argc < 2) return 2;
  const int deepbind = argc > 2 && strcmp(argv[2], "deepbind") == 0;
  const int namespace = argc > 2 && strcmp(argv[2], "dlmopen") == 0;
  void *lib = namespace ? dlmopen(LM_ID_NEWLM, argv[1], RTLD_NOW)
                        : dlopen(argv[1], RTLD_NOW | (deepbind ? RTLD_DEEPBIND : 0));
  if (!lib) {
    printf("dlopen failed\n");
    return 3;
  }
  void *(*allocate)(size_t);
  void (*release)(void *);
  *(void **)&allocate = dlsym(lib, "plugin_allocate");
  *(void **)&release = dlsym(lib, "plugin_release");
  if (!allocate || !release) return 4;
  for (int i = 0; i < 20; i++) release(allocate(44444));
  if (deepbind) {
    for (int i = 0; i < 20; i++) release(malloc(33333));
    for (int i = 0; i < 20; i++) free(allocate(33333));
  }
  dlclose(lib);
  printf("plugin used\n");
  return 0;
}
