/* SPDX-License-Identifier: MIT */
#include "summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ctfscope/tracer.h>

#include "alloc_profile.h"

/* Slots of the recent-code filter: 32 KiB, within L1/L2 of the decode loop. */
#define RECENT_CODES_BITS 12
#define RECENT_CODES      (1u << RECENT_CODES_BITS)

void cts_summary_init(cts_summary_t *s, const cts_mt_reader_t *reader) {
  memset(s, 0, sizeof *s);
  cts_u64map_init(&s->codes);
  s->reader = reader;
  s->recent_codes = calloc(RECENT_CODES, sizeof *s->recent_codes); /* NULL: no filter */
}

void cts_summary_fini(cts_summary_t *s) {
  cts_u64map_fini(&s->codes);
  free(s->recent_codes);
  s->recent_codes = NULL;
}

int cts_summary_add_event(cts_summary_t *s, const cts_mt_event_t *ev) {
  s->events_total++;
  if (!s->have_events) s->first_event_us = ev->time_us, s->have_events = true;
  s->last_event_us = ev->time_us;
  if (ev->kind == CTS_MT_PROMOTE) {
    s->promote++;
    return 0;
  }
  if (ev->kind == CTS_MT_COLLECT) {
    s->collect++;
    return 0;
  }
  const unsigned src = ev->source < 3 ? ev->source : 2;
  s->alloc_by_source[src]++;
  s->samples_by_source[src] += ev->nsamples;
  s->sum_length_words += ev->length;
  s->sum_length_x_nsamples += ev->length * ev->nsamples;
  if (ev->length > s->max_length_words) s->max_length_words = ev->length;
  /* What the writer's short form would accept (§8.1), judged on the decoded backtrace:
   * fewer than 256 frames left after the common prefix. */
  if (ev->length >= 1 && ev->length <= 16 && ev->source == CTS_MT_SOURCE_MINOR &&
      ev->nsamples == 1 &&
      (ev->common_prefix >= ev->backtrace_len || ev->backtrace_len - ev->common_prefix < 256))
    s->allocs_short_eligible++;
  if (ev->backtrace_len == 1 && ev->backtrace[0] >> 61 == 1) {
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
  s->backtrace_frames_total += ev->backtrace_len;
  if (ev->backtrace_len > s->backtrace_length_max) s->backtrace_length_max = ev->backtrace_len;
  /* The first common_prefix frames are those of the domain's previous backtrace, whose codes
   * were counted then: only the suffix can hold new codes. */
  const size_t known =
      ev->common_prefix < ev->backtrace_len ? (size_t)ev->common_prefix : ev->backtrace_len;
  uint64_t *const recent = s->recent_codes;
  for (size_t i = known; i < ev->backtrace_len; i++) {
    const uint64_t code = ev->backtrace[i];
    uint64_t *slot = NULL;
    if (recent) {
      slot = &recent[(code * 0x9e3779b97f4a7c15ull) >> (64 - RECENT_CODES_BITS)];
      if (*slot == code && code != 0) continue; /* in the map already */
    }
    bool added;
    if (!cts_u64map_insert(&s->codes, code, 0, &added)) return -ENOMEM;
    if (slot) *slot = code;
    if (!added) continue;
    s->distinct_codes++;
    const cts_mt_location_t *locs;
    size_t n = 0;
    if (cts_mt_reader_lookup_location(s->reader, code, &locs, &n) == 0 && n == 0)
      s->codes_without_locations++;
  }
  return 0;
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
