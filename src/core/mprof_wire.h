/* SPDX-License-Identifier: MIT */
/* Constants and byte-level helpers of the mirage-profile CTF format shared by the writer,
 * the reader and the converter. Section numbers refer to docs/formats/mprof.md. Byte
 * loads and stores are cts_ld_le* / cts_st_le* from common/endian.h. */
#ifndef CTS_MPROF_WIRE_H
#define CTS_MPROF_WIRE_H

#include <stdint.h>

#include <ctfscope/tasks.h>

#include "../common/endian.h"

#define MPROF_MAGIC            0xC1FC1FC1u /* §2.3, stored little-endian: c1 1f fc c1 */
#define MPROF_OFF_MAGIC        0u
#define MPROF_OFF_UUID         4u
#define MPROF_OFF_PACKET_SIZE  20u
#define MPROF_OFF_COUNT        24u
#define MPROF_OFF_CONTENT_SIZE 26u
#define MPROF_HEADER           30u
#define MPROF_EVENT_HEADER     9u /* u64 timestamp + u8 id (§2.4) */

/* The uuid every mirage-profile trace carries (§2.2). */
static const uint8_t cts__mprof_uuid[16] = {0x05, 0x88, 0x3b, 0x8d, 0x52, 0x1a, 0x48, 0x7b,
                                            0xb3, 0x97, 0x45, 0x6a, 0xb1, 0x50, 0x68, 0x0c};

/* Layout of an event kind after the 9-byte header (§2.5): whether it has the 8-byte
 * thread context, a u64/i64 field, a thread_type byte, and a trailing string. */
typedef struct mprof_layout {
  uint8_t context, word, type_byte, string;
} cts__mprof_layout_t;

static const cts__mprof_layout_t cts__mprof_layouts[CTS_MPROF_EVENT_IDS] = {
    [CTS_MPROF_CREATES] = {1, 1, 1, 0},    [CTS_MPROF_READ] = {1, 1, 0, 0},
    [CTS_MPROF_FULFILLS] = {1, 1, 0, 0},   [CTS_MPROF_FAILS] = {1, 1, 0, 1},
    [CTS_MPROF_BECOMES] = {1, 1, 0, 0},    [CTS_MPROF_LABEL] = {1, 0, 0, 1},
    [CTS_MPROF_INCREASE] = {1, 1, 0, 1},   [CTS_MPROF_SWITCH] = {1, 0, 0, 0},
    [CTS_MPROF_GC] = {0, 1, 0, 0},         [CTS_MPROF_SIGNAL] = {1, 1, 0, 0},
    [CTS_MPROF_TRY_READ] = {1, 1, 0, 0},   [CTS_MPROF_COUNTER] = {1, 1, 0, 1},
    [CTS_MPROF_READ_LATER] = {1, 1, 0, 0}, [CTS_MPROF_SIGNAL_NOSWITCH] = {1, 1, 0, 0},
    [CTS_MPROF_ALLOC] = {1, 1, 0, 0},      [CTS_MPROF_ANCHOR] = {1, 1, 0, 0},
    [CTS_MPROF_LOST] = {1, 1, 0, 0},
};

/* Event size without its string bytes (a string adds len + 1). */
static inline uint32_t cts__mprof_fixed_size(unsigned id) {
  const cts__mprof_layout_t l = cts__mprof_layouts[id];
  return MPROF_EVENT_HEADER + 8u * l.context + 8u * l.word + l.type_byte + l.string;
}

/* Whether the word field is signed (increase amount, counter value). */
static inline int cts__mprof_word_is_value(unsigned id) {
  return id == CTS_MPROF_INCREASE || id == CTS_MPROF_COUNTER;
}

#endif /* CTS_MPROF_WIRE_H */
