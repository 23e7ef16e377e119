/* SPDX-License-Identifier: MIT */
/* An executable that is its own allocator, as Firefox's is (mozjemalloc lives in the
 * executable): it defines malloc, free, calloc, realloc and malloc_usable_size over mmap,
 * one mapping a block with its size in a header, and 4 threads allocate through them
 * (libc's own allocations reach them too). A free of a block it did not make says so and
 * exits 3. Prints "blocks=N" (N: blocks made, at least 4 x 1000) and exits 0. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
  size_t mapped; /* bytes of the mapping, header included */
  size_t magic;
} header_t;

#define OWN_MAGIC 0x6f776e6d616c6c63ull

static size_t blocks; /* atomically */

/* The header before block p. Out of line: <stdlib.h> declares malloc with alloc_size, and
 * gcc -O2, seeing a block's size where this is inlined, warned of the header as an access
 * before the object (-Warray-bounds). */
static __attribute__((noinline)) header_t *header_of(void *p) {
  return (header_t *)p - 1;
}

void *malloc(size_t size) {
  const size_t mapped = size + sizeof(header_t);
  header_t *const h =
      mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (h == MAP_FAILED) return NULL;
  h->mapped = mapped;
  h->magic = OWN_MAGIC;
  __atomic_fetch_add(&blocks, 1, __ATOMIC_RELAXED);
  return h + 1;
}

void free(void *p) {
  if (!p) return;
  header_t *const h = header_of(p);
  if (h->magic != OWN_MAGIC) {
    static const char line[] = "victim_own_malloc: free of a block it did not make\n";
    if (write(STDERR_FILENO, line, sizeof line - 1)) _exit(3);
    _exit(3);
  }
  munmap(h, h->mapped);
}

void *calloc(size_t n, size_t size) {
  if (size && n > (size_t)-1 / 2 / size) return NULL;
  return malloc(n * size); /* mmap'd: zero already */
}

void *realloc(void *p, size_t size) {
  void *const q = malloc(size);
  if (!q || !p) return q;
  const size_t old = header_of(p)->mapped - sizeof(header_t);
  memcpy(q, p, old < size ? old : size);
  free(p);
  return q;
}

size_t malloc_usable_size(void *p) {
  return p ? header_of(p)->mapped - sizeof(header_t) : 0;
}

static void *allocate(void *arg) {
  for (int i = 0; i < 1000; i++) {
    char *s = malloc(32 + (size_t)i % 100);
    s[0] = 1;
    s = realloc(s, 200);
    free(s);
  }
  return arg;
}

int main(void) {
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, allocate, NULL);
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  printf("blocks>=%d\n", __atomic_load_n(&blocks, __ATOMIC_RELAXED) >= 8000 ? 8000 : 0);
  return 0;
}
