/* SPDX-License-Identifier: MIT */
/* The TCP stream sink of include/ctfscope/ring.h, through libctfscope.so as a user links
 * it: the packets arrive whole at the collector's end, a collector that goes away is an
 * error returned to the program (never a SIGPIPE that kills it), and an address that
 * cannot be reached is an error naming it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ctfscope/ring.h>
#include <ctfscope/tasks.h>

#include "../test.h"

/* A listening socket on 127.0.0.1 with a port the kernel chose; *port receives it. Aborts
 * if the machine cannot listen at all. */
static int listen_local(int *port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    abort();
  *port = ntohs(a.sin_port);
  return fd;
}

static void *heap_alloc(void *ud, size_t size) {
  (void)ud;
  return malloc(size);
}

static void heap_free(void *ud, void *p, size_t size) {
  (void)ud;
  (void)size;
  free(p);
}

static int count_label(void *ud, const cts_mprof_event_t *ev) {
  if (ev->id == CTS_MPROF_LABEL) ++*(uint64_t *)ud;
  return 0;
}

/* A stream ring of 4 packets of 4 KiB connected to a local listener; *cfd receives the
 * collector's end of the connection. Aborts on failure. */
static cts_os_mprof_ring_t *connected_stream(int *cfd) {
  int port;
  const int lfd = listen_local(&port);
  char address[64], msg[256];
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  cts_os_mprof_ring_t *ring;
  if (cts_os_mprof_stream_connect(&ring, address, 5000, 4096, 4, msg, sizeof msg) != 0) {
    fprintf(stderr, "%s\n", msg);
    abort();
  }
  *cfd = accept(lfd, NULL, NULL);
  close(lfd);
  if (*cfd < 0) abort();
  return ring;
}

CTS_TEST(stream_reaches_the_collector) {
  int cfd;
  cts_os_mprof_ring_t *ring = connected_stream(&cfd);
  char msg[256];
  CTS_ASSERT(cts_task_start(cts_os_mprof_ring_borrow(ring)) == 0);
  enum { LABELS = 300 }; /* about 8 kB: several 4 KiB packets, sent as they fill */
  for (int i = 0; i < LABELS; i++) cts_task_label(cts_task_new_id(), "a stream label");
  cts_task_stop();
  CTS_ASSERT(cts_os_mprof_ring_close(ring) == 0); /* sends the last packet, closes */

  size_t size = 0, cap = 1 << 16;
  uint8_t *data = malloc(cap);
  for (ssize_t n; (n = read(cfd, data + size, cap - size)) > 0;) {
    size += (size_t)n;
    if (size == cap) data = realloc(data, cap *= 2);
  }
  close(cfd);
  CTS_ASSERT_MSG(size > 8000, "%zu bytes received", size);

  cts_mprof_reader_config_t cfg;
  cts_mprof_reader_config_init(&cfg);
  cfg.allocator = (cts_allocator_t){heap_alloc, heap_free, NULL};
  cfg.file_order = true; /* a stream is in file order */
  cts_mprof_memory_t src = {data, size};
  uint64_t labels = 0;
  const cts_mprof_handler_t h = {.user_data = &labels, .on_event = count_label};
  cts_mprof_summary_t sum;
  CTS_ASSERT(
      cts_mprof_read(&cfg, cts_mprof_memory_read_at, &src, size, &h, &sum, msg, sizeof msg) == 0);
  CTS_ASSERT_MSG(labels == LABELS, "%llu labels", (unsigned long long)labels);
  CTS_ASSERT(sum.packets >= 2);
  free(data);
}

CTS_TEST(a_collector_that_leaves_is_an_error_not_a_signal) {
  signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would end this test process */
  int cfd;
  cts_os_mprof_ring_t *ring = connected_stream(&cfd);
  /* Closed with unread data pending would reset; closed with none, the first send is
   * answered by a reset and the next one fails with EPIPE. */
  close(cfd);
  CTS_ASSERT(cts_task_start(cts_os_mprof_ring_borrow(ring)) == 0);
  for (int i = 0; i < 20000; i++) cts_task_label(cts_task_new_id(), "nobody reads this");
  cts_task_stop();
  const int err = cts_os_mprof_ring_close(ring);
  CTS_ASSERT_MSG(err == -EPIPE || err == -ECONNRESET, "close returned %d", err);
}

CTS_TEST(unreachable_addresses_are_named) {
  int port;
  const int lfd = listen_local(&port);
  close(lfd); /* nothing listens there any more */
  char address[64], msg[256] = "";
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  cts_os_mprof_ring_t *ring = (cts_os_mprof_ring_t *)1;
  CTS_ASSERT(cts_os_mprof_stream_connect(&ring, address, 5000, 4096, 4, msg, sizeof msg) ==
             -ECONNREFUSED);
  CTS_ASSERT(ring == NULL);
  CTS_ASSERT_MSG(strstr(msg, address) != NULL, "%s", msg);

  CTS_ASSERT(cts_os_mprof_stream_connect(&ring, "no port here", 100, 4096, 4, msg, sizeof msg) < 0);
  CTS_ASSERT(ring == NULL && msg[0]);

  /* Connected, but the ring cannot be made (packets too small): the socket is closed, as
   * the collector sees. */
  const int lfd2 = listen_local(&port);
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  CTS_ASSERT(cts_os_mprof_stream_connect(&ring, address, 5000, 10, 4, msg, sizeof msg) ==
             CTS_E_INVAL);
  CTS_ASSERT(ring == NULL && strstr(msg, address) != NULL);
  const int cfd = accept(lfd2, NULL, NULL);
  char byte;
  CTS_ASSERT(cfd >= 0 && read(cfd, &byte, 1) == 0);
  close(cfd);
  close(lfd2);
}

CTS_TEST_MAIN()
