/* SPDX-License-Identifier: MIT */
/* A library whose constructor allocates, which may run before the preload's. */
#include <stdlib.h>
#include <string.h>

char *victim_early_buffer;
const char *victim_early_text(void);

__attribute__((constructor)) static void early_init(void) {
  victim_early_buffer = calloc(1, 64);
  if (victim_early_buffer) strcpy(victim_early_buffer, "early calloc ok");
}

const char *victim_early_text(void) {
  return victim_early_buffer ? victim_early_buffer : "early calloc failed";
}
