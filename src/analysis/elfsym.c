/* SPDX-License-Identifier: MIT */
#include "elfsym.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/grow.h"

static void set_msg(char *msg, size_t size, const char *fmt, const char *a, const char *b) {
  if (size) snprintf(msg, size, fmt, a, b);
}

#ifdef CTS_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

/* Inlining levels named for one code; deeper nests keep their innermost levels' caller
 * chain cut (memtrace allows 255 locations, real code rarely nests 10 deep). */
#define MAX_LEVELS 64u

/* One compilation unit's address range, for the units .debug_aranges does not cover
 * (clang emits no aranges by default). */
typedef struct cu_range {
  Dwarf_Addr lo, hi; /* [lo, hi), DWARF addresses (file addresses minus the DWARF bias) */
  Dwarf_Die die;
} cu_range_t;

struct cts_elfsym {
  Dwfl *dwfl;
  Dwfl_Module *mod;
  Dwfl_Callbacks callbacks;
  char *debuginfo_path; /* libdwfl's, for the callbacks */
  uint64_t base;
  Dwarf_Addr start, end; /* the module's addresses, [start, end) */
  bool dwarf;
  char *prefix; /* strip_prefix with its final '/'; NULL: none */
  size_t prefix_len;
  char *file_name; /* the file's base name, for "FILE+0xOFFSET" */
  cu_range_t *cus; /* sorted by lo; built at the first address aranges do not cover */
  size_t ncus, cus_cap;
  bool cus_built; /* tried already (a table cut short by memory is not rebuilt) */
  char *strings;  /* this call's strings, back to back */
  size_t strings_used, strings_cap;
};

/* Appends str (its part after the strip prefix) to this call's strings; returns its
 * offset, or (size_t)-1 without memory. Offsets, not pointers: the buffer may move. */
static size_t keep(cts_elfsym_t *e, const char *str, bool is_file) {
  if (!str) str = "";
  if (is_file && e->prefix && strncmp(str, e->prefix, e->prefix_len) == 0 && str[e->prefix_len])
    str += e->prefix_len;
  const size_t len = strlen(str) + 1;
  while (e->strings_cap - e->strings_used < len)
    if (cts_grow((void **)&e->strings, &e->strings_cap, e->strings_cap, 1)) return (size_t)-1;
  memcpy(e->strings + e->strings_used, str, len);
  const size_t at = e->strings_used;
  e->strings_used += len;
  return at;
}

static int cu_order(const void *a, const void *b) {
  const cu_range_t *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

/* The range table of every unit, from their own DW_AT_low_pc/high_pc or DW_AT_ranges. */
static void build_cu_table(cts_elfsym_t *e) {
  e->cus_built = true;
  Dwarf_Addr bias;
  for (Dwarf_Die *cu = dwfl_module_nextcu(e->mod, NULL, &bias); cu;
       cu = dwfl_module_nextcu(e->mod, cu, &bias)) {
    Dwarf_Addr base, lo, hi;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0;) {
      if (lo >= hi) continue;
      if (cts_grow((void **)&e->cus, &e->cus_cap, e->ncus, sizeof *e->cus)) return;
      e->cus[e->ncus++] = (cu_range_t){lo, hi, *cu};
    }
  }
  if (e->ncus) qsort(e->cus, e->ncus, sizeof *e->cus, cu_order);
}

/* The unit holding the DWARF address @p a: aranges first, then the range table (ranges
 * of different units never overlap in a sane file; in a hostile one any match will do). */
static bool find_cu(cts_elfsym_t *e, Dwarf_Addr addr, Dwarf_Die *cu, Dwarf_Addr *bias) {
  Dwarf_Die *const d = dwfl_module_addrdie(e->mod, addr, bias);
  if (d) {
    *cu = *d;
    return true;
  }
  if (!dwfl_module_getdwarf(e->mod, bias)) return false;
  if (!e->cus_built) build_cu_table(e);
  const Dwarf_Addr a = addr - *bias;
  size_t lo = 0, hi = e->ncus; /* the first range starting above a is at hi */
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (e->cus[mid].lo <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Ranges are not nested, but a unit's later range may start inside an earlier, longer
   * one of another unit in odd files: look back a few. */
  for (size_t i = lo, steps = 0; i > 0 && steps < 8; i--, steps++)
    if (a < e->cus[i - 1].hi) {
      *cu = e->cus[i - 1].die;
      return true;
    }
  return false;
}

/* The scopes at @p a (a DWARF address) that are functions, innermost first: inlined
 * subroutines, then the subprogram that holds them. dwarf_getscopes continues an inlined
 * subroutine with the scopes of its abstract definition; the caller it was inlined into is
 * the innermost scope's physical parent, which dwarf_getscopes_die gives. */
static size_t function_scopes(Dwarf_Die *cu, Dwarf_Addr a, Dwarf_Die *fn, size_t max) {
  Dwarf_Die *scopes = NULL;
  const int nlex = dwarf_getscopes(cu, a, &scopes);
  if (nlex <= 0) {
    free(scopes);
    return 0;
  }
  Dwarf_Die inner = scopes[0];
  free(scopes);
  scopes = NULL;
  const int n = dwarf_getscopes_die(&inner, &scopes);
  size_t k = 0;
  for (int i = 0; i < n && k < max; i++) {
    const int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
    fn[k++] = scopes[i];
    if (tag == DW_TAG_subprogram) break;
  }
  free(scopes);
  return k;
}

static uint32_t to_u32(Dwarf_Word v) {
  return v > UINT32_MAX ? 0 : (uint32_t)v;
}

/* One location, with its strings as offsets until the end of the call. */
typedef struct pending {
  uint32_t line, column;
  size_t file, name;
} pending_t;

/* The levels at @p addr (a file address) from DWARF, innermost first: the innermost at
 * the address's own row of the line table, each outer one at the call it inlined. 0 when
 * DWARF has no function there. */
static size_t dwarf_levels(cts_elfsym_t *e, Dwarf_Addr addr, pending_t *lv, size_t max) {
  Dwarf_Die cu;
  Dwarf_Addr bias = 0;
  if (!find_cu(e, addr, &cu, &bias)) return 0;
  Dwarf_Die fn[MAX_LEVELS];
  const size_t nfn = function_scopes(&cu, addr - bias, fn, MAX_LEVELS < max ? MAX_LEVELS : max);
  if (nfn == 0) return 0;
  int line = 0, column = 0;
  const char *file = NULL;
  Dwarf_Line *const row = dwarf_getsrc_die(&cu, addr - bias);
  if (row) {
    file = dwarf_linesrc(row, NULL, NULL);
    dwarf_lineno(row, &line);
    dwarf_linecol(row, &column);
  }
  Dwarf_Files *files = NULL;
  size_t nfiles = 0;
  if (dwarf_getsrcfiles(&cu, &files, &nfiles) != 0) files = NULL;
  for (size_t i = 0; i < nfn; i++) {
    const char *name = dwarf_diename(&fn[i]);
    if (i > 0) {
      /* Level i calls the inlined level i - 1: its line is that call's. */
      Dwarf_Attribute at;
      Dwarf_Word f = 0, l = 0, c = 0;
      dwarf_formudata(dwarf_attr(&fn[i - 1], DW_AT_call_file, &at), &f);
      dwarf_formudata(dwarf_attr(&fn[i - 1], DW_AT_call_line, &at), &l);
      dwarf_formudata(dwarf_attr(&fn[i - 1], DW_AT_call_column, &at), &c);
      file = files && f < nfiles ? dwarf_filesrc(files, f, NULL, NULL) : NULL;
      line = (int)to_u32(l);
      column = (int)to_u32(c);
    }
    lv[i].line = line > 0 ? (uint32_t)line : 0;
    lv[i].column = column > 0 ? (uint32_t)column : 0;
    lv[i].file = keep(e, file, true);
    lv[i].name = keep(e, name ? name : "??", false);
    if (lv[i].file == (size_t)-1 || lv[i].name == (size_t)-1) return 0;
  }
  return nfn;
}

cts_elfsym_result_t cts_elfsym_resolve(cts_elfsym_t *e, uint64_t code, cts_mt_location_t *out,
                                       size_t max, size_t *n) {
  *n = 0;
  e->strings_used = 0;
  /* A return address points after its call: look the call itself up. */
  if (max == 0 || code <= e->base) return CTS_ELFSYM_OUTSIDE;
  const Dwarf_Addr addr = code - 1 - e->base;
  if (addr < e->start || addr >= e->end) return CTS_ELFSYM_OUTSIDE;

  pending_t lv[MAX_LEVELS];
  cts_elfsym_result_t result = CTS_ELFSYM_LINE;
  size_t k = e->dwarf ? dwarf_levels(e, addr, lv, max) : 0;
  if (k == 0) {
    /* No function in DWARF here (assembly, a unit built without -g, no DWARF at all): the
     * symbol table's function, with the line table's row if there is one. */
    e->strings_used = 0;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(e->mod, addr, &off, &sym, NULL, NULL, NULL);
    int line = 0, column = 0;
    const char *file = NULL;
    Dwfl_Line *const row = e->dwarf ? dwfl_module_getsrc(e->mod, addr) : NULL;
    if (row) file = dwfl_lineinfo(row, NULL, &line, &column, NULL, NULL);
    char offset_name[320];
    if (!name || !name[0]) {
      /* "kernel.elf+0x1f0": inside the file, in no function. */
      snprintf(offset_name, sizeof offset_name, "%.255s+0x%llx", e->file_name,
               (unsigned long long)(addr - e->start));
      name = offset_name;
      result = CTS_ELFSYM_OFFSET;
    } else {
      result = file && line > 0 ? CTS_ELFSYM_LINE : CTS_ELFSYM_SYMBOL;
    }
    lv[0].line = file && line > 0 ? (uint32_t)line : 0;
    lv[0].column = file && column > 0 ? (uint32_t)column : 0;
    lv[0].file = keep(e, file ? file : e->file_name, file != NULL);
    lv[0].name = keep(e, name, false);
    if (lv[0].file == (size_t)-1 || lv[0].name == (size_t)-1) return CTS_ELFSYM_OUTSIDE;
    k = 1;
  }
  /* Outermost first, as memtrace wants them (memtrace.md §7). */
  for (size_t i = 0; i < k; i++) {
    const pending_t *const p = &lv[k - 1 - i];
    out[i] = (cts_mt_location_t){.line = p->line,
                                 .start_char = p->column,
                                 .end_char = p->column,
                                 .filename = e->strings + p->file,
                                 .defname = e->strings + p->name};
  }
  *n = k;
  return result;
}

bool cts_elfsym_has_dwarf(const cts_elfsym_t *e) {
  return e->dwarf;
}

/* Whether the symbol table names anything here: a stripped position-independent file keeps
 * a .dynsym, which may hold only the symbols it imports. */
static bool has_defined_symbols(Dwfl_Module *mod) {
  const int n = dwfl_module_getsymtab(mod);
  for (int i = 0; i < n; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    const char *const name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
    const int type = GELF_ST_TYPE(sym.st_info);
    if (name && name[0] && shndx != SHN_UNDEF &&
        (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE))
      return true;
  }
  return false;
}

int cts_elfsym_open(cts_elfsym_t **out, const char *path, uint64_t base, const char *strip_prefix,
                    char *msg, size_t msg_size) {
  *out = NULL;
  /* Opened here first for a clear error; libdwfl then opens the file itself. */
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = -errno;
    set_msg(msg, msg_size, "cannot open '%s': %s", path, strerror(-err));
    return err;
  }
  close(fd);
  cts_elfsym_t *const e = calloc(1, sizeof *e);
  if (!e) return CTS_E_NOMEM;
  e->base = base;
  const char *const slash = strrchr(path, '/');
  e->file_name = strdup(slash ? slash + 1 : path);
  if (strip_prefix && strip_prefix[0]) {
    const size_t len = strlen(strip_prefix);
    e->prefix = malloc(len + 2);
    if (e->prefix) {
      memcpy(e->prefix, strip_prefix, len + 1);
      if (strip_prefix[len - 1] != '/') memcpy(e->prefix + len, "/", 2);
      e->prefix_len = strlen(e->prefix);
    }
  }
  if (!e->file_name || (strip_prefix && strip_prefix[0] && !e->prefix)) {
    cts_elfsym_close(e);
    return CTS_E_NOMEM;
  }
  /* Separate debug files are looked for by build id on this machine only: never through
   * debuginfod, which would go to the network. */
  e->callbacks.find_debuginfo = dwfl_build_id_find_debuginfo;
  e->callbacks.section_address = dwfl_offline_section_address;
  e->callbacks.debuginfo_path = &e->debuginfo_path;
  e->dwfl = dwfl_begin(&e->callbacks);
  if (!e->dwfl) {
    set_msg(msg, msg_size, "%s: libdwfl: %s", path, dwfl_errmsg(-1));
    cts_elfsym_close(e);
    return CTS_E_NOMEM;
  }
  dwfl_report_begin(e->dwfl);
  /* At its own addresses (base 0): the bias is subtracted from each code here, the same
   * way for executables and position-independent files. */
  e->mod = dwfl_report_elf(e->dwfl, e->file_name, path, -1, 0, false);
  dwfl_report_end(e->dwfl, NULL, NULL);
  if (!e->mod) {
    set_msg(msg, msg_size, "%s: not a readable ELF file (%s)", path, dwfl_errmsg(-1));
    cts_elfsym_close(e);
    return CTS_E_INVAL;
  }
  GElf_Addr bias;
  Elf *const elf = dwfl_module_getelf(e->mod, &bias);
  GElf_Ehdr ehdr;
  if (!elf || !gelf_getehdr(elf, &ehdr) || (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN)) {
    set_msg(msg, msg_size, "%s: %s", path,
            elf ? "not an ELF executable or shared object (a relocatable object's addresses "
                  "are not final)"
                : dwfl_errmsg(-1));
    cts_elfsym_close(e);
    return CTS_E_INVAL;
  }
  dwfl_module_info(e->mod, NULL, &e->start, &e->end, NULL, NULL, NULL, NULL);
  Dwarf_Addr dbias;
  e->dwarf = dwfl_module_getdwarf(e->mod, &dbias) != NULL;
  if (!e->dwarf && !has_defined_symbols(e->mod)) {
    set_msg(msg, msg_size, "%s: %s", path,
            "no DWARF debug information and no symbol table: nothing names its addresses");
    cts_elfsym_close(e);
    return CTS_E_INVAL;
  }
  *out = e;
  return 0;
}

void cts_elfsym_close(cts_elfsym_t *e) {
  if (!e) return;
  if (e->dwfl) dwfl_end(e->dwfl);
  free(e->debuginfo_path);
  free(e->prefix);
  free(e->file_name);
  free(e->cus);
  free(e->strings);
  free(e);
}

#else /* !CTS_HAVE_LIBDW */

struct cts_elfsym {
  int unused;
};

int cts_elfsym_open(cts_elfsym_t **out, const char *path, uint64_t base, const char *strip_prefix,
                    char *msg, size_t msg_size) {
  (void)base, (void)strip_prefix;
  *out = NULL;
  set_msg(msg, msg_size, "%s: %s", path,
          "ctfscope was built without libdw (elfutils): ELF files cannot be read");
  return CTS_E_INVAL;
}

bool cts_elfsym_has_dwarf(const cts_elfsym_t *e) {
  (void)e;
  return false;
}

cts_elfsym_result_t cts_elfsym_resolve(cts_elfsym_t *e, uint64_t code, cts_mt_location_t *out,
                                       size_t max, size_t *n) {
  (void)e, (void)code, (void)out, (void)max;
  *n = 0;
  return CTS_ELFSYM_OUTSIDE;
}

void cts_elfsym_close(cts_elfsym_t *e) {
  free(e);
}
#endif
