/* SPDX-License-Identifier: MIT */
/* The request parser of `ctfscope serve` (serve_http.h): strict HTTP/1.x request heads,
 * GET only, no body. */
#define _GNU_SOURCE /* memmem() */
#include "serve_http.h"

#include <string.h>
#include <strings.h>

static bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Whether the Host header names this machine: a loopback address or "localhost", with any
 * port. A page on the web reaches a loopback server only under its own name (DNS
 * rebinding), which this refuses. */
static bool host_is_local(const char *h, size_t n) {
  size_t name = n;
  if (n && h[0] == '[') {
    const char *close = memchr(h, ']', n);
    if (!close) return false;
    name = (size_t)(close - h) + 1;
  } else {
    const char *colon = memchr(h, ':', n);
    if (colon) name = (size_t)(colon - h);
  }
  if (name < n) { /* ":port" */
    if (h[name] != ':' || name + 1 == n) return false;
    for (size_t i = name + 1; i < n; i++)
      if (h[i] < '0' || h[i] > '9') return false;
  }
  if (name == 9 && strncasecmp(h, "localhost", 9) == 0) return true;
  if (name == 5 && memcmp(h, "[::1]", 5) == 0) return true;
  if (name >= 7 && name <= 15 && strncmp(h, "127.", 4) == 0) {
    for (size_t i = 0; i < name; i++)
      if (!((h[i] >= '0' && h[i] <= '9') || h[i] == '.')) return false;
    return true;
  }
  return false;
}

int cts__http_parse_request(const char *p, size_t len, bool loopback, uint64_t generation,
                            cts__http_resource_t *res) {
  *res = CTS__HTTP_ERROR;
  const char *const end = p + len;
  const char *eol = memmem(p, len, "\r\n", 2);
  /* Request line: METHOD SP TARGET SP VERSION, single spaces, nothing else. */
  const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
  const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp1 || !sp2 || sp1 == p || sp2 == sp1 + 1 || memchr(sp2 + 1, ' ', (size_t)(eol - sp2 - 1)))
    return 400;
  for (const char *c = p; c < sp1; c++)
    if (!is_tchar(*c)) return 400;
  for (const char *c = sp1 + 1; c < sp2; c++)
    if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) return 400;
  const size_t vlen = (size_t)(eol - sp2 - 1);
  if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0) return 400;
  if (sp2[8] != '0' && sp2[8] != '1') return 505;
  const bool http11 = sp2[8] == '1';
  /* Headers: "Name: value" lines; no folding, no control characters. */
  bool have_host = false, host_ok = !loopback, body = false;
  for (const char *line = eol + 2; line < end - 2;) {
    const char *le = memmem(line, (size_t)(end - line), "\r\n", 2);
    if (!le) return 400;
    const char *colon = memchr(line, ':', (size_t)(le - line));
    if (!colon || colon == line) return 400;
    for (const char *c = line; c < colon; c++)
      if (!is_tchar(*c)) return 400;
    const char *v = colon + 1;
    for (const char *c = v; c < le; c++)
      if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f) return 400;
    while (v < le && (*v == ' ' || *v == '\t')) v++;
    const char *ve = le;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    const size_t name_len = (size_t)(colon - line), vl = (size_t)(ve - v);
    if (name_len == 4 && strncasecmp(line, "Host", 4) == 0) {
      if (have_host) return 400;
      have_host = true;
      if (!host_ok) host_ok = host_is_local(v, vl);
    } else if (name_len == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
      body = true;
    } else if (name_len == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
      if (vl != 1 || *v != '0') body = true;
    }
    line = le + 2;
  }
  if (http11 && !have_host) return 400;
  if ((size_t)(sp1 - p) != 3 || memcmp(p, "GET", 3) != 0) return 405;
  if (body) return 400;
  if (have_host && !host_ok) return 403;
  const char *target = sp1 + 1;
  const size_t tlen = (size_t)(sp2 - target);
  if ((tlen == 1 && target[0] == '/') || (tlen == 11 && memcmp(target, "/index.html", 11) == 0)) {
    *res = CTS__HTTP_PAGE;
    return 200;
  }
  static const char data_path[] = "/data.json", since[] = "/data.json?since=";
  if (tlen == sizeof data_path - 1 && memcmp(target, data_path, tlen) == 0) {
    *res = CTS__HTTP_DATA;
    return 200;
  }
  if (tlen > sizeof since - 1 && tlen <= sizeof since - 1 + 20 &&
      memcmp(target, since, sizeof since - 1) == 0) {
    uint64_t g = 0;
    bool wraps = false; /* past 2^64 - 1: no generation, whatever it would wrap to */
    for (size_t i = sizeof since - 1; i < tlen; i++) {
      if (target[i] < '0' || target[i] > '9') return 404;
      const uint64_t d = (uint64_t)(target[i] - '0');
      wraps |= g > (UINT64_MAX - d) / 10u;
      g = g * 10u + d;
    }
    *res = !wraps && g == generation ? CTS__HTTP_UNCHANGED : CTS__HTTP_DATA;
    return *res == CTS__HTTP_DATA ? 200 : 204;
  }
  return 404;
}
