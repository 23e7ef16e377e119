/* SPDX-License-Identifier: MIT */
/* Open-addressing map from non-zero u64 keys to u64 values: location codes, object ids.
 * Memory grows with distinct keys only. */
#ifndef CTS_U64MAP_H
#define CTS_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cts_u64map {
  uint64_t *keys; /* 0 = empty */
  uint64_t *vals;
  size_t cap, count;
  bool has_zero; /* key 0 is kept aside */
  uint64_t zero_val;
} cts_u64map_t;

void cts_u64map_init(cts_u64map_t *m);
void cts_u64map_fini(cts_u64map_t *m);
/* Returns a pointer to the value of key, or NULL. */
uint64_t *cts_u64map_find(const cts_u64map_t *m, uint64_t key);
/* Inserts key with val if absent; returns the value slot and sets *added. NULL = no memory. */
uint64_t *cts_u64map_insert(cts_u64map_t *m, uint64_t key, uint64_t val, bool *added);
bool cts_u64map_remove(cts_u64map_t *m, uint64_t key);

#endif /* CTS_U64MAP_H */
