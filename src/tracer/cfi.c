/* SPDX-License-Identifier: MIT */
/* The DWARF call frame information reader (cfi.h): moved here from unwind.c as it was. */
#define _GNU_SOURCE
#include "cfi.h"

#include "common/compiler.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)

/* ---- the function holding an address ------------------------------------------------------ */

static uint32_t load_u32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Whether the module's .eh_frame_hdr begins inside its mapping with room for its 12 fixed
 * bytes: where it lies comes from the module's program headers, which a corrupt module
 * can get wrong. */
static bool header_in_mapping(const struct dl_find_object *o) {
  const uintptr_t h = (uintptr_t)o->dlfo_eh_frame, end = (uintptr_t)o->dlfo_map_end;
  return h && h >= (uintptr_t)o->dlfo_map_start && h <= end && end - h >= 12u;
}

uintptr_t cts__cfi_function_entry(const struct dl_find_object *o, uintptr_t addr,
                                  const unsigned char **fde_out) {
  const unsigned char *const h = o->dlfo_eh_frame;
  /* Version 1; the frame pointer encoded as 4 bytes; a udata4 count; a table of datarel
   * sdata4 pairs (what binutils and lld write). */
  if (!header_in_mapping(o) || h[0] != 1 || (h[1] & 0x0Fu) != 0x0Bu || h[2] != 0x03u ||
      h[3] != 0x3Bu)
    return 0;
  const uint32_t count = load_u32(h + 8);
  const unsigned char *const table = h + 12;
  if ((uintptr_t)table + (uintptr_t)count * 8u > (uintptr_t)o->dlfo_map_end) return 0;
  uint32_t lo = 0, hi = count; /* the first entry above addr is in [lo, hi] */
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2u;
    const uintptr_t at = (uintptr_t)h + (uintptr_t)(intptr_t)(int32_t)load_u32(table + mid * 8u);
    if (at <= addr)
      lo = mid + 1u;
    else
      hi = mid;
  }
  if (lo == 0) return 0;
  const unsigned char *const e = table + (lo - 1u) * 8u;
  const uintptr_t entry = (uintptr_t)h + (uintptr_t)(intptr_t)(int32_t)load_u32(e);
  const unsigned char *const fde = h + (intptr_t)(int32_t)load_u32(e + 4);
  /* The FDE's pc_begin, pcrel sdata4 as the table's (checked: any other encoding and the
   * answer is "unknown"), then its pc_range. */
  if ((uintptr_t)fde < (uintptr_t)o->dlfo_map_start ||
      (uintptr_t)fde + 16u > (uintptr_t)o->dlfo_map_end)
    return 0;
  const uintptr_t begin = (uintptr_t)(fde + 8) + (uintptr_t)(intptr_t)(int32_t)load_u32(fde + 8);
  if (begin != entry || addr - entry >= load_u32(fde + 12)) return 0;
  *fde_out = fde;
  return entry;
}

/* ---- the call frame information of a function --------------------------------------------- */

/* How many rows DW_CFA_remember_state can stack. */
enum { CFI_STACK = 4 };

typedef struct cfi_reader {
  const unsigned char *p, *end;
  bool bad;
} cfi_reader_t;

/* A LEB128 number: unsigned, or signed (sign-extended from its last byte's bit 6). */
static CTS_FORCE_INLINE uint64_t cfi_leb(cfi_reader_t *r, bool is_signed) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (r->p >= r->end || shift > 63) {
      r->bad = true;
      return 0;
    }
    const unsigned char b = *r->p++;
    v |= (uint64_t)(b & 0x7Fu) << shift;
    if (!(b & 0x80u)) {
      if (is_signed && shift + 7 < 64 && (b & 0x40u)) v |= ~(uint64_t)0 << (shift + 7);
      return v;
    }
  }
}

static CTS_FORCE_INLINE uint64_t cfi_uleb(cfi_reader_t *r) {
  return cfi_leb(r, false);
}

static CTS_FORCE_INLINE int64_t cfi_sleb(cfi_reader_t *r) {
  return (int64_t)cfi_leb(r, true);
}

static CTS_FORCE_INLINE uint64_t cfi_fixed(cfi_reader_t *r, size_t n) {
  if ((size_t)(r->end - r->p) < n) {
    r->bad = true;
    return 0;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8u * i);
  r->p += n;
  return v;
}

/* A block that begins with its length (augmentation data): *block gets it, r moves past. */
static bool cfi_block(cfi_reader_t *r, cfi_reader_t *block) {
  const uint64_t len = cfi_uleb(r);
  if (r->bad || len > (uint64_t)(r->end - r->p)) return false;
  *block = (cfi_reader_t){r->p, r->p + len, false};
  r->p += len;
  return true;
}

/* An operand times the data alignment factor; an operand out of range (no real CFI has
 * one: offsets are a few thousand bytes at most) marks the reader bad, without overflow. */
static CTS_FORCE_INLINE int64_t cfi_scaled(cfi_reader_t *r, uint64_t operand, bool is_signed,
                                           int64_t factor) {
  const int64_t limit = INT64_C(1) << 40, factor_limit = INT64_C(1) << 20;
  const int64_t v = (int64_t)operand;
  const bool in_range = is_signed ? v >= -limit && v <= limit : operand <= (uint64_t)limit;
  if (!in_range || factor < -factor_limit || factor > factor_limit) {
    r->bad = true;
    return 0;
  }
  return v * factor;
}

typedef struct cfi_run {
  uint64_t code_align;
  int64_t data_align;
  uintptr_t loc, target;
  cfi_row_t row, initial; /* `initial`: after the CIE's instructions (DW_CFA_restore) */
  cfi_row_t stack[CFI_STACK];
  unsigned depth;
  bool reached; /* an advance went past the target: the row is the target's */
} cfi_run_t;

/* Row's rule for register `reg`, if it is one that is followed (%rbp, the return address). */
static cfi_rule_t *cfi_rule_of(cfi_row_t *row, uint64_t reg) {
  return reg == DW_REG_RBP ? &row->rbp : reg == DW_REG_RA ? &row->ra : NULL;
}

static void cfi_set(cfi_run_t *c, uint64_t reg, cfi_rule_kind_t kind, int64_t off) {
  cfi_rule_t *const rule = cfi_rule_of(&c->row, reg);
  if (rule) *rule = (cfi_rule_t){kind, off};
}

static void cfi_restore(cfi_run_t *c, uint64_t reg) {
  cfi_rule_t *const rule = cfi_rule_of(&c->row, reg);
  if (rule) *rule = *cfi_rule_of(&c->initial, reg);
}

/* Runs the instruction at r->p (there is one); false on anything not understood. */
static CTS_FORCE_INLINE bool cfi_step(cfi_run_t *c, cfi_reader_t *r) {
  {
    const unsigned char op = *r->p++;
    uint64_t delta = 0, reg = 0;
    bool advance = false;
    switch (op >> 6) {
      case 1: /* DW_CFA_advance_loc */
        delta = op & 0x3Fu;
        advance = true;
        break;
      case 2: /* DW_CFA_offset */
        reg = op & 0x3Fu;
        cfi_set(c, reg, CFI_RULE_SAVED, cfi_scaled(r, cfi_uleb(r), false, c->data_align));
        break;
      case 3: /* DW_CFA_restore */
        cfi_restore(c, op & 0x3Fu);
        break;
      default:
        switch (op) {
          case 0x00: /* nop */
            break;
          case 0x02: /* advance_loc1, 2, 4 */
          case 0x03:
          case 0x04:
            delta = cfi_fixed(r, op == 0x02 ? 1u : op == 0x03 ? 2u : 4u);
            advance = true;
            break;
          case 0x05: /* offset_extended */
            reg = cfi_uleb(r);
            cfi_set(c, reg, CFI_RULE_SAVED, cfi_scaled(r, cfi_uleb(r), false, c->data_align));
            break;
          case 0x11: /* offset_extended_sf */
            reg = cfi_uleb(r);
            cfi_set(c, reg, CFI_RULE_SAVED,
                    cfi_scaled(r, (uint64_t)cfi_sleb(r), true, c->data_align));
            break;
          case 0x2F: /* GNU_negative_offset_extended */
            reg = cfi_uleb(r);
            cfi_set(c, reg, CFI_RULE_SAVED, -cfi_scaled(r, cfi_uleb(r), false, c->data_align));
            break;
          case 0x06: /* restore_extended */
            cfi_restore(c, cfi_uleb(r));
            break;
          case 0x07: /* undefined */
            cfi_set(c, cfi_uleb(r), CFI_RULE_UNDEFINED, 0);
            break;
          case 0x08: /* same_value: not saved (any more) */
            cfi_set(c, cfi_uleb(r), CFI_RULE_OTHER, 0);
            break;
          case 0x09: /* register: in another register, no record */
            reg = cfi_uleb(r);
            (void)cfi_uleb(r);
            cfi_set(c, reg, CFI_RULE_REGISTER, 0);
            break;
          case 0x0A: /* remember_state */
            if (c->depth == CFI_STACK) return false;
            c->stack[c->depth++] = c->row;
            break;
          case 0x0B: /* restore_state: with the CFA rule, as libgcc and libunwind do (gcc
                      * brackets each early epilogue with these two) */
            if (c->depth == 0) return false;
            c->row = c->stack[--c->depth];
            break;
          case 0x0C: /* def_cfa */
            c->row.cfa_reg = cfi_uleb(r);
            c->row.cfa_off = (int64_t)cfi_uleb(r);
            break;
          case 0x12: /* def_cfa_sf */
            c->row.cfa_reg = cfi_uleb(r);
            c->row.cfa_off = cfi_scaled(r, (uint64_t)cfi_sleb(r), true, c->data_align);
            break;
          case 0x0D: /* def_cfa_register */
            c->row.cfa_reg = cfi_uleb(r);
            break;
          case 0x0E: /* def_cfa_offset */
            c->row.cfa_off = (int64_t)cfi_uleb(r);
            break;
          case 0x13: /* def_cfa_offset_sf */
            c->row.cfa_off = cfi_scaled(r, (uint64_t)cfi_sleb(r), true, c->data_align);
            break;
          case 0x2E: /* GNU_args_size */
            (void)cfi_uleb(r);
            break;
          default: /* set_loc, expressions, val_* and the rest */
            return false;
        }
    }
    if (r->bad) return false;
    if (advance) {
      const uint64_t step = delta * c->code_align;
      if (step > c->target - c->loc)
        c->reached = true;
      else
        c->loc += step;
    }
  }
  return true;
}

/* Runs instructions [r->p, r->end); false on anything not understood.
 * A cache miss of the unwinder runs ~370 instructions here (cc1plus's functions: an
 * advance and a CFA offset for each push and pop, a register saved for each push and
 * restored for each pop): those four, with a one-byte operand, are run in this loop with
 * its position, address and target in registers; cfi_step runs the others, with the same
 * effect. */
static bool cfi_execute(cfi_run_t *c, cfi_reader_t *reader) {
  cfi_reader_t local = *reader, *const r = &local; /* (never escapes: cfi_step is inline) */
  const unsigned char *p = r->p, *const end = r->end;
  uintptr_t loc = c->loc;
  const uintptr_t target = c->target;
  const uint64_t code_align = c->code_align;
  /* a register's offset, scaled as cfi_scaled would and within its limits */
  const bool fast_offsets = c->data_align >= -(INT64_C(1) << 20) && c->data_align <= INT64_C(1)
                                                                                         << 20;
  bool ok = true, reached = c->reached;
  while (p < end && !reached) {
    const unsigned char op = *p;
    if ((op & 0xC0u) == 0x40u) { /* DW_CFA_advance_loc */
      p++;
      const uint64_t step = (uint64_t)(op & 0x3Fu) * code_align;
      if (step > target - loc)
        reached = true;
      else
        loc += step;
      continue;
    }
    if ((op & 0xC0u) == 0xC0u) { /* DW_CFA_restore */
      p++;
      cfi_restore(c, op & 0x3Fu);
      continue;
    }
    if (end - p >= 2 && p[1] < 0x80u) { /* a one-byte operand */
      if (op == 0x0Eu) {                /* DW_CFA_def_cfa_offset */
        c->row.cfa_off = (int64_t)p[1];
        p += 2;
        continue;
      }
      if ((op & 0xC0u) == 0x80u && fast_offsets) { /* DW_CFA_offset */
        cfi_rule_t *const rule = cfi_rule_of(&c->row, op & 0x3Fu);
        if (rule) *rule = (cfi_rule_t){CFI_RULE_SAVED, (int64_t)p[1] * c->data_align};
        p += 2;
        continue;
      }
    }
    r->p = p;
    c->loc = loc;
    ok = cfi_step(c, r);
    if (!ok) break;
    p = r->p;
    loc = c->loc;
    reached = c->reached;
  }
  if (ok) {
    r->p = p;
    c->loc = loc;
    c->reached = reached;
  }
  *reader = local;
  return ok;
}

bool cts__cfi_row_at(const struct dl_find_object *o, const unsigned char *fde, uintptr_t entry,
                     uintptr_t pc, cfi_row_t *row, bool *signal) {
  const unsigned char *const map_end = (const unsigned char *)o->dlfo_map_end;
  /* Where .eh_frame begins (.eh_frame_hdr's eh_frame_ptr, pcrel sdata4 as binutils and lld
   * write it): the CIE must lie between there and the FDE, in the same section, and never
   * in a gap of the module's mapping. */
  const unsigned char *const h = o->dlfo_eh_frame;
  if (!header_in_mapping(o) || h[1] != 0x1Bu) return false;
  const unsigned char *const eh_frame = h + 4 + (intptr_t)(int32_t)load_u32(h + 4);
  if ((uintptr_t)eh_frame < (uintptr_t)o->dlfo_map_start) return false;
  const uint32_t fde_len = load_u32(fde);
  if (fde < eh_frame || fde_len == 0 || fde_len == 0xFFFFFFFFu ||
      (size_t)(map_end - fde) - 4u < fde_len)
    return false;
  const unsigned char *const fde_end = fde + 4 + fde_len;
  const uint32_t cie_ptr = load_u32(fde + 4);
  if (cie_ptr == 0 || (size_t)(fde + 4 - eh_frame) < cie_ptr) return false;
  const unsigned char *const cie = fde + 4 - cie_ptr;
  if ((size_t)(map_end - cie) < 9u) return false;
  const uint32_t cie_len = load_u32(cie);
  if (cie_len == 0xFFFFFFFFu || (size_t)(map_end - cie) - 4u < cie_len || load_u32(cie + 4))
    return false;
  cfi_reader_t r = {cie + 8, cie + 4 + cie_len, false};
  const uint64_t version = cfi_fixed(&r, 1);
  if (version != 1 && version != 3) return false;
  const unsigned char *const aug = r.p;
  while (r.p < r.end && *r.p) r.p++;
  if (r.p++ >= r.end) return false;
  cfi_run_t c = {0};
  c.code_align = cfi_uleb(&r);
  c.data_align = cfi_sleb(&r);
  if (version == 1)
    (void)cfi_fixed(&r, 1);
  else
    (void)cfi_uleb(&r);
  /* The augmentation data: pc_begin and pc_range must be 4 bytes (R), as
   * cts__cfi_function_entry read them. */
  bool four_byte_pointers = false;
  *signal = false;
  cfi_reader_t data;
  if (aug[0] == 'z') {
    if (!cfi_block(&r, &data)) return false;
    for (const unsigned char *a = aug + 1; *a; a++) {
      if (*a == 'S') { /* a signal frame: no data */
        *signal = true;
        continue;
      }
      const uint64_t enc = cfi_fixed(&data, 1);
      if (*a == 'R') {
        four_byte_pointers = (enc & 0x0Fu) == 0x03u || (enc & 0x0Fu) == 0x0Bu;
      } else if (*a == 'P') { /* the personality routine's address */
        static const unsigned char size[16] = {8, 0, 2, 4, 8, 0, 0, 0, 0, 0, 2, 4, 8};
        if ((enc & 0x0Fu) == 0x01u || (enc & 0x0Fu) == 0x09u)
          (void)cfi_uleb(&data);
        else if (size[enc & 0x0Fu])
          (void)cfi_fixed(&data, size[enc & 0x0Fu]);
        else
          return false;
      } else if (*a != 'L') { /* L: the LSDA's encoding, read above */
        return false;
      }
      if (data.bad) return false;
    }
  }
  if (!four_byte_pointers || r.bad || c.code_align == 0) return false;
  c.loc = entry;
  c.target = pc;
  if (!cfi_execute(&c, &r) || c.reached) return false;
  c.initial = c.row;
  /* The FDE: length, CIE pointer, pc_begin and pc_range (4 bytes each: checked by
   * cts__cfi_function_entry), augmentation data (z), instructions. */
  r = (cfi_reader_t){fde + 16, fde_end, false};
  if (aug[0] == 'z' && !cfi_block(&r, &data)) return false;
  if (!cfi_execute(&c, &r)) return false;
  *row = c.row;
  return true;
}

bool cts__cfi_keeps_frame_pointer(const struct dl_find_object *o, const unsigned char *fde,
                                  uintptr_t entry, uintptr_t pc) {
  cfi_row_t row;
  bool signal;
  return cts__cfi_row_at(o, fde, entry, pc, &row, &signal) && row.cfa_reg == DW_REG_RBP &&
         row.cfa_off == 16 && row.rbp.kind == CFI_RULE_SAVED && row.rbp.off == -16;
}

#endif /* x86-64 with _dl_find_object */
