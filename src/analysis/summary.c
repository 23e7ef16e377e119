/* SPDX-License-Identifier: MIT */
#include "summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/tracer.h>

#include "../common/compiler.h"
#include "../common/grow.h"
#include "alloc_profile.h"

#if defined(__GNUC__) && !defined(__clang__)
/* gcc pairs two of add_event's sums into one vector add: six instructions for two. */
#pragma GCC optimize("no-tree-slp-vectorize")
#endif

/* Slots of the walk_frames mode's recent-code filter: 32 KiB, within L1/L2 of the decode
 * loop. */
#define RECENT_CODES_BITS 12
#define RECENT_CODES      (1u << RECENT_CODES_BITS)

/* The reader's literal hook: a code entering the backtrace cache. */
static void on_literal(void *user_data, uint64_t code, bool in_backtrace) {
  cts_summary_t *s = user_data;
  s->rare = true;
  if (!in_backtrace) {
    s->walk_frames = true;
    return;
  }
  if (s->walk_frames) return; /* add_event sees the code among the frames */
  if (cts_grow((void **)&s->pending, &s->pending_cap, s->npending, sizeof *s->pending)) {
    s->pending_nomem = true;
    return;
  }
  s->pending[s->npending++] = code;
}

void cts_summary_init(cts_summary_t *s, cts_mt_reader_t *reader) {
  memset(s, 0, sizeof *s);
  cts_u64map_init(&s->codes);
  s->reader = reader;
  cts_mt_reader_set_literal_hook(reader, on_literal, s);
}

void cts_summary_fini(cts_summary_t *s) {
  cts_mt_reader_set_literal_hook(s->reader, NULL, NULL);
  cts_u64map_fini(&s->codes);
  free(s->pending);
  free(s->recent_codes);
  s->pending = NULL;
  s->recent_codes = NULL;
}

/* Whether `code` is one of the tracer's cut markers seen (add_code). */
static bool is_cut_code(const cts_summary_t *s, uint64_t code) {
  return code < CTS_SUMMARY_CUT_CODES && (s->cut_codes[code / 64] >> (code % 64) & 1u);
}

/* A new code that may be a cut marker of ctfscope's tracer: in the first page, with one
 * location of the marker's name (other writers' codes may be small too). From then on the
 * reader delivers every allocation, for add_rare to count the cut ones. */
static void note_cut_code(cts_summary_t *s, uint64_t code, const cts_mt_location_t *locs,
                          size_t n) {
  const size_t prefix = sizeof CTS_TRACER_CUT_NAME_PREFIX - 1;
  if (n != 1 || !locs[0].defname || strncmp(locs[0].defname, CTS_TRACER_CUT_NAME_PREFIX, prefix))
    return;
  s->cut_codes[code / 64] |= UINT64_C(1) << (code % 64);
  s->cut_seen = true;
  cts_mt_reader_count_allocs(s->reader, false);
}

/* Adds code to the distinct codes if new: 0 or -ENOMEM. */
static int add_code(cts_summary_t *s, uint64_t code) {
  bool added;
  if (!cts_u64map_insert(&s->codes, code, 0, &added)) return -ENOMEM;
  if (!added) return 0;
  s->distinct_codes++;
  const cts_mt_location_t *locs;
  size_t n = 0;
  if (cts_mt_reader_lookup_location(s->reader, code, &locs, &n) == 0 && n == 0)
    s->codes_without_locations++;
  else if (CTS_UNLIKELY(code < CTS_SUMMARY_CUT_CODES))
    note_cut_code(s, code, locs, n);
  return 0;
}

/* The walk_frames mode: the codes of the frames after the common prefix, which are those of
 * the domain's previous backtrace, counted then. */
static int add_suffix_codes(cts_summary_t *s, const cts_mt_event_t *ev) {
  if (!s->recent_codes) s->recent_codes = calloc(RECENT_CODES, sizeof *s->recent_codes);
  const size_t known =
      ev->common_prefix < ev->backtrace_len ? (size_t)ev->common_prefix : ev->backtrace_len;
  uint64_t *const recent = s->recent_codes; /* NULL: no filter */
  for (size_t i = known; i < ev->backtrace_len; i++) {
    const uint64_t code = ev->backtrace[i];
    uint64_t *slot = NULL;
    if (recent) {
      slot = &recent[(code * 0x9e3779b97f4a7c15ull) >> (64 - RECENT_CODES_BITS)];
      if (*slot == code && code != 0) continue; /* in the map already */
    }
    if (add_code(s, code)) return -ENOMEM;
    if (slot) *slot = code;
  }
  return 0;
}

static void add_loss_marker(cts_summary_t *s, const cts_mt_event_t *ev) {
  /* Maybe a loss marker of ctfscope's tracer: its code counts the lost events, and its
   * location's name says what it is (other writers' codes may use these bits too). */
  const cts_mt_location_t *locs;
  size_t n = 0;
  const size_t prefix = sizeof CTS_TRACER_LOST_NAME_PREFIX - 1;
  if (cts_mt_reader_lookup_location(s->reader, ev->backtrace[0], &locs, &n) == 0 && n == 1 &&
      locs[0].defname && strncmp(locs[0].defname, CTS_TRACER_LOST_NAME_PREFIX, prefix) == 0) {
    s->loss_markers++;
    s->lost_allocs += CTS_TRACER_LOST_ALLOCS_OF(ev->backtrace[0]);
    s->lost_frees += CTS_TRACER_LOST_FREES_OF(ev->backtrace[0]);
    s->lost_samples += ev->nsamples;
  }
}

/* The rare work of an allocation, out of line (a tail call, so that the common event needs
 * no saved registers): a possible loss marker, then the codes this event brought. Each code
 * in its backtrace is one of its literals or was counted before (the hook's guarantee),
 * unless walk_frames says otherwise. 0 or -ENOMEM. */
CTS_NOINLINE static int add_rare(cts_summary_t *s, const cts_mt_event_t *ev) {
  if (ev->backtrace_len == 1 && ev->backtrace[0] >> 61 == 1) add_loss_marker(s, ev);
  if (s->pending_nomem) return -ENOMEM;
  for (size_t i = 0; i < s->npending; i++)
    if (add_code(s, s->pending[i])) return -ENOMEM;
  s->npending = 0;
  int e = 0;
  if (s->walk_frames) {
    /* Every allocation's frames must be seen from now on: the reader delivers all of them
     * again from the next one (this one is delivered: it brought the literal). */
    cts_mt_reader_count_allocs(s->reader, false);
    e = add_suffix_codes(s, ev);
  }
  /* The codes are all added by now: this allocation's marker may be the first seen. */
  s->rare = s->walk_frames;
  if (s->cut_seen && ev->backtrace_len && is_cut_code(s, ev->backtrace[0])) s->cut_stacks++;
  return e;
}

int cts_summary_add_event(cts_summary_t *s, const cts_mt_event_t *ev) {
  s->events_total++;
  if (!s->have_events)
    s->first_event_us = ev->time_us, s->first_event_offset = ev->offset, s->have_events = true;
  s->last_event_us = ev->time_us;
  s->last_event_offset = ev->offset;
  if (ev->kind == CTS_MT_PROMOTE) {
    s->promote++;
    return 0;
  }
  if (ev->kind == CTS_MT_COLLECT) {
    s->collect++;
    return 0;
  }
  const uint64_t length = ev->length, nsamples = ev->nsamples;
  const uint64_t frames = ev->backtrace_len, prefix = ev->common_prefix;
  const unsigned source = ev->source;
  const unsigned src = source < 3 ? source : 2;
  s->alloc_by_source[src]++;
  s->samples_by_source[src] += nsamples;
  s->sum_length_words += length;
  s->sum_length_x_nsamples += length * nsamples;
  if (length > s->max_length_words) s->max_length_words = length;
  /* What the writer's short form would accept (§8.1), judged on the decoded backtrace:
   * fewer than 256 frames left after the common prefix. Computed without a branch: whether
   * an allocation qualifies follows the trace's mix of short and long forms, which no
   * predictor guesses (a third of these branches were mispredicted). */
  const uint64_t suffix = frames - (prefix < frames ? prefix : frames);
  s->allocs_short_eligible += (uint64_t)((length - 1 < 16) & (source == CTS_MT_SOURCE_MINOR) &
                                         (nsamples == 1) & (suffix < 256));
  s->backtrace_frames_total += frames;
  if (frames > s->backtrace_length_max) s->backtrace_length_max = frames;
  /* A backtrace of one frame may be a loss marker: add_rare() looks. */
  if (CTS_UNLIKELY((frames == 1) | s->rare)) return add_rare(s, ev);
  /* Once a cut marker is known every allocation is delivered (note_cut_code); the marker is
   * the outermost frame. Here rather than in add_rare: its call and checks were 47
   * instructions an allocation of a trace whose every stack is cut, for one compare. */
  if (CTS_UNLIKELY(s->cut_seen)) s->cut_stacks += frames && is_cut_code(s, ev->backtrace[0]);
  return 0;
}

void cts_summary_count_events(cts_summary_t *s) {
  cts_mt_reader_count_frees(s->reader, true);
  cts_mt_reader_count_allocs(s->reader, !s->walk_frames);
}

/* Adds `n` events the reader counted, whose first and last in file order are at the
 * given offsets and times, to the events delivered or counted so far. */
static void add_counted_span(cts_summary_t *s, uint64_t n, uint64_t first_offset, uint64_t first_us,
                             uint64_t last_offset, uint64_t last_us) {
  if (!s->have_events || first_offset < s->first_event_offset)
    s->first_event_us = first_us, s->first_event_offset = first_offset;
  if (!s->have_events || last_offset > s->last_event_offset)
    s->last_event_us = last_us, s->last_event_offset = last_offset;
  s->have_events = true;
  s->events_total += n;
}

/* Adds the allocations the reader counted (cts_mt_reader_count_allocs()). */
static void finish_allocs(cts_summary_t *s) {
  cts_mt_alloc_counts_t a;
  cts_mt_reader_alloc_counts(s->reader, &a);
  const uint64_t n = a.allocs[0] + a.allocs[1] + a.allocs[2];
  if (n == 0) return;
  for (unsigned i = 0; i < 3; i++) {
    s->alloc_by_source[i] += a.allocs[i];
    s->samples_by_source[i] += a.samples[i];
  }
  s->sum_length_words += a.sum_length_words;
  s->sum_length_x_nsamples += a.sum_length_x_nsamples;
  if (a.max_length_words > s->max_length_words) s->max_length_words = a.max_length_words;
  s->allocs_short_eligible += a.short_form_eligible;
  s->backtrace_frames_total += a.frames_total;
  if (a.frames_max > s->backtrace_length_max) s->backtrace_length_max = a.frames_max;
  add_counted_span(s, n, a.first_offset, a.first_time_us, a.last_offset, a.last_time_us);
}

void cts_summary_finish(cts_summary_t *s) {
  finish_allocs(s);
  cts_mt_free_counts_t f;
  cts_mt_reader_free_counts(s->reader, &f);
  const uint64_t n = f.promote + f.collect;
  if (n == 0) return;
  add_counted_span(s, n, f.first_offset, f.first_time_us, f.last_offset, f.last_time_us);
  s->promote += f.promote;
  s->collect += f.collect;
}

void cts_summary_add_packet(cts_summary_t *s, const cts_mt_packet_t *p) {
  s->packets_total++;
  if ((unsigned)p->kind < 6) s->packets_by_kind[p->kind]++;
  if (p->kind != CTS_MT_PACKET_TRUNCATED && p->kind != CTS_MT_PACKET_SKIPPED &&
      p->time_end_us > s->end_us)
    s->end_us = p->time_end_us;
}

uint64_t cts_summary_allocs(const cts_summary_t *s) {
  return s->alloc_by_source[0] + s->alloc_by_source[1] + s->alloc_by_source[2];
}

uint64_t cts_summary_samples(const cts_summary_t *s) {
  return s->samples_by_source[0] + s->samples_by_source[1] + s->samples_by_source[2];
}

double cts_summary_estimated_bytes(const cts_summary_t *s, const cts_mt_info_t *info) {
  return cts_est_clamp((double)cts_summary_samples(s) / info->sample_rate *
                       (info->word_size / 8.0));
}

double cts_summary_backtrace_mean(const cts_summary_t *s) {
  const uint64_t n = cts_summary_allocs(s);
  return n ? (double)s->backtrace_frames_total / (double)n : 0.0;
}
