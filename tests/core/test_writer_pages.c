/* SPDX-License-Identifier: MIT */
/* The pages a memtrace writer's start touches in fresh memory. Every traced image starts a
 * writer in pages fresh from mmap (cts__mt_writer_init_zeroed), and most images of an exec
 * chain write nothing else: each page the start touches is a page fault of every image
 * (bench/JOURNAL.md, "Issue 16: the exec chain's images"). The writer's state and its
 * trace-info packet fit in one page; the tables (440 KB) wait for the events that use them.
 * Its close without an event touches no other. Counted with mincore(): deterministic, no
 * timing. */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/core/memtrace_writer.h"
#include "../test.h"

static int discard(void *ud, const void *data, size_t len) {
  (void)data;
  *(size_t *)ud += len;
  return 0;
}

/* Pages of [mem, mem + size) that are mapped (touched since the mapping was made), into
 * *resident. */
static void resident_pages(void *mem, size_t size, size_t *resident) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t n = (size + page - 1) / page;
  unsigned char *const vec = malloc(n);
  CTS_ASSERT(vec != NULL);
  CTS_ASSERT_EQ_INT(mincore(mem, size, vec), 0);
  *resident = 0;
  for (size_t i = 0; i < n; i++) *resident += vec[i] & 1u;
  free(vec);
}

static void check_start(uint16_t version, cts_mt_encoding_t encoding) {
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  size_t written = 0;
  cfg.version = version;
  cfg.encoding = encoding;
  cfg.sample_rate = 1e-6;
  cfg.word_size = 8;
  cfg.executable_name = "/usr/bin/env";
  cfg.host_name = "a-build-host.example.org";
  cfg.runtime_params = "rate=1e-06 unwind=default";
  cfg.context = "exec 3";
  cfg.pid = 4242;
  cfg.start_time_us = 1000;
  cfg.write = discard;
  cfg.write_user_data = &written;
  cfg.max_backtrace_frames = 256;
  const size_t size = cts_mt_writer_size(&cfg);
  void *const mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CTS_ASSERT(mem != MAP_FAILED);
  size_t touched;
  resident_pages(mem, size, &touched);
  CTS_ASSERT_EQ_INT(touched, 0);
  cts_mt_writer_t *w = NULL;
  CTS_ASSERT_EQ_INT(cts__mt_writer_init_zeroed(&w, mem, size, &cfg), 0);
  CTS_ASSERT(written > 0); /* the trace-info packet went out */
  resident_pages(mem, size, &touched);
  CTS_ASSERT_MSG(touched <= 1, "v%u, encoding %d: the writer's start touched %zu pages",
                 (unsigned)version, (int)encoding, touched);
  /* Closed without an event (the writer process of most images of an exec chain). */
  CTS_ASSERT_EQ_INT(cts_mt_writer_close(w), 0);
  resident_pages(mem, size, &touched);
  CTS_ASSERT_MSG(touched <= 1, "v%u, encoding %d: the writer's close touched %zu pages",
                 (unsigned)version, (int)encoding, touched);
  munmap(mem, size);
}

CTS_TEST(writer_start_and_close_touch_one_page) {
  check_start(2, CTS_MT_ENCODING_MEMTRACE);
  check_start(3, CTS_MT_ENCODING_MEMTRACE);
  check_start(3, CTS_MT_ENCODING_COMPACT);
}

CTS_TEST_MAIN()
