/* SPDX-License-Identifier: MIT */
/* The JSON writer (src/os/json.h): commas, layout whitespace, escaping and numbers as the
 * commands printed them by hand, and misuse caught by the checks of debug builds. */
#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../test.h"
#include "os/json.h"

static cts_out_t out;
static cts_json_t w;

static void start(void) {
  cts_out_init(&out, -1); /* never flushed: the tests read the buffer */
  cts_json_init(&w, &out);
}

/* The bytes written so far, as a string. */
static const char *text(void) {
  static char s[4096];
  const size_t n = out.len < sizeof s - 1 ? out.len : sizeof s - 1;
  memcpy(s, out.buf, n);
  s[n] = 0;
  return s;
}

CTS_TEST(commas_and_keys_are_the_writers) {
  start();
  cts_json_object(&w);
  cts_json_kv_u64(&w, "a", 1);
  cts_json_key(&w, "b");
  cts_json_array(&w);
  cts_json_u64(&w, 2);
  cts_json_str(&w, "x");
  cts_json_object(&w);
  cts_json_end(&w);
  cts_json_array(&w);
  cts_json_end(&w);
  cts_json_end(&w);
  cts_json_kv_bool(&w, "c", true);
  cts_json_key(&w, "d");
  cts_json_null(&w);
  cts_json_end(&w);
  cts_json_finish(&w);
  CTS_ASSERT_STR_EQ(text(), "{\"a\": 1, \"b\": [2, \"x\", {}, []], \"c\": true, \"d\": null}");
}

CTS_TEST(layout_whitespace_goes_after_the_comma) {
  start();
  cts_json_object(&w);
  cts_json_kv_str(&w, "trace", "t");
  cts_json_ws(&w, "\n ");
  cts_json_key(&w, "sites");
  cts_json_array(&w);
  for (int i = 0; i < 2; i++) {
    cts_json_ws(&w, "\n  ");
    cts_json_object(&w);
    cts_json_kv_i64(&w, "n", -i);
    cts_json_end(&w);
  }
  cts_json_ws(&w, "\n ");
  cts_json_end(&w);
  cts_json_ws(&w, "\n");
  cts_json_end(&w);
  cts_json_finish(&w);
  CTS_ASSERT_STR_EQ(text(),
                    "{\"trace\": \"t\",\n \"sites\": [\n  {\"n\": 0},\n  {\"n\": -1}\n ]\n}");
}

/* cts_json_item_ws: every later item of the open container on its own line, a pending
 * cts_json_ws() first; containers inside it start without, and it ends with its container. */
CTS_TEST(item_whitespace_holds_for_its_container_only) {
  start();
  cts_json_object(&w);
  cts_json_kv_str(&w, "trace", "t");
  cts_json_item_ws(&w, "\n  ");
  cts_json_kv_u64(&w, "a", 1);
  cts_json_key(&w, "b");
  cts_json_object(&w);
  cts_json_kv_u64(&w, "x", 1);
  cts_json_kv_u64(&w, "y", 2);
  cts_json_end(&w);
  cts_json_ws(&w, "\n ");
  cts_json_kv_u64(&w, "c", 3);
  cts_json_kv_u64(&w, "d", 4);
  cts_json_key(&w, "e");
  cts_json_array(&w);
  cts_json_u64(&w, 5);
  cts_json_end(&w);
  cts_json_ws(&w, "\n");
  cts_json_end(&w);
  cts_json_finish(&w);
  CTS_ASSERT_STR_EQ(text(),
                    "{\"trace\": \"t\",\n  \"a\": 1,\n  \"b\": {\"x\": 1, \"y\": 2},\n \"c\": "
                    "3,\n  \"d\": 4,\n  \"e\": [5]\n}");
}

CTS_TEST(strings_are_escaped_as_before) {
  start();
  cts_json_array(&w);
  cts_json_str(&w, "q\"b\\s/");
  cts_json_str(&w, "\n\t\r\x01\x1f");
  cts_json_str(&w, "caf\xc3\xa9 \xe2\x82\xac"); /* valid UTF-8 as is */
  cts_json_str(&w, "bad\xff\xc3(\xed\xa0\x80"); /* invalid bytes and a surrogate: U+FFFD */
  cts_json_end(&w);
  CTS_ASSERT_STR_EQ(text(),
                    "[\"q\\\"b\\\\s/\", \"\\n\\t\\r\\u0001\\u001f\", \"caf\xc3\xa9 \xe2\x82\xac\", "
                    "\"bad\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"]");
  start();
  cts_json_object(&w);
  cts_json_kv_u64(&w, "k\"ey", 0); /* keys are strings too */
  cts_json_end(&w);
  CTS_ASSERT_STR_EQ(text(), "{\"k\\\"ey\": 0}");
}

CTS_TEST(numbers_print_as_printf_did) {
  start();
  cts_json_array(&w);
  cts_json_u64(&w, UINT64_MAX);
  cts_json_i64(&w, INT64_MIN);
  cts_json_fixed(&w, 2.5, 0);
  cts_json_fixed(&w, 1234.56789, 3);
  cts_json_fixed(&w, 0.1, 9);
  cts_json_g(&w, 0.1, 17);
  cts_json_shortest(&w, 0.1);
  cts_json_shortest(&w, 1e-4);
  cts_json_shortest(&w, 1.0 / 3);
  cts_json_shortest(&w, 1);
  cts_json_end(&w);
  CTS_ASSERT_STR_EQ(text(),
                    "[18446744073709551615, -9223372036854775808, 2, 1234.568, 0.100000000, "
                    "0.10000000000000001, 0.1, 0.0001, 0.3333333333333333, 1]");
}

CTS_TEST(non_finite_numbers_are_null) {
  start();
  cts_json_array(&w);
  cts_json_fixed(&w, INFINITY, 0);
  cts_json_fixed(&w, -INFINITY, 1);
  cts_json_g(&w, NAN, 17);
  cts_json_shortest(&w, NAN);
  cts_json_end(&w);
  CTS_ASSERT_STR_EQ(text(), "[null, null, null, null]");
}

CTS_TEST(a_scalar_is_a_document) {
  start();
  cts_json_ws(&w, "\n");
  cts_json_str(&w, "ok");
  cts_json_finish(&w);
  CTS_ASSERT_STR_EQ(text(), "\n\"ok\"");
}

/* Strings written where the output buffer fills up: the copy that checks as it goes must
 * not write past the buffer, and must fall back whole. */
CTS_TEST(strings_across_a_full_buffer_stay_whole) {
  static char back[CTS_OUT_BUFSIZE + 64];
  for (size_t left = 0; left <= 12; left++) {
    FILE *f = tmpfile();
    CTS_ASSERT(f != NULL);
    cts_out_init(&out, fileno(f));
    cts_json_init(&w, &out);
    static char fill[CTS_OUT_BUFSIZE];
    memset(fill, ' ', sizeof fill);
    cts_out_write(&out, fill, CTS_OUT_BUFSIZE - left);
    cts_json_array(&w);
    cts_json_str(&w, "abcdef");
    cts_json_str(&w, "q\"");
    cts_json_end(&w);
    CTS_ASSERT(cts_out_flush(&out) == 0);
    const long size = ftell(f);
    rewind(f);
    const size_t n = fread(back, 1, sizeof back - 1, f);
    fclose(f);
    back[n] = 0;
    CTS_ASSERT(size == (long)n);
    CTS_ASSERT_STR_EQ(back + CTS_OUT_BUFSIZE - left, "[\"abcdef\", \"q\\\"\"]");
  }
}

/* Runs a misuse in a child: a checked build aborts, a release build writes on. */
static bool misuse_aborts(void (*misuse)(void)) {
  const pid_t pid = fork();
  if (pid == 0) {
    close(2); /* the check's message is expected */
    start();
    misuse();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void value_without_key(void) {
  cts_json_object(&w);
  cts_json_u64(&w, 1);
}

static void key_in_array(void) {
  cts_json_array(&w);
  cts_json_key(&w, "k");
}

static void key_without_value(void) {
  cts_json_object(&w);
  cts_json_key(&w, "k");
  cts_json_end(&w);
}

static void too_many_ends(void) {
  cts_json_array(&w);
  cts_json_end(&w);
  cts_json_end(&w);
}

static void unclosed(void) {
  cts_json_array(&w);
  cts_json_finish(&w);
}

static void two_documents(void) {
  cts_json_u64(&w, 1);
  cts_json_u64(&w, 2);
}

static void too_deep(void) {
  for (int i = 0; i <= CTS_JSON_MAX_DEPTH; i++) cts_json_array(&w);
}

CTS_TEST(misuse_fails_a_check) {
#if CTS_CHECKS
  CTS_ASSERT(misuse_aborts(value_without_key));
  CTS_ASSERT(misuse_aborts(key_in_array));
  CTS_ASSERT(misuse_aborts(key_without_value));
  CTS_ASSERT(misuse_aborts(too_many_ends));
  CTS_ASSERT(misuse_aborts(unclosed));
  CTS_ASSERT(misuse_aborts(two_documents));
  CTS_ASSERT(misuse_aborts(too_deep));
#else
  (void)misuse_aborts;
  (void)value_without_key, (void)key_in_array, (void)key_without_value, (void)too_many_ends;
  (void)unclosed, (void)two_documents, (void)too_deep;
  CTS_SKIP("CTS_CHECKS is off in this build");
#endif
}

CTS_TEST_MAIN()
