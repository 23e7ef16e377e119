/* SPDX-License-Identifier: MIT */
/* The tracer's hot path, shared with the preload library's malloc hooks. The design is
 * described in include/ctfscope/tracer.h. Everything the hooks touch per call is here and
 * inline: one relaxed load of the global "active" flag, then a thread-local countdown
 * (allocation). The preload's free tests a tag in the block's header (preload_hooks.c); the
 * linked API's cts_tracer_track_free() one byte of the sampled-slot table. Anything else
 * goes to the out-of-line slow paths in sample.c. */
#ifndef CTS_TRACER_INTERNAL_H
#define CTS_TRACER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ctfscope/memtrace.h>
#include <ctfscope/tracer.h>

#include "../common/compiler.h"

#define CTS__TLS __thread __attribute__((tls_model("initial-exec")))

/* Slots of the sampled-block table: address bits 4..19 pick one of 65 536 counters. */
#define CTS__SLOT_BITS  16u
#define CTS__SLOT_COUNT (1u << CTS__SLOT_BITS)

/* Per-thread state. Zero-initialised TLS is a valid "not yet seeded" state: a zero
 * countdown sends the first allocation to the slow path, which seeds the generator. */
typedef struct cts__thread {
  uint64_t words_left;    /* words until and including this thread's next sampled word */
  uint64_t rng;           /* xorshift64* state, 0 = not seeded */
  uint32_t session;       /* tracing session the countdown was drawn for */
  int guard;              /* > 0 inside the tracer: allocations are not recorded */
  uintptr_t stack_hi;     /* top of this thread's stack for frame-pointer walks, 0 = unknown */
  int stack_state;        /* 0 = not looked up, 1 = known, -1 = unavailable */
  struct cts__ring *ring; /* this thread's record ring (ring.c), NULL until its first sample */
  /* The start of stack_hi's mapping (when stack_state is 1); the last other stack a
   * frame-pointer walk ran on (a coroutine's, a signal handler's), the mapping
   * [other_stack_lo, other_stack_hi), 0 = none (unwind.c, other_stack_end). */
  uintptr_t stack_lo, other_stack_lo, other_stack_hi;
  /* The stack libunwind walks on when a walk starts off the thread's stack (side_stack.h,
   * cts__call_on_walk_stack), NULL until the thread's first such walk. */
  struct cts__walk_stack *walk_stack;
  /* A walk is on the walk stack: set and cleared by the thread alone; a signal handler of
   * the thread that samples meanwhile walks in place (side_stack.h). */
  bool walk_stack_busy;
  /* The mixed unwinder's paths (unwind.c), for tests and benchmarks: whole stacks walked
   * with frame pointers, outer frames from the cache (of which checked by their return
   * addresses' slots alone), libunwind runs. */
  uint64_t unwind_walked, unwind_cached, unwind_cached_slots, unwind_full;
  uint64_t unwind_spliced;     /* of unwind_full: outer frames partly the previous walk's */
  uint64_t unwind_rule_misses; /* call frame rules read from a module (outer_walk) */
} cts__thread_t;

extern CTS__TLS cts__thread_t cts__thread;
/* 0 when not sampling, else the number of the running session (never 0). Hidden: every
 * hook reads it, and a hidden variable is one rip-relative load, not a GOT entry's address
 * and then the load (no other object refers to it). */
extern atomic_int cts__tracer_active __attribute__((visibility("hidden")));
extern _Atomic uint8_t cts__sampled_slots[CTS__SLOT_COUNT];

/* The lazy writer (writer_process.c, "The lazy writer"): CTS__LAZY_*. Written at a
 * session's start, then by compare-and-swap: the first ring claimed (or a call of the
 * program that would close one of the session's descriptors) takes it from WAITING to
 * SPAWNING (then SPAWNED), the session's end (or an exec) from WAITING to FINISHED. Hidden,
 * as cts__tracer_active: the preload's descriptor hooks test it at every call. session.c. */
extern _Atomic int cts__lazy_writer __attribute__((visibility("hidden")));
enum {
  CTS__LAZY_NONE,     /* a writer thread, or a writer process made at the session's start */
  CTS__LAZY_WAITING,  /* no writer process yet: the first ring's claim makes it */
  CTS__LAZY_SPAWNING, /* a thread is making it */
  CTS__LAZY_SPAWNED,  /* it was made (or could not be: the session's error says so) */
  CTS__LAZY_FINISHED  /* none was made and none will be: the program finished the trace */
};

static inline uint32_t cts__slot_of(const void *ptr) {
  return (uint32_t)((uintptr_t)ptr >> 4) & (CTS__SLOT_COUNT - 1u);
}

/* Slow paths (sample.c). `frame` is the frame address of the hook that was called by the
 * program (its return address is the allocation site). */
void cts__tracer_alloc_slow(const void *ptr, size_t size, void *frame);
void cts__tracer_free_slow(const void *ptr);

/* ---- the preload library's sampled blocks (preload_hooks.c) --------------------- */
/* The preload library gives each sampled block a header holding its object id and the
 * session that sampled it (low CTS__TRACER_SESSION_BITS bits), so the tracer keeps no
 * table for them. */
#define CTS__TRACER_ID_BITS      40u /* a full id: the session's low bits above the object id */
#define CTS__TRACER_NO_ID        ((UINT64_C(1) << CTS__TRACER_ID_BITS) - 1u) /* not recorded */
#define CTS__TRACER_SESSION_BITS 18u
#define CTS__TRACER_SESSION_MASK ((1u << CTS__TRACER_SESSION_BITS) - 1u)

/* 0 when not sampling, else the running session. */
static CTS_FORCE_INLINE unsigned cts__tracer_session(void) {
  return (unsigned)atomic_load_explicit(&cts__tracer_active, memory_order_relaxed);
}

/* The allocation fast path (`session` from cts__tracer_session()): true when an allocation
 * of `size` bytes is not sampled (the countdown is then decremented); false when
 * cts__tracer_sample_slow() must decide, and always while not sampling (session 0): a
 * thread's countdown is only ever drawn for a running session, so t->session is 0 only
 * while its countdown is 0. The hooks test this first and the idle case after it, so that
 * the sampling path pays no test of its own for tracing being off. */
static CTS_FORCE_INLINE bool cts__tracer_countdown(size_t size, unsigned session) {
  const uint64_t words = ((uint64_t)size + 7u) >> 3;
  cts__thread_t *const t = &cts__thread;
  if (CTS_LIKELY(words < t->words_left && t->session == session)) {
    t->words_left -= words;
    return true;
  }
  return false;
}

/* Both: true when an allocation of `size` bytes is not sampled. */
static CTS_FORCE_INLINE bool cts__tracer_skip(size_t size) {
  const unsigned session = cts__tracer_session();
  return CTS_LIKELY(!session) || cts__tracer_countdown(size, session);
}

/* The countdown's slow path: the number of samples in a block of `size` bytes about to be
 * allocated, 0 if it is not sampled (tracing off, or the tracer's own allocation). */
uint64_t cts__tracer_sample_slow(size_t size);
/* Whether the session samples every word (rate 1), set with its other sampling parameters
 * before it starts (sample.c). Hidden, as cts__tracer_active. */
extern atomic_bool cts__tracer_every_word __attribute__((visibility("hidden")));
/* cts__tracer_sample_slow with rate 1's answer inline: at rate 1 every allocation comes
 * here, and the call was ~15 instructions of the ~1 000 a traced allocation costs. */
static CTS_FORCE_INLINE uint64_t cts__tracer_sample(size_t size) {
  /* (acquire, as cts__tracer_sample_slow: the session's parameters were set before it) */
  const unsigned session =
      (unsigned)atomic_load_explicit(&cts__tracer_active, memory_order_acquire);
  if (CTS_LIKELY(session && atomic_load_explicit(&cts__tracer_every_word, memory_order_relaxed) &&
                 !cts__thread.guard))
    return ((uint64_t)size + 7u) >> 3;
  return cts__tracer_sample_slow(size);
}
/* Queues the alloc event of sampled block `ptr` (nsamples from cts__tracer_sample) and
 * returns its full id: the session's bits above CTS__TRACER_ID_BITS (their low
 * CTS__TRACER_SESSION_BITS are cts__tracer_record_free's `session`), the object id below;
 * CTS__TRACER_NO_ID (session 0) if it is not recorded. With `side`, the block goes into the
 * side table (the linked API's blocks). `frame` is the frame of the hook the program
 * called. Called straight from the hooks' slow paths: each frame between the hook and
 * libunwind costs an unwinding step. */
uint64_t cts__tracer_record(const void *ptr, size_t size, uint64_t nsamples, void *frame,
                            bool side);
/* Queues the collect of object `id` if `session` is still the running session. */
void cts__tracer_record_free(uint64_t id, unsigned session);
/* The traced process is about to exec (true), after flushing, or its exec failed (false):
 * meanwhile a writer process looks for the program's image ending every millisecond
 * instead of every 50, so that the old image's trace is finished (its flock released)
 * as soon as the exec happens. No effect without a running session. Async-signal-unsafe
 * (takes the control lock), as the exec family's hooks already are. */
void cts__tracer_exec_pending(bool pending);
/* Right before an exec, with a writer process: hands the image's module list
 * (/proc/self/maps) to the writer process, which then finishes this image's trace after the
 * exec on its own, resolving its codes against that list. True when handed over: the exec
 * need not wait for a flush; `*error` is then what a flush would have returned (the
 * session's error, -ESRCH if the writer process is gone), else 0. False without a writer
 * process or a running session, or if the list could not be read whole (the caller
 * flushes then). Takes the control lock; no allocation. writer_process.c. */
bool cts__tracer_exec_handoff(int *error);
/* After a failed exec that handed its list over: the writer reads /proc/PID/maps again. */
void cts__tracer_exec_handoff_cancel(void);
/* Whether the running session's writer process can no longer see this image end: the
 * program closed its end of the watch pipe (common/held_fd.h), and the writer now watches the
 * process, which an exec does not end. An exec must then stop the session itself
 * (preload_exec.c). One fstat. writer_process.c. */
bool cts__writer_watch_lost(void);
/* Whether the time-stamp counter may time events (cts_os_tsc_usable: reading /proc/cpuinfo
 * costs 50-60 us of CPU): -1 not known. A session's start asks and keeps the answer until
 * the session stops (the kernel may give up the TSC meanwhile: the next session asks
 * again); the preload sets it before the start, from the image that exec'd this one a
 * moment ago. session.c. */
extern int cts__tsc_usable_known;
/* Waits until the running session's writer process has been made (its intermediate
 * process reaped) and its pid is known. Control lock not held. writer_process.c. */
void cts__writer_process_settle(void);
/* Reaps the running session's intermediate process, waiting while it still runs, and opens
 * no pidfd for the writer (the exec would close it): before any exec, traced next or not
 * (preload_exec.c). The intermediate process is this process's child until it is reaped,
 * lazily (made while the process had one thread; with more, the start waits for it): it
 * has exited, all but its last steps, by the time the session's start returns. The kernel
 * turns the exit of a child made before an exec into a SIGCHLD to the new image, where no
 * code knows that child and it would stay a zombie (one per image of `env env prog`). A
 * wait only while it still runs: its own work is a fork. Control lock not held.
 * writer_process.c. */
void cts__writer_process_reap(void);
/* In the writer process: a copy (malloc) of the list the program handed over, its length in
 * `*len`; NULL when none is (then /proc/PID/maps is the program's). */
char *cts__program_maps(size_t *len);
/* The module list of process `pid` (0: this one) read from /proc/PID/maps, whole, into
 * a malloc'd copy, its length in `*len`; NULL if it could not be read whole. */
char *cts__read_maps(int pid, size_t *len);
/* Before the program makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): waits
 * for the writer's intermediate process to have exited, if it has not been reaped yet (it
 * has made the writer and is in its exit: microseconds). Its exit hands the writer to the
 * nearest subreaper, which must not be the program: the program would see the writer in
 * wait() and get its SIGCHLD. A lazy session's writer not made yet is made first, for the
 * same reason. Takes the control lock. */
void cts__tracer_before_subreaper(void);
/* Whether the running session has no writer process yet and waits for its first sample to
 * make one (the lazy writer, writer_process.c): an exec or an _exit must then finish the
 * trace (cts__session_exec_end, cts_tracer_stop). session.c. */
bool cts__tracer_writer_waiting(void);
/* Whether a lazy session waits for its first sample: the one test (a load and a compare)
 * of the preload's hooks on calls that close or replace descriptors (close, close_range,
 * closefrom, dup2, dup3), before they call cts__tracer_before_fds_close. */
static CTS_FORCE_INLINE bool cts__tracer_fds_watched(void) {
  return atomic_load_explicit(&cts__lazy_writer, memory_order_relaxed) == CTS__LAZY_WAITING;
}
/* Before the program closes or replaces descriptors `first` to `last` (inclusive), while a
 * lazy session waits for its first sample: if the session's memfd (the rings) or trace file
 * is among them, its writer process is made now, as the first sample would make it, with
 * copies of its own (docs/tracing.md, "The lazy writer"); a program that closes every
 * descriptor at its start (closefrom(3), a daemon) then keeps its trace. Returns once a
 * writer holds them (or none could be made: the session's error says so). Nothing in a
 * vfork'd child (it shares the program's memory, not its descriptors) or inside the tracer
 * (guard raised). Any thread; errno kept; cancellation disabled while it spawns. session.c. */
void cts__tracer_before_fds_close(unsigned first, unsigned last);
/* Before the program confines itself, while a lazy session waits for its first sample: its
 * writer process is made now, as cts__tracer_before_fds_close makes it. A seccomp filter
 * (prctl PR_SET_SECCOMP) that forbids new processes (sandboxes: SECCOMP_RET_KILL_PROCESS
 * on clone) killed the program at its first sample, when the writer was made then; after
 * a chroot the writer executable is out of reach (the trace stopped at the first sample).
 * Same conditions and guarantees. Also sets cts__confined. session.c. */
void cts__tracer_before_confinement(void);
/* The path by which the dynamic loader loaded the object the tracer is in (the preload
 * library, libctfscope.so), from its list of objects (dl_iterate_phdr, under its lock);
 * NULL when the tracer is in the main program or was not found. Valid while that object
 * is loaded. Any thread; no allocation. writer_process.c. */
const char *cts__tracer_object_path(void);
/* Set, never cleared, once the program confines itself by a call the preload sees (a
 * seccomp filter, a chroot): the program's side then makes no system call that a
 * sandbox's filter is unlikely to allow where a plainer one does (unwind.c: a thread's
 * stack end read from /proc/self/maps as text, not asked of it by ioctl, which filters of
 * an allow list kill on). Atomic loads and stores, relaxed. session.c. */
extern bool cts__confined;
/* Set, never cleared, once this image knows that a seccomp filter is in force: its hooks
 * saw one go in (cts__tracer_before_seccomp), its lazy session found one at its start or
 * first sample, or the image before it said so (the preload's CTFSCOPE_EXEC_SECCOMP, which
 * the exec hooks hand on to the images they exec with the library: filters are inherited
 * across fork and exec, so it is never wrong once set). Under it the start asks no prctl,
 * which a filter may kill on (an image exec'd under a filter killing on prctl died at its
 * start): the program is taken for a child subreaper only if it is pid 1 or knows it is one
 * (cts__program_subreaper), for dumpable
 * unless it runs in secure-execution mode (AT_SECURE), the filters at the start are counted
 * in /proc/self/status, and the writer process keeps the program's name. Atomic loads and
 * stores, relaxed. session.c. */
extern bool cts__seccomp_in_force;
/* Whether this process is a child subreaper (PR_SET_CHILD_SUBREAPER, kept across exec, not
 * across fork), as this image knows it: from prctl(PR_GET_CHILD_SUBREAPER) when its session
 * asked (no filter known), from the preload's prctl hook when the program set or cleared it,
 * or from the image before it in this process (CTFSCOPE_EXEC_SECCOMP=2: it knew a filter in
 * force, under which prctl is not asked, and the process to be a subreaper). A forked child
 * clears it. Atomic loads and stores, relaxed. writer_process.c. */
extern bool cts__program_subreaper;
/* cts__tracer_before_confinement for a seccomp filter or strict mode about to go in (the
 * prctl and syscall() hooks); also sets cts__seccomp_in_force. session.c. */
void cts__tracer_before_seccomp(void);
/* `ctfscope record`'s notes pipe (CTFSCOPE_RECORD_NOTES), through which a traced image says
 * that its trace lost its tail ("PATH\0REASON\0" records): the file alone cannot always
 * tell (a writer that stops between two packets leaves a shorter valid trace). Set by the
 * preload's constructor, before the session starts, with the pipe's identity (device and
 * inode) taken then; the writer process holds a copy of its own, so that a program that
 * closes its descriptors (closefrom(3) at its start) does not leave `record` untold, and a
 * lazy session's close hooks count it among the session's descriptors. Not thread-safe:
 * the constructor's. writer_process.c. */
void cts__tracer_notes_set(int fd);
/* The notes pipe's number while it still names the pipe it named when set, else -1 (the
 * program closed it and may have given the number to a file of its own). Any thread. */
int cts__tracer_notes_fd(void);
/* Tells `record` that the trace in `path` lost its tail, `e` being the session's error
 * (-ESRCH: the writer process died; -EBADF: the program closed the session's descriptors
 * where the preload could not see it; -EPERM: it installed a seccomp filter so, and no
 * writer was made; another -errno: writing the trace failed). Once per
 * session, by the program or its writer process, whichever comes first; nothing if the
 * pipe is no longer record's. Any thread; not from inside the allocator. */
void cts__tracer_note_loss(const char *path, int e);
/* Tells `record` something about the run that is no trace's: `text` (one line, cut at
 * 512 bytes), as a note with an empty path, which record says once after the program's
 * end. True if written; false without record's pipe (the caller may say it on stderr).
 * One write under PIPE_BUF: not mixed with another process's note. Any thread, a forked
 * or vfork'd child too (the pipe is checked as cts__tracer_notes_fd does); not from inside
 * the allocator. */
bool cts__tracer_note_text(const char *text);
/* Takes back one note that cts__tracer_note_text wrote with this `text` (an exec it told of
 * failed): a note with the path "-" (no trace's path: record's are absolute), which record
 * matches to the note. True if written. Same conditions as cts__tracer_note_text. */
bool cts__tracer_note_retraction(const char *text);
/* Tells record why no trace was made at `path` (the MEMTRACE it was given): a note under
 * that path, which record says in place of its guess at why the program did not load the
 * library. True if written. Same conditions as cts__tracer_note_text. */
bool cts__tracer_note_untraced(const char *path, const char *text);
/* Right before an exec, while the session waits for its writer: the image's trace is
 * finished (its last packet written) and sampling stops; true if so. session.c. */
bool cts__session_exec_end(void);
/* At _exit (no destructors run): a session still waiting for its writer ends as at
 * cts_tracer_stop, if the control mutex is free (_exit may be called from a signal
 * handler). session.c. */
void cts__session_end_at_exit(void);
/* After that exec failed: the last packet is taken back (the file cut to its header) and
 * the session goes on, still waiting for its writer. session.c. */
void cts__session_exec_resume(void);
/* The writer executable's main (src/tracer/writer_exec.c): the memfd, address and size of
 * the program's shared mapping in argv. writer_process.c. */
int cts__writer_exec_main(int argc, char **argv);
/* The running session's writer process, 0 if it has a writer thread (tests). */
int cts__tracer_writer_pid(void);
/* How many per-thread record rings exist (tests: exited threads' rings are reused). */
size_t cts__tracer_ring_count(void);

/* ---- backtraces (unwind.c) ------------------------------------------------------------- */
/* All capture innermost first (the allocation site first) into `out`, which has room for
 * max + CTS__OWN_FRAMES entries, starting from `frame`: the frame of the hook the program
 * called (its return address is the allocation site). They return the number of frames.
 *
 * The mixed unwinder (CTS_TRACER_UNWIND_MIXED, the default) walks frame-pointer records as
 * long as each belongs to a function that keeps frame pointers: decided once per return
 * address from the prologue of the function it returns into, or where that is not plain
 * from its call frame information at that address (found in its module's .eh_frame_hdr,
 * through glibc's lock-free _dl_find_object). Where the chain enters code without
 * them (at the latest libc's start-up code at the bottom of every stack), the rest comes from
 * libunwind, and is kept per thread with a copy of the stack above that point: while those bytes,
 * the record's address and its return address stay the same, libunwind would give the same frames,
 * so they are reused without unwinding. When the call frame information of those outer functions
 * makes their return addresses' slots all they depend on, only those words are kept and compared.
 */
#define CTS__OWN_FRAMES 16u /* room for the tracer's own frames in a libunwind backtrace */
/* The largest cfg.max_frames (tracer.h), which the preload checks its setting against. */
#define CTS__MAX_FRAMES_LIMIT 1024u
typedef struct cts__bottom cts__bottom_t; /* a thread's outer-frame cache */
extern const size_t cts__bottom_size;
size_t cts__unwind_fp(cts__thread_t *t, uintptr_t frame, uint64_t *out, size_t max);
#ifdef CTS_HAVE_LIBUNWIND
size_t cts__unwind_libunwind(cts__thread_t *t, uintptr_t frame, uint64_t *out, size_t max);
#endif
size_t cts__unwind_mixed(cts__thread_t *t, uintptr_t frame, uint64_t *out, size_t max,
                         cts__bottom_t *bottom);
/* False where the mixed unwinder is libunwind alone (no _dl_find_object, not x86-64). */
bool cts__unwind_mixed_available(void);
/* The mixed unwinder's verdict on return address `ret` (tests): whether the function it
 * returns into keeps a frame record at %rbp there. False where it is not available. */
bool cts__unwind_keeps_frame_pointers(uintptr_t ret);
/* Before the program makes a thread (the preload's pthread_create): what the tracer must do
 * while the process still has one thread (binding libunwind, lazylib.h); nothing once it has
 * more. Not from a hook. */
void cts__tracer_before_thread(void);
/* Return addresses in [lo, hi) are cut from every backtrace: code of ours that calls the
 * program's (the preload library's thread_start). Call before that code runs. */
void cts__unwind_cut_code(uintptr_t lo, uintptr_t hi);

/* ---- the linked API's tracked blocks (side table) --------------------------------------- */

/* Called after a successful allocation of `size` bytes at `ptr`. */
static CTS_FORCE_INLINE void cts__tracer_on_alloc(const void *ptr, size_t size, void *frame) {
  const unsigned session =
      (unsigned)atomic_load_explicit(&cts__tracer_active, memory_order_relaxed);
  if (CTS_LIKELY(!session)) return;
  const uint64_t words = ((uint64_t)size + 7u) >> 3;
  cts__thread_t *const t = &cts__thread;
  /* A countdown drawn in an earlier session (another rate) does not count. */
  if (CTS_LIKELY(words < t->words_left && t->session == session)) {
    t->words_left -= words;
    return;
  }
  if (ptr) cts__tracer_alloc_slow(ptr, size, frame);
}

/* Called before the real free of `ptr`. */
static CTS_FORCE_INLINE void cts__tracer_on_free(const void *ptr) {
  if (CTS_LIKELY(!atomic_load_explicit(&cts__tracer_active, memory_order_relaxed))) return;
  if (CTS_LIKELY(
          atomic_load_explicit(&cts__sampled_slots[cts__slot_of(ptr)], memory_order_relaxed) == 0))
    return;
  cts__tracer_free_slow(ptr);
}

/* For a large zero-initialised array that an image which never samples leaves untouched
 * (the writer's spawn stacks, the far-block table, the thread tables): placed in .lbss,
 * which the linker puts after .bss, so that the small variables every image's start
 * touches share a few pages instead of being spread between such arrays (each page the
 * start touches is a page fault, 1-3 us on a VM; a page first read then written is two).
 * gcc on x86-64 ELF only: clang 14 makes a section of that name PROGBITS (the arrays' zeros
 * in the file); elsewhere a plain array. */
#if defined(__ELF__) && defined(__x86_64__) && !defined(__clang__)
#define CTS__COLD_BSS __attribute__((section(".lbss.cts_cold")))
#else
#define CTS__COLD_BSS
#endif

/* Enters/leaves a region whose allocations must not be recorded (the tracer's own). */
static inline void cts__guard_enter(void) {
  cts__thread.guard++;
}
static inline void cts__guard_leave(void) {
  cts__thread.guard--;
}
static inline int cts__guarded(void) {
  return cts__thread.guard;
}

/* One line of /proc/PID/maps, "start-end perms offset major:minor inode   path", as the
 * kernel writes it: the fields libdwfl's report reads (with sscanf, the same fields), path
 * the rest of the line after the blanks that follow the inode (not NUL-terminated, may be
 * empty). */
typedef struct cts__maps_line {
  uint64_t start, end, offset, inode;
  unsigned major, minor;
  const char *path;
  size_t path_len;
} cts__maps_line_t;
/* Parses the `len` bytes at `line` (no newline among them) into *out: false if they are
 * not such a line (a field missing or out of range). Reads nothing past line + len. Pure:
 * any thread. symbolize.c. */
bool cts__maps_line_parse(const char *line, size_t len, cts__maps_line_t *out);

/* Location resolution with libdw (symbolize.c); all on the writer thread. `pid` is the
 * process whose codes are resolved: 0 for this one (its loader's counters say when to
 * re-read the module list), or the program a writer process writes for: its module list
 * is re-read when `*module_epoch` changed (the program bumps it at each flush, which it
 * does before dlclose and exec) and when a code falls in no known module (a library it
 * loaded since). */
typedef struct cts__symbolizer cts__symbolizer_t;
cts__symbolizer_t *cts__symbolizer_create(int pid, const _Atomic uint64_t *module_epoch);
void cts__symbolizer_destroy(cts__symbolizer_t *s);
/* Writes the modules' persistent location caches (symcache.h) without tearing anything
 * down; destroy does it too. */
void cts__symbolizer_save(cts__symbolizer_t *s);
/* Whether s has bound libdw (tests: a warm persistent cache answers without it). */
bool cts__symbolizer_used_libdw(const cts__symbolizer_t *s);
/* A cts_mt_resolve_cb; user_data is the symbolizer. */
size_t cts__symbolizer_resolve(void *user_data, uint64_t code, cts_mt_location_t *out, size_t max);

#endif /* CTS_TRACER_INTERNAL_H */
