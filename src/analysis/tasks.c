/* SPDX-License-Identifier: MIT */
#include "tasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"

#define NONE CTS_TASKS_NONE

int cts_tasks_init(cts_tasks_t *m, const cts_tasks_config_t *cfg) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  if (!m->cfg.max_tasks) m->cfg.max_tasks = 1u << 21;
  if (!m->cfg.max_lanes) m->cfg.max_lanes = 256;
  if (!m->cfg.max_counters) m->cfg.max_counters = 256;
  if (!m->cfg.lanes) m->cfg.max_lanes = 1;
  cts_u64map_init(&m->by_id);
  cts_strtab_init(&m->strs);
  m->lanes = calloc(m->cfg.max_lanes, sizeof *m->lanes);
  m->lane = NONE;
  return m->lanes ? 0 : -ENOMEM;
}

void cts_tasks_fini(cts_tasks_t *m) {
  cts_strtab_fini(&m->strs);
  free(m->tasks);
  free(m->counters);
  free(m->lanes);
  cts_u64map_fini(&m->by_id);
  memset(m, 0, sizeof *m);
}

const char *cts_tasks_str(const cts_tasks_t *m, uint32_t id) {
  return id < m->strs.n ? cts_strtab_get(&m->strs, id) : "";
}

const char *cts_tasks_name(const cts_tasks_t *m, uint32_t task, char *buf, size_t size) {
  const cts_task_t *t = &m->tasks[task];
  if (t->label != NONE) return cts_strtab_get(&m->strs, t->label);
  snprintf(buf, size, "#%lld", (long long)t->id);
  return buf;
}

/* Interned string id (ids in order of first appearance), or NONE when out of memory. */
static uint32_t intern(cts_tasks_t *m, const char *s, size_t n) {
  size_t id;
  if (cts_strtab_add(&m->strs, s ? s : "", s ? n : 0, &id) < 0 || id >= NONE) return NONE;
  return (uint32_t)id;
}

/* Index of task id, made preexisting if unknown; NONE for -1 or out of memory. */
static uint32_t task_of(cts_tasks_t *m, int64_t id, uint64_t t, bool *created) {
  if (created) *created = false;
  if (id == CTS_TASK_NONE) return NONE;
  const uint64_t *v = cts_u64map_find(&m->by_id, (uint64_t)id + 2);
  if (v) return (uint32_t)*v;
  if (m->ntasks >= 2 * (uint64_t)m->cfg.max_tasks) { /* hostile: ids only referenced */
    m->ignored_refs++;
    return NONE;
  }
  if (m->ntasks >= NONE - 1 ||
      cts_grow((void **)&m->tasks, &m->cap_tasks, m->ntasks, sizeof *m->tasks)) {
    m->err = -ENOMEM;
    return NONE;
  }
  bool added;
  if (!cts_u64map_insert(&m->by_id, (uint64_t)id + 2, m->ntasks, &added)) {
    m->err = -ENOMEM;
    return NONE;
  }
  m->tasks[m->ntasks] = (cts_task_t){.id = id,
                                     .start = m->first_ns,
                                     .last = t,
                                     .parent = NONE,
                                     .becomes = NONE,
                                     .label = NONE,
                                     .flags = CTS_TASK_F_PREEXISTING};
  if (created) *created = true;
  return (uint32_t)m->ntasks++;
}

static void touch(cts_tasks_t *m, uint32_t i, uint64_t t) {
  if (i != NONE && m->tasks[i].last < t) m->tasks[i].last = t;
}

static int switch_to(cts_tasks_t *m, cts_tasks_lane_t *l, int64_t id, uint64_t t) {
  if (id == l->current) return 0;
  const cts_tasks_hooks_t *h = &m->cfg.hooks;
  const uint32_t lane = (uint32_t)(l - m->lanes);
  int e = 0;
  if (l->current == CTS_TASK_NONE) {
    if (t > l->since) {
      l->idle_ns += t - l->since;
      if (h->on_idle) e = h->on_idle(h->user_data, l->since, t, lane);
    }
  } else {
    const uint32_t i = task_of(m, l->current, t, NULL);
    if (i != NONE && t > l->since) {
      m->tasks[i].running_ns += t - l->since;
      m->tasks[i].runs++;
      l->running_ns += t - l->since;
      if (h->on_run) e = h->on_run(h->user_data, i, l->since, t, lane);
    }
    touch(m, i, t);
  }
  l->current = id;
  l->since = t;
  return e ? e : m->err;
}

static int add_link(cts_tasks_t *m, unsigned kind, uint32_t src, uint64_t t0, uint32_t dst,
                    uint64_t t1) {
  if (src == NONE || dst == NONE || src == dst) return 0;
  touch(m, src, t0);
  touch(m, dst, t1);
  const cts_tasks_hooks_t *h = &m->cfg.hooks;
  return h->on_link ? h->on_link(h->user_data, kind, src, t0, dst, t1) : 0;
}

static int counter(cts_tasks_t *m, const cts_mprof_event_t *ev, bool relative) {
  const uint32_t name = intern(m, ev->str, ev->str_len);
  if (name == NONE) return -ENOMEM;
  cts_tasks_counter_t *c = NULL;
  for (size_t i = 0; i < m->ncounters && !c; i++)
    if (m->counters[i].name == name) c = &m->counters[i];
  if (!c) {
    if (m->ncounters >= m->cfg.max_counters) return 0; /* more than anyone can read */
    if (cts_grow((void **)&m->counters, &m->cap_counters, m->ncounters, sizeof *m->counters))
      return -ENOMEM;
    c = &m->counters[m->ncounters++];
    *c = (cts_tasks_counter_t){.name = name};
  }
  /* A relative change wraps around rather than overflow (a hostile trace can ask for it). */
  c->value = relative ? (int64_t)((uint64_t)c->value + (uint64_t)ev->value) : ev->value;
  if (relative) c->relative = true;
  if (!c->updates || c->value < c->min) c->min = c->value;
  if (!c->updates || c->value > c->max) c->max = c->value;
  if (!c->updates || ev->time_ns >= c->last_t) c->last = c->value, c->last_t = ev->time_ns;
  c->updates++;
  const cts_tasks_hooks_t *h = &m->cfg.hooks;
  return h->on_counter
             ? h->on_counter(h->user_data, (uint32_t)(c - m->counters), ev->time_ns, c->value)
             : 0;
}

int cts_tasks_packet(cts_tasks_t *m, const cts_mprof_packet_t *p) {
  (void)p;
  m->new_packet = true;
  return 0;
}

/* Whether the event's `thread` is the writer's current task (not a switch to another). */
static bool names_current(const cts_mprof_event_t *ev) {
  switch (ev->id) {
    case CTS_MPROF_SWITCH:
    case CTS_MPROF_READ:
    case CTS_MPROF_SIGNAL:
    case CTS_MPROF_GC:
    case CTS_MPROF_ANCHOR: /* names the process */
      return false;
    default:
      return ev->thread != CTS_TASK_NONE;
  }
}

/* The lane of a packet whose first event is ev (see tasks.h): among the lanes whose last
 * event is not after it, the latest one whose current task is the event's (a thread's next
 * packet goes on with its current task), else the latest one. */
static void pick_lane(cts_tasks_t *m, const cts_mprof_event_t *ev) {
  const uint64_t t = ev->time_ns;
  uint32_t best = NONE, same = NONE, oldest = 0;
  const bool by_task = names_current(ev);
  for (uint32_t i = 0; i < m->nlanes; i++) {
    const cts_tasks_lane_t *l = &m->lanes[i];
    if (l->last_t <= t && (best == NONE || l->last_t > m->lanes[best].last_t)) best = i;
    if (by_task && l->last_t <= t && l->current == ev->thread &&
        (same == NONE || l->last_t > m->lanes[same].last_t))
      same = i;
    if (l->last_t < m->lanes[oldest].last_t) oldest = i;
  }
  if (same != NONE) best = same;
  if (best == NONE && m->nlanes < m->cfg.max_lanes) {
    best = (uint32_t)m->nlanes++;
    m->lanes[best] = (cts_tasks_lane_t){.current = CTS_TASK_NONE, .since = t, .last_t = t};
  }
  if (best == NONE) best = oldest;
  m->lanes[best].packets++;
  m->lane = best;
}

int cts_tasks_event(cts_tasks_t *m, const cts_mprof_event_t *ev) {
  const uint64_t t = ev->time_ns;
  if (!m->have_time) {
    m->first_ns = m->last_ns = t;
    m->have_time = true;
  }
  if (t > m->last_ns) m->last_ns = t;
  m->events++;
  if (m->lane == NONE || (m->new_packet && m->cfg.lanes)) pick_lane(m, ev);
  m->new_packet = false;
  cts_tasks_lane_t *lane = &m->lanes[m->lane];
  if (t > lane->last_t) lane->last_t = t;
  if (m->ntasks >= m->cfg.max_tasks && ev->id == CTS_MPROF_CREATES) {
    m->ignored_creates++;
    return 0;
  }
  if (ev->id == CTS_MPROF_ANCHOR || ev->id == CTS_MPROF_LOST) {
    /* ctfscope's extensions (docs/formats/mprof.md §14): no task is named by these. */
    if (ev->id == CTS_MPROF_LOST && ev->arg > m->lost) m->lost = ev->arg;
    if (ev->id == CTS_MPROF_ANCHOR && !m->have_anchor) {
      m->have_anchor = true;
      m->anchor_pid = ev->thread;
      m->anchor_ns = t;
      m->anchor_other_ns = ev->arg;
    }
    return 0;
  }
  const uint32_t self = ev->id == CTS_MPROF_GC ? NONE : task_of(m, ev->thread, t, NULL);
  if (m->err) return m->err;
  touch(m, self, t);
  const int64_t other_id = (int64_t)ev->arg;
  const cts_tasks_hooks_t *h = &m->cfg.hooks;
  int e = 0;
  switch (ev->id) {
    case CTS_MPROF_CREATES: {
      bool created;
      const uint32_t c = task_of(m, other_id, t, &created);
      if (c == NONE || !created) break; /* -1, or a duplicate creates: keep the first */
      cts_task_t *child = &m->tasks[c];
      child->flags &= (uint8_t)~CTS_TASK_F_PREEXISTING;
      child->start = t;
      child->type = ev->thread_type;
      child->parent = self;
      if (self != NONE && h->on_link) e = h->on_link(h->user_data, CTS_LINK_CREATE, self, t, c, t);
      break;
    }
    case CTS_MPROF_READ:
    case CTS_MPROF_READ_LATER: {
      const uint32_t src = task_of(m, other_id, t, NULL);
      if (src != NONE) {
        const cts_task_t *s = &m->tasks[src];
        const uint64_t t0 = s->end && s->end <= t ? s->end : t;
        e = add_link(m, (s->flags & CTS_TASK_F_FAILED) ? CTS_LINK_FAILED_READ : CTS_LINK_READ, src,
                     t0, self, t);
      }
      if (!e && ev->id == CTS_MPROF_READ) e = switch_to(m, lane, ev->thread, t);
      break;
    }
    case CTS_MPROF_TRY_READ: {
      const uint32_t src = task_of(m, other_id, t, NULL);
      e = add_link(m, CTS_LINK_TRY_READ, self, t, src, t);
      break;
    }
    case CTS_MPROF_FULFILLS:
    case CTS_MPROF_FAILS: {
      const uint32_t v = task_of(m, other_id, t, NULL);
      if (v == NONE) break;
      cts_task_t *victim = &m->tasks[v];
      if (!victim->end) victim->end = t;
      if (!victim->resolved_at) victim->resolved_at = t ? t : 1;
      victim->flags |= CTS_TASK_F_RESOLVED;
      if (ev->id == CTS_MPROF_FAILS) {
        victim->flags |= CTS_TASK_F_FAILED;
        const uint32_t s = intern(m, ev->str, ev->str_len);
        if (s == NONE) return -ENOMEM;
        if (h->on_label && (e = h->on_label(h->user_data, v, t, s, true))) return e;
      }
      e = add_link(m, CTS_LINK_RESOLVE, self, t, v, t);
      break;
    }
    case CTS_MPROF_BECOMES: {
      const uint32_t to = task_of(m, other_id, t, NULL);
      if (self == NONE || to == NONE || to == self) break;
      cts_task_t *from = &m->tasks[self];
      if (!from->end) from->end = t;
      from->flags |= CTS_TASK_F_BECAME;
      from->becomes = to;
      touch(m, to, t);
      if (lane->current == ev->thread) e = switch_to(m, lane, other_id, t);
      break;
    }
    case CTS_MPROF_LABEL: {
      if (self == NONE) break;
      if (ev->str_len == 16 && memcmp(ev->str, "__should_resolve", 16) == 0) {
        m->tasks[self].flags |= CTS_TASK_F_SHOULD;
        break;
      }
      const uint32_t s = intern(m, ev->str, ev->str_len);
      if (s == NONE) return -ENOMEM;
      if (h->on_label && (e = h->on_label(h->user_data, self, t, s, false))) return e;
      if (m->tasks[self].label == NONE) m->tasks[self].label = s;
      break;
    }
    case CTS_MPROF_INCREASE:
    case CTS_MPROF_COUNTER:
      e = counter(m, ev, ev->id == CTS_MPROF_INCREASE);
      break;
    case CTS_MPROF_SWITCH:
      e = switch_to(m, lane, ev->thread, t);
      break;
    case CTS_MPROF_GC:
      m->gc_events++;
      m->gc_ns += ev->arg;
      if (h->on_gc) e = h->on_gc(h->user_data, ev->arg < t ? t - ev->arg : 0, t);
      break;
    case CTS_MPROF_SIGNAL:
    case CTS_MPROF_SIGNAL_NOSWITCH: {
      const uint32_t src = task_of(m, other_id, t, NULL);
      e = add_link(m, CTS_LINK_SIGNAL, src, t, self, t);
      if (!e && ev->id == CTS_MPROF_SIGNAL) e = switch_to(m, lane, ev->thread, t);
      break;
    }
    case CTS_MPROF_ALLOC:
      m->allocs++;
      if (h->on_alloc) e = h->on_alloc(h->user_data, self, ev->arg, t, m->lane);
      break;
    default:
      break;
  }
  return e ? e : m->err;
}

int cts_tasks_finish(cts_tasks_t *m) {
  if (m->finished) return 0;
  m->finished = true;
  int e = 0;
  for (size_t i = 0; i < m->nlanes && !e; i++)
    e = switch_to(m, &m->lanes[i], CTS_TASK_NONE, m->cfg.lanes ? m->lanes[i].last_t : m->last_ns);
  cts_task_t *v = m->tasks;
  const size_t n = m->ntasks;
  for (size_t i = 0; i < n; i++) {
    if (!v[i].end) v[i].end = v[i].last + 1000; /* never resolved: "we stopped seeing it" */
    if (v[i].end < v[i].start) v[i].end = v[i].start;
  }
  for (size_t i = 0; i < n; i++) {
    if (!(v[i].flags & CTS_TASK_F_SHOULD)) continue;
    uint32_t k = (uint32_t)i;
    for (unsigned steps = 0; v[k].becomes != NONE && steps < 1000; steps++) k = v[k].becomes;
    if (!(v[k].flags & CTS_TASK_F_RESOLVED)) {
      v[k].flags |= CTS_TASK_F_FAILED | CTS_TASK_F_NEVER_RESOLVED;
      if (v[k].end < m->last_ns) v[k].end = m->last_ns;
    }
  }
  return e;
}
