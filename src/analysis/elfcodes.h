/* SPDX-License-Identifier: MIT */
/* The locations of a trace's codes when it is re-written with its addresses resolved from
 * ELF files (`ctfscope symbolize`): a cts_mt_resolve_cb for the writer that keeps the
 * locations the source trace gave a code, and names the others from the first ELF file
 * whose addresses hold them (elfsym.h). Each distinct code is resolved once and counted
 * once; its locations are kept for the writer's re-sends (a code evicted from its
 * backtrace cache is sent again). Memory: the distinct codes and their strings. Not
 * thread-safe. */
#ifndef CTS_ELFCODES_H
#define CTS_ELFCODES_H

#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

#include "elfsym.h"
#include "u64map.h"

/* Distinct codes by what named them. */
typedef struct cts_elfcodes_stats {
  uint64_t codes;   /* all */
  uint64_t kept;    /* the source trace had locations for them: kept as they were */
  uint64_t line;    /* function, file and line from an ELF file's DWARF */
  uint64_t symbol;  /* a function symbol, no line */
  uint64_t offset;  /* inside an ELF file but in no function: "FILE+0xOFFSET" */
  uint64_t outside; /* in no ELF file: left without locations */
  uint64_t failed;  /* out of memory while keeping them: sent without locations */
} cts_elfcodes_stats_t;

typedef struct cts_elfcodes_entry {
  size_t n;
  cts_mt_location_t *locs; /* strings owned */
} cts_elfcodes_entry_t;

typedef struct cts_elfcodes {
  cts_elfsym_t *const *elves; /* borrowed, tried in order */
  size_t nelves;
  const cts_mt_reader_t *source; /* the trace being re-written; NULL: no locations kept */
  cts_u64map_t index;            /* code → entry */
  cts_elfcodes_entry_t *entries;
  size_t nentries, cap;
  cts_elfcodes_stats_t stats;
} cts_elfcodes_t;

/* Borrows @p elves (the caller keeps them open until fini) and @p source (may be set
 * later: the field is read at each call). */
void cts_elfcodes_init(cts_elfcodes_t *c, cts_elfsym_t *const *elves, size_t nelves,
                       const cts_mt_reader_t *source);

/* cts_mt_resolve_cb with a cts_elfcodes_t as user data. */
size_t cts_elfcodes_resolve(void *elfcodes, uint64_t code, cts_mt_location_t *out, size_t max);

void cts_elfcodes_fini(cts_elfcodes_t *c);

#endif /* CTS_ELFCODES_H */
