/* SPDX-License-Identifier: MIT */
/* Demangling (analysis/names.h) and the fold of allocator frames (analysis/fold.h), on
 * symbols as real C++ and Rust programs have them and on hostile ones. */
#include <errno.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/analysis/fold.h"
#include "../../src/analysis/names.h"
#include "../test.h"

/* regexec's calls counted by interposing it (gcc builds without sanitizers: a sanitizer's
 * runtime intercepts it itself). */
#if !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COUNT_REGEXEC 1
#include <dlfcn.h>
static unsigned long regexec_calls;
int regexec(const regex_t *restrict re, const char *restrict s, size_t nmatch,
            regmatch_t pmatch[restrict nmatch], int eflags) {
  static int (*real)(const regex_t *, const char *, size_t, regmatch_t *, int);
  if (!real) {
    void *sym = dlsym(RTLD_NEXT, "regexec");
    memcpy(&real, &sym, sizeof real);
  }
  regexec_calls++;
  return real(re, s, nmatch, pmatch, eflags);
}
#endif

static void check_demangle(const char *sym, const char *shown, const char *base) {
  char *s = cts_demangle(sym, true), *b = cts_demangle(sym, false);
  CTS_ASSERT_STR_EQ(s, shown);
  CTS_ASSERT_STR_EQ(b, base);
  free(s);
  free(b);
}

CTS_TEST(cxx_symbols) {
  check_demangle("_Znwm", "operator new(unsigned long)", "operator new");
  check_demangle("_ZnwmRKSt9nothrow_t", "operator new(unsigned long, std::nothrow_t const&)",
                 "operator new");
  check_demangle("_ZnamSt11align_val_t", "operator new[](unsigned long, std::align_val_t)",
                 "operator new[]");
  check_demangle(
      "_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_"
      "iteratorIPiS1_EEDpOT_",
      "void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>("
      "__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, "
      "int const&)",
      "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>");
}

CTS_TEST(rust_symbols) {
  /* Legacy: the hash goes, the $LT$-style escapes are decoded. */
  check_demangle(
      "_ZN5alloc7raw_vec19RawVec$LT$T$C$A$GT$7reserve21do_reserve_and_handle17h1234"
      "567890abcdefE",
      "alloc::raw_vec::RawVec<T,A>::reserve::do_reserve_and_handle",
      "alloc::raw_vec::RawVec<T,A>::reserve::do_reserve_and_handle");
  check_demangle("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write", "core::fmt::write");
  /* v0. */
  check_demangle("_RNvNtCs1234_5alloc7raw_vec8grow_one", "alloc::raw_vec::grow_one",
                 "alloc::raw_vec::grow_one");
  check_demangle("_RNvCsbmNqQUJIY6D_7example4main", "example::main", "example::main");
}

CTS_TEST(not_mangled_names_are_left_alone) {
  CTS_ASSERT(cts_demangle("main", true) == NULL);
  CTS_ASSERT(cts_demangle("Stdlib.List.map", true) == NULL);
  CTS_ASSERT(cts_demangle("", true) == NULL);
  CTS_ASSERT(cts_demangle(NULL, true) == NULL);
  CTS_ASSERT(cts_demangle("_Z", true) == NULL);
  CTS_ASSERT(cts_demangle("_ZZZZ", true) == NULL);
}

CTS_TEST(hostile_symbols_are_bounded) {
  /* Over the length cap: not demangled at all, even though it is a valid symbol. */
  const size_t n = CTS_NAMES_MAX_MANGLED + 10;
  char *big = malloc(n + 1);
  CTS_ASSERT(big);
  memcpy(big, "_Z1fv", 5);
  memset(big + 5, 'v', n - 5); /* "f(void, void, ...)" */
  big[n] = '\0';
  CTS_ASSERT(cts_demangle(big, true) == NULL);
  /* Just under it, deeply nested templates: libiberty's own limits, or ours on the output,
   * end it; whatever comes back is bounded. */
  const size_t depth = (CTS_NAMES_MAX_MANGLED - 16) / 4;
  char *nested = malloc(CTS_NAMES_MAX_MANGLED + 1);
  CTS_ASSERT(nested);
  size_t len = 0;
  len += (size_t)sprintf(nested + len, "_Z1fI");
  for (size_t i = 0; i < depth; i++) len += (size_t)sprintf(nested + len, "1aI");
  nested[len++] = 'i';
  for (size_t i = 0; i < depth; i++) nested[len++] = 'E';
  len += (size_t)sprintf(nested + len, "Evv");
  CTS_ASSERT(len <= CTS_NAMES_MAX_MANGLED);
  char *out = cts_demangle(nested, true);
  CTS_ASSERT(!out || strlen(out) <= CTS_NAMES_MAX_SHOWN);
  free(out);
  /* Substitutions that expand exponentially: S_ refers back to the whole type so far. */
  char *subst = malloc(CTS_NAMES_MAX_MANGLED + 1);
  CTS_ASSERT(subst);
  len = (size_t)sprintf(subst, "_Z1fIN1aIiEE");
  for (size_t i = 0; len + 8 < CTS_NAMES_MAX_MANGLED && i < 400; i++)
    len += (size_t)sprintf(subst + len, "%s", i ? "IS0_S0_E" : "");
  len += (size_t)sprintf(subst + len, "Evv");
  out = cts_demangle(subst, true);
  CTS_ASSERT(!out || strlen(out) <= CTS_NAMES_MAX_SHOWN);
  free(out);
  free(subst);
  /* The cache shows such names as they are. */
  cts_names_t names;
  cts_names_init(&names, true);
  const cts_name_t *e = cts_names_get(&names, big);
  CTS_ASSERT(e && !e->demangled && strcmp(e->shown, big) == 0 && e->shown == e->base);
  cts_names_fini(&names);
  free(nested);
  free(big);
}

CTS_TEST(cache_demangles_each_symbol_once) {
  cts_names_t names;
  cts_names_init(&names, true);
  const cts_name_t *a = cts_names_get(&names, "_Znwm");
  CTS_ASSERT(a && a->demangled);
  CTS_ASSERT_STR_EQ(a->shown, "operator new(unsigned long)");
  CTS_ASSERT_STR_EQ(a->base, "operator new");
  CTS_ASSERT_STR_EQ(a->mangled, "_Znwm");
  /* Many other names (the table grows), then the same entry again. */
  char buf[32];
  for (int i = 0; i < 2000; i++) {
    snprintf(buf, sizeof buf, "_Z%zu%s%dv", strlen("f") + (size_t)(i > 9) + (i > 99) + (i > 999),
             "f", i);
    CTS_ASSERT(cts_names_get(&names, buf));
  }
  CTS_ASSERT(cts_names_get(&names, "_Znwm") == a);
  CTS_ASSERT_EQ_U64(names.count, 2001);
  const cts_name_t *m = cts_names_get(&names, "main");
  CTS_ASSERT(m && !m->demangled && m->shown == m->mangled);
  CTS_ASSERT_STR_EQ(cts_names_get(&names, NULL)->shown, "");
  cts_names_fini(&names);
  /* With demangling off, everything is shown as it is. */
  cts_names_init(&names, false);
  a = cts_names_get(&names, "_Znwm");
  CTS_ASSERT(a && !a->demangled && strcmp(a->shown, "_Znwm") == 0);
  cts_names_fini(&names);
}

/* A fake trace: codes 1.. with locations. */
typedef struct fake_code {
  uint64_t code;
  cts_mt_location_t locs[3];
  size_t n;
} fake_code_t;

#define LOC(file, fn) \
  { .line = 1, .filename = file, .defname = fn }
static const fake_code_t fake[] = {
    {1, {LOC("app.cpp", "main")}, 1},
    {2, {LOC("app.cpp", "site_map")}, 1},
    {3, {LOC("/usr/include/c++/12/bits/stl_map.h", "operator[]")}, 1},
    {4, {LOC("", "_ZN9__gnu_cxx13new_allocatorIiE8allocateEmPKv")}, 1},
    {5, {LOC("libstdc++.so.6", "_Znwm")}, 1},
    {6, {LOC("app.cpp", "pool_alloc")}, 1},
    {7, {LOC("libc.so.6", "malloc")}, 1},
    {8, {LOC("", "_ZNSt6thread11_State_implINS_8_InvokerISt5tupleIJPFvvEEEEEE6_M_runEv")}, 1},
    {9, {LOC("app.cpp", "worker")}, 1},
    /* main with push_back inlined into it, then a second level of the program inlined. */
    {10, {LOC("app.cpp", "main"), LOC("/usr/include/c++/12/bits/stl_vector.h", "push_back")}, 2},
    {11, {LOC("app.cpp", "main"), LOC("app.cpp", "helper"), LOC("app.cpp", "pool_alloc")}, 3},
    {12, {LOC("", "_ZN5alloc5alloc5alloc17h0123456789abcdefE")}, 1},
    {13, {LOC("", "__rust_alloc")}, 1},
    {14,
     {LOC("/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/alloc/src/raw_vec.rs",
          "grow_one<u8>")},
     1},
    {15, {LOC("main.rs", "_ZN7example4main17h0123456789abcdefE")}, 1},
    /* The program's function named by its symbol, with the file of Box::new inlined in it. */
    {16,
     {LOC("/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/alloc/src/alloc.rs",
          "_ZN7example8site_box17h0123456789abcdefE")},
     1},
};

static int fake_lookup(void *ud, uint64_t code, const cts_mt_location_t **locs, size_t *n) {
  (void)ud;
  for (size_t i = 0; i < sizeof fake / sizeof fake[0]; i++)
    if (fake[i].code == code) {
      *locs = fake[i].locs;
      *n = fake[i].n;
      return 0;
    }
  return -1;
}

static size_t cut(const cts_fold_config_t *cfg, const uint64_t *bt, size_t n) {
  const cts_frames_t inner = {.lookup = fake_lookup};
  cts_fold_t f;
  char err[256];
  /* SIZE_MAX (never a valid answer) when the fold cannot be set up or runs out of memory. */
  if (cts_fold_init(&f, &inner, cfg, err, sizeof err) != 0) return SIZE_MAX;
  size_t k = cts_fold_cut(&f, bt, n);
  if (f.nomem) k = SIZE_MAX;
  cts_fold_fini(&f);
  return k;
}

#define BT(...) (const uint64_t[]){__VA_ARGS__}, sizeof((const uint64_t[]){__VA_ARGS__}) / 8

CTS_TEST(fold_list) {
  const cts_fold_config_t def = {0}, keep_alloc = {.keep_allocator = true};
  /* std::map insertion: operator[] (by its header), new_allocator, operator new. */
  CTS_ASSERT_EQ_U64(cut(&def, BT(1, 2, 3, 4, 5)), 2);
  CTS_ASSERT_EQ_U64(cut(&keep_alloc, BT(1, 2, 3, 4, 5)), 5);
  /* The program's own wrapper is not on the list; malloc is. */
  CTS_ASSERT_EQ_U64(cut(&def, BT(1, 6, 7)), 2);
  /* Only allocator frames: kept whole rather than left empty. */
  CTS_ASSERT_EQ_U64(cut(&def, BT(5, 7)), 2);
  /* A library frame that calls the program (std::thread) does not hide it. */
  CTS_ASSERT_EQ_U64(cut(&def, BT(8, 9, 7)), 2);
  /* Rust: alloc::alloc::alloc, __rust_alloc, RawVec growth by its source file. */
  CTS_ASSERT_EQ_U64(cut(&def, BT(1, 15, 14, 12, 13)), 2);
  CTS_ASSERT_EQ_U64(cut(&def, BT(1, 15, 16, 12, 13)), 3);
  /* An unknown code is never folded. */
  CTS_ASSERT_EQ_U64(cut(&def, BT(1, 99, 7)), 2);
  CTS_ASSERT_EQ_U64(cut(&def, BT(1, 7, 99)), 3);
}

CTS_TEST(drop_and_keep_frames) {
  const cts_fold_config_t drop = {.drop_re = "^pool_alloc$"};
  /* Dropped with what it calls. */
  CTS_ASSERT_EQ_U64(cut(&drop, BT(1, 2, 6, 7)), 2);
  /* Matches on the name shown, the mangled one or the one without parameters. */
  const cts_fold_config_t drop_new = {.drop_re = "^operator new$", .keep_allocator = true};
  CTS_ASSERT_EQ_U64(cut(&drop_new, BT(1, 2, 5)), 2);
  const cts_fold_config_t drop_mangled = {.drop_re = "^_Znwm$", .keep_allocator = true};
  CTS_ASSERT_EQ_U64(cut(&drop_mangled, BT(1, 2, 5)), 2);
  /* As pprof: frames before the program's first non-matching one are never dropped, and the
   * first match after it cuts. */
  const cts_fold_config_t drop_main = {.drop_re = "^main$", .keep_allocator = true};
  CTS_ASSERT_EQ_U64(cut(&drop_main, BT(1, 2, 5)), 3);
  const cts_fold_config_t drop_site = {.drop_re = "site_map|pool_alloc", .keep_allocator = true};
  CTS_ASSERT_EQ_U64(cut(&drop_site, BT(1, 2, 6, 7)), 1);
  /* Inlined: the outer locations of a frame stay (the frame is kept, shown shorter). */
  CTS_ASSERT_EQ_U64(cut(&drop, BT(9, 11, 7)), 2);
  /* --keep-frames exempts from both the list and --drop-frames. */
  const cts_fold_config_t keep = {.keep_re = "operator new"};
  CTS_ASSERT_EQ_U64(cut(&keep, BT(1, 2, 3, 4, 5)), 5);
  const cts_fold_config_t both = {.drop_re = "pool", .keep_re = "pool_alloc"};
  CTS_ASSERT_EQ_U64(cut(&both, BT(1, 6, 7)), 2);
  /* A bad expression is refused with regcomp's message. */
  const cts_frames_t inner = {.lookup = fake_lookup};
  cts_fold_t f;
  char err[256] = "";
  const cts_fold_config_t bad = {.drop_re = "("};
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &bad, err, sizeof err), -EINVAL);
  CTS_ASSERT(strstr(err, "--drop-frames '('") != NULL);
  /* After others compiled: nothing of them is left behind (the asan preset checks). */
  const cts_fold_config_t bad_keep = {.drop_re = "x", .keep_re = "a{2,1}"};
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &bad_keep, err, sizeof err), -EINVAL);
  CTS_ASSERT(strstr(err, "--keep-frames 'a{2,1}'") != NULL);
}

CTS_TEST(frames_shown) {
  const cts_frames_t inner = {.lookup = fake_lookup};
  cts_fold_t f;
  char err[256];
  const cts_fold_config_t def = {.drop_re = "^pool_alloc$"};
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &def, err, sizeof err), 0);
  const cts_frames_t fr = cts_fold_frames(&f);
  const cts_mt_location_t *locs;
  size_t n;
  CTS_ASSERT_EQ_INT(fr.lookup(fr.user_data, 5, &locs, &n), 0);
  CTS_ASSERT_EQ_U64(n, 1);
  CTS_ASSERT_STR_EQ(locs[0].defname, "operator new(unsigned long)");
  CTS_ASSERT_STR_EQ(cts_fold_mangled(&f, locs[0].defname), "_Znwm");
  CTS_ASSERT_STR_EQ(locs[0].filename, "libstdc++.so.6");
  /* push_back inlined into main: the site reads main. */
  CTS_ASSERT_EQ_INT(fr.lookup(fr.user_data, 10, &locs, &n), 0);
  CTS_ASSERT_EQ_U64(n, 1);
  CTS_ASSERT_STR_EQ(locs[0].defname, "main");
  CTS_ASSERT(cts_fold_mangled(&f, locs[0].defname) == NULL);
  /* A partial --drop-frames match keeps the outer locations. */
  CTS_ASSERT_EQ_INT(fr.lookup(fr.user_data, 11, &locs, &n), 0);
  CTS_ASSERT_EQ_U64(n, 2);
  CTS_ASSERT_STR_EQ(locs[1].defname, "helper");
  CTS_ASSERT_STR_EQ(cts_frame_innermost(&fr, 15)->defname, "example::main");
  CTS_ASSERT(fr.lookup(fr.user_data, 99, &locs, &n) != 0);
  cts_fold_fini(&f);
  /* --no-demangle: the same folds, names as in the trace. */
  const cts_fold_config_t raw = {.no_demangle = true};
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &raw, err, sizeof err), 0);
  const cts_frames_t fr2 = cts_fold_frames(&f);
  CTS_ASSERT_STR_EQ(cts_frame_innermost(&fr2, 5)->defname, "_Znwm");
  CTS_ASSERT(cts_fold_mangled(&f, "_Znwm") == NULL);
  CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 2, 3, 4, 5)), 2);
  cts_fold_fini(&f);
}

/* One fold cutting many stacks, as a trace's do: the memo in front of its table gives what
 * a fresh fold does, through collisions and with --drop-frames or without. */
CTS_TEST(fold_cut_memo) {
  const cts_frames_t inner = {.lookup = fake_lookup};
  const cts_fold_config_t def = {0}, drop = {.drop_re = "^helper$"};
  char err[256];
  cts_fold_t f;
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &def, err, sizeof err), 0);
  /* A program frame's leaf is memoised by its first cut: the next ones need no look-up. */
  CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 6)), 2);
  const cts_fold_memo_t *m = &f.memo[cts_fold_memo_slot(6)];
  CTS_ASSERT(m->index != 0 && m->code == 6);
  /* Codes the trace does not describe (never folded), 4 × the memo's size of them, each
   * called by the program (1) and calling malloc (7) or called by it. */
  for (int round = 0; round < 2; round++)
    for (uint64_t x = 1000; x < 1000 + 4 * CTS_FOLD_MEMO; x++) {
      CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, x, 7)), 2);
      CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 7, x)), 3);
      CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 2, 3, 4, 5)), 2);
      CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 6, 7)), 2);
      CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(7, 7)), 2);
    }
  CTS_ASSERT(!f.nomem);
  cts_fold_fini(&f);
  /* With --drop-frames every cut takes the general path: the same answers as fresh folds. */
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &drop, err, sizeof err), 0);
  for (int round = 0; round < 3; round++) {
    CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 11, 7)), cut(&drop, BT(1, 11, 7)));
    CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 2, 3, 4, 5)), cut(&drop, BT(1, 2, 3, 4, 5)));
    CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(1, 6, 7)), cut(&drop, BT(1, 6, 7)));
  }
  cts_fold_fini(&f);
}

/* The built-in fold list without regexec gives regexec's answers: on every name of the list
 * and every prefix, each cut short, lengthened and altered, and on strings drawn from the
 * expressions' own bytes. */
static void check_list_against_re(const regex_t *re, bool (*fn)(const char *), const char *s) {
  const bool want = regexec(re, s, 0, NULL, 0) == 0;
  if (fn(s) != want) CTS_FAIL("'%s': %d, regexec says %d", s, (int)fn(s), (int)want);
}

static void check_variants(const regex_t *re, bool (*fn)(const char *), const char *s) {
  char buf[160];
  const size_t len = strlen(s);
  check_list_against_re(re, fn, s);
  for (size_t cut = 0; cut < len; cut++) {
    snprintf(buf, sizeof buf, "%.*s", (int)cut, s);
    check_list_against_re(re, fn, buf);
  }
  static const char *const ends[] = {"x", "_n", "0", "[]", "::", "/", "(int)", " ", "\n"};
  for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
    snprintf(buf, sizeof buf, "%s%s", s, ends[i]);
    check_list_against_re(re, fn, buf);
    snprintf(buf, sizeof buf, "%s%s", ends[i], s);
    check_list_against_re(re, fn, buf);
  }
  for (size_t i = 0; i < len && len < sizeof buf; i++) {
    memcpy(buf, s, len + 1);
    buf[i] = buf[i] == 'a' ? 'b' : 'a';
    check_list_against_re(re, fn, buf);
  }
}

CTS_TEST(fold_list_is_its_expressions) {
  regex_t names, files;
  CTS_ASSERT_EQ_INT(regcomp(&names, CTS_FOLD_ALLOCATOR_RE, REG_EXTENDED | REG_NOSUB), 0);
  CTS_ASSERT_EQ_INT(regcomp(&files, CTS_FOLD_ALLOCATOR_FILES_RE, REG_EXTENDED | REG_NOSUB), 0);
  static const char *const name_cases[] = {
      "malloc",
      "calloc",
      "realloc",
      "reallocarray",
      "free",
      "memalign",
      "aligned_alloc",
      "posix_memalign",
      "valloc",
      "pvalloc",
      "strdup",
      "strndup",
      "__strdup",
      "__strndup",
      "__libc_malloc",
      "__libc_calloc",
      "__libc_realloc",
      "__libc_memalign",
      "__libc_free",
      "xmalloc",
      "xcalloc",
      "xrealloc",
      "xstrdup",
      "xstrndup",
      "xmemdup",
      "xfree",
      "g_malloc",
      "g_malloc_n",
      "g_malloc0",
      "g_malloc0_n",
      "g_realloc",
      "g_realloc_n",
      "g_try_malloc",
      "g_try_malloc_n",
      "g_try_malloc0",
      "g_try_malloc0_n",
      "g_try_realloc",
      "g_try_realloc_n",
      "g_try_strdup",
      "g_strdup",
      "g_strndup",
      "g_memdup",
      "g_memdup2",
      "g_memdup3",
      "__rust_alloc",
      "__rust_alloc_zeroed",
      "__rust_realloc",
      "__rust_dealloc",
      "__rdl_alloc",
      "__rdl_alloc_zeroed",
      "__rdl_realloc",
      "__rgl_alloc",
      "__rgl_alloc_zeroed",
      "__rgl_realloc",
      "__rxl_alloc",
      "operator new",
      "operator new[]",
      "operator new[",
      "operator delete",
      "std::vector<int>::push_back",
      "std::",
      "std:",
      "__gnu_cxx::new_allocator",
      "alloc::raw_vec::RawVec<T,A>::grow_one",
      "core::ptr",
      "<alloc::vec::Vec<T> as Clone>",
      "<core::x",
      "<std::y",
      "<stdx::",
      "stdx::",
      "_ZN3std2io5stdio6_printEv",
      "_Znwm",
      "main",
      "",
      "m",
      "JavaThread::run()",
      "app::std::x",
      " std::x",
      "/usr/include/c++/12/bits/stl_vector.h",
      "/usr/include/c++/v1/vector",
      "/usr/include/c++//x",
      "/usr/include/c++/12",
      "x/include/c++/a/include/c++/b/",
      "/include/c++/include/c++/1/",
      "/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/alloc/src/raw_vec.rs",
      "/rustc/0abc/library/core/x",
      "/rustc/0abc/library/std/",
      "/rustc//library/std/x",
      "/rustc/0abg/library/std/x",
      "/rustc/0abc/library/proc_macro/x",
      "x/rustc/0abc/library/std/x",
      "app.cpp",
      "",
      "/"};
  /* Every case against both expressions, each through its variants. */
  for (size_t i = 0; i < sizeof name_cases / sizeof name_cases[0]; i++) {
    check_variants(&names, cts_fold_allocator_name, name_cases[i]);
    check_variants(&files, cts_fold_allocator_file, name_cases[i]);
  }
  /* Strings of up to 14 bytes drawn from the bytes the expressions name (xorshift, fixed
   * seed), half of them starting with a name of the list. */
  static const char alphabet[] = "_mcarlofeistdxgpvnwu:<>[]/+012 bhkyz";
  uint64_t x = 0x9e3779b97f4a7c15ull;
  char buf[64];
  for (int i = 0; i < 200000; i++) {
    size_t len = 0;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (x & 1) {
      const char *start = name_cases[(x >> 1) % (sizeof name_cases / sizeof name_cases[0])];
      len = strlen(start) < 40 ? strlen(start) : 40;
      memcpy(buf, start, len);
    }
    const size_t extra = (x >> 20) % 15;
    for (size_t k = 0; k < extra; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      buf[len++] = alphabet[x % (sizeof alphabet - 1)];
    }
    buf[len] = 0;
    check_list_against_re(&names, cts_fold_allocator_name, buf);
    check_list_against_re(&files, cts_fold_allocator_file, buf);
  }
  regfree(&names);
  regfree(&files);
}

/* Many distinct frames (a JVM's or node's trace has thousands): the built-in list costs no
 * regexec call (glibc's costs ~4 400 instructions whatever the name; main took two or three
 * a frame); the user's expressions still do. */
#ifdef COUNT_REGEXEC
static int many_lookup(void *ud, uint64_t code, const cts_mt_location_t **locs, size_t *n) {
  static char name[64];
  static cts_mt_location_t loc;
  (void)ud;
  /* Distinct program functions: plain C names (the fold also looks at their file) and C++
   * symbols that demangle (app::Widget::methodNNNN()). */
  if (code % 2)
    snprintf(name, sizeof name, "handle_request_%llu", (unsigned long long)code);
  else
    snprintf(name, sizeof name, "_ZN3app6Widget10method%04lluEv",
             (unsigned long long)(code % 10000));
  loc = (cts_mt_location_t){.line = 1, .filename = "app.c", .defname = name};
  *locs = &loc;
  *n = 1;
  return 0;
}
#endif

CTS_TEST(fold_list_without_regexec) {
#ifndef COUNT_REGEXEC
  CTS_SKIP("regexec is counted in gcc builds without sanitizers");
#else
  const cts_frames_t inner = {.lookup = many_lookup};
  const cts_fold_config_t def = {0}, drop = {.drop_re = "^never$"};
  char err[256];
  cts_fold_t f;
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &def, err, sizeof err), 0);
  const unsigned long before = regexec_calls;
  for (uint64_t code = 1; code <= 4000; code++) CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(code)), 1);
  const unsigned long calls = regexec_calls - before;
  CTS_ASSERT(!f.nomem);
  cts_fold_fini(&f);
  fprintf(stderr, "  4000 distinct frames classified with %lu regexec calls\n", calls);
  CTS_ASSERT_EQ_U64(calls, 0);
  /* The user's expression runs on the names (shown, mangled) of each frame once. */
  CTS_ASSERT_EQ_INT(cts_fold_init(&f, &inner, &drop, err, sizeof err), 0);
  const unsigned long before_drop = regexec_calls;
  for (uint64_t code = 1; code <= 100; code++) CTS_ASSERT_EQ_U64(cts_fold_cut(&f, BT(code)), 1);
  CTS_ASSERT(regexec_calls - before_drop >= 200);
  cts_fold_fini(&f);
#endif
}

int main(int argc, char **argv) {
  return cts_test_main(argc, argv);
}
