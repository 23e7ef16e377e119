/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the DWARF CFI reader of the mixed unwinder (src/tracer/cfi.h), which
 * the tracer runs on the .eh_frame_hdr and .eh_frame of every module a sampled stack
 * passes through. Its contract: it reads nothing outside the module's mapping, whatever
 * those sections hold. The input is a fake mapping and where to look in it:
 *
 *   bytes 0-3   pc, as a signed offset from the mapping's start (little-endian)
 *   bytes 4-5   offset of .eh_frame_hdr in the mapping
 *   bytes 6-7   offset of an FDE to run directly (the FDE look-up checks less than the
 *               interpreter could be given)
 *   the rest    the mapping: [dlfo_map_start, dlfo_map_end)
 *
 * The mapping (at most 64 KiB: the rest is cut) is placed twice, once against an
 * inaccessible page after its end and once against one before its start, so that any read
 * outside it faults in every build, not only under ASan. Besides memory errors and
 * undefined behaviour, the target aborts when
 * the look-up returns an FDE outside the mapping or an entry above the pc, or when
 * cts__cfi_keeps_frame_pointer disagrees with the row cts__cfi_row_at gives. Seeds:
 * tests/fuzz/make_cfi_seeds.py writes mappings with the CFI compilers emit. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "fuzz_data.h"
#include "tracer/cfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)

/* Runs the FDE at fde for pc and checks that the two entry points agree. */
static void run_fde(const struct dl_find_object *o, const unsigned char *fde, uintptr_t entry,
                    uintptr_t pc) {
  cfi_row_t row;
  bool signal = false;
  const bool ok = cts__cfi_row_at(o, fde, entry, pc, &row, &signal);
  const bool framed = ok && row.cfa_reg == DW_REG_RBP && row.cfa_off == 16 &&
                      row.rbp.kind == CFI_RULE_SAVED && row.rbp.off == -16;
  CHECK(cts__cfi_keeps_frame_pointer(o, fde, entry, pc) == framed);
}

#define MAX_MAPPING (64u * 1024u)

/* [guard page][MAX_MAPPING rounded up to pages][guard page], made once. */
static unsigned char *arena_lo, *arena_hi;

static void make_arena(void) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t body = (MAX_MAPPING + page - 1) / page * page;
  unsigned char *const a =
      mmap(NULL, body + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(a != MAP_FAILED);
  CHECK(mprotect(a + page, body, PROT_READ | PROT_WRITE) == 0);
  arena_lo = a + page;
  arena_hi = a + page + body;
}

static void run_mapping(unsigned char *map, size_t n, int32_t pc_off, size_t hdr_off,
                        size_t fde_off) {
  struct dl_find_object o;
  memset(&o, 0, sizeof o);
  o.dlfo_map_start = map;
  o.dlfo_map_end = map + n;
  o.dlfo_eh_frame = map + hdr_off;
  const uintptr_t pc = (uintptr_t)map + (uintptr_t)(intptr_t)pc_off;

  const unsigned char *fde = NULL;
  const uintptr_t entry = cts__cfi_function_entry(&o, pc, &fde);
  if (entry) {
    CHECK(entry <= pc && fde >= map && fde + 16 <= map + n);
    run_fde(&o, fde, entry, pc);
  }
  /* Any FDE-sized place in the mapping, for the entry its pc_begin names. */
  if (fde_off + 16 <= n) {
    const unsigned char *const f = map + fde_off;
    int32_t begin;
    memcpy(&begin, f + 8, sizeof begin);
    const uintptr_t e = (uintptr_t)(f + 8) + (uintptr_t)(intptr_t)begin;
    run_fde(&o, f, e, pc >= e ? pc : e);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_data_t fd = fuzz_data_make(data, size);
  const int32_t pc_off = (int32_t)fuzz_u32(&fd);
  const size_t hdr_off = fuzz_u16(&fd), fde_off = fuzz_u16(&fd);
  const size_t n = fd.left < MAX_MAPPING ? fd.left : MAX_MAPPING;
  if (n == 0 || hdr_off >= n) return 0; /* .eh_frame_hdr lies in the mapping */
  if (!arena_lo) make_arena();
  memcpy(arena_hi - n, fd.p, n); /* against the page after */
  run_mapping(arena_hi - n, n, pc_off, hdr_off, fde_off);
  memmove(arena_lo, arena_hi - n, n); /* against the page before */
  run_mapping(arena_lo, n, pc_off, hdr_off, fde_off);
  return 0;
}

#else /* the reader exists on x86-64 with _dl_find_object only */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)data, (void)size;
  return 0;
}

#endif
