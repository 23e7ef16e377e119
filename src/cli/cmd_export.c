/* SPDX-License-Identifier: MIT */
/* ctfscope export: a memtrace trace in the formats other tools read.
 *  - folded: "f1;f2;...;fn value" lines (flamegraph.pl, speedscope, inferno);
 *  - pprof: the profile.proto of Go's pprof, gzip-compressed, written here by hand (the
 *    schema is small): sample types alloc_objects, alloc_space, inuse_objects, inuse_space;
 *  - chrome: Chrome trace-event JSON (Perfetto, speedscope, chrome://tracing): process 1
 *    has counters of the live and allocated heap over time; process 2 is a flame chart of
 *    allocations in trace order whose time axis is bytes allocated (1 us = 1 byte);
 *  - csv: one line per event.
 * Every byte figure is an estimate, samples / sample rate x word size, rounded. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../common/grow.h"
#include "../common/hash.h"
#include "../analysis/live_table.h"
#include "../analysis/strtab.h"
#include "cli.h"
#include "cmd_tasks.h"
#include "load.h"

static const char help[] =
    "Usage: ctfscope export --format FORMAT [OPTIONS] TRACE\n"
    "\n"
    "Write a memtrace trace in another tool's format. Bytes are estimates (samples / sample\n"
    "rate x word size), rounded to whole bytes; counts are estimated allocations.\n"
    "\n"
    "Formats:\n"
    "  folded   folded stacks, 'main;f;g VALUE' per stack (flamegraph.pl, speedscope);\n"
    "           frames are function names, the outermost first\n"
    "  pprof    gzip-compressed pprof profile (go tool pprof, pprof.me, speedscope) with\n"
    "           alloc_objects, alloc_space, inuse_objects and inuse_space (live at the end)\n"
    "           and a mapping per module, the program's executable first (modules are\n"
    "           inferred from frames named after them and from addresses)\n"
    "  chrome   Chrome trace-event JSON (Perfetto, speedscope): live/allocated heap counters\n"
    "           over time, and a flame chart of allocations in trace order on a time axis\n"
    "           of bytes (1 us = 1 byte)\n"
    "  csv      one line per event: time, kind, object id, heap, length, samples,\n"
    "           estimated bytes and the allocation point\n"
    "\n"
    "A mirage-profile task trace exports as:\n"
    "  chrome   threads with the running periods of their tasks as slices, gc pauses and\n"
    "           counters ('C' events); one lane per task with its lifetime, and flow arrows\n"
    "           for created, read, try_read, resolve and signal\n"
    "  csv      one line per event: time_ns (from the first event), event, task, other\n"
    "           task, type, value and text\n"
    "\n"
    "Options:\n"
    "  -f, --format FORMAT  folded, pprof, chrome or csv (required)\n"
    "  -o, --output FILE    write to FILE instead of standard output\n"
    "      --value WHAT     folded: 'bytes' (allocated, default), 'count', 'samples',\n"
    "                       'live' (bytes live at the end) or 'peak' (live at the peak)\n"
    "      --max-size SIZE  chrome: refuse (exit 2) when the JSON would be larger than SIZE\n"
    "                       bytes (suffixes k, M, G: powers of 1000; default 256M, 0 = no\n"
    "                       limit): trace viewers do not load JSON much larger than that;\n"
    "                       its size is counted before a byte is written (a read of the\n"
    "                       trace; from a pipe or standard input, checked as written), and a\n"
    "                       refusal names the ways out: 'ctfscope filter' (a time range),\n"
    "                       'ctfscope subsample' (fewer samples), --format pprof or folded;\n"
    "                       refused with other formats and, above 0, with task traces\n"
    "  -q, --quiet          do not print warnings\n" CLI_FRAME_HELP
    "  -h, --help           show this help\n"
    "\n"
    "Exit status: 0 when the trace was read completely, 1 when it is corrupt, a corrupt\n"
    "gzip stream included (the export covers what was read before the error), 2 for a usage\n"
    "error or chrome JSON over --max-size, 3 when a file cannot be read or written, 4 out of\n"
    "memory. With -o, an output that is the trace itself is refused (2), and the file is\n"
    "written aside and replaced only when the run ends with 0 or 1.\n";

typedef enum { FMT_NONE, FMT_FOLDED, FMT_PPROF, FMT_CHROME, FMT_CSV } format_t;
typedef enum { VAL_BYTES, VAL_COUNT, VAL_SAMPLES, VAL_LIVE, VAL_PEAK } value_t;

typedef struct export_opts {
  format_t format;
  value_t value;
  const char *output;
  uint64_t max_size; /* chrome: JSON bytes allowed, 0 = any */
  bool quiet;
  /* Given on the command line: an option the chosen format has no use for is refused
   * rather than silently ignored (a user asking for a limit must not get none). */
  bool value_given, max_size_given;
} export_opts_t;

/* Perfetto and chrome://tracing load JSON into the browser's memory and fail, or crawl, on
 * files of a few hundred MB; a rate-1 trace of 90 MB makes about 4 GB of JSON. */
#define CHROME_MAX_SIZE_DEFAULT 256000000u

/* "256M", "1.5G", "0": a byte count with an optional decimal suffix. False if malformed. */
static bool parse_size(const char *arg, uint64_t *out) {
  char *end;
  errno = 0;
  const double v = strtod(arg, &end);
  if (end == arg || errno || !(v >= 0)) return false;
  double mult = 1;
  if (*end == 'k' || *end == 'K')
    mult = 1e3, end++;
  else if (*end == 'M')
    mult = 1e6, end++;
  else if (*end == 'G')
    mult = 1e9, end++;
  if (*end == 'B') end++;
  if (*end || v * mult >= 1.8e19) return false;
  *out = (uint64_t)(v * mult);
  return true;
}

static int on_option(void *ctx, int opt, const char *arg) {
  export_opts_t *o = ctx;
  switch (opt) {
    case 'f': {
      static const cli_keyword_t formats[] = {{"folded", FMT_FOLDED},
                                              {"pprof", FMT_PPROF},
                                              {"chrome", FMT_CHROME},
                                              {"csv", FMT_CSV},
                                              {0}};
      int v;
      const int rc = cli_parse_keyword("--format", arg, formats, NULL, &v);
      if (rc >= 0) return rc;
      o->format = (format_t)v;
      break;
    }
    case 'o':
      o->output = arg;
      break;
    case 'V': {
      static const cli_keyword_t values[] = {{"bytes", VAL_BYTES},     {"count", VAL_COUNT},
                                             {"samples", VAL_SAMPLES}, {"live", VAL_LIVE},
                                             {"peak", VAL_PEAK},       {0}};
      int v;
      const int rc = cli_parse_keyword("--value", arg, values, NULL, &v);
      if (rc >= 0) return rc;
      o->value = (value_t)v;
      o->value_given = true;
      break;
    }
    case 'M':
      if (!parse_size(arg, &o->max_size))
        return cli_usage_error("--max-size: '%s' is not a size (e.g. 256M, 2G, 0)", arg);
      o->max_size_given = true;
      break;
    case 'q':
      o->quiet = true;
      break;
    default:
      return cli_frame_option(opt, arg);
  }
  return -1;
}

/* Frame names as folded stacks take them (';' separates frames and a line holds one
 * stack), each made once: a large trie prints the same few names millions of times.
 * names[id - 1] for label id; lens alike. Returns 0 or -ENOMEM (then nothing to free). */
static int folded_names(const cts_labels_t *labels, char **text, size_t **offs) {
  size_t total = 0;
  for (size_t i = 0; i < labels->n; i++) total += strlen(labels->names[i]);
  *text = malloc(total + 1);
  *offs = malloc((labels->n + 1) * sizeof **offs);
  if (!*text || !*offs) {
    free(*text);
    free(*offs);
    return -ENOMEM;
  }
  size_t at = 0;
  for (size_t i = 0; i < labels->n; i++) {
    (*offs)[i] = at;
    for (const char *c = labels->names[i]; *c; c++)
      (*text)[at++] = *c == ';' ? ',' : (*c == '\n' || *c == '\r') ? ' ' : *c;
  }
  (*offs)[labels->n] = at;
  return 0;
}

/* The label ids of the frame codes met last, direct-mapped (label 0: empty): folded names
 * every node's frame and chrome every allocation's, where a hash look-up per frame was most
 * of chrome's export. */
#define CODE_LABEL_SLOTS 4096u

typedef struct code_label {
  uint64_t code;
  uint64_t label;
} code_label_t;

/* The label id of a frame code through cache (CODE_LABEL_SLOTS entries); 0: out of memory. */
static uint64_t code_label_of(code_label_t *cache, cts_labels_t *labels, uint64_t code) {
  code_label_t *e = &cache[cts_mix64(code) & (CODE_LABEL_SLOTS - 1)];
  if (e->label && e->code == code) return e->label;
  const uint64_t id = cts_labels_id(labels, code);
  if (id) *e = (code_label_t){code, id};
  return id;
}

/* The deepest of the nodes' depths (cts_stacks_depths). */
static uint32_t max_depth(const cts_stacks_t *s, const uint32_t *depths) {
  uint32_t d = 0;
  for (uint32_t i = 0; i < s->count; i++)
    if (depths[i] > d) d = depths[i];
  return d;
}

/* The sample count folded stacks show for a node (all but --value count). */
static uint64_t folded_count(const cts_site_stats_t *st, value_t value) {
  return value == VAL_LIVE ? st->live_samples : value == VAL_PEAK ? st->peak_samples : st->samples;
}

/* A merged node's key and id: open addressing, node 0 = empty (the root is never a key). */
typedef struct merge_slot {
  uint32_t parent, label, node;
} merge_slot_t;

/* Numbers the nodes of the trie merged by frame name (a node per distinct path of names, in
 * order of first appearance, as cts_stacks_relabel_nodes would make them): map[i] for each
 * node, *merged their count. Only the numbers are made, not a second trie: a line needs a
 * path of names, and the first node of each merged one has it. One probe per node into a
 * table whose slot holds the whole key (a second trie took two misses a node, its growth and
 * 24 bytes a node more). Returns 0 or -ENOMEM. */
static int merge_by_name(const cts_stacks_t *s, cts_labels_t *labels, code_label_t *cl,
                         uint32_t *map, uint32_t *merged) {
  /* At most s->count keys: a load of at most 0.7, never grown. */
  size_t cap = 16;
  while (cap * 7 < (size_t)s->count * 10) cap *= 2;
  merge_slot_t *tab = cts_table_alloc(cap, sizeof *tab);
  if (!tab) return -ENOMEM;
  uint32_t n = 1;
  map[0] = 0;
  int e = 0;
  for (uint32_t i = 1; i < s->count; i++) {
    const uint64_t label = code_label_of(cl, labels, s->nodes[i].code);
    if (!label || label > UINT32_MAX) {
      e = -ENOMEM;
      break;
    }
    const uint32_t parent = map[s->nodes[i].parent];
    size_t k = cts_mix64((uint64_t)parent << 32 | label) & (cap - 1);
    for (; tab[k].node; k = (k + 1) & (cap - 1))
      if (tab[k].parent == parent && tab[k].label == (uint32_t)label) break;
    if (!tab[k].node) tab[k] = (merge_slot_t){parent, (uint32_t)label, n++};
    map[i] = tab[k].node;
  }
  free(tab);
  *merged = n;
  return e;
}

/* The folded line of each merged node, by one pass over the nodes: the path of the last line
 * written is kept (its nodes and where each frame's name ends in the line), so a node's
 * walk up stops where it joins that path and only the frames below are written again;
 * consecutive first nodes of merged ones mostly share all but their last frames. */
typedef struct fold_line {
  uint32_t *depths; /* of every node (cts_stacks_depths): the nodes keep none */
  uint32_t *path;   /* nodes of the last line, by depth - 1 */
  size_t *end;      /* end[k]: the line's length with frames 0..k-1 */
  uint32_t len;     /* frames in the last line */
  char *text;
  size_t cap;
} fold_line_t;

/* Node i's path (nodes by depth - 1) in path, where path[0..len) is the path of an earlier
 * node: the walk up from i stops where it joins it. Returns how many outer frames the two
 * share (path[0..that) is unchanged). */
static uint32_t path_join(const cts_stacks_t *s, const uint32_t *depths, uint32_t i, uint32_t *path,
                          uint32_t len) {
  uint32_t n = i;
  for (; n != 0; n = s->nodes[n].parent) {
    const uint32_t k = depths[n] - 1;
    if (k < len && path[k] == n) break;
    path[k] = n;
  }
  return n ? depths[n] : 0;
}

/* The line of node i (depth > 0) in l->text[0..l->end[depth]); -ENOMEM. */
static int fold_line_of(fold_line_t *l, const cts_stacks_t *s, uint32_t i, cts_labels_t *labels,
                        code_label_t *cl, const char *names, const size_t *offs) {
  const uint32_t depth = l->depths[i];
  const uint32_t shared = path_join(s, l->depths, i, l->path, l->len);
  size_t at = l->end[shared];
  for (uint32_t k = shared; k < depth; k++) {
    /* Every label id was made by merge_by_name: the names cover it. */
    const uint64_t id = code_label_of(cl, labels, s->nodes[l->path[k]].code);
    if (!id) return -ENOMEM;
    const size_t len = offs[id] - offs[id - 1];
    while (l->cap < at + len + 1)
      if (cts_grow((void **)&l->text, &l->cap, l->cap, 1)) return -ENOMEM;
    if (k) l->text[at++] = ';';
    memcpy(l->text + at, names + offs[id - 1], len);
    at += len;
    l->end[k + 1] = at;
  }
  l->len = depth;
  return 0;
}

static int export_folded(cts_out_t *o, cli_trace_t *t, const export_opts_t *opts) {
  const cts_alloc_profile_t *p = &t->prof;
  const cts_stacks_t *s = &p->stacks;
  const cts_frames_t frames = cli_trace_frames(t);
  cts_labels_t labels;
  cts_labels_init(&labels, &frames, CTS_LABEL_NAME);
  code_label_t *cl = calloc(CODE_LABEL_SLOTS, sizeof *cl);
  uint32_t *map = malloc(((size_t)s->count + 1) * sizeof *map);
  uint32_t merged = 0;
  int e = cl && map ? merge_by_name(s, &labels, cl, map, &merged) : -ENOMEM;
  /* The one figure printed, summed per merged node in node order (as cts_stacks_relabel
   * sums a merged node's figures). */
  const bool by_est = opts->value == VAL_COUNT;
  double *sums = NULL;
  uint64_t *counts = NULL;
  if (!e) {
    if (by_est)
      sums = calloc(merged, sizeof *sums);
    else
      counts = calloc(merged, sizeof *counts);
    if (!sums && !counts) e = -ENOMEM;
  }
  for (uint32_t i = 0; !e && i < s->count; i++) {
    if (!s->nodes[i].stat) continue; /* no figures */
    const cts_site_stats_t self = cts_stacks_self(s, i);
    if (by_est)
      sums[map[i]] += self.est_allocs;
    else
      counts[map[i]] += folded_count(&self, opts->value);
  }
  fold_line_t line = {0};
  if (!e) {
    line.depths = cts_stacks_depths(s);
    const size_t depth = line.depths ? (size_t)max_depth(s, line.depths) + 1 : 1;
    line.path = malloc(depth * sizeof *line.path);
    line.end = calloc(depth, sizeof *line.end);
    if (!line.depths || !line.path || !line.end) e = -ENOMEM;
  }
  char *names = NULL;
  size_t *offs = NULL;
  if (!e) e = folded_names(&labels, &names, &offs);
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  /* Merged nodes are numbered in order of their first node: node i is the first of merged
   * node `next` when map[i] == next. */
  for (uint32_t i = 0, next = 0; !e && i < s->count; i++) {
    if (map[i] != next) continue;
    const uint32_t m = next++;
    double v;
    switch (opts->value) {
      case VAL_COUNT:
        v = sums[m];
        break;
      case VAL_SAMPLES:
        v = (double)counts[m];
        break;
      default: /* bytes of the samples, live or at the peak */
        v = (double)counts[m] * bps;
        break;
    }
    const long long rounded = llround(v);
    if (rounded <= 0) continue;
    if (i == 0) { /* the root, the one node of depth 0 */
      cts_out_str(o, "(no backtrace)");
    } else {
      e = fold_line_of(&line, s, i, &labels, cl, names, offs);
      if (e) break;
      cts_out_write(o, line.text, line.end[line.len]);
    }
    cts_out_char(o, ' ');
    cts_out_i64(o, rounded);
    cts_out_char(o, '\n');
  }
  free(line.depths);
  free(line.path);
  free(line.end);
  free(line.text);
  free(names);
  free(offs);
  free(sums);
  free(counts);
  free(map);
  free(cl);
  cts_labels_fini(&labels);
  return e;
}

/* ---- pprof ---------------------------------------------------------------------------- */

typedef struct pb {
  uint8_t *data;
  size_t len, cap;
  bool nomem;
} pb_t;

/* Room for n more bytes at b->data + b->len; false when out of memory (b->nomem set). */
static bool pb_room_slow(pb_t *b, size_t n) {
  if (b->nomem) return false;
  while (b->len + n > b->cap)
    if (cts_grow((void **)&b->data, &b->cap, b->cap, 1)) {
      b->nomem = true;
      return false;
    }
  return true;
}

/* Inline: a large profile writes a few bytes at a time, tens of millions of times (its
 * samples' location ids), where a call and a grow check per write was an eighth of the
 * export's instructions. */
static inline bool pb_room(pb_t *b, size_t n) {
  return CTS_LIKELY(b->len + n <= b->cap && !b->nomem) || pb_room_slow(b, n);
}

static inline void pb_raw(pb_t *b, const void *p, size_t n) {
  if (!pb_room(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static inline void pb_varint(pb_t *b, uint64_t v) {
  if (!pb_room(b, 10)) return;
  uint8_t *d = b->data + b->len;
  while (v > 0x7f) {
    *d++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *d++ = (uint8_t)v;
  b->len = (size_t)(d - b->data);
}

static void pb_uint(pb_t *b, unsigned field, uint64_t v) {
  if (!v) return; /* proto3: zero is the default and is left out */
  pb_varint(b, (uint64_t)field << 3);
  pb_varint(b, v);
}

static void pb_bytes(pb_t *b, unsigned field, const void *p, size_t n) {
  pb_varint(b, (uint64_t)field << 3 | 2);
  pb_varint(b, n);
  pb_raw(b, p, n);
}

/* The profile's string table (cts_strtab: ids in order of first appearance; index 0 is
 * ""): each new string is appended to the Profile message as field 6. */
typedef struct strtab {
  pb_t *out;
  cts_strtab_t tab;
  bool nomem;
} strtab_t;

static uint64_t strtab_id(strtab_t *st, const char *s) {
  size_t id;
  const int added = cts_strtab_add(&st->tab, s, strlen(s), &id);
  if (added < 0) {
    st->nomem = true;
    return 0;
  }
  if (added) pb_bytes(st->out, 6, s, strlen(s));
  return id;
}

static void strtab_fini(strtab_t *st) {
  cts_strtab_fini(&st->tab);
}

static void pb_value_type(pb_t *out, strtab_t *st, unsigned field, const char *type,
                          const char *unit) {
  pb_t m = {0};
  pb_uint(&m, 1, strtab_id(st, type));
  pb_uint(&m, 2, strtab_id(st, unit));
  pb_bytes(out, field, m.data, m.len);
  if (m.nomem) out->nomem = true;
  free(m.data);
}

/* The profile, gzip-compressed as it is made: the samples of a large trie are over a hundred
 * megabytes before compression, which would otherwise sit in memory whole. deflate's output
 * does not depend on how its input was cut, so the bytes are those of one call. */
typedef struct gz {
  z_stream z;
  cts_out_t *o;
  bool ready;
  int err;
} gz_t;

static int gz_begin(gz_t *g, cts_out_t *o) {
  memset(g, 0, sizeof *g);
  g->o = o;
  /* Level 1, as Go's own runtime/pprof writes its profiles: on gen_trace --mb 24's 25.9 MB
   * profile, level 6 took 0.48 s of CPU for 5.56 MB and level 1 0.17 s for 6.43 MB (zlib
   * through Python, 2026-11-27); deflate was 43 % of the export's instructions at level 6. */
  if (deflateInit2(&g->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -ENOMEM;
  g->ready = true;
  return 0;
}

/* Compresses b's bytes and empties it; with finish, ends the stream. Returns the first error
 * (sticky). */
static int gz_feed(gz_t *g, pb_t *b, bool finish) {
  if (g->err) return g->err;
  uint8_t buf[65536];
  size_t at = 0;
  for (;;) {
    const size_t left = b->len - at;
    const uInt chunk = left > (1u << 30) ? 1u << 30 : (uInt)left;
    g->z.next_in = left ? b->data + at : NULL;
    g->z.avail_in = chunk;
    g->z.next_out = buf;
    g->z.avail_out = sizeof buf;
    const int zr = deflate(&g->z, finish && chunk == left ? Z_FINISH : Z_NO_FLUSH);
    const size_t used = chunk - g->z.avail_in, made = sizeof buf - g->z.avail_out;
    at += used;
    cts_out_write(g->o, buf, made);
    if (zr == Z_STREAM_END) break;
    if ((zr != Z_OK && zr != Z_BUF_ERROR) || (finish && !used && !made)) {
      g->err = CTS_E_IO;
      break;
    }
    /* Without finishing: done once every byte is taken and deflate had room to spare. */
    if (!finish && at == b->len && g->z.avail_out) break;
  }
  b->len = 0;
  return g->err;
}

static void gz_end(gz_t *g) {
  if (g->ready) deflateEnd(&g->z);
  g->ready = false;
}

/* ---- pprof mappings ----------------------------------------------------------------------
 * A memtrace trace has no memory map, but its location codes are return addresses, and
 * ctfscope's tracer names a frame without debugging information after its module's path
 * (include/ctfscope/tracer.h, "Backtraces"). pprof wants a mapping per module with the main
 * binary first ("Main binary filename not available" otherwise): mapping 1 is the trace's
 * executable; every module named by a frame gets one spanning the codes named after it; a
 * code with source-level information goes to the module whose span holds it, else to the
 * main binary (a program built with debugging information, against libraries without). */

#define MAX_MAPPINGS 4096u      /* more modules than this: the rest count as the main binary */
#define UNKNOWN      UINT32_MAX /* of_loc: no mapping yet */

typedef struct mapping {
  const char *filename;  /* borrowed from the trace */
  uint64_t start, limit; /* the codes seen in it: [start, limit) */
} mapping_t;

typedef struct mappings {
  mapping_t *m;
  uint32_t count;
  uint32_t *of_loc; /* mapping index (0-based) of each location id - 1 */
  uint64_t *codes;  /* the code of each location id - 1 */
  size_t nlocs;
} mappings_t;

/* Whether a location's file name is a module's path, as the tracer writes it for code
 * without debugging information: the executable, a shared object, or the kernel's [vdso]. */
static bool names_module(const char *file, const char *exe) {
  if (!file || !file[0]) return false;
  if (exe && exe[0] && strcmp(file, exe) == 0) return true;
  if (file[0] == '[') return true;
  const char *const slash = strrchr(file, '/');
  const char *const so = strstr(slash ? slash : file, ".so");
  return file[0] == '/' && so && (so[3] == '\0' || so[3] == '.');
}

static void widen(mapping_t *m, uint64_t code) {
  if (m->limit == 0) {
    m->start = code;
    m->limit = code + 1;
    return;
  }
  if (code < m->start) m->start = code;
  if (code >= m->limit) m->limit = code + 1;
}

#define CLUSTER_GAP (UINT64_C(1) << 30)  /* codes this far apart are in different regions */
#define NEAR_MODULE (UINT64_C(64) << 20) /* a code this close to a module's span is in it */

static const uint64_t *sort_codes;
static int by_code(const void *a, const void *b) {
  const uint64_t x = sort_codes[*(const uint32_t *)a], y = sort_codes[*(const uint32_t *)b];
  return x < y ? -1 : x > y;
}

/* The mapping for the codes named after source files: the executable lies at the bottom of
 * the address space (0x400000, or 0x55... for PIE), libraries near its top, so the codes are
 * split into regions at gaps of CLUSTER_GAP. In the executable's region (where its named
 * codes are, else the lowest) they are the executable's, unless a library's span holds them;
 * elsewhere the module whose span holds them or is within NEAR_MODULE, else an unnamed
 * mapping for the region (pprof then shows no file for them). */
static int place_unnamed(mappings_t *mp) {
  uint32_t *const order = malloc((mp->nlocs + 1) * sizeof *order);
  uint32_t *const region = malloc((mp->nlocs + 1) * sizeof *region);
  if (!order || !region) {
    free(order);
    free(region);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < mp->nlocs; i++) order[i] = i;
  sort_codes = mp->codes;
  qsort(order, mp->nlocs, sizeof *order, by_code);
  uint32_t regions = 0, main_region = 0;
  bool main_known = false;
  for (size_t k = 0; k < mp->nlocs; k++) {
    const uint32_t i = order[k];
    if (k && mp->codes[i] - mp->codes[order[k - 1]] > CLUSTER_GAP) regions++;
    region[i] = regions;
    if (mp->of_loc[i] == 0 && !main_known) main_region = regions, main_known = true;
  }
  uint32_t unnamed_region = UINT32_MAX, unnamed = 0;
  for (size_t k = 0; k < mp->nlocs; k++) {
    const uint32_t i = order[k];
    if (mp->of_loc[i] != UNKNOWN) continue;
    const uint64_t c = mp->codes[i];
    uint32_t best = 0;
    uint64_t best_d = UINT64_MAX;
    for (uint32_t j = 1; j < mp->count; j++) {
      const mapping_t *const m = &mp->m[j];
      const uint64_t d = c < m->start ? m->start - c : c >= m->limit ? c - m->limit + 1 : 0;
      if (d < best_d) best = j, best_d = d;
    }
    uint32_t k2;
    if (best && best_d == 0) {
      k2 = best;
    } else if (region[i] == main_region) {
      k2 = 0;
    } else if (best && best_d <= NEAR_MODULE) {
      k2 = best;
    } else if (region[i] == unnamed_region) {
      k2 = unnamed;
    } else if (mp->count < MAX_MAPPINGS) {
      unnamed_region = region[i];
      unnamed = k2 = mp->count++;
      mp->m[k2].filename = "";
    } else {
      k2 = 0;
    }
    mp->of_loc[i] = k2;
    widen(&mp->m[k2], c);
  }
  free(order);
  free(region);
  return 0;
}

/* Builds the mappings of the `nlocs` codes (location id i + 1 is codes[i]). */
static int build_mappings(mappings_t *mp, cli_trace_t *t) {
  const char *const exe = t->info && t->info->executable_name ? t->info->executable_name : "";
  mp->m = calloc(MAX_MAPPINGS, sizeof *mp->m);
  mp->of_loc = calloc(mp->nlocs + 1, sizeof *mp->of_loc);
  if (!mp->m || !mp->of_loc) return -ENOMEM;
  mp->m[0].filename = exe;
  mp->count = 1;
  cts_u64map_t index_of; /* hash of a module's name -> its index + 1 */
  cts_u64map_init(&index_of);
  int e = 0;
  const cts_frames_t frames = cli_trace_frames(t);
  for (size_t i = 0; i < mp->nlocs && !e; i++) {
    const cts_mt_location_t *locs = NULL;
    size_t n = 0;
    if (frames.lookup(frames.user_data, mp->codes[i], &locs, &n) != 0) n = 0;
    const char *const file = n ? locs[n - 1].filename : NULL;
    mp->of_loc[i] = UNKNOWN;
    if (!names_module(file, exe)) continue;
    bool added;
    uint64_t *const slot = cts_u64map_insert(&index_of, cts_u64map_str_key(file),
                                             strcmp(file, exe) == 0 ? 1 : mp->count + 1, &added);
    if (!slot) {
      e = -ENOMEM;
      break;
    }
    if (added && *slot != 1) {
      if (mp->count == MAX_MAPPINGS) {
        *slot = 1;
      } else {
        mp->m[mp->count++].filename = file;
      }
    }
    mp->of_loc[i] = (uint32_t)(*slot - 1);
    widen(&mp->m[mp->of_loc[i]], mp->codes[i]);
  }
  cts_u64map_fini(&index_of);
  if (!e) e = place_unnamed(mp);
  return e;
}

static void write_mappings(pb_t *prof, strtab_t *st, const mappings_t *mp) {
  for (uint32_t i = 0; i < mp->count; i++) {
    const mapping_t *const m = &mp->m[i];
    pb_t b = {0};
    pb_uint(&b, 1, i + 1);
    pb_uint(&b, 2, m->start);
    pb_uint(&b, 3, m->limit);
    pb_uint(&b, 5, strtab_id(st, m->filename));
    /* Functions, files, lines and inlined frames come with the trace: pprof must not try
     * to symbolise the addresses (they are this run's, not the file's). */
    for (unsigned f = 7; f <= 10; f++) pb_uint(&b, f, 1);
    pb_bytes(prof, 3, b.data, b.len);
    if (b.nomem) prof->nomem = true;
    free(b.data);
  }
}

/* pprof: location ids of the frame codes met last, direct-mapped in front of the map (id 0:
 * empty). Every frame of every sample names its location: the few thousand codes of a
 * trace fit here, where a hash map look-up per frame was a tenth of the export. */
#define LOC_CACHE_SLOTS 4096u

typedef struct loc_cache {
  uint64_t code[LOC_CACHE_SLOTS];
  uint32_t id[LOC_CACHE_SLOTS];
} loc_cache_t;

/* The location id of code (known to map); 0 if it is not there. */
static inline uint64_t loc_id(loc_cache_t *c, const cts_u64map_t *map, uint64_t code) {
  const size_t k = cts_mix64(code) & (LOC_CACHE_SLOTS - 1u);
  if (CTS_LIKELY(c->id[k] && c->code[k] == code)) return c->id[k];
  const uint64_t *v = cts_u64map_find(map, code);
  if (!v) return 0;
  if (*v <= UINT32_MAX) c->code[k] = code, c->id[k] = (uint32_t)*v;
  return *v;
}

static int export_pprof(cts_out_t *o, cli_trace_t *t) {
  const cts_alloc_profile_t *p = &t->prof;
  const cts_stacks_t *s = &p->stacks;
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  pb_t prof = {0}, m = {0}, packed = {0};
  strtab_t st = {.out = &prof};
  cts_strtab_init(&st.tab);
  cts_u64map_t loc_of_code, fn_of_key;
  cts_u64map_init(&loc_of_code);
  cts_u64map_init(&fn_of_key);
  int e = 0;
  strtab_id(&st, "");
  pb_value_type(&prof, &st, 1, "alloc_objects", "count");
  pb_value_type(&prof, &st, 1, "alloc_space", "bytes");
  pb_value_type(&prof, &st, 1, "inuse_objects", "count");
  pb_value_type(&prof, &st, 1, "inuse_space", "bytes");

  /* Locations (one per frame code, id = order of first use) and functions (one per name and
   * file). pprof lists inlined frames innermost first; memtrace lists them outermost first. */
  mappings_t mp = {0};
  mp.codes = malloc((s->count + 1) * sizeof *mp.codes);
  loc_cache_t *lc = calloc(1, sizeof *lc);
  if (!mp.codes || !lc) e = -ENOMEM;
  for (uint32_t i = 1; i < s->count && !e; i++) {
    if (loc_id(lc, &loc_of_code, s->nodes[i].code)) continue; /* known */
    bool added;
    if (!cts_u64map_insert(&loc_of_code, s->nodes[i].code, mp.nlocs + 1, &added)) {
      e = -ENOMEM;
    } else if (added) {
      mp.codes[mp.nlocs++] = s->nodes[i].code;
    }
  }
  if (!e) e = build_mappings(&mp, t);
  if (!e) write_mappings(&prof, &st, &mp);
  uint64_t next_fn = 1;
  for (size_t li = 0; li < mp.nlocs && !e; li++) {
    const uint64_t code = mp.codes[li];
    bool added;
    m.len = 0;
    pb_uint(&m, 1, li + 1);
    pb_uint(&m, 2, mp.of_loc[li] + 1u);
    pb_uint(&m, 3, code); /* the code as the "address": shown when there is no line info */
    const cts_mt_location_t *locs = NULL;
    size_t n = 0;
    const cts_frames_t frames = cli_trace_frames(t);
    if (frames.lookup(frames.user_data, code, &locs, &n) != 0) n = 0;
    for (size_t k = n; k-- > 0;) {
      const cts_mt_location_t *l = &locs[k];
      char key[1024];
      snprintf(key, sizeof key, "%s%c%s", l->defname, 1, l->filename);
      const uint64_t h = cts_u64map_str_key(key);
      /* Function ids are keyed by a hash of name and file; pprof only needs them distinct
       * per name and file, so a 64-bit collision would merely merge two functions. */
      uint64_t *fslot = cts_u64map_insert(&fn_of_key, h, next_fn, &added);
      if (!fslot) {
        e = -ENOMEM;
        break;
      }
      if (added) {
        pb_t f = {0};
        pb_uint(&f, 1, next_fn++);
        pb_uint(&f, 2, strtab_id(&st, l->defname[0] ? l->defname : "?"));
        /* system_name: the symbol as the program has it, when shown demangled. */
        const char *mangled = cli_trace_mangled(t, l->defname);
        pb_uint(&f, 3, strtab_id(&st, mangled ? mangled : l->defname[0] ? l->defname : "?"));
        pb_uint(&f, 4, strtab_id(&st, l->filename));
        pb_bytes(&prof, 5, f.data, f.len);
        if (f.nomem) e = -ENOMEM;
        free(f.data);
      }
      pb_t line = {0};
      pb_uint(&line, 1, *fslot);
      pb_uint(&line, 2, l->line);
      pb_uint(&line, 3, l->start_char);
      pb_bytes(&m, 4, line.data, line.len);
      if (line.nomem) e = -ENOMEM;
      free(line.data);
    }
    pb_bytes(&prof, 4, m.data, m.len);
  }

  /* What is made so far goes to the compressor, then the samples as they are made. */
  gz_t gz;
  const bool gz_ok = !e && gz_begin(&gz, o) == 0;
  if (!e && !gz_ok) e = -ENOMEM;
  if (!e && (prof.nomem || st.nomem)) e = -ENOMEM;
  if (!e) e = gz_feed(&gz, &prof, false);

  /* One sample per stack that allocated, its locations leaf first. Samples come in node
   * order, where each mostly shares all but its last frames with the one before: the packed
   * location ids of the last sample's path are kept right-aligned in locs (the root's frame
   * last; ends[k]: the bytes of its k outermost frames), so only the frames below where the
   * path joins the last one are looked up and encoded again. */
  uint32_t *depths = e ? NULL : cts_stacks_depths(s);
  if (!e && !depths) e = -ENOMEM;
  const size_t depth_cap = depths ? (size_t)max_depth(s, depths) + 1 : 1;
  uint32_t *path = malloc(depth_cap * sizeof *path);
  size_t *ends = calloc(depth_cap, sizeof *ends);
  uint8_t *locs = malloc(depth_cap * 10);
  if (!e && (!path || !ends || !locs)) e = -ENOMEM;
  uint32_t path_len = 0;
  uint8_t *const locs_end = locs ? locs + depth_cap * 10 : NULL;
  for (uint32_t i = 0; i < s->count && !e; i++) {
    if (!s->nodes[i].stat) continue; /* no figures */
    const cts_site_stats_t self = cts_stacks_self(s, i), *ss = &self;
    if (!ss->allocs) continue;
    const uint32_t depth = depths[i];
    for (uint32_t k = path_join(s, depths, i, path, path_len); k < depth; k++) {
      uint8_t v[10];
      size_t len = 0;
      for (uint64_t id = loc_id(lc, &loc_of_code, s->nodes[path[k]].code);; id >>= 7) {
        v[len++] = (uint8_t)(id > 0x7f ? (id & 0x7f) | 0x80 : id);
        if (id <= 0x7f) break;
      }
      ends[k + 1] = ends[k] + len;
      memcpy(locs_end - ends[k + 1], v, len);
    }
    path_len = depth;
    m.len = 0;
    if (depth) pb_bytes(&m, 1, locs_end - ends[depth], ends[depth]);
    packed.len = 0;
    pb_varint(&packed, cts_est_round(ss->est_allocs));
    pb_varint(&packed, cts_est_round((double)ss->samples * bps));
    pb_varint(&packed, cts_est_round(ss->live_est_allocs));
    pb_varint(&packed, cts_est_round((double)ss->live_samples * bps));
    pb_bytes(&m, 2, packed.data, packed.len);
    pb_bytes(&prof, 2, m.data, m.len);
    if (prof.len >= (1u << 20)) e = prof.nomem ? -ENOMEM : gz_feed(&gz, &prof, false);
  }
  free(depths);
  free(path);
  free(ends);
  free(locs);
  if (!e) {
    char comment[256];
    char rate[64];
    snprintf(comment, sizeof comment,
             "ctfscope: estimated from memtrace samples, bytes = samples / %s x %u bytes",
             cli_shortest_double(p->sample_rate, rate, sizeof rate), p->word_bytes);
    const uint64_t comment_id = strtab_id(&st, comment);
    const uint64_t default_type = strtab_id(&st, "alloc_space");
    pb_uint(&prof, 9, p->start_time_us * 1000u);
    pb_uint(&prof, 10, (uint64_t)llround(cts_alloc_profile_duration_s(p) * 1e9));
    pb_value_type(&prof, &st, 11, "space", "bytes");
    pb_uint(&prof, 12, cts_est_round(bps));
    pb_uint(&prof, 13, comment_id);
    pb_uint(&prof, 14, default_type);
  }
  if (!e && (prof.nomem || m.nomem || packed.nomem || st.nomem)) e = -ENOMEM;
  if (!e) e = gz_feed(&gz, &prof, true);
  if (gz_ok) gz_end(&gz);
  free(prof.data);
  free(m.data);
  free(packed.data);
  free(mp.m);
  free(mp.of_loc);
  free(mp.codes);
  free(lc);
  strtab_fini(&st);
  cts_u64map_fini(&loc_of_code);
  cts_u64map_fini(&fn_of_key);
  return e;
}

/* ---- chrome and csv: streamed while reading -------------------------------------------- */

#define MAX_COUNTER_POINTS 4096u

typedef struct counter_point {
  uint64_t time_us, live_samples, alloc_samples;
} counter_point_t;

/* Text formatted once per key and kept for the next events that need it: the CSV columns of
 * an allocation point (keyed by backtrace code), the JSON string of a frame name (keyed by
 * label id). A trace has few of them and millions of events. A direct-mapped table over a
 * text arena that starts again when full, so its memory is fixed whatever the trace; a text
 * longer than TEXT_CACHE_MAX is not kept (the caller writes it itself). */
#define TEXT_CACHE_SLOTS 4096u
#define TEXT_CACHE_TEXT  (1u << 20)
#define TEXT_CACHE_MAX   (16u << 10)

typedef struct text_slot {
  uint64_t key;
  uint32_t off, len; /* in text; len 0: an empty slot */
  uint32_t aux;      /* the caller's (chrome: the name's length before escaping) */
} text_slot_t;

/* Bytes readable past a kept text's end: csv copies its sites in whole TEXT_CHUNK blocks (a
 * copy of a fixed size is a few moves, one of n bytes a call). */
#define TEXT_CHUNK 64u

typedef struct text_cache {
  text_slot_t slots[TEXT_CACHE_SLOTS];
  size_t used;
  char text[TEXT_CACHE_TEXT + TEXT_CHUNK];
} text_cache_t;

/* (Zeroed: every slot empty, and the bytes a chunked copy reads past a text are defined.) */
static text_cache_t *text_cache_new(void) {
  return calloc(1, sizeof(text_cache_t));
}

static text_slot_t *text_slot(text_cache_t *tc, uint64_t key) {
  return &tc->slots[cts_mix64(key) & (TEXT_CACHE_SLOTS - 1)];
}

/* The text kept for key (its slot), or NULL. */
static const text_slot_t *text_cache_find(text_cache_t *tc, uint64_t key) {
  const text_slot_t *e = text_slot(tc, key);
  return e->len && e->key == key ? e : NULL;
}

/* Room for need (≤ TEXT_CACHE_MAX) bytes of text, which text_cache_keep then keeps. */
static char *text_cache_room(text_cache_t *tc, size_t need) {
  if (tc->used + need > TEXT_CACHE_TEXT) {
    for (size_t i = 0; i < TEXT_CACHE_SLOTS; i++) tc->slots[i].len = 0;
    tc->used = 0;
  }
  return tc->text + tc->used;
}

/* Keeps the len (> 0) bytes written at text_cache_room as key's text. */
static const text_slot_t *text_cache_keep(text_cache_t *tc, uint64_t key, size_t len,
                                          uint32_t aux) {
  text_slot_t *e = text_slot(tc, key);
  *e = (text_slot_t){key, (uint32_t)tc->used, (uint32_t)len, aux};
  tc->used += len;
  return e;
}

typedef struct stream_ctx {
  cts_out_t *o;
  text_cache_t *cache; /* csv: allocation points; chrome: frame names */
  const export_opts_t *opts;
  cts_labels_t labels;
  cts_frames_t frames;
  bool labels_ready;
  /* chrome: the open flame-chart frames (label ids), and the byte clock */
  uint64_t *open;
  uint64_t *path;
  size_t open_len, cap_open, cap_path;
  /* chrome: the frame codes path was labelled from (the last allocation's, ncodes of
   * them): a prefix the next one shares keeps its labels without a look-up */
  uint64_t *codes;
  size_t ncodes, cap_codes;
  code_label_t *code_labels; /* chrome: frame code -> label id, CODE_LABEL_SLOTS of them */
  /* chrome: the digit count of the last time (JSON size estimate); the events of one
   * allocation share their time */
  double digits_ts;
  unsigned digits;
  double clock;
  /* chrome: the last time written and its text (ts_len 0: none kept) */
  double ts_memo;
  size_t ts_len;
  char ts_text[48];
  cts_json_t w; /* {"traceEvents": [ one event per line ... */
  /* chrome: the heap counters' figures, kept here since the profile takes no event
   * (events_only): samples allocated so far, and live now (the live blocks' samples, an
   * 8-byte record per block where the profile keeps 24) */
  uint64_t alloc_clock, live_samples;
  cts_live_table_t live;
  /* csv: est_bytes per sample for the sample rate and word size it was computed from (the
   * trace's info sets them before its first event), and the same as an integer when it is
   * one below 2^21 (0 otherwise): then samples below 2^32 give an exact product that
   * "%.0f" prints as that integer, formatted without the double. */
  double csv_bps, csv_bps_rate;
  unsigned csv_bps_word;
  uint64_t csv_bps_int;
  /* csv: the columns ",nsamples,est_bytes" of each sample count below CSV_SAMPLE_TEXTS,
   * formatted at its first use while csv_bps_int holds; a slot is valid while its gen is
   * csv_gen, which a new estimate per sample advances */
  struct csv_samples *csv_samples;
  uint32_t csv_gen;
  /* csv: the time column, and the ids of allocations (numbered in order), as text */
  cts_fmt_memo_t csv_time, csv_alloc_id;
  /* chrome: counters, thinned to at most MAX_COUNTER_POINTS by doubling their spacing */
  counter_point_t *points;
  size_t npoints;
  uint64_t spacing_us, last_point_us;
  /* chrome: the JSON's bytes so far, to refuse an output larger than opts->max_size
   * (json_refused: the reading was stopped for that, at offset refused_at of the input).
   * Counted exactly by the count pass (counting: nothing is written, o is a scratch buffer
   * drained after every event), estimated while writing. */
  uint64_t json_bytes, refused_at;
  bool json_refused, counting;
  bool counted_whole; /* the count pass read the whole trace: json_bytes is the size */
  /* the count pass found the JSON within the limit: no check while writing, and the heap
   * counters are its (points), not counted again */
  bool counted;
  /* the count pass: the last time counted and the length of its text */
  double count_ts;
  size_t count_ts_len;
  uint64_t counted_events;
  int err;
} stream_ctx_t;

/* Room for n frames in both stacks. */
static int ensure_cap(stream_ctx_t *c, size_t n) {
  while (c->cap_open < n)
    if (cts_grow((void **)&c->open, &c->cap_open, c->cap_open, sizeof *c->open)) return -ENOMEM;
  while (c->cap_path < n)
    if (cts_grow((void **)&c->path, &c->cap_path, c->cap_path, sizeof *c->path)) return -ENOMEM;
  while (c->cap_codes < n)
    if (cts_grow((void **)&c->codes, &c->cap_codes, c->cap_codes, sizeof *c->codes)) return -ENOMEM;
  return 0;
}

/* The label id of a frame code (0: out of memory). */
static uint64_t code_label(stream_ctx_t *c, uint64_t code) {
  return code_label_of(c->code_labels, &c->labels, code);
}

void cli_chrome_begin(cts_json_t *w, cts_out_t *o) {
  cts_json_init(w, o);
  cts_json_object(w);
  cts_json_key(w, "traceEvents");
  cts_json_array(w);
}

void cli_chrome_end_events(cts_json_t *w) {
  cts_json_ws(w, "\n");
  cts_json_end(w); /* traceEvents */
  cts_json_ws(w, "\n");
  cts_json_kv_str(w, "displayTimeUnit", "ms");
  cts_json_ws(w, "\n");
  cts_json_key(w, "otherData");
  cts_json_object(w);
  cts_json_kv_str(w, "generator", "ctfscope export");
}

void cli_chrome_end(cts_json_t *w) {
  cts_json_end(w); /* otherData */
  cts_json_end(w);
  cts_json_finish(w);
  cts_out_char(w->o, '\n');
}

/* Opens an event of the traceEvents array, one per line. */
static cts_json_t *begin_event(stream_ctx_t *c, const char *ph, unsigned pid) {
  cts_json_t *w = &c->w;
  cts_json_ws(w, "\n");
  cts_json_object(w);
  cts_json_kv_str(w, "ph", ph);
  cts_json_kv_u64(w, "pid", pid);
  return w;
}

/* A slice of the flame chart opening ('B') or closing ('E') at ts, named after label (0:
 * "(no backtrace)"). Written in place (cts_json_raw_value): millions of events of one shape,
 * their names escaped once (the text cache). */
static const char chrome_event_head[] = "{\"ph\": \"B\", \"pid\": 2, \"tid\": 1, \"ts\": ";
static const char chrome_name_key[] = ", \"name\": ";

/* The length of ts as chrome_event writes it: "%.3f" (cts_out_fixed), or "null". Counted
 * from its integer digits when it is far enough from the next power of ten not to round up
 * to it (and small enough for that distance to be exact in a double), else printed. */
static size_t chrome_ts_len(double ts) {
  if (!isfinite(ts)) return 4;
  if (!signbit(ts) && ts < 1e12) {
    size_t digits = 1;
    double power = 10;
    while (ts >= power) {
      digits++;
      power *= 10;
    }
    if (ts < power - 0.001) return digits + 4;
  }
  char text[400]; /* (the longest, -DBL_MAX, is 313 bytes) */
  const int n = snprintf(text, sizeof text, "%.3f", ts);
  return n > 0 ? (size_t)n : 0;
}

/* The count pass's chrome_event: the bytes it would write, added to json_bytes. The JSON
 * writer's separator before the first event goes to the scratch buffer, which is drained;
 * after it, each event's is ",\n" (the writer is not called per event: a third of the
 * pass's instructions were its). */
static void count_event(stream_ctx_t *c, const text_slot_t *e, const char *name, double ts) {
  if (c->counted_events++ == 0) {
    cts_json_ws(&c->w, "\n");
    cts_json_raw_value(&c->w);
  } else {
    c->json_bytes += 2;
  }
  if (!c->count_ts_len || memcmp(&ts, &c->count_ts, sizeof ts) != 0) {
    c->count_ts = ts;
    c->count_ts_len = chrome_ts_len(ts);
  }
  size_t name_len;
  if (e) {
    name_len = e->len;
  } else { /* a name too long to keep: escaped once more (at most 6 bytes a byte) */
    const size_t raw = strlen(name);
    char *d = malloc(6 * raw + 2);
    name_len = d ? cts_fmt_json_str(d, name) : 6 * raw + 2;
    free(d);
  }
  c->json_bytes += c->o->len + sizeof chrome_event_head - 1 + c->count_ts_len +
                   sizeof chrome_name_key + name_len;
  c->o->len = 0;
}

static void chrome_event(stream_ctx_t *c, char ph, uint64_t label, double ts) {
  const char *const head = chrome_event_head, *const name_key = chrome_name_key;
  const text_slot_t *e = text_cache_find(c->cache, label);
  const char *name = NULL;
  size_t raw;
  if (e) {
    raw = e->aux;
  } else {
    name = label ? cts_labels_name(&c->labels, label) : "(no backtrace)";
    raw = strlen(name);
    if (6 * raw + 2 <= TEXT_CACHE_MAX) {
      char *d = text_cache_room(c->cache, 6 * raw + 2);
      e = text_cache_keep(c->cache, label, cts_fmt_json_str(d, name), (uint32_t)raw);
    }
  }
  if (c->counting) {
    count_event(c, e, name, ts);
    return;
  }
  /* '{"ph": "B", "pid": 2, "tid": 1, "ts": T.000, "name": "N"},\n': 53 bytes, the time's
   * digits and the name (escapes aside, rare in names). */
  if (ts != c->digits_ts) {
    unsigned digits = 5; /* "0.000" */
    /* In double: a hostile trace's time can be beyond any integer type (or not a number,
     * which stops the loop at once). */
    for (double v = ts < 0 ? -ts : ts; v >= 10 && digits < 400; v /= 10) digits++;
    c->digits_ts = ts;
    c->digits = digits;
  }
  c->json_bytes += 53 + c->digits + raw;
  cts_out_t *o = c->o;
  cts_json_ws(&c->w, "\n");
  cts_json_raw_value(&c->w);
  char *d = cts_out_reserve(o, sizeof chrome_event_head + sizeof c->ts_text);
  memcpy(d, head, sizeof chrome_event_head - 1);
  d[8] = ph;
  o->len += sizeof chrome_event_head - 1;
  /* The time as the last event wrote it when it is the same double (bit for bit: -0 and 0
   * print apart); else formatted, its text contiguous in the buffer (the reserve is more
   * than the 314 bytes of the longest), and kept when short. */
  if (c->ts_len && memcmp(&ts, &c->ts_memo, sizeof ts) == 0) {
    memcpy(d + sizeof chrome_event_head - 1, c->ts_text, sizeof c->ts_text);
    o->len += c->ts_len;
  } else {
    cts_out_reserve(o, 512);
    const size_t at = o->len;
    if (isfinite(ts))
      cts_out_fixed(o, ts, 3);
    else
      cts_out_str(o, "null");
    const size_t len = o->len - at;
    c->ts_len = len <= sizeof c->ts_text ? len : 0;
    memcpy(c->ts_text, o->buf + at, c->ts_len);
    c->ts_memo = ts;
  }
  if (e) {
    d = cts_out_reserve(o, sizeof chrome_name_key + e->len);
    memcpy(d, name_key, sizeof chrome_name_key - 1);
    memcpy(d + sizeof chrome_name_key - 1, c->cache->text + e->off, e->len);
    d[sizeof chrome_name_key - 1 + e->len] = '}';
    o->len += sizeof chrome_name_key + e->len;
  } else {
    cts_out_str(o, name_key);
    cts_out_json_str(o, name);
    cts_out_char(o, '}');
  }
}

/* A metadata event naming a process or thread. */
static void name_event(stream_ctx_t *c, unsigned pid, int tid, const char *what, const char *name) {
  cts_json_t *w = begin_event(c, "M", pid);
  if (tid >= 0) cts_json_kv_u64(w, "tid", (unsigned)tid);
  cts_json_kv_str(w, "name", what);
  cts_json_key(w, "args");
  cts_json_object(w);
  cts_json_kv_str(w, "name", name);
  cts_json_end(w);
  cts_json_end(w);
}

/* The heap figures after ev, as the profile counts them: an allocation adds its samples
 * (an id allocated twice, in a corrupt trace, ends the older block first), a collection
 * of a live id takes them away, anything else changes nothing. Returns 0 or -ENOMEM. */
static int count_live(stream_ctx_t *c, const cts_mt_event_t *ev) {
  if (ev->kind == CTS_MT_ALLOC) {
    bool added;
    uint64_t *samples = cts_live_insert(&c->live, ev->obj_id, &added);
    if (!samples) return -ENOMEM;
    c->live_samples += ev->nsamples - *samples; /* (0 when added) */
    *samples = ev->nsamples;
    c->alloc_clock += ev->nsamples;
  } else if (ev->kind == CTS_MT_COLLECT) {
    uint64_t samples;
    if (cts_live_take(&c->live, ev->obj_id, &samples)) c->live_samples -= samples;
  }
  return 0;
}

static void add_point(stream_ctx_t *c, uint64_t time_us) {
  if (c->npoints && time_us < c->last_point_us + c->spacing_us) {
    /* Same slot: keep its latest value. */
    c->points[c->npoints - 1] =
        (counter_point_t){c->points[c->npoints - 1].time_us, c->live_samples, c->alloc_clock};
    return;
  }
  if (c->npoints == MAX_COUNTER_POINTS) {
    size_t k = 0;
    for (size_t i = 0; i < c->npoints; i += 2) c->points[k++] = c->points[i];
    c->npoints = k;
    c->spacing_us = c->spacing_us ? c->spacing_us * 2 : 1;
  }
  c->points[c->npoints++] = (counter_point_t){time_us, c->live_samples, c->alloc_clock};
  c->last_point_us = time_us;
}

static int chrome_hook(void *ud, cli_trace_t *t, const cts_mt_event_t *ev) {
  stream_ctx_t *c = ud;
  const cts_alloc_profile_t *p = &t->prof;
  if (!c->counted) {
    if (count_live(c, ev)) return -ENOMEM;
    add_point(c, ev->time_us);
  }
  if (ev->kind != CTS_MT_ALLOC) return 0;
  if (!c->labels_ready) {
    c->frames = cli_trace_frames(t);
    cts_labels_init(&c->labels, &c->frames, CTS_LABEL_NAME);
    c->labels_ready = true;
  }
  /* The stack as the profile would intern it (allocator frames folded: a prefix), named
   * from the trace's codes: no stack is interned for this export, so none is lost to the
   * node budget either. Then close what differs from the open frames and open the rest. */
  const size_t n = ev->backtrace_len;
  const size_t depth = t->fold ? cts_fold_cut(t->fold, ev->backtrace, n) : n;
  if (ensure_cap(c, depth + 1)) return -ENOMEM;
  /* The codes the last allocation's stack starts with too keep their labels, and those
   * frames are open still: after every allocation open[0..open_len) is path[0..ncodes).
   * Found first in a loop of one compare a frame (a stack shares most of its frames with
   * the last one; this was most of the export's and its count pass's work). */
  const size_t known = c->ncodes < depth ? c->ncodes : depth;
  size_t same = 0;
  while (same < known && ev->backtrace[same] == c->codes[same]) same++;
  size_t common = same < c->open_len ? same : c->open_len;
  for (size_t k = same; k < depth; k++) {
    const uint64_t code = ev->backtrace[k];
    const uint64_t id = code_label(c, code);
    if (!id) {
      c->ncodes = 0;
      return -ENOMEM;
    }
    c->codes[k] = code;
    c->path[k] = id;
    if (common == k && k < c->open_len && c->open[k] == id) common++;
  }
  c->ncodes = depth;
  while (c->open_len > common) chrome_event(c, 'E', c->open[--c->open_len], c->clock);
  for (size_t k = common; k < depth; k++) {
    c->open[c->open_len++] = c->path[k];
    chrome_event(c, 'B', c->path[k], c->clock);
  }
  if (depth == 0) {
    chrome_event(c, 'B', 0, c->clock);
    c->clock += (double)ev->nsamples * cts_alloc_profile_bytes_per_sample(p);
    chrome_event(c, 'E', 0, c->clock);
  } else {
    c->clock += (double)ev->nsamples * cts_alloc_profile_bytes_per_sample(p);
  }
  /* Counted: the pass stops at the limit. Written: a count pass ran before (and found the
   * JSON within the limit), unless the trace comes from standard input, which cannot be
   * read twice; then the writing stops here, its start out. */
  if (c->opts->max_size && !c->counted && c->json_bytes > c->opts->max_size) {
    c->json_refused = true;
    c->refused_at = ev->offset;
    return CTS_E_LIMIT;
  }
  return c->o->err;
}

/* s as a CSV field into d (room for 2 strlen(s) + 2 bytes): as cli_csv_str writes it. */
static size_t csv_field(char *d, const char *s) {
  size_t n = 0;
  if (!strpbrk(s, ",\"\n\r")) {
    n = strlen(s);
    memcpy(d, s, n);
    return n;
  }
  d[n++] = '"';
  for (; *s; s++) {
    if (*s == '"') d[n++] = '"';
    d[n++] = *s;
  }
  d[n++] = '"';
  return n;
}

/* The allocation point columns of code, ",function,file,line", from the cache (formatted
 * into it on a miss), or NULL when they are not kept: *l is then the location (NULL if
 * none). */
static const char *csv_site(text_cache_t *tc, cli_trace_t *t, uint64_t code, size_t *len,
                            const cts_mt_location_t **l) {
  const text_slot_t *e = text_cache_find(tc, code);
  if (!e) {
    const cts_frames_t frames = cli_trace_frames(t);
    *l = cts_frame_innermost(&frames, code);
    /* Not kept without a location: the code may yet be defined (a corrupt trace). */
    if (!*l) return NULL;
    const size_t need = 2 * strlen((*l)->defname) + 2 * strlen((*l)->filename) + 7 + CTS_U64_DIGITS;
    if (need > TEXT_CACHE_MAX) return NULL;
    char *d = text_cache_room(tc, need);
    size_t n = 0;
    d[n++] = ',';
    n += csv_field(d + n, (*l)->defname);
    d[n++] = ',';
    n += csv_field(d + n, (*l)->filename);
    d[n++] = ',';
    n += cts_fmt_u64(d + n, (*l)->line);
    e = text_cache_keep(tc, code, n, 0);
  }
  *len = e->len;
  return tc->text + e->off;
}

/* The columns ",nsamples,est_bytes" of a sample count below CSV_SAMPLE_TEXTS: at most
 * 1 + 4 + 1 + 10 bytes (est_bytes below 2^12 x 2^21). Sized for a whole-slot copy. */
#define CSV_SAMPLE_TEXTS 4096u

typedef struct csv_samples {
  char s[16];
  uint32_t gen; /* valid when the context's csv_gen */
  uint8_t n;
} csv_samples_t;

/* The estimate per sample now in force: a new one (a trace's info, before its first event)
 * drops the sample counts formatted with the old. */
static void csv_estimate(stream_ctx_t *c, const cts_alloc_profile_t *p) {
  c->csv_bps_rate = p->sample_rate;
  c->csv_bps_word = p->word_bytes;
  c->csv_bps = cts_alloc_profile_bytes_per_sample(p);
  c->csv_bps_int =
      c->csv_bps >= 1 && c->csv_bps < 0x1p21 && c->csv_bps == (double)(uint64_t)c->csv_bps
          ? (uint64_t)c->csv_bps
          : 0;
  if (++c->csv_gen == 0) { /* (after 2^32 estimates: no slot may look valid) */
    memset(c->csv_samples, 0, CSV_SAMPLE_TEXTS * sizeof *c->csv_samples);
    c->csv_gen = 1;
  }
}

/* Writes ",nsamples,est_bytes" when the table has no text for nsamples, and keeps it there
 * when it may. */
CTS_NOINLINE static void csv_samples_slow(stream_ctx_t *c, uint64_t nsamples) {
  cts_out_t *o = c->o;
  char *d = cts_out_reserve(o, 2 * CTS_U64_DIGITS + 2);
  d[0] = ',';
  size_t n = 1 + cts_fmt_u64(d + 1, nsamples);
  d[n++] = ',';
  if (!c->csv_bps_int || nsamples > UINT32_MAX) {
    o->len += n;
    cts_out_fixed(o, (double)nsamples * c->csv_bps, 0);
    return;
  }
  n += cts_fmt_u64(d + n, nsamples * c->csv_bps_int);
  if (nsamples < CSV_SAMPLE_TEXTS) {
    csv_samples_t *s = &c->csv_samples[nsamples];
    memcpy(s->s, d, sizeof s->s); /* n <= 16, see CSV_SAMPLE_TEXTS */
    s->n = (uint8_t)n;
    s->gen = c->csv_gen;
  }
  o->len += n;
}

/* Copied 16 bytes at a time whatever n (the line's reserve has room past it): a copy of a
 * fixed size is a load and a store, one of n bytes a branchy sequence. */
typedef struct csv_text {
  char s[16];
  uint8_t n;
} csv_text_t;

/* An allocation's line from its object id on, d holding its first n bytes (room for 4
 * more numbers and 32 bytes). */
static inline int csv_alloc(stream_ctx_t *c, cli_trace_t *t, const cts_mt_event_t *ev, char *d,
                            size_t n) {
  static const csv_text_t heaps[] = {{",minor,", 7}, {",major,", 7}, {",external,", 10}};
  /* No backtrace: no site, line 0 (padded for the chunked copy). */
  static const char no_site[TEXT_CHUNK] = ",,,0";
  const cts_alloc_profile_t *p = &t->prof;
  cts_out_t *o = c->o;
  n += cts_fmt_u64_memo(&c->csv_alloc_id, d + n, ev->obj_id);
  const csv_text_t *heap = &heaps[ev->source < 3 ? ev->source : 2];
  memcpy(d + n, heap->s, sizeof heap->s);
  n += heap->n;
  n += cts_fmt_u64(d + n, ev->length);
  if (CTS_UNLIKELY(c->csv_bps_rate != p->sample_rate || c->csv_bps_word != p->word_bytes))
    csv_estimate(c, p);
  const csv_samples_t *s = &c->csv_samples[ev->nsamples < CSV_SAMPLE_TEXTS ? ev->nsamples : 0];
  if (CTS_LIKELY(ev->nsamples < CSV_SAMPLE_TEXTS && s->gen == c->csv_gen)) {
    memcpy(d + n, s->s, sizeof s->s);
    o->len += n + s->n;
  } else {
    o->len += n;
    csv_samples_slow(c, ev->nsamples);
  }
  const cts_mt_location_t *l = NULL;
  size_t len = 4;
  const char *site = no_site;
  if (ev->backtrace_len)
    site = csv_site(c->cache, t, ev->backtrace[ev->backtrace_len - 1], &len, &l);
  if (!site) {
    cts_out_char(o, ',');
    cli_csv_str(o, l ? l->defname : "");
    cts_out_char(o, ',');
    cli_csv_str(o, l ? l->filename : "");
    cts_out_char(o, ',');
    cts_out_u64(o, l ? l->line : 0);
    len = 0;
  }
  d = cts_out_reserve(o, len + TEXT_CHUNK + CTS_U64_DIGITS + 2);
  /* Whole chunks: the cache and no_site have TEXT_CHUNK bytes past any text, and the
   * reserve as much past the line. */
  if (site)
    for (n = 0; n < len; n += TEXT_CHUNK) memcpy(d + n, site + n, TEXT_CHUNK);
  n = len;
  d[n++] = ',';
  n += cts_fmt_u64(d + n, ev->backtrace_len);
  d[n++] = '\n';
  o->len += n;
  return o->err;
}

/* One line per event, formatted in the output buffer (no printf: 10^7 lines). Every column
 * an allocation site or a sample count fixes is copied from text formatted once. */
static int csv_hook(void *ud, cli_trace_t *t, const cts_mt_event_t *ev) {
  static const csv_text_t kinds[] = {{",,", 2}, {",alloc,", 7}, {",promote,", 9}, {",collect,", 9}};
  stream_ctx_t *c = ud;
  cts_out_t *o = c->o;
  const uint64_t start = t->prof.start_time_us;
  const uint64_t rel = ev->time_us > start ? ev->time_us - start : 0;
  const csv_text_t *kind = &kinds[(unsigned)ev->kind < 4 ? ev->kind : 0];
  char *d = cts_out_reserve(o, 5 * CTS_U64_DIGITS + 32);
  size_t n = cts_fmt_u64_memo(&c->csv_time, d, rel);
  memcpy(d + n, kind->s, sizeof kind->s);
  n += kind->n;
  if (ev->kind == CTS_MT_ALLOC) return csv_alloc(c, t, ev, d, n);
  n += cts_fmt_u64(d + n, ev->obj_id);
  memcpy(d + n, ",,,,,,,,\n", 9);
  o->len += n + 9;
  return o->err;
}

/* The count pass: the bytes in the scratch buffer counted, and the buffer emptied (it is
 * never written out). */
static void count_drain(stream_ctx_t *c) {
  if (!c->counting) return;
  c->json_bytes += c->o->len;
  c->o->len = 0;
}

static void chrome_finish(stream_ctx_t *c, const cli_trace_t *t) {
  const cts_alloc_profile_t *p = &t->prof;
  while (c->open_len > 0) chrome_event(c, 'E', c->open[--c->open_len], c->clock);
  const double bps = cts_alloc_profile_bytes_per_sample(p);
  cts_json_t *w = &c->w;
  for (size_t i = 0; i < c->npoints; i++) {
    const counter_point_t *pt = &c->points[i];
    const uint64_t rel = pt->time_us > p->start_time_us ? pt->time_us - p->start_time_us : 0;
    begin_event(c, "C", 1);
    cts_json_kv_u64(w, "tid", 1);
    cts_json_kv_u64(w, "ts", rel);
    cts_json_kv_str(w, "name", "heap (estimated bytes)");
    cts_json_key(w, "args");
    cts_json_object(w);
    cts_json_kv_fixed(w, "live", (double)pt->live_samples * bps, 0);
    cts_json_kv_fixed(w, "allocated", (double)pt->alloc_samples * bps, 0);
    cts_json_end(w);
    cts_json_end(w);
    count_drain(c);
  }
  char name[600];
  snprintf(name, sizeof name, "%s: heap over time", t->info ? t->info->executable_name : "trace");
  name_event(c, 1, -1, "process_name", name);
  name_event(c, 2, -1, "process_name", "allocations in trace order (1 us = 1 byte allocated)");
  name_event(c, 2, 1, "thread_name", "allocation stacks");
  cli_chrome_end_events(w);
  cts_json_kv_str(w, "bytes", "estimated: samples / sample rate x word size");
  cli_chrome_end(w);
  count_drain(c);
}

/* Why the chrome export stopped, and what to run instead. written: whether some of the
 * JSON went out (a trace from standard input is not counted before). The size is projected
 * from the share of the input read when the count passed the limit (not for a compressed
 * input, whose offsets are past its size). */
static void refuse_json(const stream_ctx_t *c, const char *path, uint64_t file_size, bool written,
                        bool to_stdout) {
  char got[64], est[32], max[48], name[512];
  const uint64_t limit = c->opts->max_size;
  cli_human_bytes((double)limit, max, sizeof max);
  double projected = (double)c->json_bytes;
  if (file_size && c->refused_at && c->refused_at < file_size)
    projected *= (double)file_size / (double)c->refused_at;
  const double factor = floor(projected / (double)limit) + 1;
  cts_term_text(path, name, sizeof name);
  if (c->counted_whole) {
    cli_human_bytes(projected, est, sizeof est);
    if (strcmp(est, max) == 0) { /* the same once rounded ("154 MB, more than 154 MB"): bytes */
      char a[32], b[32];
      snprintf(got, sizeof got, "%s bytes, ", cli_grouped(c->json_bytes, a, sizeof a));
      snprintf(max, sizeof max, "%s bytes", cli_grouped(limit, b, sizeof b));
    } else {
      snprintf(got, sizeof got, "%s, ", est);
    }
  } else if (projected > (double)c->json_bytes)
    snprintf(got, sizeof got, "about %s, ", cli_human_bytes(projected, est, sizeof est));
  else /* no share to project from */
    got[0] = 0;
  cli_error(
      "the Chrome JSON would be %smore than --max-size %s: Perfetto and chrome://tracing do "
      "not load files that large (%s)",
      got, max,
      !written    ? "nothing was written"
      : to_stdout ? "standard output got its start only"
                  : "the output file was not written");
  cli_note(
      "instead: a time range, 'ctfscope filter --from S --to S -o part.ctf %s'; fewer "
      "samples, 'ctfscope subsample --factor %.0f -o smaller.ctf %s' or more (a sparser "
      "trace shares fewer frames from one allocation to the next); the whole trace as "
      "a profile, '--format pprof' or '--format folded'; or '--max-size 0' to write it "
      "anyway",
      name, factor < 1e15 ? factor : 1e15, name);
}

/* The chrome stream's tables (cache, counter points, code labels, live blocks). Returns 0
 * or -ENOMEM (then stream_ctx_free frees what was made). */
static int chrome_ctx_init(stream_ctx_t *c) {
  c->cache = text_cache_new();
  c->points = malloc(MAX_COUNTER_POINTS * sizeof *c->points);
  c->code_labels = calloc(CODE_LABEL_SLOTS, sizeof *c->code_labels);
  cts_live_init(&c->live, sizeof(uint64_t)); /* (allocates nothing) */
  return c->cache && c->points && c->code_labels ? 0 : -ENOMEM;
}

static void stream_ctx_free(stream_ctx_t *c) {
  if (c->labels_ready) cts_labels_fini(&c->labels);
  free(c->open);
  free(c->path);
  free(c->codes);
  free(c->code_labels);
  free(c->points);
  free(c->cache);
  free(c->csv_samples);
  cts_live_fini(&c->live);
}

/* The count pass of a chrome export with a limit: the JSON's exact size, from the writing
 * path with nothing written (every byte but the events' is formatted into a scratch buffer
 * and counted; an event's length is summed from its parts), stopped as soon as it passes
 * the limit. It costs a read of the trace without the formatting; writing the limit's
 * 256 MB and then refusing cost a user that and an error. Returns the exit code when the
 * export is refused (the reasons printed) or cannot go on, else -1 with the heap counters'
 * points in out (which then need no live blocks of their own). */
static int chrome_count(const char *path, const cts_alloc_profile_config_t *cfg,
                        const export_opts_t *opts, bool to_stdout, stream_ctx_t *out) {
  stream_ctx_t c = {.opts = opts, .digits = 5, .counting = true};
  cts_out_t *scratch = malloc(sizeof *scratch);
  if (scratch) cts_out_init(scratch, -1);
  c.o = scratch;
  int code = -1;
  if (!scratch || chrome_ctx_init(&c)) {
    cli_error("out of memory");
    code = CLI_EXIT_INTERNAL;
  } else {
    cli_chrome_begin(&c.w, scratch);
    count_drain(&c);
    cli_trace_t t;
    const int rc = cli_trace_count_events(&t, path, cfg, chrome_hook, &c);
    if ((rc == CLI_EXIT_OK || rc == CLI_EXIT_DATA) && !c.json_refused) {
      chrome_finish(&c, &t);
      c.counted_whole = true;
      c.json_refused = c.json_bytes > opts->max_size;
    }
    if (c.json_refused) {
      refuse_json(&c, path, t.file_size, false, to_stdout);
      code = CLI_EXIT_USAGE;
    } else if (t.hook_err == -ENOMEM || t.hook_err == CTS_E_NOMEM) {
      cli_error("out of memory");
      code = CLI_EXIT_INTERNAL;
    } else {
      memcpy(out->points, c.points, c.npoints * sizeof *c.points);
      out->npoints = c.npoints;
      out->counted = true;
    }
    cli_trace_free(&t);
  }
  stream_ctx_free(&c);
  free(scratch);
  return code;
}

int cmd_export(int argc, char **argv) {
  static const struct option longopts[] = {
      {"format", required_argument, NULL, 'f'},
      {"output", required_argument, NULL, 'o'},
      {"value", required_argument, NULL, 'V'},
      {"max-size", required_argument, NULL, 'M'},
      CLI_LONGOPT_QUIET,
      CLI_FRAME_OPTIONS,
      {0},
  };
  export_opts_t opts = {.max_size = CHROME_MAX_SIZE_DEFAULT};
  int first;
  const int rc = cli_parse(argc, argv, "f:o:q", longopts, help, on_option, &opts, &first);
  if (rc >= 0) return rc;
  if (opts.format == FMT_NONE) return cli_usage_error("--format is required");
  if (opts.max_size_given && opts.format != FMT_CHROME)
    return cli_usage_error("--max-size limits --format chrome only (this format has no limit)");
  if (opts.value_given && opts.format != FMT_FOLDED)
    return cli_usage_error("--value applies to --format folded only");
  if (first >= argc) return cli_usage_error("no trace given");
  if (argc - first > 1) return cli_usage_error("one trace at a time");
  if (opts.format == FMT_PPROF && !opts.output && isatty(STDOUT_FILENO))
    return cli_usage_error("pprof output is binary: redirect it or use --output FILE");

  cli_trace_kind_t kind;
  const int kc = cli_trace_detect(argv[first], &kind);
  if (kc >= 0) return kc;
  /* A task trace's JSON is not estimated as it goes: it has no limit to offer ('0' = none). */
  if (kind == CLI_TRACE_TASKS && opts.max_size_given && opts.max_size)
    return cli_usage_error("--max-size: a task trace's chrome JSON has no limit (give 0 or none)");
  if (kind == CLI_TRACE_TASKS && opts.format != FMT_CHROME && opts.format != FMT_CSV)
    return cli_usage_error(
        "a task trace exports as chrome or csv (folded and pprof are "
        "allocation profiles)");
  cts_outfile_t file;
  const char *const input = argv[first];
  const int oc = cli_output_open(&file, opts.output, &input, 1);
  if (oc >= 0) return oc;
  /* CSV and folded stacks keep names as they are, but not on a terminal (JSON escapes). */
  cts_out_t *out = cli_out_buffer(
      file.fd, (opts.format == FMT_CSV || opts.format == FMT_FOLDED) && isatty(file.fd));
  if (kind == CLI_TRACE_TASKS) {
    const int code = cli_tasks_export(out, argv[first], opts.format == FMT_CHROME, opts.quiet);
    return cli_output_close(&file, cli_finish_output(out, code));
  }
  stream_ctx_t c = {.o = out, .opts = &opts, .digits = 5, .csv_gen = 1};
  cli_event_hook hook = NULL;
  int init = 0;
  if (opts.format == FMT_CHROME) {
    init = chrome_ctx_init(&c);
    hook = chrome_hook;
  } else if (opts.format == FMT_CSV) {
    c.cache = text_cache_new();
    c.csv_samples = calloc(CSV_SAMPLE_TEXTS, sizeof *c.csv_samples);
    init = c.cache && c.csv_samples ? 0 : -ENOMEM;
    hook = csv_hook;
  }
  if (init) {
    stream_ctx_free(&c);
    cli_error("out of memory");
    cts_outfile_discard(&file);
    return CLI_EXIT_INTERNAL;
  }
  const bool to_stdout = !opts.output || strcmp(opts.output, "-") == 0;
  /* CSV lines and chrome frames are named from the trace's own codes: no stack is kept.
   * Folded and pprof keep what they print and nothing else: no sites; per-node peaks only
   * for --value peak; and for allocated figures (bytes, count, samples) no live blocks. */
  const bool folded = opts.format == FMT_FOLDED;
  const cts_alloc_profile_config_t cfg = {
      .stacks = folded || opts.format == FMT_PPROF,
      .skip_histograms = true,
      .allocated_only = folded && opts.value != VAL_LIVE && opts.value != VAL_PEAK,
      .no_sites = true,
      .no_node_peaks = !(folded && opts.value == VAL_PEAK),
      .live_at_end = opts.format == FMT_PPROF};
  /* Over the limit, refused before a byte is written. A trace that cannot be read twice
   * (standard input, a FIFO: anything but a regular file) is checked as it is written. */
  struct stat input_st;
  if (opts.format == FMT_CHROME && opts.max_size && strcmp(argv[first], "-") != 0 &&
      stat(argv[first], &input_st) == 0 && S_ISREG(input_st.st_mode)) {
    const int cc = chrome_count(argv[first], &cfg, &opts, to_stdout, &c);
    if (cc >= 0) {
      stream_ctx_free(&c);
      cts_outfile_discard(&file);
      return cc;
    }
  }
  if (opts.format == FMT_CHROME) {
    cli_chrome_begin(&c.w, out);
  } else if (opts.format == FMT_CSV) {
    cts_out_str(out,
                "time_us,kind,obj_id,heap,length_words,nsamples,est_bytes,function,file,"
                "line,backtrace_length\n");
  }
  cli_trace_t t;
  int code = hook ? cli_trace_load_events(&t, argv[first], &cfg, opts.quiet, hook, &c)
                  : cli_trace_load_hooked(&t, argv[first], &cfg, opts.quiet, NULL, NULL);
  int e = t.hook_err;
  if (code == CLI_EXIT_OK || code == CLI_EXIT_DATA) {
    if (opts.format == FMT_FOLDED)
      e = export_folded(out, &t, &opts);
    else if (opts.format == FMT_PPROF)
      e = export_pprof(out, &t);
    else if (opts.format == FMT_CHROME)
      chrome_finish(&c, &t);
  }
  if (c.json_refused) {
    refuse_json(&c, argv[first], t.file_size, true, to_stdout);
    code = CLI_EXIT_USAGE;
  } else if (e == -ENOMEM || e == CTS_E_NOMEM) {
    cli_error("out of memory");
    code = CLI_EXIT_INTERNAL;
  } else if (e) {
    cli_error("cannot write the output: %s", cts_os_strerror(out->err ? out->err : e));
    code = CLI_EXIT_IO;
  }
  code = cli_output_close(&file, cli_finish_output(out, code));
  stream_ctx_free(&c);
  cli_trace_free(&t);
  return code;
}
