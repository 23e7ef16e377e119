/* SPDX-License-Identifier: MIT */
/* Backtraces for the sampling path: the frame-pointer walk, libunwind, and the mixed mode
 * that walks frame pointers through code built with them and takes the rest of the stack
 * from libunwind (design: tracer_internal.h, "Backtraces"). Everything here runs on the
 * allocating thread with its guard raised and takes no lock; the only allocation is
 * pthread_getattr_np's, once per thread (untraced: the guard is up). */
#define _GNU_SOURCE
#include "tracer_internal.h"
#include "cfi.h"
#include "lazylib.h" /* libunwind, bound at the first walk that needs it */
#include "side_stack.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The stack region above the last frame-pointer record that the outer-frame cache keeps a
 * copy of, and how many outer frames it holds. */
#define BOTTOM_BYTES  4096u
#define BOTTOM_FRAMES 64u
/* The frames of the last walk that the next one may rejoin, and of a walk in progress
 * (cts__walk_t, cts__own_t: ~100 bytes a frame, 13 KiB a thread). A walk deeper than that is walked
 * whole every time: with 64, cc1plus's template instantiations (2.5 % of its walks, ~88 frames
 * each) made 41 % of its rule look-ups; with 128, 0.1 % of its walks are deeper. */
#define WALK_FRAMES 128u
/* Beyond the outermost frame libunwind reported (where the CFI says the unwinding ends:
 * _start, clone3), the bytes its last step may have read. */
#define BOTTOM_MARGIN 64u
/* log2 of the entries of the per-return-address cache of frame-pointer verdicts. */
#define VERDICT_BITS 12u
/* The largest frame outer_walk follows (its CFA's offset; the stack's end bounds it too). */
#define CFA_OFFSET_MAX ((int64_t)1 << 24)
/* log2 of the sets of RULE_WAYS entries of a thread's cache of call frame rules
 * (outer_walk): 8192 entries, 128 KiB, a set per cache line. cc1 looks up ~8 000
 * addresses: 1024 direct-mapped entries missed 174 000 times in 580 000 walks, 4096 sets of
 * 2 15 600 times (~4 000 instructions each), 2048 sets of 4 7 600 times (4096 sets of 4,
 * twice the memory: 5 955). */
#define RULE_BITS 11u
#define RULE_WAYS 4u

/* One address's call frame rules, as outer_walk needs them (cfi_row_t, packed). */
typedef struct cts__rule {
  uint64_t pc; /* 0 = empty */
  int32_t cfa_off;
  int16_t rbp_off;
  uint8_t cfa_reg; /* RULE_NONE: no rules known for pc */
  uint8_t kinds;   /* rbp's kind, the return address's kind << 2, RULE_RA_AT_8, RULE_STEP,
                    * RULE_RSP_STEP */
} cts__rule_t;

/* A thread's last outer_walk, frame by frame, for the next walk to reuse its outer part
 * (outer_walk, "splice"). Stored outermost first: entry p is the walk's frame m - 1 - p, so
 * that a walk which rejoins the previous one keeps the shared outer entries where they are
 * and writes only its own inner ones (cc1: ~3 frames of its own, ~16 shared). Frame i: the
 * stack pointer, address and %rbp (if known) its rules were applied to, the word holding
 * its return address (frames, read at at), and whether it and every frame beyond it have a
 * CFA of %rsp plus a constant (then they depend on sp, pc and their return addresses'
 * words only; else on rbp and the saved %rbp words too). Every word a frame's rules read
 * lies between its stack pointer and stack_hi, the top of the stack of the thread that
 * walked it (outer_walk refuses other frames), so a walk that rejoins an entry at its own
 * stack pointer, with the same stack top, reads only words of its own stack.
 *
 * frames and at are kept backwards (entry p at frames[WALK_FRAMES - p], at[WALK_FRAMES -
 * 1 - p]): the shared frames are then, innermost first, one run that a splice copies whole
 * into the record. An entry's address is the return address its inner neighbour read, so
 * it is not kept apart: pc(p) = frames[WALK_FRAMES - 1 - p], the innermost entry's in
 * frames[WALK_FRAMES - m].
 * The words that held the callers' %rbp matter only to entries whose CFA is %rbp-based, and
 * to each only the one that gave it its %rbp: the word saved by the nearest entry inwards of
 * it that saved one (the entries between leave %rbp alone; one that does anything else ends
 * the walk, outer_walk). Those words are a list of their own (fat, fval), by the entry that
 * read them, outermost first: nfeed[p] of them were read by entries 0..p, and they are all
 * that a walk rejoining entry p depends on beyond the return addresses' words and p's own
 * %rbp (cc1: of ~13 saved %rbp words read per walk, a few feed a %rbp-based frame). pending[p]:
 * an entry from the nearest one outwards of p that saved %rbp (or the outermost) to p is
 * %rbp-based, so the next entry inwards to save one adds its word to the list. */
typedef struct cts__walk {
  size_t m;           /* frames; 0: nothing to reuse */
  uintptr_t stack_hi; /* of the thread that walked every entry */
  uintptr_t sp[WALK_FRAMES], rbp[WALK_FRAMES];
  uintptr_t at[WALK_FRAMES];         /* backwards */
  uint64_t frames[WALK_FRAMES + 1u]; /* backwards, the innermost entry's address first */
  uintptr_t fat[WALK_FRAMES];        /* saved %rbp words that %rbp-based entries use */
  uint64_t fval[WALK_FRAMES];
  uint8_t nfeed[WALK_FRAMES];
  bool rsp[WALK_FRAMES], rbp_known[WALK_FRAMES], pending[WALK_FRAMES];
} cts__walk_t;
_Static_assert(WALK_FRAMES <= UINT8_MAX, "nfeed counts in a byte");

/* A walk's own frames until it is known to have succeeded, innermost first: as in
 * cts__walk_t, frame by frame (sat: where the caller's %rbp was read, 0 if it was not;
 * rsp: this frame's alone). */
typedef struct cts__own {
  uintptr_t sp[WALK_FRAMES], rbp[WALK_FRAMES], at[WALK_FRAMES];
  uintptr_t sat[WALK_FRAMES];
  uint64_t frames[WALK_FRAMES], sval[WALK_FRAMES];
  bool rsp[WALK_FRAMES], rbp_known[WALK_FRAMES];
} cts__own_t;

struct cts__bottom {
  uintptr_t rec; /* the frame record whose return address leads out of frame-pointer code */
  uint64_t ret;  /* that return address; 0 = the cache is empty */
  size_t len;    /* bytes of stack from rec that the outer frames depend on */
  size_t nframes;
  /* With slots: frames[i] was read at rec + slot[i], and those words are all the outer
   * frames depend on (outer_slots); else they depend on bytes[0..len). */
  bool slots;
  uint64_t frames[BOTTOM_FRAMES];
  uint32_t slot[BOTTOM_FRAMES];
  unsigned char bytes[BOTTOM_BYTES];
  /* The rules outer_walk followed, by address: the thread's cache misses go through the
   * same few hundred functions, whose call frame information would be run again each time. */
  _Alignas(64) cts__rule_t rules[1u << RULE_BITS][RULE_WAYS]; /* a set: one cache line */
  cts__walk_t walk; /* the last walk that succeeded, outermost first */
  cts__own_t own;   /* the current walk's own frames, innermost first */
};

const size_t cts__bottom_size = sizeof(cts__bottom_t);

/* ---- frames of ours outside the hooks ------------------------------------------------- */

/* Code whose return addresses are ours, not the program's: the preload library's
 * thread_start (preload_pthread.c), which calls each traced thread's start routine.
 * Relaxed: set once, before the first thread it concerns is created. */
static uintptr_t cut_lo, cut_len;

void cts__unwind_cut_code(uintptr_t lo, uintptr_t hi) {
  __atomic_store_n(&cut_lo, lo, __ATOMIC_RELAXED);
  __atomic_store_n(&cut_len, hi > lo ? hi - lo : 0, __ATOMIC_RELAXED);
}

/* Drops that frame from out[0..n) (innermost first): it is among the outermost few
 * (thread_start <- start_thread <- clone3), so only those are looked at. */
static CTS_FORCE_INLINE size_t cut_own_frames(uint64_t *out, size_t n) {
  const uintptr_t len = __atomic_load_n(&cut_len, __ATOMIC_RELAXED);
  if (!len) return n;
  const uintptr_t lo = __atomic_load_n(&cut_lo, __ATOMIC_RELAXED);
  for (size_t i = n; i-- > 0 && n - i <= 4;)
    if (out[i] - lo < len) {
      memmove(out + i, out + i + 1, (n - i - 1) * sizeof *out);
      return n - 1;
    }
  return n;
}

/* ---- reading the stack above our frames --------------------------------------------------- */

/* The outer-frame cache copies and compares the stack above the walked frames, across the
 * frames' locals: under AddressSanitizer, their redzones are not ours to respect, and the
 * bytes go through uninstrumented loops (volatile, so that they do not become calls to the
 * intercepted memcpy and memcmp). */
#if CTS_UNDER_ASAN
__attribute__((no_sanitize("address"))) static void stack_copy(void *dst, uintptr_t src, size_t n) {
  const volatile unsigned char *const s = (const volatile unsigned char *)src;
  unsigned char *const d = dst;
  for (size_t i = 0; i < n; i++) d[i] = s[i];
}
__attribute__((no_sanitize("address"))) static bool stack_equal(const void *copy, uintptr_t src,
                                                                size_t n) {
  const volatile unsigned char *const s = (const volatile unsigned char *)src;
  const unsigned char *const c = copy;
  for (size_t i = 0; i < n; i++)
    if (c[i] != s[i]) return false;
  return true;
}
#else
static CTS_FORCE_INLINE void stack_copy(void *dst, uintptr_t src, size_t n) {
  memcpy(dst, (const void *)src, n);
}
static CTS_FORCE_INLINE bool stack_equal(const void *copy, uintptr_t src, size_t n) {
  return memcmp((const void *)src, copy, n) == 0;
}
#endif

#if CTS_UNDER_ASAN
#define STACK_WORDS_READER __attribute__((no_sanitize("address")))
#else
#define STACK_WORDS_READER
#endif

/* The word at `at`, on the stack above our frames. */
STACK_WORDS_READER static uint64_t stack_word(uintptr_t at) {
  return *(const uint64_t *)at;
}

/* Whether the words at rec + slot[i] are frames[i], for i < n. */
STACK_WORDS_READER static bool stack_words_equal(const uint64_t *frames, const uint32_t *slot,
                                                 size_t n, uintptr_t rec) {
  uint64_t diff = 0;
  for (size_t i = 0; i < n; i++) diff |= stack_word(rec + slot[i]) ^ frames[i];
  return diff == 0;
}

/* ---- the thread's stack ------------------------------------------------------------------ */

/* Parses a hexadecimal number at *p (moved past it). */
static uintptr_t parse_hex(const char **p, const char *end) {
  uintptr_t v = 0;
  for (; *p < end; ++*p) {
    const char c = **p;
    const unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                       : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                              : 16u;
    if (d == 16u) break;
    v = v * 16u + d;
  }
  return v;
}

/* The argument of the PROCMAP_QUERY ioctl on /proc/PID/maps (Linux 6.11, uapi linux/fs.h,
 * which Debian 12's headers predate): 104 bytes, the kernel fills what `size` covers. With
 * no flags it describes the mapping that holds `query_addr`. */
typedef struct {
  uint64_t size, query_flags, query_addr;                                   /* in */
  uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode; /* out */
  uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
  uint64_t vma_name_addr, build_id_addr;
} procmap_query_t;
_Static_assert(sizeof(procmap_query_t) == 104, "struct procmap_query is 104 bytes");
#define PROCMAP_QUERY_IOCTL _IOWR('f', 17, procmap_query_t)

/* The end of the mapping holding this thread's stack pointer, from /proc/self/maps, read
 * with plain system calls into a buffer on the stack: no malloc and no lock. Not
 * pthread_getattr_np(): it takes the thread's descriptor lock and calls realloc() under it
 * (and fopen() for the main thread), so a program inside its own pthread_getattr_np (Rust's
 * start-up and std::thread do it) would deadlock when that realloc is sampled here. Every
 * word below the mapping's end is mapped, which is all the walks need. 0 when not found. */
static uintptr_t stack_mapping_end(uintptr_t sp, uintptr_t *start) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  /* Linux 6.11 and later answer for one address (the PROCMAP_QUERY ioctl), in time that
   * does not grow with the number of mappings: a process with 1 000 threads has ~2 000,
   * and each thread's first sample read them all as text. Older kernels: ENOTTY. */
  procmap_query_t q = {.size = sizeof q, .query_addr = sp};
  if (!__atomic_load_n(&cts__confined, __ATOMIC_RELAXED) &&
      ioctl(fd, PROCMAP_QUERY_IOCTL, &q) == 0 && sp >= q.vma_start && sp < q.vma_end) {
    close(fd);
    *start = (uintptr_t)q.vma_start;
    return (uintptr_t)q.vma_end;
  }
  char buf[4096];
  size_t have = 0;
  uintptr_t found = 0;
  for (;;) {
    const ssize_t got = read(fd, buf + have, sizeof buf - have);
    if (got <= 0) break;
    have += (size_t)got;
    /* Whole lines only; a partial one waits for the next read. */
    const char *line = buf, *const end = buf + have;
    for (const char *nl; (nl = memchr(line, '\n', (size_t)(end - line))) != NULL; line = nl + 1) {
      const char *p = line;
      const uintptr_t lo = parse_hex(&p, nl);
      if (p < nl && *p == '-') {
        p++;
        const uintptr_t hi = parse_hex(&p, nl);
        if (sp >= lo && sp < hi) {
          found = hi;
          *start = lo;
          break;
        }
      }
    }
    if (found) break;
    have = (size_t)(end - line);
    if (have == sizeof buf) have = 0; /* a line longer than the buffer: skip it */
    memmove(buf, line, have);
  }
  close(fd);
  return found;
}

typedef struct {
  uintptr_t sp, lo, hi;
} stack_query_t;

static void stack_mapping_on_side_stack(void *query) {
  stack_query_t *const q = query;
  q->hi = stack_mapping_end(q->sp, &q->lo);
}

/* The mapping that holds `sp`, [*lo, return value), 0 if not found; its buffer (4 KiB of
 * /proc/self/maps text on kernels before 6.11) on the side stack: a thread's first sample
 * may come from a coroutine's small stack (side_stack.h). */
static uintptr_t stack_mapping(uintptr_t sp, uintptr_t *lo) {
  stack_query_t q = {.sp = sp};
  cts__call_on_side_stack(stack_mapping_on_side_stack, &q);
  *lo = q.lo;
  return q.hi;
}

/* The main thread's stack top, from the loader (the auxiliary vector's neighbourhood). */
extern void *__libc_stack_end;

static void find_stack_top_on_side_stack(void *thread) {
  cts__thread_t *const t = thread;
  uintptr_t lo = 0;
  uintptr_t hi = stack_mapping(t->stack_lo, &lo);
  /* A thread's first sample may come from a coroutine's stack, which is then not the
   * thread's: its walks would take that for their own stack (and run libunwind in place
   * there, cts__call_on_walk_stack). The thread's stack holds its descriptor (glibc puts
   * it at the top of every thread's stack, a program's own included), the main thread's
   * __libc_stack_end: when the mapping holds neither, the thread's is looked up (two system
   * calls more to know which thread this is, at such a first sample only). */
  const uintptr_t main_end = (uintptr_t)__libc_stack_end, self = (uintptr_t)pthread_self();
  if (hi && !(main_end >= lo && main_end < hi) && !(self >= lo && self < hi)) {
    uintptr_t own_lo = 0;
    const uintptr_t own = getpid() == gettid() ? main_end : self;
    const uintptr_t own_hi = stack_mapping(own, &own_lo);
    if (own_hi) {
      lo = own_lo;
      hi = own_hi;
    }
  }
  t->stack_lo = hi ? lo : 0;
  if (hi) {
    t->stack_hi = hi;
    t->stack_state = 1;
  }
}

static void find_stack_top(cts__thread_t *t) {
  t->stack_state = -1; /* meanwhile (and if not found): walks bounded by their first frame */
  /* (the stack pointer to start from, through stack_lo; the look-up and the loader's lazy
   * binding of what it calls on the side stack: a first sample may come from a coroutine) */
  t->stack_lo = (uintptr_t)__builtin_frame_address(0);
  cts__call_on_side_stack(find_stack_top_on_side_stack, t);
}

/* The end of the mapping holding `sp` when it is not the thread's stack (a coroutine's
 * stack, a sigaltstack handler's): every word between sp and the thread's stack top is
 * not mapped then (the heap's end, the libraries, gaps lie between), and a frame-pointer
 * walk bounded by that top read a stray saved %rbp in a gap and faulted. The last such
 * mapping is kept for the thread (coroutines' stacks are often in one: the heap, a pool):
 * a look-up only when sp leaves it. 0 if not found. */
static uintptr_t other_stack_end(cts__thread_t *t, uintptr_t sp) {
  if (sp >= t->other_stack_lo && sp < t->other_stack_hi) return t->other_stack_hi;
  uintptr_t lo = 0;
  const uintptr_t hi = stack_mapping(sp, &lo);
  t->other_stack_lo = hi ? lo : 0;
  t->other_stack_hi = hi;
  return hi;
}

/* A plausible return address: not in the first page, not a kernel or non-canonical one. */
static CTS_FORCE_INLINE bool bad_return(uintptr_t ret) {
  return ret - 4096u >= ((uintptr_t)1 << 62) - 4096u;
}

/* ---- frame pointers ---------------------------------------------------------------------- */

/* Walks the frame-pointer chain from `frame` (a frame of ours whose return address is the
 * allocation site). Only reads words between the current stack pointer and the top of the
 * thread's stack, all mapped, and only upwards, so a broken chain (code built without
 * frame pointers) ends the walk instead of faulting. Innermost first. */
size_t cts__unwind_fp(cts__thread_t *t, uintptr_t fp, uint64_t *out, size_t max) {
  if (t->stack_state == 0) find_stack_top(t);
  const uintptr_t lo = (uintptr_t)__builtin_frame_address(0);
  uintptr_t hi = t->stack_state == 1 ? t->stack_hi : fp + 2 * sizeof(uintptr_t);
  /* Not on the thread's stack: bounded by the stack it is on (other_stack_end); a chain
   * that leaves it for the thread's stack (a signal handler's interrupted frames) goes on
   * there, once. */
  bool elsewhere = t->stack_state == 1 && (lo < t->stack_lo || lo >= t->stack_hi);
  if (elsewhere) {
    const uintptr_t other_hi = other_stack_end(t, lo);
    hi = other_hi ? other_hi : fp + 2 * sizeof(uintptr_t);
  }
  if (hi < lo + 2 * sizeof(uintptr_t)) return 0;
  uintptr_t top = hi - 2 * sizeof(uintptr_t); /* the highest frame that fits */
  if (fp < lo || fp > top) return 0;
  size_t n = 0;
  while (n < max) {
#if !defined(__x86_64__) && !defined(__i386__)
    if (fp & (sizeof(uintptr_t) - 1u)) break; /* strict alignment; x86 reads it anyway */
#endif
    const uintptr_t *const f = (const uintptr_t *)fp;
    const uintptr_t next = f[0], ret = f[1];
    if (bad_return(ret)) break;
    out[n++] = ret;
    /* One compare for "up the stack and still in it": next in (fp, top]. */
    if (next - fp - 1u >= top - fp) {
      if (!elsewhere || next < t->stack_lo || next > t->stack_hi - 2 * sizeof(uintptr_t)) break;
      elsewhere = false;
      top = t->stack_hi - 2 * sizeof(uintptr_t);
    }
    fp = next;
  }
  return cut_own_frames(out, n);
}

#ifdef CTS_HAVE_LIBUNWIND

/* ---- libunwind ----------------------------------------------------------------------------- */

/* Whether a walk from the frame at `sp` starts on a stack of the program's that is not the
 * thread's own (a coroutine's, a sigaltstack handler's), which may be small: its libunwind
 * and call frame work then runs on the thread's walk stack (side_stack.h): libunwind's
 * context, cursor and steps took ~3.5 KB of it at each sample (~5 KB at the first), the
 * mixed walk's rules and copies ~4.5 KB. */
static CTS_FORCE_INLINE bool off_thread_stack(const cts__thread_t *t, uintptr_t sp) {
  return CTS_UNLIKELY(t->stack_state == 1 && (sp < t->stack_lo || sp >= t->stack_hi));
}

/* libunwind's frames from the allocation site `site` outwards, into out (room for max +
 * CTS__OWN_FRAMES). unw_backtrace, not unw_init_local and unw_step: its fast path keeps a
 * per-thread cache of each return address's unwinding rule and makes no system call, while
 * every unw_step goes through libunwind's global cache of rules, whose lock masks and
 * unmasks all signals (two rt_sigprocmask calls per frame; Debian's libunwind 1.6 is built
 * without a per-thread cache, so UNW_CACHE_PER_THREAD falls back to the global one). */
static size_t backtrace_from(uintptr_t site, uint64_t *out, size_t max) {
  _Static_assert(sizeof(void *) == sizeof(uint64_t), "return addresses are stored as u64");
  void **const ips = (void **)out;
  const int n = cts__unw_backtrace(ips, (int)(max + CTS__OWN_FRAMES), site);
  int start = -1;
  for (int i = 0; i < n && i < (int)CTS__OWN_FRAMES; i++)
    if ((uintptr_t)ips[i] == site) {
      start = i;
      break;
    }
  if (start < 0) return 0;
  size_t k = 0;
  for (int i = start; i < n && k < max; i++, k++)
    if ((uintptr_t)ips[i] == 0 || (uintptr_t)ips[i] >= ((uintptr_t)1 << 62)) break;
  memmove(out, out + start, k * sizeof *out);
  return k;
}

/* A walk's arguments and frames, for a call on the walk stack. */
typedef struct {
  cts__thread_t *t;
  uintptr_t frame, lo;
  uint64_t *out;
  size_t max, n;
  cts__bottom_t *bottom;
} walk_call_t;

static void libunwind_on_walk_stack(void *call) {
  walk_call_t *const c = call;
  c->n = cut_own_frames(c->out, backtrace_from(((const uintptr_t *)c->frame)[1], c->out, c->max));
}

size_t cts__unwind_libunwind(cts__thread_t *t, uintptr_t frame, uint64_t *out, size_t max) {
  /* (whether the walk starts on the thread's stack: a look-up at its first sample) */
  if (CTS_UNLIKELY(t->stack_state == 0)) find_stack_top(t);
  if (off_thread_stack(t, (uintptr_t)__builtin_frame_address(0))) {
    walk_call_t call = {.frame = frame, .out = out, .max = max};
    if (cts__call_on_walk_stack(libunwind_on_walk_stack, &call)) return call.n;
  }
  return cut_own_frames(out, backtrace_from(((const uintptr_t *)frame)[1], out, max));
}

/* ---- which code keeps frame pointers ------------------------------------------------------ */

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
#define CTS_HAVE_MIXED 1

/* Per return address: whether the function it returns into keeps frame pointers. Direct
 * mapped, shared by all threads: an entry is one word (address << 1 | verdict), written
 * and read whole, so a race only costs a second look-up. */
static CTS__COLD_BSS _Atomic uint64_t verdicts[1u << VERDICT_BITS];

/* The entry of the function holding `pc`, its module in *o and its FDE in *fde; 0 if
 * there is none (no FDE, or no module: generated code). */
static uintptr_t function_at(uintptr_t pc, struct dl_find_object *o, const unsigned char **fde) {
  /* _dl_find_object: lock-free, async-signal-safe, made for unwinders */
  return _dl_find_object((void *)pc, o) == 0 ? cts__cfi_function_entry(o, pc, fde) : 0;
}

/* The rules at `pc` in whatever function holds it: false if there is no FDE for it, the
 * CFI is not understood, or it is a signal frame's. */
static bool frame_rules(uintptr_t pc, cfi_row_t *row) {
  struct dl_find_object o;
  const unsigned char *fde = NULL;
  bool signal;
  const uintptr_t entry = function_at(pc, &o, &fde);
  return entry && cts__cfi_row_at(&o, fde, entry, pc, row, &signal) && !signal;
}

/* Whether the function `ret` returns into keeps frame pointers at that point: it begins
 * with the frame-pointer prologue (push %rbp; mov %rsp,%rbp, after an endbr64), or else
 * its call frame information says that %rbp points at its frame record there. ret - 1,
 * since a call that ends a function returns past it. Functions without an FDE, or in no
 * module (generated code): no. */
static CTS_NOINLINE bool look_up_verdict(uintptr_t ret, _Atomic uint64_t *slot) {
  bool framed = false;
  struct dl_find_object o;
  const unsigned char *fde = NULL;
  const uintptr_t entry = function_at(ret - 1u, &o, &fde);
  if (entry && entry + 8u <= (uintptr_t)o.dlfo_map_end) {
    unsigned char code[8];
    memcpy(code, (const void *)entry, sizeof code);
    const unsigned char *p = code;
    if (p[0] == 0xF3 && p[1] == 0x0F && p[2] == 0x1E && p[3] == 0xFA) p += 4; /* endbr64 */
    framed = p[0] == 0x55 && p[1] == 0x48 && p[2] == 0x89 && p[3] == 0xE5;
    if (!framed && p[0] == 0x55) framed = cts__cfi_keeps_frame_pointer(&o, fde, entry, ret - 1u);
  }
  atomic_store_explicit(slot, (uint64_t)ret << 1 | framed, memory_order_relaxed);
  return framed;
}

static CTS_FORCE_INLINE bool keeps_frame_pointers(uintptr_t ret) {
  _Atomic uint64_t *const slot =
      &verdicts[(uint64_t)ret * 0x9E3779B97F4A7C15ull >> (64u - VERDICT_BITS)];
  const uint64_t v = atomic_load_explicit(slot, memory_order_relaxed);
  if (CTS_LIKELY(v >> 1 == ret)) return v & 1u;
  return look_up_verdict(ret, slot);
}

/* ---- the mixed unwinder -------------------------------------------------------------------- */

/* RULE_STEP: the return address is saved at CFA - 8 and the CFA's offset is one that
 * outer_walk follows (8 to CFA_OFFSET_MAX): all it needs to step to the caller.
 * RULE_RSP_STEP: RULE_STEP with the CFA at %rsp plus that offset and %rbp left alone or
 * saved between the frame's stack pointer and its return address (-CFA offset <= its
 * offset <= -16): the stack words such a frame reads lie between its stack pointer and its
 * CFA, so outer_walk checks only that the CFA is within the stack. Most frames of code
 * built without frame pointers (cc1plus: nearly all its frames): their step skips the
 * tests that the other rules need. */
enum { RULE_NONE = 0xFF, RULE_RA_AT_8 = 0x10, RULE_STEP = 0x20, RULE_RSP_STEP = 0x40 };

/* The set of the thread's cache of call frame rules that holds pc's, if any. */
static CTS_FORCE_INLINE cts__rule_t *rule_set(cts__bottom_t *b, uintptr_t pc) {
  return b->rules[(uint64_t)pc * 0x9E3779B97F4A7C15ull >> (64u - RULE_BITS)];
}

_Static_assert(sizeof(cts__rule_t) * RULE_WAYS == 64, "a set of rules is one cache line");

/* frame_rules(pc), through the thread's cache whose set for pc is `set`: RULE_WAYS ways per
 * set, the one used last first (a hit in another way swaps with it; a miss drops the last
 * way's). The entry stays valid until the next look-up. */
static CTS_FORCE_INLINE const cts__rule_t *cached_frame_rules(cts__thread_t *t, cts__rule_t *set,
                                                              uintptr_t pc) {
  cts__rule_t *const e = &set[0];
  if (CTS_UNLIKELY(e->pc != pc)) {
    const cts__rule_t first = *e;
    size_t w = 1;
    while (w < RULE_WAYS && set[w].pc != pc) w++;
    if (w < RULE_WAYS) { /* another way: it becomes the first */
      *e = set[w];
      set[w] = first;
    } else { /* the last way's entry goes, the others move down */
      for (w = RULE_WAYS - 1u; w > 1; w--) set[w] = set[w - 1u];
      set[1] = first;
      t->unwind_rule_misses++;
      cfi_row_t r;
      *e = (cts__rule_t){.pc = pc, .cfa_reg = RULE_NONE};
      /* Registers other than %rsp and %rbp, offsets beyond what a frame of BOTTOM_BYTES can
       * use: outer_walk refuses them, as it refuses a frame without rules. */
      if (frame_rules(pc, &r) && (r.cfa_reg == DW_REG_RSP || r.cfa_reg == DW_REG_RBP) &&
          r.cfa_off >= INT32_MIN && r.cfa_off <= INT32_MAX) {
        const bool rbp_fits =
            r.rbp.kind != CFI_RULE_SAVED || (r.rbp.off >= INT16_MIN && r.rbp.off <= INT16_MAX);
        const bool ra_at_8 = r.ra.kind == CFI_RULE_SAVED && r.ra.off == -8;
        const bool step = ra_at_8 && r.cfa_off >= 8 && r.cfa_off <= CFA_OFFSET_MAX;
        const bool rbp_below_ra =
            r.rbp.kind == CFI_RULE_OTHER ||
            (r.rbp.kind == CFI_RULE_SAVED && r.rbp.off <= -16 && r.cfa_off + r.rbp.off >= 0);
        e->cfa_reg = (uint8_t)r.cfa_reg;
        e->cfa_off = (int32_t)r.cfa_off;
        e->rbp_off = rbp_fits && r.rbp.kind == CFI_RULE_SAVED ? (int16_t)r.rbp.off : 0;
        e->kinds =
            (uint8_t)((rbp_fits ? r.rbp.kind : CFI_RULE_REGISTER) | r.ra.kind << 2 |
                      (ra_at_8 ? RULE_RA_AT_8 : 0) | (step ? RULE_STEP : 0) |
                      (step && rbp_fits && rbp_below_ra && r.cfa_reg == DW_REG_RSP ? RULE_RSP_STEP
                                                                                   : 0));
      }
    }
  }
  return e->cfa_reg == RULE_NONE ? NULL : e;
}

/* A walk of the outer frames by their call frame information (outer_walk). */
typedef struct outer {
  size_t m;                     /* frames beyond `ret` */
  bool cacheable;               /* they depend on the stack from rec up to `end` only */
  bool slots;                   /* ... and on the words at rec + slot[i] only */
  uintptr_t end;                /* cacheable: above the highest byte they depend on */
  uint32_t slot[BOTTOM_FRAMES]; /* slots: offsets from rec, growing with i */
} outer_t;

/* Whether the words at w->at[k..k + 4) differ from the frames read there, which go to
 * out[0..4) meanwhile. */
STACK_WORDS_READER static CTS_FORCE_INLINE bool four_words_differ(const cts__walk_t *w, size_t k,
                                                                  uint64_t *out) {
  const uint64_t f0 = w->frames[k + 1u], f1 = w->frames[k + 2u];
  const uint64_t f2 = w->frames[k + 3u], f3 = w->frames[k + 4u];
  out[0] = f0;
  out[1] = f1;
  out[2] = f2;
  out[3] = f3;
  return ((stack_word(w->at[k]) ^ f0) | (stack_word(w->at[k + 1u]) ^ f1) |
          (stack_word(w->at[k + 2u]) ^ f2) | (stack_word(w->at[k + 3u]) ^ f3)) != 0;
}

/* Whether the words the last walk's outermost frames, its entries 0..q, read their return
 * addresses from and the saved %rbp words that their %rbp-based CFAs depend on still hold
 * them. Their frames, innermost first, go to out[0..q] meanwhile (the splice's copy: out
 * has room for them, and a walk that does not rejoin here writes its own frames over
 * them): the words compared are the ones copied. */
STACK_WORDS_READER static CTS_FORCE_INLINE bool stack_words_at_equal(const cts__walk_t *w, size_t q,
                                                                     uint64_t *out) {
  /* (~18 return addresses for each of cc1's walks: unrolled by hand, 4 words a step, as
   * gcc does not once this is inlined: ~6 instructions a word with the copy. A candidate
   * that fails, on cc1 one walk in four trying one before the one it rejoins, stops at the
   * first step that differs instead of reading every word beyond it: cc1 -17 instructions
   * a walk, a walk that never fails +17 (walk_instructions_per_rejoined_walk).) */
  size_t k = WALK_FRAMES - 1u - q, j = 0;
  uint64_t diff = 0;
  if (CTS_LIKELY(q >= 3u)) {
    /* steps of four words before the last four, which a step of its own takes whole (some
     * compared again): no loop of one word a step whose count differs from walk to walk */
    for (; k + 4u < WALK_FRAMES; k += 4u, j += 4u)
      if (four_words_differ(w, k, out + j)) return false;
    if (four_words_differ(w, WALK_FRAMES - 4u, out + q - 3u)) return false;
  } else {
    for (; k < WALK_FRAMES; k++, j++) {
      out[j] = w->frames[k + 1u];
      diff |= stack_word(w->at[k]) ^ out[j];
    }
  }
  for (size_t f = 0, n = w->nfeed[q]; f < n; f++) diff |= stack_word(w->fat[f]) ^ w->fval[f];
  return diff == 0;
}

/* Makes the last walk the `rest` outermost frames of the last one (its entries 0..rest,
 * kept where they are) and, inwards from them, the `own` frames of b->own, the innermost
 * at address pc: entries rest..rest + own, innermost last, with rsp covering each frame and
 * all beyond it. */
static CTS_FORCE_INLINE void walk_keep(cts__bottom_t *b, size_t rest, size_t own, uintptr_t pc) {
  cts__walk_t *const w = &b->walk;
  const cts__own_t *const s = &b->own;
  size_t nfeed = rest ? w->nfeed[rest - 1u] : 0;
  bool pending = rest && w->pending[rest - 1u], outer_rsp = rest == 0 || w->rsp[rest - 1u];
  for (size_t p = rest, j = own; j-- > 0; p++) {
    w->sp[p] = s->sp[j];
    w->rbp[p] = s->rbp[j];
    w->rbp_known[p] = s->rbp_known[j];
    w->at[WALK_FRAMES - 1u - p] = s->at[j];
    w->frames[WALK_FRAMES - p] = s->frames[j];
    if (s->sat[j]) { /* the %rbp of the entries outwards up to the previous saver */
      if (pending) {
        w->fat[nfeed] = s->sat[j];
        w->fval[nfeed] = s->sval[j];
        nfeed++;
      }
      pending = false;
    }
    pending |= !s->rsp[j];
    w->pending[p] = pending;
    w->nfeed[p] = (uint8_t)nfeed;
    outer_rsp = s->rsp[j] && outer_rsp;
    w->rsp[p] = outer_rsp;
  }
  w->m = rest + own;
  w->frames[WALK_FRAMES - w->m] = pc; /* (with no frame of its own: the same already) */
}

/* outer_walk's end when its frame i is the last walk's entry rest - 1 (same stack pointer,
 * address and words beyond): the rest of the frames are the last walk's. Not kept in the
 * outer-frame cache: the next walk rejoins this one as cheaply as the cache would serve
 * it, and filling the cache would copy the frames once more. */
static CTS_FORCE_INLINE bool splice_last_walk(cts__thread_t *t, cts__bottom_t *b, outer_t *o,
                                              size_t i, size_t rest, uintptr_t pc) {
  /* (its frames, entries rest - 1 .. 0, are in place: stack_words_at_equal copied them) */
  o->m = i + rest;
  o->cacheable = false;
  walk_keep(b, rest, i, pc);
  t->unwind_spliced++;
  return true;
}

/* outer_walk's end, its frames own[0..m) (m <= BOTTOM_FRAMES) walked from the record at
 * rec, the outermost one's stack pointer sp: the stack they depend on (o->end, o->slot;
 * computed here, not frame by frame, since a walk that rejoins the last one needs
 * neither), and whether it fits in the outer-frame cache. */
static bool outer_extent(const cts__own_t *own, uintptr_t rec, uintptr_t sp, uintptr_t stack_hi,
                         size_t m, outer_t *o) {
  uintptr_t high = rec + 2 * sizeof(uintptr_t); /* above the highest word read */
  for (size_t j = 0; j < m; j++) {
    o->slot[j] = (uint32_t)(own->at[j] - rec);
    if (own->at[j] + 8u > high) high = own->at[j] + 8u;
    if (own->sat[j] && own->sat[j] + 8u > high) high = own->sat[j] + 8u;
  }
  /* libunwind's last step reads a little beyond the outermost frame's stack pointer */
  o->end = sp + BOTTOM_MARGIN > high ? sp + BOTTOM_MARGIN : high;
  if (o->end > stack_hi) o->end = stack_hi;
  return o->end <= rec + BOTTOM_BYTES;
}

/* Keeps outer_walk's frame i in cur: its stack pointer, the %rbp its rules were applied to
 * (if known), where its return address `word` was read, where the caller's %rbp (rbp_out)
 * was read (0: not read) and whether its CFA is %rsp-based. */
static CTS_FORCE_INLINE void own_frame(cts__own_t *cur, size_t i, uintptr_t sp, uintptr_t rbp,
                                       bool rbp_known, uintptr_t at, uint64_t word,
                                       uintptr_t saved_at, uint64_t rbp_out, bool rsp) {
  cur->sp[i] = sp;
  cur->rbp[i] = rbp;
  cur->rbp_known[i] = rbp_known;
  cur->at[i] = at;
  cur->frames[i] = word;
  cur->sat[i] = saved_at;
  cur->sval[i] = rbp_out;
  cur->rsp[i] = rsp;
}

/* Follows the call frame information from the return address `ret` read from the frame
 * record at `rec` (its frame: stack pointer rec + 16, %rbp saved at rec), as libunwind
 * does: each function's CFA must be %rsp or %rbp plus a constant, its return address
 * saved at CFA - 8, %rbp saved on the stack or left alone, up to a function whose return
 * address is undefined (_start, clone3: where libunwind stops). With `known`, frames[0..
 * o->m) are libunwind's and each return address read must be one of them; else the walk
 * writes them (at most max). Every word a frame's rules read lies between its stack pointer
 * and the top of the stack. ret_set: ret - 1's set in the rule cache (hashed once, for the
 * caller's prefetch and for this walk: 9 instructions a walk).
 * False when a rule is anything else (expressions, signal frames, no rules: libunwind
 * knows more) or a return address is not plausible. Then o says what the frames depend on:
 * if every word read is within BOTTOM_BYTES of rec and there are at most BOTTOM_FRAMES, on
 * the stack up to o->end, and if every CFA is %rsp plus a constant, on their m return
 * addresses' words only (o->slot).
 *
 * Splice: consecutive allocations differ in their inner frames and share their outer ones
 * (main, the interpreter's loop...). When this walk reaches a frame the previous one went
 * through, at the same stack pointer and address, what remains depends only on the words
 * it and the frames beyond read their return addresses from if their CFAs are %rsp plus a
 * constant, else on %rbp there too and the words they read the callers' %rbp from: if
 * those are as they were, the rest of the previous walk is this one's, without looking up
 * a rule. (Only if the last walk was made under the same stack top: the cache may have been
 * another thread's.) */
static CTS_FORCE_INLINE bool outer_walk(cts__thread_t *t, cts__bottom_t *b, uintptr_t rec,
                                        uint64_t ret, cts__rule_t *ret_set, uint64_t *frames,
                                        bool known, size_t max, outer_t *o) {
  const uintptr_t top = t->stack_hi - 8u; /* the highest word that may be read */
  uintptr_t sp = rec + 2 * sizeof(uintptr_t), pc = (uintptr_t)ret, rbp = stack_word(rec);
  bool rbp_known = true;
  o->slots = true;
  const cts__walk_t *const prev = &b->walk;
  cts__own_t *const cur = &b->own;
  /* prev's entries 0..rest have stack pointers not below sp; none if it was made under
   * another stack top (the cache may have been another thread's) */
  size_t rest = prev->stack_hi == t->stack_hi ? prev->m : 0;
  cts__rule_t *set = ret_set; /* pc's set in the rule cache */
  /* The frames a RULE_RSP_STEP frame may be: not the last one (known: the frame whose
   * return address must be undefined; else the one past max) and kept in cur. */
  const size_t last = known ? o->m : max;
  const size_t step_limit = last < WALK_FRAMES ? last : WALK_FRAMES;
  for (size_t i = 0;; i++) {
    if (!known && i < WALK_FRAMES) {
      while (rest > 0 && prev->sp[rest - 1u] < sp) rest--;
      const size_t q = rest - 1u; /* the candidate: prev's innermost frame left */
      if (rest > 0 && prev->sp[q] == sp && prev->frames[WALK_FRAMES - 1u - q] == pc &&
          (prev->rsp[q] || (rbp_known && prev->rbp_known[q] && prev->rbp[q] == rbp)) &&
          i + rest <= max && i + rest <= WALK_FRAMES && stack_words_at_equal(prev, q, frames + i))
        return splice_last_walk(t, b, o, i, rest, (uintptr_t)ret);
    }
    const cts__rule_t *const e = cached_frame_rules(t, set, pc - 1u);
    if (!e) return false;
    const cts__rule_t rule = *e; /* (the next look-up may overwrite *e) */
    if (CTS_LIKELY((rule.kinds & RULE_RSP_STEP) && i < step_limit)) {
      /* The return address at CFA - 8 and the saved %rbp, if any, lie in [sp, CFA - 8]
       * (RULE_RSP_STEP): what the tests below come to for such a frame. */
      const uintptr_t cfa = sp + (uintptr_t)(intptr_t)rule.cfa_off, at = cfa - 8u;
      if (at > top) return false;
      const uint64_t word = stack_word(at);
      if (known ? word != frames[i] : word == 0 || word >= ((uint64_t)1 << 62)) return false;
      frames[i] = word;
      set = rule_set(b, (uintptr_t)word - 1u);
      __builtin_prefetch(set);
      const uintptr_t rbp_in = rbp;
      uintptr_t saved_at = 0;
      if ((rule.kinds & 3u) == CFI_RULE_SAVED) {
        saved_at = cfa + (uintptr_t)(intptr_t)rule.rbp_off;
        rbp = stack_word(saved_at);
      }
      own_frame(cur, i, sp, rbp_in, rbp_known, at, word, saved_at, rbp, true);
      sp = cfa;
      pc = (uintptr_t)word;
      continue;
    }
    const bool ra_undefined = (rule.kinds >> 2 & 3u) == CFI_RULE_UNDEFINED;
    if (known ? i == o->m : ra_undefined) {
      if (!ra_undefined) return false;
      o->m = i;
      o->cacheable = i <= BOTTOM_FRAMES && outer_extent(cur, rec, sp, t->stack_hi, i, o);
      if (!known && i <= WALK_FRAMES) {
        b->walk.stack_hi = t->stack_hi;
        walk_keep(b, 0, i, (uintptr_t)ret);
      }
      return true;
    }
    if (!known && i == max) return false; /* libunwind cuts it where it should */
    /* (a frame larger than the cache holds is walked all the same: `end` says so) */
    if (!(rule.kinds & RULE_STEP)) return false;
    uintptr_t base;
    if (rule.cfa_reg == DW_REG_RSP) {
      base = sp;
    } else if (rbp_known) { /* DW_REG_RBP: the cache holds no other register */
      base = rbp;
      o->slots = false;
    } else {
      return false;
    }
    const uintptr_t cfa = base + (uintptr_t)(intptr_t)rule.cfa_off, at = cfa - 8u;
    /* (a return address below the frame's stack pointer: not a call's) */
    if (at < sp || at > top) return false;
    const uint64_t word = stack_word(at);
    if (known ? word != frames[i] : word == 0 || word >= ((uint64_t)1 << 62)) return false;
    frames[i] = word;
    /* The next frame's rules: the program's own data has usually pushed them out of the
     * caches since the last allocation; loaded while this frame's bookkeeping and the
     * next splice check run. */
    set = rule_set(b, (uintptr_t)word - 1u);
    __builtin_prefetch(set);
    uintptr_t saved_at = 0;
    const uintptr_t rbp_in = rbp;
    const bool rbp_known_in = rbp_known;
    const unsigned rbp_kind = rule.kinds & 3u;
    if (rbp_kind == CFI_RULE_SAVED) {
      const uintptr_t saved = cfa + (uintptr_t)(intptr_t)rule.rbp_off;
      if (saved < sp || saved > top) return false;
      rbp = stack_word(saved);
      saved_at = saved;
    } else if (rbp_kind != CFI_RULE_OTHER) {
      rbp_known = false;
    }
    if (i < WALK_FRAMES)
      own_frame(cur, i, sp, rbp_in, rbp_known_in, at, word, saved_at, rbp,
                rule.cfa_reg == DW_REG_RSP);
    sp = cfa;
    pc = (uintptr_t)word;
  }
}

/* outer_walk with frames known (outer_frames_rest): the per-frame tests of `known` go. */
static CTS_NOINLINE bool outer_walk_known(cts__thread_t *t, cts__bottom_t *b, uintptr_t rec,
                                          uint64_t ret, uint64_t *frames, outer_t *o) {
  return outer_walk(t, b, rec, ret, rule_set(b, ret - 1u), frames, true, 0, o);
}

/* outer_frames' end when outer_walk could not unwind the frames beyond out[0..n) (ok false)
 * or unwound them into o, cacheable: libunwind's frames, and the outer-frame cache's
 * refill. Out of line: most walks rejoin the last one and need neither. */
static CTS_NOINLINE size_t outer_frames_rest(cts__thread_t *t, uintptr_t rec, uint64_t *out,
                                             size_t n, size_t max, cts__bottom_t *b, bool ok,
                                             outer_t *o) {
  size_t k = 0;
  if (ok) {
    k = n + o->m;
  } else {
    const uintptr_t site = (uintptr_t)out[0]; /* the hook's return address */
    uint64_t walked[BOTTOM_FRAMES];
    const bool comparable = n <= BOTTOM_FRAMES;
    if (comparable) memcpy(walked, out, n * sizeof *out);
    k = backtrace_from(site, out, max);
    if (k == 0) { /* libunwind could not: what the frame pointers gave */
      if (comparable) memcpy(out, walked, n * sizeof *out);
      return comparable ? n : 0;
    }
    /* Keep the outer frames when libunwind agrees with the walk and the rules explain them. */
    if (!b || !comparable || k < n || memcmp(out, walked, n * sizeof *out) != 0) return k;
    o->m = k - n;
    if (o->m > BOTTOM_FRAMES || !outer_walk_known(t, b, rec, out[n - 1], out + n, o)) return k;
  }
  if (o->cacheable) {
    b->ret = 0; /* never matches while it is rewritten */
    b->rec = rec;
    b->nframes = o->m;
    memcpy(b->frames, out + n, b->nframes * sizeof *out);
    b->slots = o->slots;
    if (o->slots) {
      memcpy(b->slot, o->slot, b->nframes * sizeof *o->slot);
      b->len = b->nframes ? o->slot[b->nframes - 1] + 8u : 0; /* the last slot is the highest */
    } else {
      b->len = o->end - rec;
      stack_copy(b->bytes, rec, b->len);
    }
    b->ret = out[n - 1];
  }
  return k;
}

/* out[0..n) came from frame records of frame-pointer code; the last return address, read
 * from the record at `rec`, leads into code without frame pointers. The frames beyond it
 * depend only on that return address, the stack pointer (rec + 16), %rbp (saved at rec)
 * and the stack above, often only on a few words of it (outer_walk): if those are as when
 * they were last unwound for this thread, they are reused. Else they are unwound again:
 * by their call frame information when its rules are simple (outer_walk: most code,
 * without a system call), else by libunwind. Inline, with outer_walk: a call less per
 * allocation on the common path. */
static CTS_FORCE_INLINE size_t outer_frames(cts__thread_t *t, uintptr_t rec, uint64_t *out,
                                            size_t n, size_t max, cts__bottom_t *b,
                                            cts__rule_t *ret_set) {
  if (b && b->ret == out[n - 1] && b->rec == rec && b->len <= t->stack_hi - rec &&
      (b->slots ? stack_words_equal(b->frames, b->slot, b->nframes, rec)
                : stack_equal(b->bytes, rec, b->len))) {
    const size_t k = b->nframes < max - n ? b->nframes : max - n;
    memcpy(out + n, b->frames, k * sizeof *out);
    t->unwind_cached++;
    t->unwind_cached_slots += b->slots;
    return n + k;
  }
  t->unwind_full++;
  outer_t o;
  const bool ok = b && n <= BOTTOM_FRAMES &&
                  outer_walk(t, b, rec, out[n - 1], ret_set, out + n, false, max - n, &o);
  if (CTS_LIKELY(ok && !o.cacheable)) return n + o.m;
  return outer_frames_rest(t, rec, out, n, max, b, ok, &o);
}

/* The mixed walk from the hook's frame `frame`, the stack it starts on beginning at lo (the
 * walk's own frame there). */
static CTS_FORCE_INLINE size_t unwind_mixed_from(cts__thread_t *t, uintptr_t lo, uintptr_t frame,
                                                 uint64_t *out, size_t max, cts__bottom_t *bottom) {
  uintptr_t fp = frame;
  if (t->stack_state != 1 || t->stack_hi < lo + 2 * sizeof(uintptr_t) || fp < lo ||
      fp > t->stack_hi - 2 * sizeof(uintptr_t))
    return cts__unwind_libunwind(t, frame, out, max);
  const uintptr_t top = t->stack_hi - 2 * sizeof(uintptr_t);
  size_t n = 0;
  uintptr_t trusted = 0; /* the last return address found to keep frame pointers */
  while (n < max) {
    const uintptr_t *const f = (const uintptr_t *)fp;
    const uintptr_t next = f[0], ret = f[1];
    if (bad_return(ret)) break;
    out[n++] = ret;
    /* The next record belongs to the function `ret` returns into: trusted only if that
     * function keeps frame pointers. */
    if (ret != trusted) {
      if (!keeps_frame_pointers(ret)) {
        /* The rules outer_walk looks up first: fetched while the outer-frame cache is
         * checked. (Not before the verdict: code with frame pointers never needs them.) */
        cts__rule_t *const ret_set = bottom ? rule_set(bottom, ret - 1u) : NULL;
        __builtin_prefetch(ret_set);
        return cut_own_frames(out, outer_frames(t, fp, out, n, max, bottom, ret_set));
      }
      trusted = ret;
    }
    if (next - fp - 1u >= top - fp) break;
    fp = next;
  }
  t->unwind_walked++;
  return cut_own_frames(out, n);
}

static void mixed_on_walk_stack(void *call) {
  walk_call_t *const c = call;
  c->n = unwind_mixed_from(c->t, c->lo, c->frame, c->out, c->max, c->bottom);
}

size_t cts__unwind_mixed(cts__thread_t *t, uintptr_t frame, uint64_t *out, size_t max,
                         cts__bottom_t *bottom) {
  if (t->stack_state == 0) find_stack_top(t);
  const uintptr_t lo = (uintptr_t)__builtin_frame_address(0);
  /* Below the thread's stack (stack_lo is 0 when it is not known): a walk that starts above
   * it goes to cts__unwind_libunwind below, which tests for itself. One compare. */
  if (CTS_UNLIKELY(lo < t->stack_lo)) {
    walk_call_t call = {.t = t, .frame = frame, .lo = lo, .out = out, .max = max, .bottom = bottom};
    if (cts__call_on_walk_stack(mixed_on_walk_stack, &call)) return call.n;
  }
  return unwind_mixed_from(t, lo, frame, out, max, bottom);
}

bool cts__unwind_mixed_available(void) {
  return true;
}

bool cts__unwind_keeps_frame_pointers(uintptr_t ret) {
  return keeps_frame_pointers(ret);
}

#endif /* x86-64 with _dl_find_object */
#endif /* CTS_HAVE_LIBUNWIND */

#ifndef CTS_HAVE_MIXED
size_t cts__unwind_mixed(cts__thread_t *t, uintptr_t frame, uint64_t *out, size_t max,
                         cts__bottom_t *bottom) {
  (void)bottom;
#ifdef CTS_HAVE_LIBUNWIND
  return cts__unwind_libunwind(t, frame, out, max);
#else
  return cts__unwind_fp(t, frame, out, max);
#endif
}

bool cts__unwind_mixed_available(void) {
  return false;
}

bool cts__unwind_keeps_frame_pointers(uintptr_t ret) {
  (void)ret;
  return false;
}
#endif
