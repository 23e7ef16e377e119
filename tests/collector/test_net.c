/* SPDX-License-Identifier: MIT */
/* src/os/net.h: address parsing and formatting, listen/connect/accept on loopback, and the
 * non-blocking I/O helpers. */
#include <sys/socket.h>

#include "harness.h"
#include "../test.h"

static bool parses_listen(const char *spec, const char *want) {
  cts_net_addr_t a;
  char err[CTS_NET_ERR_LEN], got[CTS_NET_ADDR_STRLEN];
  if (cts_net_parse_listen(spec, &a, err, sizeof err) != 0) {
    fprintf(stderr, "  '%s': %s\n", spec, err);
    return false;
  }
  cts_net_addr_format(&a, got, sizeof got);
  if (strcmp(got, want) != 0) fprintf(stderr, "  '%s' gave %s, expected %s\n", spec, got, want);
  return strcmp(got, want) == 0;
}

static bool rejects(bool listen, const char *spec, const char *why) {
  cts_net_addr_t a;
  char err[CTS_NET_ERR_LEN] = "";
  const int rc = listen ? cts_net_parse_listen(spec, &a, err, sizeof err)
                        : cts_net_parse_connect(spec, &a, err, sizeof err);
  if (rc != -EINVAL || !strstr(err, why)) {
    fprintf(stderr, "  '%s': rc %d, message '%s', expected one with '%s'\n", spec, rc, err, why);
    return false;
  }
  return true;
}

CTS_TEST(listen_addresses) {
  CTS_ASSERT(parses_listen("4242", "127.0.0.1:4242"));
  CTS_ASSERT(parses_listen("0", "127.0.0.1:0"));
  CTS_ASSERT(parses_listen("0.0.0.0:80", "0.0.0.0:80"));
  CTS_ASSERT(parses_listen("127.0.0.1:65535", "127.0.0.1:65535"));
  CTS_ASSERT(parses_listen("[::1]:4242", "[::1]:4242"));
  CTS_ASSERT(parses_listen("[::]:1", "[::]:1"));
  CTS_ASSERT(rejects(true, "", "empty"));
  CTS_ASSERT(rejects(true, "65536", "port"));
  CTS_ASSERT(rejects(true, "-1", "port"));
  CTS_ASSERT(rejects(true, "42x", "port"));
  CTS_ASSERT(rejects(true, ":42", "missing address"));
  CTS_ASSERT(rejects(true, "::1:42", "brackets"));
  CTS_ASSERT(rejects(true, "[::1", "closing"));
  CTS_ASSERT(rejects(true, "[::1]42", "after ']'"));
  CTS_ASSERT(rejects(true, "[]:42", "empty address"));
  CTS_ASSERT(rejects(true, "1.2.3.4.5:42", "cannot resolve"));
}

CTS_TEST(connect_addresses) {
  cts_net_addr_t a;
  char err[CTS_NET_ERR_LEN], got[CTS_NET_ADDR_STRLEN];
  CTS_ASSERT(cts_net_parse_connect("127.0.0.1:9", &a, err, sizeof err) == 0);
  CTS_ASSERT_STR_EQ(cts_net_addr_format(&a, got, sizeof got), "127.0.0.1:9");
  CTS_ASSERT_EQ_INT(cts_net_addr_port(&a), 9);
  CTS_ASSERT(cts_net_parse_connect("[::1]:9", &a, err, sizeof err) == 0);
  CTS_ASSERT_STR_EQ(cts_net_addr_format(&a, got, sizeof got), "[::1]:9");
  /* A name resolves (to either family). */
  if (cts_net_parse_connect("localhost:9", &a, err, sizeof err) == 0)
    CTS_ASSERT_EQ_INT(cts_net_addr_port(&a), 9);
  CTS_ASSERT(rejects(false, "9", "HOST:PORT"));
  CTS_ASSERT(rejects(false, "127.0.0.1:0", "from 1"));
  CTS_ASSERT(rejects(false, "127.0.0.1:", "from 1"));
}

CTS_TEST(listen_connect_accept_and_io) {
  cts_net_addr_t any;
  char err[CTS_NET_ERR_LEN];
  CTS_ASSERT(cts_net_parse_listen("0", &any, err, sizeof err) == 0);
  int lfd;
  CTS_ASSERT_EQ_INT(cts_net_listen(&any, 8, true, &lfd), 0);
  cts_net_addr_t bound;
  CTS_ASSERT_EQ_INT(cts_net_local_addr(lfd, &bound), 0);
  CTS_ASSERT(cts_net_addr_port(&bound) != 0);
  int cfd, sfd;
  CTS_ASSERT_EQ_INT(cts_net_accept(lfd, true, &sfd, NULL), -EAGAIN);
  CTS_ASSERT_EQ_INT(cts_net_connect(&bound, 2000, &cfd), 0);
  CTS_ASSERT_EQ_INT(cts_net_wait(lfd, false, 2000), 1);
  cts_net_addr_t peer;
  CTS_ASSERT_EQ_INT(cts_net_accept(lfd, true, &sfd, &peer), 0);
  cts_net_addr_t client_local;
  CTS_ASSERT_EQ_INT(cts_net_local_addr(cfd, &client_local), 0);
  CTS_ASSERT_EQ_INT(cts_net_addr_port(&peer), cts_net_addr_port(&client_local));
  CTS_ASSERT((fcntl(sfd, F_GETFD) & FD_CLOEXEC) && (fcntl(cfd, F_GETFD) & FD_CLOEXEC));
  CTS_ASSERT(fcntl(sfd, F_GETFL) & O_NONBLOCK);
  CTS_ASSERT(!(fcntl(cfd, F_GETFL) & O_NONBLOCK));

  char buf[64];
  CTS_ASSERT_EQ_INT(cts_net_read(sfd, buf, sizeof buf), -EAGAIN);
  CTS_ASSERT_EQ_INT(cts_net_write_all(cfd, "hello", 5, 1000), 0);
  CTS_ASSERT_EQ_INT(cts_net_wait(sfd, false, 2000), 1);
  CTS_ASSERT_EQ_INT(cts_net_read(sfd, buf, sizeof buf), 5);
  CTS_ASSERT_MEM_EQ(buf, "hello", 5);

  /* A full socket: write_all gives up at its deadline instead of blocking forever. */
  CTS_ASSERT_EQ_INT(cts_net_set_nonblocking(sfd, true), 0);
  CTS_ASSERT_EQ_INT(cts_net_set_buffer_size(sfd, false, 4096), 0);
  static uint8_t big[1 << 20];
  int rc = 0;
  for (int i = 0; i < 64 && rc == 0; i++) rc = cts_net_write_all(sfd, big, sizeof big, 200);
  CTS_ASSERT_EQ_INT(rc, -ETIMEDOUT);

  /* The peer gone: reads end, writes fail with EPIPE or ECONNRESET, and no SIGPIPE. */
  close(cfd);
  ssize_t n;
  do n = cts_net_read(sfd, big, sizeof big);
  while (n > 0 || n == -EAGAIN);
  CTS_ASSERT(n == 0 || n == -ECONNRESET);
  rc = 0;
  for (int i = 0; i < 10 && rc == 0; i++) rc = cts_net_write_all(sfd, "x", 1, 1000);
  CTS_ASSERT(rc == -EPIPE || rc == -ECONNRESET);
  close(sfd);

  /* Nothing listens any more: refused at once. */
  close(lfd);
  CTS_ASSERT_EQ_INT(cts_net_connect(&bound, 2000, &cfd), -ECONNREFUSED);
}

CTS_TEST(ipv6_loopback_when_available) {
  cts_net_addr_t a;
  char err[CTS_NET_ERR_LEN];
  CTS_ASSERT(cts_net_parse_listen("[::1]:0", &a, err, sizeof err) == 0);
  int lfd;
  const int rc = cts_net_listen(&a, 8, false, &lfd);
  if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT) CTS_SKIP("no IPv6 loopback here");
  CTS_ASSERT_EQ_INT(rc, 0);
  cts_net_addr_t bound;
  CTS_ASSERT_EQ_INT(cts_net_local_addr(lfd, &bound), 0);
  int cfd, sfd;
  CTS_ASSERT_EQ_INT(cts_net_connect(&bound, 2000, &cfd), 0);
  CTS_ASSERT_EQ_INT(cts_net_accept(lfd, false, &sfd, NULL), 0);
  CTS_ASSERT_EQ_INT(cts_net_write_all(cfd, "v6", 2, 1000), 0);
  char buf[4];
  CTS_ASSERT_EQ_INT(cts_net_read(sfd, buf, sizeof buf), 2);
  close(cfd);
  close(sfd);
  close(lfd);
}

CTS_TEST_MAIN()
