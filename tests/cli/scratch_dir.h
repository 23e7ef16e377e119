/* SPDX-License-Identifier: MIT */
/* A test's scratch directory under /tmp, made on first use and removed with everything in
 * it when the test process exits, passed or not. One per process; not thread-safe. */
#ifndef CTS_TEST_SCRATCH_DIR_H
#define CTS_TEST_SCRATCH_DIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char scratch_path[64];

static void scratch_remove(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch_path);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", scratch_path);
}

/* dir/name into buf (the directory made on the first call, named after prefix). */
static inline const char *scratch_file(const char *prefix, const char *name, char *buf,
                                       size_t size) {
  if (!scratch_path[0]) {
    snprintf(scratch_path, sizeof scratch_path, "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(scratch_path)) abort();
    atexit(scratch_remove);
  }
  snprintf(buf, size, "%s/%s", scratch_path, name);
  return buf;
}

#endif /* CTS_TEST_SCRATCH_DIR_H */
