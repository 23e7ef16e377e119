/* SPDX-License-Identifier: MIT */
/* Helpers shared by the task-tracing tests: whole-file loading, a malloc allocator, and
 * reading a trace into an array of events (strings copied). */
#ifndef CTS_MPROF_TEST_UTIL_H
#define CTS_MPROF_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/mprof.h>

static void *tu_alloc(void *ud, size_t n) {
  (void)ud;
  return malloc(n);
}
static void tu_free(void *ud, void *p, size_t n) {
  (void)ud;
  (void)n;
  free(p);
}

/* The whole file, or NULL. */
static inline uint8_t *tu_load(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

typedef struct tu_events {
  cts_mprof_event_t *ev;
  size_t n, cap;
  size_t warnings;
  int last_warning;
  uint64_t last_warning_offset;
} tu_events_t;

static inline int tu_on_event(void *ud, const cts_mprof_event_t *ev) {
  tu_events_t *t = ud;
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1024;
    t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
  }
  cts_mprof_event_t *e = &t->ev[t->n++];
  *e = *ev;
  if (ev->str) {
    char *s = malloc(ev->str_len + 1);
    memcpy(s, ev->str, ev->str_len + 1);
    e->str = s;
  }
  return 0;
}

static inline void tu_on_warning(void *ud, int code, uint64_t offset, const char *msg) {
  tu_events_t *t = ud;
  t->warnings++;
  t->last_warning = code;
  t->last_warning_offset = offset;
  (void)msg;
}

static inline void tu_events_free(tu_events_t *t) {
  for (size_t i = 0; i < t->n; i++) free((void *)t->ev[i].str);
  free(t->ev);
  memset(t, 0, sizeof *t);
}

/* Reads @p data into @p t; returns the reader's result. */
static inline int tu_read(const void *data, size_t size, tu_events_t *t, bool file_order,
                          cts_mprof_summary_t *sum, char *msg, size_t msglen) {
  cts_mprof_reader_config_t cfg;
  cts_mprof_reader_config_init(&cfg);
  cfg.allocator = (cts_allocator_t){tu_alloc, tu_free, NULL};
  cfg.file_order = file_order;
  cts_mprof_memory_t m = {data, size};
  const cts_mprof_handler_t h = {
      .user_data = t, .on_event = tu_on_event, .on_warning = tu_on_warning};
  return cts_mprof_read(&cfg, cts_mprof_memory_read_at, &m, size, &h, sum, msg, msglen);
}

#endif /* CTS_MPROF_TEST_UTIL_H */
