/* SPDX-License-Identifier: MIT */
/* The in-repo test harness: register tests with CTS_TEST, check with CTS_ASSERT_* (which
 * print both sides and end the test), and let CTS_TEST_MAIN run them all, or the ones
 * named on the command line, closing with "N passed, N failed, N skipped". */
#ifndef CTS_TEST_H
#define CTS_TEST_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef void (*cts_test_fn)(void);

typedef struct cts_test_state {
  const char *names[256];
  cts_test_fn fns[256];
  int count;
  bool overflow; /* more tests than names[] holds: main fails rather than drop one */
  bool failed, skipped;
} cts_test_state_t;

static cts_test_state_t cts_test_state;

static inline void cts_test_register(const char *name, cts_test_fn fn) {
  if (cts_test_state.count < 256) {
    cts_test_state.names[cts_test_state.count] = name;
    cts_test_state.fns[cts_test_state.count++] = fn;
  } else {
    cts_test_state.overflow = true;
  }
}

#define CTS_TEST(name)                                                 \
  static void name(void);                                              \
  __attribute__((constructor)) static void cts_test_reg_##name(void) { \
    cts_test_register(#name, name);                                    \
  }                                                                    \
  static void name(void)

static inline void cts_test_fail_at(const char *file, int line) {
  cts_test_state.failed = true;
  fprintf(stderr, "  FAILED at %s:%d: ", file, line);
}

#define CTS_FAIL(...)                     \
  do {                                    \
    cts_test_fail_at(__FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);         \
    fputc('\n', stderr);                  \
    return;                               \
  } while (0)

#define CTS_ASSERT(cond)                                     \
  do {                                                       \
    if (!(cond)) CTS_FAIL("assertion '%s' is false", #cond); \
  } while (0)

#define CTS_ASSERT_MSG(cond, ...)       \
  do {                                  \
    if (!(cond)) CTS_FAIL(__VA_ARGS__); \
  } while (0)

#define CTS_ASSERT_EQ_U64(a, b)                                                                  \
  do {                                                                                           \
    const uint64_t cts_a_ = (uint64_t)(a), cts_b_ = (uint64_t)(b);                               \
    if (cts_a_ != cts_b_) CTS_FAIL("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b, cts_a_, cts_b_); \
  } while (0)

#define CTS_ASSERT_EQ_INT(a, b)                                                       \
  do {                                                                                \
    const long long cts_a_ = (long long)(a), cts_b_ = (long long)(b);                 \
    if (cts_a_ != cts_b_) CTS_FAIL("%s == %s: %lld != %lld", #a, #b, cts_a_, cts_b_); \
  } while (0)

#define CTS_ASSERT_STR_EQ(a, b)                                                  \
  do {                                                                           \
    const char *cts_a_ = (a), *cts_b_ = (b);                                     \
    if (!cts_a_ || !cts_b_ || strcmp(cts_a_, cts_b_) != 0)                       \
      CTS_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, cts_a_ ? cts_a_ : "(null)", \
               cts_b_ ? cts_b_ : "(null)");                                      \
  } while (0)

#define CTS_ASSERT_MEM_EQ(a, b, n)                                                                \
  do {                                                                                            \
    const unsigned char *cts_a_ = (const unsigned char *)(a),                                     \
                        *cts_b_ = (const unsigned char *)(b);                                     \
    const size_t cts_n_ = (n);                                                                    \
    for (size_t cts_i_ = 0; cts_i_ < cts_n_; cts_i_++)                                            \
      if (cts_a_[cts_i_] != cts_b_[cts_i_])                                                       \
        CTS_FAIL("%s and %s differ at byte %zu of %zu: 0x%02x != 0x%02x", #a, #b, cts_i_, cts_n_, \
                 cts_a_[cts_i_], cts_b_[cts_i_]);                                                 \
  } while (0)

/* Ends the test as skipped, with the reason on stderr. */
#define CTS_SKIP(...)               \
  do {                              \
    cts_test_state.skipped = true;  \
    fprintf(stderr, "  SKIPPED: "); \
    fprintf(stderr, __VA_ARGS__);   \
    fputc('\n', stderr);            \
    return;                         \
  } while (0)

/* The golden corpus directory (../shared/corpus), or NULL when it is absent: tests then
 * skip, except under CI=true where its absence is a failure. */
static inline const char *cts_test_corpus_dir(void) {
  const char *dir = getenv("CTS_CORPUS_DIR");
#ifdef CTS_TEST_CORPUS_DIR
  if (!dir) dir = CTS_TEST_CORPUS_DIR;
#endif
  struct stat st;
  if (dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return dir;
  return NULL;
}

#define CTS_REQUIRE_CORPUS(var)                                                         \
  const char *var = cts_test_corpus_dir();                                              \
  do {                                                                                  \
    if (!var) {                                                                         \
      const char *ci_ = getenv("CI");                                                   \
      if (ci_ && strcmp(ci_, "true") == 0)                                              \
        CTS_FAIL("the golden corpus (../shared/corpus) is missing, and CI=true");       \
      CTS_SKIP("the golden corpus (../shared/corpus) is not present in this checkout"); \
    }                                                                                   \
  } while (0)

/* Directory of the project's own test data (tests/data). */
static inline const char *cts_test_data_dir(void) {
  const char *dir = getenv("CTS_TEST_DATA_DIR");
#ifdef CTS_TEST_DATA_DIR
  if (!dir) dir = CTS_TEST_DATA_DIR;
#endif
  return dir ? dir : "tests/data";
}

static inline int cts_test_main(int argc, char **argv) {
  int passed = 0, failed = 0, skipped = 0;
  if (cts_test_state.overflow) {
    fprintf(stderr, "more than 256 tests in one executable: split it\n");
    return 1;
  }
  /* A name that matches no test is an error: CTest registers tests by name, and a
   * misspelt or removed one would otherwise pass with nothing run. */
  for (int a = 1; a < argc; a++) {
    bool known = false;
    for (int i = 0; i < cts_test_state.count && !known; i++)
      known = strcmp(argv[a], cts_test_state.names[i]) == 0;
    if (!known) {
      fprintf(stderr, "no test named '%s' in %s\n", argv[a], argv[0]);
      return 2;
    }
  }
  for (int i = 0; i < cts_test_state.count; i++) {
    bool selected = argc < 2;
    for (int a = 1; a < argc; a++)
      if (strcmp(argv[a], cts_test_state.names[i]) == 0) selected = true;
    if (!selected) continue;
    cts_test_state.failed = cts_test_state.skipped = false;
    fprintf(stderr, "[ RUN  ] %s\n", cts_test_state.names[i]);
    cts_test_state.fns[i]();
    const char *verdict = cts_test_state.failed ? "FAIL" : cts_test_state.skipped ? "SKIP" : " OK ";
    fprintf(stderr, "[ %s ] %s\n", verdict, cts_test_state.names[i]);
    if (cts_test_state.failed)
      failed++;
    else if (cts_test_state.skipped)
      skipped++;
    else
      passed++;
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  /* CTest: 77 = skipped (SKIP_RETURN_CODE) when nothing ran and something skipped. */
  if (failed) return 1;
  if (!passed && skipped) return 77;
  return 0;
}

#define CTS_TEST_MAIN()               \
  int main(int argc, char **argv) {   \
    return cts_test_main(argc, argv); \
  }

#endif /* CTS_TEST_H */
