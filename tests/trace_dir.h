/* SPDX-License-Identifier: MIT */
/* Every trace file of a directory, read whole and handed to a callback: the corpus walks of
 * the reader's and the summary's tests. */
#ifndef CTS_TEST_TRACE_DIR_H
#define CTS_TEST_TRACE_DIR_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_buf.h"

/* One file: its name within the directory and its bytes (data is NULL for an empty file). */
typedef void (*trace_dir_each_fn)(const char *name, const uint8_t *data, size_t len, void *ctx);

/* Calls each for every file of dir whose name ends in suffix (NULL: every file whose name
 * does not start with '.'), in readdir's order, and adds how many to *files. A directory
 * that cannot be opened, or a file that cannot be read, fails the running test. */
static inline void for_each_trace_file(const char *dir, const char *suffix, trace_dir_each_fn each,
                                       void *ctx, size_t *files) {
  DIR *d = opendir(dir);
  CTS_ASSERT_MSG(d != NULL, "cannot open %s", dir);
  if (!d) return;
  const size_t suffix_len = suffix ? strlen(suffix) : 0;
  const struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const size_t n = strlen(de->d_name);
    if (suffix ? n < suffix_len || strcmp(de->d_name + n - suffix_len, suffix) != 0
               : de->d_name[0] == '.')
      continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    buf_t data = {0};
    const bool read = read_file(path, &data);
    if (read) each(de->d_name, data.data, data.len, ctx);
    (*files)++;
    free(data.data);
    if (!read) {
      closedir(d);
      CTS_FAIL("cannot read %s", path);
    }
  }
  closedir(d);
}

#endif
