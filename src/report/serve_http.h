/* SPDX-License-Identifier: MIT */
/* The request parser of `ctfscope serve` (serve.h says what it serves and answers), apart
 * from the sockets so that tests and the fuzz target (tests/fuzz/fuzz_http_request.c) reach
 * it directly. Pure: no allocation, no state, safe from any thread. */
#ifndef CTS_REPORT_SERVE_HTTP_H
#define CTS_REPORT_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cts__http_resource {
  CTS__HTTP_ERROR,     /* answer the status code alone */
  CTS__HTTP_PAGE,      /* 200: the viewer page */
  CTS__HTTP_DATA,      /* 200: the current document */
  CTS__HTTP_UNCHANGED, /* 204: /data.json?since=G and G is the current generation */
} cts__http_resource_t;

/* Parses a whole request head: req[0..len) is what the client sent up to and including the
 * first CRLF CRLF (the caller found it; nothing beyond len is read, and req need not be
 * NUL-terminated). loopback: the server is bound to a loopback address, so the Host
 * header must name this machine (else 403). generation: the current document's. Returns
 * the status code (200, 204, 400, 403, 404, 405 or 505) and sets *res. */
int cts__http_parse_request(const char *req, size_t len, bool loopback, uint64_t generation,
                            cts__http_resource_t *res);

#endif /* CTS_REPORT_SERVE_HTTP_H */
