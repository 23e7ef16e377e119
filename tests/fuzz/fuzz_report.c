/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the report builders (src/report/report.h) on one trace. The input is a
 * trace (memtrace, mirage-profile or any bytes); both loaders read it, once with their
 * default budgets and once with tiny ones (so that the level-of-detail paths run: record
 * coarsening, few top sites, few tasks kept in detail), and the document the viewer loads
 * is rendered as `serve` does (cts__serve_render) with the memory part or the task part;
 * the task part is also written with allocation marks laid over its span (the per-task
 * memory attribution, which otherwise needs a second trace).
 *
 * Besides memory errors, undefined behaviour and leaks, it aborts when:
 *  - a loader returns a code that is not 0 or negative, no result with 0, or a result with
 *    CTS_E_NOMEM; the memory part's allocation marks are not sorted by time;
 *  - a document is not one valid JSON value (fuzz_json.h) — the builders write JSON by
 *    hand — or holds a byte '<' or a raw U+2028/U+2029, which could end or break the
 *    <script> element the report embeds it in (report.h promises neither ever appears). */
#define _GNU_SOURCE /* memfd_create() in fuzz_file.h */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_file.h"
#include "fuzz_json.h"
#include "report/report.h"
#include "report/serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_doc(const report_doc_t *doc) {
  cts__serve_blob_t *const b = cts__serve_render(doc);
  CHECK(b);
  if (!fuzz_json_valid(b->data, b->len)) {
    fprintf(stderr, "fuzz_report: the document is not valid JSON (%zu bytes):\n%.*s\n", b->len,
            b->len > 4096 ? 4096 : (int)b->len, b->data);
    abort();
  }
  CHECK(!memchr(b->data, '<', b->len));
  for (size_t i = 0; i + 2 < b->len; i++)
    CHECK(!((unsigned char)b->data[i] == 0xE2 && (unsigned char)b->data[i + 1] == 0x80 &&
            ((unsigned char)b->data[i + 2] == 0xA8 || (unsigned char)b->data[i + 2] == 0xA9)));
  cts__serve_blob_unref(b);
}

static void check_code(int code, const void *result) {
  CHECK(code <= 0);
  if (code == 0) CHECK(result != NULL);
  if (code == CTS_E_NOMEM) CHECK(result == NULL);
}

/* The task part again with allocation marks spread over its span, on the task clock. */
static void tasks_with_marks(report_tasks_t *t) {
  uint64_t first = 0, last = 0;
  report_tasks_span(t, &first, &last);
  report_alloc_mark_t marks[5];
  for (uint64_t i = 0; i < 5; i++) {
    const uint64_t us = (first + (last - first) / 4 * i) / 1000u; /* any: may pass 2^63 ns */
    marks[i] = (report_alloc_mark_t){us, i + 1};
  }
  static cts_out_t out;
  static int devnull = -1;
  if (devnull < 0) devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  CHECK(devnull >= 0);
  cts_out_init(&out, devnull);
  report_tasks_write(&out, t, (int64_t)first, marks, 5, 0, NULL);
  cts_out_flush(&out);
}

static void run(const char *path, bool tiny) {
  report_mem_opts_t mo = {.path = path, .quiet = true};
  report_tasks_opts_t to = {.path = path, .quiet = true};
  if (tiny) {
    mo.time_buckets = 4;
    mo.max_records = 16;
    mo.top_sites = 2;
    to.max_tasks = 3;
  }
  report_mem_t *mem = NULL;
  report_tasks_t *tasks = NULL;
  const int mem_code = report_mem_load(&mem, &mo);
  check_code(mem_code, mem);
  const int tasks_code = report_tasks_load(&tasks, &to);
  check_code(tasks_code, tasks);
  if (mem) {
    uint64_t start = 0, end = 0;
    report_mem_span(mem, &start, &end);
    size_t n = 0;
    const report_alloc_mark_t *marks = report_mem_marks(mem, &n);
    for (size_t i = 1; i < n; i++) CHECK(marks[i - 1].time_us <= marks[i].time_us);
    check_doc(&(report_doc_t){.title = "fuzz", .mem = mem});
  }
  if (tasks) {
    tasks_with_marks(tasks);
    check_doc(&(report_doc_t){.title = "fuzz", .tasks = tasks});
    check_doc(&(report_doc_t){
        .title = "\"<fuzz>\"", .tasks = tasks, .have_task_offset = true, .task_offset_ns = -7});
  }
  report_mem_free(mem);
  report_tasks_free(tasks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz_file_t input = FUZZ_FILE_INIT;
  const char *const path = fuzz_file_set(&input, data, size);
  run(path, false);
  run(path, true);
  return 0;
}
