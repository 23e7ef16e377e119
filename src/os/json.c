/* SPDX-License-Identifier: MIT */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/check.h"

void cts_json_init(cts_json_t *w, cts_out_t *o) {
  *w = (cts_json_t){.o = o};
}

void cts_json_finish(cts_json_t *w) {
  CTS_ASSERT(w->depth == 0 && !w->after_key);
  (void)w;
}

void cts_json_ws(cts_json_t *w, const char *ws) {
  w->ws = ws;
}

/* The flag bit of the container at depth d+1 (none past the deepest tracked: a release
 * build writes on untracked rather than shift out of range). */
static uint32_t bit(unsigned d) {
  return d < CTS_JSON_MAX_DEPTH ? 1u << d : 0;
}

static bool in_object(const cts_json_t *w) {
  return w->depth && (w->object & bit(w->depth - 1));
}

/* Short layout strings, byte by byte (cheaper than a call to memcpy). */
static void write_short(cts_out_t *o, const char *s) {
  for (; *s; s++) cts_out_char(o, *s);
}

void cts_json_item_ws(cts_json_t *w, const char *ws) {
  CTS_ASSERT(w->depth > 0);
  if (w->depth && w->depth <= CTS_JSON_MAX_DEPTH) w->item_ws[w->depth - 1] = ws;
}

static void write_ws(cts_json_t *w) {
  if (w->ws) write_short(w->o, w->ws);
  w->ws = NULL;
}

/* Before an item of the open container (a key in an object, a value in an array, or the
 * top-level value): the comma when one is due, then the layout whitespace. */
static void before_item(cts_json_t *w) {
  if (!w->depth) {
    CTS_ASSERT(!w->done); /* one value per document */
    write_ws(w);
    return;
  }
  const uint32_t b = bit(w->depth - 1);
  const char *ws = w->ws;
  if (!ws && w->depth <= CTS_JSON_MAX_DEPTH) ws = w->item_ws[w->depth - 1];
  if (w->has_items & b) {
    cts_out_char(w->o, ',');
    write_short(w->o, ws ? ws : " ");
  } else if (ws) {
    write_short(w->o, ws);
  }
  w->ws = NULL;
  w->has_items |= b;
}

/* Before any value: in an object it follows its key, elsewhere it is an item. */
static void before_value(cts_json_t *w) {
  if (in_object(w)) {
    CTS_ASSERT(w->after_key); /* a member needs its key */
    w->after_key = false;
    return;
  }
  before_item(w);
}

static void after_value(cts_json_t *w) {
  if (!w->depth) w->done = true;
}

/* A string literal. Plain ASCII without quotes, backslashes or controls (every key, most
 * names) needs no escaping: it is copied into the buffer as it is checked, which chrome
 * exports, writing millions of keys, need to be fast; anything else (or a buffer too full)
 * goes through cts_out_json_str. */
static void write_string(cts_out_t *o, const char *s) {
  const size_t room = CTS_OUT_BUFSIZE - o->len;
  char *d = o->buf + o->len;
  for (size_t i = 0; i + 2 <= room; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (c == 0) {
      d[0] = '"';
      d[i + 1] = '"';
      o->len += i + 2;
      return;
    }
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
    d[i + 1] = (char)c;
  }
  cts_out_json_str(o, s);
}

void cts_json_key(cts_json_t *w, const char *key) {
  CTS_ASSERT(in_object(w) && !w->after_key);
  before_item(w);
  write_string(w->o, key);
  cts_out_char(w->o, ':');
  cts_out_char(w->o, ' ');
  w->after_key = true;
}

static void open_container(cts_json_t *w, bool object) {
  CTS_ASSERT(w->depth < CTS_JSON_MAX_DEPTH);
  before_value(w);
  cts_out_char(w->o, object ? '{' : '[');
  const uint32_t b = bit(w->depth);
  w->object = object ? w->object | b : w->object & ~b;
  w->has_items &= ~b;
  if (w->depth < CTS_JSON_MAX_DEPTH) w->item_ws[w->depth] = NULL;
  w->depth++;
}

void cts_json_object(cts_json_t *w) {
  open_container(w, true);
}

void cts_json_array(cts_json_t *w) {
  open_container(w, false);
}

void cts_json_end(cts_json_t *w) {
  CTS_ASSERT(w->depth > 0 && !w->after_key);
  if (!w->depth) return;
  const bool object = in_object(w);
  write_ws(w);
  cts_out_char(w->o, object ? '}' : ']');
  w->depth--;
  after_value(w);
}

void cts_json_str(cts_json_t *w, const char *s) {
  before_value(w);
  write_string(w->o, s);
  after_value(w);
}

void cts_json_raw_value(cts_json_t *w) {
  before_value(w);
  after_value(w);
}

void cts_json_u64(cts_json_t *w, uint64_t v) {
  before_value(w);
  cts_out_u64(w->o, v);
  after_value(w);
}

void cts_json_i64(cts_json_t *w, int64_t v) {
  before_value(w);
  cts_out_i64(w->o, v);
  after_value(w);
}

void cts_json_bool(cts_json_t *w, bool v) {
  before_value(w);
  cts_out_str(w->o, v ? "true" : "false");
  after_value(w);
}

void cts_json_null(cts_json_t *w) {
  before_value(w);
  cts_out_str(w->o, "null");
  after_value(w);
}

/* printf would write "inf" or "nan", which JSON has no words for. */
static void number(cts_json_t *w, double v, const char *fmt, int prec) {
  before_value(w);
  if (isfinite(v))
    cts_out_printf(w->o, fmt, prec, v);
  else
    cts_out_str(w->o, "null");
  after_value(w);
}

void cts_json_fixed(cts_json_t *w, double v, int decimals) {
  /* Without printf (cts_out_fixed): chrome exports write a time per event. */
  before_value(w);
  if (isfinite(v))
    cts_out_fixed(w->o, v, decimals);
  else
    cts_out_str(w->o, "null");
  after_value(w);
}

void cts_json_g(cts_json_t *w, double v, int digits) {
  number(w, v, "%.*g", digits);
}

void cts_json_shortest(cts_json_t *w, double v) {
  int prec = 1;
  if (isfinite(v))
    for (; prec < 17; prec++) {
      char buf[40];
      snprintf(buf, sizeof buf, "%.*g", prec, v);
      if (strtod(buf, NULL) == v) break;
    }
  number(w, v, "%.*g", prec);
}

void cts_json_kv_str(cts_json_t *w, const char *key, const char *s) {
  cts_json_key(w, key);
  cts_json_str(w, s);
}

void cts_json_kv_u64(cts_json_t *w, const char *key, uint64_t v) {
  cts_json_key(w, key);
  cts_json_u64(w, v);
}

void cts_json_kv_i64(cts_json_t *w, const char *key, int64_t v) {
  cts_json_key(w, key);
  cts_json_i64(w, v);
}

void cts_json_kv_bool(cts_json_t *w, const char *key, bool v) {
  cts_json_key(w, key);
  cts_json_bool(w, v);
}

void cts_json_kv_fixed(cts_json_t *w, const char *key, double v, int decimals) {
  cts_json_key(w, key);
  cts_json_fixed(w, v, decimals);
}
