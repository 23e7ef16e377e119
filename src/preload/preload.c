/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so: traces an unmodified program's heap allocations into a memtrace
 * trace. LD_PRELOAD it (or use `ctfscope record`), with the memtrace environment:
 *
 *   MEMTRACE=FILE         trace into FILE (unset or empty: the library stays inert)
 *   MEMTRACE=tcp://HOST:PORT       stream the trace to a collector (`ctfscope collect`)
 *   MEMTRACE=listen://[ADDR:]PORT  serve it to one client at a time (`ctfscope fetch`)
 *   MEMTRACE_RATE=R       sampling rate per 8-byte word, 0 < R <= 1 (default 1e-6)
 *   MEMTRACE_CONTEXT=TXT  free text stored in the trace
 *   MEMTRACE_DROP=1       drop mode: never wait for a slow sink, record the loss
 *   CTFSCOPE_UNWIND=M     backtraces: mixed (default), fp, libunwind or none
 *   CTFSCOPE_WRITER=W     where the trace is encoded and written: process (default for
 *                         files and tcp://, see tracer.h "The writer process") or thread
 *   CTFSCOPE_COMPRESS=C   zstd (level 3), zstd:LEVEL (1-19) or none (default): the writer
 *                         compresses a file trace (tracer.h, "Compression")
 *   CTFSCOPE_STALL_TIMEOUT=S  tcp:// and listen://: seconds a peer may take nothing before
 *                         tracing stops (default 5; 0: wait for ever; tracer.h "TCP sinks")
 *
 * A bad setting, or a collector that cannot be reached, prints one line on stderr and
 * leaves the program untraced and otherwise untouched. MEMTRACE is removed from the
 * environment once read (memtrace does the same), so forked children and what they exec
 * are not traced; a forked child is not traced (tracer.h). When the traced process itself
 * execs, the exec family flushes the trace and hands the new image the settings, with
 * the next file name (trace.execN.ctf) in MEMTRACE and CTFSCOPE_EXEC_BASE/_INDEX saying
 * where the sequence started (tracer.h, "Processes"). dlclose flushes before unloading a
 * library.
 *
 * The hooks never allocate themselves. Real functions are found lazily with
 * dlsym(RTLD_NEXT); dlsym's own calloc during that lookup is served from a static arena
 * that free/realloc recognise (its blocks carry a tag, like sampled blocks). Sampled blocks
 * carry a 16-byte header in front of the program's pointer ("sampled blocks carry a
 * header" below), which free, realloc and malloc_usable_size take into account. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "../tracer/exec_name.h"
#include "../tracer/zsink.h"
#include "../tracer/tracer_internal.h"
#include "os/net.h"
#include "preload_internal.h"

#define EXPORT         __attribute__((visibility("default")))
#define MESSAGE_PREFIX "ctfscope-preload: "

extern char **environ;

/* ---- the real functions ----------------------------------------------------------------- */

static void free_unresolved(void *p);

static struct {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void *);
  int (*execve)(const char *, char *const[], char *const[]);
  int (*execvpe)(const char *, char *const[], char *const[]);
  int (*dlclose)(void *);
} real = {.free = free_unresolved};

static CTS__TLS int in_dlsym; /* this thread is looking up the real functions */

static void message(const char *text) {
  const size_t n = strlen(text);
  if (write(STDERR_FILENO, text, n) < 0) { /* nothing better to do */
  }
}

/* ---- sampled blocks carry a header --------------------------------------------------------
 * A sampled block is allocated HEADER bytes larger (more for alignments above 16), and the
 * program gets the address past the header. The header's first word, the tag, is
 * tag_key ^ (its own address); the second packs the object id, the session that sampled
 * the block and where the real block starts. free(p) recognises a sampled block by one
 * load and compare of p[-16] (glibc's chunk header is in the same cache line), so that
 * neither the unsampled nor the sampled free looks anything up. tag_key is random per
 * process: no data can be mistaken for a tag by chance, and a tag is cleared before its
 * block is freed, so stale memory never matches. The real allocator must keep the 16 bytes
 * before each of its blocks readable, as glibc's (a chunk header) does. */
#define HEADER      16u
#define SHIFT_BITS  6u  /* the real block starts HEADER << shift bytes before p */
#define SHIFT_ARENA 63u /* a block of the static arena, never freed */
#define ID_SHIFT    (SHIFT_BITS + CTS__TRACER_SESSION_BITS)

typedef struct header {
  uint64_t tag;
  uint64_t info; /* shift | session << SHIFT_BITS | id << ID_SHIFT (arena: size << 6) */
} header_t;

_Static_assert(ID_SHIFT + 40 == 64, "the id keeps 40 bits");

/* Any value until resolve_real_functions() sets it, always before the first tag. */
static uint64_t tag_key = 0x6a09e667f3bcc908ull;

static CTS_FORCE_INLINE uint64_t tag_of(uintptr_t header) {
  return tag_key ^ header;
}

/* Whether p (non-NULL, from malloc and friends) is a sampled block or an arena block. */
static CTS_FORCE_INLINE bool is_tagged(const void *p) {
  const uintptr_t h = (uintptr_t)p - HEADER;
  uint64_t tag;
  __builtin_memcpy(&tag, (const void *)h, sizeof tag); /* inline despite -fno-builtin */
  return tag == tag_of(h);
}

static header_t header_of(const void *p) {
  header_t h;
  __builtin_memcpy(&h, (const unsigned char *)p - HEADER, sizeof h);
  return h;
}

static void set_header(void *p, uint64_t info) {
  const header_t h = {tag_of((uintptr_t)p - HEADER), info};
  __builtin_memcpy((unsigned char *)p - HEADER, &h, sizeof h);
}

static void clear_tag(void *p) {
  const uint64_t zero = 0;
  __builtin_memcpy((unsigned char *)p - HEADER, &zero, sizeof zero);
}

static unsigned shift_of(uint64_t info) {
  return (unsigned)(info & ((1u << SHIFT_BITS) - 1u));
}

/* Where the real block of a (non-arena) tagged block starts. */
static void *real_block_of(void *p, uint64_t info) {
  return (unsigned char *)p - ((size_t)HEADER << shift_of(info));
}

/* ---- the static arena for allocations made while dlsym runs. Never reused or freed. ---- */
#define ARENA_SIZE 65536u
static _Alignas(64) unsigned char arena[ARENA_SIZE];
static size_t arena_used;

static void *arena_alloc(size_t size, size_t align) {
  if (align < HEADER) align = HEADER;
  if (size > ARENA_SIZE || (align & (align - 1)) != 0) return NULL;
  size_t used = __atomic_load_n(&arena_used, __ATOMIC_RELAXED), start;
  do {
    start = (used + HEADER + align - 1) & ~(align - 1);
    if (start + size > ARENA_SIZE) {
      errno = ENOMEM;
      return NULL;
    }
  } while (!__atomic_compare_exchange_n(&arena_used, &used, start + size, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  set_header(arena + start, SHIFT_ARENA | (uint64_t)size << SHIFT_BITS);
  return arena + start; /* zero: the arena is never reused */
}

#define RESOLVE(field, name)                   \
  do {                                         \
    void *const sym_ = dlsym(RTLD_NEXT, name); \
    memcpy(&real.field, &sym_, sizeof sym_);   \
  } while (0)

static CTS_NOINLINE void resolve_real_functions(void) {
  /* The tag key first (arena blocks are tagged). The same in every thread that gets here
   * at once: the kernel's random bytes of this process, and where this library is. */
  const unsigned char *const random = (const unsigned char *)getauxval(AT_RANDOM);
  uint64_t key = 0x6a09e667f3bcc908ull ^ (uintptr_t)&tag_key;
  if (random) {
    uint64_t r;
    memcpy(&r, random + 8, sizeof r); /* the first 8 are glibc's stack protector's */
    key ^= r;
  }
  key = (key ^ (key >> 31)) * 0xbf58476d1ce4e5b9ull;
  tag_key = (key ^ (key >> 29)) | 1u;
  in_dlsym++;
  RESOLVE(free, "free");
  RESOLVE(calloc, "calloc");
  RESOLVE(realloc, "realloc");
  RESOLVE(posix_memalign, "posix_memalign");
  RESOLVE(aligned_alloc, "aligned_alloc");
  RESOLVE(memalign, "memalign");
  RESOLVE(valloc, "valloc");
  RESOLVE(pvalloc, "pvalloc");
  RESOLVE(malloc_usable_size, "malloc_usable_size");
  RESOLVE(execve, "execve");
  RESOLVE(execvpe, "execvpe");
  RESOLVE(dlclose, "dlclose");
  RESOLVE(malloc, "malloc"); /* last: its being set means all are */
  in_dlsym--;
  if (!real.malloc || !real.free || !real.calloc || !real.realloc || !real.memalign) {
    message(MESSAGE_PREFIX
            "cannot find the real malloc, free, calloc, realloc or memalign; aborting\n");
    abort();
  }
}

/* True when the caller must use the arena (this thread is inside dlsym). */
static inline int need_real(void) {
  if (CTS_LIKELY(real.malloc != NULL)) return 0;
  if (in_dlsym) return 1;
  resolve_real_functions();
  return 0;
}

/* real.free before the real functions are known: free does not test for it. */
static CTS_NOINLINE void free_unresolved(void *p) {
  if (!p || need_real() || real.free == free_unresolved) return;
  real.free(p);
}

/* ---- allocation hooks ------------------------------------------------------------------------
 * The fast path of every hook is inline: malloc-like hooks test the thread's sampling
 * countdown (cts__tracer_skip) and call the real function; free tests the tag. All the
 * rest (sampled blocks, start-up) is out of line. */

/* Tags the sampled block whose real block starts at q, `offset` bytes before the pointer
 * returned, and records it. */
static CTS_FORCE_INLINE void *sampled_block(void *q, size_t offset, size_t size, uint64_t nsamples,
                                            void *frame) {
  unsigned char *const p = (unsigned char *)q + offset;
  unsigned session;
  uint64_t id = cts__tracer_record(p, size, nsamples, frame, &session, false);
  if (id > CTS__TRACER_NO_ID) id = CTS__TRACER_NO_ID;
  const unsigned shift = (unsigned)__builtin_ctzll(offset / HEADER);
  set_header(p, shift | (uint64_t)session << SHIFT_BITS | id << ID_SHIFT);
  return p;
}

/* Records the free of tagged block p (its header `info`) and clears its tag. */
static void untag(void *p, uint64_t info) {
  clear_tag(p);
  cts__tracer_record_free(info >> ID_SHIFT,
                          (unsigned)(info >> SHIFT_BITS) & CTS__TRACER_SESSION_MASK);
}

/* A sampled block of `size` bytes with a HEADER-byte header (any alignment up to 16). */
static CTS_FORCE_INLINE void *alloc_sampled(size_t size, uint64_t nsamples, bool zero,
                                            void *frame) {
  if (size > SIZE_MAX - HEADER) {
    errno = ENOMEM;
    return NULL;
  }
  void *const q = zero ? real.calloc(1, size + HEADER) : real.malloc(size + HEADER);
  return q ? sampled_block(q, HEADER, size, nsamples, frame) : NULL;
}

/* A sampled block aligned to `align` (a power of two). */
static CTS_FORCE_INLINE void *alloc_sampled_aligned(size_t align, size_t size, uint64_t nsamples,
                                                    void *frame) {
  if (align <= HEADER) return alloc_sampled(size, nsamples, false, frame);
  if (size > SIZE_MAX - align) {
    errno = ENOMEM;
    return NULL;
  }
  void *const q = real.memalign(align, size + align);
  return q ? sampled_block(q, align, size, nsamples, frame) : NULL;
}

static CTS_NOINLINE void *malloc_slow(size_t size, void *frame) {
  if (need_real()) return arena_alloc(size, 16);
  const uint64_t nsamples = cts__tracer_sample_slow(size);
  if (!nsamples) return real.malloc(size);
  return alloc_sampled(size, nsamples, false, frame);
}

/* Sampling implies that the real functions are known: only the idle path tests them. */
EXPORT void *malloc(size_t size) {
  const unsigned session = cts__tracer_session();
  if (CTS_LIKELY(!session)) {
    void *(*const m)(size_t) = real.malloc;
    if (CTS_LIKELY(m != NULL)) return m(size);
  } else if (CTS_LIKELY(cts__tracer_countdown(size, session))) {
    return real.malloc(size);
  }
  return malloc_slow(size, __builtin_frame_address(0));
}

/* free of a tagged block: an arena block (kept) or a sampled one. */
static CTS_NOINLINE void free_tagged(void *p) {
  const header_t h = header_of(p);
  if (shift_of(h.info) == SHIFT_ARENA) return;
  untag(p, h.info);
  real.free(real_block_of(p, h.info));
}

EXPORT void free(void *p) {
  if (CTS_LIKELY(p != NULL) && CTS_UNLIKELY(is_tagged(p))) {
    free_tagged(p);
    return;
  }
  real.free(p); /* free_unresolved until the real functions are known */
}

/* C23's sized frees (glibc 2.39 and later): a sampled block must not reach the real ones.
 * Declared here: older headers do not. */
EXPORT void free_sized(void *p, size_t size);
EXPORT void free_aligned_sized(void *p, size_t align, size_t size);

EXPORT void free_sized(void *p, size_t size) {
  (void)size;
  free(p);
}

EXPORT void free_aligned_sized(void *p, size_t align, size_t size) {
  (void)align, (void)size;
  free(p);
}

static CTS_NOINLINE void *calloc_slow(size_t n, size_t size, size_t total, void *frame) {
  if (need_real()) return arena_alloc(total, 16);
  const uint64_t nsamples = cts__tracer_sample_slow(total);
  if (!nsamples) return real.calloc(n, size);
  return alloc_sampled(total, nsamples, true, frame);
}

EXPORT void *calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  const unsigned session = cts__tracer_session();
  if (CTS_LIKELY(!session)) {
    void *(*const c)(size_t, size_t) = real.calloc;
    if (CTS_LIKELY(c != NULL)) return c(n, size);
  } else if (CTS_LIKELY(cts__tracer_countdown(total, session))) {
    return real.calloc(n, size);
  }
  return calloc_slow(n, size, total, __builtin_frame_address(0));
}

/* The usable size of a tagged block (what the program may use). */
static size_t tagged_usable_size(void *p, uint64_t info) {
  if (shift_of(info) == SHIFT_ARENA) return (size_t)(info >> SHIFT_BITS);
  const size_t offset = (size_t)HEADER << shift_of(info);
  const size_t n = real.malloc_usable_size ? real.malloc_usable_size(real_block_of(p, info)) : 0;
  return n > offset ? n - offset : 0;
}

/* realloc is recorded as the free of the old block (if sampled), then an allocation of the
 * new size sampled afresh. The free is recorded before the real call: if realloc then
 * fails, the still-valid old block is reported freed (a rare, documented inexactness). */

/* realloc of an untagged block (or NULL) into a sampled one: the real realloc with room
 * for the header, then the data moves up behind it. */
static void *realloc_into_sampled(void *old, size_t size, uint64_t nsamples, void *frame) {
  if (!old) return alloc_sampled(size, nsamples, false, frame);
  if (size > SIZE_MAX - HEADER) {
    errno = ENOMEM;
    return NULL;
  }
  unsigned char *const q = real.realloc(old, size + HEADER);
  if (!q) return NULL;
  memmove(q + HEADER, q, size);
  return sampled_block(q, HEADER, size, nsamples, frame);
}

/* realloc of tagged block `old`. */
static void *realloc_tagged(void *old, size_t size, void *frame) {
  const header_t h = header_of(old);
  const unsigned shift = shift_of(h.info);
  if (size == 0) { /* glibc's realloc(p, 0): frees p, returns NULL */
    if (shift != SHIFT_ARENA) free_tagged(old);
    return NULL;
  }
  const size_t old_size = tagged_usable_size(old, h.info);
  if (shift == SHIFT_ARENA && need_real()) {
    void *const p = arena_alloc(size, 16);
    if (p) memcpy(p, old, old_size < size ? old_size : size);
    return p;
  }
  const uint64_t nsamples = cts__tracer_skip(size) ? 0 : cts__tracer_sample_slow(size);
  if (shift != 0) {
    /* From the arena (never freed), or aligned: a new block and a copy. */
    void *const p = nsamples ? alloc_sampled(size, nsamples, false, frame) : real.malloc(size);
    if (!p) return NULL;
    memcpy(p, old, old_size < size ? old_size : size);
    if (shift != SHIFT_ARENA) free_tagged(old);
    return p;
  }
  void *const q = real_block_of(old, h.info);
  const uint64_t unrecorded = h.info | CTS__TRACER_NO_ID << ID_SHIFT;
  untag(old, h.info);
  if (size > SIZE_MAX - HEADER) {
    set_header(old, unrecorded);
    errno = ENOMEM;
    return NULL;
  }
  unsigned char *const q2 = real.realloc(q, size + HEADER);
  if (!q2) { /* the old block lives on, its free no longer recorded */
    set_header(old, unrecorded);
    return NULL;
  }
  if (nsamples) return sampled_block(q2, HEADER, size, nsamples, frame);
  memmove(q2, q2 + HEADER, size); /* the block keeps its HEADER spare bytes at the end */
  return q2;
}

static CTS_NOINLINE void *realloc_slow(void *old, size_t size, void *frame) {
  if (old && is_tagged(old)) return realloc_tagged(old, size, frame);
  if (need_real()) return arena_alloc(size, 16);
  const uint64_t nsamples = cts__tracer_sample_slow(size);
  if (!nsamples) return real.realloc(old, size);
  return realloc_into_sampled(old, size, nsamples, frame);
}

static CTS_FORCE_INLINE void *do_realloc(void *old, size_t size, void *frame) {
  if (CTS_LIKELY(!old || !is_tagged(old)) && CTS_LIKELY(cts__tracer_skip(size))) {
    void *(*const r)(void *, size_t) = real.realloc;
    if (CTS_LIKELY(r != NULL)) return r(old, size);
  }
  return realloc_slow(old, size, frame);
}

EXPORT void *realloc(void *old, size_t size) {
  return do_realloc(old, size, __builtin_frame_address(0));
}

EXPORT void *reallocarray(void *old, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return do_realloc(old, total, __builtin_frame_address(0));
}

EXPORT size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  if (is_tagged(p)) return tagged_usable_size(p, header_of(p).info);
  need_real();
  return real.malloc_usable_size ? real.malloc_usable_size(p) : 0;
}

/* The aligned allocators: sampled blocks are made with memalign; an alignment that is not
 * a power of two is left to the real function (which rejects or rounds it). */
static CTS_NOINLINE void *aligned_slow(size_t align, size_t size, void *frame, int which) {
  const uint64_t nsamples = cts__tracer_sample_slow(size);
  if (nsamples && align && (align & (align - 1)) == 0)
    return alloc_sampled_aligned(align, size, nsamples, frame);
  switch (which) {
    case 0:
      return real.aligned_alloc ? real.aligned_alloc(align, size) : NULL;
    case 1:
      return real.memalign(align, size);
    case 2:
      return real.valloc ? real.valloc(size) : NULL;
    default:
      return real.pvalloc ? real.pvalloc(size) : NULL;
  }
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (CTS_UNLIKELY(need_real())) {
    void *const p = arena_alloc(size, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  if (!real.posix_memalign) return ENOMEM;
  if (CTS_LIKELY(cts__tracer_skip(size)) || align % sizeof(void *) != 0 ||
      (align & (align - 1)) != 0)
    return real.posix_memalign(out, align, size);
  const uint64_t nsamples = cts__tracer_sample_slow(size);
  if (!nsamples) return real.posix_memalign(out, align, size);
  const int e = errno;
  void *const p = alloc_sampled_aligned(align, size, nsamples, __builtin_frame_address(0));
  errno = e;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

#define ALIGNED_HOOK(name, params, call, align_expr, size_expr, which)             \
  EXPORT void *name params {                                                       \
    if (CTS_UNLIKELY(need_real())) return arena_alloc(size_expr, align_expr);      \
    if (!real.name) {                                                              \
      errno = ENOMEM;                                                              \
      return NULL;                                                                 \
    }                                                                              \
    if (CTS_LIKELY(cts__tracer_skip(size_expr))) return real.name call;            \
    return aligned_slow(align_expr, size_expr, __builtin_frame_address(0), which); \
  }

static size_t page_size(void) {
  static size_t size;
  if (!size) size = (size_t)sysconf(_SC_PAGESIZE);
  return size;
}

/* pvalloc's size: rounded up to whole pages (one page for 0), as glibc does. */
static size_t pvalloc_size(size_t size) {
  const size_t page = page_size();
  if (size > SIZE_MAX - page) return SIZE_MAX;
  return size ? (size + page - 1) & ~(page - 1) : page;
}

ALIGNED_HOOK(aligned_alloc, (size_t align, size_t size), (align, size), align, size, 0)
ALIGNED_HOOK(memalign, (size_t align, size_t size), (align, size), align, size, 1)
ALIGNED_HOOK(valloc, (size_t size), (size), page_size(), size, 2)
ALIGNED_HOOK(pvalloc, (size_t size), (size), page_size(), pvalloc_size(size), 3)

/* ---- exec: flush, then trace the new image into the next file ------------------------ */

static pid_t traced_pid; /* the process tracing started in (not a vfork child sharing it) */

/* The settings this image was started with, handed on to an image it execs. */
#define SETTING_SIZE 4096
static struct {
  bool usable;                 /* the settings below fit: an exec can continue the trace */
  bool file;                   /* MEMTRACE names a file (else a tcp:// or listen:// URL) */
  char memtrace[SETTING_SIZE]; /* this image's MEMTRACE */
  char base[SETTING_SIZE];     /* the first image's file: the names' base */
  unsigned index;              /* this image's number (0 = the first) */
  char kept[7][SETTING_SIZE];  /* values of kept_names[i] at start-up, "" if unset */
} exec_state;

/* Settings handed on as they were at start-up. */
#define KEPT_COUNT 7
static const char *const kept_names[KEPT_COUNT] = {
    "MEMTRACE_RATE",   "MEMTRACE_CONTEXT",  "MEMTRACE_DROP",         "CTFSCOPE_UNWIND",
    "CTFSCOPE_WRITER", "CTFSCOPE_COMPRESS", "CTFSCOPE_STALL_TIMEOUT"};

/* Environment variables the preload reads, replaced in the new image's environment. */
static const char *const passed_on[] = {
    "MEMTRACE",           "MEMTRACE_RATE",      "MEMTRACE_CONTEXT",  "MEMTRACE_DROP",
    "CTFSCOPE_UNWIND",    "CTFSCOPE_WRITER",    "CTFSCOPE_COMPRESS", "CTFSCOPE_STALL_TIMEOUT",
    "CTFSCOPE_EXEC_BASE", "CTFSCOPE_EXEC_INDEX"};

static bool is_passed_on(const char *entry) {
  for (size_t i = 0; i < sizeof passed_on / sizeof *passed_on; i++) {
    const size_t n = strlen(passed_on[i]);
    if (strncmp(entry, passed_on[i], n) == 0 && entry[n] == '=') return true;
  }
  return false;
}

/* Whether an exec by this thread continues the trace in the new image: only the traced
 * process itself, not a forked or vfork'd child, and not the tracer's own threads. */
static bool continues_trace(void) {
  return !cts__guarded() && exec_state.usable && traced_pid != 0 && getpid() == traced_pid &&
         cts_tracer_is_active();
}

/* Builds the new image's environment: envp without our variables, then ours with the next
 * trace's name. One block from the real malloc (untraced): the exec replaces it, or the
 * caller frees it if the exec fails. NULL if it cannot be built (the exec then goes ahead
 * with the environment it was given, untraced). */
static char **continued_environment(char *const envp[]) {
  char next[SETTING_SIZE];
  if (exec_state.file) {
    if (!cts__exec_trace_name(next, sizeof next, exec_state.base, exec_state.index + 1))
      return NULL;
  } else {
    snprintf(next, sizeof next, "%s", exec_state.memtrace);
  }
  char index[16];
  snprintf(index, sizeof index, "%u", exec_state.index + 1);
  const char *ours[2 * (3 + KEPT_COUNT)] = {
      "MEMTRACE", next, "CTFSCOPE_EXEC_BASE", exec_state.base, "CTFSCOPE_EXEC_INDEX", index};
  size_t nours = 3;
  for (size_t i = 0; i < KEPT_COUNT; i++) {
    if (exec_state.kept[i][0]) {
      ours[2 * nours] = kept_names[i];
      ours[2 * nours + 1] = exec_state.kept[i];
      nours++;
    }
  }
  size_t count = 0, bytes = 0;
  for (size_t i = 0; envp && envp[i]; i++) count++;
  for (size_t i = 0; i < nours; i++) bytes += strlen(ours[2 * i]) + strlen(ours[2 * i + 1]) + 2;
  cts__guard_enter();
  char **const env = real.malloc((count + nours + 1) * sizeof *env + bytes);
  cts__guard_leave();
  if (!env) return NULL;
  char *strings = (char *)(env + count + nours + 1);
  size_t k = 0;
  for (size_t i = 0; i < count; i++)
    if (!is_passed_on(envp[i])) env[k++] = envp[i];
  for (size_t i = 0; i < nours; i++) {
    env[k++] = strings;
    strings += sprintf(strings, "%s=%s", ours[2 * i], ours[2 * i + 1]) + 1;
  }
  env[k] = NULL;
  return env;
}

/* Before exec and dlclose: the trace holds everything up to here. */
static void before_exec(void) {
  /* Not from the tracer's own threads (the writer thread would wait for itself). */
  if (!cts__guarded() && getpid() == traced_pid && cts_tracer_is_active()) cts_tracer_flush();
}

/* After a failed exec: tracing goes on in this image. */
static int exec_failed(char **env) {
  const int e = errno;
  if (env) real.free(env);
  errno = e;
  return -1;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  need_real();
  if (!real.execve) return errno = ENOSYS, -1;
  if (!continues_trace()) return real.execve(path, argv, envp);
  before_exec();
  char **const env = continued_environment(envp);
  real.execve(path, argv, env ? env : envp);
  return exec_failed(env);
}

EXPORT int execv(const char *path, char *const argv[]) {
  return execve(path, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  need_real();
  if (!real.execvpe) return errno = ENOSYS, -1;
  if (!continues_trace()) return real.execvpe(file, argv, envp);
  before_exec();
  char **const env = continued_environment(envp);
  real.execvpe(file, argv, env ? env : envp);
  return exec_failed(env);
}

EXPORT int execvp(const char *file, char *const argv[]) {
  return execvpe(file, argv, environ);
}

/* glibc's execl family calls its internal execve directly, past the interposed one, so it
 * is interposed too. The arguments after `first` run up to a NULL; execle's environment
 * follows it. */
static size_t count_args(const char *first, va_list ap) {
  if (!first) return 0;
  size_t n = 1;
  while (va_arg(ap, char *) != NULL) n++;
  return n;
}

/* Fills args[0..n] (NULL-terminated) and returns what follows the NULL when want_envp. */
static char *const *fill_args(char **args, const char *first, size_t n, bool want_envp,
                              va_list ap) {
  args[0] = (char *)first;
  for (size_t i = 1; i < n; i++) args[i] = va_arg(ap, char *);
  if (first) (void)va_arg(ap, char *); /* the terminating NULL */
  args[n] = NULL;
  return want_envp ? va_arg(ap, char *const *) : NULL;
}

EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const size_t n = count_args(arg, ap);
  va_end(ap);
  char *args[n + 1];
  va_start(ap, arg);
  fill_args(args, arg, n, false, ap);
  va_end(ap);
  return execve(path, args, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const size_t n = count_args(arg, ap);
  va_end(ap);
  char *args[n + 1];
  va_start(ap, arg);
  fill_args(args, arg, n, false, ap);
  va_end(ap);
  return execvpe(file, args, environ);
}

EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const size_t n = count_args(arg, ap);
  va_end(ap);
  char *args[n + 1];
  va_start(ap, arg);
  char *const *const envp = fill_args(args, arg, n, true, ap);
  va_end(ap);
  return execve(path, args, envp);
}

/* dlclose: flush first, so that the writer thread resolves the codes seen so far while
 * their library is still mapped (the symbolizer keeps them after that). dlopen is not
 * interposed: glibc's dlopen looks at its caller to pick the search path. */
EXPORT int dlclose(void *handle) {
  need_real();
  before_exec();
  if (!real.dlclose) return -1;
  return real.dlclose(handle);
}

/* ---- configuration from the environment ------------------------------------------------- */

const char *cts__preload_env(const char *name) {
  const size_t n = strlen(name);
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

static void refuse(const char *what, const char *value, const char *why) {
  char line[1024];
  snprintf(line, sizeof line, MESSAGE_PREFIX "%s=\"%.200s\": %s; this program is not traced\n",
           what, value, why);
  message(line);
}

static void log_line(void *user_data, const char *line) {
  (void)user_data;
  char out[1024];
  snprintf(out, sizeof out, MESSAGE_PREFIX "%s\n", line);
  message(out);
}

static bool copy_setting(char *dst, const char *src) {
  const size_t n = strlen(src);
  if (n >= SETTING_SIZE) return false;
  memcpy(dst, src, n + 1);
  return true;
}

/* Why cts_tracer_start() failed, in words. */
static void start_error(char *why, size_t size, int e, const char *what) {
  snprintf(why, size, "%s: %s", what,
           e == -EAGAIN || e == -EACCES ? "another process is tracing into it"
           : e > -1000                  ? strerror(-e)
                                        : cts_strerror(e));
}

static void start_from_environment(void) {
  const char *const out = cts__preload_env("MEMTRACE");
  if (!out || !out[0]) return;
  /* Children are not traced (nor told about a bad setting again). The strings stay valid:
   * unsetenv only drops the pointers. */
  unsetenv("MEMTRACE");
  const char *const exec_base = cts__preload_env("CTFSCOPE_EXEC_BASE");
  const char *const exec_index = cts__preload_env("CTFSCOPE_EXEC_INDEX");
  unsetenv("CTFSCOPE_EXEC_BASE");
  unsetenv("CTFSCOPE_EXEC_INDEX");
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  const char *const rate = cts__preload_env("MEMTRACE_RATE");
  if (rate && rate[0]) {
    char *end;
    errno = 0;
    const double r = strtod(rate, &end);
    if (errno || *end || !(r > 0.0 && r <= 1.0)) {
      refuse("MEMTRACE_RATE", rate, "not a number in (0, 1]");
      return;
    }
    cfg.sample_rate = r;
  }
  cfg.context = cts__preload_env("MEMTRACE_CONTEXT");
  const char *const unwind = cts__preload_env("CTFSCOPE_UNWIND");
  if (unwind && unwind[0]) {
    if (strcmp(unwind, "auto") == 0 || strcmp(unwind, "mixed") == 0)
      cfg.unwind = CTS_TRACER_UNWIND_AUTO;
    else if (strcmp(unwind, "fp") == 0)
      cfg.unwind = CTS_TRACER_UNWIND_FRAME_POINTER;
    else if (strcmp(unwind, "libunwind") == 0)
      cfg.unwind = CTS_TRACER_UNWIND_LIBUNWIND;
    else if (strcmp(unwind, "none") == 0)
      cfg.unwind = CTS_TRACER_UNWIND_NONE;
    else {
      refuse("CTFSCOPE_UNWIND", unwind, "expected mixed, fp, libunwind or none");
      return;
    }
  }
  const char *const drop = cts__preload_env("MEMTRACE_DROP");
  if (drop && drop[0]) {
    if (strcmp(drop, "1") != 0 && strcmp(drop, "0") != 0) {
      refuse("MEMTRACE_DROP", drop, "expected 1 (drop mode) or 0 (lossless)");
      return;
    }
    cfg.drop_when_full = drop[0] == '1';
  }
  /* A writer process takes the writer's work and its memory traffic off the program's
   * CPUs' shared address space (tracer.h, "The writer process"). */
  cfg.writer = CTS_TRACER_WRITER_PROCESS;
  const char *const writer = cts__preload_env("CTFSCOPE_WRITER");
  if (writer && writer[0]) {
    if (strcmp(writer, "thread") == 0) {
      cfg.writer = CTS_TRACER_WRITER_THREAD;
    } else if (strcmp(writer, "process") != 0) {
      refuse("CTFSCOPE_WRITER", writer, "expected process or thread");
      return;
    }
  }
  const char *const compress = cts__preload_env("CTFSCOPE_COMPRESS");
  if (compress && compress[0] && strcmp(compress, "none") != 0) {
    char *end = NULL;
    long level = CTS__ZSINK_LEVEL_DEFAULT;
    if (strncmp(compress, "zstd", 4) != 0 || (compress[4] && compress[4] != ':') ||
        (compress[4] == ':' && ((level = strtol(compress + 5, &end, 10)) < CTS__ZSINK_LEVEL_MIN ||
                                level > CTS__ZSINK_LEVEL_MAX || end == compress + 5 || *end))) {
      refuse("CTFSCOPE_COMPRESS", compress, "expected zstd, zstd:LEVEL (1-19) or none");
      return;
    }
    cfg.compress_level = (int)level;
  }
  const char *const stall = cts__preload_env("CTFSCOPE_STALL_TIMEOUT");
  if (stall && stall[0]) {
    char *end;
    errno = 0;
    const double sec = strtod(stall, &end);
    if (errno || *end || end == stall || !(sec >= 0.0 && sec <= 86400.0)) {
      refuse("CTFSCOPE_STALL_TIMEOUT", stall, "expected seconds, 0 to 86400 (0: for ever)");
      return;
    }
    cfg.stall_timeout_ms = (uint32_t)(sec * 1000.0 + 0.5);
    if (sec > 0.0 && cfg.stall_timeout_ms == 0) cfg.stall_timeout_ms = 1;
  }
  bool fits = true;
  for (size_t i = 0; i < sizeof kept_names / sizeof *kept_names; i++) {
    const char *const v = cts__preload_env(kept_names[i]);
    fits = copy_setting(exec_state.kept[i], v ? v : "") && fits;
  }

  cts_tracer_sink_t sink;
  const bool connect = strncmp(out, "tcp://", 6) == 0, listen = strncmp(out, "listen://", 9) == 0;
  char why[512];
  if ((connect || listen) && cfg.compress_level) {
    refuse("CTFSCOPE_COMPRESS", compress,
           "compression is for file traces: tcp:// and listen:// stream plain memtrace");
    return;
  }
  if (connect || listen) {
    /* Checked here first for the message: the tracer only returns -EINVAL. */
    const char *const address = out + (connect ? 6 : 9);
    cts_net_addr_t addr;
    char err[CTS_NET_ERR_LEN];
    const int pe = connect ? cts_net_parse_connect(address, &addr, err, sizeof err)
                           : cts_net_parse_listen(address, &addr, err, sizeof err);
    if (pe) {
      refuse("MEMTRACE", out, err);
      return;
    }
    cts_tracer_sink_init(&sink, connect ? CTS_TRACER_SINK_TCP_CONNECT : CTS_TRACER_SINK_TCP_LISTEN);
    sink.address = address;
    sink.log = log_line;
    exec_state.file = false;
  } else {
    cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
    sink.path = out;
    sink.log = log_line; /* e.g. a writer process that was killed */
    exec_state.file = true;
  }
  /* The exec sequence: where it started and which image this is. */
  unsigned index = 0;
  if (exec_index && exec_base) {
    char *end;
    const unsigned long v = strtoul(exec_index, &end, 10);
    if (*end == '\0' && v < 1000000) index = (unsigned)v;
  }
  exec_state.index = index;
  fits = copy_setting(exec_state.memtrace, out) && fits;
  fits = copy_setting(exec_state.base, exec_state.file && index ? exec_base : out) && fits;
  exec_state.usable = fits;

  const int e = cts_tracer_start(&cfg, &sink);
  if (e) {
    start_error(why, sizeof why, e,
                connect  ? "cannot connect"
                : listen ? "cannot listen"
                         : "cannot trace into this file");
    refuse("MEMTRACE", out, why);
    return;
  }
  if (listen) {
    char line[256];
    snprintf(line, sizeof line, "serving the trace on port %u (MEMTRACE=%.160s)",
             (unsigned)cts_tracer_listen_port(), out);
    log_line(NULL, line);
  }
  traced_pid = getpid();
}

__attribute__((constructor)) static void preload_init(void) {
  need_real();
  cts__guard_enter(); /* whatever libc allocates for us here is not the program's */
  start_from_environment();
  cts__guard_leave();
}

__attribute__((destructor)) static void preload_fini(void) {
  if (cts_tracer_is_active()) cts_tracer_stop();
}
