/* SPDX-License-Identifier: MIT */
/* ctfscope fetch: connects to a program that serves its trace (service mode), saves the
 * trace as it streams, and stops cleanly on Ctrl-C. */
#define _GNU_SOURCE /* pipe2() */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../collector/trace_sink.h"
#include "../common/clock.h"
#include "../os/net.h"
#include "cli.h"
#include "cmd_net.h"

static const char help[] =
    "Usage: ctfscope fetch [OPTIONS] HOST:PORT\n"
    "\n"
    "Connect to a traced program in service mode (it listens and serves its trace to one\n"
    "client at a time) and save the trace as it streams: to FILE, or by default to\n"
    "PROGRAM.PID.STARTTIME.ctf in the current directory, named from the trace's header.\n"
    "The stream is checked as it arrives, and the file keeps everything up to the last\n"
    "complete packet, so it is a valid trace however the connection ends.\n"
    "\n"
    "Ctrl-C ends the fetch: the connection is half-closed, which asks the program to stop\n"
    "tracing; what it still sends within the --drain time is saved. A second Ctrl-C stops\n"
    "at once.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE        where to save the trace (replaced if it exists)\n"
    "      --connect-timeout SECS  give up connecting after SECS seconds (default 10)\n"
    "      --drain SECS         after Ctrl-C, wait at most SECS seconds of silence for the\n"
    "                           end of the stream (default 2)\n"
    "      --validate LEVEL     how deeply the stream is checked as it arrives: packets\n"
    "                           (headers and framing), events (every event decoded), or\n"
    "                           full (events and backtraces; the default)\n"
    "  -q, --quiet              no progress line and no summary\n"
    "  -h, --help               show this help\n"
    "\n"
    "HOST:PORT is a name or address with a port: localhost:4242, 10.0.0.5:4242,\n"
    "[::1]:4242.\n"
    "\n"
    "Exit status: 0 when a trace was saved (also after Ctrl-C), 1 when the stream turned\n"
    "invalid (the valid part is saved), 2 for a usage error, 3 when the connection failed\n"
    "or ended before a trace header arrived, or the file cannot be written.\n";

typedef struct fetch_opts {
  const char *output;
  uint32_t connect_timeout_ms, drain_ms;
  cts_sink_validate_t validate;
  bool quiet;
} fetch_opts_t;

static int on_option(void *ctx, int opt, const char *arg) {
  fetch_opts_t *o = ctx;
  switch (opt) {
    case 'o':
      o->output = arg;
      break;
    case 'C':
      if (!cli_net_parse_seconds(arg, &o->connect_timeout_ms))
        return cli_usage_error("--connect-timeout needs seconds, not '%s'", arg);
      break;
    case 'D':
      if (!cli_net_parse_seconds(arg, &o->drain_ms))
        return cli_usage_error("--drain needs seconds, not '%s'", arg);
      break;
    case 'V':
      if (!cts_sink_validate_parse(arg, &o->validate))
        return cli_usage_error("--validate takes packets, events or full, not '%s'", arg);
      break;
    case 'q':
      o->quiet = true;
      break;
  }
  return -1;
}

static int wake_pipe[2] = {-1, -1};
static volatile sig_atomic_t interrupts;

static void on_signal(int sig) {
  (void)sig;
  const int saved = errno;
  interrupts++;
  const char x = 'i';
  if (write(wake_pipe[1], &x, 1) < 0) { /* the pipe already holds a wake-up */
  }
  errno = saved;
}

typedef struct progress {
  bool active, shown;
  int64_t start_ms, last_ms;
} progress_t;

static void progress_show(progress_t *p, const cts_sink_t *s, int64_t now, bool force) {
  if (!p->active || (!force && now - p->last_ms < 250)) return;
  p->last_ms = now;
  p->shown = true;
  const double secs = (double)(now - p->start_ms) / 1000.0;
  const uint64_t bytes = cts_sink_received(s);
  char a[32], b[32], r[32];
  uint64_t count;
  const char *what = cts_sink_count(s, &count);
  fprintf(stderr, "\r\033[K%s: %s, %s %s, %s/s", cli_command(),
          cli_human_bytes((double)bytes, a, sizeof a), cli_grouped(count, b, sizeof b), what,
          cli_human_bytes(secs > 0 ? (double)bytes / secs : 0, r, sizeof r));
}

static void progress_done(progress_t *p) {
  if (p->shown) fputs("\r\033[K", stderr);
}

/* Splits FILE into its directory (opened) and its name in it. */
static int open_output_dir(const char *path, int *dir_fd, const char **name) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    *dir_fd = AT_FDCWD;
    *name = path;
    return 0;
  }
  char dir[4096];
  const size_t n = slash == path ? 1 : (size_t)(slash - path);
  if (n >= sizeof dir) return -ENAMETOOLONG;
  memcpy(dir, path, n);
  dir[n] = '\0';
  *name = slash + 1;
  *dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return *dir_fd < 0 ? -errno : 0;
}

int cmd_fetch(int argc, char **argv) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"connect-timeout", required_argument, NULL, 'C'},
      {"drain", required_argument, NULL, 'D'},
      {"validate", required_argument, NULL, 'V'},
      CLI_LONGOPT_QUIET,
      {0},
  };
  fetch_opts_t o = {
      .connect_timeout_ms = 10000, .drain_ms = 2000, .validate = CTS_SINK_VALIDATE_FULL};
  int first;
  const int rc = cli_parse(argc, argv, "o:q", longopts, help, on_option, &o, &first);
  if (rc >= 0) return rc;
  if (first >= argc) return cli_usage_error("no HOST:PORT given");
  if (first + 1 < argc) return cli_usage_error("unexpected argument '%s'", argv[first + 1]);
  const char *target = argv[first];
  cts_net_addr_t addr;
  char err[CTS_NET_ERR_LEN];
  if (cts_net_parse_connect(target, &addr, err, sizeof err) != 0) return cli_usage_error("%s", err);
  int dir_fd = AT_FDCWD;
  const char *name = NULL;
  if (o.output) {
    const int e = open_output_dir(o.output, &dir_fd, &name);
    if (e || !*name) {
      cli_error("cannot write to '%s': %s", o.output,
                e ? cts_os_strerror(e) : "it names a directory");
      /* A directory that cannot be opened is an I/O error like any file's (exit 3). */
      return e ? CLI_EXIT_IO : CLI_EXIT_USAGE;
    }
  }

  int fd;
  int e = cts_net_connect(&addr, (int)o.connect_timeout_ms, &fd);
  if (e) {
    cli_error("cannot connect to %s: %s", target, cts_os_strerror(e));
    if (dir_fd != AT_FDCWD) close(dir_fd);
    return CLI_EXIT_IO;
  }
  cts_sink_config_t sc;
  cts_sink_config_init(&sc);
  sc.dir_fd = dir_fd;
  sc.fixed_name = name;
  sc.validate = o.validate;
  sc.serial = 1;
  cts_sink_t *sink;
  if (cts_sink_create(&sink, &sc) != 0 || pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    cli_error("out of memory");
    close(fd);
    return CLI_EXIT_INTERNAL;
  }
  cli_catch_stop_signals(on_signal);

  progress_t progress = {.active = !o.quiet && isatty(STDERR_FILENO),
                         .start_ms = (int64_t)cts_mono_ms()};
  static uint8_t buf[1 << 20];
  const char *ended = NULL; /* why the stream ended, for the summary */
  bool half_closed = false;
  int64_t last_data_ms = (int64_t)cts_mono_ms();
  int exit_code = CLI_EXIT_OK;
  for (;;) {
    if (interrupts >= 2) {
      ended = "stopped (interrupted twice)";
      break;
    }
    if (interrupts == 1 && !half_closed) {
      /* Tell the program we are done; it ends tracing and finishes its last packet. */
      shutdown(fd, SHUT_WR);
      half_closed = true;
      last_data_ms = (int64_t)cts_mono_ms();
    }
    int timeout = progress.active ? 250 : -1;
    if (half_closed) {
      const int64_t left = last_data_ms + o.drain_ms - (int64_t)cts_mono_ms();
      if (left <= 0) {
        ended = "stopped (Ctrl-C)";
        break;
      }
      if (timeout < 0 || left < timeout) timeout = (int)left;
    }
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = wake_pipe[0], .events = POLLIN}};
    const int n = poll(p, 2, timeout);
    if (n < 0 && errno != EINTR) {
      e = -errno;
      cli_error("poll failed: %s", cts_os_strerror(e));
      exit_code = CLI_EXIT_INTERNAL;
      break;
    }
    if (n > 0 && p[1].revents) {
      char drain[16];
      while (read(wake_pipe[0], drain, sizeof drain) > 0) {}
    }
    if (n > 0 && p[0].revents) {
      const ssize_t got = cts_net_read(fd, buf, sizeof buf);
      if (got == 0) {
        ended = half_closed ? "stopped (Ctrl-C); the program ended the stream" : "end of stream";
        break;
      }
      if (got < 0 && got != -EAGAIN) {
        snprintf(err, sizeof err, "connection lost (%s)", cts_os_strerror((int)got));
        ended = err;
        break;
      }
      if (got > 0) {
        last_data_ms = (int64_t)cts_mono_ms();
        if (cts_sink_feed(sink, buf, (size_t)got) != 0) {
          const int se = cts_sink_error(sink);
          cli_error("%s: %s", target, cts_sink_message(sink));
          exit_code = se < 0 && se > -1000 ? CLI_EXIT_IO : CLI_EXIT_DATA;
          ended = "invalid stream";
          break;
        }
      }
    }
    progress_show(&progress, sink, (int64_t)cts_mono_ms(), false);
  }
  close(fd);
  progress_done(&progress);
  const uint64_t received = cts_sink_received(sink), complete = cts_sink_complete_bytes(sink);
  const char *saved = NULL;
  e = cts_sink_finish(sink, &saved);
  const double secs = (double)((int64_t)cts_mono_ms() - progress.start_ms) / 1000.0;
  if (saved) {
    if (!o.quiet) {
      uint64_t count;
      const char *what = cts_sink_count(sink, &count);
      cli_note("%s: saved %s (%llu bytes, %llu %s, %llu packets, %.3f s)", ended, saved,
               (unsigned long long)complete, (unsigned long long)count, what,
               (unsigned long long)cts_sink_packets(sink), secs);
      if (received > complete)
        cli_note("dropped the last %llu bytes (incomplete or invalid packet at offset %llu)",
                 (unsigned long long)(received - complete), (unsigned long long)complete);
    }
  } else {
    if (e)
      cli_error("cannot save the trace: %s", cts_os_strerror(e));
    else if (!cts_sink_error(sink))
      cli_error("%s: %s before a complete trace header (%llu bytes received)%s", target, ended,
                (unsigned long long)received,
                received == 0 && ended && strcmp(ended, "end of stream") == 0
                    ? "; is another client already connected?"
                    : "");
    if (exit_code == CLI_EXIT_OK) exit_code = CLI_EXIT_IO;
  }
  cts_sink_destroy(sink);
  close(wake_pipe[0]);
  close(wake_pipe[1]);
  if (dir_fd != AT_FDCWD) close(dir_fd);
  return exit_code;
}
