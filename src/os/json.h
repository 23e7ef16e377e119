/* SPDX-License-Identifier: MIT */
/* A JSON writer over cts_out_t that is well-formed by construction: the writer puts the
 * commas between items and ": " after keys, escapes every string (cts_out_json_str: control
 * characters as \uXXXX or \n \t \r, invalid UTF-8 as U+FFFD), writes numbers that JSON can
 * read (a non-finite double becomes null) and tracks the nesting, so a command cannot emit
 * a stray comma or an unclosed bracket.
 *
 * Layout is the caller's: cts_json_ws(w, "\n  ") sets the whitespace written before the
 * next item or closing bracket (after the comma the writer adds), cts_json_item_ws() that of
 * every later item of the open container; without them, items are
 * separated by ", " and brackets hug their contents. So the commands keep their exact
 * layouts (one member per line, or one row per line in an otherwise flat object).
 *
 * Misuse (a value in an object without its key, a key in an array, a closing bracket that
 * does not match, nesting deeper than CTS_JSON_MAX_DEPTH, a second top-level value, a
 * document finished with open brackets) is a CTS_ASSERT failure in checked builds; a release
 * build writes what it was told. Output errors are those of the cts_out_t (sticky, see
 * output.h). A writer borrows its output and owns nothing; not thread-safe (one writer per
 * output, on one thread). */
#ifndef CTS_JSON_H
#define CTS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "output.h"

#define CTS_JSON_MAX_DEPTH 32

typedef struct cts_json {
  cts_out_t *o;
  const char *ws; /* whitespace before the next item or bracket, or NULL */
  /* item_ws[d]: whitespace before each item of the open container at depth d+1 when no
   * cts_json_ws() is pending (cts_json_item_ws), or NULL */
  const char *item_ws[CTS_JSON_MAX_DEPTH];
  unsigned depth;     /* open containers */
  bool done;          /* the top-level value is complete */
  bool after_key;     /* a key was written: its value comes next */
  uint32_t object;    /* bit d: the container at depth d+1 is an object */
  uint32_t has_items; /* bit d: it holds at least one item */
} cts_json_t;

/* Starts a document (one top-level value) on o. */
void cts_json_init(cts_json_t *w, cts_out_t *o);
/* Checks that the top-level value is complete (every bracket closed). Writes nothing: a
 * trailing newline, if wanted, is the caller's (cts_out_char). */
void cts_json_finish(cts_json_t *w);

/* Whitespace (" ", "\n", "\n  ", ...) to write before the next item or closing bracket,
 * after the comma when one is due. ws must outlive that next write (a literal). */
void cts_json_ws(cts_json_t *w, const char *ws);
/* Whitespace to write before every later item of the open container (until it closes),
 * where no cts_json_ws() is pending: "one member per line" without a call per member.
 * Containers opened inside it start without. ws must outlive the container (a literal). */
void cts_json_item_ws(cts_json_t *w, const char *ws);

void cts_json_object(cts_json_t *w); /* { */
void cts_json_array(cts_json_t *w);  /* [ */
void cts_json_end(cts_json_t *w);    /* } or ], whichever is open */

/* A member's key (in an object); its value is the next value written. */
void cts_json_key(cts_json_t *w, const char *key);

void cts_json_str(cts_json_t *w, const char *s);
void cts_json_u64(cts_json_t *w, uint64_t v);
void cts_json_i64(cts_json_t *w, int64_t v);
void cts_json_bool(cts_json_t *w, bool v);
void cts_json_null(cts_json_t *w);
/* v with `decimals` digits after the point, as printf's %.*f ("12.50"). */
void cts_json_fixed(cts_json_t *w, double v, int decimals);
/* v with `digits` significant digits, as printf's %.*g (17 reads back exactly). */
void cts_json_g(cts_json_t *w, double v, int digits);
/* The shortest %g form that reads back as v ("0.0001", "1e-05"). */
void cts_json_shortest(cts_json_t *w, double v);

/* A value whose bytes the caller writes to w->o itself, right after this call: the comma
 * and layout whitespace due before it are written, and it counts as written. For hot paths
 * that write millions of values of one shape (the chrome exports' events); the caller's
 * bytes must be one complete JSON value, its strings from cts_fmt_json_str or
 * cts_out_json_str and its numbers from cts_out_u64 or cts_out_fixed. */
void cts_json_raw_value(cts_json_t *w);

/* Members: a key and its value. */
void cts_json_kv_str(cts_json_t *w, const char *key, const char *s);
void cts_json_kv_u64(cts_json_t *w, const char *key, uint64_t v);
void cts_json_kv_i64(cts_json_t *w, const char *key, int64_t v);
void cts_json_kv_bool(cts_json_t *w, const char *key, bool v);
void cts_json_kv_fixed(cts_json_t *w, const char *key, double v, int decimals);

#endif /* CTS_JSON_H */
