/* SPDX-License-Identifier: MIT */
/* Constants and byte-level helpers of the memtrace format shared by the reader and the
 * writer. Section numbers refer to docs/formats/memtrace.md. Byte loads and stores are
 * cts_ld_le* / cts_st_le* from common/endian.h. */
#ifndef CTS_MEMTRACE_WIRE_H
#define CTS_MEMTRACE_WIRE_H

#include <stdint.h>

#include "../common/compiler.h"
#include "../common/endian.h"

#define MT_MAGIC               0xC1FC1FC1u /* §4 */
#define MT_VERSION_OFFSET      28u         /* u16 version sits here in every version */
#define MT_MIN_PREFIX          30u         /* bytes needed to know the header size */
#define MT_TIME_BITS           25u         /* §5: low bits of the timestamp in each event */
#define MT_TIME_MASK           ((1u << MT_TIME_BITS) - 1u)
#define MT_EV_TRACE_INFO       0u /* §5.1 */
#define MT_EV_LOCATION         1u
#define MT_EV_ALLOC            2u
#define MT_EV_PROMOTE          3u
#define MT_EV_COLLECT          4u
#define MT_EV_SHORT_ALLOC_BASE 100u    /* ids 101…116 = short alloc of 1…16 words */
#define MT_CACHE_SIZE          16384u  /* §8.4: backtrace cache buckets */
#define MT_MTF_SIZE            31u     /* §7.2: move-to-front table capacity */
#define MT_MTF_NEW             31u     /* code meaning "a new name follows" */
#define MT_VERIFY_NONE         0xFFFFu /* §8.6: dummy verifier index */
#define MT_VERIFY_FIRST        4242u
#define MT_VERIFY_STEP         5413u
#define MT_ID_CHUNK            10000u    /* §12: v3 object ids come in chunks */
#define MT_MAX_PACKET_SPAN_US  30000000u /* §10.2: a packet spans at most 30 s */

/* §7.1: the 48-bit location bit field. */
#define MT_LOC_LINE_MAX  0xFFFFFu
#define MT_LOC_START_MAX 0xFFu
#define MT_LOC_END_MAX   0x3FFu

/* §8.5: the two candidate buckets of a location code. */
static inline uint32_t cts__mt_hash1(uint64_t code) {
  return (uint32_t)((code * 0x4983723u) >> 11) & (MT_CACHE_SIZE - 1);
}
static inline uint32_t cts__mt_hash2(uint64_t code) {
  return (uint32_t)((code * 0xFDEA731u) >> 21) & (MT_CACHE_SIZE - 1);
}

static inline uint32_t cts__mt_header_size(uint16_t version) {
  return version >= 3 ? 68u : 66u;
}

/* Parsed packet header (§4). */
typedef struct mt_header {
  uint32_t magic;
  uint32_t size_bits;
  uint64_t time_begin, time_end;
  uint32_t flush_duration;
  uint16_t version;
  uint64_t pid;
  uint16_t domain;
  uint16_t verify_ix, verify_pred;
  uint64_t verify_val;
  uint64_t alloc_id_begin, alloc_id_end;
} cts__mt_header_t;

/* p must hold cts__mt_header_size(version at p+28) bytes. */
static inline void cts__mt_parse_header(const uint8_t *p, cts__mt_header_t *h) {
  h->magic = cts_ld_le32(p);
  h->size_bits = cts_ld_le32(p + 4);
  h->time_begin = cts_ld_le64(p + 8);
  h->time_end = cts_ld_le64(p + 16);
  h->flush_duration = cts_ld_le32(p + 24);
  h->version = cts_ld_le16(p + 28);
  h->pid = cts_ld_le64(p + 30);
  const uint8_t *q = p + 38;
  h->domain = 0;
  if (h->version >= 3) h->domain = cts_ld_le16(q), q += 2;
  h->verify_ix = cts_ld_le16(q);
  h->verify_pred = cts_ld_le16(q + 2);
  h->verify_val = cts_ld_le64(q + 4);
  h->alloc_id_begin = cts_ld_le64(q + 12);
  h->alloc_id_end = cts_ld_le64(q + 20);
}

#endif /* CTS_MEMTRACE_WIRE_H */
