/* SPDX-License-Identifier: MIT */
/* 8 threads allocating and freeing at once, some blocks freed by another thread than the
 * one that allocated them. */
#include <pthread.h>

#include "victim.h"

#define THREADS 8
#define ROUNDS  20000

static void *handoff[THREADS][64];

static void *body(void *arg) {
  const unsigned id = (unsigned)(uintptr_t)arg;
  uint64_t state = id + 1, sum = 0;
  void *ring[32] = {0};
  for (int i = 0; i < ROUNDS; i++) {
    const size_t size = 8 + victim_next(&state) % 1000;
    unsigned char *p = malloc(size);
    p[0] = (unsigned char)i;
    sum += p[0];
    free(ring[i % 32]);
    ring[i % 32] = p;
  }
  for (int i = 0; i < 32; i++) free(ring[i]);
  for (int i = 0; i < 64; i++) handoff[id][i] = malloc(100 + (size_t)i);
  return (void *)(uintptr_t)sum;
}

int main(void) {
  victim_quiet_stdio();
  pthread_t th[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, body, (void *)t);
  uint64_t total = 0;
  for (int t = 0; t < THREADS; t++) {
    void *r;
    pthread_join(th[t], &r);
    total += (uint64_t)(uintptr_t)r;
  }
  /* Blocks allocated by the threads, freed by main. */
  for (int t = 0; t < THREADS; t++)
    for (int i = 0; i < 64; i++) free(handoff[t][i]);
  printf("threads done, checksum %llu\n", (unsigned long long)total);
  return 0;
}
