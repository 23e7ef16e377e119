/* SPDX-License-Identifier: MIT */
/* Descriptors (os.h): inputs opened by name (or handed over with cts_os_input_register),
 * and whole buffers written to a descriptor. Apart from input.c, whose readers call zlib and
 * zstd: the preload library needs these two (its task rings, mprof_ring.c), and linking
 * input.c into it would load libz and libzstd into every traced image. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/endian.h"
#include "core/memtrace_wire.h"
#include "os.h"

/* A zstd frame starts with these 4 bytes, little-endian (RFC 8878 §3.1.1); a skippable
 * frame with one of 0x184D2A50-0x184D2A5F (§3.1.2), as our compressed traces do. */
#define ZSTD_FRAME_MAGIC     0xFD2FB528u
#define ZSTD_SKIPPABLE_MAGIC 0x184D2A50u

static struct {
  char *path;
  int fd;
} registered[8];

int cts_os_input_register(const char *path, int fd) {
  for (size_t i = 0; i < sizeof registered / sizeof *registered; i++) {
    if (registered[i].path && strcmp(registered[i].path, path) == 0) {
      close(fd); /* looked at twice: the first descriptor is the one read */
      return 0;
    }
    if (registered[i].path) continue;
    if (!(registered[i].path = strdup(path))) return -ENOMEM;
    registered[i].fd = fd;
    return 0;
  }
  return -ENOMEM;
}

int cts_os_open_input(const char *path) {
  for (size_t i = 0; i < sizeof registered / sizeof *registered; i++)
    if (registered[i].path && strcmp(registered[i].path, path) == 0) {
      const int fd = fcntl(registered[i].fd, F_DUPFD_CLOEXEC, 3);
      return fd >= 0 ? fd : -errno;
    }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  return fd >= 0 ? fd : -errno;
}

int cts_os_fd_write(void *user_data, const void *buf, size_t len) {
  const int fd = (int)(intptr_t)user_data;
  const uint8_t *p = buf;
  while (len) {
    const ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

bool cts_os_fd_holds_other_data(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return false;
  unsigned char head[4];
  const ssize_t n = pread(fd, head, sizeof head, 0);
  if (n < 0) return false;
  const uint32_t magic = n == 4 ? cts_ld_le32(head) : 0;
  return magic != MT_MAGIC && magic != ZSTD_FRAME_MAGIC &&
         (magic & 0xFFFFFFF0u) != ZSTD_SKIPPABLE_MAGIC;
}
