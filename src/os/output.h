/* SPDX-License-Identifier: MIT */
/* Buffered output to a file descriptor with fast number formatting: dumps of large traces
 * print tens of millions of lines, and stdio's printf would dominate their cost. */
#ifndef CTS_OUTPUT_H
#define CTS_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../common/compiler.h"
#include "../common/decimal.h"

#define CTS_OUT_BUFSIZE (256u * 1024u)

typedef struct cts_out {
  int fd;
  int err; /* first write error (-errno), sticky */
  /* Text for people (set after cts_out_init, which clears it): every control byte written
   * (C0 but tab and newline, DEL, C1) goes out escaped as \xNN, so that no name taken from
   * a trace can drive the reader's terminal, whatever path printed it. */
  bool term;
  size_t len;
  char buf[CTS_OUT_BUFSIZE];
} cts_out_t;

void cts_out_init(cts_out_t *o, int fd);
void cts_out_write(cts_out_t *o, const void *p, size_t n);
void cts_out_str(cts_out_t *o, const char *s);
void cts_out_u64(cts_out_t *o, uint64_t v);
void cts_out_i64(cts_out_t *o, int64_t v);
void cts_out_printf(cts_out_t *o, const char *fmt, ...) CTS_PRINTF(2, 3);
/* v with `decimals` digits after the point (0 to 9), exactly as printf's "%.*f" writes it
 * (the exact binary value rounded half to even; "-" for a negative or -0 value; "inf",
 * "nan"), without printf for the values outputs hold: per-event exports write tens of
 * millions of times, and printf was most of their cost. */
void cts_out_fixed(cts_out_t *o, double v, int decimals);
/* A JSON string literal (quotes included), escaping what JSON requires; bytes that are not
 * valid UTF-8 are written as U+FFFD so the output always parses. */
void cts_out_json_str(cts_out_t *o, const char *s);
/* The same into d, which has room for 6 strlen(s) + 2 bytes; returns the bytes written. */
size_t cts_fmt_json_str(char *d, const char *s);
/* s as XML/HTML text or attribute value: & < > " ' escaped, nothing else changed. */
void cts_out_xml_text(cts_out_t *o, const char *s);
/* Writes the buffer out; returns the sticky error (0 if none). */
int cts_out_flush(cts_out_t *o);

/* s for a person's terminal, into buf (always terminated, cut short rather than
 * overflowed): C0 controls (except the tab; a newline too, which would fake a line), DEL
 * and the C1 controls (U+0080-U+009F, in UTF-8 or as stray bytes) as \xNN escapes;
 * everything else, UTF-8 included, as is. Names in a trace come from the traced program:
 * an escape sequence in a function name must not retitle, recolour or clear the reader's
 * terminal. Returns buf. (Whole outputs: cts_out_t.term.) */
const char *cts_term_text(const char *s, char *buf, size_t size);

/* ---- output files --------------------------------------------------------------------- */

/* A file written through a temporary file in its directory, renamed over it only when the
 * run succeeded: a failed run leaves the old file as it was, and never a half-written one.
 * Outputs that are not regular files (standard output, /dev/null, a FIFO, a terminal) are
 * written in place, and so is a writable file in a directory where no temporary file can
 * be made (EACCES); a file the user may not write is refused (EACCES), as open would. A symlink to
 * a file is followed: the link stays and its target is replaced. Not thread-safe (one output per
 * call site, as in the commands). */
typedef struct cts_outfile {
  int fd;
  bool in_place; /* fd is the output itself (not a temporary) */
  bool owns_fd;  /* fd is closed at commit/discard (not standard output) */
  char path[4096];
  char tmp[4096]; /* "" when in place */
} cts_outfile_t;

/* The index of the input among inputs[0..n) that path (NULL: standard output) names, or
 * -1: the same device and inode, through symlinks and hard links ("-" as an input is
 * standard input). Writing a command's output over its own input would destroy the input
 * before (or after) it is read: the commands refuse. */
int cts_outfile_same_input(const char *path, const char *const *inputs, size_t n);
/* Opens path for writing (NULL or "-": standard output). Returns 0 or -errno. */
int cts_outfile_open(cts_outfile_t *f, const char *path);
/* The name to write to (the temporary file, or the output itself), for writers that open
 * the file by name (cairo). */
const char *cts_outfile_write_path(const cts_outfile_t *f);
/* Closes the file and renames the temporary file over the output (mode 0644 less the
 * umask, or the mode of the file it replaces). Returns 0 or -errno; on an error the
 * temporary file is removed and the old output kept. */
int cts_outfile_commit(cts_outfile_t *f);
/* Closes and removes the temporary file: the old output stays. */
void cts_outfile_discard(cts_outfile_t *f);

/* Makes room in a full buffer (internal: a term output keeps a cut UTF-8 character). */
void cts__out_flush_full(cts_out_t *o);

static inline void cts_out_char(cts_out_t *o, char c) {
  if (CTS_UNLIKELY(o->len == CTS_OUT_BUFSIZE)) cts__out_flush_full(o);
  o->buf[o->len++] = c;
}

/* Room for n more bytes (n ≤ CTS_OUT_BUFSIZE / 2), flushing the buffer when it has less:
 * returns where they go. The caller writes at most n bytes there and adds what it wrote to
 * o->len: a line formatted in place, without a call per field. */
static inline char *cts_out_reserve(cts_out_t *o, size_t n) {
  if (CTS_UNLIKELY(CTS_OUT_BUFSIZE - o->len < n)) cts__out_flush_full(o);
  return o->buf + o->len;
}

/* The decimal digits of v at d (no terminator); their count. d must have room for
 * CTS_U64_DIGITS bytes: whole words are stored, so bytes past the digits, within those 20,
 * may be overwritten (write what follows the number after it). */
#define CTS_U64_DIGITS 20u
size_t cts__fmt_u64_long(char *d, uint64_t v);
static inline size_t cts_fmt_u64(char *d, uint64_t v) {
  /* Lengths, counts, ids and frame numbers mostly have at most eight digits: inline, and
   * no call (whose register saves cost more than these digits). */
  if (v < 10) {
    d[0] = (char)('0' + v);
    return 1;
  }
  if (v < 100) {
    d[0] = (char)('0' + v / 10u);
    d[1] = (char)('0' + v % 10u);
    return 2;
  }
  if (v < 10000) return cts_dec_3or4(d, (uint32_t)v);
  if (v < 100000000) return cts_dec_5to8(d, (uint32_t)v);
  return cts__fmt_u64_long(d, v);
}

/* A column's last number and its text, for columns that grow by small steps (times, ids
 * in allocation order): the next value within 9 above it is written by adding the step to
 * the text (a carry or two) instead of converting it again. Zero it to start. Not
 * thread-safe: one per column being written. */
typedef struct cts_fmt_memo {
  uint64_t v;
  uint8_t len; /* 0: no text yet */
  char text[CTS_U64_DIGITS];
} cts_fmt_memo_t;

void cts__fmt_memo_add(cts_fmt_memo_t *m, unsigned step);

/* As cts_fmt_u64(d, v) (same room at d, same bytes), through the column's memo m. */
static inline size_t cts_fmt_u64_memo(cts_fmt_memo_t *m, char *d, uint64_t v) {
  const uint64_t step = v - m->v; /* (v below m->v wraps to a large step) */
  if (m->len && step < 10) {
    char *last = &m->text[m->len - 1];
    if (*last + (int)step <= '9')
      *last = (char)(*last + (int)step); /* no carry: most steps */
    else
      cts__fmt_memo_add(m, (unsigned)step);
  } else {
    m->len = (uint8_t)cts_fmt_u64(m->text, v);
  }
  m->v = v;
  memcpy(d, m->text, CTS_U64_DIGITS);
  return m->len;
}

/* Receives one log line (no trailing newline): the shape of the collector's and serve's
 * log callbacks. */
typedef void (*cts_log_cb)(void *user_data, const char *line);

/* Formats one log line (longer than CTS_LOG_LINE_MAX - 1 bytes, it is cut) and hands it
 * to log, or writes it with a newline to stderr when log is NULL. Thread-safe when log
 * is; allocates nothing. */
#define CTS_LOG_LINE_MAX 1024u
void cts_log_line(cts_log_cb log, void *user_data, const char *fmt, ...) CTS_PRINTF(3, 4);

#endif /* CTS_OUTPUT_H */
