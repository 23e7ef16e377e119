/* SPDX-License-Identifier: MIT */
/* The memtrace reader's settings for a test that reads a trace in memory: the defaults,
 * with the system allocator (cts_os_allocator()). Header-only; no state. */
#ifndef CTS_TEST_MT_READER_CONFIG_H
#define CTS_TEST_MT_READER_CONFIG_H

#include <ctfscope/memtrace.h>

#include "../src/os/os.h"

static inline cts_mt_reader_config_t test_reader_config(void) {
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  return cfg;
}

#endif /* CTS_TEST_MT_READER_CONFIG_H */
