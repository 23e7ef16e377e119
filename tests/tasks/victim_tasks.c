/* SPDX-License-Identifier: MIT */
/* A plain pthread program for the task-tracing preload (test_preload_tasks.c): the main
 * thread holds a mutex while it starts 8 workers, waits until every one of them sleeps on
 * that mutex (so that each lock is contended, whatever the scheduling), then lets them go.
 * The workers count themselves under the mutex; the last one broadcasts a condition the
 * others wait on. Main joins them in order. It prints the same with and without tracing.
 *
 *   victim_tasks            as above
 *   victim_tasks cancel     one more thread, which is cancelled while it waits
 *   victim_tasks many       5000 threads one after the other, each joined */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 8
#define MANY    5000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_here = PTHREAD_COND_INITIALIZER;
static int count, arrived;
static pid_t tids[WORKERS];

static void pause_briefly(void) {
  const struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL);
}

/* Whether the thread sleeps (state S in /proc): after it has announced itself, the only
 * place a worker can sleep is the mutex, so its lock was contended. */
static int sleeping(pid_t tid) {
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  /* open/read, not stdio: the victim allocates the same whatever the timing */
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, stat, sizeof stat - 1);
  close(fd);
  if (n <= 0) return 0;
  stat[n] = '\0';
  const char *end = strrchr(stat, ')'); /* the name may hold spaces */
  return end && end[1] == ' ' && end[2] == 'S';
}

/* Exported (the victim is linked with -rdynamic): dladdr names the workers. The cancelled
 * thread's routine is static: its name comes from the executable's .symtab. */
void *worker_main(void *arg);
void *worker_main(void *arg) {
  const int index = (int)(long)arg;
  char name[16];
  snprintf(name, sizeof name, "worker-%d", index);
  pthread_setname_np(pthread_self(), name);
  tids[index] = (pid_t)syscall(SYS_gettid);
  __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&lock);
  if (++count == WORKERS)
    pthread_cond_broadcast(&all_here);
  else
    while (count < WORKERS) pthread_cond_wait(&all_here, &lock);
  pthread_mutex_unlock(&lock);
  if (index == WORKERS - 1) pthread_exit(arg); /* the same as returning it */
  return arg;
}

static pthread_mutex_t never = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_signalled = PTHREAD_COND_INITIALIZER;

static void unlock_never(void *unused) {
  (void)unused;
  pthread_mutex_unlock(&never);
}

static void *cancelled_main(void *arg) {
  pthread_mutex_lock(&never);
  pthread_cleanup_push(unlock_never, NULL);
  for (;;) pthread_cond_wait(&never_signalled, &never);
  pthread_cleanup_pop(1);
  return arg;
}

static void *trivial_main(void *arg) {
  return arg;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "many") == 0) { /* more threads than the tables hold */
    for (long i = 0; i < MANY; i++) {
      pthread_t t;
      void *result;
      pthread_create(&t, NULL, trivial_main, (void *)i);
      pthread_join(t, &result);
      if (result != (void *)i) return 1;
    }
    printf("%d threads\n", MANY);
    return 0;
  }
  pthread_t th[WORKERS];
  pthread_mutex_lock(&lock);
  for (long i = 0; i < WORKERS; i++) pthread_create(&th[i], NULL, worker_main, (void *)i);
  while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < WORKERS) pause_briefly();
  for (int i = 0; i < WORKERS; i++)
    while (!sleeping(tids[i])) pause_briefly();
  pthread_mutex_unlock(&lock);
  long sum = 0;
  for (int i = 0; i < WORKERS; i++) {
    void *result;
    pthread_join(th[i], &result);
    sum += (long)result;
  }
  printf("workers %d, sum %ld\n", count, sum);
  if (argc > 1 && strcmp(argv[1], "cancel") == 0) {
    pthread_t victim;
    pthread_create(&victim, NULL, cancelled_main, NULL);
    pause_briefly();
    pthread_cancel(victim);
    void *result;
    pthread_join(victim, &result);
    printf("cancelled %s\n", result == PTHREAD_CANCELED ? "yes" : "no");
  }
  return 0;
}
