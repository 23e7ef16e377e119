/* SPDX-License-Identifier: MIT */
/* Little-endian loads and stores of unaligned bytes: the one copy used by both wire
 * formats (memtrace and mirage-profile CTF are little-endian). memcpy compiles to one
 * move on x86-64 and stays correct on big-endian hosts. Freestanding: uses only
 * __builtin_memcpy. */
#ifndef CTS_ENDIAN_H
#define CTS_ENDIAN_H

#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CTS__FROM_LE16(v) __builtin_bswap16(v)
#define CTS__FROM_LE32(v) __builtin_bswap32(v)
#define CTS__FROM_LE64(v) __builtin_bswap64(v)
#else
#define CTS__FROM_LE16(v) (v)
#define CTS__FROM_LE32(v) (v)
#define CTS__FROM_LE64(v) (v)
#endif

static inline uint16_t cts_ld_le16(const uint8_t *p) {
  uint16_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return CTS__FROM_LE16(v);
}
static inline uint32_t cts_ld_le32(const uint8_t *p) {
  uint32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return CTS__FROM_LE32(v);
}
static inline uint64_t cts_ld_le64(const uint8_t *p) {
  uint64_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return CTS__FROM_LE64(v);
}
static inline void cts_st_le16(uint8_t *p, uint16_t v) {
  v = CTS__FROM_LE16(v);
  __builtin_memcpy(p, &v, sizeof v);
}
static inline void cts_st_le32(uint8_t *p, uint32_t v) {
  v = CTS__FROM_LE32(v);
  __builtin_memcpy(p, &v, sizeof v);
}
static inline void cts_st_le64(uint8_t *p, uint64_t v) {
  v = CTS__FROM_LE64(v);
  __builtin_memcpy(p, &v, sizeof v);
}

#endif /* CTS_ENDIAN_H */
