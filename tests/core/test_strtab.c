/* SPDX-License-Identifier: MIT */
/* The one string table (src/analysis/strtab.h): ids in order of first appearance, a string
 * found again whatever the length it is given with, strings handed over or copied, and
 * the many strings of a real aggregation. (Here rather than in a tests/analysis of its own
 * so as not to collide with the suites being added there.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/analysis/strtab.h"
#include "../test.h"

CTS_TEST(ids_follow_first_appearance) {
  cts_strtab_t t;
  cts_strtab_init(&t);
  size_t id = 99;
  CTS_ASSERT_EQ_INT(cts_strtab_add(&t, "main", 4, &id), 1);
  CTS_ASSERT_EQ_U64(id, 0);
  CTS_ASSERT_EQ_INT(cts_strtab_add(&t, "mainly", 6, &id), 1);
  CTS_ASSERT_EQ_U64(id, 1);
  CTS_ASSERT_EQ_INT(cts_strtab_add(&t, "", 0, &id), 1);
  CTS_ASSERT_EQ_U64(id, 2);
  /* Found again: by a prefix of a longer buffer, by its NUL, and as a handed-over copy. */
  CTS_ASSERT_EQ_INT(cts_strtab_add(&t, "mainframe", 4, &id), 0);
  CTS_ASSERT_EQ_U64(id, 0);
  CTS_ASSERT_EQ_INT(cts_strtab_add(&t, "mainly\0junk", 11, &id), 0);
  CTS_ASSERT_EQ_U64(id, 1);
  char *owned = malloc(5);
  CTS_ASSERT(owned != NULL);
  memcpy(owned, "main", 5);
  CTS_ASSERT_EQ_INT(cts_strtab_add_owned(&t, owned, &id), 0); /* freed by the table */
  CTS_ASSERT_EQ_U64(id, 0);
  CTS_ASSERT_EQ_U64(cts_strtab_find(&t, "mainly", 6), 1);
  CTS_ASSERT_EQ_U64(cts_strtab_find(&t, "mai", 3), SIZE_MAX);
  CTS_ASSERT(strcmp(cts_strtab_get(&t, 1), "mainly") == 0);
  CTS_ASSERT_EQ_U64(t.n, 3);
  cts_strtab_fini(&t);
  CTS_ASSERT_EQ_U64(t.n, 0);
}

CTS_TEST(many_strings_keep_their_ids) {
  cts_strtab_t t;
  cts_strtab_init(&t);
  char buf[32];
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < 5000; i++) {
      snprintf(buf, sizeof buf, "f%zu (file%zu.c:%zu)", i, i % 7, i * 3);
      size_t id;
      CTS_ASSERT_EQ_INT(cts_strtab_add(&t, buf, strlen(buf), &id), round == 0);
      CTS_ASSERT_EQ_U64(id, i);
    }
  }
  size_t n;
  char **strs = cts_strtab_release(&t, &n);
  CTS_ASSERT_EQ_U64(n, 5000);
  CTS_ASSERT_EQ_U64(t.n, 0);
  CTS_ASSERT(strcmp(strs[4999], "f4999 (file1.c:14997)") == 0);
  for (size_t i = 0; i < n; i++) free(strs[i]);
  free(strs);
  cts_strtab_fini(&t); /* empty after release: nothing left to free twice */
}

CTS_TEST_MAIN()
