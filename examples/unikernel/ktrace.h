/* SPDX-License-Identifier: MIT */
/* Tracing in the example unikernel, over the freestanding core only (cts_core):
 *  - allocations: the memtrace writer (include/ctfscope/memtrace.h) fed by the allocator's
 *    hook, with Poisson sampling per word, frame-pointer backtraces and locations from the
 *    kernel's own symbol table (ksyms.h), streamed on one serial port;
 *  - tasks: a mirage-profile ring (include/ctfscope/tasks.h) in kernel memory, written by
 *    one explicit writer (the kernel has one CPU and no threads, so the process-wide hooks
 *    of cts_tasks, which need thread-local storage, are not used), whose finished packets
 *    stream on another serial port.
 * Single CPU, no interrupts; the fault handler may call ktrace_fault() once. */
#ifndef UNIKERNEL_KTRACE_H
#define UNIKERNEL_KTRACE_H

#include <ctfscope/tasks.h>

#include "hw.h"

typedef struct ktrace_stats {
  uint64_t sampled, samples, collects; /* memtrace events written */
  uint64_t mt_error;                   /* first memtrace writer error, negated; 0 if none */
  /* Costs in TSC cycles, serial output excluded (the ports count theirs: serial_t.cycles). */
  uint64_t hook_calls, hook_cycles;  /* allocation hook: calls and cycles in total */
  uint64_t sampled_cycles;           /* of which in calls that wrote an event */
  uint64_t task_events, task_cycles; /* task events written and their cycles */
  uint64_t task_dropped;             /* events the ring dropped (no free packet) */
  uint64_t ring_addr, ring_size;     /* the ring buffer, for a memory dump */
} ktrace_stats_t;

/** Starts both traces: @p rate is λ per word (0 < λ ≤ 1), @p seed the sampler's seed. The
 *  ports must be initialised. Returns 0 or a CTS_E_* code. */
int ktrace_start(double rate, uint64_t seed, serial_t *memtrace_port, serial_t *task_port);
/** From the event loop: sends the memtrace events buffered for more than 100 ms, or once
 *  1 024 are waiting, so that the host sees allocations while the kernel runs, and a
 *  crash that never reaches the fault handler (a triple fault) loses at most that much
 *  of the trace. */
void ktrace_poll(void);
/** Ends both traces: closes the memtrace writer and sends the ring's last packets. */
void ktrace_stop(void);
/** From the fault handler: ends the traces unless the fault happened inside the tracer
 *  (its state may then be half-updated); returns whether it did. */
bool ktrace_fault(void);
const ktrace_stats_t *ktrace_stats(void);

/* Task hooks with the meaning of their cts_task_* namesakes in tasks.h. */
cts_task_id_t kt_create(cts_task_type_t type, const char *label);
cts_task_id_t kt_current(void);
void kt_read(cts_task_id_t reader, cts_task_id_t source);
void kt_try_read(cts_task_id_t waiter, cts_task_id_t source);
void kt_resolved(cts_task_id_t task);
void kt_switch(cts_task_id_t task);
void kt_idle(void);
void kt_signal(cts_task_id_t receiver, cts_task_id_t sender);
void kt_label(cts_task_id_t task, const char *label);
void kt_counter(const char *name, int64_t value);

#endif /* UNIKERNEL_KTRACE_H */
