/* SPDX-License-Identifier: MIT */
/* A program that closes its descriptors before it allocates anything worth sampling, as a
 * daemon does first thing: at a rate of the lazy writer, its session has no writer process
 * yet when the descriptors go (docs/tracing.md, "The lazy writer").
 *
 *   victim_closefds_late closefrom      closefrom(3)
 *   victim_closefds_late close_range    close_range(3, ~0U, 0) (the libc function)
 *   victim_closefds_late loop           close(3) ... close(1023)
 *   victim_closefds_late dup2           dup2 of /dev/null onto the tracer's memfd (found in
 *                                       /proc/self/fd; nothing when there is none)
 *   victim_closefds_late vfork          a vfork'd child (sharing the program's memory, not
 *                                       its descriptors) calls closefrom(3) and exits
 *   victim_closefds_late raw            the close_range system call itself (syscall(2)),
 *                                       which no hook sees
 *   victim_closefds_late full TRACE     limits its files' size (RLIMIT_FSIZE, inherited by
 *                                       a writer made after) to TRACE's length, then
 *                                       closefrom(3): every write past it fails whole
 *                                       (EFBIG), as on a full disk
 *
 * then 20 blocks of 16 MiB (each sampled at 1e-5 but for a chance of 1e-9), freed at
 * once; prints "ok" and exits 0.
 *
 *   victim_closefds_late hot            hot_close: 100000 calls of close(-1) (EBADF), for
 *                                       callgrind (--toggle-collect=hot_close)
 *                                       then as above */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCKS      20
#define BLOCK_BYTES ((size_t)16 << 20)

/* The number of the descriptor whose link names a memfd of ctfscope's, or -1. */
static int tracer_memfd(void) {
  for (int fd = 3; fd < 1024; fd++) {
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strncmp(target, "/memfd:", 7) == 0) return fd;
  }
  return -1;
}

#define HOT_CALLS 100000u

static void *idle_thread(void *arg) {
  return arg;
}

__attribute__((noinline)) static void hot_close(void) {
  for (unsigned i = 0; i < HOT_CALLS; i++) close(-1);
}

int main(int argc, char **argv) {
  if (argc < 2) return 1;
  const char *const mode = argv[1];
  if (strcmp(mode, "closefrom") == 0) {
    closefrom(3);
  } else if (strcmp(mode, "raw") == 0) {
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) return 3;
  } else if (strcmp(mode, "full") == 0 && argc == 3) {
    struct stat st;
    if (stat(argv[2], &st) != 0) return 9;
    const struct rlimit limit = {(rlim_t)st.st_size, RLIM_INFINITY};
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails (EFBIG), it does not kill */
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 9;
    closefrom(3);
  } else if (strcmp(mode, "close_range") == 0) {
    if (close_range(3, ~0U, 0) != 0) return 3;
  } else if (strcmp(mode, "loop") == 0) {
    for (int fd = 3; fd < 1024; fd++) close(fd);
  } else if (strcmp(mode, "dup2") == 0) {
    const int memfd = tracer_memfd();
    const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0) return 4;
    if (memfd >= 0 && dup2(null, memfd) != memfd) return 5;
    close(null);
  } else if (strcmp(mode, "vfork") == 0) {
    const pid_t child = vfork();
    if (child == 0) {
      closefrom(3);
      _exit(0);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || status != 0) return 8;
  } else if (strcmp(mode, "hot") == 0) {
    /* Multi-threaded either way (a writer thread when traced): glibc's close takes its
     * cancellable path then, in both runs alike. */
    pthread_t thread;
    if (pthread_create(&thread, NULL, idle_thread, NULL) != 0 || pthread_join(thread, NULL) != 0)
      return 7;
    hot_close();
  } else {
    return 2;
  }
  for (int i = 0; i < BLOCKS; i++) {
    char *const p = malloc(BLOCK_BYTES);
    if (!p) return 6;
    p[0] = (char)i;
    free(p);
  }
  printf("ok\n");
  return 0;
}
