/* SPDX-License-Identifier: MIT */
/* dlopens the plugin given as argv[1] after tracing started, allocates 44444-byte blocks
 * through it, and closes it. */
#include <dlfcn.h>

#include "victim.h"

int main(int argc, char **argv) {
  victim_quiet_stdio();
  if (argc < 2) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW);
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
  dlclose(lib);
  printf("plugin used\n");
  return 0;
}
