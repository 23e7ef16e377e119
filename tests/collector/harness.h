/* SPDX-License-Identifier: MIT */
/* Helpers for the collector and fetch tests: background processes whose stderr is captured
 * as it comes (to wait for a log line), traces made with the project's writer, loopback
 * clients, and scratch directories. Every wait has a deadline, so a hang fails the test
 * instead of blocking the run. */
#ifndef CTS_TESTS_COLLECTOR_HARNESS_H
#define CTS_TESTS_COLLECTOR_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "common/compiler.h"

#include "os/net.h"
#include "os/os.h"

/* ---- time ------------------------------------------------------------------------------ */

static inline int64_t h_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void h_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- growable byte buffers ------------------------------------------------------------- */

typedef struct h_bytes {
  uint8_t *data;
  size_t len, cap;
} h_bytes_t;

static inline void h_bytes_append(h_bytes_t *b, const void *p, size_t n) {
  if (n > SIZE_MAX / 4 || b->len > SIZE_MAX / 4) abort(); /* also bounds n for gcc's -O2 checks */
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (b->len + n + 1 > cap) cap *= 2;
    b->data = realloc(b->data, cap);
    if (!b->data) abort();
    b->cap = cap;
  }
  char *end = (char *)b->data + b->len;
  memcpy(end, p, n);
  end[n] = 0;
  b->len += n;
}

static inline void h_bytes_free(h_bytes_t *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

static inline bool h_read_file(const char *path, h_bytes_t *out) {
  memset(out, 0, sizeof *out);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[65536];
  ssize_t n;
  h_bytes_append(out, "", 0);
  while ((n = read(fd, buf, sizeof buf)) > 0) h_bytes_append(out, buf, (size_t)n);
  close(fd);
  return n == 0;
}

/* ---- traces ------------------------------------------------------------------------------ */

typedef struct h_gen {
  h_bytes_t *out;
  char file[64], fn[64];
} h_gen_t;

static inline int h_gen_write(void *ud, const void *buf, size_t len) {
  h_bytes_append(((h_gen_t *)ud)->out, buf, len);
  return 0;
}

static inline size_t h_gen_resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  h_gen_t *g = ud;
  if (max < 1) return 1;
  snprintf(g->file, sizeof g->file, "src/file%u.c", (unsigned)(code % 37));
  snprintf(g->fn, sizeof g->fn, "function_%u", (unsigned)(code % 1000));
  out[0] = (cts_mt_location_t){.line = (uint32_t)(code % 5000) + 1,
                               .start_char = 2,
                               .end_char = 20,
                               .filename = g->file,
                               .defname = g->fn};
  return 1;
}

static inline uint64_t h_rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A deterministic memtrace trace: nevents allocations and frees (about 3 allocations for
 * each free) with varied backtraces, written by the project's writer. Same arguments, same
 * bytes. */
static inline void h_make_trace(h_bytes_t *out, unsigned seed, unsigned nevents, const char *exe,
                                uint64_t pid) {
  memset(out, 0, sizeof *out);
  h_gen_t g = {.out = out};
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 1e-3;
  cfg.executable_name = exe;
  cfg.host_name = "testhost";
  cfg.pid = pid;
  cfg.start_time_us = 1700000000000000ull + seed * 1000003ull;
  cfg.write = h_gen_write;
  cfg.write_user_data = &g;
  cfg.resolve = h_gen_resolve;
  cfg.resolve_user_data = &g;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = malloc(size);
  cts_mt_writer_t *w;
  if (!mem || cts_mt_writer_init(&w, mem, size, &cfg) != 0) abort();
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed * 0x100000001B3ull + 1);
  uint64_t *live = malloc(sizeof *live * (nevents + 1));
  size_t nlive = 0;
  uint64_t t = cfg.start_time_us;
  uint64_t bt[16];
  for (unsigned i = 0; i < nevents; i++) {
    t += 1 + h_rng(&rng) % 50;
    if (nlive > 0 && h_rng(&rng) % 4 == 0) {
      const size_t k = h_rng(&rng) % nlive;
      if (cts_mt_writer_collect(w, t, live[k]) != 0) abort();
      live[k] = live[--nlive];
      continue;
    }
    const size_t depth = 1 + h_rng(&rng) % 16;
    for (size_t d = 0; d < depth; d++)
      bt[d] = 0x400000 + 16 * (1 + (d * 7 + h_rng(&rng) % 3) % 300);
    uint64_t id;
    if (cts_mt_writer_alloc(w, t, 1 + h_rng(&rng) % 100, 1 + h_rng(&rng) % 3, CTS_MT_SOURCE_MAJOR,
                            bt, depth, &id) != 0)
      abort();
    live[nlive++] = id;
  }
  if (cts_mt_writer_close(w) != 0) abort();
  free(live);
  free(mem);
}

/* Packet boundaries of a memtrace trace (offsets of every packet start, and the end). */
static inline size_t h_packet_ends(const h_bytes_t *t, uint64_t *ends, size_t max) {
  size_t n = 0, off = 0;
  while (off + 8 <= t->len && n < max) {
    uint32_t bits;
    memcpy(&bits, t->data + off + 4, 4);
    off += bits / 8;
    ends[n++] = off;
  }
  return n;
}

static inline int h_count_event(void *ud, const cts_mt_event_t *ev) {
  (void)ev;
  (*(uint64_t *)ud)++;
  return 0;
}

/* Reads a file back with the project's reader; returns the reader's result and counts the
 * events into *events. */
static inline int h_decode_file(const char *path, uint64_t *events) {
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cts_mt_reader_t *r;
  *events = 0;
  const cts_mt_handler_t h = {.user_data = events, .on_event = h_count_event};
  if (cts_mt_reader_create(&r, &cfg, &h) != 0) return CTS_E_NOMEM;
  bool input_error;
  const int err = cts_os_read_memtrace(path, r, NULL, NULL, &input_error);
  cts_mt_reader_destroy(r);
  return err;
}

/* ---- clients ------------------------------------------------------------------------------- */

static inline int h_connect(uint16_t port) {
  cts_net_addr_t a;
  char err[CTS_NET_ERR_LEN], spec[32];
  snprintf(spec, sizeof spec, "127.0.0.1:%u", port);
  if (cts_net_parse_connect(spec, &a, err, sizeof err) != 0) return -1;
  int fd;
  return cts_net_connect(&a, 5000, &fd) == 0 ? fd : -1;
}

/* Sends in pieces of pseudo-random sizes (1 byte to 64 KiB), as a real stream arrives. */
static inline bool h_send_chunked(int fd, const uint8_t *p, size_t len, uint64_t seed) {
  uint64_t rng = seed * 2654435761u + 7;
  while (len > 0) {
    size_t n = 1 + h_rng(&rng) % 65536;
    if (n > len) n = len;
    if (cts_net_write_all(fd, p, n, 20000) != 0) return false;
    p += n;
    len -= n;
  }
  return true;
}

/* Waits (bounded) for the peer to close: true when it did. */
static inline bool h_wait_closed(int fd, int timeout_ms) {
  const int64_t end = h_now_ms() + timeout_ms;
  char buf[256];
  while (h_now_ms() < end) {
    if (cts_net_wait(fd, false, 100) <= 0) continue;
    const ssize_t n = cts_net_read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && n != -EAGAIN)) return true;
  }
  return false;
}

/* ---- processes ------------------------------------------------------------------------------ */

typedef struct h_proc {
  pid_t pid;
  int err_fd;
  pthread_t reader;
  pthread_mutex_t mu;
  h_bytes_t log;
  bool started;
} h_proc_t;

static inline void *h_proc_reader(void *arg) {
  h_proc_t *p = arg;
  char buf[4096];
  ssize_t n;
  while ((n = read(p->err_fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n <= 0) continue;
    pthread_mutex_lock(&p->mu);
    h_bytes_append(&p->log, buf, (size_t)n);
    pthread_mutex_unlock(&p->mu);
    if (getenv("CTS_TEST_VERBOSE")) (void)!write(2, buf, (size_t)n);
  }
  return NULL;
}

/* Starts argv[0] with stderr captured, stdout to stdout_path (or /dev/null), in cwd. */
static inline bool h_proc_spawn(h_proc_t *p, char *const argv[], const char *cwd,
                                const char *stdout_path) {
  memset(p, 0, sizeof *p);
  int pipefd[2];
  if (pipe(pipefd) != 0) return false;
  p->pid = fork();
  if (p->pid < 0) return false;
  if (p->pid == 0) {
    if (cwd && chdir(cwd) != 0) _exit(126);
    const int out =
        open(stdout_path ? stdout_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = open("/dev/null", O_RDONLY);
    if (out < 0 || in < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    execv(argv[0], argv);
    _exit(127);
  }
  close(pipefd[1]);
  p->err_fd = pipefd[0];
  pthread_mutex_init(&p->mu, NULL);
  h_bytes_append(&p->log, "", 0);
  pthread_create(&p->reader, NULL, h_proc_reader, p);
  p->started = true;
  return true;
}

/* Occurrences of needle in the captured stderr so far. */
static inline int h_proc_count(h_proc_t *p, const char *needle) {
  pthread_mutex_lock(&p->mu);
  int n = 0;
  for (const char *s = (const char *)p->log.data; (s = strstr(s, needle)) != NULL; s++) n++;
  pthread_mutex_unlock(&p->mu);
  return n;
}

/* Waits until needle appears count times; false on timeout. */
static inline bool h_proc_wait_for(h_proc_t *p, const char *needle, int count, int timeout_ms) {
  const int64_t end = h_now_ms() + timeout_ms;
  while (h_proc_count(p, needle) < count) {
    if (h_now_ms() > end) return false;
    h_sleep_ms(10);
  }
  return true;
}

/* A copy of the line containing needle (the first one), or NULL. Caller frees. */
static inline char *h_proc_line(h_proc_t *p, const char *needle) {
  pthread_mutex_lock(&p->mu);
  char *res = NULL;
  const char *s = strstr((const char *)p->log.data, needle);
  if (s) {
    const char *b = s;
    while (b > (const char *)p->log.data && b[-1] != '\n') b--;
    const char *e = strchr(s, '\n');
    const size_t n = e ? (size_t)(e - b) : strlen(b);
    res = malloc(n + 1);
    memcpy(res, b, n);
    res[n] = 0;
  }
  pthread_mutex_unlock(&p->mu);
  return res;
}

/* Waits for the process to exit (SIGKILL after timeout_ms). Returns the exit code, 128 +
 * signal if killed by one, or -1 on timeout. */
static inline int h_proc_wait(h_proc_t *p, int timeout_ms) {
  if (!p->started) return -1;
  const int64_t end = h_now_ms() + timeout_ms;
  int status = 0, code = -1;
  for (;;) {
    const pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r == p->pid) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (h_now_ms() > end) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &status, 0);
      break;
    }
    h_sleep_ms(10);
  }
  pthread_join(p->reader, NULL);
  close(p->err_fd);
  p->started = false;
  return code;
}

static inline void h_proc_free(h_proc_t *p) {
  if (p->started) {
    kill(p->pid, SIGKILL);
    h_proc_wait(p, 5000);
  }
  pthread_mutex_destroy(&p->mu);
  h_bytes_free(&p->log);
}

/* Peak resident memory of a running process, in KiB (0 if unknown). */
static inline long h_proc_peak_rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
  FILE *f = fopen(path, "r");
  long kib = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

/* ---- the collector ------------------------------------------------------------------------ */

/* Starts `ctfscope collect --listen 127.0.0.1:0 --dir DIR EXTRA...` and learns its port. */
static inline bool h_collector_start(h_proc_t *p, const char *dir, uint16_t *port,
                                     const char *const extra[]) {
  char *argv[32];
  int n = 0;
  argv[n++] = (char *)CTS_TEST_CTFSCOPE;
  argv[n++] = (char *)"collect";
  argv[n++] = (char *)"--listen";
  argv[n++] = (char *)"127.0.0.1:0";
  argv[n++] = (char *)"--dir";
  argv[n++] = (char *)dir;
  for (int i = 0; extra && extra[i] && n < 30; i++) argv[n++] = (char *)extra[i];
  argv[n] = NULL;
  if (!h_proc_spawn(p, argv, NULL, NULL)) return false;
  if (!h_proc_wait_for(p, "listening on 127.0.0.1:", 1, 10000)) return false;
  char *line = h_proc_line(p, "listening on 127.0.0.1:");
  const char *s = strstr(line, "127.0.0.1:") + strlen("127.0.0.1:");
  *port = (uint16_t)strtoul(s, NULL, 10);
  free(line);
  return *port != 0;
}

/* ---- scratch directories ------------------------------------------------------------------- */

static inline bool h_mkdtemp(char *buf, size_t size, const char *what) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, size, "%s/cts-%s-XXXXXX", base && *base ? base : "/tmp", what);
  return mkdtemp(buf) != NULL;
}

/* Names of the regular files in dir (sorted), as one '\n'-joined string; count in *n. */
static inline char *h_list_dir(const char *dir, int *n) {
  DIR *d = opendir(dir);
  *n = 0;
  if (!d) return NULL;
  char *names[1024];
  int k = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && k < 1024)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names[k++] = strdup(e->d_name);
  closedir(d);
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  h_bytes_t out = {0};
  h_bytes_append(&out, "", 0);
  for (int i = 0; i < k; i++) {
    h_bytes_append(&out, names[i], strlen(names[i]));
    h_bytes_append(&out, "\n", 1);
    free(names[i]);
  }
  *n = k;
  return (char *)out.data;
}

/* Finds the file in dir whose name starts with prefix; copies its path. */
static inline bool h_find_file(const char *dir, const char *prefix, char *path, size_t size) {
  DIR *d = opendir(dir);
  if (!d) return false;
  struct dirent *e;
  bool found = false;
  while (!found && (e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
      snprintf(path, size, "%s/%s", dir, e->d_name);
      found = true;
    }
  closedir(d);
  return found;
}

/* Removes dir and the files in it (one level). */
static inline void h_rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

#endif /* CTS_TESTS_COLLECTOR_HARNESS_H */
