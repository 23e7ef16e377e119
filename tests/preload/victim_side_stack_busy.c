/* SPDX-License-Identifier: MIT */
/* Victim: a thread's first sample, on a coroutine's stack, while another thread holds the
 * tracer's side stack (side_stack.h).
 *
 *   victim_side_stack_busy [BYTES [free]]
 *     main allocates (the session's and its own first samples); thread A allocates, and
 *     its first sample's look-up of its stack (an open of /proc/self/maps, on the side
 *     stack) is held in this program's `open` until thread B, meanwhile, ran a coroutine
 *     on a stack of BYTES (default 64 KiB) above an inaccessible page whose allocations
 *     make B's first samples. Prints "used N": the bytes of B's coroutine stack ever
 *     written. Untraced nothing opens /proc/self/maps: A goes on at once. With `free`, A
 *     holds nothing: B starts once A's first sample is over (the side stack free).
 *   Deterministic: the side stack is taken whenever B's first sample comes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define UNTOUCHED 0xa5

static sem_t side_stack_held, coroutine_done;
static __thread int holds_the_look_up;
static int held, hold = 1;
static ucontext_t thread_context, coroutine_context;
static void *volatile kept;

/* The tracer's open (the executable's symbols come first for the preload library too):
 * thread A's open of /proc/self/maps waits, on the side stack, for B's coroutine. */
int open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  if (holds_the_look_up && !held && strcmp(path, "/proc/self/maps") == 0) {
    held = 1;
    sem_post(&side_stack_held);
    while (sem_wait(&coroutine_done) != 0) {}
  }
  return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static __attribute__((noinline)) void allocate(size_t size) {
  kept = malloc(size);
  free(kept);
}

static void *thread_a(void *unused) {
  (void)unused;
  holds_the_look_up = hold;
  allocate(64);
  if (!held) sem_post(&side_stack_held); /* untraced */
  return NULL;
}

static void coroutine(void) {
  for (size_t i = 0; i < 8; i++) allocate(40 + i);
}

/* Thread B's coroutine and its report (a function of its own: nothing of the caller's
 * frame lives across getcontext, which returns twice). */
static int run_coroutine(unsigned char *stack, size_t stack_bytes) {
  if (getcontext(&coroutine_context) != 0) return -1;
  coroutine_context.uc_stack.ss_sp = stack;
  coroutine_context.uc_stack.ss_size = stack_bytes;
  coroutine_context.uc_link = &thread_context;
  makecontext(&coroutine_context, coroutine, 0);
  return swapcontext(&thread_context, &coroutine_context);
}

static void *thread_b(void *stack_bytes_p) {
  const size_t stack_bytes = *(size_t *)stack_bytes_p, page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t pages = (stack_bytes + page - 1) / page;
  unsigned char *const map =
      mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || mprotect(map, page, PROT_NONE) != 0) return NULL;
  unsigned char *const stack = map + page;
  memset(stack, UNTOUCHED, stack_bytes);
  while (sem_wait(&side_stack_held) != 0) {}
  const int ran = run_coroutine(stack, stack_bytes);
  sem_post(&coroutine_done);
  if (ran != 0) return NULL;
  size_t untouched = 0;
  while (untouched < stack_bytes && stack[untouched] == UNTOUCHED) untouched++;
  printf("used %zu\n", stack_bytes - untouched);
  return stack;
}

int main(int argc, char **argv) {
  size_t stack_bytes = argc > 1 ? (size_t)strtoul(argv[1], NULL, 0) : 64 * 1024;
  hold = !(argc > 2 && strcmp(argv[2], "free") == 0);
  if (stack_bytes < 1024 || sem_init(&side_stack_held, 0, 0) != 0 ||
      sem_init(&coroutine_done, 0, 0) != 0)
    return 2;
  allocate(100);
  pthread_t a, b;
  void *ran = NULL;
  if (pthread_create(&b, NULL, thread_b, &stack_bytes) != 0 ||
      pthread_create(&a, NULL, thread_a, NULL) != 0)
    return 2;
  pthread_join(a, NULL);
  pthread_join(b, &ran);
  return ran ? 0 : 2;
}
