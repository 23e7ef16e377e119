/* SPDX-License-Identifier: MIT */
/* Location codes (return addresses of this process) to source locations, with elfutils
 * libdw. Runs only on the writer thread, which is guarded, so libdw may allocate freely:
 * its memory goes to the real malloc untraced. Memtrace wants a code's locations
 * outermost first (§7); an address inside inlined code gives one location per inlining
 * level: the outer function at the inlined call's DW_AT_call_file/line, ..., the innermost
 * function at the address's own line. */
#define _GNU_SOURCE
#include "tracer_internal.h"

#include "symcache.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- /proc/PID/maps lines -----------------------------------------------------------------
 * By hand: sscanf spent 0.41 M instructions of the writer's 1.2 M on sqlite3's ~470 lines
 * (its format string interpreted again on each, strtoul per field). */

static bool maps_blank(char c) {
  return c == ' ' || c == '\t';
}

/* The hex number at [*at, end) (1-16 digits) into *value; *at past it. */
static bool maps_hex(const char **at, const char *end, uint64_t *value) {
  const char *p = *at;
  uint64_t v = 0;
  size_t digits = 0;
  for (; p < end; p++, digits++) {
    const char c = *p;
    unsigned d;
    if (c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = (unsigned)(c - 'A' + 10);
    else
      break;
    if (digits == 16u) return false;
    v = v << 4 | d;
  }
  *at = p;
  *value = v;
  return digits > 0;
}

/* The decimal number at [*at, end) (1-19 digits: no overflow) into *value; *at past it. */
static bool maps_dec(const char **at, const char *end, uint64_t *value) {
  const char *p = *at;
  uint64_t v = 0;
  size_t digits = 0;
  for (; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
    if (digits == 19u) return false;
    v = v * 10u + (uint64_t)(*p - '0');
  }
  *at = p;
  *value = v;
  return digits > 0;
}

/* One or more blanks at [*at, end); *at past them. */
static bool maps_blanks(const char **at, const char *end) {
  const char *p = *at;
  while (p < end && maps_blank(*p)) p++;
  const bool any = p != *at;
  *at = p;
  return any;
}

bool cts__maps_line_parse(const char *line, size_t len, cts__maps_line_t *out) {
  const char *p = line, *const end = line + len;
  uint64_t major, minor;
  if (!maps_hex(&p, end, &out->start) || p == end || *p++ != '-' || !maps_hex(&p, end, &out->end) ||
      !maps_blanks(&p, end))
    return false;
  const char *const perms = p;
  while (p < end && !maps_blank(*p)) p++;
  if (p == perms || !maps_blanks(&p, end) || !maps_hex(&p, end, &out->offset) ||
      !maps_blanks(&p, end) || !maps_hex(&p, end, &major) || major > 0xffffffffu || p == end ||
      *p++ != ':' || !maps_hex(&p, end, &minor) || minor > 0xffffffffu || !maps_blanks(&p, end) ||
      !maps_dec(&p, end, &out->inode))
    return false;
  /* What follows the inode: the blanks, then the path (none for anonymous memory). */
  if (p < end && !maps_blank(*p)) return false;
  maps_blanks(&p, end);
  out->major = (unsigned)major;
  out->minor = (unsigned)minor;
  out->path = p;
  out->path_len = (size_t)(end - p);
  return true;
}

#ifdef CTS_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "lazylib.h"

/* libdw is bound when the writer first creates a symbolizer (lazylib.h): a traced image
 * that never resolves a location never loads it. The calls below go through `dw`. */
#define DW_FUNCTIONS(X)           \
  X(dwarf_attr)                   \
  X(dwarf_diename)                \
  X(dwarf_filesrc)                \
  X(dwarf_formudata)              \
  X(dwarf_getscopes)              \
  X(dwarf_getscopes_die)          \
  X(dwarf_getsrc_die)             \
  X(dwarf_getsrcfiles)            \
  X(dwarf_linecol)                \
  X(dwarf_lineno)                 \
  X(dwarf_linesrc)                \
  X(dwarf_ranges)                 \
  X(dwarf_tag)                    \
  X(dwfl_addrmodule)              \
  X(dwfl_begin)                   \
  X(dwfl_build_id_find_debuginfo) \
  X(dwfl_end)                     \
  X(dwfl_getmodules)              \
  X(dwfl_lineinfo)                \
  X(dwfl_linux_proc_find_elf)     \
  X(dwfl_linux_proc_maps_report)  \
  X(dwfl_linux_proc_report)       \
  X(dwfl_module_addrdie)          \
  X(dwfl_module_build_id)         \
  X(dwfl_module_getelf)           \
  X(dwfl_module_getsrc)           \
  X(dwfl_module_getsym_info)      \
  X(dwfl_module_getsymtab)        \
  X(dwfl_module_info)             \
  X(dwfl_module_nextcu)           \
  X(dwfl_report_begin)            \
  X(dwfl_report_end)
CTS__LAZYLIB_DEFINE(dw, dw_lib, "libdw.so.1", DW_FUNCTIONS);
#define dwarf_attr                   (dw.dwarf_attr)
#define dwarf_diename                (dw.dwarf_diename)
#define dwarf_filesrc                (dw.dwarf_filesrc)
#define dwarf_formudata              (dw.dwarf_formudata)
#define dwarf_getscopes              (dw.dwarf_getscopes)
#define dwarf_getscopes_die          (dw.dwarf_getscopes_die)
#define dwarf_getsrc_die             (dw.dwarf_getsrc_die)
#define dwarf_getsrcfiles            (dw.dwarf_getsrcfiles)
#define dwarf_linecol                (dw.dwarf_linecol)
#define dwarf_lineno                 (dw.dwarf_lineno)
#define dwarf_linesrc                (dw.dwarf_linesrc)
#define dwarf_ranges                 (dw.dwarf_ranges)
#define dwarf_tag                    (dw.dwarf_tag)
#define dwfl_addrmodule              (dw.dwfl_addrmodule)
#define dwfl_begin                   (dw.dwfl_begin)
#define dwfl_build_id_find_debuginfo (dw.dwfl_build_id_find_debuginfo)
#define dwfl_end                     (dw.dwfl_end)
#define dwfl_getmodules              (dw.dwfl_getmodules)
#define dwfl_lineinfo                (dw.dwfl_lineinfo)
#define dwfl_linux_proc_find_elf     (dw.dwfl_linux_proc_find_elf)
#define dwfl_linux_proc_maps_report  (dw.dwfl_linux_proc_maps_report)
#define dwfl_linux_proc_report       (dw.dwfl_linux_proc_report)
#define dwfl_module_addrdie          (dw.dwfl_module_addrdie)
#define dwfl_module_build_id         (dw.dwfl_module_build_id)
#define dwfl_module_getelf           (dw.dwfl_module_getelf)
#define dwfl_module_getsrc           (dw.dwfl_module_getsrc)
#define dwfl_module_getsym_info      (dw.dwfl_module_getsym_info)
#define dwfl_module_getsymtab        (dw.dwfl_module_getsymtab)
#define dwfl_module_info             (dw.dwfl_module_info)
#define dwfl_module_nextcu           (dw.dwfl_module_nextcu)
#define dwfl_report_begin            (dw.dwfl_report_begin)
#define dwfl_report_end              (dw.dwfl_report_end)

#define STRINGS_SIZE 65536u
#define MAX_CHAIN    64u
/* Longer lines of /proc/PID/maps are skipped (a path past PATH_MAX, 4096). */
#define MAPS_LINE_MAX 4200u

/* A resolved code, kept for the whole session: the writer re-sends a code evicted from its
 * backtrace cache, and by then the code's library may have been unloaded. */
typedef struct cached {
  uint64_t code;
  size_t n;
  cts_mt_location_t *locs; /* strings owned by the entry */
} cached_t;

struct cts__symbolizer {
  Dwfl *dwfl;
  Dwfl_Callbacks callbacks;
  char *debuginfo_path;
  unsigned long long loads, unloads;    /* the loader's counters at the last report */
  char *cache_dir;                      /* the persistent cache's (symcache.h); NULL: none */
  int pid;                              /* whose codes: 0 = this process */
  const _Atomic uint64_t *module_epoch; /* pid != 0: the program's flush count */
  uint64_t epoch_seen;                  /* its value at the last report */
  bool handed;                          /* that report was of the list the program handed
                                         * over before its exec (cts__program_maps) */
  bool dwfl_failed;                     /* libdw could not be bound or report: no more tries */
  cached_t *cache;
  size_t cache_cap, cache_count;
  /* The module list read without libdw, for persistent-cache hits (module_list_read). */
  struct listed_module *listed;
  size_t nlisted;
  bool listed_read;
  uint64_t listed_epoch; /* module_epoch when it was read */
  size_t used;
  /* This call's strings (valid until the next call): STRINGS_SIZE bytes, malloc'd at the
   * first code resolved through libdw; NULL before. Not in the symbolizer itself: its
   * calloc zeroed 64 KiB (~16 page faults in the writer process) that an image whose
   * codes all come from the persistent cache never uses, and malloc's pages are touched
   * only as far as the strings reach. */
  char *strings;
};

/* ---- a module's function symbols, sorted once --------------------------------------------- */

/* dwfl_module_addrname walks the module's whole symbol table (gelf_getshdr and
 * gelf_getsymshndx for each symbol) at every call: 4.5 s of the writer's time for cc1's
 * 8 000 distinct addresses. Each module's function symbols are read once into an array
 * sorted by address (kept in the module's user data), and looked up by binary search. */
typedef struct fn_symbol {
  Dwarf_Addr start, end; /* [start, end): the symbol's address and size */
  const char *name;      /* libelf's string table: valid while the module is reported */
  int rank;              /* global 2, weak 1, local 0: the higher wins at one address */
  int index;             /* in the symbol table: at one address and rank, the first wins */
} fn_symbol_t;

/* What is kept per module (in its user data): its sorted symbols, read at the first
 * address resolved there, and its persistent cache, opened at the first address looked up
 * there. */
typedef struct module_state {
  size_t n;
  fn_symbol_t *syms;
  bool syms_read;
  bool cache_tried;
  cts__symcache_t *cache;
} module_state_t;

static int fn_symbol_order(const void *a, const void *b) {
  const fn_symbol_t *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->index < y->index) - (x->index > y->index); /* module_symbol_at looks back */
}

static void module_state_free(module_state_t *t) {
  if (!t) return;
  cts__symcache_close(t->cache);
  free(t->syms);
  free(t);
}

/* The state of `mod`, made at the first call; NULL without memory. */
static module_state_t *module_state(Dwfl_Module *mod) {
  void **user = NULL;
  dwfl_module_info(mod, &user, NULL, NULL, NULL, NULL, NULL, NULL);
  if (!user) return NULL;
  if (!*user) *user = calloc(1, sizeof(module_state_t));
  return *user;
}

/* The sorted symbols of `mod`, read at the first call; NULL without memory. */
static module_state_t *module_symbols(Dwfl_Module *mod) {
  module_state_t *const t = module_state(mod);
  if (!t || t->syms_read) return t;
  t->syms_read = true;
  const int count = dwfl_module_getsymtab(mod);
  if (count > 0) t->syms = calloc((size_t)count, sizeof *t->syms);
  for (int i = 0; t->syms && i < count; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    const char *const name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
    const int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
    if (!name || !name[0] || sym.st_size == 0 || shndx == SHN_UNDEF ||
        (type != STT_FUNC && type != STT_GNU_IFUNC))
      continue;
    const int rank = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0;
    t->syms[t->n++] = (fn_symbol_t){addr, addr + sym.st_size, name, rank, i};
  }
  if (t->n) qsort(t->syms, t->n, sizeof *t->syms, fn_symbol_order);
  return t;
}

/* The function symbol holding addr in `mod`, as dwfl_module_addrname chooses it: of those
 * that start at or below it and cover it, the one that starts last, the highest ranked at
 * that address, the first in the table among equals; NULL if none (elfutils would also
 * take a preceding symbol without a size there: rare, and then the module and offset are
 * named). */
static const char *module_symbol_at(Dwfl_Module *mod, Dwarf_Addr addr) {
  const module_state_t *const t = module_symbols(mod);
  if (!t || !t->n) return NULL;
  size_t lo = 0, hi = t->n; /* the first symbol starting above addr is at hi */
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2u;
    if (t->syms[mid].start <= addr)
      lo = mid + 1u;
    else
      hi = mid;
  }
  /* Symbols nest rarely (an alias with another size): a few steps back suffice. */
  for (size_t i = lo, steps = 0; i > 0 && steps < 16u; i--, steps++)
    if (addr < t->syms[i - 1u].end) return t->syms[i - 1u].name;
  return NULL;
}

/* dwfl_report_end's callback for a module gone from the process: `user` is the address of
 * the module's user data (libdwfl passes &mod->userdata, whatever its prototype says). */
static int removed_module(Dwfl_Module *mod, void *user, const char *name, Dwarf_Addr base,
                          void *arg) {
  (void)mod, (void)name, (void)base, (void)arg;
  void **const slot = user;
  module_state_free(*slot);
  *slot = NULL;
  return DWARF_CB_OK;
}

static int free_module_symbols(Dwfl_Module *mod, void **user, const char *name, Dwarf_Addr start,
                               void *arg) {
  (void)mod, (void)name, (void)start, (void)arg;
  module_state_free(*user);
  *user = NULL;
  return DWARF_CB_OK;
}

static int loader_counters(struct dl_phdr_info *info, size_t size, void *data) {
  unsigned long long *const c = data;
  if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return 1;
  c[0] = info->dlpi_adds;
  c[1] = info->dlpi_subs;
  return 1; /* the counters are the same in every entry: one is enough */
}

static bool report_modules(cts__symbolizer_t *s) {
  if (s->pid) {
    s->epoch_seen = atomic_load(s->module_epoch);
  } else {
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(loader_counters, c);
    s->loads = c[0];
    s->unloads = c[1];
  }
  dwfl_report_begin(s->dwfl);
  /* A program about to exec (or past it) handed its list over: /proc/PID/maps may
   * already be the next image's. */
  size_t len = 0;
  char *const handed = s->pid ? cts__program_maps(&len) : NULL;
  FILE *const f = handed ? fmemopen(handed, len, "r") : NULL;
  s->handed = f != NULL;
  int e = f ? dwfl_linux_proc_maps_report(s->dwfl, f)
            : dwfl_linux_proc_report(s->dwfl, s->pid ? s->pid : getpid());
  if (f) fclose(f);
  free(handed);
  /* A program that is not dumpable keeps its maps from its writer process; the writer
   * process, a fork of it, has the modules it had then. */
  if (e && s->pid) e = dwfl_linux_proc_report(s->dwfl, getpid());
  return dwfl_report_end(s->dwfl, removed_module, NULL) == 0 && e == 0;
}

/* Re-reads the module list if a library was loaded or unloaded since the last report (for
 * another process: if it flushed since, or if `code` is in no module known). */
static void refresh_modules(cts__symbolizer_t *s, uint64_t code) {
  if (s->pid) {
    /* A handed-over list is the image's last: reading it again finds nothing new. */
    if (atomic_load(s->module_epoch) != s->epoch_seen ||
        (!s->handed && !dwfl_addrmodule(s->dwfl, (Dwarf_Addr)code - 1)))
      report_modules(s);
    return;
  }
  unsigned long long c[2] = {0, 0};
  dl_iterate_phdr(loader_counters, c);
  if (c[0] != s->loads || c[1] != s->unloads) report_modules(s);
}

static cached_t *cache_slot(cts__symbolizer_t *s, uint64_t code) {
  size_t i = (size_t)((code * 0x9E3779B97F4A7C15ull) >> 32) & (s->cache_cap - 1);
  while (s->cache[i].code && s->cache[i].code != code) i = (i + 1) & (s->cache_cap - 1);
  return &s->cache[i];
}

static void cache_put(cts__symbolizer_t *s, uint64_t code, const cts_mt_location_t *locs,
                      size_t n) {
  if ((s->cache_count + 1) * 2 > s->cache_cap) {
    /* From a small table: an image at the default rate resolves tens to hundreds of
     * codes, and 1 024 entries zeroed 24 KiB (6 pages) up front. */
    const size_t cap = s->cache_cap ? s->cache_cap * 2 : 64;
    cached_t *const fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return;
    cached_t *const old = s->cache;
    const size_t old_cap = s->cache_cap;
    s->cache = fresh;
    s->cache_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].code) *cache_slot(s, old[i].code) = old[i];
    free(old);
  }
  cts_mt_location_t *const copy = n ? calloc(n, sizeof *copy) : NULL;
  if (n && !copy) return;
  for (size_t i = 0; i < n; i++) {
    copy[i] = locs[i];
    copy[i].filename = strdup(locs[i].filename ? locs[i].filename : "");
    copy[i].defname = strdup(locs[i].defname ? locs[i].defname : "");
  }
  cached_t *const slot = cache_slot(s, code);
  slot->code = code;
  slot->n = n;
  slot->locs = copy;
  s->cache_count++;
}

/* ---- persistent-cache hits without libdw ------------------------------------------------
 * At the default rate an image samples a few allocations, and a warm persistent cache holds
 * every location they need. Binding libdw for them (a dlopen of libdw, libelf and their
 * compressors: 0.5 M instructions and ~100 page faults) and reporting the modules through it
 * (0.45 M) cost more than the lookups. So the module list is read here first, each
 * module's build-id from its file, and the persistent cache asked; libdw is bound at the
 * first code the cache does not hold. A module starts where libdwfl's report of
 * /proc/PID/maps starts it (the first of consecutive mappings of one file, lines that map no
 * file skipped): cache offsets are relative to that. Anything unusual (a deleted file, no
 * build-id, an unreadable list) is left to libdw. */
typedef struct listed_module {
  uint64_t low, high; /* [low, high): the module's mappings */
  char *path;
  bool cache_tried;
  cts__symcache_t *cache;
} listed_module_t;

static void listed_free(cts__symbolizer_t *s) {
  for (size_t i = 0; i < s->nlisted; i++) {
    cts__symcache_close(s->listed[i].cache); /* nothing added: nothing written */
    free(s->listed[i].path);
  }
  free(s->listed);
  s->listed = NULL;
  s->nlisted = 0;
}

/* The module list's text: the one the program handed over before an exec, else
 * /proc/PID/maps (this process's for pid 0), malloc'd; NULL if unreadable. */
static char *maps_text(const cts__symbolizer_t *s, size_t *len) {
  char *const handed = s->pid ? cts__program_maps(len) : NULL;
  return handed ? handed : cts__read_maps(s->pid, len);
}

/* Appends [low, high) of `path` (len bytes) to the list; false without memory. */
static bool listed_add(cts__symbolizer_t *s, size_t *cap, uint64_t low, uint64_t high,
                       const char *path, size_t len) {
  if (s->nlisted == *cap) {
    const size_t grown_cap = *cap ? 2u * *cap : 32u;
    listed_module_t *const grown = realloc(s->listed, grown_cap * sizeof *grown);
    if (!grown) return false;
    s->listed = grown;
    *cap = grown_cap;
  }
  char *const copy = strndup(path, len);
  if (!copy) return false;
  s->listed[s->nlisted++] = (listed_module_t){.low = low, .high = high, .path = copy};
  return true;
}

/* Reads the module list (again) into s->listed, grouping lines as libdwfl does. */
static void module_list_read(cts__symbolizer_t *s) {
  listed_free(s);
  s->listed_read = true;
  if (s->module_epoch) s->listed_epoch = atomic_load(s->module_epoch);
  size_t len = 0, cap = 0;
  char *const text = maps_text(s, &len);
  if (!text) return;
  uint64_t low = 0, high = 0, last_ino = 0;
  unsigned last_major = 0, last_minor = 0;
  const char *last_path = NULL;
  size_t last_len = 0;
  bool ok = true;
  for (size_t at = 0; ok && at < len;) {
    const char *const line = text + at;
    const char *const eol = memchr(line, '\n', len - at);
    const size_t line_len = eol ? (size_t)(eol - line) : len - at;
    at += line_len + 1u;
    /* No module path is that long (PATH_MAX): not one of ours. */
    if (line_len >= MAPS_LINE_MAX) continue;
    cts__maps_line_t m;
    if (!cts__maps_line_parse(line, line_len, &m)) continue;
    const char *const file = m.path;
    /* A NUL inside is no kernel's line (and would cut the copies below short). */
    if (m.path_len == 0 || file[0] != '/' || (m.inode == 0 && m.major == 0 && m.minor == 0) ||
        memchr(file, '\0', m.path_len))
      continue;
    const size_t file_len = m.path_len;
    /* A deleted file's build-id cannot be read again: libdw's. */
    const bool deleted = file_len > 10 && !memcmp(file + file_len - 10, " (deleted)", 10);
    if (last_path && m.inode == last_ino && m.major == last_major && m.minor == last_minor &&
        file_len == last_len && !memcmp(file, last_path, file_len)) {
      high = m.end;
      continue;
    }
    if (last_path) ok = listed_add(s, &cap, low, high, last_path, last_len);
    free((char *)last_path);
    last_path = deleted ? NULL : strndup(file, file_len);
    last_len = file_len;
    low = m.start, high = m.end, last_ino = m.inode, last_major = m.major, last_minor = m.minor;
  }
  if (ok && last_path) listed_add(s, &cap, low, high, last_path, last_len);
  free((char *)last_path);
  free(text);
}

/* The GNU build-id of the ELF file at `path` into id (up to `max` bytes): its length, or 0. */
static size_t file_build_id(const char *path, unsigned char *id, size_t max) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t found = 0;
  Elf64_Ehdr eh;
  if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB &&
      eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum <= 64) {
    Elf64_Phdr ph[64];
    const size_t phbytes = (size_t)eh.e_phnum * sizeof *ph;
    if (pread(fd, ph, phbytes, (off_t)eh.e_phoff) == (ssize_t)phbytes) {
      for (unsigned i = 0; !found && i < eh.e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_filesz == 0 || ph[i].p_filesz > 4096) continue;
        unsigned char notes[4096];
        const size_t size = (size_t)ph[i].p_filesz;
        if (pread(fd, notes, size, (off_t)ph[i].p_offset) != (ssize_t)size) continue;
        /* Elf64_Nhdr entries, name and descriptor each padded to 4 bytes. */
        for (size_t at = 0; at + sizeof(Elf64_Nhdr) <= size;) {
          Elf64_Nhdr nh;
          memcpy(&nh, notes + at, sizeof nh);
          const size_t name_at = at + sizeof nh, name_pad = ((size_t)nh.n_namesz + 3u) & ~3u;
          const size_t desc_at = name_at + name_pad, desc_pad = ((size_t)nh.n_descsz + 3u) & ~3u;
          if (nh.n_namesz > size || nh.n_descsz > size || desc_at + desc_pad > size) break;
          if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
              !memcmp(notes + name_at, "GNU", 4) && nh.n_descsz > 0 && nh.n_descsz <= max) {
            memcpy(id, notes + desc_at, nh.n_descsz);
            found = nh.n_descsz;
            break;
          }
          at = desc_at + desc_pad;
        }
      }
    }
  }
  close(fd);
  return found;
}

/* The locations of `code` from the persistent cache, through the module list read here:
 * true (*n set) on a hit. */
static bool listed_lookup(cts__symbolizer_t *s, uint64_t code, cts_mt_location_t *out, size_t max,
                          size_t *n) {
  if (!s->cache_dir || s->dwfl) return false; /* libdw already bound: its way is as cheap */
  if (!s->listed_read || (s->module_epoch && atomic_load(s->module_epoch) != s->listed_epoch))
    module_list_read(s);
  const uint64_t addr = code - 1u; /* inside the call, as dwfl_addrmodule is asked */
  for (size_t i = 0; i < s->nlisted; i++) {
    listed_module_t *const m = &s->listed[i];
    if (addr < m->low || addr >= m->high) continue;
    if (!m->cache_tried) {
      m->cache_tried = true;
      unsigned char id[64];
      const size_t id_len = file_build_id(m->path, id, sizeof id);
      if (id_len) m->cache = cts__symcache_open(s->cache_dir, m->path, id, id_len);
    }
    return m->cache && cts__symcache_find(m->cache, code - m->low, out, max, n);
  }
  return false;
}

cts__symbolizer_t *cts__symbolizer_create(int pid, const _Atomic uint64_t *module_epoch) {
  cts__symbolizer_t *const s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->pid = module_epoch ? pid : 0;
  s->module_epoch = module_epoch;
  s->cache_dir = cts__symcache_dir();
  return s;
}

/* libdw's side of the symbolizer, made at the first code the persistent cache does not
 * hold (listed_lookup): false if libdw cannot be bound or the modules not reported. */
static bool dwfl_ready(cts__symbolizer_t *s) {
  if (s->dwfl) return true;
  if (s->dwfl_failed || !cts__lazylib_bind(&dw_lib)) {
    s->dwfl_failed = true;
    return false;
  }
  s->callbacks.find_elf = dwfl_linux_proc_find_elf;
  /* Separate debug information is looked for by build id on this machine only
   * (/usr/lib/debug/.build-id). dwfl_standard_find_debuginfo would fall back to
   * debuginfod: that dlopens libdebuginfod and initialises libcurl and OpenSSL inside the
   * traced program (which crashes when it happens at exit, after their destructors ran)
   * and may go to the network. */
  s->callbacks.find_debuginfo = dwfl_build_id_find_debuginfo;
  s->callbacks.debuginfo_path = &s->debuginfo_path;
  s->dwfl = dwfl_begin(&s->callbacks);
  if (!s->dwfl || !report_modules(s)) {
    if (s->dwfl) dwfl_end(s->dwfl);
    s->dwfl = NULL;
    s->dwfl_failed = true;
    return false;
  }
  return true;
}

bool cts__symbolizer_used_libdw(const cts__symbolizer_t *s) {
  return s && s->dwfl;
}

void cts__symbolizer_destroy(cts__symbolizer_t *s) {
  if (!s) return;
  if (s->dwfl) {
    dwfl_getmodules(s->dwfl, free_module_symbols, NULL, 0);
    dwfl_end(s->dwfl);
  }
  listed_free(s);
  free(s->strings);
  free(s->cache_dir);
  for (size_t i = 0; i < s->cache_cap; i++) {
    for (size_t j = 0; j < s->cache[i].n; j++) {
      free((char *)s->cache[i].locs[j].filename);
      free((char *)s->cache[i].locs[j].defname);
    }
    free(s->cache[i].locs);
  }
  free(s->cache);
  free(s);
}

static const char *keep(cts__symbolizer_t *s, const char *str) {
  if (!str || !s->strings) return "";
  const size_t n = strlen(str) + 1;
  if (n > STRINGS_SIZE - s->used) return "";
  char *const p = s->strings + s->used;
  memcpy(p, str, n);
  s->used += n;
  return p;
}

static const char *basename_of(const char *path) {
  const char *const slash = path ? strrchr(path, '/') : NULL;
  return slash ? slash + 1 : path ? path : "";
}

static const char *die_name(Dwarf_Die *die) {
  const char *name = dwarf_diename(die);
  return name ? name : "??";
}

/* The inlining chain at `addr` (module-relative): DIEs of inlined subroutines, innermost
 * first, ending with the containing subprogram. */
static size_t inline_chain(Dwarf_Die *cu, Dwarf_Addr addr, Dwarf_Die *chain, size_t max) {
  Dwarf_Die *scopes = NULL;
  int n = dwarf_getscopes(cu, addr, &scopes);
  if (n <= 0) {
    free(scopes);
    return 0;
  }
  /* dwarf_getscopes follows an inlined subroutine with its abstract origin's scopes; the
   * physical nesting (inlined call inside its caller) comes from the innermost DIE's own
   * parents. */
  Dwarf_Die innermost = scopes[0];
  free(scopes);
  scopes = NULL;
  n = dwarf_getscopes_die(&innermost, &scopes);
  size_t k = 0;
  for (int i = 0; i < n && k < max; i++) {
    const int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
      chain[k++] = scopes[i];
      if (tag == DW_TAG_subprogram) break;
    }
  }
  free(scopes);
  return k;
}

static size_t resolve_uncached(cts__symbolizer_t *s, uint64_t code, cts_mt_location_t *out,
                               size_t max);

static int save_module_cache(Dwfl_Module *mod, void **user, const char *name, Dwarf_Addr start,
                             void *arg) {
  (void)mod, (void)name, (void)start, (void)arg;
  const module_state_t *const t = *user;
  if (t) cts__symcache_save(t->cache);
  return DWARF_CB_OK;
}

void cts__symbolizer_save(cts__symbolizer_t *s) {
  if (s && s->dwfl) dwfl_getmodules(s->dwfl, save_module_cache, NULL, 0);
}

/* The persistent cache of `mod`, opened at the first call: keyed by its build-id, which
 * needs only its main ELF file (not its debug information). */
static cts__symcache_t *module_cache(cts__symbolizer_t *s, Dwfl_Module *mod, module_state_t *t) {
  if (t->cache_tried) return t->cache;
  t->cache_tried = true;
  Dwarf_Addr bias;
  const unsigned char *id = NULL;
  GElf_Addr id_vaddr;
  if (!s->cache_dir || !dwfl_module_getelf(mod, &bias)) return NULL;
  const int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
  const char *const name = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  if (id_len > 0) t->cache = cts__symcache_open(s->cache_dir, name, id, (size_t)id_len);
  return t->cache;
}

size_t cts__symbolizer_resolve(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  cts__symbolizer_t *const s = user_data;
  if (max == 0 || code == 0) return 0;
  if (s->cache_cap) {
    const cached_t *const c = cache_slot(s, code);
    if (c->code == code) {
      const size_t n = c->n < max ? c->n : max;
      memcpy(out, c->locs, n * sizeof *out);
      return n;
    }
  }
  size_t n;
  if (listed_lookup(s, code, out, max, &n)) {
    cache_put(s, code, out, n);
    return n;
  }
  if (!dwfl_ready(s)) return 0;
  refresh_modules(s, code);
  /* Keyed by the address's offset in its module: the same in every image that maps it. */
  Dwfl_Module *const mod = dwfl_addrmodule(s->dwfl, (Dwarf_Addr)code - 1);
  module_state_t *const t = mod ? module_state(mod) : NULL;
  cts__symcache_t *const pc = t ? module_cache(s, mod, t) : NULL;
  Dwarf_Addr mod_start = 0;
  if (pc) dwfl_module_info(mod, NULL, &mod_start, NULL, NULL, NULL, NULL, NULL);
  if (pc && cts__symcache_find(pc, code - mod_start, out, max, &n)) {
    cache_put(s, code, out, n);
    return n;
  }
  n = resolve_uncached(s, code, out, max);
  cache_put(s, code, out, n);
  if (pc && n) cts__symcache_add(pc, code - mod_start, out, n);
  return n;
}

/* The compilation unit holding addr. dwfl_module_addrdie needs .debug_aranges, which
 * clang does not emit by default: then the CUs' own ranges are scanned (linear in the
 * number of CUs, once per distinct code thanks to the cache). */
static Dwarf_Die *find_cu(Dwfl_Module *mod, Dwarf_Addr addr, Dwarf_Die *store, Dwarf_Addr *bias) {
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, bias);
  if (cu) return cu;
  for (cu = dwfl_module_nextcu(mod, NULL, bias); cu; cu = dwfl_module_nextcu(mod, cu, bias)) {
    Dwarf_Addr base, start, end;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(cu, off, &base, &start, &end)) > 0)
      if (addr - *bias >= start && addr - *bias < end) {
        *store = *cu;
        return store;
      }
  }
  return NULL;
}

static size_t resolve_uncached(cts__symbolizer_t *s, uint64_t code, cts_mt_location_t *out,
                               size_t max) {
  s->used = 0;
  if (!s->strings) s->strings = malloc(STRINGS_SIZE); /* without: names are "" (keep) */
  /* A return address points after its call: look up the call instruction itself. */
  const Dwarf_Addr addr = (Dwarf_Addr)code - 1;
  Dwfl_Module *const mod = dwfl_addrmodule(s->dwfl, addr);
  if (!mod) return 0;
  Dwarf_Addr mod_start = 0;
  const char *const mod_name =
      dwfl_module_info(mod, NULL, &mod_start, NULL, NULL, NULL, NULL, NULL);
  const char *const symbol = module_symbol_at(mod, addr);

  Dwarf_Addr bias = 0;
  Dwarf_Die cu_store;
  Dwarf_Die *const cu = find_cu(mod, addr, &cu_store, &bias);
  Dwarf_Die chain[MAX_CHAIN];
  const size_t nchain = cu ? inline_chain(cu, addr - bias, chain, MAX_CHAIN) : 0;

  /* The innermost location: the address's own line. */
  int line = 0, column = 0;
  const char *file = NULL;
  Dwarf_Line *const dl = cu ? dwarf_getsrc_die(cu, addr - bias) : NULL;
  if (dl) {
    file = dwarf_linesrc(dl, NULL, NULL);
    dwarf_lineno(dl, &line);
    dwarf_linecol(dl, &column);
  } else {
    Dwfl_Line *const l = dwfl_module_getsrc(mod, addr);
    if (l) file = dwfl_lineinfo(l, NULL, &line, &column, NULL, NULL);
  }

  if (nchain == 0) { /* no DWARF here: the ELF symbol and the module */
    char name[512];
    if (!symbol)
      snprintf(name, sizeof name, "%s+0x%llx", basename_of(mod_name),
               (unsigned long long)(addr - mod_start));
    out[0].line = line > 0 ? (uint32_t)line : 0;
    out[0].start_char = out[0].end_char = column > 0 ? (uint32_t)column : 0;
    out[0].filename = keep(s, file ? file : mod_name);
    out[0].defname = keep(s, symbol ? symbol : name);
    return 1;
  }

  Dwarf_Files *files = NULL;
  size_t nfiles = 0;
  if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0) files = NULL;

  /* Innermost first into a temporary, then reversed into `out`. */
  cts_mt_location_t tmp[MAX_CHAIN];
  size_t n = 0;
  tmp[n].line = line > 0 ? (uint32_t)line : 0;
  tmp[n].start_char = tmp[n].end_char = column > 0 ? (uint32_t)column : 0;
  tmp[n].filename = keep(s, file ? file : mod_name);
  tmp[n].defname = keep(s, die_name(&chain[0]));
  n++;
  for (size_t i = 0; i + 1 < nchain && n < max; i++) {
    /* chain[i] is inlined into chain[i + 1], at its call site. */
    Dwarf_Attribute attr;
    Dwarf_Word call_file = 0, call_line = 0, call_column = 0;
    dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_file, &attr), &call_file);
    dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_line, &attr), &call_line);
    dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_column, &attr), &call_column);
    const char *cf =
        files && call_file < nfiles ? dwarf_filesrc(files, call_file, NULL, NULL) : NULL;
    tmp[n].line = (uint32_t)call_line;
    tmp[n].start_char = tmp[n].end_char = (uint32_t)call_column;
    tmp[n].filename = keep(s, cf ? cf : mod_name);
    tmp[n].defname = keep(s, die_name(&chain[i + 1]));
    n++;
  }
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  return n;
}

#else /* !CTS_HAVE_LIBDW: codes go out with no locations */

struct cts__symbolizer {
  int unused;
};

cts__symbolizer_t *cts__symbolizer_create(int pid, const _Atomic uint64_t *module_epoch) {
  (void)pid, (void)module_epoch;
  return NULL;
}

void cts__symbolizer_destroy(cts__symbolizer_t *s) {
  (void)s;
}

void cts__symbolizer_save(cts__symbolizer_t *s) {
  (void)s;
}

bool cts__symbolizer_used_libdw(const cts__symbolizer_t *s) {
  (void)s;
  return false;
}

size_t cts__symbolizer_resolve(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  (void)user_data, (void)code, (void)out, (void)max;
  return 0;
}
#endif
