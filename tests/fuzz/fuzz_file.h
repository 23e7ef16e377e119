/* SPDX-License-Identifier: MIT */
/* For the fuzz targets that run code which opens traces by name (the CLI's commands, the
 * report builders): the input as a file, and a private directory for what they write.
 *
 * The input goes into a memory file (memfd_create) named by its /proc/self/fd path, so no
 * input ever reaches a disk and every reader sees a regular, seekable file of exactly the
 * input's bytes. Outputs go into a directory made with mkdtemp on first use and removed,
 * with its files, at exit: never /dev/null, which a command that writes through a
 * temporary file and a rename could replace. Any failure to set these up aborts (the
 * target cannot test anything without them). Not thread-safe: one input at a time. */
#ifndef CTS_FUZZ_FILE_H
#define CTS_FUZZ_FILE_H

#ifndef _GNU_SOURCE
#error "fuzz_file.h needs _GNU_SOURCE (memfd_create) defined before any include"
#endif

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct fuzz_file {
  int fd;        /* the memory file, -1 until first used */
  char path[64]; /* "/proc/self/fd/N" */
} fuzz_file_t;

#define FUZZ_FILE_INIT \
  {                    \
    -1, {              \
      0                \
    }                  \
  }

/* Makes f hold exactly data[0..size) and returns its path. */
static inline const char *fuzz_file_set(fuzz_file_t *f, const uint8_t *data, size_t size) {
  if (f->fd < 0) {
    f->fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (f->fd < 0) abort();
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
  }
  if (ftruncate(f->fd, 0) != 0) abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(f->fd, data + done, size - done, (off_t)done);
    if (n <= 0) abort();
    done += (size_t)n;
  }
  return f->path;
}

static char fuzz_out_dir[64];

static inline void fuzz_out_remove(void) {
  DIR *d = opendir(fuzz_out_dir);
  if (!d) return;
  for (const struct dirent *e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
  rmdir(fuzz_out_dir);
}

/* The path of output `name` in the private directory (a static buffer per call site is
 * not needed: the caller's buffer gets it). */
static inline const char *fuzz_out_path(char *buf, size_t size, const char *name) {
  if (!fuzz_out_dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_out_dir, sizeof fuzz_out_dir, "%s/ctfscope-fuzz-XXXXXX",
             tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
    if (!mkdtemp(fuzz_out_dir)) abort();
    atexit(fuzz_out_remove);
  }
  snprintf(buf, size, "%s/%s", fuzz_out_dir, name);
  return buf;
}

#endif /* CTS_FUZZ_FILE_H */
