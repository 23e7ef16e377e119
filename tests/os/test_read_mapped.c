/* SPDX-License-Identifier: MIT */
/* cts_os_read_memtrace() on plain files of several mapping windows: the reader sees exactly
 * what read() + feed gives it (events, packets, warnings, errors and their offsets, past
 * the first window too), and the file's bytes are not copied through read(2) (the
 * process's read byte count stays near zero, where read() would count every byte). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "../../src/common/hash.h"
#include "../../src/os/os.h"
#include "../test.h"

/* What a pass over a trace gave: a digest of every event, packet and warning. */
typedef struct digest {
  uint64_t hash, events, packets, warnings;
} digest_t;

static void fold(digest_t *d, uint64_t v) {
  d->hash = cts_hash_combine(d->hash, v);
}

/* Where an event callback cuts the file being read: at the cut_in_event-th event, to
 * cut_in_event_to bytes (0: it does not). */
static uint64_t cut_in_event, cut_in_event_to;
static const char *cut_in_event_path;
static uint64_t events_seen;

static void maybe_cut_in_event(void) {
  if (cut_in_event && ++events_seen == cut_in_event &&
      truncate(cut_in_event_path, (off_t)cut_in_event_to) != 0)
    cut_in_event = 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  digest_t *d = ud;
  d->events++;
  fold(d, ((uint64_t)ev->kind << 56) ^ ev->obj_id);
  fold(d, ev->time_us ^ (ev->offset << 20));
  fold(d, ev->length ^ (ev->nsamples << 32) ^ ((uint64_t)ev->source << 60));
  fold(d, ev->backtrace_len ^ (ev->common_prefix << 32));
  for (size_t i = 0; i < ev->backtrace_len; i++) fold(d, ev->backtrace[i]);
  maybe_cut_in_event();
  return 0;
}

static int on_packet(void *ud, const cts_mt_packet_t *p) {
  digest_t *d = ud;
  d->packets++;
  fold(d, p->offset ^ ((uint64_t)p->kind << 56) ^ ((uint64_t)p->nevents << 32));
  return 0;
}

static void on_warning(void *ud, int code, uint64_t offset, const char *message) {
  digest_t *d = ud;
  d->warnings++;
  fold(d, (uint64_t)(int64_t)code ^ (offset << 8));
  for (const char *c = message; *c; c++) fold(d, (uint8_t)*c);
}

/* The result of reading a trace one way. */
typedef struct pass {
  digest_t d;
  int err;
  uint64_t err_offset;
  char message[384];
} pass_t;

static cts_mt_reader_t *new_reader(pass_t *p) {
  memset(p, 0, sizeof *p);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {
      .user_data = &p->d, .on_event = on_event, .on_packet = on_packet, .on_warning = on_warning};
  cts_mt_reader_t *r = NULL;
  if (cts_mt_reader_create(&r, &cfg, &h) != 0) return NULL;
  return r;
}

static void end_pass(pass_t *p, cts_mt_reader_t *r, int err) {
  p->err = err;
  p->err_offset = err ? cts_mt_reader_error_offset(r) : 0;
  snprintf(p->message, sizeof p->message, "%s", cts_mt_reader_error_message(r));
  cts_mt_reader_destroy(r);
}

/* The reference: read() in 64 KiB pieces, each fed as it comes. */
static bool read_by_feed(const char *path, pass_t *p) {
  cts_mt_reader_t *r = new_reader(p);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (!r || fd < 0) return false;
  static uint8_t buf[65536];
  int e = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    if ((e = cts_mt_reader_feed(r, buf, (size_t)n)) != 0) break;
  if (!e) e = cts_mt_reader_finish(r);
  close(fd);
  end_pass(p, r, e);
  return true;
}

/* The bytes this process has read with read(2) and the like so far (/proc/self/io's
 * rchar), or -1 where the kernel does not say. */
static int64_t bytes_read_so_far(void) {
  FILE *f = fopen("/proc/self/io", "r");
  if (!f) return -1;
  char line[128];
  long long v = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "rchar: %lld", &v) == 1) break;
  fclose(f);
  return v;
}

/* Where the progress callback cuts the file being read (0: it does not). */
static uint64_t cut_at;

static void cut_file(void *user_data, uint64_t done, uint64_t total) {
  (void)total;
  if (cut_at && done < cut_at && truncate(user_data, (off_t)cut_at) != 0) cut_at = 0;
}

/* cts_os_read_memtrace(), with the bytes read(2) meanwhile in *read_bytes (-1: unknown). */
static bool read_by_os(const char *path, pass_t *p, int64_t *read_bytes) {
  cts_mt_reader_t *r = new_reader(p);
  if (!r) return false;
  bool input_error;
  const int64_t before = bytes_read_so_far();
  const int e = cts_os_read_memtrace(path, r, cut_file, (void *)path, &input_error);
  const int64_t after = bytes_read_so_far();
  *read_bytes = before >= 0 && after >= 0 ? after - before : -1;
  end_pass(p, r, e);
  return !input_error;
}

static uint64_t fake_clock(void *ud) {
  uint64_t *t = ud;
  return *t += 3;
}

/* Writes a trace of about `mb` MiB (several mapping windows) to path: allocations of many
 * call stacks, promotions and collections. Returns its size, 0 on failure. */
static uint64_t write_trace(const char *path, unsigned mb) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  uint64_t now = 1700000000000000ull;
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.sample_rate = 1.0;
  cfg.executable_name = "test_read_mapped";
  cfg.pid = 42;
  cfg.start_time_us = now;
  cfg.write = cts_os_fd_write;
  cfg.write_user_data = (void *)(intptr_t)fd;
  cfg.clock = fake_clock;
  cfg.clock_user_data = &now;
  const size_t size = cts_mt_writer_size(&cfg);
  void *mem = malloc(size);
  cts_mt_writer_t *w;
  if (!mem || cts_mt_writer_init(&w, mem, size, &cfg) != 0) {
    free(mem);
    close(fd);
    return 0;
  }
  uint64_t seed = 7, bt[40];
  const off_t want = (off_t)mb << 20;
  for (uint64_t i = 0; lseek(fd, 0, SEEK_CUR) < want; i++) {
    const uint64_t x = cts_splitmix64(&seed);
    const size_t depth = 4 + x % 30;
    for (size_t k = 0; k < depth; k++) bt[k] = 0x400000 + ((x >> (k % 40)) % 300) * 16 + k;
    uint64_t id;
    if (cts_mt_writer_alloc(w, CTS_TIME_NOW, 1 + x % 300, 1, (unsigned)(x >> 60) % 3, bt, depth,
                            &id) != 0)
      break;
    if (i % 3 == 0) cts_mt_writer_promote(w, CTS_TIME_NOW, id);
    if (i % 2 == 0) cts_mt_writer_collect(w, CTS_TIME_NOW, id);
  }
  cts_mt_writer_close(w);
  free(mem);
  const off_t end = lseek(fd, 0, SEEK_END);
  close(fd);
  return end > 0 ? (uint64_t)end : 0;
}

static char trace_path[64], work_path[64];

static bool copy_file(const char *from, const char *to, uint64_t len) {
  const int in = open(from, O_RDONLY | O_CLOEXEC);
  const int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  static uint8_t buf[65536];
  bool ok = in >= 0 && out >= 0;
  while (ok && len > 0) {
    const ssize_t n = read(in, buf, len < sizeof buf ? (size_t)len : sizeof buf);
    ok = n > 0 && write(out, buf, (size_t)n) == n;
    if (ok) len -= (uint64_t)n;
  }
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  return ok;
}

static void check_same(const char *path, pass_t *os, pass_t *feed, int64_t *read_bytes) {
  CTS_ASSERT(read_by_feed(path, feed));
  CTS_ASSERT(read_by_os(path, os, read_bytes));
}

#define ASSERT_SAME_PASS(os, feed)                         \
  do {                                                     \
    CTS_ASSERT_EQ_INT((os).err, (feed).err);               \
    CTS_ASSERT_EQ_U64((os).err_offset, (feed).err_offset); \
    CTS_ASSERT_STR_EQ((os).message, (feed).message);       \
    CTS_ASSERT_EQ_U64((os).d.events, (feed).d.events);     \
    CTS_ASSERT_EQ_U64((os).d.packets, (feed).d.packets);   \
    CTS_ASSERT_EQ_U64((os).d.warnings, (feed).d.warnings); \
    CTS_ASSERT_EQ_U64((os).d.hash, (feed).d.hash);         \
  } while (0)

static uint64_t trace_size;

CTS_TEST(whole_trace_reads_the_same_without_read_calls) {
  CTS_ASSERT(trace_size > (9u << 20));
  pass_t os, feed;
  int64_t read_bytes;
  check_same(trace_path, &os, &feed, &read_bytes);
  CTS_ASSERT_EQ_INT(feed.err, 0);
  CTS_ASSERT_MSG(feed.d.events > 100000, "%llu events", (unsigned long long)feed.d.events);
  ASSERT_SAME_PASS(os, feed);
  if (read_bytes < 0) return; /* no /proc/self/io here */
  /* The format sniff reads a few bytes; read() of the body would count all of them. */
  CTS_ASSERT_MSG(read_bytes < 4096, "%lld bytes went through read(2) for a %llu-byte trace",
                 (long long)read_bytes, (unsigned long long)trace_size);
}

CTS_TEST(cut_off_last_packet_warns_the_same) {
  CTS_ASSERT(copy_file(trace_path, work_path, trace_size - 5));
  pass_t os, feed;
  int64_t read_bytes;
  check_same(work_path, &os, &feed, &read_bytes);
  CTS_ASSERT_EQ_INT(feed.err, 0);
  CTS_ASSERT_EQ_U64(feed.d.warnings, 1);
  ASSERT_SAME_PASS(os, feed);
}

/* Another process cuts the file shorter while it is read (here the progress callback,
 * after the first 4 MiB): the read sees the new end, as read() would, instead of touching
 * mapped pages past it (SIGBUS). */
CTS_TEST(file_cut_shorter_while_read_reads_to_the_new_end) {
  const uint64_t cut = (5u << 20) + 777;
  CTS_ASSERT(copy_file(trace_path, work_path, cut));
  pass_t os, feed;
  CTS_ASSERT(read_by_feed(work_path, &feed));
  CTS_ASSERT_EQ_U64(feed.d.warnings, 1); /* the packet cut off */
  CTS_ASSERT(copy_file(trace_path, work_path, trace_size));
  cut_at = cut;
  int64_t read_bytes;
  const bool ok = read_by_os(work_path, &os, &read_bytes);
  cut_at = 0;
  CTS_ASSERT(ok);
  ASSERT_SAME_PASS(os, feed);
}

/* Another process cuts the file in the middle of a mapped window (here an event callback,
 * a few hundred kilobytes into the second window): the pages past the new end fault. The
 * read ends with an input error naming the bytes, the events before the cut delivered;
 * the process does not die of SIGBUS. */
CTS_TEST(file_cut_inside_a_mapped_window_is_an_input_error) {
  CTS_ASSERT(copy_file(trace_path, work_path, trace_size));
  pass_t whole;
  CTS_ASSERT(read_by_feed(work_path, &whole));
  CTS_ASSERT(whole.d.events > 100);
  cut_in_event = whole.d.events * 3 / 20; /* about 1.5 MiB into the 10 MiB trace */
  cut_in_event_to = 1u << 20;             /* the second window's start */
  cut_in_event_path = work_path;
  events_seen = 0;
  pass_t os;
  int64_t read_bytes;
  const bool ok = read_by_os(work_path, &os, &read_bytes);
  const uint64_t cut_was = cut_in_event;
  cut_in_event = 0;
  CTS_ASSERT_MSG(cut_was != 0, "the file could not be cut");
  CTS_ASSERT_MSG(!ok, "the cut went unnoticed: %s", os.message);
  CTS_ASSERT(os.err != 0);
  CTS_ASSERT(os.d.events >= cut_was && os.d.events < whole.d.events);
  CTS_ASSERT(os.d.warnings >= 1);
}

/* Corrupt bytes far past the first window, and across the end of one: the same error at
 * the same offset. */
CTS_TEST(error_past_the_first_window_has_the_same_offset) {
  static const uint64_t where[] = {(4u << 20) + 12345, (8u << 20) + 3, (4u << 20) - 1,
                                   (1u << 20) - 3};
  for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
    CTS_ASSERT(copy_file(trace_path, work_path, trace_size));
    const int fd = open(work_path, O_RDWR | O_CLOEXEC);
    CTS_ASSERT(fd >= 0);
    const uint8_t junk[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const bool ok = pwrite(fd, junk, sizeof junk, (off_t)where[i]) == (ssize_t)sizeof junk;
    close(fd);
    CTS_ASSERT(ok);
    pass_t os, feed;
    int64_t read_bytes;
    check_same(work_path, &os, &feed, &read_bytes);
    CTS_ASSERT_MSG(feed.err != 0, "junk at %llu went unnoticed", (unsigned long long)where[i]);
    ASSERT_SAME_PASS(os, feed);
  }
}

int main(int argc, char **argv) {
  snprintf(trace_path, sizeof trace_path, "/tmp/cts_read_mapped_%d.ctf", (int)getpid());
  snprintf(work_path, sizeof work_path, "/tmp/cts_read_mapped_%d.work.ctf", (int)getpid());
  trace_size = write_trace(trace_path, 10);
  const int rc = cts_test_main(argc, argv);
  unlink(trace_path);
  unlink(work_path);
  return rc;
}
