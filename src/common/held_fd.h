/* SPDX-License-Identifier: MIT */
/* Descriptors the tracer holds inside the traced program: the trace file or socket of a
 * writer thread, the writer process's pipe and pidfd, the service's sockets.
 *
 * A program may close every descriptor it did not open itself (closefrom(3), close_range,
 * Python's os.closerange; daemons do it when they start) and then get the same numbers
 * back for files and sockets of its own. Writing to, polling, accepting on or closing such
 * a number would write the trace into the program's file, steal its clients or close its
 * file under it. So the tracer remembers each descriptor's file (device and inode, from
 * fstat) when it opens it, and uses or closes the number only while it still names that
 * file. What remains is the moment between the check and the use: the program would have
 * to close and reopen the number in those few instructions, on another thread.
 *
 * Pipes, sockets and files have inodes of their own. A pidfd shares one anonymous inode
 * with other pidfds (and, before Linux 6.9, with eventfds and the like), so the check
 * there only tells a closed or reused-for-a-file number from a pidfd.
 *
 * Plain functions of the caller's descriptor; thread-safety is the caller's (each
 * descriptor has one owner). No allocation, async-signal-safe. */
#ifndef CTS_COMMON_HELD_FD_H
#define CTS_COMMON_HELD_FD_H

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

/* Which file a descriptor named when the tracer took it; {0, 0}: unknown (fstat failed),
 * which no open descriptor matches. */
typedef struct cts_fd_ident {
  dev_t dev;
  ino_t ino;
} cts_fd_ident_t;

/* The identity of what `fd` names now. */
static inline cts_fd_ident_t cts_fd_ident(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return (cts_fd_ident_t){0, 0};
  return (cts_fd_ident_t){st.st_dev, st.st_ino};
}

/* The identity of an fstat result (for callers that fstat anyway). */
static inline cts_fd_ident_t cts_fd_ident_of(const struct stat *st) {
  return (cts_fd_ident_t){st->st_dev, st->st_ino};
}

/* Whether `fd` still names the file it named when `id` was taken. */
static inline bool cts_fd_still(int fd, cts_fd_ident_t id) {
  if (fd < 0 || (id.dev == 0 && id.ino == 0)) return false;
  const cts_fd_ident_t now = cts_fd_ident(fd);
  return now.dev == id.dev && now.ino == id.ino;
}

/* Closes *fd if it still names the file of `id` (never the program's file that took its
 * number), and forgets it either way. */
static inline void cts_fd_close_held(int *fd, cts_fd_ident_t id) {
  if (*fd >= 0 && cts_fd_still(*fd, id)) close(*fd);
  *fd = -1;
}

/* `fd` moved off the standard descriptors: a program started with one of 0-2 closed
 * (`prog >&-`) would otherwise find the tracer's file there and write its output into
 * it, where it should get EBADF. Returns a close-on-exec descriptor >= 3 naming the same
 * file (fd itself if already >= 3), or -1 with `fd` closed if none could be made. */
static inline int cts_fd_off_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

#endif
