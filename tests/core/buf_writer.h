/* SPDX-License-Identifier: MIT */
/* A memtrace writer for the core tests that writes a trace into a buf_t (tests/test_buf.h),
 * in memory of its own, and a location callback for traces whose codes need no real names.
 * Test-only: asserts with the harness of tests/test.h. */
#ifndef CTS_TESTS_BUF_WRITER_H
#define CTS_TESTS_BUF_WRITER_H

#include <stdlib.h>

#include <ctfscope/memtrace.h>

#include "../test.h"
#include "../test_buf.h"

/* Every code names itself: a few bytes of location each ("f.c", "fn", its low bits as the
 * line). */
static inline size_t resolve_any(void *ud, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)ud;
  if (max) out[0] = (cts_mt_location_t){(uint32_t)(code & 0xFFFFF), 0, 0, "f.c", "fn"};
  return 1;
}

/* Opens *w with cfg, its write callback set to append to out, in memory from aligned_alloc
 * given back in *mem (the caller frees it once the writer is closed). */
static inline void open_buf_writer(cts_mt_writer_config_t *cfg, buf_t *out, cts_mt_writer_t **w,
                                   void **mem) {
  cfg->write = buf_write;
  cfg->write_user_data = out;
  const size_t size = cts_mt_writer_size(cfg);
  *mem = aligned_alloc(64, (size + 63) / 64 * 64);
  CTS_ASSERT(*mem != NULL);
  CTS_ASSERT_EQ_INT(cts_mt_writer_init(w, *mem, size, cfg), 0);
}

#endif /* CTS_TESTS_BUF_WRITER_H */
