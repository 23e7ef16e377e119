/* SPDX-License-Identifier: MIT */
/* A program that closes every descriptor it did not open itself, as daemons do when they
 * start (closefrom(3), close_range, Python's os.closerange), and then opens files of its
 * own, which take the same numbers. The tracer's descriptors among them (the writer
 * process's pipe, a writer thread's trace file, the service's sockets) are gone: it must
 * neither write into, nor close, the program's files, and the trace must go on.
 *
 *   victim_closefds stay DIR         11 x 55555 bytes; closes 3 and up (the raw system
 *                                    call: no library function to interpose); waits
 *                                    0.2 s; opens
 *                                    DIR/user0..7 and writes "user data\n" to each;
 *                                    1000 x 44444 bytes; "late\n" to each; exits 0 with
 *                                    the files open. Prints "fds N..." (their numbers).
 *   victim_closefds exec DIR         the same up to the 1000 blocks, then execs itself
 *                                    as `after-exec DIR N...` with the files open
 *   victim_closefds after-exec DIR N...  10 x 66666 bytes; checks that each N still names
 *                                    DIR/userK (exit 3 if not) and writes "after exec\n";
 *                                    exits 7 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FILES 8

static void *volatile keep[1100];

static void allocate(size_t n, size_t size, size_t kept) {
  for (size_t i = 0; i < n; i++) {
    char *p = malloc(size);
    if (!p) exit(2);
    memset(p, (int)i, size);
    if (i < kept)
      keep[i] = p;
    else
      free(p);
  }
}

static void write_all(int fd, const char *text) {
  if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) exit(4);
}

static void user_path(char *buf, size_t size, const char *dir, int k) {
  snprintf(buf, size, "%s/user%d", dir, k);
}

static int after_exec(int argc, char **argv) {
  allocate(10, 66666, 10);
  for (int k = 0; k < FILES && 3 + k < argc; k++) {
    const int fd = atoi(argv[3 + k]);
    char path[4096];
    user_path(path, sizeof path, argv[2], k);
    struct stat by_fd, by_path;
    if (fstat(fd, &by_fd) != 0 || stat(path, &by_path) != 0 || by_fd.st_ino != by_path.st_ino ||
        by_fd.st_dev != by_path.st_dev)
      return 3;
    write_all(fd, "after exec\n");
  }
  printf("ok\n");
  return 7;
}

int main(int argc, char **argv) {
  if (argc < 3) return 1;
  if (strcmp(argv[1], "after-exec") == 0) return after_exec(argc, argv);
  allocate(11, 55555, 11);
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) return 5;
  /* Long enough for a writer process to look at its pipe (every 50 ms at most). */
  usleep(200 * 1000);
  int fds[FILES];
  for (int k = 0; k < FILES; k++) {
    char path[4096];
    user_path(path, sizeof path, argv[2], k);
    fds[k] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* not close-on-exec */
    if (fds[k] < 0) return 6;
    write_all(fds[k], "user data\n");
  }
  allocate(1000, 44444, 10);
  printf("fds");
  for (int k = 0; k < FILES; k++) printf(" %d", fds[k]);
  printf("\n");
  fflush(stdout);
  if (strcmp(argv[1], "exec") == 0) {
    char *args[4 + FILES] = {argv[0], "after-exec", argv[2]};
    char numbers[FILES][16];
    for (int k = 0; k < FILES; k++) {
      snprintf(numbers[k], sizeof numbers[k], "%d", fds[k]);
      args[3 + k] = numbers[k];
    }
    args[3 + FILES] = NULL;
    execv(argv[0], args);
    return 8;
  }
  for (int k = 0; k < FILES; k++) write_all(fds[k], "late\n");
  return 0;
}
