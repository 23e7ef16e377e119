/* SPDX-License-Identifier: MIT */
/* Shared bits of the victim programs run under the preload library. Victims count their
 * own allocation calls and print the counts last, through a static stdio buffer so that
 * stdio itself allocates nothing: at rate 1 the trace must hold exactly these calls. */
#ifndef CTS_VICTIM_H
#define CTS_VICTIM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static char victim_stdout_buffer[1 << 16];

/* Call first in main. */
static inline void victim_quiet_stdio(void) {
  setvbuf(stdout, victim_stdout_buffer, _IOFBF, sizeof victim_stdout_buffer);
}

/* A deterministic generator, so that traced and untraced runs do the same thing. */
static inline uint64_t victim_next(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return *state >> 33;
}

#endif /* CTS_VICTIM_H */
