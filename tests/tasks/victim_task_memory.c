/* SPDX-License-Identifier: MIT */
/* Known-truth program for memory per task (test_task_memory.c): three threads with
 * distinct start routines run at the same time (a barrier holds each until all have
 * started, another until all are done):
 *   keeper   allocates 8 MiB in 4096 blocks of 2 KiB and keeps them (live at the end);
 *   churner  allocates and frees 100 000 blocks of 64 bytes (6.4 MB, nothing live);
 *   idler    allocates nothing while the other two work.
 * With "many N" instead, N threads are alive at once (a barrier), each writing a few
 * task events: more threads than ring packets. Linked with -rdynamic so that the
 * preload names the start routines. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEP_BLOCKS  4096
#define KEEP_SIZE    2048
#define CHURN_BLOCKS 100000
#define CHURN_SIZE   64

/* Exported (the preload names threads by their start routine's dynamic symbol). */
void *keeper(void *arg);
void *churner(void *arg);
void *idler(void *arg);
void *member(void *arg);

static pthread_barrier_t started, done;
static void *kept[KEEP_BLOCKS];
static void *volatile sink; /* the compiler must not drop a malloc/free pair */

void *keeper(void *arg) {
  (void)arg;
  pthread_barrier_wait(&started);
  for (int i = 0; i < KEEP_BLOCKS; i++) {
    kept[i] = malloc(KEEP_SIZE);
    if (!kept[i]) abort();
    memset(kept[i], i & 0xff, 8);
  }
  pthread_barrier_wait(&done);
  return NULL;
}

void *churner(void *arg) {
  (void)arg;
  pthread_barrier_wait(&started);
  for (int i = 0; i < CHURN_BLOCKS; i++) {
    char *p = malloc(CHURN_SIZE);
    if (!p) abort();
    p[0] = (char)i;
    sink = p;
    free(sink);
  }
  pthread_barrier_wait(&done);
  return NULL;
}

void *idler(void *arg) {
  (void)arg;
  pthread_barrier_wait(&started);
  pthread_barrier_wait(&done); /* alive, allocating nothing, while the others work */
  return NULL;
}

static pthread_barrier_t all_alive;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

void *member(void *arg) {
  (void)arg;
  pthread_barrier_wait(&all_alive);
  for (int i = 0; i < 20; i++) { /* contended: try_read/read events */
    pthread_mutex_lock(&lock);
    counter++;
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

static int many(int n) {
  pthread_t *th = calloc((size_t)n, sizeof *th);
  if (!th || pthread_barrier_init(&all_alive, NULL, (unsigned)n)) return 1;
  for (int i = 0; i < n; i++)
    if (pthread_create(&th[i], NULL, member, NULL)) return 1;
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  printf("%d threads, %ld increments\n", n, counter);
  free(th);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "many") == 0) return many(atoi(argv[2]));
  pthread_barrier_init(&started, NULL, 3);
  pthread_barrier_init(&done, NULL, 3);
  pthread_t t[3];
  void *(*const fns[3])(void *) = {keeper, churner, idler};
  for (int i = 0; i < 3; i++)
    if (pthread_create(&t[i], NULL, fns[i], NULL)) return 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  printf("kept %d x %d, churned %d x %d\n", KEEP_BLOCKS, KEEP_SIZE, CHURN_BLOCKS, CHURN_SIZE);
  return 0;
}
