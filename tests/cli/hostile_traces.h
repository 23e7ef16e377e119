/* SPDX-License-Identifier: MIT */
/* Small hostile memtrace traces, written with ctfscope's own writer: valid in form, with
 * contents meant to break the commands (a rate near 0, 2^63 samples, escape sequences in
 * names, no allocation at all). Each is a few hundred bytes. */
#ifndef CTS_HOSTILE_TRACES_H
#define CTS_HOSTILE_TRACES_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctfscope/memtrace.h>

#include "os/os.h"

typedef struct ht_spec {
  double rate;
  const char *executable, *context;
  const char *function, *file; /* the one allocation site's location */
  uint64_t nallocs;            /* allocations at that site (0: none) */
  uint64_t length, nsamples;   /* of each */
  bool collect;                /* each allocation collected just after */
} ht_spec_t;

static size_t ht_resolve(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  const ht_spec_t *s = ud;
  if (max < 1) return 0;
  if (code == 0x10) {
    out[0] = (cts_mt_location_t){1, 0, 10, s->file, "Main.run"};
    return 1;
  }
  out[0] = (cts_mt_location_t){7, 2, 9, s->file, s->function};
  return 1;
}

/* Writes the trace of s to path; returns 0 or an error. */
static int ht_write(const ht_spec_t *s, const char *path) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = s->rate;
  cfg.executable_name = s->executable ? s->executable : "/opt/test/hostile.exe";
  cfg.host_name = "testhost";
  cfg.pid = 4242;
  cfg.start_time_us = 1700000000000000ull;
  cfg.context = s->context;
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  cfg.write = cts_os_fd_write;
  cfg.write_user_data = (void *)(intptr_t)fd;
  cfg.resolve = ht_resolve;
  cfg.resolve_user_data = (void *)s;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
  cts_mt_writer_t *w;
  int e = cts_mt_writer_init(&w, mem, size, &cfg);
  const uint64_t bt[2] = {0x10, 0x20};
  for (uint64_t i = 0; i < s->nallocs && !e; i++) {
    uint64_t id;
    const uint64_t t = cfg.start_time_us + 1000 + 10 * i;
    e = cts_mt_writer_alloc(w, t, s->length, s->nsamples, CTS_MT_SOURCE_MAJOR, bt, 2, &id);
    if (!e && s->collect) e = cts_mt_writer_collect(w, t + 5, id);
  }
  if (!e) e = cts_mt_writer_close(w);
  free(mem);
  close(fd);
  return e;
}

/* A plain trace with a few allocations: the base the hostile ones differ from. */
static inline ht_spec_t ht_plain(void) {
  return (ht_spec_t){.rate = 0.01,
                     .function = "Plain.alloc",
                     .file = "plain.ml",
                     .nallocs = 20,
                     .length = 8,
                     .nsamples = 1};
}

/* A FIFO at `fifo` that a child process fills with the file `from` once a reader opens
 * it; the child gives up after 20 s without a reader (reaped by the caller's waitpid). */
static inline void ht_fifo(const char *fifo, const char *from) {
  unlink(fifo);
  if (mkfifo(fifo, 0600) != 0) abort();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    const int in = open(from, O_RDONLY), out = open(fifo, O_WRONLY);
    char buf[65536];
    ssize_t n;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
      if (write(out, buf, (size_t)n) != n) break;
    _exit(0);
  }
}

#endif /* CTS_HOSTILE_TRACES_H */
