/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the collector's trace sink (src/collector/trace_sink.c) on arbitrary
 * bytes, as a peer would send them: format detection, the packet framer of the `packets`
 * validation level (with its zero-copy path, the bytes handed over through a pipe and the
 * headers read back from the file), and the streaming reader behind `events` and `full`.
 *
 * The first input byte sets the piece size (1-256 bytes); the rest is the stream. Each
 * stream goes to one sink per validation level, in the same pieces. Besides memory errors
 * (ASan/UBSan) the target aborts when a sink breaks one of its promises:
 *  - what is complete never exceeds what was received, and the finished file holds
 *    exactly the first `complete` bytes of the stream (or no file is left);
 *  - the levels are ordered: a packet that a deeper level accepts, a shallower one accepts
 *    too (complete bytes: packets >= events >= full);
 *  - an error comes with a message. */
#define _GNU_SOURCE /* pipe2() */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/trace_sink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

#define MAX_PACKET_SIZE (64u << 10)

static int scratch_dir = -1;
static char scratch_path[] = "/tmp/fuzz_trace_sink-XXXXXX";
static int carry[2] = {-1, -1};

/* Every file is removed after its run; the directory goes at exit. */
static void tear_down(void) {
  rmdir(scratch_path);
}

static void set_up(void) {
  if (scratch_dir >= 0) return;
  CHECK(mkdtemp(scratch_path) != NULL);
  scratch_dir = open(scratch_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK(scratch_dir >= 0);
  atexit(tear_down);
  CHECK(pipe2(carry, O_CLOEXEC) == 0);
}

/* Feeds one sink and finishes it; returns its complete bytes. */
static uint64_t run_sink(cts_sink_validate_t level, const uint8_t *p, size_t len, size_t piece,
                         bool through_pipe) {
  static uint64_t serial;
  cts_sink_config_t cfg;
  cts_sink_config_init(&cfg);
  cfg.dir_fd = scratch_dir;
  cfg.fixed_name = "out.ctf";
  cfg.max_packet_size = MAX_PACKET_SIZE;
  cfg.validate = level;
  cfg.serial = ++serial;
  cts_sink_t *s;
  CHECK(cts_sink_create(&s, &cfg) == 0);
  int err = 0;
  for (size_t off = 0; off < len && !err; off += piece) {
    const size_t n = len - off < piece ? len - off : piece;
    if (through_pipe && cts_sink_can_take_pipe(s)) {
      CHECK(write(carry[1], p + off, n) == (ssize_t)n);
      err = cts_sink_feed_pipe(s, carry[0], n);
      if (err) {
        /* The caller drains what the sink left in the pipe. */
        char sink_buf[256];
        int avail = 0;
        while (ioctl(carry[0], FIONREAD, &avail) == 0 && avail > 0)
          CHECK(read(carry[0], sink_buf, avail < 256 ? (size_t)avail : 256) > 0);
      }
    } else {
      err = cts_sink_feed(s, p + off, n);
    }
    if (err) CHECK(cts_sink_error(s) == err && cts_sink_message(s)[0] != '\0');
  }
  const uint64_t complete = cts_sink_complete_bytes(s);
  CHECK(complete <= cts_sink_received(s) && cts_sink_received(s) <= len);
  const char *saved = NULL;
  CHECK(cts_sink_finish(s, &saved) == 0);
  if (saved) {
    const int fd = openat(scratch_dir, saved, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && (uint64_t)st.st_size == complete);
    uint8_t *back = malloc(complete ? complete : 1);
    CHECK(back && pread(fd, back, complete, 0) == (ssize_t)complete);
    CHECK(memcmp(back, p, complete) == 0);
    free(back);
    close(fd);
    unlinkat(scratch_dir, saved, 0);
  } else {
    CHECK(complete == 0 || !cts_sink_has_info(s));
  }
  cts_sink_destroy(s);
  return saved ? complete : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  set_up();
  const size_t piece = (size_t)data[0] + 1;
  const uint8_t *p = data + 1;
  const size_t len = size - 1;
  const uint64_t packets = run_sink(CTS_SINK_VALIDATE_PACKETS, p, len, piece, false);
  const uint64_t piped = run_sink(CTS_SINK_VALIDATE_PACKETS, p, len, piece, true);
  const uint64_t events = run_sink(CTS_SINK_VALIDATE_EVENTS, p, len, piece, false);
  const uint64_t full = run_sink(CTS_SINK_VALIDATE_FULL, p, len, piece, false);
  CHECK(piped == packets);
  CHECK(packets >= events && events >= full);
  return 0;
}
