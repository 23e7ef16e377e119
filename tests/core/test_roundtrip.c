/* SPDX-License-Identifier: MIT */
/* Writer conformance: decoding each real memtrace trace and re-encoding it with our writer
 * reproduces the original file byte for byte (memtrace.md §15). */
#include <stdlib.h>

#include "../../src/analysis/transcode.h"
#include "../test.h"
#include "../test_buf.h"

/* Re-encodes `name` as `version` and compares it with `expected` (the original if NULL). */
static void check_roundtrip_to(const char *name, uint16_t version, const char *expected) {
  CTS_REQUIRE_CORPUS(corpus);
  char path[1024];
  snprintf(path, sizeof path, "%s/memtrace/traces/%s", corpus, name);
  buf_t orig = {0}, out = {0};
  buf_t src = {0};
  CTS_ASSERT_MSG(read_file(path, &src), "cannot read %s", path);
  if (expected) {
    snprintf(path, sizeof path, "%s/memtrace/traces/%s", corpus, expected);
    CTS_ASSERT_MSG(read_file(path, &orig), "cannot read %s", path);
  } else {
    orig = src;
  }
  cts_transcode_t t;
  CTS_ASSERT_EQ_INT(cts_transcode_init(&t, version, CTS_MT_ENCODING_MEMTRACE, buf_write, &out), 0);
  int e = cts_transcode_feed(&t, src.data, src.len);
  if (!e) e = cts_transcode_finish(&t);
  const char *msg = cts_mt_reader_error_message(t.reader);
  const uint64_t mismatches = t.id_mismatches;
  cts_transcode_fini(&t);
  CTS_ASSERT_MSG(e == 0, "%s: %s (%s)", name, msg, cts_err_name(e));
  CTS_ASSERT_EQ_U64(mismatches, 0);
  size_t i = 0;
  while (i < orig.len && i < out.len && orig.data[i] == out.data[i]) i++;
  const bool same = orig.len == out.len && i == orig.len;
  if (src.data != orig.data) free(src.data);
  free(orig.data);
  free(out.data);
  CTS_ASSERT_MSG(same, "%s: re-encoded trace differs from the original at byte %zu (sizes %zu)",
                 name, i, orig.len);
}

#define ROUNDTRIP(id, file, version)         \
  CTS_TEST(id) {                             \
    check_roundtrip_to(file, version, NULL); \
  }

ROUNDTRIP(p1_r1, "p1_short_lived.r1.ctf", 2)
ROUNDTRIP(p1_r1e_2, "p1_short_lived.r1e-2.ctf", 2)
ROUNDTRIP(p1_r1e_4, "p1_short_lived.r1e-4.ctf", 2)
ROUNDTRIP(p2_r1, "p2_leak.r1.ctf", 2)
ROUNDTRIP(p2_r1e_2, "p2_leak.r1e-2.ctf", 2)
ROUNDTRIP(p2_r1e_4, "p2_leak.r1e-4.ctf", 2)
ROUNDTRIP(p3_r1, "p3_large_arrays.r1.ctf", 2)
ROUNDTRIP(p3_r1e_2, "p3_large_arrays.r1e-2.ctf", 2)
ROUNDTRIP(p3_r1e_4, "p3_large_arrays.r1e-4.ctf", 2)
ROUNDTRIP(p4_r1, "p4_deep_recursion.r1.ctf", 2)
ROUNDTRIP(p4_r1e_4, "p4_deep_recursion.r1e-4.ctf", 2)
ROUNDTRIP(p5_r1, "p5_mixed_promote.r1.ctf", 2)
ROUNDTRIP(p5_r1e_2, "p5_mixed_promote.r1e-2.ctf", 2)
ROUNDTRIP(p5_r1e_4, "p5_mixed_promote.r1e-4.ctf", 2)
ROUNDTRIP(p1_r1_v3, "p1_short_lived.r1.v3.ctf", 3)
ROUNDTRIP(p5_r1e_4_v3, "p5_mixed_promote.r1e-4.v3.ctf", 3)
/* The v002 sources re-encoded as v003 give memtrace's own .v3 files. */
CTS_TEST(p1_r1_to_v3) {
  check_roundtrip_to("p1_short_lived.r1.ctf", 3, "p1_short_lived.r1.v3.ctf");
}
CTS_TEST(p5_r1e_4_to_v3) {
  check_roundtrip_to("p5_mixed_promote.r1e-4.ctf", 3, "p5_mixed_promote.r1e-4.v3.ctf");
}
/* And back: the v003 files re-encoded as v002 give memtrace's v002 originals. */
CTS_TEST(p1_r1_v3_to_v2) {
  check_roundtrip_to("p1_short_lived.r1.v3.ctf", 2, "p1_short_lived.r1.ctf");
}

CTS_TEST_MAIN()
