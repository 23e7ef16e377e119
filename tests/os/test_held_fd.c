/* SPDX-License-Identifier: MIT */
/* common/held_fd.h: a descriptor's number, closed and taken by another file, is no longer
 * the holder's: neither "still" nor closed by cts_fd_close_held. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "../test.h"
#include "common/held_fd.h"

static int temp_file(char *path, size_t size, const char *name) {
  snprintf(path, size, "/tmp/cts_held_fd_%s_%d", name, (int)getpid());
  return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

CTS_TEST(a_held_descriptor_is_still_its_file) {
  char path[256];
  const int fd = temp_file(path, sizeof path, "a");
  CTS_ASSERT(fd >= 0);
  const cts_fd_ident_t id = cts_fd_ident(fd);
  CTS_ASSERT(cts_fd_still(fd, id));
  int copy = fd;
  cts_fd_close_held(&copy, id);
  CTS_ASSERT_EQ_INT(copy, -1);
  CTS_ASSERT(fcntl(fd, F_GETFD) < 0); /* closed */
  unlink(path);
}

CTS_TEST(a_number_taken_by_another_file_is_not_closed) {
  char path_a[256], path_b[256];
  int held = temp_file(path_a, sizeof path_a, "held");
  CTS_ASSERT(held >= 0);
  const cts_fd_ident_t id = cts_fd_ident(held);
  close(held);                                                   /* the program closes it... */
  const int theirs = temp_file(path_b, sizeof path_b, "theirs"); /* ...and takes the number */
  CTS_ASSERT_EQ_INT(theirs, held);
  CTS_ASSERT(!cts_fd_still(held, id));
  cts_fd_close_held(&held, id);
  CTS_ASSERT_EQ_INT(held, -1);
  CTS_ASSERT(fcntl(theirs, F_GETFD) >= 0); /* still open: not the holder's to close */
  close(theirs);
  CTS_ASSERT(!cts_fd_still(theirs, id)); /* closed: not still anything */
  unlink(path_a);
  unlink(path_b);
}

CTS_TEST(an_unknown_identity_matches_nothing) {
  const cts_fd_ident_t none = cts_fd_ident(-1);
  CTS_ASSERT(!cts_fd_still(0, none));
  CTS_ASSERT(!cts_fd_still(-1, none));
}

CTS_TEST_MAIN()
