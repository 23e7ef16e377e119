/* SPDX-License-Identifier: MIT */
/* Runs ctfscope with standard output on a pseudo-terminal, as a person at a terminal does:
 * the commands escape names, fit rows and show progress only there. Not thread-safe. */
#ifndef CTS_TEST_PTY_RUN_H
#define CTS_TEST_PTY_RUN_H

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Runs CTS_TEST_CTFSCOPE with args (NULL-terminated, at most 14, without the binary), its
 * standard output on a raw pseudo-terminal of `columns` columns (0: the terminal's own
 * size, none) and without $COLUMNS when columns is given; returns its output (malloc'd,
 * NULL when no terminal could be made). */
static inline char *pty_run(unsigned short columns, const char *const *args) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return NULL;
  const char *name = ptsname(master);
  if (!name) return NULL;
  const pid_t pid = fork();
  if (pid == 0) {
    const int slave = open(name, O_RDWR | O_NOCTTY);
    if (slave < 0) _exit(127);
    struct termios t;
    if (tcgetattr(slave, &t) == 0) {
      cfmakeraw(&t); /* the bytes as written, no newline translation */
      tcsetattr(slave, TCSANOW, &t);
    }
    if (columns) {
      const struct winsize ws = {.ws_row = 50, .ws_col = columns};
      ioctl(slave, TIOCSWINSZ, &ws);
      unsetenv("COLUMNS");
    }
    dup2(slave, STDOUT_FILENO);
    char *argv[16] = {CTS_TEST_CTFSCOPE};
    for (size_t i = 0; args[i] && i < 14; i++) argv[i + 1] = (char *)args[i];
    execv(CTS_TEST_CTFSCOPE, argv);
    _exit(127);
  }
  size_t len = 0, cap = 1 << 16;
  char *out = malloc(cap);
  for (;;) {
    if (len + 4096 > cap) out = realloc(out, cap *= 2);
    const ssize_t n = read(master, out + len, cap - len - 1);
    if (n <= 0) break; /* EIO once the child has exited and closed the terminal */
    len += (size_t)n;
  }
  out[len] = 0;
  close(master);
  int status;
  waitpid(pid, &status, 0);
  return out;
}

#endif /* CTS_TEST_PTY_RUN_H */
