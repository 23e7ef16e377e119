/* SPDX-License-Identifier: MIT */
/* The file an exec by a bare name runs: PATH searched as glibc's execvp, execvpe and
 * posix_spawnp search it. Shared by the preload library (its exec hooks, which look at the
 * program before it runs) and `ctfscope record` (the program it starts). Plain function:
 * no allocation, a stat per directory tried and an access for the one found; errno may
 * change. */
#ifndef CTS_TRACER_PROGRAM_PATH_H
#define CTS_TRACER_PROGRAM_PATH_H

#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes at buf (size bytes) the first regular file that may be executed named `name` (no
 * '/') in a directory of `path_list` (a PATH value; NULL: glibc's default "/bin:/usr/bin";
 * an empty entry is the current directory, written as `name` alone), skipping what the
 * exec would skip. False if none is found, or none fits in buf. */
static inline bool cts__program_on_path(const char *path_list, const char *name, char *buf,
                                        size_t size) {
  const size_t name_len = strlen(name);
  for (const char *dir = path_list ? path_list : "/bin:/usr/bin";;) {
    const size_t len = strcspn(dir, ":");
    const size_t prefix = len ? len + 1 : 0;
    if (prefix + name_len < size) {
      memcpy(buf, dir, len);
      if (len) buf[len] = '/';
      memcpy(buf + prefix, name, name_len + 1);
      struct stat st;
      if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return true;
    }
    if (!dir[len]) return false;
    dir += len + 1;
  }
}

#endif /* CTS_TRACER_PROGRAM_PATH_H */
