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
#include <sys/resource.h>
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

/* A descriptor limit (the soft RLIMIT_NOFILE) up to which the tracer's descriptors are set
 * at its top: the kernel's table of a process's descriptors spans the highest one open, and
 * each fork copies it (a descriptor at 20000 costs a shell ~160 kB copied per fork); at
 * 4096 and below, ~32 kB at most. Above it, a program's limit is large enough that the
 * tracer's few descriptors cost it nothing it could notice. */
#define CTS_FD_ASIDE_LIMIT 4096

/* A descriptor limit at most this, soft and hard alike, leaves the tracer no descriptor
 * outside the program's: its two or three would be a good part of them (`ulimit -n 5`,
 * which sets both: `sort FILE` failed "Too many open files" traced). The preload then does
 * not trace, and says so. */
#define CTS_FD_TIGHT_LIMIT 64

/* Whether the descriptor limit is tight (above); then *limit: its value. */
static inline bool cts_fd_limit_is_tight(unsigned long long *limit) {
  struct rlimit now;
  if (getrlimit(RLIMIT_NOFILE, &now) != 0 || now.rlim_cur < now.rlim_max ||
      now.rlim_cur > CTS_FD_TIGHT_LIMIT)
    return false;
  *limit = (unsigned long long)now.rlim_cur;
  return true;
}

/* A batch of moves (cts_fd_set_aside_in): the limit read once, raised at the first move
 * that needs it and put back once, by cts_fd_aside_end, after the last. A session's start
 * sets aside its memfd and trace file in one batch: 4 system calls on the limit where one
 * move at a time made 8 (~0.013 ms an image on an exec chain). Zero-initialised; the
 * caller's, one thread's. */
typedef struct cts_fd_aside {
  struct rlimit limit; /* as read, put back by cts_fd_aside_end */
  bool read;           /* the limit was asked for (once) */
  bool readable;       /* and known */
  bool raise_tried;    /* the soft limit's raise was tried (once) */
  bool raised;         /* and is in force: cts_fd_aside_end puts it back */
} cts_fd_aside_t;

/* `fd` set aside, out of the numbers the program counts on, as a close-on-exec descriptor
 * naming the same file (fd itself if it stays), or -1 with `fd` closed if none could be made.
 * A program under a small `ulimit -n` opening files until EMFILE got 2-4 fewer traced than
 * untraced (a shell script under `ulimit -n 8` failed its redirections), and its first file
 * was not 3. Where the limit is at most CTS_FD_ASIDE_LIMIT:
 *
 * - above the limit, when the hard limit leaves room: the limit bounds the numbers new
 *   descriptors take, not those already open, so the soft limit is raised for the moves and
 *   put back (cts_fd_aside_end). The program then gets every descriptor it would have
 *   untraced;
 * - else (the soft limit is the hard limit) at its top (its last 16 numbers): the program
 *   loses them only when it uses nearly all of its descriptors.
 *
 * Never on 0-2 in any case: a program started with one of them closed (`prog >&-`) would
 * find the tracer's file there and write its output into it, where it should get EBADF.
 *
 * Another thread that reads or sets RLIMIT_NOFILE while the limit is raised sees the raised
 * limit, or has its setting undone: the tracer's descriptors are made at the start of a
 * session (before main, in one thread) and at its first sample. */
static inline int cts_fd_set_aside_in(cts_fd_aside_t *batch, int fd) {
  if (fd < 0) return fd;
  if (!batch->read) {
    batch->read = true;
    batch->readable = getrlimit(RLIMIT_NOFILE, &batch->limit) == 0;
  }
  const struct rlimit limit = batch->limit;
  int lowest = 3;
  if (batch->readable && limit.rlim_cur <= CTS_FD_ASIDE_LIMIT && (rlim_t)fd < limit.rlim_cur) {
    const int soft = (int)limit.rlim_cur;
    if (limit.rlim_cur < limit.rlim_max && !batch->raise_tried) {
      batch->raise_tried = true;
      /* Room for the session's few descriptors (each takes the lowest free number above). */
      const struct rlimit raised = {
          limit.rlim_max - limit.rlim_cur < 64 ? limit.rlim_max : limit.rlim_cur + 64,
          limit.rlim_max};
      batch->raised = setrlimit(RLIMIT_NOFILE, &raised) == 0;
    }
    if (batch->raised) {
      const int moved = fcntl(fd, F_DUPFD_CLOEXEC, soft);
      if (moved >= 0) {
        close(fd);
        return moved;
      }
    }
    if (soft - 16 > lowest) lowest = soft - 16;
  }
  if (fd >= lowest) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, lowest);
  if (moved < 0 && fd > 2) return fd; /* the top is full: where it is */
  close(fd);
  return moved;
}

/* The end of a batch: the limit put back if it was raised. */
static inline void cts_fd_aside_end(cts_fd_aside_t *batch) {
  if (batch->raised) setrlimit(RLIMIT_NOFILE, &batch->limit);
  batch->raised = false;
  batch->raise_tried = false;
}

/* One move alone: a batch of one. */
static inline int cts_fd_set_aside(int fd) {
  cts_fd_aside_t batch = {0};
  const int moved = cts_fd_set_aside_in(&batch, fd);
  cts_fd_aside_end(&batch);
  return moved;
}

#endif
