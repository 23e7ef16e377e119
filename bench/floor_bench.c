/* SPDX-License-Identifier: MIT */
/* floor_bench: what the analysis commands cannot avoid, one pass over one trace, so that a
 * command's CPU time can be quoted against its floor as well as against the reader's
 * (bench/README.md, issue #20, "survivors-shape commands against their floors").
 *
 * Every mode reads the trace as ctfscope does (cts_os_read_memtrace, backtraces decoded)
 * and then does only:
 *   --decode      nothing: counts events (read_bench --decode -n 1 --warmup 0, for one run)
 *   --live        keeps a 24-byte record per live block in the live-block table the
 *                 commands use (insert on allocation, look-up on promotion, removal on
 *                 collection): the floor of `stats`, which must know each collected
 *                 block's size and time
 *   --live-array  --live with the cheapest table there is: the records in one array indexed
 *                 by the id (a store on allocation, a load and a store on collection; ids
 *                 below 2^27 only, 24 bytes a record up to the highest id, untouched pages
 *                 not resident): what any live table costs at least, whatever the order
 *                 in which ids are freed, where --live is the table the commands use
 *   --sites       --live plus samples and allocations per allocation point (the last
 *                 frame's code, a hash map): the floor of `top`'s flat view and of each of
 *                 `diff`'s two reads
 *   --profile     --sites plus every allocation's whole stack interned in the profile's
 *                 trie (cts_stacks_t homed on paths, as cts_alloc_profile keeps it, with the
 *                 reader's common prefix and a repeated backtrace's node taken inline), its
 *                 node's allocated figures (a lean record), and a 16-byte live record
 *                 (time and length, samples, node, site): the floor of what `report` must do
 *                 per event, its profile's figures without their by-site peaks, the fold,
 *                 the histograms or the report's own records (bench/README.md, wip/h40prof)
 *   --write N     writes N bytes of constant text per event to -o FILE (default
 *                 /dev/null) through a 256 KiB buffer, as an export does: the floor of
 *                 `export -f csv` when N is its output size over the trace's events
 * It prints the events read and a checksum (so that nothing is optimised away). Time the
 * whole process from outside (/usr/bin/time): the commands are timed the same way. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "analysis/live_table.h"
#include "analysis/sites.h"
#include "analysis/u64map.h"
#include "os/os.h"

#define OUT_BUF (256u << 10)

typedef enum {
  MODE_DECODE,
  MODE_LIVE,
  MODE_LIVE_ARRAY,
  MODE_SITES,
  MODE_PROFILE,
  MODE_WRITE
} mode_t_;

/* --live-array: the ids it holds, and its reservation (pages are touched as ids come). */
#define ARRAY_IDS ((uint64_t)1 << 27)

typedef struct rec {
  uint64_t time_us, length;
  uint32_t site, samples;
} rec_t;

/* --profile's live record, 16 bytes as the profile's (alloc_profile.c, live_rec_t): time
 * (40 bits) and length (24); samples (24), node (24) and site (16). */
typedef struct prec {
  uint64_t time_len, meta;
} prec_t;

typedef struct site {
  uint64_t allocs, samples, live_samples;
} site_t;

typedef struct floor_state {
  mode_t_ mode;
  uint64_t events, checksum;
  cts_live_table_t live;
  cts_stacks_t stacks; /* --profile */
  uint64_t base_us;    /* --profile: the first allocation's time, the records' origin */
  bool have_domain;
  uint16_t domain;      /* of the last allocation interned */
  uint64_t unfit;       /* --profile: blocks whose figures overflow a record (none expected) */
  cts_u64map_t site_of; /* allocation point code -> index in sites */
  rec_t *array;         /* --live-array: ARRAY_IDS records, mapped */
  uint64_t array_live;  /* --live-array: live records */
  site_t *sites;
  size_t nsites, sites_cap;
  size_t line;
  char *buf;
  size_t used;
  int fd;
  int err;
} floor_state_t;

static int flush(floor_state_t *s) {
  if (s->used && cts_os_fd_write((void *)(intptr_t)s->fd, s->buf, s->used) != 0) return -EIO;
  s->used = 0;
  return 0;
}

static int site_index(floor_state_t *s, uint64_t code, uint32_t *out) {
  bool added;
  uint64_t *v = cts_u64map_insert(&s->site_of, code, s->nsites, &added);
  if (!v) return -ENOMEM;
  if (added) {
    if (s->nsites == s->sites_cap) {
      const size_t cap = s->sites_cap ? 2 * s->sites_cap : 256;
      site_t *n = realloc(s->sites, cap * sizeof *n);
      if (!n) return -ENOMEM;
      s->sites = n;
      s->sites_cap = cap;
    }
    memset(&s->sites[s->nsites++], 0, sizeof *s->sites);
  }
  *out = (uint32_t)*v;
  return 0;
}

/* --profile: sites[0..n) made (zero) if missing. */
static int grow_sites(floor_state_t *s, size_t n) {
  if (n > s->sites_cap) {
    size_t cap = s->sites_cap ? 2 * s->sites_cap : 256;
    while (cap < n) cap *= 2;
    site_t *grown = realloc(s->sites, cap * sizeof *grown);
    if (!grown) return -ENOMEM;
    s->sites = grown;
    s->sites_cap = cap;
  }
  memset(&s->sites[s->nsites], 0, (n - s->nsites) * sizeof *s->sites);
  s->nsites = n;
  return 0;
}

/* --profile: one event. */
static int profile_event(floor_state_t *s, const cts_mt_event_t *ev) {
  if (ev->kind == CTS_MT_ALLOC) {
    const size_t n = ev->backtrace_len;
    const size_t shared = s->have_domain && s->domain == ev->domain ? ev->common_prefix : 0;
    s->have_domain = true;
    s->domain = ev->domain;
    uint32_t node, site = 0;
    int e = cts_stacks_intern_repeat(&s->stacks, ev->backtrace, n, shared, &node);
    if (!e) e = cts_stacks_alloc_allocated(&s->stacks, node, ev->nsamples, 1.0);
    if (e) return e;
    /* The node's site as the profile asks it (the trie's memo of nodes' sites). */
    site = cts_stacks_site_memo(&s->stacks, node);
    if (site == UINT32_MAX) site = 0; /* (the root: no frame) */
    if (site >= s->nsites && (e = grow_sites(s, site + 1u)) != 0) return e;
    s->sites[site].allocs++;
    s->sites[site].samples += ev->nsamples;
    s->sites[site].live_samples += ev->nsamples;
    if (s->live.count == 0) s->base_us = ev->time_us;
    const uint64_t dt = ev->time_us - s->base_us;
    if ((dt >> 40 | (ev->length | ev->nsamples | node) >> 24 | site >> 16) != 0) s->unfit++;
    bool added;
    prec_t *r = cts_live_insert_unset(&s->live, ev->obj_id, &added);
    if (!r) return -ENOMEM;
    *r = (prec_t){.time_len = (dt & ((1ull << 40) - 1)) | ev->length << 40,
                  .meta = (ev->nsamples & 0xffffffu) | (uint64_t)(node & 0xffffffu) << 24 |
                          (uint64_t)(site & 0xffffu) << 48};
  } else if (ev->kind == CTS_MT_PROMOTE) {
    const prec_t *r = cts_live_find(&s->live, ev->obj_id);
    if (r) s->checksum += r->meta & 0xffffffu;
  } else {
    prec_t r;
    if (cts_live_take_n(&s->live, ev->obj_id, &r, sizeof r)) {
      const uint64_t samples = r.meta & 0xffffffu;
      s->sites[r.meta >> 48].live_samples -= samples;
      s->checksum += ev->time_us - s->base_us - (r.time_len & ((1ull << 40) - 1)) + samples;
    }
  }
  return 0;
}

/* --live-array: one event. A record is live while its site field is 1. */
static int array_event(floor_state_t *s, const cts_mt_event_t *ev) {
  if (ev->obj_id >= ARRAY_IDS) return -ERANGE;
  rec_t *r = &s->array[ev->obj_id];
  if (ev->kind == CTS_MT_ALLOC) {
    s->array_live += r->site == 0;
    *r = (rec_t){ev->time_us, ev->length, 1, (uint32_t)ev->nsamples};
  } else if (ev->kind == CTS_MT_PROMOTE) {
    if (r->site) s->checksum += r->samples;
  } else if (r->site) {
    s->checksum += ev->time_us - r->time_us + r->length;
    r->site = 0;
    s->array_live--;
  }
  return 0;
}

static int on_event(void *user_data, const cts_mt_event_t *ev) {
  floor_state_t *s = user_data;
  s->events++;
  if (s->mode == MODE_DECODE) {
    s->checksum += ev->backtrace_len;
    return 0;
  }
  if (s->mode == MODE_WRITE) {
    if (s->used + s->line > OUT_BUF && flush(s)) return -EIO;
    memset(s->buf + s->used, 'x', s->line);
    s->used += s->line;
    return 0;
  }
  if (s->mode == MODE_PROFILE) return profile_event(s, ev);
  if (s->mode == MODE_LIVE_ARRAY) return array_event(s, ev);
  if (ev->kind == CTS_MT_ALLOC) {
    uint32_t site = 0;
    if (s->mode == MODE_SITES && ev->backtrace_len) {
      const int e = site_index(s, ev->backtrace[ev->backtrace_len - 1], &site);
      if (e) return e;
      s->sites[site].allocs++;
      s->sites[site].samples += ev->nsamples;
      s->sites[site].live_samples += ev->nsamples;
    }
    bool added;
    rec_t *r = cts_live_insert(&s->live, ev->obj_id, &added);
    if (!r) return -ENOMEM;
    *r = (rec_t){ev->time_us, ev->length, site, (uint32_t)ev->nsamples};
  } else if (ev->kind == CTS_MT_PROMOTE) {
    const rec_t *r = cts_live_find(&s->live, ev->obj_id);
    if (r) s->checksum += r->samples;
  } else {
    rec_t r;
    if (cts_live_take(&s->live, ev->obj_id, &r)) {
      s->checksum += ev->time_us - r.time_us + r.length;
      if (s->mode == MODE_SITES) s->sites[r.site].live_samples -= r.samples;
    }
  }
  return 0;
}

static int usage(int code) {
  fprintf(
      code ? stderr : stdout,
      "Usage: floor_bench (--decode | --live | --live-array | --sites | --profile | --write N)\n"
      "                   [-o FILE] TRACE\n"
      "One pass over TRACE doing only what a command cannot avoid (see the source).\n");
  return code;
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"decode", no_argument, NULL, 'd'},
                                           {"live", no_argument, NULL, 'l'},
                                           {"live-array", no_argument, NULL, 'a'},
                                           {"sites", no_argument, NULL, 's'},
                                           {"profile", no_argument, NULL, 'p'},
                                           {"write", required_argument, NULL, 'w'},
                                           {"output", required_argument, NULL, 'o'},
                                           {"help", no_argument, NULL, 'h'},
                                           {0}};
  floor_state_t s = {.mode = MODE_DECODE, .fd = -1};
  const char *out = "/dev/null";
  int opt;
  while ((opt = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
    switch (opt) {
      case 'd':
        s.mode = MODE_DECODE;
        break;
      case 'l':
        s.mode = MODE_LIVE;
        break;
      case 'a':
        s.mode = MODE_LIVE_ARRAY;
        break;
      case 's':
        s.mode = MODE_SITES;
        break;
      case 'p':
        s.mode = MODE_PROFILE;
        break;
      case 'w': {
        char *end;
        const unsigned long n = strtoul(optarg, &end, 10);
        if (*end || n == 0 || n > 4096) return usage(2);
        s.mode = MODE_WRITE;
        s.line = n;
        break;
      }
      case 'o':
        out = optarg;
        break;
      case 'h':
        return usage(0);
      default:
        return usage(2);
    }
  }
  if (optind + 1 != argc) return usage(2);
  const char *path = argv[optind];
  if (cts_live_init(&s.live, s.mode == MODE_PROFILE ? sizeof(prec_t) : sizeof(rec_t)) != 0)
    return 4;
  if (s.mode == MODE_PROFILE) {
    /* As cts_alloc_profile_init keeps them for the report (the node budget, paths, lean
     * records). */
    if (cts_stacks_init(&s.stacks, false, 0) != 0) return 4;
    s.stacks.max_nodes = CTS_STACKS_DEFAULT_MAX_NODES;
    cts_stacks_key_by_path(&s.stacks);
    if (cts_stacks_set_lean(&s.stacks) != 0) return 4;
  }
  cts_u64map_init(&s.site_of);
  if (s.mode == MODE_LIVE_ARRAY) {
    void *a = mmap(NULL, ARRAY_IDS * sizeof(rec_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a == MAP_FAILED) return 4;
    s.array = a;
  }
  if (s.mode == MODE_WRITE) {
    s.buf = malloc(OUT_BUF);
    s.fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!s.buf || s.fd < 0) {
      fprintf(stderr, "floor_bench: %s: %s\n", out, strerror(errno));
      return 3;
    }
  }
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cfg.decode_backtraces = true;
  const cts_mt_handler_t h = {.user_data = &s, .on_event = on_event};
  cts_mt_reader_t *r = NULL;
  int e = cts_mt_reader_create(&r, &cfg, &h);
  if (e) {
    fprintf(stderr, "floor_bench: cts_mt_reader_create: %s\n", cts_strerror(e));
    return 4;
  }
  bool input_error = false;
  e = cts_os_read_memtrace(path, r, NULL, NULL, &input_error);
  if (e)
    fprintf(stderr, "floor_bench: %s: %s\n", path,
            input_error ? cts_os_strerror(e) : cts_mt_reader_error_message(r));
  cts_mt_reader_destroy(r);
  if (!e && s.mode == MODE_WRITE) e = flush(&s);
  if (s.fd >= 0 && close(s.fd) != 0 && !e) e = -EIO;
  printf("%" PRIu64 " events, %" PRIu64 " live at the end, %zu sites, checksum %" PRIu64 "\n",
         s.events, s.mode == MODE_LIVE_ARRAY ? s.array_live : s.live.count, s.nsites, s.checksum);
  if (s.mode == MODE_PROFILE)
    printf("%" PRIu32 " stack nodes, %" PRIu64 " cut for the budget, %" PRIu64
           " blocks beyond a record's fields\n",
           s.stacks.count, s.stacks.overflowed, s.unfit);
  cts_stacks_fini(&s.stacks);
  cts_live_fini(&s.live);
  cts_u64map_fini(&s.site_of);
  free(s.sites);
  free(s.buf);
  if (s.array) munmap(s.array, ARRAY_IDS * sizeof(rec_t));
  return e ? 1 : 0;
}
