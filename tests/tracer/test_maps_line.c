/* SPDX-License-Identifier: MIT */
/* The writer's parser of /proc/PID/maps lines (cts__maps_line_parse, symbolize.c) against
 * the sscanf format libdwfl reads the same lines with (and the symbolizer did): the same
 * fields on every line of this process's maps and on kernel-shaped lines of every kind;
 * malformed and truncated lines refused without a read past their end (ASan's build). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tracer/tracer_internal.h"
#include "../test.h"

/* The line's fields as sscanf reads them: the path is the rest after the inode's blanks. */
static bool scanned(const char *line, cts__maps_line_t *out) {
  unsigned long long start, end, offset, inode;
  unsigned major, minor;
  int nread = 0;
  if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu %n", &start, &end, &offset, &major, &minor,
             &inode, &nread) < 6 ||
      nread <= 0)
    return false;
  const char *const path = line + nread + strspn(line + nread, " \t");
  *out = (cts__maps_line_t){start, end, offset, inode, major, minor, path, strlen(path)};
  return true;
}

/* The hand parser on exactly strlen(line) bytes (malloc'd: ASan sees a read past them)
 * against sscanf: READ_SAME if both read the same fields, REFUSED if the hand parser
 * refuses it, DIFFERENT if it reads what sscanf does not (or reads it otherwise). */
enum verdict { READ_SAME, REFUSED, DIFFERENT };
static enum verdict compare(const char *line) {
  cts__maps_line_t want = {0}, got = {0};
  const bool by_scanf = scanned(line, &want);
  const size_t len = strlen(line);
  char *const copy = malloc(len ? len : 1);
  if (!copy) abort();
  memcpy(copy, line, len);
  const bool by_hand = cts__maps_line_parse(copy, len, &got);
  enum verdict v = REFUSED;
  if (by_hand)
    v = by_scanf && got.start == want.start && got.end == want.end && got.offset == want.offset &&
                got.inode == want.inode && got.major == want.major && got.minor == want.minor &&
                got.path_len == want.path_len && !memcmp(got.path, want.path, got.path_len)
            ? READ_SAME
            : DIFFERENT;
  free(copy);
  return v;
}

CTS_TEST(every_line_of_this_process_reads_as_sscanf_reads_it) {
  FILE *const f = fopen("/proc/self/maps", "r");
  CTS_ASSERT(f);
  char line[8192];
  size_t lines = 0, with_path = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    CTS_ASSERT_MSG(compare(line) == READ_SAME, "not read as sscanf reads it: \"%s\"", line);
    lines++;
    with_path += strchr(line, '/') != NULL;
  }
  fclose(f);
  CTS_ASSERT(lines > 5 && with_path > 2);
}

/* Kernel-shaped lines of every kind, read as sscanf reads them, and malformed ones. */
static const struct {
  const char *line;
  enum verdict want;
} cases[] = {
    {"55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1835029                /usr/bin/true",
     READ_SAME},
    {"7f1c2e200000-7f1c2e228000 r-xp 00028000 fd:00 262150  /usr/lib/x86_64-linux-gnu/libc.so.6",
     READ_SAME},
    {"7ffc1a3f0000-7ffc1a411000 rw-p 00000000 00:00 0                          [stack]", READ_SAME},
    {"7f1c2e4a0000-7f1c2e4a3000 rw-p 00000000 00:00 0 ", READ_SAME},
    {"7f1c2e4a0000-7f1c2e4a3000 rw-p 00000000 00:00 0", READ_SAME},
    {"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
     READ_SAME},
    {"7f00-7f10 r--s 0000000a 103:0A 18446744073709551 /dev/shm/a file (deleted)", READ_SAME},
    {"7f00-7f10 r--p 00000000 08:01 12\t/tmp/tab\tpath  ", READ_SAME},
    {"ABCDEF-abcdef rwxp FFFFFFFF ffffffff:0 1 /x", READ_SAME},
    {"", REFUSED},
    {"-7f10 r--p 0 08:01 1 /x", REFUSED},
    {"7f00 7f10 r--p 0 08:01 1 /x", REFUSED},
    {"7f00-7f10", REFUSED},
    {"7f00-7f10 r--p", REFUSED},
    {"7f00-7f10 r--p 0 0801 1 /x", REFUSED},
    {"7f00-7f10 r--p 0 08:01 /x", REFUSED},
    {"7f00-7f10 r--p 0 100000000:01 1 /x", REFUSED},
    {"10000000000000000-1 r--p 0 08:01 1 /x", REFUSED},
    {"7f00-7f10 r--p 0 08:01 99999999999999999999 /x", REFUSED},
    {"7fgg-7f10 r--p 0 08:01 1 /x", REFUSED},
};

CTS_TEST(kernel_shaped_lines_are_read_as_sscanf_reads_them_malformed_ones_refused) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    CTS_ASSERT_MSG(compare(cases[i].line) == cases[i].want, "\"%s\": %s", cases[i].line,
                   cases[i].want == READ_SAME ? "not read as sscanf reads it" : "accepted");
}

CTS_TEST(truncated_lines_are_refused_up_to_the_inode) {
  /* Every prefix of a good line: refused before the inode's first digit, read as sscanf
   * reads it from there on (a shorter inode, then no path, then part of it). */
  const char *const good = "7f1c2e200000-7f1c2e228000 r-xp 00028000 fd:00 262150  /lib/x.so";
  const size_t first_whole = (size_t)(strstr(good, "262150") - good) + 1u;
  for (size_t len = 0; len <= strlen(good); len++) {
    char prefix[128];
    memcpy(prefix, good, len);
    prefix[len] = '\0';
    if (len < first_whole)
      CTS_ASSERT_MSG(compare(prefix) == REFUSED, "accepted a truncated line: \"%s\"", prefix);
    else
      CTS_ASSERT_MSG(compare(prefix) == READ_SAME, "not read as sscanf reads it: \"%s\"", prefix);
  }
}

CTS_TEST_MAIN()
