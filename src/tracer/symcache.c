/* SPDX-License-Identifier: MIT */
/* The persistent per-module location cache: see symcache.h.
 *
 * File (little-endian):
 *   0  magic "ctssym1\n"
 *   8  u64 checksum of every byte from offset 16 to the end
 *  16  the module file's identity: u64 device, inode, size, mtime (ns)
 *  48  its separate debug file's identity, the same four (zeros: there was none)
 *  80  u32 path length, u32 build-id length, u32 record count, u32 zero
 *  96  the path, then the build-id (no terminators)
 *      records: u64 offset, u32 location count, then per location u32 line, start_char,
 *      end_char, u32 file name length, the name and a NUL, u32 function name length, the
 *      name and a NUL (lengths count the NUL) */
#define _GNU_SOURCE
#include "symcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/hash.h"

#define HEADER_SIZE   96u
#define BUILD_ID_MAX  64u
#define LOCATIONS_MAX 256u /* per record: more than any inlining chain */
#define STRING_MAX    4096u
#define STALE_TEMP_NS (3600ull * 1000000000ull) /* a writer killed mid-write left it */
#define POS_ADDED     (UINT64_C(1) << 63)       /* index positions in the added buffer */
static const char MAGIC[8] = {'c', 't', 's', 's', 'y', 'm', '1', '\n'};

typedef struct ident {
  uint64_t dev, ino, size, mtime_ns;
} ident_t;

struct cts__symcache {
  char *file; /* the cache file's path */
  char *dir;
  char *path; /* the module's */
  unsigned char build_id[BUILD_ID_MAX];
  size_t build_id_len;
  ident_t module_id, debug_id;
  unsigned char *old; /* the file as read, if valid */
  size_t old_len, old_count;
  unsigned char *added; /* records added this session, in the file's encoding */
  size_t added_len, added_cap, added_count;
  size_t saved_count; /* added_count at the last save */
  uint64_t *keys;     /* offset + 1 (0: free slot) -> position of its record */
  uint64_t *pos;
  size_t cap, count;
};

/* ---- small helpers ------------------------------------------------------------------- */

static uint64_t checksum(const unsigned char *p, size_t len) {
  uint64_t h = len;
  size_t i = 0;
  for (; i + 8u <= len; i += 8u) h = cts_hash_combine(h, cts_ld_le64(p + i));
  uint64_t tail = 0;
  for (size_t k = 0; i < len; i++, k++) tail |= (uint64_t)p[i] << (8u * k);
  return cts_hash_combine(h, tail);
}

static ident_t ident_of(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return (ident_t){0, 0, 0, 0};
  return (ident_t){(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
                   (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec};
}

static void put_ident(unsigned char *p, ident_t id) {
  cts_st_le64(p, id.dev);
  cts_st_le64(p + 8, id.ino);
  cts_st_le64(p + 16, id.size);
  cts_st_le64(p + 24, id.mtime_ns);
}

static bool same_ident(const unsigned char *p, ident_t id) {
  return cts_ld_le64(p) == id.dev && cts_ld_le64(p + 8) == id.ino &&
         cts_ld_le64(p + 16) == id.size && cts_ld_le64(p + 24) == id.mtime_ns;
}

static void hex(char *out, const unsigned char *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15u];
  }
  out[2 * n] = '\0';
}

char *cts__symcache_dir(void) {
  const char *const v = secure_getenv("CTFSCOPE_CACHE");
  if (v && (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no"))) return NULL;
  if (v && v[0] == '/') return strdup(v);
  char *dir = NULL;
  const char *const xdg = secure_getenv("XDG_CACHE_HOME");
  const char *const home = secure_getenv("HOME");
  int r = -1;
  if (xdg && xdg[0] == '/')
    r = asprintf(&dir, "%s/ctfscope", xdg);
  else if (home && home[0] == '/')
    r = asprintf(&dir, "%s/.cache/ctfscope", home);
  return r < 0 ? NULL : dir;
}

/* ---- records ------------------------------------------------------------------------- */

/* The record at p[pos, len): its offset, and up to `max` locations into `out` (NULL:
 * only checked); the position after it, or 0 if it does not fit or is malformed. */
static size_t parse_record(const unsigned char *p, size_t len, size_t pos, uint64_t *offset,
                           cts_mt_location_t *out, size_t max, size_t *n) {
  if (len - pos < 12u) return 0;
  *offset = cts_ld_le64(p + pos);
  const uint32_t count = cts_ld_le32(p + pos + 8);
  pos += 12u;
  if (count > LOCATIONS_MAX) return 0;
  for (uint32_t i = 0; i < count; i++) {
    if (len - pos < 16u) return 0;
    cts_mt_location_t loc = {cts_ld_le32(p + pos), cts_ld_le32(p + pos + 4),
                             cts_ld_le32(p + pos + 8), NULL, NULL};
    pos += 12u;
    for (int s = 0; s < 2; s++) {
      if (len - pos < 4u) return 0;
      const uint32_t sl = cts_ld_le32(p + pos);
      pos += 4u;
      if (sl == 0 || sl > STRING_MAX || sl > len - pos || p[pos + sl - 1u] != '\0') return 0;
      if (s == 0)
        loc.filename = (const char *)p + pos;
      else
        loc.defname = (const char *)p + pos;
      pos += sl;
    }
    if (out && i < max) out[i] = loc;
  }
  if (n) *n = count < max ? count : max;
  return pos;
}

static bool index_put(cts__symcache_t *c, uint64_t offset, uint64_t pos) {
  if ((c->count + 1u) * 2u > c->cap) {
    const size_t cap = c->cap ? c->cap * 2u : 256u;
    uint64_t *const keys = calloc(cap, sizeof *keys), *const poss = calloc(cap, sizeof *poss);
    if (!keys || !poss) {
      free(keys);
      free(poss);
      return false;
    }
    for (size_t i = 0; i < c->cap; i++) {
      if (!c->keys[i]) continue;
      size_t j = (size_t)cts_mix64(c->keys[i]) & (cap - 1u);
      while (keys[j]) j = (j + 1u) & (cap - 1u);
      keys[j] = c->keys[i];
      poss[j] = c->pos[i];
    }
    free(c->keys);
    free(c->pos);
    c->keys = keys;
    c->pos = poss;
    c->cap = cap;
  }
  const uint64_t key = offset + 1u;
  size_t j = (size_t)cts_mix64(key) & (c->cap - 1u);
  while (c->keys[j] && c->keys[j] != key) j = (j + 1u) & (c->cap - 1u);
  if (c->keys[j]) return false; /* a duplicate: the first one stands */
  c->keys[j] = key;
  c->pos[j] = pos;
  c->count++;
  return true;
}

static const uint64_t *index_find(const cts__symcache_t *c, uint64_t offset) {
  if (!c->cap) return NULL;
  const uint64_t key = offset + 1u;
  size_t j = (size_t)cts_mix64(key) & (c->cap - 1u);
  while (c->keys[j]) {
    if (c->keys[j] == key) return &c->pos[j];
    j = (j + 1u) & (c->cap - 1u);
  }
  return NULL;
}

/* ---- reading ------------------------------------------------------------------------- */

static unsigned char *read_file(const char *file, size_t *len) {
  const int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return NULL;
  struct stat st;
  unsigned char *buf = NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      st.st_size >= (off_t)HEADER_SIZE && st.st_size <= (off_t)CTS__SYMCACHE_FILE_MAX &&
      (buf = malloc((size_t)st.st_size))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      const ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (got != (size_t)st.st_size) {
      free(buf);
      buf = NULL;
    }
    *len = got;
  }
  close(fd);
  return buf;
}

/* Takes the file's records if the file is valid and made from this module. */
static void load(cts__symcache_t *c) {
  size_t len = 0;
  unsigned char *const p = read_file(c->file, &len);
  if (!p) return;
  const size_t path_len = strlen(c->path);
  bool ok = memcmp(p, MAGIC, sizeof MAGIC) == 0 &&
            cts_ld_le64(p + 8) == checksum(p + 16, len - 16) && same_ident(p + 16, c->module_id) &&
            same_ident(p + 48, c->debug_id) && cts_ld_le32(p + 80) == path_len &&
            cts_ld_le32(p + 84) == c->build_id_len && cts_ld_le32(p + 92) == 0 &&
            len - HEADER_SIZE >= path_len + c->build_id_len &&
            memcmp(p + HEADER_SIZE, c->path, path_len) == 0 &&
            memcmp(p + HEADER_SIZE + path_len, c->build_id, c->build_id_len) == 0;
  const uint32_t count = ok ? cts_ld_le32(p + 88) : 0;
  size_t pos = HEADER_SIZE + path_len + c->build_id_len;
  for (uint32_t i = 0; ok && i < count; i++) {
    uint64_t offset;
    const size_t next = parse_record(p, len, pos, &offset, NULL, 0, NULL);
    ok = next != 0 && index_put(c, offset, pos);
    pos = next;
  }
  if (!ok || pos != len) { /* anything wrong: start afresh */
    free(p);
    free(c->keys);
    free(c->pos);
    c->keys = c->pos = NULL;
    c->cap = c->count = 0;
    return;
  }
  c->old = p;
  c->old_len = len;
  c->old_count = count;
}

cts__symcache_t *cts__symcache_open(const char *dir, const char *path, const void *build_id,
                                    size_t build_id_len) {
  if (!dir || !path || path[0] != '/' || !build_id || build_id_len == 0 ||
      build_id_len > BUILD_ID_MAX || strlen(path) > STRING_MAX)
    return NULL;
  const ident_t module_id = ident_of(path);
  if (!module_id.ino) return NULL;
  cts__symcache_t *const c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->module_id = module_id;
  memcpy(c->build_id, build_id, build_id_len);
  c->build_id_len = build_id_len;
  char id_hex[2 * BUILD_ID_MAX + 1];
  hex(id_hex, c->build_id, build_id_len);
  /* Where libdw looks for the separate debug file (dwfl_build_id_find_debuginfo). */
  char debug_path[sizeof "/usr/lib/debug/.build-id//.debug" + sizeof id_hex];
  snprintf(debug_path, sizeof debug_path, "/usr/lib/debug/.build-id/%.2s/%s.debug", id_hex,
           id_hex + 2);
  c->debug_id = build_id_len > 1 ? ident_of(debug_path) : (ident_t){0, 0, 0, 0};
  c->dir = strdup(dir);
  c->path = strdup(path);
  const uint64_t path_hash = checksum((const unsigned char *)path, strlen(path));
  if (!c->dir || !c->path ||
      asprintf(&c->file, "%s/%s-%016llx", dir, id_hex, (unsigned long long)path_hash) < 0) {
    c->file = NULL;
    cts__symcache_close(c);
    return NULL;
  }
  load(c);
  return c;
}

bool cts__symcache_find(cts__symcache_t *c, uint64_t offset, cts_mt_location_t *out, size_t max,
                        size_t *n) {
  const uint64_t *const at = c ? index_find(c, offset) : NULL;
  if (!at) return false;
  const bool added = (*at & POS_ADDED) != 0;
  const unsigned char *const p = added ? c->added : c->old;
  const size_t len = added ? c->added_len : c->old_len;
  uint64_t got;
  /* Validated when read (or written here): parses again. */
  return parse_record(p, len, (size_t)(*at & ~POS_ADDED), &got, out, max, n) != 0;
}

static bool reserve(cts__symcache_t *c, size_t more) {
  if (c->added_cap - c->added_len >= more) return true;
  size_t cap = c->added_cap ? c->added_cap : 4096u;
  while (cap - c->added_len < more) cap *= 2u;
  unsigned char *const p = realloc(c->added, cap);
  if (!p) return false;
  c->added = p;
  c->added_cap = cap;
  return true;
}

void cts__symcache_add(cts__symcache_t *c, uint64_t offset, const cts_mt_location_t *locs,
                       size_t n) {
  if (!c || n > LOCATIONS_MAX || index_find(c, offset)) return;
  size_t need = 12u;
  for (size_t i = 0; i < n; i++) {
    const size_t fl = strlen(locs[i].filename ? locs[i].filename : "") + 1u;
    const size_t dl = strlen(locs[i].defname ? locs[i].defname : "") + 1u;
    if (fl > STRING_MAX || dl > STRING_MAX) return;
    need += 20u + fl + dl;
  }
  if (c->added_len + need > CTS__SYMCACHE_FILE_MAX || !reserve(c, need)) return;
  const size_t start = c->added_len;
  unsigned char *p = c->added + start;
  cts_st_le64(p, offset);
  cts_st_le32(p + 8, (uint32_t)n);
  p += 12;
  for (size_t i = 0; i < n; i++) {
    cts_st_le32(p, locs[i].line);
    cts_st_le32(p + 4, locs[i].start_char);
    cts_st_le32(p + 8, locs[i].end_char);
    p += 12;
    const char *const strs[2] = {locs[i].filename ? locs[i].filename : "",
                                 locs[i].defname ? locs[i].defname : ""};
    for (int s = 0; s < 2; s++) {
      const size_t l = strlen(strs[s]) + 1u;
      cts_st_le32(p, (uint32_t)l);
      memcpy(p + 4, strs[s], l);
      p += 4 + l;
    }
  }
  if (!index_put(c, offset, start | POS_ADDED)) return;
  c->added_len += need;
  c->added_count++;
}

/* ---- writing ------------------------------------------------------------------------- */

typedef struct dir_file {
  char *name;
  uint64_t size, mtime_ns;
} dir_file_t;

static int older_first(const void *a, const void *b) {
  const dir_file_t *x = a, *y = b;
  return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* Whether `name` is one of this cache's files ("<hex>-<hex>", or its temporary file). */
static bool ours(const char *name, bool *temp) {
  const char *const dot = strstr(name, ".tmp.");
  *temp = dot != NULL;
  const size_t n = dot ? (size_t)(dot - name) : strlen(name);
  if (n < 18u || name[n - 17u] != '-') return false;
  for (size_t i = 0; i < n; i++)
    if (i != n - 17u && !((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
      return false;
  return true;
}

/* Keeps the directory under CTS__SYMCACHE_DIR_MAX, removing the least recently written
 * cache files first, and temporary files left by killed writers. */
static void trim(const char *dir) {
  DIR *const d = opendir(dir);
  if (!d) return;
  dir_file_t *files = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
  for (struct dirent *e; (e = readdir(d));) {
    bool temp;
    struct stat st;
    if (!ours(e->d_name, &temp) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    const uint64_t mtime =
        (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    if (temp) {
      if (now_ns > mtime && now_ns - mtime > STALE_TEMP_NS) unlinkat(dirfd(d), e->d_name, 0);
      continue;
    }
    if (n == cap) {
      const size_t more = cap ? cap * 2u : 64u;
      dir_file_t *const f = realloc(files, more * sizeof *f);
      if (!f) break;
      files = f;
      cap = more;
    }
    files[n].name = strdup(e->d_name);
    if (!files[n].name) break;
    files[n].size = (uint64_t)st.st_size;
    files[n].mtime_ns = mtime;
    total += files[n].size;
    n++;
  }
  if (total > CTS__SYMCACHE_DIR_MAX) {
    qsort(files, n, sizeof *files, older_first);
    for (size_t i = 0; i < n && total > CTS__SYMCACHE_DIR_MAX; i++)
      if (unlinkat(dirfd(d), files[i].name, 0) == 0) total -= files[i].size;
  }
  for (size_t i = 0; i < n; i++) free(files[i].name);
  free(files);
  closedir(d);
}

/* mkdir -p of `dir`'s last two components (…/.cache/ctfscope), private to the user. */
static void make_dir(const char *dir) {
  if (mkdir(dir, 0700) == 0 || errno == EEXIST) return;
  char *const parent = strdup(dir);
  char *const slash = parent ? strrchr(parent, '/') : NULL;
  if (slash && slash != parent) {
    *slash = '\0';
    mkdir(parent, 0700);
    mkdir(dir, 0700);
  }
  free(parent);
}

static bool write_all(int fd, const unsigned char *p, size_t len) {
  while (len) {
    const ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    len -= (size_t)w;
  }
  return true;
}

static void save(cts__symcache_t *c) {
  const size_t path_len = strlen(c->path);
  const size_t head = HEADER_SIZE + path_len + c->build_id_len;
  size_t old_records = c->old ? c->old_len - head : 0;
  size_t count = c->old_count + c->added_count;
  if (head + old_records + c->added_len > CTS__SYMCACHE_FILE_MAX) { /* full: start afresh */
    old_records = 0;
    count = c->added_count;
  }
  const size_t len = head + old_records + c->added_len;
  if (len > CTS__SYMCACHE_FILE_MAX) return;
  unsigned char *const p = malloc(len);
  if (!p) return;
  memcpy(p, MAGIC, sizeof MAGIC);
  put_ident(p + 16, c->module_id);
  put_ident(p + 48, c->debug_id);
  cts_st_le32(p + 80, (uint32_t)path_len);
  cts_st_le32(p + 84, (uint32_t)c->build_id_len);
  cts_st_le32(p + 88, (uint32_t)count);
  cts_st_le32(p + 92, 0);
  memcpy(p + HEADER_SIZE, c->path, path_len);
  memcpy(p + HEADER_SIZE + path_len, c->build_id, c->build_id_len);
  if (old_records) memcpy(p + head, c->old + head, old_records);
  if (c->added_len) memcpy(p + head + old_records, c->added, c->added_len);
  cts_st_le64(p + 8, checksum(p + 16, len - 16));

  make_dir(c->dir);
  char *temp = NULL;
  if (asprintf(&temp, "%s.tmp.XXXXXX", c->file) >= 0) {
    const int fd = mkostemp(temp, O_CLOEXEC);
    if (fd >= 0) {
      const bool ok = write_all(fd, p, len);
      if (close(fd) != 0 || !ok || rename(temp, c->file) != 0)
        unlink(temp);
      else
        trim(c->dir);
    }
    free(temp);
  }
  free(p);
}

void cts__symcache_save(cts__symcache_t *c) {
  if (!c || !c->file || c->added_count == c->saved_count) return;
  save(c);
  c->saved_count = c->added_count;
}

void cts__symcache_close(cts__symcache_t *c) {
  if (!c) return;
  cts__symcache_save(c);
  free(c->file);
  free(c->dir);
  free(c->path);
  free(c->old);
  free(c->added);
  free(c->keys);
  free(c->pos);
  free(c);
}
