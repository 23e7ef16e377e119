/* SPDX-License-Identifier: MIT */
/* A memtrace writer into a file, for the tests that generate the traces they read: the
 * writer's memory, the file and the configuration they all repeat (rate, executable
 * "gen", a fixed clock and start time), in one place. Not thread-safe; one per file. */
#ifndef CTS_TEST_MT_FILE_WRITER_H
#define CTS_TEST_MT_FILE_WRITER_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <ctfscope/memtrace.h>

#define MT_FILE_WRITER_START_US 1700000000000000ull

typedef struct mt_file_writer {
  FILE *f;
  void *mem;
  cts_mt_writer_t *w;
} mt_file_writer_t;

static int mt_file_writer_write(void *ud, const void *data, size_t len) {
  return fwrite(data, 1, len, ud) == len ? 0 : -EIO;
}

static uint64_t mt_file_writer_clock(void *ud) {
  (void)ud;
  return MT_FILE_WRITER_START_US;
}

/* Creates path and a writer into it at sample_rate, locations named by resolve. Returns 0
 * (fw->w ready) or a negative errno, with nothing left open. */
static inline int mt_file_writer_open(mt_file_writer_t *fw, const char *path, double sample_rate,
                                      cts_mt_resolve_cb resolve) {
  *fw = (mt_file_writer_t){0};
  fw->f = fopen(path, "wb");
  if (!fw->f) return -errno;
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = sample_rate;
  cfg.executable_name = "gen";
  cfg.write = mt_file_writer_write;
  cfg.write_user_data = fw->f;
  cfg.clock = mt_file_writer_clock;
  cfg.resolve = resolve;
  cfg.start_time_us = MT_FILE_WRITER_START_US;
  const size_t size = cts_mt_writer_size(&cfg);
  fw->mem = aligned_alloc(64, (size + 63) / 64 * 64);
  const int e = fw->mem ? cts_mt_writer_init(&fw->w, fw->mem, size, &cfg) : -ENOMEM;
  if (e) {
    free(fw->mem);
    fclose(fw->f);
  }
  return e;
}

/* Closes the writer (unless e, the error that stopped the writing, is set) and the file;
 * returns e or the first error of closing. */
static inline int mt_file_writer_close(mt_file_writer_t *fw, int e) {
  if (!e) e = cts_mt_writer_close(fw->w);
  free(fw->mem);
  if (fclose(fw->f) && !e) e = -EIO;
  return e;
}

/* A resolve callback for traces whose codes stand for themselves: each code its own
 * function "f<code>", in file "t.ml" at line 1. Not thread-safe (one static name). */
static inline size_t mt_file_writer_name_by_code(void *ud, uint64_t code, cts_mt_location_t *out,
                                                 size_t max) {
  static char name[32];
  (void)ud;
  if (!max) return 1;
  snprintf(name, sizeof name, "f%llu", (unsigned long long)code);
  out[0] = (cts_mt_location_t){
      .line = 1, .start_char = 1, .end_char = 2, .filename = "t.ml", .defname = name};
  return 1;
}

#endif /* CTS_TEST_MT_FILE_WRITER_H */
