/* SPDX-License-Identifier: MIT */
/* Sampled blocks carry a header in front (src/preload/preload_hooks.c): every way a block can
 * change hands must still see the program's bytes and sizes. malloc_usable_size of each
 * kind of block, realloc between unsampled, sampled and aligned blocks (growing, shrinking,
 * to 0), calloc zeroing, blocks that libc itself grows (getline, open_memstream) and frees
 * (fclose), and a block from before main freed at the end. Prints what it checked; any
 * mismatch exits 1. At rate 1 every block of the program is sampled; under MEMTRACE_RATE
 * 1e-4 (the test's second run) almost none are, so both paths are covered. */
#define _GNU_SOURCE
#include <malloc.h>
#include <string.h>

#include "victim.h"

static char *from_constructor;

#ifdef VICTIM_TAKE_FREE_ADDRESS
/* Built without PIE, taking free's address gives the executable a canonical PLT entry for
 * free (an undefined symbol with an address), which hides where its calls to free go. */
void (*volatile victim_free_address)(void *);
#endif
static uint64_t checks, bad;

__attribute__((constructor(101))) static void early(void) {
  from_constructor = malloc(40);
  if (from_constructor) strcpy(from_constructor, "before main");
}

static void check(int ok) {
  checks++;
  bad += !ok;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7);
}

static int same(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(seed + i * 7)) return 0;
  return 1;
}

int main(void) {
  victim_quiet_stdio();
#ifdef VICTIM_TAKE_FREE_ADDRESS
  victim_free_address = free; /* in code: an absolute address, from the canonical entry */
#endif
  uint64_t state = 7;
  for (int round = 0; round < 300; round++) {
    const size_t a = 1 + victim_next(&state) % 5000, b = 1 + victim_next(&state) % 9000;
    unsigned char *p = malloc(a);
    check(p && malloc_usable_size(p) >= a);
    fill(p, a, (unsigned)round);
    p = realloc(p, b);
    check(p && malloc_usable_size(p) >= b && same(p, a < b ? a : b, (unsigned)round));
    unsigned char *z = calloc(b, 1);
    size_t zeros = 0;
    for (size_t i = 0; i < b; i++) zeros += z[i] == 0;
    check(zeros == b && malloc_usable_size(z) >= b);
    const size_t align = (size_t)16 << (round % 9);
    void *al = NULL;
    check(posix_memalign(&al, align, a) == 0 && ((uintptr_t)al & (align - 1)) == 0);
    check(malloc_usable_size(al) >= a);
    fill(al, a, 3);
    al = realloc(al, b); /* an aligned block is reallocated like any other */
    check(al && same(al, a < b ? a : b, 3));
    unsigned char *m = memalign(align, b);
    check(m && ((uintptr_t)m & (align - 1)) == 0);
    check(realloc(m, 0) == NULL); /* glibc: frees m */
    check(realloc(z, 0) == NULL);
    free(al);
    free(p);
  }
  char *line = NULL;
  size_t cap = 0;
  FILE *in = fmemopen((char *)"a line that getline grows its buffer for\nsecond\n", 48, "r");
  size_t lines = 0;
  while (in && getline(&line, &cap, in) > 0) lines++;
  if (in) fclose(in);
  free(line);
  check(lines == 2);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  for (int i = 0; out && i < 2000; i++) fprintf(out, "%d,", i);
  if (out) fclose(out);
  check(text && len > 8000 && strncmp(text, "0,1,2,", 6) == 0);
  free(text);
  check(from_constructor && strcmp(from_constructor, "before main") == 0);
  free(from_constructor);
  printf("checks=%llu bad=%llu\n", (unsigned long long)checks, (unsigned long long)bad);
  return bad ? 1 : 0;
}
