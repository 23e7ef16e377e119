/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if it is invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  const unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, min = 0x10000;
  else
    return 0;
  if (len > n) return 0;
  unsigned cp = c & (0x3fu >> (len - 1));
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

void report_json_strn(cts_out_t *o, const char *str, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  cts_out_char(o, '"');
  size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    if (c == '"' || c == '\\') {
      cts_out_char(o, '\\');
      cts_out_char(o, (char)c);
      i++;
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
      /* Markup characters too: the JSON sits inside an HTML <script> element. */
      const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      cts_out_write(o, esc, sizeof esc);
      i++;
    } else if (c < 0x80) {
      cts_out_char(o, (char)c);
      i++;
    } else {
      const size_t len = utf8_len(s + i, n - i);
      if (len == 0) {
        cts_out_str(o, "\\ufffd"); /* invalid byte: the replacement character */
        i++;
      } else if (len == 3 && c == 0xe2 && s[i + 1] == 0x80 &&
                 (s[i + 2] == 0xa8 || s[i + 2] == 0xa9)) {
        cts_out_str(o, s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029");
        i += 3;
      } else {
        cts_out_write(o, s + i, len);
        i += len;
      }
    }
  }
  cts_out_char(o, '"');
}

void report_json_str(cts_out_t *o, const char *s) {
  report_json_strn(o, s ? s : "", s ? strlen(s) : 0);
}

void report_json_num(cts_out_t *o, double v) {
  if (!isfinite(v)) v = 0;
  if (v == floor(v) && fabs(v) < 9e15) {
    cts_out_i64(o, (int64_t)v);
    return;
  }
  char buf[40];
  snprintf(buf, sizeof buf, "%.6g", v);
  cts_out_str(o, buf);
}
