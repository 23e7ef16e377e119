/* SPDX-License-Identifier: MIT */
/* gen_trace: writes a large, deterministic memtrace trace with ctfscope's own writer, for
 * the reader benchmark (bench/README.md).
 *
 * The events come from a model of a program rather than from noise, so that the trace
 * exercises the reader the way a real one does:
 *  - a call graph of a few hundred functions in layers (entry, event loop, dispatchers,
 *    protocol and storage code, utility leaves), with skewed call-site popularity so that
 *    some paths are hot, and a few recursive functions;
 *  - a call stack that evolves by calls and returns between allocations, so consecutive
 *    backtraces share long prefixes, 5 to 60 frames deep, with recursion segments;
 *  - allocation sites in the leaves and some inner functions; sizes log-distributed; most
 *    blocks short-lived (collected a few allocations later), some promoted, some long-lived,
 *    a few never freed; minor-heap blocks of 1..16 words with one sample use the short
 *    form, the rest the long form;
 *  - locations with file names, function names, lines and columns, some with inlined
 *    frames, and the outermost (startup) frame without debug information.
 * `--shape survivors` models the other common kind of trace instead: a rate-1 trace of a
 * program that keeps nearly everything it allocates until it exits (OCaml's memtrace at rate
 * 1 records few collections; native programs that hold their data do the same). There, 90 %
 * of the blocks are never collected, the allocations come from a few hundred distinct
 * stacks, and most are external or major-heap blocks. It is the shape that makes the
 * analysers' table of live blocks large.
 * `--shape threads` models a rate-1 trace of a program whose THREADS threads each build a
 * structure and drop it whole (python3 with 16 threads building dicts, PYTHONMALLOC=malloc,
 * bench/README.md "(wip/h46live)"): the threads' allocations interleave, so the ids one
 * thread keeps are spread over every chunk of ids, and a thread dropping its structure
 * frees them while the others allocate: ids freed out of order within a window of
 * hundreds of thousands, where the survivors shape frees few and the default shape soon.
 * About half of the blocks are temporaries freed within ~100 allocations.
 * Everything is drawn from one seeded PRNG and the timestamps are synthetic, so the same
 * arguments give the same bytes. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "os/os.h"

/* ---- PRNG: xoshiro256** seeded by splitmix64 ----------------------------------------- */

typedef struct rng {
  uint64_t s[4];
} rng_t;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void rng_seed(rng_t *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng_t *r) {
  uint64_t *s = r->s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/* Uniform in [0, n). The bias of a plain modulo is irrelevant for n this small. */
static uint32_t rng_below(rng_t *r, uint32_t n) {
  return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform in [0, 1). */
static double rng_unit(rng_t *r) {
  return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static bool rng_chance(rng_t *r, double p) {
  return rng_unit(r) < p;
}

/* Geometric count >= 0 with the given mean. */
static uint32_t rng_geometric(rng_t *r, double mean) {
  const double u = rng_unit(r);
  return (uint32_t)floor(log1p(-u) / log1p(-1.0 / (mean + 1.0)));
}

/* Log-uniform integer in [lo, hi]. */
static uint64_t rng_log_uniform(rng_t *r, uint64_t lo, uint64_t hi) {
  const double v = exp(log((double)lo) + rng_unit(r) * (log((double)hi + 1.0) - log((double)lo)));
  const uint64_t x = (uint64_t)v;
  return x < lo ? lo : x > hi ? hi : x;
}

/* ---- the program model ----------------------------------------------------------------- */

#define ARRAY_LEN(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
#define NFUNCS       320u
#define NLAYERS      25u
#define MAX_DEPTH    60u /* frames in a backtrace, allocation point included */
#define BASE_DEPTH   2u  /* _start -> main -> event_loop_run: never returned from */
#define NO_CALLEE    UINT32_MAX
/* Location codes look like return addresses in a PIE binary: 64 bytes apart, jittered. */
#define CODE_BASE   0x55d4a3c01000ull
#define CODE_STRIDE 64u

typedef struct site {
  uint32_t func;   /* function the site is in */
  uint32_t callee; /* called function, or NO_CALLEE for an allocation site */
  uint32_t line;
  uint8_t start_char, end_char;
  uint8_t ninlined;    /* 0..2 inlined frames around the site */
  uint32_t inlined[2]; /* functions inlined at this site, outermost first */
} site_t;

typedef struct func {
  const char *name;
  const char *file;
  uint32_t line; /* first line of the function */
  uint32_t layer;
  uint32_t first_call, ncalls;   /* call sites */
  uint32_t first_alloc, nallocs; /* allocation sites */
  uint32_t self_site;            /* recursive call site, or NO_CALLEE */
} func_t;

typedef struct model {
  func_t funcs[NFUNCS];
  site_t *sites;
  uint32_t nsites, sites_cap;
  uint32_t layer_first[NLAYERS + 1]; /* functions of layer k: [layer_first[k], layer_first[k+1]) */
  char names[NFUNCS][48];
  /* The call stack as the call sites being executed, outermost first: a frame's location
   * code is its site's, and the running function is the callee of the top site. */
  uint32_t stack[MAX_DEPTH];
  uint32_t depth;
} model_t;

static const char *const files[] = {
    "src/main.c",          "src/core/event_loop.c", "src/core/dispatch.c",
    "src/net/tcp_input.c", "src/net/tcp_output.c",  "src/net/udp.c",
    "src/net/ip_route.c",  "src/net/socket.c",      "src/net/tls_record.c",
    "src/http/parser.c",   "src/http/router.c",     "src/http/headers.c",
    "src/http/response.c", "src/db/btree.c",        "src/db/pager.c",
    "src/db/query_plan.c", "src/db/txn_log.c",      "src/fs/path.c",
    "src/fs/file_cache.c", "src/json/decode.c",     "src/json/encode.c",
    "src/crypto/sha256.c", "src/crypto/aead.c",     "src/sched/timer_wheel.c",
    "src/sched/worker.c",  "src/util/strbuf.c",     "src/util/vec.c",
    "src/util/hashmap.c",  "src/util/list.c",       "src/mm/slab.c",
    "src/mm/arena.c",      "src/mm/xmalloc.c",      "src/proto/rpc_frame.c",
    "src/proto/msgpack.c", "src/log/logger.c",      "src/config/ini.c",
};
static const char *const inline_files[] = {
    "include/util/vec_inline.h",
    "include/net/skbuff.h",
    "include/util/strbuf.h",
    "include/mm/slab_inline.h",
};
static const char *const verbs[] = {
    "read",   "write",  "parse", "encode", "decode", "alloc",  "grow",    "push",  "lookup",
    "insert", "split",  "merge", "flush",  "open",   "handle", "process", "build", "copy",
    "append", "resize", "scan",  "emit",   "accept", "route",  "visit",   "walk",  "fill",
};
static const char *const nouns[] = {
    "segment", "frame",  "buffer", "header", "record", "node",  "page",   "entry", "token",
    "request", "reply",  "chunk",  "key",    "value",  "block", "string", "list",  "table",
    "packet",  "stream", "slot",   "field",  "item",   "path",  "batch",  "range",
};

static uint64_t site_code(uint32_t site) {
  /* A deterministic jitter keeps the codes from looking like a plain table index. */
  const uint64_t jitter = (site * 0x9e3779b1u >> 7) & 0x1fu;
  return CODE_BASE + (uint64_t)site * CODE_STRIDE + jitter;
}

static uint32_t code_site(uint64_t code) {
  return (uint32_t)((code - CODE_BASE) / CODE_STRIDE);
}

static uint32_t add_site(model_t *m, uint32_t func, uint32_t callee, rng_t *r) {
  if (m->nsites == m->sites_cap) {
    m->sites_cap = m->sites_cap ? m->sites_cap * 2 : 1024;
    m->sites = realloc(m->sites, m->sites_cap * sizeof *m->sites);
    if (!m->sites) {
      fprintf(stderr, "gen_trace: out of memory\n");
      exit(1);
    }
  }
  site_t *s = &m->sites[m->nsites];
  memset(s, 0, sizeof *s);
  s->func = func;
  s->callee = callee;
  s->line = m->funcs[func].line + 2 + rng_below(r, 60);
  s->start_char = (uint8_t)(2 + rng_below(r, 30));
  s->end_char = (uint8_t)(s->start_char + 5 + rng_below(r, 40));
  /* About one site in eight has inlined helpers around it, as -O2 code does. */
  if (rng_chance(r, 0.125)) {
    s->ninlined = (uint8_t)(1 + rng_below(r, 2));
    for (unsigned i = 0; i < s->ninlined; i++) s->inlined[i] = rng_below(r, NFUNCS);
  }
  return m->nsites++;
}

/* Layer sizes: entry, event loop, a dozen dispatchers, many thin layers of application and
 * library code (real stacks are deep because of layering, not because of width), and a
 * band of utility leaves at the bottom. */
static const uint32_t layer_sizes[NLAYERS] = {2,  1,  12, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13,
                                              13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 32};
_Static_assert(2 + 1 + 12 + 21 * 13 + 32 == NFUNCS, "layer sizes must add up to NFUNCS");

static void model_build(model_t *m, rng_t *r) {
  memset(m, 0, sizeof *m);
  uint32_t f = 0;
  for (uint32_t k = 0; k < NLAYERS; k++) {
    m->layer_first[k] = f;
    f += layer_sizes[k];
  }
  m->layer_first[NLAYERS] = f;
  /* Names: the entry points by hand, the rest from the file's module and a verb/noun. */
  for (uint32_t k = 0, i = 0; k < NLAYERS; k++) {
    for (uint32_t j = 0; j < layer_sizes[k]; j++, i++) {
      func_t *fn = &m->funcs[i];
      fn->layer = k;
      fn->self_site = NO_CALLEE;
      fn->line = 20 + rng_below(r, 1500);
      if (i == 0) {
        fn->file = "<startup>";
        snprintf(m->names[i], sizeof m->names[i], "_start");
      } else if (i == 1) {
        fn->file = files[0];
        snprintf(m->names[i], sizeof m->names[i], "main");
      } else if (i == 2) {
        fn->file = files[1];
        snprintf(m->names[i], sizeof m->names[i], "event_loop_run");
      } else {
        /* Upper layers live in the subsystem files, the bottom layers in util and mm. */
        const uint32_t nfiles = ARRAY_LEN(files);
        const uint32_t file_ix = k >= NLAYERS - 2 ? 25 + rng_below(r, 7)
                                 : k <= 2         ? 2 + rng_below(r, 3)
                                                  : 3 + rng_below(r, nfiles - 3);
        fn->file = files[file_ix];
        const char *base = strrchr(fn->file, '/') + 1;
        const int stem = (int)(strchr(base, '.') - base);
        snprintf(m->names[i], sizeof m->names[i], "%.*s_%s_%s", stem, base,
                 verbs[rng_below(r, ARRAY_LEN(verbs))], nouns[rng_below(r, ARRAY_LEN(nouns))]);
      }
      fn->name = m->names[i];
    }
  }
  /* Sites. _start calls main, main calls the event loop, the loop calls dispatchers. */
  for (uint32_t i = 0; i < NFUNCS; i++) {
    func_t *fn = &m->funcs[i];
    const uint32_t k = fn->layer;
    fn->first_call = m->nsites;
    if (i == 0) {
      add_site(m, 0, 1, r);
    } else if (i == 1) {
      add_site(m, 1, 2, r);
    } else if (k < NLAYERS - 1) {
      /* Calls go mostly one layer down, sometimes two or three (skipping wrappers). */
      const uint32_t ncalls = k == 1 ? layer_sizes[2] : 2 + rng_below(r, 6);
      for (uint32_t c = 0; c < ncalls; c++) {
        uint32_t to_layer = k + 1;
        if (k == 1) {
          add_site(m, i, m->layer_first[2] + c, r);
          continue;
        }
        /* Mostly one layer down; now and then a shortcut straight into library code. */
        const uint32_t u = rng_below(r, 20);
        to_layer += u < 11 ? 0 : u < 15 ? 1 : u < 17 ? 2 : 3 + rng_below(r, 7);
        if (to_layer >= NLAYERS) to_layer = NLAYERS - 1;
        const uint32_t callee = m->layer_first[to_layer] + rng_below(r, layer_sizes[to_layer]);
        add_site(m, i, callee, r);
      }
    }
    /* Recursive functions: tree walks, parsers, sorts (one in ten of the middle layers). */
    if (k >= 3 && k < NLAYERS - 1 && rng_chance(r, 0.1)) fn->self_site = add_site(m, i, i, r);
    fn->ncalls = m->nsites - fn->first_call;
    fn->first_alloc = m->nsites;
    uint32_t nallocs = 0;
    if (k == NLAYERS - 1) {
      nallocs = 1 + rng_below(r, 3);
    } else if (k >= 3 && rng_chance(r, 0.5)) {
      nallocs = 1 + rng_below(r, 2);
    }
    for (uint32_t a = 0; a < nallocs; a++) add_site(m, i, NO_CALLEE, r);
    fn->nallocs = nallocs;
  }
  /* The base of the stack: _start's call of main, main's call of the event loop. */
  m->stack[0] = 0;
  m->stack[1] = 1;
  m->depth = BASE_DEPTH;
}

/* Call-site popularity is skewed: low-numbered sites are the hot paths. */
static uint32_t pick_skewed(rng_t *r, uint32_t n) {
  const double u = rng_unit(r);
  return (uint32_t)(u * u * u * n);
}

/* The function currently running (the top of the stack). */
static uint32_t current_func(const model_t *m) {
  return m->sites[m->stack[m->depth - 1]].callee;
}

static void push_call(model_t *m, uint32_t site) {
  m->stack[m->depth++] = site;
}

/* Moves the program along until it allocates; returns the allocation site. */
static uint32_t model_step(model_t *m, rng_t *r) {
  /* Sampled allocations are far apart in a real program (one per 10^4 words at the usual
   * rate), so the stack has usually moved between two of them; sometimes a loop has not. */
  bool moved = rng_chance(r, 0.1);
  for (;; moved = true) {
    const uint32_t fi = current_func(m);
    const func_t *fn = &m->funcs[fi];
    const bool leaf = fn->ncalls == 0 || m->depth + 1 >= MAX_DEPTH;
    const double p_alloc = fn->nallocs == 0 || !moved ? 0.0 : leaf ? 0.35 : 0.15;
    if (rng_chance(r, p_alloc)) return fn->first_alloc + pick_skewed(r, fn->nallocs);
    /* Call deeper or return: calls are likelier near the top, returns deep down. */
    const double p_call = leaf            ? 0.0
                          : m->depth < 12 ? 0.9
                          : m->depth < 24 ? 0.75
                          : m->depth < 36 ? 0.55
                                          : 0.4;
    /* The event loop (at BASE_DEPTH) always has something to call, and is never left. */
    if (!leaf && (m->depth <= BASE_DEPTH || rng_chance(r, p_call))) {
      if (fn->self_site != NO_CALLEE && rng_chance(r, 0.5)) {
        /* A recursion segment: the same call site repeated, as a tree walk does. */
        uint32_t n = 1 + rng_geometric(r, 8.0);
        while (n-- > 0 && m->depth + 2 < MAX_DEPTH) push_call(m, fn->self_site);
        continue;
      }
      uint32_t site = fn->first_call + pick_skewed(r, fn->ncalls);
      if (site == fn->self_site) site = fn->first_call;
      push_call(m, site);
      continue;
    }
    /* Return: out of a whole recursion segment at once, usually. */
    const uint32_t top_site = m->stack[m->depth - 1];
    m->depth--;
    if (rng_chance(r, 0.8))
      while (m->depth > BASE_DEPTH && m->stack[m->depth - 1] == top_site) m->depth--;
    /* Now and then the whole request is done: back to the event loop. */
    if (rng_chance(r, 0.005)) m->depth = BASE_DEPTH;
  }
}

/* ---- location resolver for the writer ---------------------------------------------------- */

static size_t resolve(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max) {
  const model_t *m = user_data;
  const uint32_t si = code_site(code);
  if (si >= m->nsites || max < 3) return 0;
  const site_t *s = &m->sites[si];
  if (s->func == 0) return 0; /* the startup code has no debug information */
  size_t n = 0;
  for (unsigned i = 0; i < s->ninlined; i++) {
    const func_t *in = &m->funcs[s->inlined[i]];
    out[n++] = (cts_mt_location_t){
        .line = 10 + (in->line + 37u * i) % 400u,
        .start_char = 4,
        .end_char = 30,
        .filename = inline_files[(s->inlined[i] + i) % ARRAY_LEN(inline_files)],
        .defname = in->name,
    };
  }
  const func_t *fn = &m->funcs[s->func];
  out[n++] = (cts_mt_location_t){
      .line = s->line,
      .start_char = s->start_char,
      .end_char = s->end_char,
      .filename = fn->file,
      .defname = fn->name,
  };
  return n;
}

/* ---- object lifetimes ------------------------------------------------------------------- */

/* A pending promote or collect, due after a number of further allocations. */
typedef struct due {
  uint64_t when; /* allocation count at which it happens */
  uint64_t id;   /* object id; the low bit of `kind` says promote (1) or collect (0) */
  uint32_t kind;
} due_t;

typedef struct heap {
  due_t *v;
  size_t n, cap;
} heap_t;

static bool due_before(const due_t *a, const due_t *b) {
  return a->when != b->when ? a->when < b->when : a->id < b->id;
}

static void heap_push(heap_t *h, due_t d) {
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 4096;
    h->v = realloc(h->v, h->cap * sizeof *h->v);
    if (!h->v) {
      fprintf(stderr, "gen_trace: out of memory\n");
      exit(1);
    }
  }
  size_t i = h->n++;
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!due_before(&d, &h->v[parent])) break;
    h->v[i] = h->v[parent];
    i = parent;
  }
  h->v[i] = d;
}

static due_t heap_pop(heap_t *h) {
  const due_t top = h->v[0];
  const due_t last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && due_before(&h->v[c + 1], &h->v[c])) c++;
    if (!due_before(&h->v[c], &last)) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = last;
  return top;
}

/* ---- main ----------------------------------------------------------------------------------- */

#define SAMPLE_RATE   1e-4                /* default shape; survivors is at rate 1 */
#define POOL_STACKS   384u                /* distinct stacks of the survivors shape */
#define THREADS       16u                 /* threads of the threads shape */
#define START_TIME_US 1767225600000000ull /* 2026-01-01 00:00:00 UTC */

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gen_trace -o PATH (--mb N | --events N) [--seed S] [--version 2|3]\n"
          "                 [--shape default|survivors|threads]\n"
          "Writes a deterministic memtrace trace of about N MB (10^6 bytes) or N events\n"
          "(allocations, promotions and collections) modelled on a real program.\n"
          "  -o, --output PATH  trace file to write\n"
          "  -m, --mb N         stop once the trace holds N MB\n"
          "  -e, --events N     stop after N events\n"
          "  -s, --seed S       PRNG seed (default 1)\n"
          "  -v, --version V    format version, 2 (default) or 3\n"
          "  -S, --shape SHAPE  default: sampled (rate 1e-4), 1 %% of blocks never freed;\n"
          "                     survivors: rate 1, 90 %% never freed, few distinct stacks,\n"
          "                     mostly external and major-heap blocks;\n"
          "                     threads: rate 1, 16 threads each building a structure\n"
          "                     and dropping it whole (ids freed out of order), half\n"
          "                     temporaries, malloc'ed (external) blocks\n");
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *end || s[0] == '-') return false;
  *out = v;
  return true;
}

static int fail_writer(int e, const char *what) {
  fprintf(stderr, "gen_trace: %s: %s\n", what, cts_os_strerror(e));
  return 1;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {
      {"output", required_argument, NULL, 'o'},  {"mb", required_argument, NULL, 'm'},
      {"events", required_argument, NULL, 'e'},  {"seed", required_argument, NULL, 's'},
      {"version", required_argument, NULL, 'v'}, {"shape", required_argument, NULL, 'S'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
  };
  const char *path = NULL;
  uint64_t target_bytes = 0, target_events = 0, seed = 1, version = 2;
  bool survivors = false, threads = false;
  int c;
  while ((c = getopt_long(argc, argv, "o:m:e:s:v:S:h", opts, NULL)) != -1) {
    uint64_t v = 0;
    switch (c) {
      case 'o':
        path = optarg;
        break;
      case 'm':
        if (!parse_u64(optarg, &v) || v == 0 || v > 1000000) goto bad;
        target_bytes = v * 1000000u;
        break;
      case 'e':
        if (!parse_u64(optarg, &target_events) || target_events == 0) goto bad;
        break;
      case 's':
        if (!parse_u64(optarg, &seed)) goto bad;
        break;
      case 'v':
        if (!parse_u64(optarg, &version) || (version != 2 && version != 3)) goto bad;
        break;
      case 'S':
        if (strcmp(optarg, "survivors") == 0)
          survivors = true;
        else if (strcmp(optarg, "threads") == 0)
          threads = true;
        else if (strcmp(optarg, "default") != 0)
          goto bad;
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
    continue;
  bad:
    fprintf(stderr, "gen_trace: bad value '%s' for -%c\n", optarg, c);
    return 2;
  }
  if (!path || optind != argc || (!target_bytes && !target_events)) {
    usage(stderr);
    return 2;
  }

  rng_t rng;
  rng_seed(&rng, seed);
  static model_t model;
  model_build(&model, &rng);

  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "gen_trace: cannot create %s: %s\n", path, strerror(errno));
    return 3;
  }
  char context[64];
  snprintf(context, sizeof context, "ctfscope bench/gen_trace seed=%" PRIu64, seed);
  cts_mt_writer_config_t cfg;
  cts_mt_writer_config_init(&cfg);
  cfg.version = (uint16_t)version;
  const double rate = survivors || threads ? 1.0 : SAMPLE_RATE;
  cfg.sample_rate = rate;
  cfg.executable_name = "/opt/bench/netd";
  cfg.host_name = "bench-host";
  cfg.runtime_params = "ctfscope-bench";
  cfg.context = context;
  cfg.pid = 4242;
  cfg.start_time_us = START_TIME_US;
  cfg.write = cts_os_fd_write;
  cfg.write_user_data = (void *)(intptr_t)fd;
  cfg.resolve = resolve;
  cfg.resolve_user_data = &model;
  const size_t wsize = cts_mt_writer_size(&cfg);
  void *wmem = aligned_alloc(64, (wsize + 63) & ~(size_t)63);
  if (!wmem) return fail_writer(CTS_E_NOMEM, "writer memory");
  cts_mt_writer_t *w;
  int e = cts_mt_writer_init(&w, wmem, wsize, &cfg);
  if (e) return fail_writer(e, "cts_mt_writer_init");

  heap_t due = {0};
  uint64_t bt[MAX_DEPTH];
  /* The survivors shape draws its stacks from a fixed pool taken from the model. */
  static uint64_t pool[POOL_STACKS][MAX_DEPTH];
  static size_t pool_depth[POOL_STACKS];
  if (survivors || threads) {
    for (uint32_t k = 0; k < POOL_STACKS; k++) {
      const uint32_t alloc_site = model_step(&model, &rng);
      size_t d = 0;
      for (uint32_t i = 0; i < model.depth; i++) pool[k][d++] = site_code(model.stack[i]);
      pool[k][d++] = site_code(alloc_site);
      pool_depth[k] = d;
    }
  }
  uint64_t now = START_TIME_US, nallocs = 0, nevents = 0, npromotes = 0, ncollects = 0;
  uint64_t nshort = 0, frames = 0;
  /* The threads shape: per thread, the ids its structure holds, how many it will hold when
   * dropped, and the stack it allocates from (and for how many more allocations). */
  static struct {
    uint64_t *ids;
    size_t n, cap, target;
    uint32_t stack, left;
  } thr[THREADS];
  uint32_t t = 0, run_left = 0;
  for (;;) {
    if (target_events ? nevents >= target_events : cts_mt_writer_bytes_written(w) >= target_bytes)
      break;
    /* First whatever is due: collections (and promotions) of earlier blocks. */
    while (due.n && due.v[0].when <= nallocs && (!target_events || nevents < target_events)) {
      const due_t d = heap_pop(&due);
      now += rng_below(&rng, 2);
      if (d.kind) {
        e = cts_mt_writer_promote(w, now, d.id);
        npromotes++;
      } else {
        e = cts_mt_writer_collect(w, now, d.id);
        ncollects++;
      }
      if (e) return fail_writer(e, "writing an event");
      nevents++;
    }
    if (target_events && nevents >= target_events) break;
    /* Then the next allocation, with the stack as the program left it. */
    size_t depth = 0;
    if (threads) {
      /* One thread runs at a time for a while (python3's GIL: ~5 ms), so its allocations
       * come in runs of ids. */
      if (run_left == 0)
        t = (uint32_t)rng_below(&rng, THREADS), run_left = 1 + rng_geometric(&rng, 500.0);
      run_left--;
      if (thr[t].left == 0)
        thr[t].stack = pick_skewed(&rng, POOL_STACKS), thr[t].left = 1 + rng_geometric(&rng, 4.0);
      thr[t].left--;
      depth = pool_depth[thr[t].stack];
      memcpy(bt, pool[thr[t].stack], depth * sizeof bt[0]);
    } else if (survivors) {
      /* A loop allocating from the same stack several times in a row, as a loader does. */
      static uint32_t k, left;
      if (left == 0) k = pick_skewed(&rng, POOL_STACKS), left = 1 + rng_geometric(&rng, 4.0);
      left--;
      depth = pool_depth[k];
      memcpy(bt, pool[k], depth * sizeof bt[0]);
    } else {
      const uint32_t alloc_site = model_step(&model, &rng);
      for (uint32_t i = 0; i < model.depth; i++) bt[depth++] = site_code(model.stack[i]);
      bt[depth++] = site_code(alloc_site);
    }
    frames += depth;

    uint64_t length, nsamples = 1;
    cts_mt_source_t source;
    const uint32_t kind = rng_below(&rng, 100);
    if (threads) {
      /* malloc'ed objects of 16-320 bytes, every word sampled. */
      source = CTS_MT_SOURCE_EXTERNAL;
      length = rng_log_uniform(&rng, 2, 40);
      nsamples = length + 1;
    } else if (survivors) {
      /* Rate 1: every word is sampled, and the header too (memtrace's count). */
      if (kind < 15) {
        source = CTS_MT_SOURCE_MINOR;
        length = rng_log_uniform(&rng, 1, 64);
      } else if (kind < 40) {
        source = CTS_MT_SOURCE_MAJOR;
        length = rng_log_uniform(&rng, 257, 1u << 14);
      } else {
        source = CTS_MT_SOURCE_EXTERNAL;
        length = rng_log_uniform(&rng, 8, 1u << 12);
      }
      nsamples = length + 1;
    } else if (kind < 82) { /* minor heap: small blocks, nearly always one sample */
      source = CTS_MT_SOURCE_MINOR;
      length =
          rng_chance(&rng, 0.9) ? rng_log_uniform(&rng, 1, 16) : rng_log_uniform(&rng, 17, 256);
      if (rng_chance(&rng, 0.03)) nsamples = 2;
    } else if (kind < 95) { /* direct major-heap allocations: arrays, buffers */
      source = CTS_MT_SOURCE_MAJOR;
      length = rng_log_uniform(&rng, 257, 1u << 20);
      nsamples = 1 + (uint64_t)((double)length * rate * (0.5 + rng_unit(&rng)));
    } else { /* external memory (malloc'ed buffers) */
      source = CTS_MT_SOURCE_EXTERNAL;
      length = rng_log_uniform(&rng, 1, 1u << 16);
      nsamples = 1 + rng_below(&rng, 3);
    }
    nshort += source == CTS_MT_SOURCE_MINOR && length <= 16 && nsamples == 1;
    now += rng_below(&rng, 3);
    uint64_t id;
    e = cts_mt_writer_alloc(w, now, length, nsamples, source, bt, depth, &id);
    if (e) return fail_writer(e, "writing an allocation");
    nallocs++;
    nevents++;

    /* Its fate: mostly freed soon, some promoted, some long-lived, a few never freed. In the
     * survivors shape: 90 % never freed, the rest freed soon or after a while. */
    const uint32_t fate = rng_below(&rng, 1000);
    if (threads) {
      if (fate < 550) {
        heap_push(&due, (due_t){nallocs + 1 + rng_geometric(&rng, 40.0), id, 0});
      } else {
        if (thr[t].n == thr[t].cap) {
          thr[t].cap = thr[t].cap ? 2 * thr[t].cap : 1024;
          thr[t].ids = realloc(thr[t].ids, thr[t].cap * sizeof *thr[t].ids);
          if (!thr[t].ids) return fail_writer(CTS_E_NOMEM, "memory");
        }
        if (thr[t].target == 0) thr[t].target = rng_log_uniform(&rng, 20000, 400000);
        thr[t].ids[thr[t].n++] = id;
        if (thr[t].n >= thr[t].target) {
          /* Dropped whole, in the order it was built, over the next allocations (the
           * other threads go on meanwhile): four frees an allocation. */
          for (size_t i = 0; i < thr[t].n; i++)
            heap_push(&due, (due_t){nallocs + 1 + i / 4, thr[t].ids[i], 0});
          thr[t].n = 0;
          thr[t].target = 0;
        }
      }
    } else if (survivors) {
      if (source == CTS_MT_SOURCE_MINOR && fate < 950) heap_push(&due, (due_t){nallocs + 5, id, 1});
      if (fate < 70)
        heap_push(&due, (due_t){nallocs + rng_geometric(&rng, 6.0), id, 0});
      else if (fate < 100)
        heap_push(&due, (due_t){nallocs + rng_log_uniform(&rng, 100, 1000000), id, 0});
    } else if (fate < 850) {
      heap_push(&due, (due_t){nallocs + rng_geometric(&rng, 6.0), id, 0});
    } else if (fate < 970) {
      const uint64_t life = 10 + rng_log_uniform(&rng, 1, 5000);
      if (source == CTS_MT_SOURCE_MINOR) heap_push(&due, (due_t){nallocs + 5, id, 1});
      heap_push(&due, (due_t){nallocs + life, id, 0});
    } else if (fate < 990) {
      if (source == CTS_MT_SOURCE_MINOR) heap_push(&due, (due_t){nallocs + 5, id, 1});
      heap_push(&due, (due_t){nallocs + rng_log_uniform(&rng, 5000, 2000000), id, 0});
    } else if (source == CTS_MT_SOURCE_MINOR) {
      heap_push(&due, (due_t){nallocs + 5, id, 1}); /* never freed: a leak or a cache */
    }
  }
  if ((e = cts_mt_writer_close(w)) != 0) return fail_writer(e, "closing the trace");
  const uint64_t bytes = cts_mt_writer_bytes_written(w);
  if (close(fd) != 0) {
    fprintf(stderr, "gen_trace: closing %s: %s\n", path, strerror(errno));
    return 3;
  }
  printf("wrote %s: %" PRIu64 " bytes, %" PRIu64 " events (%" PRIu64 " allocs, %" PRIu64
         " short-form eligible, %" PRIu64 " promotes, %" PRIu64
         " collects), %.2f bytes/event, "
         "mean backtrace %.1f frames, %u location codes, seed %" PRIu64 ", v%03u\n",
         path, bytes, nevents, nallocs, nshort, npromotes, ncollects,
         (double)bytes / (double)nevents, (double)frames / (double)nallocs, model.nsites, seed,
         (unsigned)version);
  free(due.v);
  for (uint32_t i = 0; i < THREADS; i++) free(thr[i].ids);
  free(model.sites);
  free(wmem);
  return 0;
}
