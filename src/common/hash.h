/* SPDX-License-Identifier: MIT */
/* The one 64-bit mixer of the code base, for hash tables and cheap pseudo-random draws.
 * Pure functions: safe everywhere, freestanding core included. */
#ifndef CTS_HASH_H
#define CTS_HASH_H

#include <stdint.h>

/* A bijective finaliser (murmur3's fmix64 constants): every input bit affects every
 * output bit, so masking the low bits gives a good table index even for sequential keys
 * such as object ids and addresses. */
static inline uint64_t cts_mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

/* Folds value v into running hash h (order matters), for keys of several words such as
 * backtraces and (code, parent) pairs. */
static inline uint64_t cts_hash_combine(uint64_t h, uint64_t v) {
  return cts_mix64(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}

/* splitmix64: the next value of a sequence whose state advances by the golden ratio;
 * for deterministic draws (subsampling, tests), not for security. */
static inline uint64_t cts_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#endif /* CTS_HASH_H */
