/* SPDX-License-Identifier: MIT */
/* Runs a command for CLI tests: captures stdout and stderr into memory (or stdout into a
 * file), enforces a timeout (a hang is a failure, not a stuck test run) and reports the
 * exit code or the signal. */
#ifndef CTS_RUN_CMD_H
#define CTS_RUN_CMD_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct run_result {
  char *out, *err; /* NUL-terminated captures (out is NULL when redirected to a file) */
  size_t out_len, err_len;
  int exit_code; /* -1 if killed by a signal */
  int signal;    /* the signal, or 0 */
  bool timed_out;
} run_result_t;

static void run_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n) {
  if (*len + n + 1 > *cap) {
    while (*len + n + 1 > *cap) *cap = *cap ? *cap * 2 : 4096;
    *buf = realloc(*buf, *cap);
  }
  memcpy(*buf + *len, p, n);
  *len += n;
  (*buf)[*len] = '\0';
}

/* argv is NULL-terminated; stdout_path NULL = capture. Returns false if it cannot start. */
static inline bool run_cmd(char *const argv[], const char *stdout_path, int timeout_s,
                           run_result_t *r) {
  memset(r, 0, sizeof *r);
  int out_pipe[2] = {-1, -1}, err_pipe[2];
  if ((!stdout_path && pipe(out_pipe) != 0) || pipe(err_pipe) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (stdout_path) {
      const int fd = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) _exit(127);
      dup2(fd, 1);
    } else {
      dup2(out_pipe[1], 1);
    }
    dup2(err_pipe[1], 2);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execv(argv[0], argv);
    _exit(127);
  }
  if (!stdout_path) close(out_pipe[1]);
  close(err_pipe[1]);
  size_t out_cap = 0, err_cap = 0;
  run_append(&r->err, &r->err_len, &err_cap, "", 0);
  if (!stdout_path) run_append(&r->out, &r->out_len, &out_cap, "", 0);
  const time_t deadline = time(NULL) + timeout_s;
  struct pollfd fds[2] = {{err_pipe[0], POLLIN, 0}, {stdout_path ? -1 : out_pipe[0], POLLIN, 0}};
  int open_fds = stdout_path ? 1 : 2;
  while (open_fds > 0) {
    const int left = (int)(deadline - time(NULL));
    if (left <= 0) {
      kill(pid, SIGKILL);
      r->timed_out = true;
      break;
    }
    if (poll(fds, 2, left * 1000) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char tmp[65536];
      const ssize_t n = read(fds[i].fd, tmp, sizeof tmp);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_fds--;
      } else if (i == 0) {
        run_append(&r->err, &r->err_len, &err_cap, tmp, (size_t)n);
      } else {
        run_append(&r->out, &r->out_len, &out_cap, tmp, (size_t)n);
      }
    }
  }
  for (int i = 0; i < 2; i++)
    if (fds[i].fd >= 0) close(fds[i].fd);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    r->exit_code = -1;
    r->signal = WTERMSIG(status);
  } else {
    r->exit_code = WEXITSTATUS(status);
  }
  return true;
}

static inline void run_result_free(run_result_t *r) {
  free(r->out);
  free(r->err);
  memset(r, 0, sizeof *r);
}

#endif /* CTS_RUN_CMD_H */
