/* SPDX-License-Identifier: MIT */
/* Lists the memtrace traces of the golden corpus (memtrace/traces and memtrace/public). */
#ifndef CTS_CORPUS_FILES_H
#define CTS_CORPUS_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct corpus_list {
  char **paths;
  size_t n;
} corpus_list_t;

static int corpus_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static inline void corpus_list_memtrace(const char *corpus, corpus_list_t *l) {
  static const char *const subdirs[] = {"memtrace/traces", "memtrace/public"};
  memset(l, 0, sizeof *l);
  for (size_t s = 0; s < 2; s++) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", corpus, subdirs[s]);
    DIR *d = opendir(dir);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      const size_t n = strlen(e->d_name);
      if (n < 5 || strcmp(e->d_name + n - 4, ".ctf") != 0) continue;
      l->paths = realloc(l->paths, (l->n + 1) * sizeof *l->paths);
      const size_t len = strlen(dir) + n + 2;
      l->paths[l->n] = malloc(len);
      snprintf(l->paths[l->n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
  }
  qsort(l->paths, l->n, sizeof *l->paths, corpus_cmp);
}

static inline void corpus_list_free(corpus_list_t *l) {
  for (size_t i = 0; i < l->n; i++) free(l->paths[i]);
  free(l->paths);
  memset(l, 0, sizeof *l);
}

/* The golden file for trace path + suffix (".dump.txt", ".summary.txt"), trying ".gz" and,
 * for a ".v3.ctf" without its own, the v002 source's (same events). NULL if none. */
static inline char *corpus_golden(const char *path, const char *suffix) {
  char buf[1200];
  FILE *f;
  snprintf(buf, sizeof buf, "%s%s", path, suffix);
  if ((f = fopen(buf, "rb"))) return fclose(f), strdup(buf);
  snprintf(buf, sizeof buf, "%s%s.gz", path, suffix);
  if ((f = fopen(buf, "rb"))) return fclose(f), strdup(buf);
  const size_t n = strlen(path);
  if (n > 7 && strcmp(path + n - 7, ".v3.ctf") == 0) {
    snprintf(buf, sizeof buf, "%.*s.ctf%s", (int)(n - 7), path, suffix);
    if ((f = fopen(buf, "rb"))) return fclose(f), strdup(buf);
  }
  return NULL;
}

#endif /* CTS_CORPUS_FILES_H */
