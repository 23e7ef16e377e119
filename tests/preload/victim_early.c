/* SPDX-License-Identifier: MIT */
/* calloc and free around the tracer's initialisation: in a library constructor, in the
 * program's own constructors (highest priority first), and in main. */
#include "victim.h"

const char *victim_early_text(void);
extern char *victim_early_buffer;
static void *from_constructor;

__attribute__((constructor(101))) static void first_constructor(void) {
  from_constructor = calloc(10, 10);
}

int main(void) {
  victim_quiet_stdio();
  printf("%s\n", victim_early_text());
  free(from_constructor);
  free(victim_early_buffer);
  free(calloc(3, 1000));
  printf("done\n");
  return 0;
}
