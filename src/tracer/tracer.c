/* SPDX-License-Identifier: MIT */
/* The allocation tracer's public API (include/ctfscope/tracer.h): configuration defaults,
 * start and stop (a session, or the TCP_LISTEN service), flush, statistics, the linked
 * API's tracking calls, and the fork handlers. Design: tracer.h. The rest of the tracer is
 * in parts (tracer_state.h): ring.c, control.c, sample.c, writer.c, writer_process.c,
 * sink.c, session.c; service.c is reached only from here (service.h) and reaches the
 * sessions only through session.h.
 *
 * Nothing in the tracer allocates through malloc: its memory comes from mmap, and the only
 * libc calls that may allocate (pthread_create, pthread_getattr_np, libdw on the writer
 * thread) run with the thread's guard raised, so the preload hooks pass them straight
 * through. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "lazylib.h"
#include "service.h"
#include "side_stack.h"
#include "session.h"
#include "tracer_state.h"

#define CONNECT_TIMEOUT_MS 3000u

static void atfork_prepare(void) {
  pthread_mutex_lock(&cts__side.side_lock);
  if (cts__ctl_is_local()) cts__ctl_lock();
}

static void atfork_parent(void) {
  if (cts__ctl_is_local()) cts__ctl_unlock();
  pthread_mutex_unlock(&cts__side.side_lock);
}

/* The fork that makes the writer process changes nothing (the prepare handler's locks are
 * released, in the writer process as in the program); any other child forgets the
 * parent's session and service. */
static void atfork_child(void) {
  cts__lazylib_atfork_child();
  cts__side_stack_atfork_child();
  if (cts__spawning_writer) {
    pthread_mutex_unlock(&cts__side.side_lock);
    if (cts__ctl_is_local()) cts__ctl_unlock();
    return;
  }
  cts__session_atfork_child();
  cts__service_atfork_child();
  __atomic_store_n(&cts__program_subreaper, false, __ATOMIC_RELAXED); /* not inherited */
}

static void init_once(void) {
  cts__init_control(&cts__local_control, false);
  cts__ring_state.ring_key_ok =
      pthread_key_create(&cts__ring_state.ring_key, cts__ring_release) == 0;
  cts__session.ready = pthread_atfork(atfork_prepare, atfork_parent, atfork_child) == 0;
}

void cts_tracer_config_init(cts_tracer_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->sample_rate = 1e-6;
  cfg->unwind = CTS_TRACER_UNWIND_AUTO;
  cfg->max_frames = 256;
  cfg->symbolize = true;
  cfg->flush_interval_ms = 1000;
  cfg->stall_timeout_ms = 5000;
}

void cts_tracer_sink_init(cts_tracer_sink_t *sink, cts_tracer_sink_kind_t kind) {
  memset(sink, 0, sizeof *sink);
  sink->struct_size = sizeof *sink;
  sink->kind = kind;
  sink->fd = -1;
  sink->connect_timeout_ms = CONNECT_TIMEOUT_MS;
}

int cts_tracer_start(const cts_tracer_config_t *cfg, const cts_tracer_sink_t *sink) {
  cts__guard_enter();
  pthread_mutex_lock(&cts__session.control);
  int e;
  if (!cts__config_ok(cfg, sink)) {
    e = CTS_E_INVAL;
  } else if (cts__session.session_running || cts__session.service_running) {
    e = CTS_E_STATE;
  } else {
    pthread_once(&cts__session.once, init_once);
    if (!cts__session.ready) {
      e = CTS_E_STATE;
    } else if (sink->kind == CTS_TRACER_SINK_TCP_LISTEN) {
      e = cts__service_start(cfg, sink);
      cts__session.service_running = e == 0;
    } else {
      e = cts__session_start_locked(cfg, sink, -1);
    }
  }
  pthread_mutex_unlock(&cts__session.control);
  cts__guard_leave();
  return e;
}

int cts_tracer_stop(void) {
  cts__guard_enter();
  pthread_mutex_lock(&cts__session.control);
  int e = CTS_E_STATE;
  if (cts__session.service_running && !cts__session.service_stopping) {
    /* The service thread ends its client's session itself, under the control lock. */
    cts__session.service_stopping = true;
    pthread_mutex_unlock(&cts__session.control);
    e = cts__service_stop();
    pthread_mutex_lock(&cts__session.control);
    cts__session.service_running = cts__session.service_stopping = false;
  } else if (!cts__session.service_running && cts__session.session_running) {
    e = cts__session_stop_locked();
  }
  pthread_mutex_unlock(&cts__session.control);
  cts__guard_leave();
  return e;
}

bool cts_tracer_is_active(void) {
  pthread_mutex_lock(&cts__session.control);
  const bool running = cts__session.session_running || cts__session.service_running;
  pthread_mutex_unlock(&cts__session.control);
  return running;
}

void cts__tracer_exec_pending(bool pending) {
  cts__ctl_lock();
  if (cts__ctl->thread_running) {
    atomic_store_explicit(&cts__ctl->exec_pending, pending, memory_order_relaxed);
    if (pending) cts__ctl_wake(&cts__ctl->writer_wake, false); /* it recomputes how long it waits */
  }
  cts__ctl_unlock();
}

int cts_tracer_flush(void) {
  /* No writer process (the lazy writer): none yet, and the file holds all there is, the
   * header; or none could be made, and the session's error says so. */
  const int lazy = atomic_load(&cts__lazy_writer);
  if (lazy == CTS__LAZY_WAITING) return 0;
  if (lazy == CTS__LAZY_FINISHED) return cts__session_error();
  cts__ctl_lock();
  if (!cts__ctl->thread_running || cts__ctl->stop_requested) {
    cts__ctl_unlock();
    return CTS_E_STATE;
  }
  const uint64_t target = ++cts__ctl->flush_requested;
  atomic_fetch_add(&cts__ctl->module_epoch, 1); /* before dlclose and exec: see the symbolizer */
  cts__ctl_wake(&cts__ctl->writer_wake, false);
  const struct timespec deadline = cts__deadline_in_ms(DROP_GIVE_UP_MS);
  int e = 0;
  while (cts__ctl->flush_done < target && cts__ctl->thread_running) {
    if (!cts__session.cfg.drop_when_full) {
      cts__wait_progress(NULL);
    } else if (cts__wait_progress(&deadline) == ETIMEDOUT) {
      e = -ETIMEDOUT;
      break;
    }
  }
  if (cts__ctl->stats.error) e = cts__ctl->stats.error;
  cts__ctl_unlock();
  return e;
}

void cts_tracer_track_alloc(const void *ptr, size_t size) {
  cts__tracer_on_alloc(ptr, size, __builtin_frame_address(0));
}

void cts_tracer_track_free(const void *ptr) {
  cts__tracer_on_free(ptr);
}

void cts_tracer_get_stats(cts_tracer_stats_t *out) {
  cts_tracer_stats_t rings;
  cts__ctl_lock();
  *out = cts__ctl->stats;
  cts__ring_counts(&rings);
  out->samples += rings.samples - cts__session.base.samples;
  out->collects += rings.collects - cts__session.base.collects;
  out->waits += rings.waits - cts__session.base.waits;
  out->dropped += rings.dropped - cts__session.base.dropped;
  out->lost_allocs += rings.lost_allocs - cts__session.base.lost_allocs;
  out->lost_samples += rings.lost_samples - cts__session.base.lost_samples;
  out->lost_collects += rings.lost_collects - cts__session.base.lost_collects;
  out->lost_allocs += cts__ctl->gave_up;
  cts__ctl_unlock();
  cts__service_add_stats(out);
}

uint16_t cts_tracer_listen_port(void) {
  return cts__service_port();
}
