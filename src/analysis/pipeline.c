/* SPDX-License-Identifier: MIT */
/* The decode thread and its ring of batches (pipeline.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/check.h"
#include "../common/grow.h"
#include "u64map.h"

/* Per batch, beside its events: frames (more only for one longer backtrace), other records
 * (packets, locations, warnings: a batch is handed over when they fill it, so that a trace
 * of empty packets stays bounded too) and warning text. */
#define FRAMES_CAP (32u << 10)
#define OTHER_CAP  512u
#define TEXT_CAP   (16u << 10)
#define WAKE_AT    (CTS_PIPE_BATCHES / 2)
/* The decode thread, the faster one as a rule, is woken once all but this many batches are
 * free: it then fills them in one go, a sleep per CTS_PIPE_BATCHES - PROD_WAKE_LEFT
 * batches, while the consumer still has PROD_WAKE_LEFT batches of work (~0.2 ms). Woken at
 * half the ring it slept twice as often: 20-30 % of the voluntary context switches of
 * `stats` on 160 MB went (2.2-3.2 k to 1.3-2.3 k, loaded machine). */
#define PROD_WAKE_LEFT 2u

typedef enum { REC_INFO, REC_LOCATION, REC_PACKET, REC_WARNING } rec_kind_t;

/* A record other than an event, delivered before the batch's event number `pos`. */
typedef struct pipe_other {
  uint32_t pos;
  uint8_t kind; /* rec_kind_t */
  union {
    const cts_mt_info_t *info; /* the reader's, stable once set */
    struct {
      uint64_t code;
      const cts_mt_location_t *locs; /* the reader's arena: stable until it is destroyed */
      size_t n;
    } loc;
    cts_mt_packet_t packet;
    struct {
      int code;
      uint64_t offset;
      uint32_t text; /* index of the message in the batch's text */
    } warning;
  } u;
} pipe_other_t;

/* Events are stored as the consumer gets them, their backtraces pointing into the batch's
 * frames (whole: rebuilding them from the previous one on the consumer's side cost as
 * much of its time as the decoding it saved), so that the consumer passes them on as they
 * are. frames is only reallocated while the batch is empty. */
typedef struct batch {
  cts_mt_event_t *ev;
  uint32_t nev;
  uint64_t *frames;
  size_t nframes, frames_cap;
  pipe_other_t *other;
  uint32_t nother;
  char *text;
  uint32_t ntext;
} batch_t;

typedef struct loc_def {
  const cts_mt_location_t *locs;
  size_t n;
} loc_def_t;

struct cts_pipe {
  cts_mt_handler_t consumer;
  batch_t batches[CTS_PIPE_BATCHES];

  /* The ring: batch i (counting from 0 over the run) is slot i % CTS_PIPE_BATCHES; the
   * decode thread hands batches over by raising `published` (release), the consumer gives
   * them back by raising `released`. Neither takes a lock per batch: a lock taken by both
   * for every batch cost a futex call per batch on a loaded machine (a holder preempted).
   * A side that has to wait sleeps on mu/its condition with its `sleeping` flag set, and is
   * woken only once enough batches are there for it (WAKE_AT filled for the consumer, all
   * but PROD_WAKE_LEFT freed for the decode thread), at the end, or on a stop: one wake-up
   * per batch cost as many context switches (19 k for 20 M events). */
  _Atomic uint64_t published, released;
  _Atomic bool done; /* the decode thread handed over its last batch */
  _Atomic bool stop; /* the consumer stopped: hand over nothing more */
  _Atomic bool cons_sleeping, prod_sleeping;
  pthread_mutex_t mu;
  pthread_cond_t filled, freed;
  bool sync_ready; /* mu and the conditions are initialised */
  int dec_err;     /* written before `done` */
  bool dec_input_error;

  /* The decode thread's own. */
  const char *path;
  cts_mt_reader_t *reader;
  uint64_t npub; /* batches handed over */
  batch_t *cur;
  /* Without a thread, each batch is consumed as soon as it is full. */
  bool direct;

  /* Reading progress, from the decode thread to the consumer's callback. */
  _Atomic uint64_t prog_done, prog_total;
  cts_os_progress_cb progress;
  void *progress_user_data;

  /* The consumer's own. */
  cts_u64map_t loc_index; /* code → index in locs */
  loc_def_t *locs;
  size_t nlocs, locs_cap;
  bool stopped;
  int stop_rc;
  uint64_t stop_offset;
  uint64_t rel; /* batches given back, when the consumer sleeps */
};

/* What an empty backtrace points to (never NULL: memcpy and memcmp with it stay defined). */
static const uint64_t no_frames[1];

static void batch_reset(batch_t *b) {
  b->nev = 0;
  b->nframes = 0;
  b->nother = 0;
  b->ntext = 0;
}

int cts_pipe_create(cts_pipe_t **out, const cts_mt_handler_t *consumer) {
  *out = NULL;
  cts_pipe_t *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  p->consumer = *consumer;
  cts_u64map_init(&p->loc_index);
  for (unsigned i = 0; i < CTS_PIPE_BATCHES; i++) {
    batch_t *b = &p->batches[i];
    b->ev = malloc(CTS_PIPE_BATCH_EVENTS * sizeof *b->ev);
    b->frames = malloc(FRAMES_CAP * sizeof *b->frames);
    b->frames_cap = FRAMES_CAP;
    b->other = malloc(OTHER_CAP * sizeof *b->other);
    b->text = malloc(TEXT_CAP);
    if (!b->ev || !b->frames || !b->other || !b->text) {
      cts_pipe_destroy(p);
      return -ENOMEM;
    }
  }
  if (pthread_mutex_init(&p->mu, NULL)) {
    cts_pipe_destroy(p);
    return -ENOMEM;
  }
  if (pthread_cond_init(&p->filled, NULL)) {
    pthread_mutex_destroy(&p->mu);
    cts_pipe_destroy(p);
    return -ENOMEM;
  }
  if (pthread_cond_init(&p->freed, NULL)) {
    pthread_cond_destroy(&p->filled);
    pthread_mutex_destroy(&p->mu);
    cts_pipe_destroy(p);
    return -ENOMEM;
  }
  p->sync_ready = true;
  *out = p;
  return 0;
}

void cts_pipe_destroy(cts_pipe_t *p) {
  if (!p) return;
  for (unsigned i = 0; i < CTS_PIPE_BATCHES; i++) {
    free(p->batches[i].ev);
    free(p->batches[i].frames);
    free(p->batches[i].other);
    free(p->batches[i].text);
  }
  if (p->sync_ready) {
    pthread_cond_destroy(&p->freed);
    pthread_cond_destroy(&p->filled);
    pthread_mutex_destroy(&p->mu);
  }
  free(p->locs);
  cts_u64map_fini(&p->loc_index);
  free(p);
}

/* ---- the consumer's side ---------------------------------------------------------------- */

static int define_location(cts_pipe_t *p, uint64_t code, const cts_mt_location_t *locs, size_t n) {
  bool added;
  uint64_t *slot = cts_u64map_insert(&p->loc_index, code, p->nlocs, &added);
  if (!slot) return -ENOMEM;
  if (!added) { /* redefined (identically: the reader refuses a conflict) */
    p->locs[*slot] = (loc_def_t){locs, n};
    return 0;
  }
  if (cts_grow((void **)&p->locs, &p->locs_cap, p->nlocs, sizeof *p->locs)) {
    cts_u64map_remove(&p->loc_index, code);
    return -ENOMEM;
  }
  p->locs[p->nlocs++] = (loc_def_t){locs, n};
  return 0;
}

int cts_pipe_lookup_location(const cts_pipe_t *p, uint64_t code, const cts_mt_location_t **locs,
                             size_t *n) {
  const uint64_t *slot = cts_u64map_find(&p->loc_index, code);
  if (!slot) return CTS_E_LOCATION_UNDEFINED;
  *locs = p->locs[*slot].locs;
  *n = p->locs[*slot].n;
  return 0;
}

/* A consumer callback's refusal: nothing more is delivered. */
static int stopped(cts_pipe_t *p, int rc, uint64_t offset) {
  if (rc > 0) rc = CTS_E_STOPPED; /* as the reader turns a callback's positive value */
  p->stopped = true;
  p->stop_rc = rc;
  p->stop_offset = offset;
  return rc;
}

static int deliver_other(cts_pipe_t *p, const batch_t *b, const pipe_other_t *o) {
  const cts_mt_handler_t *h = &p->consumer;
  int rc = 0;
  switch ((rec_kind_t)o->kind) {
    case REC_INFO:
      if (h->on_info && (rc = h->on_info(h->user_data, o->u.info)) != 0) return stopped(p, rc, 0);
      return 0;
    case REC_LOCATION:
      if ((rc = define_location(p, o->u.loc.code, o->u.loc.locs, o->u.loc.n)) != 0)
        return stopped(p, rc, 0);
      if (h->on_location &&
          (rc = h->on_location(h->user_data, o->u.loc.code, o->u.loc.locs, o->u.loc.n)) != 0)
        return stopped(p, rc, 0);
      return 0;
    case REC_PACKET:
      if (h->on_packet && (rc = h->on_packet(h->user_data, &o->u.packet)) != 0)
        return stopped(p, rc, o->u.packet.offset);
      return 0;
    case REC_WARNING:
      if (h->on_warning)
        h->on_warning(h->user_data, o->u.warning.code, o->u.warning.offset,
                      b->text + o->u.warning.text);
      return 0;
  }
  return 0;
}

/* Delivers a batch's records in order; the first callback error stops it. */
static int consume(cts_pipe_t *p, const batch_t *b) {
  const cts_mt_handler_t *h = &p->consumer;
  uint32_t o = 0;
  int rc;
  for (uint32_t i = 0; i < b->nev; i++) {
    for (; o < b->nother && b->other[o].pos == i; o++)
      if ((rc = deliver_other(p, b, &b->other[o])) != 0) return rc;
    if (h->on_event && (rc = h->on_event(h->user_data, &b->ev[i])) != 0)
      return stopped(p, rc, b->ev[i].offset);
  }
  for (; o < b->nother; o++)
    if ((rc = deliver_other(p, b, &b->other[o])) != 0) return rc;
  return 0;
}

/* ---- the decode thread's side ----------------------------------------------------------- */

/* Sleeps on cv until ready(p), with *flag set meanwhile so that the other side wakes it.
 * The flag is set before ready() is checked under mu, and the other side raises its count
 * before it reads the flag (both sequentially consistent): either it sees the flag and
 * signals under mu, or this side sees its count; no wake-up is lost. */
static void sleep_until(cts_pipe_t *p, _Atomic bool *flag, pthread_cond_t *cv,
                        bool (*ready)(cts_pipe_t *)) {
  pthread_mutex_lock(&p->mu);
  atomic_store(flag, true);
  while (!ready(p)) pthread_cond_wait(cv, &p->mu);
  atomic_store(flag, false);
  pthread_mutex_unlock(&p->mu);
}

static void wake(cts_pipe_t *p, pthread_cond_t *cv) {
  pthread_mutex_lock(&p->mu);
  pthread_cond_signal(cv);
  pthread_mutex_unlock(&p->mu);
}

/* The decode thread may fill a slot: one is free, or the consumer stopped. */
static bool slot_free(cts_pipe_t *p) {
  return p->npub - atomic_load(&p->released) < CTS_PIPE_BATCHES || atomic_load(&p->stop);
}

/* Hands the current batch over and starts the next one: 0, or CTS_E_STOPPED once the
 * consumer stopped (the reader then stops too). */
static int publish(cts_pipe_t *p) {
  if (p->direct) {
    if (p->stopped || consume(p, p->cur)) return CTS_E_STOPPED;
    batch_reset(p->cur);
    return 0;
  }
  if (atomic_load_explicit(&p->stop, memory_order_acquire)) return CTS_E_STOPPED;
  atomic_store(&p->published, ++p->npub);
  if (atomic_load(&p->cons_sleeping) && p->npub - atomic_load(&p->released) >= WAKE_AT)
    wake(p, &p->filled);
  if (p->npub - atomic_load_explicit(&p->released, memory_order_acquire) == CTS_PIPE_BATCHES)
    sleep_until(p, &p->prod_sleeping, &p->freed, slot_free);
  if (atomic_load_explicit(&p->stop, memory_order_acquire)) return CTS_E_STOPPED;
  p->cur = &p->batches[p->npub % CTS_PIPE_BATCHES];
  batch_reset(p->cur);
  return 0;
}

/* Room for one more other record (handing the batch over when it has none). */
static pipe_other_t *add_other(cts_pipe_t *p, rec_kind_t kind, int *err) {
  if (p->cur->nother == OTHER_CAP && (*err = publish(p)) != 0) return NULL;
  batch_t *b = p->cur;
  pipe_other_t *o = &b->other[b->nother++];
  o->pos = b->nev;
  o->kind = (uint8_t)kind;
  return o;
}

static int prod_info(void *ud, const cts_mt_info_t *info) {
  int err = 0;
  pipe_other_t *o = add_other(ud, REC_INFO, &err);
  if (o) o->u.info = info;
  return err;
}

static int prod_location(void *ud, uint64_t code, const cts_mt_location_t *locs, size_t n) {
  int err = 0;
  pipe_other_t *o = add_other(ud, REC_LOCATION, &err);
  if (o) {
    o->u.loc.code = code;
    o->u.loc.locs = locs;
    o->u.loc.n = n;
  }
  return err;
}

static int prod_packet(void *ud, const cts_mt_packet_t *pk) {
  int err = 0;
  pipe_other_t *o = add_other(ud, REC_PACKET, &err);
  if (o) o->u.packet = *pk;
  return err;
}

static void prod_warning(void *ud, int code, uint64_t offset, const char *message) {
  cts_pipe_t *p = ud;
  size_t len = strlen(message);
  if (len >= TEXT_CAP) len = TEXT_CAP - 1; /* the reader's messages are far shorter */
  /* A warning cannot stop the reader: once the consumer stopped it is dropped, as the
   * consumer would not have seen it. */
  if (p->cur->ntext + len + 1 > TEXT_CAP && publish(p)) return;
  int err = 0;
  pipe_other_t *o = add_other(p, REC_WARNING, &err);
  if (!o) return;
  batch_t *b = p->cur;
  o->u.warning.code = code;
  o->u.warning.offset = offset;
  o->u.warning.text = b->ntext;
  memcpy(b->text + b->ntext, message, len);
  b->text[b->ntext + len] = 0;
  b->ntext += (uint32_t)len + 1;
}

/* One 8-byte field of the event the reader has just written, read on its own: the
 * compiler otherwise loads two fields at once, and a 16-byte load spanning two recent
 * 8-byte stores cannot be forwarded from the store buffer; it waits for both to retire
 * (37 % of this function's samples, +20 ns an event). The empty asm keeps the value in a
 * register of its own. */
static inline uint64_t field(const uint64_t *p) {
  uint64_t v = *p;
  __asm__("" : "+r"(v));
  return v;
}

static int prod_event(void *ud, const cts_mt_event_t *ev) {
  cts_pipe_t *p = ud;
  const size_t len = ev->backtrace_len;
  batch_t *b = p->cur;
  if (b->nev == CTS_PIPE_BATCH_EVENTS || len > b->frames_cap - b->nframes) {
    const int e = publish(p);
    if (e) return e;
    b = p->cur;
    /* The batch is empty (no event points into frames): room for a longer backtrace, or
     * back to the usual size after one. */
    const size_t cap = len > FRAMES_CAP ? len : FRAMES_CAP;
    if (cap != b->frames_cap) {
      uint64_t *frames = realloc(b->frames, cap * sizeof *frames);
      if (!frames) return -ENOMEM;
      b->frames = frames;
      b->frames_cap = cap;
    }
  }
  uint64_t *bt = b->frames + b->nframes;
  if (len) memcpy(bt, ev->backtrace, len * sizeof *bt);
  b->nframes += len;
  b->ev[b->nev++] = (cts_mt_event_t){.kind = ev->kind,
                                     .domain = ev->domain,
                                     .source = ev->source,
                                     .short_form = ev->short_form,
                                     .time_us = field(&ev->time_us),
                                     .obj_id = field(&ev->obj_id),
                                     .length = field(&ev->length),
                                     .nsamples = field(&ev->nsamples),
                                     .common_prefix = field(&ev->common_prefix),
                                     .backtrace_len = len,
                                     .backtrace = len ? bt : no_frames,
                                     .offset = field(&ev->offset)};
  return 0;
}

static void prod_progress(void *ud, uint64_t done, uint64_t total) {
  cts_pipe_t *p = ud;
  if (p->direct) {
    if (p->progress) p->progress(p->progress_user_data, done, total);
    return;
  }
  atomic_store_explicit(&p->prog_total, total, memory_order_relaxed);
  atomic_store_explicit(&p->prog_done, done, memory_order_relaxed);
}

cts_mt_handler_t cts_pipe_producer(cts_pipe_t *p) {
  return (cts_mt_handler_t){.user_data = p,
                            .on_info = prod_info,
                            .on_location = prod_location,
                            .on_event = prod_event,
                            .on_packet = prod_packet,
                            .on_warning = prod_warning};
}

static void *decode_main(void *arg) {
  cts_pipe_t *p = arg;
  /* Signals are the calling thread's to handle (a command's SIGINT handler, say). */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  bool input_error = false;
  const int err = cts_os_read_memtrace(p->path, p->reader, prod_progress, p, &input_error);
  p->dec_err = err;
  p->dec_input_error = input_error;
  if (!atomic_load(&p->stop)) atomic_store(&p->published, ++p->npub); /* the last, maybe empty */
  atomic_store(&p->done, true);
  if (atomic_load(&p->cons_sleeping)) wake(p, &p->filled);
  return NULL;
}

/* The consumer may go on: a batch is there, or the decode thread is done. */
static bool batch_ready(cts_pipe_t *p) {
  return atomic_load(&p->published) != p->rel || atomic_load(&p->done);
}

/* Calls the progress callback with the decode thread's latest figures when they moved. */
static void report_progress(cts_pipe_t *p, uint64_t *last, bool always) {
  if (!p->progress) return;
  const uint64_t done = atomic_load_explicit(&p->prog_done, memory_order_relaxed);
  if (done == *last && !always) return;
  *last = done;
  p->progress(p->progress_user_data, done,
              atomic_load_explicit(&p->prog_total, memory_order_relaxed));
}

static int run_direct(cts_pipe_t *p, bool *input_error) {
  p->direct = true;
  const int err = cts_os_read_memtrace(p->path, p->reader, prod_progress, p, input_error);
  if (p->stopped) {
    *input_error = false;
    return p->stop_rc;
  }
  const int rc = consume(p, p->cur); /* the last batch */
  return rc ? rc : err;
}

int cts_pipe_run(cts_pipe_t *p, const char *path, cts_mt_reader_t *reader,
                 cts_os_progress_cb progress, void *progress_user_data, bool *input_error) {
  CTS_ASSERT(!p->path); /* one run per pipe */
  p->path = path;
  p->reader = reader;
  p->progress = progress;
  p->progress_user_data = progress_user_data;
  p->cur = &p->batches[0];
  batch_reset(p->cur);
  *input_error = false;
  pthread_t th;
  if (pthread_create(&th, NULL, decode_main, p) != 0) return run_direct(p, input_error);
  uint64_t last = 0, rel = 0;
  int rc = 0;
  for (;;) {
    uint64_t pub = atomic_load_explicit(&p->published, memory_order_acquire);
    if (pub == rel) {
      if (!atomic_load_explicit(&p->done, memory_order_acquire)) {
        p->rel = rel;
        sleep_until(p, &p->cons_sleeping, &p->filled, batch_ready);
        continue;
      }
      /* done is set after the last batch was published */
      if ((pub = atomic_load_explicit(&p->published, memory_order_acquire)) == rel) break;
    }
    rc = consume(p, &p->batches[rel % CTS_PIPE_BATCHES]);
    if (rc) atomic_store(&p->stop, true);
    atomic_store(&p->released, ++rel);
    if (atomic_load(&p->prod_sleeping) &&
        (rc || atomic_load(&p->published) - rel <= PROD_WAKE_LEFT))
      wake(p, &p->freed);
    if (rc) break;
    report_progress(p, &last, false);
  }
  pthread_join(th, NULL);
  report_progress(p, &last, true); /* the end, as a single-threaded read reports it */
  if (rc) return rc;
  *input_error = p->dec_input_error;
  return p->dec_err;
}

bool cts_pipe_stopped(const cts_pipe_t *p, uint64_t *offset) {
  if (p->stopped) *offset = p->stop_offset;
  return p->stopped;
}

unsigned cts_pipe_threads_for(uint64_t file_size, long cpus, double load) {
  if (file_size < CTS_PIPE_MIN_BYTES || cpus < 2) return 1;
  /* The second thread only shortens the wait when its CPU is otherwise idle: at load 20 on
   * 2 CPUs `stats` took 1.6 x longer on two threads. */
  return load < 0 || load + 1.0 <= (double)cpus ? 2 : 1;
}

unsigned cts_pipe_auto_threads(uint64_t file_size) {
  if (file_size < CTS_PIPE_MIN_BYTES) return 1; /* (no system call for a small trace) */
  cpu_set_t set;
  const long cpus = sched_getaffinity(0, sizeof set, &set) == 0
                        ? CPU_COUNT(&set)
                        : sysconf(_SC_NPROCESSORS_ONLN); /* more CPUs than a cpu_set_t holds */
  double load;
  return cts_pipe_threads_for(file_size, cpus, getloadavg(&load, 1) == 1 ? load : -1.0);
}
