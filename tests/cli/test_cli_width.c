/* SPDX-License-Identifier: MIT */
/* Tables that fit the terminal (issue 20, point 6): top, top --tree, top --inverted, leaks
 * and diff on a pseudo-terminal of a fixed width, over names that are long, templated,
 * multi-byte and hostile (escape sequences): no row wider than the terminal, no control
 * byte, no UTF-8 character cut, the escapes still there; and the names whole when the
 * output is a pipe or --width 0 is given. Main's code printed every name whole: each of
 * these rows was wider than the terminal. */
#define _GNU_SOURCE /* posix_openpt, cfmakeraw */
#include <stdio.h>
#include <stdlib.h>

#include "../run_cmd.h"
#include "../test.h"
#include "os/output.h"
#include "hostile_traces.h"
#include "pty_run.h"
#include "scratch_dir.h"
#include "tasks_trace.h"

enum { TIMEOUT_S = 30, TERMINAL_COLUMNS = 120 };
#define NELEM(a) (sizeof(a) / sizeof *(a))

static const char *write_trace(const char *name, const ht_spec_t *s) {
  static char paths[4][256];
  static unsigned next;
  char *path = paths[next++ % 4];
  scratch_file("cts-width", name, path, sizeof paths[0]);
  if (ht_write(s, path) != 0) abort();
  return path;
}

static char *on_a_terminal(unsigned short columns, const char *const *args) {
  return pty_run(columns, args);
}

static char *through_a_pipe(const char *const *args) {
  char *argv[16] = {CTS_TEST_CTFSCOPE};
  for (size_t i = 0; args[i] && i < 14; i++) argv[i + 1] = (char *)args[i];
  run_result_t r;
  if (!run_cmd(argv, NULL, TIMEOUT_S, &r) || r.exit_code != 0) return NULL;
  char *out = strdup(r.out);
  run_result_free(&r);
  return out;
}

/* The columns of one line as a terminal shows it, checking that it is valid UTF-8 without
 * control bytes (the tab aside); SIZE_MAX when it is not. East Asian wide characters: 2. */
static size_t line_columns(const unsigned char *p, size_t n) {
  size_t columns = 0;
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x20 && c != '\t') return SIZE_MAX;
    if (c == 0x7f) return SIZE_MAX;
    if (c < 0x80) {
      columns++, i++;
      continue;
    }
    const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || i + len > n) return SIZE_MAX;
    uint32_t cp = c & (0x7fu >> len);
    for (size_t k = 1; k < len; k++) {
      if ((p[i + k] & 0xc0) != 0x80) return SIZE_MAX;
      cp = cp << 6 | (p[i + k] & 0x3fu);
    }
    if (cp >= 0x80 && cp <= 0x9f) return SIZE_MAX; /* a C1 control */
    columns += (cp >= 0x2e80 && cp <= 0xa4cf) ? 2 : 1;
    i += len;
  }
  return columns;
}

/* Every row of a table (the lines that start with a space: headings do not) within
 * `columns`, and the whole output valid UTF-8 without a control byte. */
static void assert_rows_fit(const char *what, const char *out, size_t columns) {
  size_t rows = 0;
  for (const char *line = out; *line;) {
    const char *end = strchr(line, '\n');
    const size_t n = end ? (size_t)(end - line) : strlen(line);
    const size_t w = line_columns((const unsigned char *)line, n);
    CTS_ASSERT_MSG(w != SIZE_MAX, "%s: a control byte or a cut UTF-8 character in '%.*s'", what,
                   (int)n, line);
    if (line[0] == ' ') {
      rows++;
      CTS_ASSERT_MSG(w <= columns, "%s: %zu columns > %zu: '%.*s'", what, w, columns, (int)n, line);
    }
    line += n + (end != NULL);
  }
  CTS_ASSERT_MSG(rows > 0, "%s: no row in '%s'", what, out);
}

static bool contains(const char *s, const char *what) {
  return s && strstr(s, what) != NULL;
}

/* A C++ name as the demangler writes it: a long template, its parameters, a multi-byte
 * namespace and an escape sequence at its start. */
static const char cpp_name[] =
    "\x1b[31m\xc3\x89vil::\xe5\x87\xbd\xe6\x95\xb0::std::_Rb_tree<std::__cxx11::basic_string<"
    "char, std::char_traits<char>, std::allocator<char> >, std::pair<std::__cxx11::basic_"
    "string<char, std::char_traits<char>, std::allocator<char> > const, Box<long> >, "
    "std::_Select1st<std::pair<std::__cxx11::basic_string<char> const, Box<long> > > >::"
    "_M_emplace_hint_unique<std::piecewise_construct_t const&, std::tuple<std::__cxx11::"
    "basic_string<char>&&>, std::tuple<> >(std::_Rb_tree_const_iterator<std::pair<std::"
    "__cxx11::basic_string<char> const, Box<long> > >, std::piecewise_construct_t const&, "
    "std::tuple<std::__cxx11::basic_string<char>&&>&&, std::tuple<>&&)";

/* Traces of one site each: the C++ name; a Rust one with operators; 1 500 bytes of
 * two-byte and three-byte characters with no list to collapse. */
static const char *const *test_traces(void) {
  static const char *paths[3];
  if (paths[0]) return paths;
  static char multibyte[1600];
  size_t n = 0;
  while (n + 5 < 1500) {
    memcpy(multibyte + n, "\xc3\xa9\xe5\x87\xbd", 5); /* é函 */
    n += 5;
  }
  multibyte[n] = 0;
  ht_spec_t s = ht_plain();
  s.function = cpp_name;
  s.file = "/home/user/src/very/deep/tree/\x1b]0;pwned\x07/stl_tree.h";
  paths[0] = write_trace("cpp.ctf", &s);
  s.function =
      "<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop::h0123456789abcdef::operator<<"
      "(core::fmt::Formatter<'_>&, alloc::collections::btree::map::BTreeMap<K,V,A>) "
      "operator->() operator()(int) std::operator< <char>(std::basic_string<char> const&)";
  s.file = "src/liballoc/vec.rs";
  paths[1] = write_trace("rust.ctf", &s);
  s.function = multibyte;
  s.file = "\xe5\x87\xbd.c";
  paths[2] = write_trace("multibyte.ctf", &s);
  return paths;
}

CTS_TEST(rows_fit_the_terminal_with_escapes_and_characters_whole) {
  const char *const *traces = test_traces();
  for (size_t t = 0; t < 3; t++) {
    const char *trace = traces[t];
    const char *const cmds[][8] = {
        {"top", trace, NULL},
        {"top", "--by", "function", trace, NULL},
        {"top", "--tree", "--keep-allocator-frames", trace, NULL},
        {"top", "--inverted", trace, NULL},
        {"leaks", "--depth", "3", trace, NULL},
        {"diff", trace, trace, NULL},
    };
    for (size_t c = 0; c < NELEM(cmds); c++) {
      char *out = on_a_terminal(TERMINAL_COLUMNS, cmds[c]);
      CTS_ASSERT(out);
      char what[256];
      snprintf(what, sizeof what, "%s %s (trace %zu)", cmds[c][0], cmds[c][1], t);
      assert_rows_fit(what, out, TERMINAL_COLUMNS);
      if (t == 0) /* the escape at the name's start is kept, escaped */
        CTS_ASSERT_MSG(contains(out, "\\x1b[31m"), "%s: %s", what, out);
      free(out);
    }
  }
}

CTS_TEST(names_are_shortened_by_their_lists_first) {
  char *out = through_a_pipe(
      (const char *const[]){"top", "--by", "function", "--width", "200", test_traces()[0], NULL});
  CTS_ASSERT(out);
  /* The template and parameter lists collapse, the outermost kept as markers. */
  CTS_ASSERT_MSG(contains(out, "_M_emplace_hint_unique<\xe2\x80\xa6>(\xe2\x80\xa6)"), "%s", out);
  assert_rows_fit("top --width 200", out, 200);
  free(out);
}

CTS_TEST(width_option_and_narrow_floor) {
  const char *trace = test_traces()[0];
  /* --width fits a pipe's rows too. */
  char *out = through_a_pipe((const char *const[]){"top", "--width", "110", trace, NULL});
  CTS_ASSERT(out);
  assert_rows_fit("top --width 110", out, 110);
  free(out);
  /* However narrow, a name keeps 16 columns: the row is the fixed columns plus 16. */
  out = on_a_terminal(20, (const char *const[]){"diff", trace, trace, NULL});
  CTS_ASSERT(out);
  assert_rows_fit("diff at 20 columns", out, 52 + 16);
  free(out);
}

CTS_TEST(names_stay_whole_in_a_pipe_and_with_width_0) {
  const char *trace = test_traces()[0];
  char escaped[2048];
  cts_term_text(cpp_name, escaped, sizeof escaped);
  char *pipe_out = through_a_pipe((const char *const[]){"top", "--by", "function", trace, NULL});
  CTS_ASSERT(pipe_out);
  CTS_ASSERT_MSG(contains(pipe_out, escaped), "%s", pipe_out);
  const char *const whole[][6] = {
      {"top", "--by", "function", "--width", "0", trace},
      {"top", "--by", "function", "--full-names", trace, NULL},
  };
  for (size_t c = 0; c < NELEM(whole); c++) {
    const char *args[8] = {0};
    for (size_t i = 0; i < 6 && whole[c][i]; i++) args[i] = whole[c][i];
    char *tty = on_a_terminal(TERMINAL_COLUMNS, args);
    CTS_ASSERT(tty);
    CTS_ASSERT_MSG(contains(tty, escaped), "%s: %s", whole[c][3], tty);
    /* The same bytes as the pipe's: only the terminal's width changes what is printed. */
    CTS_ASSERT_MSG(strcmp(tty, pipe_out) == 0, "%s: differs from the pipe's", whole[c][3]);
    free(tty);
  }
  free(pipe_out);
}

/* A name of 2 000 bytes of two- and three-byte characters: whole into a pipe, in every
 * text table, leaks' backtraces and its JSON, every line valid UTF-8. (Main's code cut such
 * names at 511 bytes there, in the middle of a character.) */
CTS_TEST(names_over_511_bytes_are_whole_in_a_pipe) {
  static char name[2001];
  for (size_t n = 0; n < 2000; n += 5) memcpy(name + n, "\xc3\xa9\xe5\x87\xbd", 5); /* é函 */
  ht_spec_t s = ht_plain();
  s.function = name;
  s.file = "\xe5\x87\xbd.c";
  const char *trace = write_trace("long.ctf", &s);
  const char *const cmds[][8] = {
      {"top", trace, NULL},
      {"top", "--by", "function", trace, NULL},
      {"leaks", "--depth", "3", trace, NULL},
      {"leaks", "--json", trace, NULL},
      {"diff", trace, trace, NULL},
  };
  for (size_t c = 0; c < NELEM(cmds); c++) {
    char *out = through_a_pipe(cmds[c]);
    CTS_ASSERT(out);
    CTS_ASSERT_MSG(contains(out, name), "%s %s: the name is not whole: %s", cmds[c][0], cmds[c][1],
                   out);
    for (const char *line = out; *line;) {
      const char *end = strchr(line, '\n');
      const size_t n = end ? (size_t)(end - line) : strlen(line);
      CTS_ASSERT_MSG(line_columns((const unsigned char *)line, n) != SIZE_MAX,
                     "%s %s: a cut character in '%.*s'", cmds[c][0], cmds[c][1], (int)n, line);
      line += n + (end != NULL);
    }
    free(out);
  }
}

/* Every line within `columns`: rows and headings alike. */
static void assert_lines_fit(const char *what, const char *out, size_t columns) {
  for (const char *line = out; *line;) {
    const char *end = strchr(line, '\n');
    const size_t n = end ? (size_t)(end - line) : strlen(line);
    const size_t w = line_columns((const unsigned char *)line, n);
    CTS_ASSERT_MSG(w != SIZE_MAX && w <= columns, "%s: %zu columns > %zu: '%.*s'", what, w, columns,
                   (int)n, line);
    line += n + (end != NULL);
  }
}

/* Headings wrapped at their spaces (a long word, a program's path, elided in its middle) and
 * the task tables' rows fitted, on a terminal; into a pipe the bytes as they always were.
 * (Main's code fitted neither: the "Trace" line of a long program path, the task tables'
 * rows of 64-byte labels and their creators were wider than the terminal.) */
CTS_TEST(headings_and_task_tables_fit_the_terminal) {
  ht_spec_t s = ht_plain();
  s.executable =
      "/opt/build-output-directory/release-configuration/with-a-deep-tree/of/"
      "packages/and-their-versions-1.2.3/bin/the-server-program-with-a-long-name";
  s.function = "handle";
  s.file = "server.c";
  const char *trace = write_trace("heading.ctf", &s);
  const char *const cmds[][8] = {
      {"top", trace, NULL},
      {"top", "--tree", trace, NULL},
      {"top", "--inverted", trace, NULL},
      {"leaks", "--depth", "3", trace, NULL},
      {"stats", trace, NULL},
      {"diff", trace, trace, NULL},
  };
  for (size_t c = 0; c < NELEM(cmds); c++) {
    char *out = on_a_terminal(TERMINAL_COLUMNS, cmds[c]);
    CTS_ASSERT(out);
    char what[64];
    snprintf(what, sizeof what, "%s %s", cmds[c][0], cmds[c][1]);
    assert_lines_fit(what, out, TERMINAL_COLUMNS);
    free(out);
  }
  /* The same bytes into a pipe as with --width 0 on a terminal. */
  char *pipe_out = through_a_pipe((const char *const[]){"top", "--tree", trace, NULL});
  char *tty = on_a_terminal(TERMINAL_COLUMNS,
                            (const char *const[]){"top", "--tree", "--width", "0", trace, NULL});
  CTS_ASSERT(pipe_out && tty && strcmp(pipe_out, tty) == 0);
  CTS_ASSERT(contains(pipe_out, s.executable));
  free(pipe_out);
  free(tty);

  /* A task trace whose labels are 63 bytes (the most a table shows), one task creating the
   * others, which stay pending. */
  static const char label[] = "network-stack-receive-path-of-the-virtual-interface-device-0001";
  static const char other[] = "network-stack-transmit-path-of-the-virtual-interface-device-02";
  const tt_event_t events[] = {
      {0, CTS_MPROF_SWITCH, 0, 0, 0, 0, NULL},
      {1000, CTS_MPROF_CREATES, CTS_TASK_TASK, 0, 1, 0, NULL},
      {1000, CTS_MPROF_LABEL, 0, 1, 0, 0, label},
      {2000, CTS_MPROF_SWITCH, 0, 1, 0, 0, NULL},
      {3000, CTS_MPROF_CREATES, CTS_TASK_WAIT, 1, 2, 0, NULL},
      {3000, CTS_MPROF_LABEL, 0, 2, 0, 0, other},
      {4000, CTS_MPROF_SWITCH, 0, -1, 0, 0, NULL},
  };
  char tasks[256];
  scratch_file("cts-width", "tasks.ctf", tasks, sizeof tasks);
  CTS_ASSERT_EQ_INT(tt_write_events(tasks, 1, events, NELEM(events)), 0);
  const char *const task_cmds[][8] = {
      {"top", tasks, NULL},
      {"leaks", tasks, NULL},
      {"diff", tasks, tasks, NULL},
  };
  for (size_t c = 0; c < NELEM(task_cmds); c++) {
    char *out = on_a_terminal(100, task_cmds[c]);
    CTS_ASSERT(out);
    if (c < 2) /* (diff of a trace with itself: no row) */
      CTS_ASSERT_MSG(contains(out, "network-stack"), "%s: %s", task_cmds[c][0], out);
    assert_lines_fit(task_cmds[c][0], out, 100);
    free(out);
  }
}

CTS_TEST(width_rejects_bad_values) {
  run_result_t r;
  char *argv[] = {CTS_TEST_CTFSCOPE, "top", "--width", "-3", (char *)test_traces()[0], NULL};
  CTS_ASSERT(run_cmd(argv, NULL, TIMEOUT_S, &r));
  CTS_ASSERT_MSG(r.exit_code == 2, "exit %d", r.exit_code);
  CTS_ASSERT(contains(r.err, "--width"));
  run_result_free(&r);
}

CTS_TEST_MAIN()
