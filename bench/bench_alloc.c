/* SPDX-License-Identifier: MIT */
/* bench_alloc: the workload of the allocation-tracer benchmark (bench/run_alloc_bench.sh).
 * A plain program, linked against nothing of ctfscope, so that the same binary runs
 * untraced, under libctfscope-preload.so and under heaptrack.
 *
 *   bench_alloc [PAIRS]   (default 10 000 000)
 *
 * Does PAIRS malloc+free pairs: a ring of 256 live blocks, each step frees the oldest and
 * allocates a new one. Sizes run from 8 B to 64 KiB (mean about 2.4 KiB: bucket k,
 * [8 << k, 16 << k) bytes, has weight 0.83^k), drawn from a fixed table. Allocations come
 * from 16 call stacks: 16 allocation sites, reached through 6, 10, 14 or 18 frames.
 * Prints the loop's own time per pair (the process's start-up and exit, where the tracer
 * starts and finishes its trace, are not in it; /usr/bin/time gives those), wall-clock and
 * as CPU time of the looping thread (CLOCK_THREAD_CPUTIME_ID: on a shared machine, time
 * spent waiting for a CPU is not in it, nor is the tracer's writer thread). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TABLE_SIZE 65536u
#define LIVE       256u
#define SITES      16u

static uint32_t sizes[TABLE_SIZE];
static void *live[LIVE];

typedef void *(*site_fn)(size_t);

/* Sixteen allocation sites: same code, different return addresses. */
#define SITE(n)                                                  \
  static __attribute__((noinline)) void *site_##n(size_t size) { \
    void *const p = malloc(size);                                \
    __asm__ volatile("" ::: "memory");                           \
    return p;                                                    \
  }
SITE(0)
SITE(1)
SITE(2)
SITE(3)
SITE(4)
SITE(5)
SITE(6)
SITE(7)
SITE(8)
SITE(9)
SITE(10)
SITE(11)
SITE(12)
SITE(13)
SITE(14)
SITE(15)

static site_fn const site_table[SITES] = {site_0,  site_1,  site_2,  site_3, site_4,  site_5,
                                          site_6,  site_7,  site_8,  site_9, site_10, site_11,
                                          site_12, site_13, site_14, site_15};

/* Reaches the site through `depth` more frames. */
static __attribute__((noinline)) void *descend(unsigned depth, unsigned site, size_t size) {
  void *p;
  if (depth == 0)
    p = site_table[site](size);
  else
    p = descend(depth - 1, site, size);
  __asm__ volatile("" ::: "memory"); /* not a tail call: the frames stay */
  return p;
}

static uint64_t next_random(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static void fill_sizes(void) {
  /* Weights 0.83^k for k = 0..12, scaled to integers. */
  uint32_t weight[13], total = 0;
  double w = 1e6;
  for (int k = 0; k < 13; k++, w *= 0.83) total += weight[k] = (uint32_t)w;
  uint64_t rng = 42;
  for (uint32_t i = 0; i < TABLE_SIZE; i++) {
    uint32_t pick = (uint32_t)(next_random(&rng) % total);
    int k = 0;
    while (pick >= weight[k]) pick -= weight[k++];
    const uint32_t lo = 8u << k;
    sizes[i] = lo + (uint32_t)(next_random(&rng) % lo);
    if (sizes[i] > 65536u) sizes[i] = 65536u;
  }
}

int main(int argc, char **argv) {
  const unsigned long long pairs = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000ull;
  fill_sizes();
  double mean = 0;
  for (uint32_t i = 0; i < TABLE_SIZE; i++) mean += sizes[i];
  mean /= TABLE_SIZE;
  for (unsigned i = 0; i < LIVE; i++) live[i] = malloc(sizes[i]);
  struct timespec t0, t1, c0, c1;
  uint64_t checksum = 0;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned long long i = 0; i < pairs; i++) {
    const unsigned slot = (unsigned)(i % LIVE);
    free(live[slot]);
    const unsigned site = (unsigned)(i * 7 % SITES); /* the 16 stacks, interleaved */
    const unsigned depth = 4 * (site % 4) + 3;
    const size_t size = sizes[i % TABLE_SIZE];
    unsigned char *const p = descend(depth, site, size);
    p[0] = (unsigned char)i;
    checksum += p[0];
    live[slot] = p;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  for (unsigned i = 0; i < LIVE; i++) free(live[i]);
  const double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
  const double cpu = (double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec);
  printf("pairs=%llu mean_size=%.0f ns_per_pair=%.2f cpu_ns_per_pair=%.2f checksum=%llu\n", pairs,
         mean, pairs ? ns / (double)pairs : 0.0, pairs ? cpu / (double)pairs : 0.0,
         (unsigned long long)checksum);
  return 0;
}
