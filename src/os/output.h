/* SPDX-License-Identifier: MIT */
/* Buffered output to a file descriptor with fast number formatting: dumps of large traces
 * print tens of millions of lines, and stdio's printf would dominate their cost. */
#ifndef CTS_OUTPUT_H
#define CTS_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/compiler.h"

#define CTS_OUT_BUFSIZE (256u * 1024u)

typedef struct cts_out {
  int fd;
  int err; /* first write error (-errno), sticky */
  size_t len;
  char buf[CTS_OUT_BUFSIZE];
} cts_out_t;

void cts_out_init(cts_out_t *o, int fd);
void cts_out_write(cts_out_t *o, const void *p, size_t n);
void cts_out_str(cts_out_t *o, const char *s);
void cts_out_u64(cts_out_t *o, uint64_t v);
void cts_out_i64(cts_out_t *o, int64_t v);
void cts_out_printf(cts_out_t *o, const char *fmt, ...) CTS_PRINTF(2, 3);
/* A JSON string literal (quotes included), escaping what JSON requires; bytes that are not
 * valid UTF-8 are written as U+FFFD so the output always parses. */
void cts_out_json_str(cts_out_t *o, const char *s);
/* s as XML/HTML text or attribute value: & < > " ' escaped, nothing else changed. */
void cts_out_xml_text(cts_out_t *o, const char *s);
/* Writes the buffer out; returns the sticky error (0 if none). */
int cts_out_flush(cts_out_t *o);

static inline void cts_out_char(cts_out_t *o, char c) {
  if (CTS_UNLIKELY(o->len == CTS_OUT_BUFSIZE)) cts_out_flush(o);
  o->buf[o->len++] = c;
}

#endif /* CTS_OUTPUT_H */
