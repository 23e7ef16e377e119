/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* asprintf, qsort_r */
#include "siterows.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/grow.h"
#include "common/hash.h"
#include "u64map.h"

const cts_mt_location_t *cts_frame_innermost(const cts_frames_t *f, uint64_t code) {
  const cts_mt_location_t *locs;
  size_t n = 0;
  if (!f || !f->lookup || f->lookup(f->user_data, code, &locs, &n) != 0 || n == 0) return NULL;
  return &locs[n - 1];
}

const char *cts_frame_label(const cts_frames_t *f, uint64_t code, char *buf, size_t size) {
  const cts_mt_location_t *l = code ? cts_frame_innermost(f, code) : NULL;
  if (code == CTS_STACKS_OVERFLOW_CODE)
    snprintf(buf, size, "(stacks beyond the memory budget)");
  else if (!code)
    snprintf(buf, size, "(no backtrace)");
  else if (!l)
    snprintf(buf, size, "0x%llx", (unsigned long long)code);
  else
    snprintf(buf, size, "%s (%s:%u)", l->defname[0] ? l->defname : "?", l->filename, l->line);
  return buf;
}

static char *make_key(cts_group_t by, const char *function, const char *file, uint32_t line,
                      uint64_t code, bool known) {
  char *key = NULL;
  int n;
  if (!known)
    n = asprintf(&key, code ? "0x%llx" : "(no backtrace)", (unsigned long long)code);
  else if (by == CTS_GROUP_FILE)
    n = asprintf(&key, "%s", file);
  else if (by == CTS_GROUP_FUNCTION)
    n = asprintf(&key, "%s\t%s", function, file);
  else
    n = asprintf(&key, "%s\t%s\t%u", function, file, line);
  return n < 0 ? NULL : key;
}

/* Row index of key, creating the row; -1 on no memory. key is consumed: the table owns it
 * until cts_rows_build() hands the keys to their rows. Rows are made in the order keys are
 * first met, so a key's id is its row's index. */
static long row_for_key(cts_rows_t *r, cts_strtab_t *keys, char *key) {
  size_t id;
  const int e = cts_strtab_add_owned(keys, key, &id);
  if (e <= 0) return e < 0 ? -1 : (long)id;
  CTS_ASSERT(id == r->n);
  if (cts_grow((void **)&r->rows, &r->cap, r->n, sizeof *r->rows)) return -1;
  memset(&r->rows[r->n], 0, sizeof r->rows[r->n]);
  r->rows[r->n].key = keys->strs[id];
  r->rows[r->n].first_node = UINT32_MAX;
  return (long)r->n++;
}

static long row_for_code(cts_rows_t *r, cts_strtab_t *keys, const cts_frames_t *f, cts_group_t by,
                         uint64_t code) {
  const cts_mt_location_t *l = code ? cts_frame_innermost(f, code) : NULL;
  const char *function = l ? l->defname : "", *file = l ? l->filename : "";
  const uint32_t line = l ? l->line : 0;
  char *key = make_key(by, function, file, line, code, l != NULL);
  if (!key) return -1;
  const long i = row_for_key(r, keys, key);
  if (i >= 0 && r->rows[i].first_node == UINT32_MAX) {
    r->rows[i].function = by == CTS_GROUP_FILE ? "" : function;
    r->rows[i].file = file;
    r->rows[i].line = by == CTS_GROUP_LINE ? line : 0;
    r->rows[i].code = code;
  }
  return i;
}

/* A node's own figure by, from its stored figures. */
static uint64_t self_metric(const cts_stacks_t *s, uint32_t node, cts_sort_t by) {
  const cts_site_stats_t st = cts_stacks_self(s, node);
  return cts_site_stats_metric(&st, by);
}

int cts_rows_build(cts_rows_t *out, const cts_stacks_t *s, const cts_frames_t *f, cts_group_t by,
                   cts_sort_t heaviest, uint64_t origin_us, uint64_t end_us) {
  memset(out, 0, sizeof *out);
  cts_strtab_t keys;
  cts_strtab_init(&keys);
  cts_u64map_t row_of_code;
  cts_u64map_init(&row_of_code);
  int err = 0;
  for (uint32_t i = 0; i < s->count && !err; i++) {
    const cts_stack_node_t *node = &s->nodes[i];
    const cts_site_stats_t self_st = cts_stacks_self(s, i), *self = &self_st;
    if (self->allocs == 0) continue;
    /* Codes repeat across nodes: remember each code's row to avoid re-keying. */
    long ri;
    const uint64_t *known = cts_u64map_find(&row_of_code, node->code);
    if (known) {
      ri = (long)*known;
    } else {
      ri = row_for_code(out, &keys, f, by, node->code);
      bool added;
      if (ri < 0 || !cts_u64map_insert(&row_of_code, node->code, (uint64_t)ri, &added)) {
        err = -ENOMEM;
        break;
      }
    }
    cts_row_t *row = &out->rows[ri];
    /* A whole stack beats one cut for the node budget, then the heavier one wins. */
    const bool cut = s->nodes[node->parent].code == CTS_STACKS_OVERFLOW_CODE;
    const bool best_cut =
        row->first_node != UINT32_MAX &&
        s->nodes[s->nodes[row->first_node].parent].code == CTS_STACKS_OVERFLOW_CODE;
    if (row->first_node == UINT32_MAX || (best_cut && !cut) ||
        (best_cut == cut &&
         cts_site_stats_metric(self, heaviest) > self_metric(s, row->first_node, heaviest)))
      row->first_node = i;
    cts_site_stats_add(&row->st, self);
  }
  if (!err && s->history && end_us > origin_us) {
    const uint64_t span = end_us - origin_us;
    for (uint32_t si = 0; si < s->site_count; si++) {
      const uint64_t *known = cts_u64map_find(&row_of_code, s->sites[si].code);
      if (!known) continue; /* every site allocated, so this does not happen */
      cts_row_t *row = &out->rows[*known];
      for (unsigned q = 0; q < 4; q++) {
        const uint64_t t = origin_us + span / 4 * (q + 1) + (q == 3 ? span % 4 : 0);
        row->live_at[q] += cts_site_live_at(s, si, t, end_us);
      }
    }
  } else if (!err) {
    for (size_t i = 0; i < out->n; i++) out->rows[i].live_at[3] = out->rows[i].st.live_samples;
  }
  /* The rows own their keys from here on (a key whose row could not be made is freed). */
  size_t nkeys;
  char **owned = cts_strtab_release(&keys, &nkeys);
  for (size_t i = out->n; i < nkeys; i++) free(owned[i]);
  free(owned);
  cts_u64map_fini(&row_of_code);
  if (err) cts_rows_fini(out);
  return err;
}

void cts_rows_fini(cts_rows_t *r) {
  for (size_t i = 0; i < r->n; i++) free(r->rows[i].key);
  free(r->rows);
  memset(r, 0, sizeof *r);
}

uint64_t cts_site_stats_metric(const cts_site_stats_t *st, cts_sort_t by) {
  switch (by) {
    case CTS_SORT_COUNT:
      return st->allocs;
    case CTS_SORT_PEAK:
      return st->peak_samples;
    case CTS_SORT_LIVE:
      return st->live_samples;
    case CTS_SORT_BYTES:
      break;
  }
  return st->samples;
}

static int cmp_rows(const void *a, const void *b, void *arg) {
  const cts_row_t *x = a, *y = b;
  const cts_sort_t by = *(const cts_sort_t *)arg;
  const uint64_t mx = cts_site_stats_metric(&x->st, by);
  const uint64_t my = cts_site_stats_metric(&y->st, by);
  if (mx != my) return mx > my ? -1 : 1;
  if (x->st.samples != y->st.samples) return x->st.samples > y->st.samples ? -1 : 1;
  return strcmp(x->key, y->key);
}

void cts_rows_sort(cts_rows_t *r, cts_sort_t by) {
  if (r->n) qsort_r(r->rows, r->n, sizeof *r->rows, cmp_rows, &by);
}

void cts_labels_init(cts_labels_t *l, const cts_frames_t *f, cts_label_style_t style) {
  memset(l, 0, sizeof *l);
  cts_strtab_init(&l->texts);
  cts_u64map_init(&l->by_code);
  l->style = style;
  l->frames = f;
}

void cts_labels_fini(cts_labels_t *l) {
  cts_strtab_fini(&l->texts);
  cts_u64map_fini(&l->by_code);
  memset(l, 0, sizeof *l);
}

static char *label_text(const cts_labels_t *l, uint64_t code) {
  const cts_mt_location_t *loc = code ? cts_frame_innermost(l->frames, code) : NULL;
  char *text = NULL;
  int n;
  if (code == CTS_STACKS_OVERFLOW_CODE)
    n = asprintf(&text, "(stacks beyond the memory budget)");
  else if (!code)
    n = asprintf(&text, "(no backtrace)");
  else if (!loc)
    n = asprintf(&text, "0x%llx", (unsigned long long)code);
  else if (l->style == CTS_LABEL_NAME)
    n = asprintf(&text, "%s", loc->defname[0] ? loc->defname : "?");
  else if (l->style == CTS_LABEL_FILE)
    n = asprintf(&text, "%s", loc->filename);
  else if (l->style == CTS_LABEL_FUNCTION)
    n = asprintf(&text, "%s (%s)", loc->defname[0] ? loc->defname : "?", loc->filename);
  else
    n = asprintf(&text, "%s (%s:%u)", loc->defname[0] ? loc->defname : "?", loc->filename,
                 loc->line);
  return n < 0 ? NULL : text;
}

uint64_t cts_labels_id(cts_labels_t *l, uint64_t code) {
  const uint64_t *known = cts_u64map_find(&l->by_code, code);
  if (known) return *known;
  char *text = label_text(l, code);
  if (!text) return 0;
  size_t index;
  if (cts_strtab_add_owned(&l->texts, text, &index) < 0) return 0;
  l->names = l->texts.strs; /* may have moved */
  l->n = l->texts.n;
  const uint64_t id = index + 1;
  bool added;
  if (!cts_u64map_insert(&l->by_code, code, id, &added)) return 0;
  return id;
}

int cts_stacks_relabel_nodes(const cts_stacks_t *src, cts_labels_t *labels, cts_stacks_t *dst,
                             uint32_t **map_out) {
  *map_out = NULL;
  int e = cts_stacks_init(dst, false, 0);
  if (e) return e;
  uint32_t *map = malloc((size_t)src->count * sizeof *map);
  if (!map) {
    cts_stacks_fini(dst);
    return -ENOMEM;
  }
  map[0] = 0;
  /* Parents come before children, so one forward pass re-interns every node. */
  for (uint32_t i = 1; i < src->count && !e; i++) {
    const uint64_t id = cts_labels_id(labels, src->nodes[i].code);
    if (!id) {
      e = -ENOMEM;
      break;
    }
    const uint32_t parent = map[src->nodes[i].parent];
    uint32_t node = 0;
    e = cts_stacks_intern_child(dst, parent, id, &node);
    map[i] = node;
  }
  if (e) {
    free(map);
    cts_stacks_fini(dst);
    return e;
  }
  *map_out = map;
  return 0;
}

int cts_stacks_relabel(const cts_stacks_t *src, cts_labels_t *labels, cts_stacks_t *dst) {
  uint32_t *map;
  int e = cts_stacks_relabel_nodes(src, labels, dst, &map);
  if (e) return e; /* dst is left zeroed: cts_stacks_fini() on it is harmless */
  for (uint32_t i = 0; i < src->count && !e; i++) {
    if (!src->nodes[i].stat) continue; /* no figures: leave dst's node without any */
    const cts_site_stats_t self = cts_stacks_self(src, i);
    e = cts_stacks_add_self(dst, map[i], &self);
  }
  free(map);
  return e;
}

/* The pass's table of merged nodes: cap slots, any number of them. Sized for a load of at
 * most 0.7 when the trie has 64-byte records (dense: on default150.ctf 87 MiB instead of
 * 128, which the peak of such a view would otherwise carry), else rounded up to a power of
 * two, at about half that load: the lean text trees' pass is well under their peak, and the
 * denser table cost it ~2 % of the instructions and ~7 % of the CPU (more probes, each
 * likely a cache miss). A tag's home slot is its product with cap, high half. */
static uint32_t merged_cap(uint32_t count, bool dense) {
  if (dense) {
    const uint64_t cap = (uint64_t)count * 10 / 7 + 16;
    return cap < UINT32_MAX ? (uint32_t)cap : UINT32_MAX;
  }
  uint64_t cap = 16;
  while (cap * 7 < (uint64_t)count * 10) cap *= 2;
  return cap < UINT32_MAX ? (uint32_t)cap : UINT32_MAX;
}

/* While the sums pass runs, a merged node keeps its label in its stat field and its sum by
 * the first key in its code field (8 bytes a node that no array of the trie's size takes in
 * the pass's peak): the records' pass keeps the label in the code, and the record in stat. */
static inline uint64_t merged_label(const cts_stack_node_t *m, bool sums) {
  return sums ? m->stat : m->code;
}

/* Where merged node (parent, label) of that tag sits in table t: its slot, or the empty one
 * where it goes. */
static inline uint32_t merged_find(const cts_stack_tslot_t *t, uint32_t cap,
                                   const cts_stack_node_t *nodes, bool sums, uint32_t parent,
                                   uint64_t label, uint32_t tag, size_t *slot) {
  size_t j = (size_t)(((uint64_t)tag * cap) >> 32);
  for (; t[j].node; j = j + 1 == cap ? 0 : j + 1)
    if (t[j].tag == tag && nodes[t[j].node].parent == parent &&
        merged_label(&nodes[t[j].node], sums) == label)
      break;
  *slot = j;
  return t[j].node;
}

/* Adds the figures of node from (not yet overwritten) into merged node into's record
 * (cts_stacks_add_self's sums; a lean trie's allocated figures alone): false when the
 * record of a count's high half cannot be made. */
static bool add_member(cts_stacks_t *s, uint32_t into, uint32_t from) {
  const cts_site_stats_t add = cts_stacks_self(s, from);
  if (!s->lean) return cts_stacks_add_self(s, into, &add) == 0;
  const uint32_t stat = s->nodes[into].stat;
  cts_stack_wide_t *w = cts_stacks_wide(s, stat);
  cts_stack_lean_t *a = &s->lean[stat];
  const uint64_t allocs = ((uint64_t)(w ? w->allocs : 0) << 32 | a->allocs) + add.allocs;
  if (!w && allocs >> 32 && !(w = cts__stacks_widen(s, stat))) return false;
  a->allocs = (uint32_t)allocs;
  if (w) w->allocs = (uint32_t)(allocs >> 32);
  a->samples += add.samples;
  a->est_allocs += add.est_allocs;
  return true;
}

/* What the in-place pass keeps of each merged node's members: their sums by one or two
 * keys (in the nodes' fields and b), or their records, merged into the first one's. */
typedef struct merge_pass {
  bool records;
  cts_sort_t first_key, second_key;
  uint64_t *b; /* by the second key, when it differs (sums mode) */
} merge_pass_t;

/* The pass of both in-place relabels: merges s's nodes by label into s->nodes[0..*merged),
 * numbered and ordered as cts_stacks_relabel's. Parents come before children, and node i
 * merges into one numbered at most i: writing merged node m over node m (already read)
 * leaves every node still to read intact. Returns 0 or -ENOMEM (s's nodes then garbage). */
static int merge_pass(cts_stacks_t *s, cts_labels_t *labels, const merge_pass_t *mp,
                      uint32_t *merged_out) {
  /* The (parent, code) table is not read here: freed before the pass's own is made. */
  cts_stacks_drop_table(s);
  /* Locals: the stores to the nodes below could otherwise be taken for changes of *mp. */
  const bool records = mp->records;
  const cts_sort_t first_key = mp->first_key, second_key = mp->second_key;
  uint64_t *const b = mp->b;
  /* Dense where the records are 64 bytes (kept, or a profile with every figure): the pass
   * is then the view's peak. */
  const uint32_t cap = merged_cap(s->count, records || !s->lean);
  const bool two = !records && first_key != second_key;
  uint32_t *map = malloc((size_t)s->count * sizeof *map);
  cts_stack_tslot_t *t = map ? cts_table_alloc(cap, sizeof *t) : NULL;
  int e = t ? 0 : -ENOMEM;
  cts_stack_node_t *nodes = s->nodes;
  uint32_t merged = 1; /* the root stays node 0 (and keeps its record) */
  if (!e) {
    map[0] = 0;
    if (!records) {
      const cts_site_stats_t root = cts_stacks_self(s, 0);
      if (two) b[0] = cts_site_stats_metric(&root, second_key);
      nodes[0].code = cts_site_stats_metric(&root, first_key);
      nodes[0].stat = 0; /* the root's label (never looked up) */
    }
  }
  for (uint32_t i = 1; !e && i < s->count; i++) {
    const cts_stack_node_t node = nodes[i];
    const uint64_t label = cts_labels_id(labels, node.code);
    if (!label || (!records && label > UINT32_MAX)) { /* (ids are dense: never that many) */
      e = -ENOMEM;
      break;
    }
    const uint32_t parent = map[node.parent];
    const uint32_t tag =
        (uint32_t)(cts_mix64(label ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull)) >> 32);
    size_t slot;
    uint32_t m = merged_find(t, cap, nodes, !records, parent, label, tag, &slot);
    const bool is_new = !m;
    if (is_new) m = merged++;
    map[i] = m;
    if (records) {
      /* The merged node's figures are its first member's record, the others' added in node
       * order (as cts_stacks_relabel adds them: the same doubles, to the bit). */
      uint32_t stat = node.stat;
      if (!is_new && nodes[m].stat && stat) {
        if (!add_member(s, m, i)) e = -ENOMEM;
        stat = nodes[m].stat;
      } else if (!is_new && !stat) {
        stat = nodes[m].stat;
      }
      if (is_new) t[slot] = (cts_stack_tslot_t){.node = m, .tag = tag};
      nodes[m] = (cts_stack_node_t){.code = label, .parent = parent, .stat = stat};
      continue;
    }
    const cts_site_stats_t self = cts_stacks_self(s, i); /* before nodes[i] may change */
    if (is_new) {
      t[slot] = (cts_stack_tslot_t){.node = m, .tag = tag};
      nodes[m] = (cts_stack_node_t){.code = 0, .parent = parent, .stat = (uint32_t)label};
    }
    nodes[m].code += cts_site_stats_metric(&self, first_key);
    if (two) b[m] += cts_site_stats_metric(&self, second_key);
  }
  free(t);
  free(map);
  *merged_out = merged;
  return e;
}

/* The nodes array cut to the merged nodes. */
static void shrink_nodes(cts_stacks_t *s, uint32_t merged) {
  s->count = merged;
  cts_stack_node_t *shrunk = realloc(s->nodes, (size_t)merged * sizeof *s->nodes);
  if (shrunk) {
    s->nodes = shrunk;
    s->cap = merged;
  }
}

int cts_stacks_relabel_in_place(cts_stacks_t *s, cts_labels_t *labels, cts_sort_t first_key,
                                cts_sort_t second_key, uint64_t **first, uint64_t **second) {
  *first = *second = NULL;
  const bool two = first_key != second_key;
  merge_pass_t mp = {.first_key = first_key, .second_key = second_key};
  mp.b = two ? calloc(s->count, sizeof *mp.b) : NULL;
  uint32_t merged = 1;
  int e = two && !mp.b ? -ENOMEM : merge_pass(s, labels, &mp, &merged);
  cts_stack_node_t *nodes = s->nodes;
  /* Nodes alone from here: the figures and sites go (a zero record 0 stays, so that any
   * node's cts_stacks_self reads zeros as a node without figures does). */
  free(s->stats);
  free(s->wide);
  free(s->lean);
  s->stats = NULL;
  s->wide = NULL;
  s->wide_count = 0;
  s->wide_cap = 0;
  s->lean = calloc(1, sizeof *s->lean);
  s->stat_count = s->stat_cap = s->lean ? 1 : 0;
  s->live_by_site = false;
  s->sites_detached = true;
  memset(s->site_memo, 0, CTS_STACKS_SITE_MEMO * sizeof *s->site_memo); /* node numbers change */
  s->count = e ? 1 : merged;
  uint64_t *a = e || !s->stat_cap ? NULL : malloc((size_t)merged * sizeof *a);
  for (uint32_t m = 0; a && m < merged; m++) { /* the sums out, the labels back */
    a[m] = nodes[m].code;
    nodes[m].code = nodes[m].stat;
    nodes[m].stat = 0;
  }
  if (!a) {
    nodes[0].code = 0;
    nodes[0].stat = 0;
    s->count = 1;
    free(mp.b);
    return e ? e : -ENOMEM;
  }
  shrink_nodes(s, merged);
  *first = a;
  *second = two ? mp.b : a;
  return 0;
}

int cts_stacks_relabel_merge_in_place(cts_stacks_t *s, cts_labels_t *labels) {
  merge_pass_t mp = {.records = true};
  uint32_t merged = 1;
  const int e = merge_pass(s, labels, &mp, &merged);
  /* By site, live and peak figures were the sites' on their first nodes, which the merged
   * nodes no longer are: the records' allocated figures alone are left, and no site. */
  s->live_by_site = false;
  s->sites_detached = true;
  memset(s->site_memo, 0, CTS_STACKS_SITE_MEMO * sizeof *s->site_memo); /* node numbers change */
  if (e) {
    s->count = 1;
    return e;
  }
  shrink_nodes(s, merged);
  return 0;
}

void cts_row_name(const cts_row_t *r, char *buf, size_t size) {
  if (!r->code)
    snprintf(buf, size, "(no backtrace)");
  else if (!r->file[0] && !r->function[0])
    snprintf(buf, size, "%s", r->key);
  else if (r->line)
    snprintf(buf, size, "%s (%s:%u)", r->function[0] ? r->function : "?", r->file, r->line);
  else if (r->function[0])
    snprintf(buf, size, "%s (%s)", r->function, r->file);
  else
    snprintf(buf, size, "%s", r->file);
}
