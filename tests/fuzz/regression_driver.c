/* SPDX-License-Identifier: MIT */
/* Replays saved fuzz inputs without libFuzzer, so that every build (gcc, no sanitizers
 * included) runs each fuzz target over its corpus as an ordinary test.
 *
 *   <target>_replay DIR|FILE...
 *
 * Runs LLVMFuzzerTestOneInput once per regular file of each directory (not recursive,
 * dot files skipped, in name order so that runs are repeatable) and on each file named
 * directly. A failing input aborts inside the target, which fails the test; the driver
 * prints the input's name first so the culprit is known. It also fails when it is given
 * nothing to run, so that an emptied corpus cannot pass unnoticed. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads a whole file; returns NULL (with errno set) on failure. */
static uint8_t *read_whole_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *bigger = realloc(buf, cap * 2);
    if (!bigger) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = bigger;
    cap *= 2;
  }
  const int failed = ferror(f);
  fclose(f);
  if (failed) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  *len = n;
  return buf;
}

static int run_file(const char *path) {
  size_t len = 0;
  uint8_t *data = read_whole_file(path, &len);
  if (!data) {
    fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  fprintf(stderr, "replaying %s (%zu bytes)\n", path, len);
  LLVMFuzzerTestOneInput(data, len);
  free(data);
  return 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular, non-hidden file of dir; adds to *passed. Returns -1 on an error. */
static int run_directory(const char *dir, unsigned *passed) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "cannot open %s: %s\n", dir, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t count = 0, cap = 0;
  int rc = 0;
  for (const struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 64;
      char **bigger = realloc(names, cap * sizeof *names);
      if (!bigger) {
        rc = -1;
        break;
      }
      names = bigger;
    }
    if (!(names[count] = strdup(e->d_name))) {
      rc = -1;
      break;
    }
    count++;
  }
  closedir(d);
  if (rc) fprintf(stderr, "out of memory listing %s\n", dir);
  qsort(names, count, sizeof *names, compare_names);
  for (size_t i = 0; i < count && !rc; i++) {
    const size_t len = strlen(dir) + 1 + strlen(names[i]) + 1;
    char *path = malloc(len);
    if (!path) {
      rc = -1;
      break;
    }
    snprintf(path, len, "%s/%s", dir, names[i]);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      rc = run_file(path);
      if (!rc) (*passed)++;
    }
    free(path);
  }
  for (size_t i = 0; i < count; i++) free(names[i]);
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
    return 2;
  }
  unsigned passed = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "cannot stat %s: %s\n", argv[i], strerror(errno));
      printf("%u passed, 1 failed\n", passed);
      return 1;
    }
    int rc;
    if (S_ISDIR(st.st_mode)) {
      rc = run_directory(argv[i], &passed);
    } else {
      rc = run_file(argv[i]);
      if (!rc) passed++;
    }
    if (rc) {
      printf("%u passed, 1 failed\n", passed);
      return 1;
    }
  }
  if (passed == 0) {
    fprintf(stderr, "no inputs found: an empty corpus tests nothing\n");
    printf("0 passed, 1 failed\n");
    return 1;
  }
  printf("%u passed, 0 failed\n", passed);
  return 0;
}
