/* SPDX-License-Identifier: MIT */
/* Whole-trace figures of a memtrace trace, computed in one streaming pass: event counts per
 * kind, samples per heap, lengths, estimated bytes, backtrace lengths and packet counts.
 * The same figures memtrace's own tools report (docs/formats/memtrace-dump.md). */
#ifndef CTS_SUMMARY_H
#define CTS_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

#include "u64map.h"

/* Codes below this (the first page) are no return address: where the tracer's markers are. */
#define CTS_SUMMARY_CUT_CODES 4096u

typedef struct cts_summary {
  uint64_t events_total;
  uint64_t alloc_by_source[3]; /* minor, major, external */
  uint64_t promote, collect;
  uint64_t allocs_short_eligible;
  uint64_t samples_by_source[3];
  uint64_t sum_length_words, sum_length_x_nsamples, max_length_words;
  uint64_t backtrace_frames_total, backtrace_length_max;
  uint64_t distinct_codes, codes_without_locations;
  bool have_events;
  uint64_t first_event_us, last_event_us;         /* absolute */
  uint64_t first_event_offset, last_event_offset; /* of those events, in the trace */
  /* The trace's end: the latest end time of a packet read (a writer may record the
   * program's end there, after its last event; ctfscope's tracer does), 0 = none. */
  uint64_t end_us;
  uint64_t packets_total;
  uint64_t packets_by_kind[6]; /* indexed by cts_mt_packet_kind_t */
  uint64_t bytes_read;
  cts_u64map_t codes; /* distinct codes seen in backtraces */
  /* Distinct codes are counted where they enter the reader's backtrace cache, at literal
   * codewords (cts_mt_reader_set_literal_hook), far fewer than frames: the literals of the
   * event being decoded wait here until it is delivered, so that an event the reader
   * rejects adds none. Owned; freed by fini. */
  uint64_t *pending;
  size_t npending, pending_cap;
  bool pending_nomem; /* the hook could not grow pending: add_event fails */
  /* A literal outside any delivered backtrace (the writer truncated the previous one) may
   * reach later backtraces through cache hits without another literal: from then on every
   * frame after the common prefix is checked against codes instead. */
  bool walk_frames;
  /* The next allocation needs the rare path: pending codes, walk_frames or pending_nomem
   * (one test per allocation instead of three). */
  bool rare;
  /* In walk_frames mode, codes known to be in codes, direct-mapped by hash (NULL: no
   * filter, every code asks the map): a backtrace's new suffix mostly repeats recent codes,
   * and one load and compare here is far cheaper than the map's insert. Owned. */
  uint64_t *recent_codes;
  cts_mt_reader_t *reader;
  /* ctfscope's drop-mode loss markers (include/ctfscope/tracer.h, "Drop mode"). */
  uint64_t loss_markers, lost_allocs, lost_frees, lost_samples;
  /* Sampled allocations whose stack ctfscope's tracer cut at its frame limit: their
   * outermost frame is its marker (src/tracer/tracer_state.h, CUT_CODE_BASE), a code in
   * the first page (CTS_SUMMARY_CUT_CODES) whose location is named so. cut_codes: those
   * codes seen, a bit each; once one is seen every allocation is delivered and looked at. */
  uint64_t cut_stacks;
  bool cut_seen;
  uint64_t cut_codes[CTS_SUMMARY_CUT_CODES / 64];
} cts_summary_t;

/* Installs the summary as reader's literal hook (which it must stay until fini), so feed
 * the reader only after this. Not thread-safe: the summary belongs to the reader's thread. */
void cts_summary_init(cts_summary_t *s, cts_mt_reader_t *reader);
/* Frees the summary and removes the hook; call it before destroying the reader. */
void cts_summary_fini(cts_summary_t *s);
/* Has the reader count promotions, collections and most allocations instead of delivering
 * them (cts_mt_reader_count_frees(), cts_mt_reader_count_allocs(): a call and the event's
 * fields less for nearly every event); the figures are the same. Call it before feeding the
 * reader, and cts_summary_finish() after. The summary turns the allocations' counting off
 * itself when it must see every backtrace (walk_frames). */
void cts_summary_count_events(cts_summary_t *s);
/* Adds what the reader counted (see cts_summary_count_events) to the figures, once the trace
 * is read (completely or up to an error); once. A no-op when nothing was counted. */
void cts_summary_finish(cts_summary_t *s);
/* For the reader's on_event, every event in order. Returns 0 or -ENOMEM. */
int cts_summary_add_event(cts_summary_t *s, const cts_mt_event_t *ev);
void cts_summary_add_packet(cts_summary_t *s, const cts_mt_packet_t *p);

uint64_t cts_summary_allocs(const cts_summary_t *s);
uint64_t cts_summary_samples(const cts_summary_t *s);
/* samples / rate × word size in bytes: the unbiased estimate of allocated bytes. */
double cts_summary_estimated_bytes(const cts_summary_t *s, const cts_mt_info_t *info);
double cts_summary_backtrace_mean(const cts_summary_t *s);

#endif /* CTS_SUMMARY_H */
