/* SPDX-License-Identifier: MIT */
/* Demangling (analysis/names.h) and the fold of allocator frames (analysis/fold.h), on
 * symbols as real C++ and Rust programs have them and on hostile ones. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/analysis/fold.h"
#include "../../src/analysis/names.h"
#include "../test.h"

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

int main(int argc, char **argv) {
  return cts_test_main(argc, argv);
}
