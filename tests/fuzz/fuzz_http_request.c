/* SPDX-License-Identifier: MIT */
/* libFuzzer target: `serve`'s HTTP request parser (src/report/serve_http.h). The input is
 * what a client sends; as the server does, the head is the bytes up to the first CRLF CRLF
 * within the first 8 KiB (else the server answers 431 without parsing). The head is handed
 * to the parser in a buffer of exactly its length, so any read past it is a heap overflow
 * for ASan. Besides memory errors, it aborts when:
 *  - the status is not one the parser documents (200, 204, 400, 403, 404, 405, 505), or
 *    the resource does not match it (200: page or data, 204: unchanged, else none);
 *  - a 200 or 204 answers anything but "GET <target> HTTP/1.0|1" with the page's paths
 *    ("/", "/index.html"), "/data.json" or "/data.json?since=DIGITS", and 204 anything
 *    but the current generation (a number that does not fit in 64 bits names none);
 *  - the Host check changes anything but 200/204/404 into 403: bound to a non-loopback
 *    address the server never answers 403, and otherwise answers the same;
 *  - two parses of the same head differ. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "report/serve_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REQUEST 8192u /* serve.c's request buffer */
#define GENERATION  42u

static const char *find_crlfcrlf(const char *p, size_t n) {
  for (size_t i = 0; i + 4 <= n; i++)
    if (memcmp(p + i, "\r\n\r\n", 4) == 0) return p + i;
  return NULL;
}

/* Whether the target of a successful request is one the server serves. */
static void check_target(const char *head, size_t len, int code, cts__http_resource_t res) {
  CHECK(len > 4 && memcmp(head, "GET ", 4) == 0);
  const char *const eol = strstr(head, "\r\n"); /* head is NUL-terminated here */
  CHECK(eol && eol - head >= 4 + 1 + 9);
  CHECK(memcmp(eol - 9, " HTTP/1.", 8) == 0 && (eol[-1] == '0' || eol[-1] == '1'));
  const char *const target = head + 4;
  const size_t tlen = (size_t)(eol - 9 - target);
  static const char since[] = "/data.json?since=";
  if (res == CTS__HTTP_PAGE) {
    CHECK(code == 200);
    CHECK((tlen == 1 && target[0] == '/') || (tlen == 11 && !memcmp(target, "/index.html", 11)));
    return;
  }
  CHECK(res == CTS__HTTP_DATA ? code == 200 : code == 204);
  if (res == CTS__HTTP_DATA && tlen == 10 && !memcmp(target, "/data.json", 10)) return;
  CHECK(tlen > sizeof since - 1 && !memcmp(target, since, sizeof since - 1));
  uint64_t g = 0;
  bool wraps = false; /* a number past 2^64 - 1 names no generation */
  for (size_t i = sizeof since - 1; i < tlen; i++) {
    CHECK(target[i] >= '0' && target[i] <= '9');
    const uint64_t d = (uint64_t)(target[i] - '0');
    wraps |= g > (UINT64_MAX - d) / 10u;
    g = g * 10u + d;
  }
  CHECK((res == CTS__HTTP_UNCHANGED) == (!wraps && g == GENERATION));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t window = size < MAX_REQUEST ? size : MAX_REQUEST;
  const char *const crlf = find_crlfcrlf((const char *)data, window);
  if (!crlf) return 0;
  const size_t len = (size_t)(crlf - (const char *)data) + 4;
  char *const head = malloc(len);
  CHECK(head);
  memcpy(head, data, len);
  cts__http_resource_t local_res, open_res, again_res;
  const int local = cts__http_parse_request(head, len, true, GENERATION, &local_res);
  const int open = cts__http_parse_request(head, len, false, GENERATION, &open_res);
  const int again = cts__http_parse_request(head, len, true, GENERATION, &again_res);
  CHECK(local == again && local_res == again_res);
  CHECK(open != 403);
  CHECK(local == 403 ? open == 200 || open == 204 || open == 404
                     : local == open && local_res == open_res);
  static const int codes[] = {200, 204, 400, 403, 404, 405, 505};
  bool known = false;
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) known |= local == codes[i];
  CHECK(known);
  if (local != 200 && local != 204) CHECK(local_res == CTS__HTTP_ERROR);
  if (open == 200 || open == 204) {
    char *const text = malloc(len + 1); /* the checks below use string functions */
    CHECK(text);
    memcpy(text, head, len);
    text[len] = '\0';
    check_target(text, len, open, open_res);
    free(text);
  }
  free(head);
  return 0;
}
