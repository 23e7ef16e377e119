/* SPDX-License-Identifier: MIT */
/* Finds the real executable behind a shell query for tests that run Debian's programs. */
#ifndef CTS_TEST_FIND_PROGRAM_H
#define CTS_TEST_FIND_PROGRAM_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The executable named by the first line `query` prints (e.g. "command -v sqlite3"),
 * resolved through links: a pyenv-style shim is a script, whose trace would be the
 * shell's. False if the query prints nothing or names no executable file. */
static inline bool find_program(const char *query, char *out, size_t size) {
  FILE *p = popen(query, "r");
  char line[PATH_MAX] = "";
  const bool got = p && fgets(line, sizeof line, p) != NULL;
  if (p) pclose(p);
  line[strcspn(line, "\n")] = '\0';
  char resolved[PATH_MAX];
  if (!got || !line[0] || !realpath(line, resolved) || access(resolved, X_OK) != 0) return false;
  snprintf(out, size, "%s", resolved);
  return true;
}

#endif /* CTS_TEST_FIND_PROGRAM_H */
