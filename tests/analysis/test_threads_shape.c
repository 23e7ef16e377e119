/* SPDX-License-Identifier: MIT */
/* gen_trace's threads shape (bench/README.md, "(wip/h46live)"), the shape of a rate-1 trace
 * of python3 with 16 threads building dicts, on which the live table takes its ids out of
 * order: the same arguments give the same bytes; the trace has the shape's property (most
 * collections are of ids below the live table's window of recent chunks, and many are of
 * an id below the one collected before); and the live table, fed the trace, gives back
 * every collected block's record and holds what a plain array of every id holds, as
 * floor_bench's --live-array does. Fails on main at 6fe4ffc, whose gen_trace has no such
 * shape (exit 2) and floor_bench no such mode. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "../test.h"
/* (after test.h) */
#include "../cachegrind.h"
#include "analysis/live_table.h"
#include "os/os.h"

#define EVENTS  "3000000"
#define MAX_IDS (1u << 22)

typedef struct rec {
  uint64_t time_us, length;
} rec_t;

typedef struct state {
  cts_live_table_t live;
  rec_t *model; /* every id's record, length 0 when not live (lengths here are >= 2) */
  uint64_t newest, last_collect, collects, below_window, descents, mismatches, allocs;
} state_t;

static int on_event(void *ud, const cts_mt_event_t *ev) {
  state_t *s = ud;
  if (ev->obj_id >= MAX_IDS) return -ERANGE;
  rec_t *m = &s->model[ev->obj_id];
  if (ev->kind == CTS_MT_ALLOC) {
    bool added;
    rec_t *r = cts_live_insert(&s->live, ev->obj_id, &added);
    if (!r) return -ENOMEM;
    *r = *m = (rec_t){ev->time_us, ev->length};
    if (ev->obj_id > s->newest) s->newest = ev->obj_id;
    s->allocs++;
  } else if (ev->kind == CTS_MT_COLLECT) {
    rec_t r = {0};
    const bool taken = cts_live_take(&s->live, ev->obj_id, &r);
    if (taken != (m->length != 0) || (taken && memcmp(&r, m, sizeof r) != 0)) s->mismatches++;
    m->length = 0;
    s->collects++;
    s->below_window +=
        (ev->obj_id >> CTS_LIVE_CHUNK_BITS) + CTS_LIVE_WINDOW <= s->newest >> CTS_LIVE_CHUNK_BITS;
    s->descents += ev->obj_id < s->last_collect;
    s->last_collect = ev->obj_id;
  }
  return 0;
}

static void gen(const char *path) {
  run_ok((char *[]){CTS_TEST_GEN_TRACE, "-o", (char *)path, "--shape", "threads", "--events",
                    EVENTS, NULL});
}

/* The whole file, malloc'ed, its size in *n; NULL on failure. */
static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = NULL;
  size_t cap = 0;
  *n = 0;
  for (;;) {
    if (*n == cap) {
      unsigned char *g = realloc(buf, cap = cap ? 2 * cap : 1 << 20);
      if (!g) break;
      buf = g;
    }
    const size_t got = fread(buf + *n, 1, cap - *n, f);
    if (!got) break;
    *n += got;
  }
  fclose(f);
  return buf;
}

CTS_TEST(threads_shape_frees_out_of_order_and_the_table_keeps_up) {
  char dir[] = "/tmp/cts-threads-shape.XXXXXX";
  CTS_ASSERT(mkdtemp(dir) != NULL);
  char a[64], b[64];
  snprintf(a, sizeof a, "%s/a.ctf", dir);
  snprintf(b, sizeof b, "%s/b.ctf", dir);
  gen(a);
  gen(b);
  size_t na = 0, nb = 0;
  unsigned char *ba = slurp(a, &na), *bb = slurp(b, &nb);
  CTS_ASSERT(ba && bb);
  CTS_ASSERT_MSG(na == nb && memcmp(ba, bb, na) == 0, "two runs gave %zu and %zu bytes", na, nb);
  free(ba);
  free(bb);

  static state_t s;
  CTS_ASSERT_EQ_INT(cts_live_init(&s.live, sizeof(rec_t)), 0);
  s.model = calloc(MAX_IDS, sizeof *s.model);
  CTS_ASSERT(s.model != NULL);
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  const cts_mt_handler_t h = {.user_data = &s, .on_event = on_event};
  cts_mt_reader_t *r = NULL;
  CTS_ASSERT_EQ_INT(cts_mt_reader_create(&r, &cfg, &h), 0);
  bool input_error = false;
  const int e = cts_os_read_memtrace(a, r, NULL, NULL, &input_error);
  cts_mt_reader_destroy(r);
  CTS_ASSERT_EQ_INT(e, 0);
  fprintf(stderr,
          "  %llu allocations, %llu collections: %llu below the window, %llu below the one "
          "before\n",
          (unsigned long long)s.allocs, (unsigned long long)s.collects,
          (unsigned long long)s.below_window, (unsigned long long)s.descents);
  CTS_ASSERT_EQ_U64(s.mismatches, 0);
  /* The shape: of 3 M events, 17.7 % of the collections (the structures dropped) are below
   * the window, and 36 % of an id below the one before (threads' runs of ids interleaved). */
  CTS_ASSERT(s.collects * 3 >= s.allocs);
  CTS_ASSERT_MSG(s.below_window * 8 >= s.collects, "%llu of %llu below the window",
                 (unsigned long long)s.below_window, (unsigned long long)s.collects);
  CTS_ASSERT_MSG(s.descents * 10 >= s.collects, "%llu of %llu descents",
                 (unsigned long long)s.descents, (unsigned long long)s.collects);
  /* The table holds exactly the model's live ids. */
  uint64_t live = 0;
  for (uint64_t id = 0; id < MAX_IDS; id++) {
    if (!s.model[id].length) continue;
    live++;
    const rec_t *got = cts_live_find(&s.live, id);
    CTS_ASSERT(got && memcmp(got, &s.model[id], sizeof *got) == 0);
  }
  CTS_ASSERT_EQ_U64(s.live.count, live);
  cts_live_fini(&s.live);
  free(s.model);

  /* floor_bench's --live-array (the cheapest live table: an array by id) sees the blocks
   * the live table does: same events, live count and checksum. */
  char *outs[2] = {NULL, NULL};
  const char *const modes[2] = {"--live", "--live-array"};
  for (int i = 0; i < 2; i++) {
    run_result_t res;
    CTS_ASSERT(
        run_cmd((char *[]){CTS_TEST_FLOOR_BENCH, (char *)modes[i], a, NULL}, NULL, 600, &res));
    CTS_ASSERT_MSG(res.exit_code == 0 && res.out, "floor_bench %s: exit %d", modes[i],
                   res.exit_code);
    outs[i] = strdup(res.out);
    run_result_free(&res);
  }
  CTS_ASSERT_MSG(outs[0] && outs[1] && strcmp(outs[0], outs[1]) == 0, "--live: %s--live-array: %s",
                 outs[0], outs[1]);
  free(outs[0]);
  free(outs[1]);
  unlink(a);
  unlink(b);
  rmdir(dir);
}

CTS_TEST_MAIN()
