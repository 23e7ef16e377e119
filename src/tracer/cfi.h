/* SPDX-License-Identifier: MIT */
/* The DWARF call frame information (CFI) reader of the mixed unwinder (unwind.c): finds a
 * function's FDE through a module's .eh_frame_hdr search table and runs its CIE's and
 * FDE's instructions up to an address.
 *
 * gcc -O2 may schedule other instructions between `push %rbp` and `mov %rsp,%rbp`, so a
 * function that keeps frame pointers does not always begin with the two. Its call frame
 * information says it all the same: at the call, the canonical frame address is %rbp + 16
 * and the caller's %rbp is saved at CFA - 16, i.e. %rbp points at a frame record. This
 * reader runs the FDE's instructions (and its CIE's initial ones) up to an address and
 * gives the rules there for the CFA, %rbp and the return address: enough for that
 * question, and for which stack words the outer frames depend on (unwind.c, outer_slots).
 * Anything it does not know (64-bit lengths, expressions, other augmentations than z, R, P,
 * L, S) gives "no": libunwind then does that frame.
 *
 * It reads nothing outside the module's mapping [o->dlfo_map_start, o->dlfo_map_end),
 * whatever its .eh_frame_hdr and .eh_frame hold (tests/fuzz/fuzz_cfi.c checks this), so a
 * corrupt module gives "not understood", never a fault. Nothing here takes a lock or
 * allocates: it runs on the allocating thread with the tracer's guard raised, and is safe
 * from any thread. x86-64 with glibc's _dl_find_object only (the register numbers are
 * x86-64's). */
#ifndef CTS_TRACER_CFI_H
#define CTS_TRACER_CFI_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)

/* DWARF register numbers on x86-64. */
enum { DW_REG_RBP = 6, DW_REG_RSP = 7, DW_REG_RA = 16 };

/* A register's rule, as far as it matters here. */
typedef enum cfi_rule_kind {
  CFI_RULE_OTHER,     /* the same value (or no rule), or one that is not followed */
  CFI_RULE_SAVED,     /* at CFA + off */
  CFI_RULE_UNDEFINED, /* the outermost frame's return address (_start, clone3) */
  CFI_RULE_REGISTER   /* in another register: its value is not known here */
} cfi_rule_kind_t;
typedef struct cfi_rule {
  cfi_rule_kind_t kind;
  int64_t off;
} cfi_rule_t;

/* The rules that matter here: the CFA's register and offset, %rbp's and the return
 * address's. */
typedef struct cfi_row {
  uint64_t cfa_reg;
  int64_t cfa_off;
  cfi_rule_t rbp, ra;
} cfi_row_t;

/* The entry of the function holding `addr` in the module described by `o`, from the
 * module's .eh_frame_hdr search table (the last entry at or below addr, whose FDE must
 * cover addr), and that FDE in *fde_out; 0 if there is none. */
uintptr_t cts__cfi_function_entry(const struct dl_find_object *o, uintptr_t addr,
                                  const unsigned char **fde_out);

/* The rules at address `pc` of the function starting at `entry` whose FDE is `fde` (in
 * module o, as cts__cfi_function_entry gave them; fde's first 16 bytes must lie in the
 * mapping), into *row; *signal says whether the CIE
 * marks a signal frame. False if the CFI holds anything not understood. */
bool cts__cfi_row_at(const struct dl_find_object *o, const unsigned char *fde, uintptr_t entry,
                     uintptr_t pc, cfi_row_t *row, bool *signal);

/* Whether, at address `pc` of the function starting at `entry` whose FDE is `fde` (in
 * module o), %rbp points at the function's frame record. */
bool cts__cfi_keeps_frame_pointer(const struct dl_find_object *o, const unsigned char *fde,
                                  uintptr_t entry, uintptr_t pc);

#endif /* x86-64 with _dl_find_object */
#endif /* CTS_TRACER_CFI_H */
