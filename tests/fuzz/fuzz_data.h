/* SPDX-License-Identifier: MIT */
/* Structured values drawn from a fuzz input. Each call consumes a few bytes from the
 * front; once the input is used up every call returns the smallest value it can, so a
 * harness always terminates and short inputs still describe valid (if dull) programs.
 * Values are taken little-endian so that a byte the fuzzer changes moves a value by a
 * predictable amount, which helps its comparison-guided mutations. */
#ifndef CTS_FUZZ_DATA_H
#define CTS_FUZZ_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fuzz_data {
  const uint8_t *p;
  size_t left;
} fuzz_data_t;

static inline fuzz_data_t fuzz_data_make(const uint8_t *data, size_t size) {
  return (fuzz_data_t){data, size};
}

static inline bool fuzz_data_empty(const fuzz_data_t *fd) {
  return fd->left == 0;
}

/* The next `nbytes` (≤ 8) bytes as an unsigned integer; missing bytes read as zero. */
static inline uint64_t fuzz_take_bytes(fuzz_data_t *fd, unsigned nbytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < nbytes && fd->left; i++, fd->p++, fd->left--)
    v |= (uint64_t)fd->p[0] << (8 * i);
  return v;
}

static inline uint8_t fuzz_u8(fuzz_data_t *fd) {
  return (uint8_t)fuzz_take_bytes(fd, 1);
}
static inline uint16_t fuzz_u16(fuzz_data_t *fd) {
  return (uint16_t)fuzz_take_bytes(fd, 2);
}
static inline uint32_t fuzz_u32(fuzz_data_t *fd) {
  return (uint32_t)fuzz_take_bytes(fd, 4);
}
static inline uint64_t fuzz_u64(fuzz_data_t *fd) {
  return fuzz_take_bytes(fd, 8);
}
static inline bool fuzz_bool(fuzz_data_t *fd) {
  return fuzz_u8(fd) & 1u;
}

/* A value in [lo, hi], consuming only as many bytes as the span needs. */
static inline uint64_t fuzz_range(fuzz_data_t *fd, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = hi - lo;
  unsigned nbytes = 1;
  while (nbytes < 8 && (span >> (8 * nbytes)) != 0) nbytes++;
  const uint64_t v = fuzz_take_bytes(fd, nbytes);
  return span == UINT64_MAX ? v : lo + v % (span + 1);
}

/* Up to `max` bytes (fewer if the input ends) copied to out; returns how many. */
static inline size_t fuzz_bytes(fuzz_data_t *fd, void *out, size_t max) {
  const size_t n = max < fd->left ? max : fd->left;
  if (n) memcpy(out, fd->p, n);
  fd->p += n;
  fd->left -= n;
  return n;
}

/* A small deterministic generator, seeded from the input, for the parts of a program
 * that would cost too many input bytes (long backtraces, long names). */
typedef struct fuzz_rng {
  uint64_t state;
} fuzz_rng_t;

static inline uint64_t fuzz_rng_next(fuzz_rng_t *rng) {
  /* splitmix64 */
  uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline uint64_t fuzz_rng_below(fuzz_rng_t *rng, uint64_t n) {
  return n ? fuzz_rng_next(rng) % n : 0;
}

#endif /* CTS_FUZZ_DATA_H */
