/* SPDX-License-Identifier: MIT */
/* A memtrace trace's allocation profile, built in one streaming pass from the reader's
 * events: allocation sites and stacks (sites.h), the table of live sampled blocks (keyed
 * by object id; its size is the number of blocks live at once, never the trace's length),
 * size and lifetime histograms (hist.h), and the heap figures memtrace's identify reports
 * (minor/major allocation, promotion and collection).
 *
 * All byte figures are estimates: samples / sample rate × word size
 * (cts_alloc_profile_bytes_per_sample()). Task traces will feed the same sites.h structures from
 * their own driver; nothing here is needed for them. */
#ifndef CTS_ALLOC_PROFILE_H
#define CTS_ALLOC_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>

#include "hist.h"
#include "live_table.h"
#include "sites.h"
#include "u64map.h"

typedef struct cts_alloc_profile_config {
  /* Intern backtraces into sites (needs backtraces decoded). Without it the trie holds no
   * figures, not even the root's: only stacks.live_samples, peak_samples and peak_time_us
   * (the heap's live total, its peak and when) are kept. */
  bool stacks;
  bool leaf_only;       /* with stacks: intern only the allocation point (flat views) */
  bool history;         /* keep live samples per site over time (leaks) */
  uint32_t max_nodes;   /* stack node budget (cts_stacks_t.max_nodes), 0 = default (10 Mi) */
  bool skip_histograms; /* leave the size and lifetime histograms empty (they cost ~10%) */
  /* Leave life_samples (lifetimes in samples allocated meanwhile) empty, for a view that
   * never prints it (the report: only stats does); size_words and life_us are kept. Each
   * collection then spares that histogram's update. */
  bool skip_life_samples;
  /* Keep only the buckets (blocks and samples by bucket) of the size and lifetime
   * histograms, for a view that prints them alone (the report): their totals, extremes and
   * sums are then empty and must not be read (cts_hist_add_to_bucket). Honoured with
   * live_by_site and skip_life_samples (the report's configuration: the copies of the
   * allocation and collection paths that test it); elsewhere the histograms stay whole. */
  bool histogram_buckets_only;
  /* With stacks: each backtrace cut by cts_fold_cut (fold.h) before it is interned. */
  struct cts_fold *fold;
  /* Only what the allocation events give, for a view that prints allocated figures alone
   * (export -f folded --value bytes|count|samples): each node's allocs, samples and
   * est_allocs, the totals by source, est_allocs_total and the time span. No table of live
   * blocks is kept and collects and promotions change nothing but the time span, so every
   * live, peak and collected figure (the nodes', stacks.live_samples, peak_samples,
   * live_blocks, collected_*, promoted_*, unknown_*) stays 0, the histograms of lifetimes
   * stay empty, cts_alloc_profile_ended() is always false and cts_alloc_profile_next_live()
   * finds no block. The live side is most of what the profile costs beyond interning the
   * stacks where blocks die (bench/JOURNAL.md, "commands that need only allocated figures"). */
  bool allocated_only;
  /* With stacks: no sites (cts_stacks_t.no_sites): for views that never look at sites'
   * figures (folded, pprof; the sites' live_at[] needs history, which needs them). */
  bool no_sites;
  /* With stacks: no node's figures at the heap's peak (cts_stacks_t.no_node_peaks): every
   * node's peak_* stay 0; the heap's own peak (stacks.peak_samples, peak_time_us) is kept. */
  bool no_node_peaks;
  /* With stacks and no_node_peaks, for views that read the nodes' live figures only once
   * the trace is read (leaks, pprof): those figures are made then, by
   * cts_alloc_profile_finish, from the blocks still live, rather than kept on every
   * allocation and free (a free then touches no node record: on a rate-1 trace of python3,
   * where every block dies, export -f pprof took 0.93 x the CPU). Only at a sample rate of 1
   * or more, where every block's weight is 1 and the sums are exact whatever their order,
   * so the figures are the same to the bit; at lower rates the running sums are kept. The
   * heap's live total and peak and the sites' live samples and history are kept as ever.
   * While the figures are deferred (cts_alloc_profile_t.live_at_end), no block is kept for
   * cts_alloc_profile_ended(), which is false: the views that defer never ask it, and its
   * copy cost ~8 instructions a collection (1 % of pprof on python3's trace). */
  bool live_at_end;
  /* With stacks, for a view that reads live and peak figures only summed by allocation
   * point (the report): the nodes keep allocated figures alone, in 20-byte records, and the
   * sites their live and peak samples (cts_stacks_set_live_by_site; sites are kept whatever
   * no_sites says). Every other figure, the heap's live total and peak included, is kept as
   * ever. Not with allocated_only or live_at_end (ignored then). */
  bool live_by_site;
  /* With live_by_site: each allocation's figures go to its node's record at once, none held
   * back (cts_alloc_profile_t.held): the plainer path the held one reproduces, for tests. */
  bool add_at_once;
  /* With live_by_site: the nodes' records from which allocations' figures are held back
   * (tests; 0: alloc_profile.c's HELD_FROM_RECORDS, 2^16). */
  uint32_t held_from_records;
} cts_alloc_profile_config_t;

typedef struct cts_alloc_profile_block cts_alloc_profile_block_t;

/* A live block's figures, as cts_alloc_profile_ended() and cts_alloc_profile_next_live() give them.
 */
typedef struct cts_alloc_profile_live {
  uint64_t time_us, length, samples;
  uint32_t node;  /* stack node */
  uint8_t source; /* as in the trace */
} cts_alloc_profile_live_t;

/* Lengths (words) whose sampling weight is kept in a table. */
#define CTS_ALLOC_PROFILE_WEIGHTS 256u
/* Entries of the direct-mapped memo of longer blocks' weights. */
#define CTS_ALLOC_PROFILE_LONG_WEIGHTS 256u

typedef struct cts_alloc_profile_weight {
  uint64_t length; /* 0 = empty (lengths here are at least CTS_ALLOC_PROFILE_WEIGHTS) */
  double weight;
} cts_alloc_profile_weight_t;

typedef struct cts_alloc_profile {
  cts_alloc_profile_config_t cfg;
  bool have_info;
  double sample_rate;
  unsigned word_bytes;
  uint64_t start_time_us;
  cts_stacks_t stacks;

  /* Live blocks: object id → a 16-byte record (alloc_profile.c), 24 with rec_clock, or for
   * the rare block whose figures do not fit one, an index in blocks. */
  cts_live_table_t live;
  /* The records keep alloc_clock (for life_samples: neither cfg.skip_histograms nor
   * cfg.skip_life_samples), set at init. */
  bool rec_clock;
  uint64_t live_base_us;             /* the first allocation's time: records hold times from it */
  cts_alloc_profile_block_t *blocks; /* pool of live blocks that do not fit, with a free list */
  uint32_t block_count, free_block;
  size_t block_cap;
  uint64_t live_blocks;

  cts_hist_t size_words;   /* every sampled block: its length in words */
  cts_hist_t life_us;      /* collected blocks: µs from allocation to collection */
  cts_hist_t life_samples; /* collected blocks: samples allocated (by anyone) meanwhile */

  uint64_t allocs_by_source[3], samples_by_source[3];
  double est_allocs_total;
  uint64_t promoted_allocs, promoted_samples;
  uint64_t collected_allocs;
  uint64_t collected_minor_samples; /* collected while still in the minor heap */
  uint64_t collected_major_samples; /* collected from the major heap (direct or promoted) */
  uint64_t collected_external_samples;
  uint64_t unknown_collects, unknown_promotes; /* ids not live: ignored (v3 multi-domain) */
  uint64_t alloc_clock;                        /* samples allocated so far */
  bool have_events;
  uint64_t first_event_us, last_event_us;
  /* The trace's end: its last event, or later the end time of a packet read (ctfscope's
   * tracer records the program's end there). 0 until an event or packet says. */
  uint64_t end_us;
  uint32_t last_node; /* stack node of the last allocation added */
  /* cfg.live_at_end in effect (decided by the rate before the first event; a rate below 1
   * set later ends it, the figures then settled): the nodes' live figures wait for
   * cts_alloc_profile_finish. */
  bool live_at_end;
  /* What a collection does, from cfg and live_at_end (alloc_profile.c, collect_mode): one
   * byte tested per collection, the running case first. */
  uint8_t collect_mode;
  /* Which copy of the allocation path runs, from cfg and live_at_end (alloc_profile.c,
   * alloc_mode), so that each is compiled for its configuration. */
  uint8_t alloc_mode;
  bool have_ended; /* the last event ended a live block: ended holds it */
  cts_alloc_profile_live_t ended;
  /* The domain + 1 of the last allocation interned whole (common prefixes are per domain),
   * 0 when none was: one compare an allocation where a flag and the domain took two. */
  uint32_t last_domain_key;
  size_t last_kept; /* frames of the last backtrace interned after the fold */
  double weights[CTS_ALLOC_PROFILE_WEIGHTS]; /* 1 / sampling probability by length; 0 = not yet */
  /* The same for longer blocks, by recent length: their formula (expm1, log1p) cost ~5 % of
   * leaks on gen_trace's default shape, whose large blocks repeat a few lengths. */
  cts_alloc_profile_weight_t long_weights[CTS_ALLOC_PROFILE_LONG_WEIGHTS];
  /* log1p(-sample_rate), set with the rate: the weights' formula takes it once per trace
   * rather than once per length (log1p was ~2 % of stats' CPU on gen_trace's default shape,
   * whose long blocks seldom repeat a length). */
  double log_keep;
  /* By site (the report, diff, flat top), once the nodes' lean records outgrow the cache:
   * the allocations' figures for those records, held back and added up to 1 024 at a time,
   * all their records prefetched first (alloc_profile.c, add_held), so that the records'
   * cache misses overlap. held: the buffer (NULL until holding starts, and after
   * cts_alloc_profile_finish); hold_off: they never will be held (again): another mode,
   * cfg.add_at_once, no memory or no room, or finished. Held back while alloc_mode says. */
  struct cts_alloc_profile_held *held;
  uint32_t held_count;
  bool hold_off;
} cts_alloc_profile_t;

/* Returns 0 or -ENOMEM. */
int cts_alloc_profile_init(cts_alloc_profile_t *p, const cts_alloc_profile_config_t *cfg);
void cts_alloc_profile_fini(cts_alloc_profile_t *p);
/* The trace-info record: must come before the first event. */
void cts_alloc_profile_set_info(cts_alloc_profile_t *p, const cts_mt_info_t *info);
/* One event, in file order. Returns 0, -ENOMEM or CTS_E_LIMIT. */
int cts_alloc_profile_add_event(cts_alloc_profile_t *p, const cts_mt_event_t *ev);
/* An allocation event, interning its whole stack or (leaf_only, with stacks) only its
 * allocation point, whatever cfg.leaf_only says: for a reader that decides per block
 * (leaks' second pass). Returns as cts_alloc_profile_add_event. */
int cts_alloc_profile_add_alloc(cts_alloc_profile_t *p, const cts_mt_event_t *ev, bool leaf_only);
/* A packet read (cts_mt_handler_t.on_packet): its end time may extend the trace. */
void cts_alloc_profile_add_packet(cts_alloc_profile_t *p, const cts_mt_packet_t *pk);
/* The block the last event added ended (collected, or replaced by an allocation of the
 * same id in a corrupt trace): true and *out set, else false (always while cfg.live_at_end
 * defers the live figures). */
bool cts_alloc_profile_ended(const cts_alloc_profile_t *p, cts_alloc_profile_live_t *out);
/* Iterates over the blocks live now, in no particular order (start with a zeroed cursor;
 * no event may be added meanwhile). */
bool cts_alloc_profile_next_live(cts_alloc_profile_t *p, cts_live_cursor_t *cur,
                                 cts_alloc_profile_live_t *out);
/* The next blocks live now, up to max of them, into out, in the order and from the cursor
 * cts_alloc_profile_next_live goes by (the calls may be mixed); how many (0: no more). */
size_t cts_alloc_profile_next_lives(cts_alloc_profile_t *p, cts_live_cursor_t *cur,
                                    cts_alloc_profile_live_t *out, size_t max);
/* Call once after the last event: settles peak and history figures (and with
 * cfg.live_at_end the nodes' live figures), and frees the stack trie's look-up table
 * (cts_stacks_drop_table: interning again rebuilds it). Events added afterwards keep every
 * figure up to date as they come. */
void cts_alloc_profile_finish(cts_alloc_profile_t *p);
/* Adds the figures held back for the nodes' lean records (see held above): before anything
 * reads stacks.lean between events (the report's coarser trees). Cheap when none are held;
 * cts_alloc_profile_finish does it. */
void cts_alloc_profile_settle(cts_alloc_profile_t *p);

/* The largest estimate (bytes, or allocations) any figure takes: 2^64. A trace may declare
 * any rate in (0, 1], and at 5e-324 word size / rate is infinite: estimates are clamped to
 * this so that none is infinite or NaN, sums stay finite and conversions to integers are
 * defined. */
#define CTS_EST_MAX 0x1p64
/* v limited to [0, CTS_EST_MAX]; NaN is 0. */
static inline double cts_est_clamp(double v) {
  return v < CTS_EST_MAX ? (v > 0 ? v : 0) : CTS_EST_MAX;
}
/* v rounded to the nearest integer in [0, UINT64_MAX] (for counts printed as integers). */
static inline uint64_t cts_est_round(double v) {
  v = cts_est_clamp(v + 0.5);
  return v >= CTS_EST_MAX ? UINT64_MAX : (uint64_t)v;
}

/* Estimated bytes per sample: word size in bytes / sample rate (clamped: cts_est_clamp). */
double cts_alloc_profile_bytes_per_sample(const cts_alloc_profile_t *p);
uint64_t cts_alloc_profile_samples(const cts_alloc_profile_t *p);
uint64_t cts_alloc_profile_allocs(const cts_alloc_profile_t *p);
/* Seconds from the trace's start to its end (end_us): the last event (memtrace identify's
 * "runtime"), or the program's end where the writer recorded it. */
double cts_alloc_profile_duration_s(const cts_alloc_profile_t *p);

#endif /* CTS_ALLOC_PROFILE_H */
