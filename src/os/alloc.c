/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "os.h"

static void *os_alloc(void *user_data, size_t size) {
  (void)user_data;
  return malloc(size);
}

static void os_free(void *user_data, void *ptr, size_t size) {
  (void)user_data;
  (void)size;
  free(ptr);
}

cts_allocator_t cts_os_allocator(void) {
  return (cts_allocator_t){os_alloc, os_free, NULL};
}

const char *cts_os_strerror(int err) {
  if (err < 0 && err > -1000) return strerror(-err);
  return cts_strerror(err);
}

uint64_t cts_os_clock_us(void *user_data) {
  (void)user_data;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}
