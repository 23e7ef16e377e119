/* SPDX-License-Identifier: MIT */
/* The viewer's data document, shared by `ctfscope report` (embedded in the HTML file) and
 * `ctfscope serve` (sent as /data.json). */
#include <ctfscope/ctfscope.h>

#include "report.h"

void report_write_doc(cts_out_t *o, const report_doc_t *doc) {
  report_mem_t *mem = doc->mem;
  report_tasks_t *tasks = doc->tasks;
  /* The shared axis: time 0 is the memory trace's start when there is one. Task times
   * (ns, their own clock) map to memory times (µs since the epoch) by an offset. */
  int64_t task_origin_ns = 0, marks_offset_ns = 0;
  if (tasks) {
    uint64_t first_ns, last_ns;
    report_tasks_span(tasks, &first_ns, &last_ns);
    task_origin_ns = doc->have_task_offset ? doc->task_offset_ns : (int64_t)first_ns;
    if (mem) {
      uint64_t start_us, end_us;
      report_mem_span(mem, &start_us, &end_us);
      /* task_ns = mem_us × 1000 + offset, with mem start ↔ task_origin_ns. */
      marks_offset_ns = task_origin_ns - (int64_t)start_us * 1000;
    }
  }
  cts_out_str(o, "{\"format\":\"ctfscope-report\",\"version\":1,\"generator\":");
  report_json_str(o, "ctfscope " CTS_VERSION_STRING);
  cts_out_str(o, ",\"title\":");
  report_json_str(o, doc->title);
  cts_out_str(o, ",\n\"mem\":");
  if (mem)
    report_mem_write(o, mem);
  else
    cts_out_str(o, "null");
  cts_out_str(o, ",\n\"tasks\":");
  if (tasks) {
    size_t nmarks = 0;
    const report_alloc_mark_t *marks = mem ? report_mem_marks(mem, &nmarks) : NULL;
    report_tasks_write(o, tasks, task_origin_ns, marks, nmarks, marks_offset_ns,
                       mem ? report_mem_profile(mem) : NULL);
  } else {
    cts_out_str(o, "null");
  }
  if (doc->tasks2) {
    uint64_t first_ns, last_ns;
    report_tasks_span(doc->tasks2, &first_ns, &last_ns);
    cts_out_str(o, ",\n\"compare_tasks\":");
    report_tasks_write(o, doc->tasks2, (int64_t)first_ns, NULL, 0, 0, NULL);
  }
  if (doc->compare_json) {
    cts_out_str(o, ",\n\"compare\":");
    cts_out_str(o, doc->compare_json);
  }
  if (doc->extra_members) cts_out_str(o, doc->extra_members);
  cts_out_str(o, "}");
}
