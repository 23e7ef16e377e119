/* SPDX-License-Identifier: MIT */
/* Uses every call of tasks.h. Compiled twice by tests/tasks/CMakeLists.txt: with
 * CTS_TASKS_DISABLE the object must reference no cts symbol at all (check_no_cts.cmake);
 * without it, it must (so that the check can fail). Not run. */
#include <ctfscope/tasks.h>

int cts_tasks_every_call(int n);

int cts_tasks_every_call(int n) {
  cts_task_counter_t c = CTS_TASK_COUNTER_INIT("c", 0);
  cts_task_counter_init(&c, "c", n);
  const cts_task_id_t t = cts_task_create(CTS_TASK_WAIT);
  const cts_task_id_t w = cts_task_named_wait("w");
  const cts_task_id_t k = cts_task_named_task("k");
  const cts_task_id_t cond = cts_task_named_condition("cond");
  cts_task_created(t, CTS_TASK_BIND);
  cts_task_read(t, w);
  cts_task_read_later(t, w);
  cts_task_try_read(t, k);
  cts_task_resolved(w);
  cts_task_failed(k, "failure");
  cts_task_becomes(t, k);
  cts_task_label(t, "label");
  cts_task_label_current("current");
  cts_task_switch(t);
  cts_task_signal(t, cond);
  cts_task_signal_noswitch(t, cond);
  cts_task_gc(1000);
  cts_task_idle();
  cts_task_resume(t);
  cts_task_should_resolve(w);
  cts_task_note_increase("old", 1);
  cts_task_counter_set(&c, 3);
  cts_task_counter_increase(&c, n);
  return (int)cts_task_counter_value(&c) + (int)cts_task_current();
}
