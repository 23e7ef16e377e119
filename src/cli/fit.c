/* SPDX-License-Identifier: MIT */
/* Rows that fit the reader's terminal: C++, Rust and templated function names run to
 * hundreds or thousands of columns, and a table whose every row wraps cannot be read. The
 * names are shortened the way a reader still tells them apart (perf report and
 * heaptrack_print's readers expect no less): the innermost parameter lists, then template
 * argument lists, collapse to "(…)" and "<…>"; what still does not fit loses the middle of
 * the function's name, keeping its start (the namespace) and its end (the method), and the
 * location "(file:line)" after it, in at most a third of the room. The work is on the name as the
 * terminal shows it (control bytes as \xNN, cts_term_text), so no escape is cut and no UTF-8
 * character is split. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"

/* An elision mark: one column. */
#define ELLIPSIS       "\xe2\x80\xa6"
#define ELLIPSIS_BYTES 3u
/* The fewest columns a name is given, however narrow the terminal: fewer tell nothing. */
#define MIN_NAME_COLUMNS 16u

static long width_option = -1; /* --width; -1: not given */
static long row_width = -1;    /* the width in use, once known */

int cli_width_option(int opt, const char *arg) {
  switch (opt) {
    case CLI_OPT_WIDTH:
      if (!cli_parse_long(arg, 0, 100000, &width_option))
        return cli_usage_error("--width takes a number of columns from 0 to 100000, not '%s'", arg);
      row_width = -1;
      return -1;
    case CLI_OPT_FULL_NAMES:
      width_option = 0;
      row_width = -1;
      return -1;
    default:
      return CLI_OPTION_OTHER;
  }
}

size_t cli_row_width(void) {
  if (row_width >= 0) return (size_t)row_width;
  row_width = 0; /* not a terminal: names whole, as a script or a file expects them */
  if (width_option >= 0) {
    row_width = width_option;
  } else if (isatty(STDOUT_FILENO)) {
    struct winsize ws;
    long columns;
    const char *env = getenv("COLUMNS");
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
      row_width = ws.ws_col;
    else if (env && cli_parse_long(env, 1, 100000, &columns))
      row_width = columns;
    else
      row_width = 80;
  }
  return (size_t)row_width;
}

/* ---- columns ---------------------------------------------------------------------------- */

/* Columns a code point takes: 2 for the East Asian wide and fullwidth blocks and emoji, 0
 * for combining marks and zero-width characters, else 1. Errs towards more (a row one
 * column short is better than one that wraps). Not wcwidth(3): it answers per the
 * program's locale, and ctfscope never calls setlocale, so it runs in the C locale, where
 * wcwidth says -1 for every character past ASCII. */
static unsigned code_point_columns(uint32_t c) {
  if ((c >= 0x300 && c <= 0x36f) || (c >= 0x200b && c <= 0x200f) || (c >= 0xfe00 && c <= 0xfe0f))
    return 0;
  if ((c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0xa4cf) ||
      (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
      (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
      (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1faff) ||
      (c >= 0x20000 && c <= 0x3fffd))
    return 2;
  return 1;
}

/* The unit of text at p (before end) that is never cut: a \xNN escape, a valid UTF-8
 * character, or a lone byte (a terminal shows an invalid byte as one replacement
 * character). Its length; its columns in *columns (a tab: 8, the most it can move). */
static size_t text_unit(const unsigned char *p, const unsigned char *end, unsigned *columns) {
  static const char hex[] = "0123456789abcdef";
  if (p[0] == '\\' && end - p >= 4 && p[1] == 'x' && memchr(hex, p[2], 16) && p[2] &&
      memchr(hex, p[3], 16) && p[3]) {
    *columns = 4;
    return 4;
  }
  *columns = p[0] == '\t' ? 8 : 1;
  if (p[0] < 0xc2 || p[0] > 0xf4) return 1;
  const size_t n = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
  if ((size_t)(end - p) < n) return 1;
  uint32_t c = p[0] & (0x7fu >> n);
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 1;
    c = c << 6 | (p[i] & 0x3fu);
  }
  if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
      (c >= 0xd800 && c <= 0xdfff))
    return 1;
  *columns = code_point_columns(c);
  return n;
}

static size_t columns_of(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  size_t total = 0;
  while (p < end) {
    unsigned c;
    p += text_unit(p, end, &c);
    total += c;
  }
  return total;
}

size_t cli_text_columns(const char *s) {
  return columns_of(s, strlen(s));
}

/* ---- shortening --------------------------------------------------------------------------- */

/* A growable string (the names are the traced program's: any length). */
typedef struct text {
  char *s;
  size_t len, cap;
  bool nomem;
} text_t;

static void text_add(text_t *t, const char *p, size_t n) {
  if (t->nomem) return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (t->len + n + 1 > cap) cap *= 2;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->nomem = true;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
  memcpy(t->s + t->len, p, n);
  t->len += n;
  t->s[t->len] = 0;
}

/* Whether the bracket at s[i] is part of an operator's name (operator<, operator<<=,
 * operator->, operator()), not a list's. */
static bool in_operator_name(const char *s, size_t i) {
  for (size_t back = 0; back <= 3 && back <= i; back++) {
    const size_t k = i - back; /* where the operator's name would start */
    if (k < 8 || memcmp(s + k - 8, "operator", 8) != 0) continue;
    size_t name = 0;
    if (s[k] == '(' && s[k + 1] == ')')
      name = 2;
    else
      while (name < 4 && s[k + name] && strchr("<>=-!+*/%^&|~", s[k + name])) name++;
    return i < k + name;
  }
  return false;
}

/* The deepest nesting of open/close lists in s[0..n); 0 when there is none or a list closes
 * that was not opened (then nothing is collapsed: a lone '>' is an operator or a
 * comparison). */
static unsigned deepest_list(const char *s, size_t n, char open, char close) {
  unsigned depth = 0, deepest = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != open && s[i] != close) continue;
    if (in_operator_name(s, i) || (s[i] == '>' && i > 0 && s[i - 1] == '-')) continue;
    if (s[i] == open) {
      if (++depth > deepest) deepest = depth;
    } else if (depth-- == 0) {
      return 0;
    }
  }
  return deepest; /* (lists left open: a name cut short; they collapse to its end) */
}

/* s[0..n) with every open/close list at nesting `level` reduced to open…close, into out. */
static void collapse_lists(text_t *out, const char *s, size_t n, char open, char close,
                           unsigned level) {
  unsigned depth = 0;
  out->len = 0;
  text_add(out, "", 0);
  for (size_t i = 0; i < n; i++) {
    const bool list = (s[i] == open || s[i] == close) && !in_operator_name(s, i) &&
                      !(s[i] == '>' && i > 0 && s[i - 1] == '-');
    if (list && s[i] == open) {
      if (++depth <= level) text_add(out, s + i, 1);
      if (depth == level) text_add(out, ELLIPSIS, ELLIPSIS_BYTES);
    } else if (list && s[i] == close) {
      if (depth-- <= level) text_add(out, s + i, 1);
    } else if (depth < level) {
      text_add(out, s + i, 1);
    }
  }
}

/* s[0..n) in at most `columns` columns: its start, "…", its end, cut between units. */
static void elide_middle(text_t *out, const char *s, size_t n, size_t columns) {
  if (columns_of(s, n) <= columns) {
    text_add(out, s, n);
    return;
  }
  if (columns == 0) return;
  const size_t keep = columns - 1, head_columns = keep / 2, tail_columns = keep - head_columns;
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  /* The head: whole units within head_columns. */
  size_t head = 0, used = 0;
  while (p + head < end) {
    unsigned c;
    const size_t k = text_unit(p + head, end, &c);
    if (used + c > head_columns) break;
    used += c;
    head += k;
  }
  /* The tail: the shortest suffix, starting on a unit boundary, within tail_columns. */
  size_t tail = n, pos = head;
  size_t tail_used = columns_of(s + head, n - head);
  while (pos < n && tail_used > tail_columns) {
    unsigned c;
    pos += text_unit(p + pos, end, &c);
    tail_used -= c;
  }
  tail = pos;
  text_add(out, s, head);
  text_add(out, ELLIPSIS, ELLIPSIS_BYTES);
  text_add(out, s + tail, n - tail);
}

/* Where the location " (file:line)" that ends a site's name starts (n if none). */
static size_t location_start(const char *s, size_t n) {
  if (n < 4 || s[n - 1] != ')') return n;
  for (size_t i = n - 1; i-- > 0;) {
    if (s[i] == ')') return n;
    if (s[i] == '(') return i > 0 && s[i - 1] == ' ' ? i - 1 : n;
  }
  return n;
}

static text_t escaped, work, fitted;

const char *cli_fit_name(const char *name, size_t used_columns) {
  const size_t width = cli_row_width();
  if (width == 0) return name;
  const size_t room =
      width > used_columns + MIN_NAME_COLUMNS ? width - used_columns : MIN_NAME_COLUMNS;
  const size_t len = strlen(name);
  escaped.len = 0;
  text_add(&escaped, "", 0);
  if (escaped.nomem) return name;
  /* Escape into room enough for every byte as \xNN. */
  if (len > SIZE_MAX / 4 - 1) return name;
  if (escaped.cap < 4 * len + 1) {
    char *s = realloc(escaped.s, 4 * len + 1);
    if (!s) return name;
    escaped.s = s;
    escaped.cap = 4 * len + 1;
  }
  cts_term_text(name, escaped.s, escaped.cap);
  escaped.len = strlen(escaped.s);
  if (columns_of(escaped.s, escaped.len) <= room) return escaped.s;

  const size_t split = location_start(escaped.s, escaped.len);
  const char *const location = escaped.s + split;
  const size_t location_len = escaped.len - split;
  const size_t location_columns = columns_of(location, location_len);
  /* The function's part: lists collapsed, deepest first, parameters before templates. */
  work.len = 0;
  text_add(&work, escaped.s, split);
  static const char lists[2][2] = {{'(', ')'}, {'<', '>'}};
  for (int k = 0; k < 2; k++) {
    /* Each level once, from the deepest: a collapsed list keeps its level. */
    for (unsigned level = deepest_list(work.s, work.len, lists[k][0], lists[k][1]); level > 0;
         level--) {
      if (work.nomem || columns_of(work.s, work.len) + location_columns <= room) break;
      collapse_lists(&fitted, work.s, work.len, lists[k][0], lists[k][1], level);
      if (fitted.nomem) break;
      const text_t swap = work;
      work = fitted;
      fitted = swap;
    }
  }
  fitted.len = 0;
  text_add(&fitted, "", 0);
  if (work.nomem) return escaped.s;
  /* The function first: its location gets at most a third of the room, keeping its end
   * (the file's name and line) and the parentheses. (Half the room left cc1plus's
   * "walk_tree…cates_1(…)" beside "(…-gnu/12/cc1plus)" at 100 columns.) */
  const size_t function_room = room - (location_columns <= room / 3 ? location_columns : room / 3);
  elide_middle(&fitted, work.s, work.len, function_room);
  const size_t location_room = room - columns_of(fitted.s, fitted.len);
  if (location_columns <= location_room || location_room < 4) {
    text_add(&fitted, location, location_len);
  } else { /* " (" … end ")" */
    text_add(&fitted, location, 2);
    text_add(&fitted, ELLIPSIS, ELLIPSIS_BYTES);
    const char *end = location + location_len;
    const char *tail = location + 2;
    size_t tail_columns = columns_of(tail, (size_t)(end - tail));
    while (tail < end && tail_columns > location_room - 3) {
      unsigned c;
      tail += text_unit((const unsigned char *)tail, (const unsigned char *)end, &c);
      tail_columns -= c;
    }
    text_add(&fitted, tail, (size_t)(end - tail));
  }
  return fitted.nomem ? escaped.s : fitted.s;
}

void cli_out_fitted_row(cts_out_t *o, const char *before, const char *name, const char *after) {
  cts_out_str(o, before);
  const size_t width = cli_row_width();
  cts_out_str(o, width ? cli_fit_name(
                             name, cli_text_columns(before) + (after ? cli_text_columns(after) : 0))
                       : name);
  if (after) cts_out_str(o, after);
}

/* ---- headings ---------------------------------------------------------------------------- */

/* Where a heading's continuation lines start: after its label ("Total    ", "Tasks    ") when
 * it has one (a word and two spaces or more), else two columns in; at most a third of the
 * width, so that the text keeps room. */
static size_t heading_indent(const char *line, size_t n, size_t width) {
  size_t i = 0;
  while (i < n && line[i] != ' ') i++;
  size_t k = i;
  while (k < n && line[k] == ' ') k++;
  const size_t indent = k - i >= 2 && k < n ? k : 2;
  return indent <= width / 3 ? indent : 2;
}

/* Whether the space at line[i] separates a number's digit groups ("2 349 560"): no place to
 * break. */
static bool digit_group(const char *line, size_t n, size_t i) {
  return i > 0 && i + 1 < n && line[i - 1] >= '0' && line[i - 1] <= '9' && line[i + 1] >= '0' &&
         line[i + 1] <= '9';
}

/* One line (no newline) wrapped at its spaces into width columns. A word wider than the room
 * stays whole: the terminal wraps it (cutting it would lose what it names). */
static void wrap_line(cts_out_t *o, const char *line, size_t n, size_t width) {
  if (columns_of(line, n) <= width) {
    cts_out_write(o, line, n);
    return;
  }
  const size_t indent = heading_indent(line, n, width);
  size_t column = 0, i = 0;
  bool first = true;
  while (i < n) {
    size_t spaces = 0;
    while (i + spaces < n && line[i + spaces] == ' ') spaces++;
    size_t word = i + spaces;
    while (word < n && (line[word] != ' ' || digit_group(line, n, word))) word++;
    const char *text = line + i + spaces;
    size_t text_len = word - i - spaces, text_columns = columns_of(text, text_len);
    const bool wrap = !first && column + spaces + text_columns > width && text_len > 0;
    const size_t at = wrap ? indent : column + spaces;
    if (at < width && text_columns > width - at && width - at >= MIN_NAME_COLUMNS) {
      /* Wider than the room left: its middle elided, as a name in a row (a path, a program) */
      fitted.len = 0;
      text_add(&fitted, "", 0);
      elide_middle(&fitted, text, text_len, width - at);
      if (!fitted.nomem) text = fitted.s, text_len = fitted.len;
      text_columns = columns_of(text, text_len);
    }
    if (wrap) {
      cts_out_char(o, '\n');
      for (size_t k = 0; k < indent; k++) cts_out_char(o, ' ');
    } else {
      cts_out_write(o, line + i, spaces);
    }
    cts_out_write(o, text, text_len);
    column = at + text_columns;
    first = false;
    i = word;
  }
}

void cli_out_heading(cts_out_t *o, const char *fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  const int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (text) vsnprintf(text, (size_t)n + 1, fmt, again);
  va_end(again);
  if (!text) return;
  const size_t width = cli_row_width();
  if (width == 0) {
    cts_out_write(o, text, (size_t)n);
    free(text);
    return;
  }
  /* Each line as the terminal will show it: controls as \xNN, whose columns count. */
  char *shown = (size_t)n < SIZE_MAX / 4 - 1 ? malloc(4 * (size_t)n + 1) : NULL;
  if (!shown) {
    cts_out_write(o, text, (size_t)n);
    free(text);
    return;
  }
  for (char *line = text; line < text + n;) { /* (an empty line ends no loop) */
    char *end = memchr(line, '\n', (size_t)(text + n - line));
    if (end) *end = 0;
    cts_term_text(line, shown, 4 * (size_t)n + 1);
    wrap_line(o, shown, strlen(shown), width);
    if (!end) break;
    cts_out_char(o, '\n');
    line = end + 1;
  }
  free(shown);
  free(text);
}

/* A name that filled buf[0..size) (snprintf cut it, or it is exactly that long) ends in
 * "…" at a character's start: the cut shows, and no UTF-8 character is split. */
static const char *mark_cut(char *buf, size_t size) {
  if (strlen(buf) + 1 < size) return buf;
  size_t end = size - 1 - ELLIPSIS_BYTES;
  while (end > 0 && ((unsigned char)buf[end] & 0xc0) == 0x80) end--; /* (a continuation) */
  memcpy(buf + end, ELLIPSIS, ELLIPSIS_BYTES + 1);
  return buf;
}

/* Names whole, fitted or not (a pipe's reader gets what the trace says; they were cut at
 * 511 bytes there, splitting a UTF-8 character), up to 64 KiB: a fitted row needs the whole
 * name for its lists to balance and its end to be there. */
static char whole_name[65536];

const char *cli_site_name(const cts_row_t *r) {
  cts_row_name(r, whole_name, sizeof whole_name);
  return mark_cut(whole_name, sizeof whole_name);
}

const char *cli_frame_name(const cts_frames_t *f, uint64_t code) {
  return mark_cut((char *)cts_frame_label(f, code, whole_name, sizeof whole_name),
                  sizeof whole_name);
}
