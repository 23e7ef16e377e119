/* SPDX-License-Identifier: MIT */
/* The many-threads workload (bench/run_many_threads.sh): THREADS threads, all started
 * before any allocates (a barrier), each making PAIRS malloc/free pairs of 64 bytes; the
 * blocks are written so that no compiler removes the pairs (built with -fno-builtin too).
 * At the end it prints its peak RSS (VmHWM) and its resident shared memory (RssShmem: the
 * tracer's rings) in KiB, read from /proc/self/status, and a checksum.
 *
 * Usage: many_threads THREADS PAIRS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t start;
static unsigned long pairs;

static void *allocate(void *arg) {
  unsigned long sum = 0;
  pthread_barrier_wait(&start);
  for (unsigned long i = 0; i < pairs; i++) {
    unsigned char *const p = malloc(64);
    if (!p) abort();
    p[0] = (unsigned char)i;
    sum += p[0];
    free(p);
  }
  *(unsigned long *)arg = sum;
  return NULL;
}

/* The value of `key` (in kB) in /proc/self/status, or -1. */
static long status_kb(const char *key) {
  FILE *const f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  const size_t len = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, len) == 0 && line[len] == ':') {
      kb = strtol(line + len + 1, NULL, 10);
      break;
    }
  fclose(f);
  return kb;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: many_threads THREADS PAIRS\n");
    return 2;
  }
  const unsigned long threads = strtoul(argv[1], NULL, 10);
  pairs = strtoul(argv[2], NULL, 10);
  if (threads == 0 || threads > 100000) {
    fprintf(stderr, "many_threads: THREADS must be 1-100000\n");
    return 2;
  }
  pthread_t *const tids = calloc(threads, sizeof *tids);
  unsigned long *const sums = calloc(threads, sizeof *sums);
  if (!tids || !sums || pthread_barrier_init(&start, NULL, (unsigned)threads) != 0) return 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256u << 10); /* 1 000 threads: no 8 GiB of stacks */
  for (unsigned long i = 0; i < threads; i++)
    if (pthread_create(&tids[i], &attr, allocate, &sums[i]) != 0) {
      fprintf(stderr, "many_threads: thread %lu not created\n", i);
      return 1;
    }
  unsigned long sum = 0;
  for (unsigned long i = 0; i < threads; i++) {
    pthread_join(tids[i], NULL);
    sum += sums[i];
  }
  printf("vmhwm_kb %ld rssshmem_kb %ld sum %lu\n", status_kb("VmHWM"), status_kb("RssShmem"), sum);
  free(tids);
  free(sums);
  return 0;
}
