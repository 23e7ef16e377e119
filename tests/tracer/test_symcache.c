/* SPDX-License-Identifier: MIT */
/* The persistent location cache (src/tracer/symcache.c), white-box: its file is untrusted
 * input, so every corruption of a written file must read as "not cached", never as other
 * locations or a crash; it must follow no symlink, notice a rebuilt module, stay bounded. */
#define _GNU_SOURCE
#include "../../src/tracer/symcache.c"

#include <sys/time.h>

#include "../test.h"

static const unsigned char ID[20] = {0xde, 0xad, 0xbe, 0xef, 1,  2,  3,  4,  5,  6,
                                     7,    8,    9,    10,   11, 12, 13, 14, 15, 16};

typedef struct fixture {
  char dir[64];    /* the cache directory */
  char module[96]; /* a file standing for the module */
} fixture_t;

static bool fixture_make(fixture_t *f) {
  strcpy(f->dir, "/tmp/cts-symcache-XXXXXX");
  if (!mkdtemp(f->dir)) return false;
  snprintf(f->module, sizeof f->module, "%s/libmodule.so", f->dir);
  FILE *const m = fopen(f->module, "w");
  if (!m) return false;
  fputs("not really an ELF file", m);
  return fclose(m) == 0;
}

static void fixture_drop(fixture_t *f) {
  DIR *const d = opendir(f->dir);
  if (d) {
    for (struct dirent *e; (e = readdir(d));)
      if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
  }
  rmdir(f->dir);
}

static const cts_mt_location_t LOCS[2] = {
    {12, 3, 3, "src/outer.c", "outer_function"},
    {345, 0, 0, "include/inner.h", "inlined_helper"},
};

/* Writes a cache with two entries: offset 0x1000 (both locations), 0x2000 (the second). */
static void write_two(const fixture_t *f) {
  cts__symcache_t *const c = cts__symcache_open(f->dir, f->module, ID, sizeof ID);
  cts__symcache_add(c, 0x1000, LOCS, 2);
  cts__symcache_add(c, 0x2000, LOCS + 1, 1);
  cts__symcache_close(c);
}

/* Whether the cache of f's module has exactly what write_two wrote (true), or nothing for
 * either offset (false); fails the test on anything else. */
static int read_two(const fixture_t *f) {
  cts__symcache_t *const c = cts__symcache_open(f->dir, f->module, ID, sizeof ID);
  if (!c) return -1;
  cts_mt_location_t out[4];
  size_t n = 99;
  int result = -1;
  const bool a = cts__symcache_find(c, 0x1000, out, 4, &n);
  if (a && n == 2 && out[0].line == 12 && out[0].start_char == 3 && out[0].end_char == 3 &&
      !strcmp(out[0].filename, "src/outer.c") && !strcmp(out[0].defname, "outer_function") &&
      out[1].line == 345 && !strcmp(out[1].filename, "include/inner.h") &&
      !strcmp(out[1].defname, "inlined_helper")) {
    const bool b = cts__symcache_find(c, 0x2000, out, 4, &n);
    result = b && n == 1 && out[0].line == 345 && !strcmp(out[0].defname, "inlined_helper");
  } else if (!a && !cts__symcache_find(c, 0x2000, out, 4, &n)) {
    result = 0;
  }
  cts__symcache_close(c);
  return result;
}

static char *cache_file(const fixture_t *f) {
  cts__symcache_t *const c = cts__symcache_open(f->dir, f->module, ID, sizeof ID);
  char *const file = c ? strdup(c->file) : NULL;
  cts__symcache_close(c);
  return file;
}

static unsigned char *slurp_bytes(const char *path, size_t *len) {
  FILE *const in = fopen(path, "rb");
  if (!in) return NULL;
  unsigned char *buf = malloc(1 << 16);
  *len = buf ? fread(buf, 1, 1 << 16, in) : 0;
  fclose(in);
  return buf;
}

static void spit_bytes(const char *path, const unsigned char *p, size_t len) {
  FILE *const out = fopen(path, "wb");
  if (!out) return;
  fwrite(p, 1, len, out);
  fclose(out);
}

CTS_TEST(written_locations_read_back_in_a_later_session) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  CTS_ASSERT_EQ_INT(read_two(&f), 0); /* cold */
  write_two(&f);
  const int warm = read_two(&f);
  /* A later session adds an entry; the earlier ones stay. */
  cts__symcache_t *const c = cts__symcache_open(f.dir, f.module, ID, sizeof ID);
  cts__symcache_add(c, 0x3000, LOCS, 1);
  cts__symcache_close(c);
  const int after_add = read_two(&f);
  cts__symcache_t *const d = cts__symcache_open(f.dir, f.module, ID, sizeof ID);
  cts_mt_location_t out[2];
  size_t n = 0;
  const bool third = cts__symcache_find(d, 0x3000, out, 2, &n);
  /* Fewer wanted than cached: the outermost ones. */
  const bool truncated = cts__symcache_find(d, 0x1000, out, 1, &n) && n == 1 && out[0].line == 12;
  cts__symcache_close(d);
  fixture_drop(&f);
  CTS_ASSERT_EQ_INT(warm, 1);
  CTS_ASSERT_EQ_INT(after_add, 1);
  CTS_ASSERT(third && n == 1);
  CTS_ASSERT(truncated);
}

CTS_TEST(every_corrupted_or_truncated_byte_reads_as_not_cached) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  write_two(&f);
  char *const file = cache_file(&f);
  size_t len = 0;
  unsigned char *const good = file ? slurp_bytes(file, &len) : NULL;
  int bad = -1;
  size_t bad_at = 0;
  for (size_t i = 0; good && i < len && bad < 0; i++) {
    for (int bit = 0; bit < 8 && bad < 0; bit += 3) {
      good[i] ^= (unsigned char)(1u << bit);
      spit_bytes(file, good, len);
      good[i] ^= (unsigned char)(1u << bit);
      if (read_two(&f) != 0) bad = (int)i, bad_at = i;
    }
    spit_bytes(file, good, i); /* truncated after i bytes */
    if (read_two(&f) != 0) bad = (int)i, bad_at = i;
  }
  free(good);
  free(file);
  fixture_drop(&f);
  CTS_ASSERT(len > HEADER_SIZE);
  CTS_ASSERT_MSG(bad < 0, "a change at byte %zu was read as cached", bad_at);
}

/* A file with a right checksum but lying lengths (what a hostile user could write). */
CTS_TEST(lying_lengths_with_a_valid_checksum_are_refused) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  write_two(&f);
  char *const file = cache_file(&f);
  size_t len = 0;
  unsigned char *const p = file ? slurp_bytes(file, &len) : NULL;
  CTS_ASSERT(p && len > HEADER_SIZE);
  const size_t records = HEADER_SIZE + strlen(f.module) + sizeof ID;
  const uint32_t lies[] = {0, 1, 3, 1000, 0x7fffffffu, 0xffffffffu};
  int accepted = 0;
  for (size_t k = 0; k < sizeof lies / sizeof lies[0]; k++) {
    const size_t fields[] = {88, records + 8, records + 12 + 12, records + 12 + 16 + 12};
    for (size_t j = 0; j < sizeof fields / sizeof fields[0]; j++) {
      unsigned char *const q = malloc(len);
      memcpy(q, p, len);
      if (cts_ld_le32(q + fields[j]) == lies[k]) {
        free(q);
        continue;
      }
      cts_st_le32(q + fields[j], lies[k]);
      cts_st_le64(q + 8, checksum(q + 16, len - 16));
      spit_bytes(file, q, len);
      free(q);
      if (read_two(&f) != 0) accepted++;
    }
  }
  free(p);
  free(file);
  fixture_drop(&f);
  CTS_ASSERT_EQ_INT(accepted, 0);
}

CTS_TEST(a_rebuilt_module_or_another_path_misses) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  write_two(&f);
  const int before = read_two(&f);
  /* The module file changes (a new build at the same path, same build-id even). */
  struct timeval times[2] = {{1000000000, 0}, {1000000000, 0}};
  utimes(f.module, times);
  const int rebuilt = read_two(&f);
  write_two(&f);
  /* Another file with the same build-id: its own cache file. */
  char other[128];
  snprintf(other, sizeof other, "%s/libother.so", f.dir);
  const bool linked = link(f.module, other) == 0;
  cts__symcache_t *const c = cts__symcache_open(f.dir, other, ID, sizeof ID);
  cts_mt_location_t out[2];
  size_t n;
  const bool other_hit = cts__symcache_find(c, 0x1000, out, 2, &n);
  cts__symcache_close(c);
  unlink(other);
  fixture_drop(&f);
  CTS_ASSERT_EQ_INT(before, 1);
  CTS_ASSERT_EQ_INT(rebuilt, 0);
  CTS_ASSERT(linked && !other_hit);
}

CTS_TEST(a_symlinked_cache_file_is_not_followed) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  write_two(&f);
  char *const file = cache_file(&f);
  char moved[160];
  snprintf(moved, sizeof moved, "%s/elsewhere", f.dir);
  const bool ok = file && rename(file, moved) == 0 && symlink(moved, file) == 0;
  const int through_link = read_two(&f);
  /* Writing replaces the link (rename), never writes through it. */
  cts__symcache_t *const c = cts__symcache_open(f.dir, f.module, ID, sizeof ID);
  cts__symcache_add(c, 0x5000, LOCS, 1);
  cts__symcache_close(c);
  struct stat st;
  const bool replaced = file && lstat(file, &st) == 0 && S_ISREG(st.st_mode);
  size_t len = 0;
  unsigned char *const target = slurp_bytes(moved, &len);
  const bool target_kept = target && len > 0;
  free(target);
  free(file);
  fixture_drop(&f);
  CTS_ASSERT(ok);
  CTS_ASSERT_EQ_INT(through_link, 0);
  CTS_ASSERT(replaced && target_kept);
}

CTS_TEST(no_cache_without_build_id_file_or_directory) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  cts__symcache_t *const none[] = {
      cts__symcache_open(NULL, f.module, ID, sizeof ID),
      cts__symcache_open(f.dir, f.module, ID, 0),
      cts__symcache_open(f.dir, "[vdso]", ID, sizeof ID),
      cts__symcache_open(f.dir, "/nonexistent/lib.so", ID, sizeof ID),
  };
  fixture_drop(&f);
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) CTS_ASSERT(none[i] == NULL);
}

CTS_TEST(the_directory_comes_from_the_environment) {
  setenv("CTFSCOPE_CACHE", "off", 1);
  char *const off = cts__symcache_dir();
  setenv("CTFSCOPE_CACHE", "/some/where", 1);
  char *const given = cts__symcache_dir();
  unsetenv("CTFSCOPE_CACHE");
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  char *const xdg = cts__symcache_dir();
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  char *const home = cts__symcache_dir();
  CTS_ASSERT(off == NULL);
  CTS_ASSERT_STR_EQ(given, "/some/where");
  CTS_ASSERT_STR_EQ(xdg, "/x/cache/ctfscope");
  CTS_ASSERT_STR_EQ(home, "/home/someone/.cache/ctfscope");
  free(given);
  free(xdg);
  free(home);
}

/* The directory stays under its bound: the least recently written files go first. Sparse
 * files stand for big caches. */
CTS_TEST(the_directory_is_trimmed_oldest_first) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  const char *const names[3] = {"aaaa0000aaaa0000-0000000000000001",
                                "bbbb0000bbbb0000-0000000000000002",
                                "cccc0000cccc0000-0000000000000003"};
  for (int i = 0; i < 3; i++) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", f.dir, names[i]);
    const int fd = open(path, O_CREAT | O_WRONLY, 0600);
    if (fd >= 0) {
      if (ftruncate(fd, CTS__SYMCACHE_DIR_MAX / 3 + 1) != 0) perror("ftruncate");
      close(fd);
    }
    struct timeval times[2] = {{1000000 + i, 0}, {1000000 + i, 0}};
    utimes(path, times);
  }
  char stale[160], other[160];
  snprintf(stale, sizeof stale, "%s/%s.tmp.AbCdEf", f.dir, names[0]);
  snprintf(other, sizeof other, "%s/not-a-cache-file", f.dir);
  spit_bytes(stale, (const unsigned char *)"x", 1);
  spit_bytes(other, (const unsigned char *)"x", 1);
  struct timeval old[2] = {{1000000, 0}, {1000000, 0}};
  utimes(stale, old);
  write_two(&f); /* the write that trims */
  bool present[3];
  for (int i = 0; i < 3; i++) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", f.dir, names[i]);
    present[i] = access(path, F_OK) == 0;
  }
  const bool stale_gone = access(stale, F_OK) != 0, other_kept = access(other, F_OK) == 0;
  const int fresh = read_two(&f);
  fixture_drop(&f);
  CTS_ASSERT(!present[0] && present[1] && present[2]);
  CTS_ASSERT(stale_gone && other_kept);
  CTS_ASSERT_EQ_INT(fresh, 1);
}

/* Two sessions of one module at once: the last to finish wins, the file stays valid, no
 * temporary file is left. */
CTS_TEST(concurrent_writers_leave_one_valid_file) {
  fixture_t f;
  CTS_ASSERT(fixture_make(&f));
  cts__symcache_t *const a = cts__symcache_open(f.dir, f.module, ID, sizeof ID);
  cts__symcache_t *const b = cts__symcache_open(f.dir, f.module, ID, sizeof ID);
  cts__symcache_add(a, 0x1000, LOCS, 2);
  cts__symcache_add(b, 0x1000, LOCS, 2);
  cts__symcache_add(b, 0x2000, LOCS + 1, 1);
  cts__symcache_close(a);
  cts__symcache_close(b);
  const int result = read_two(&f);
  int entries = 0;
  DIR *const d = opendir(f.dir);
  for (struct dirent *e; d && (e = readdir(d));) entries += e->d_name[0] != '.';
  if (d) closedir(d);
  fixture_drop(&f);
  CTS_ASSERT_EQ_INT(result, 1);
  CTS_ASSERT_EQ_INT(entries, 2); /* the module and its cache file */
}

CTS_TEST_MAIN()
