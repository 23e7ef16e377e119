/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so, the malloc family's hooks (the settings are read in
 * preload_env.c, the exec family is preload_exec.c).
 *
 * The hooks never allocate themselves. Real functions are found lazily (real_symbol: the
 * next definition, or one before this library's); dlsym's own calloc during that lookup
 * is served from a static arena that free/realloc recognise (its blocks carry a tag, like
 * sampled blocks). Sampled blocks carry a 16-byte header in front of the program's pointer
 * ("sampled blocks carry a header" below), which free, realloc and malloc_usable_size take
 * into account; the allocators' own entry points are covered too ("the allocators' own
 * entry points"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "common/hash.h"
#include "preload_internal.h"

static void free_unresolved(void *p);

cts__real_functions_t cts__real = {.free = free_unresolved};
CTS__TLS int cts__in_dlsym;

/* ---- sampled blocks carry a header --------------------------------------------------------
 * A sampled block is allocated larger (HEADER or 2 * HEADER bytes; for alignments above 16,
 * one or two alignments), and the program gets an address p inside it, past a 16-byte
 * header. The header's first word, the tag, is tag_key ^ (its own address); the second
 * packs the object id, the session that sampled the block and where the real block starts.
 * tag_key is random per process: no data can be mistaken for a tag by chance, and a tag is
 * cleared before its block is freed, so stale memory never matches.
 *
 * The rule for pointers the preload did not tag (blocks of the real allocator, which may be
 * jemalloc, tcmalloc or mimalloc, linked or preloaded): free(p) reads the word at p - 16
 * only when it lies in the same 4 KiB-aligned range as p ("in page"), which cannot fault
 * whatever the allocator keeps before its blocks (jemalloc's page-aligned blocks may follow
 * an unmapped page). So the unsampled free stays one mask test, one load and one compare,
 * with nothing looked up. Sampled blocks are placed so that their header is in page: when
 * p would sit in the first 16 bytes of a page, the block is made again one HEADER (or one
 * alignment) larger and p moved up by that much. Only alignments of 4 KiB and more cannot
 * be placed so (p is page-aligned): those few blocks are "far" blocks, kept in a small side
 * table (their header's info is there, none is written before p), which a free of a pointer
 * at the start of a page consults while it is not empty. Arena blocks are found by their
 * address. */
#define HEADER      16u
#define SHIFT_BITS  6u  /* the real block starts HEADER << shift bytes before p */
#define SHIFT_ARENA 63u /* a block of the static arena, never freed */
#define ID_SHIFT    (SHIFT_BITS + CTS__TRACER_SESSION_BITS)

/* The smallest page size of the platforms Linux runs on: two addresses in the same 4 KiB
 * range are in the same page whatever the real page size is. */
#define MIN_PAGE 4096u
/* p's header is in page when p is at least HEADER bytes into its 4 KiB range. */
#define IN_PAGE_MASK ((uintptr_t)(MIN_PAGE - 1u) & ~(uintptr_t)(HEADER - 1u))

typedef struct header {
  uint64_t tag;
  uint64_t info; /* shift | session << SHIFT_BITS | id << ID_SHIFT (arena: size << 6) */
} header_t;

_Static_assert(ID_SHIFT + CTS__TRACER_ID_BITS == 64, "the id keeps 40 bits");

/* Any value until cts__resolve_real_functions() sets it, always before the first tag. */
static uint64_t tag_key = 0x6a09e667f3bcc908ull;

static CTS_FORCE_INLINE uint64_t tag_of(uintptr_t header) {
  return tag_key ^ header;
}

/* Whether reading p's header cannot fault (NULL is not in page). */
static CTS_FORCE_INLINE bool in_page(const void *p) {
  return ((uintptr_t)p & IN_PAGE_MASK) != 0;
}

/* Whether in-page p carries a tag. */
static CTS_FORCE_INLINE bool tag_matches(const void *p) {
  const uintptr_t h = (uintptr_t)p - HEADER;
  uint64_t tag;
  __builtin_memcpy(&tag, (const void *)h, sizeof tag); /* inline despite -fno-builtin */
  return tag == tag_of(h);
}

static CTS_FORCE_INLINE uint64_t info_in_header(const void *p) {
  uint64_t info;
  __builtin_memcpy(&info, (const unsigned char *)p - HEADER + 8, sizeof info);
  return info;
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

/* ---- far blocks: sampled blocks whose header is not in page -------------------------------
 * Open addressing, at most FAR_PROBES slots from a key's home. Lookups take no lock (a key
 * is published after its info); inserts and removals take far_lock. A removed entry leaves
 * a tombstone that a later insert reuses. A full table means the block is not sampled. */
#define FAR_SLOTS  16384u
#define FAR_PROBES 64u
#define FAR_TOMB   ((uintptr_t)1)
static CTS__COLD_BSS struct far_entry {
  uintptr_t key; /* p; 0 empty, FAR_TOMB removed */
  uint64_t info;
} far[FAR_SLOTS];
static uint32_t far_live; /* entries in use: frees skip the table while it is 0 */
static int far_lock;

static uint32_t far_home(uintptr_t key) {
  return (uint32_t)cts_mix64((uint64_t)key >> 12) & (FAR_SLOTS - 1u); /* page-aligned keys */
}

static struct far_entry *far_find(uintptr_t key) {
  uint32_t i = far_home(key);
  for (uint32_t n = 0; n < FAR_PROBES; n++, i = (i + 1u) & (FAR_SLOTS - 1u)) {
    const uintptr_t k = __atomic_load_n(&far[i].key, __ATOMIC_ACQUIRE);
    if (k == key) return &far[i];
    if (k == 0) return NULL;
  }
  return NULL;
}

/* Enters p with `info`; false if the table has no room near p's home. */
static bool far_insert(const void *p, uint64_t info) {
  const uintptr_t key = (uintptr_t)p;
  bool done = false;
  cts__spin_lock(&far_lock);
  uint32_t i = far_home(key);
  for (uint32_t n = 0; n < FAR_PROBES; n++, i = (i + 1u) & (FAR_SLOTS - 1u)) {
    const uintptr_t k = far[i].key;
    if (k != 0 && k != FAR_TOMB) continue;
    far[i].info = info;
    __atomic_store_n(&far[i].key, key, __ATOMIC_RELEASE);
    __atomic_add_fetch(&far_live, 1, __ATOMIC_RELAXED);
    done = true;
    break;
  }
  cts__spin_unlock(&far_lock);
  return done;
}

void cts__far_lock_before_fork(void) {
  cts__spin_lock(&far_lock);
}

void cts__far_unlock_after_fork(void) {
  cts__spin_unlock(&far_lock);
}

static void far_remove(const void *p) {
  cts__spin_lock(&far_lock);
  struct far_entry *const e = far_find((uintptr_t)p);
  if (e) {
    __atomic_store_n(&e->key, FAR_TOMB, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&far_live, 1, __ATOMIC_RELAXED);
  }
  cts__spin_unlock(&far_lock);
}

/* The static arena for allocations made while dlsym runs (below). */
#define ARENA_SIZE 65536u
static CTS__COLD_BSS _Alignas(64) unsigned char arena[ARENA_SIZE];

/* Whether p, not in page, is a tagged block (an arena block or a far block), and its info. */
static CTS_NOINLINE bool tagged_far(const void *p, uint64_t *info) {
  const uintptr_t a = (uintptr_t)p;
  if (a - (uintptr_t)arena < ARENA_SIZE) { /* the arena is ours: its headers are readable */
    if (a - (uintptr_t)arena < HEADER || !tag_matches(p)) return false;
    *info = info_in_header(p);
    return true;
  }
  if (!p || !__atomic_load_n(&far_live, __ATOMIC_RELAXED)) return false;
  const struct far_entry *const e = far_find(a);
  if (!e) return false;
  *info = e->info;
  return true;
}

/* Whether p, not in page, is certainly not a tagged block (NULL included): no far block
 * exists and p is not in the arena. Inline: jemalloc's blocks of a page and more (and the
 * first of each slab) start at a page, and redis frees and measures them all the time. */
static CTS_FORCE_INLINE bool surely_untagged_far(const void *p) {
  return (uintptr_t)p - (uintptr_t)arena >= ARENA_SIZE &&
         !__atomic_load_n(&far_live, __ATOMIC_RELAXED);
}

/* Whether p (non-NULL, from malloc and friends) is a sampled block or an arena block, and
 * its header's info. */
static CTS_FORCE_INLINE bool tagged_info(const void *p, uint64_t *info) {
  if (CTS_LIKELY(in_page(p))) {
    if (CTS_LIKELY(!tag_matches(p))) return false;
    *info = info_in_header(p);
    return true;
  }
  return tagged_far(p, info);
}

static CTS_FORCE_INLINE bool is_tagged(const void *p) {
  uint64_t info;
  return tagged_info(p, &info);
}

/* Removes p's tag (p is not an arena block). */
static void forget_tag(void *p) {
  if (CTS_LIKELY(in_page(p)))
    clear_tag(p);
  else
    far_remove(p);
}

/* ---- the static arena for allocations made while dlsym runs. Never reused or freed. ---- */
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

/* The function the program's own calls to `name` would reach if this library did not
 * define it. Usually the next definition after this library (RTLD_NEXT): libc's, or an
 * allocator preloaded after it or linked to the program. But when a definition comes
 * before this library (the executable defines malloc, or an allocator is preloaded first:
 * LD_PRELOAD="libjemalloc.so.2 libctfscope-preload.so"), that one: the program's malloc is
 * then that allocator's, and the hooks it does not define (reallocarray, pvalloc...) must
 * hand the program's blocks to the same allocator, not to libc's. */
/* Where this library is loaded: [self_lo, self_hi), found once. */
static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *unused) {
  (void)size, (void)unused;
  const uintptr_t key = (uintptr_t)&tag_key;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *const ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    const uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (start < lo) lo = start;
    if (start + ph->p_memsz > hi) hi = start + ph->p_memsz;
  }
  if (key < lo || key >= hi) return 0;
  self_lo = lo;
  self_hi = hi;
  return 1;
}

static bool is_ours(const void *p) {
  if (!self_hi) dl_iterate_phdr(find_self, NULL);
  return (uintptr_t)p - self_lo < self_hi - self_lo;
}

/* Whether `first` (what RTLD_DEFAULT finds) is a definition in another object. Usually it
 * is ours (one range test). A non-PIE executable that takes a function's address gets a
 * canonical PLT entry in its symbol table (an undefined symbol with an address, cc1's
 * free): dlsym returns it, but it jumps to the first definition, which may be ours: its
 * symbol is undefined (SHN_UNDEF). dladdr1 scans a symbol table: only in these rare cases. */
static bool defined_before(void *first) {
  Dl_info where;
  const ElfW(Sym) *sym = NULL;
  return first && !is_ours(first) && dladdr1(first, &where, (void **)&sym, RTLD_DL_SYMENT) && sym &&
         sym->st_shndx != SHN_UNDEF;
}

/* Whether a library was preloaded before this one (LD_PRELOAD="other.so this.so"): the
 * objects between the executable and this library in the link map, but the kernel's vDSO
 * (a name without a slash). For the case defined_before cannot decide: a canonical PLT
 * entry hides where the executable's calls go, and a library before this one may be
 * where, so tracing is refused rather than risk handing that library tagged blocks. */
static bool preloaded_before_us(void) {
  Dl_info info;
  struct link_map *self = NULL;
  if (!dladdr1((void *)&tag_key, &info, (void **)&self, RTLD_DL_LINKMAP) || !self) return true;
  for (const struct link_map *l = self->l_prev; l && l->l_prev; l = l->l_prev)
    if (l->l_name && strchr(l->l_name, '/')) return true;
  return false;
}

/* Whether `first`, a definition in another object, is another copy of this library's: a
 * second libctfscope-preload.so before this one in LD_PRELOAD (another build's, an
 * installed one beside a build tree's: `record` of one run under the other's, or with the
 * other in the environment). Its hooks call the next definition, this library's, whose
 * real function was then that copy's again, each a tail call: the program spun for ever at
 * its first malloc (gdb under two records). That copy's is the object that defines the
 * first cts_tracer_start, the API this library exports too. Asked once, and only when a
 * definition comes before this library's (defined_before). */
static bool another_copy_of_us(void *first) {
  static int answer = -1;
  if (answer < 0) {
    void *const api = dlsym(RTLD_DEFAULT, "cts_tracer_start");
    Dl_info of_first, of_api;
    answer = api && !is_ours(api) && dladdr(first, &of_first) && dladdr(api, &of_api) &&
             of_first.dli_fbase == of_api.dli_fbase;
  }
  return answer;
}

/* This library comes after another copy of itself (another_copy_of_us): that copy traces,
 * this one only hands calls on (set with the real functions). */
bool cts__behind_another_copy;

/* The function `name` the program's calls reach but for this library: `first`, the first
 * definition in the global scope, if it is another object's (not another copy of this
 * library's), else the next one after this library. */
static void *real_symbol(const char *name, void *first) {
  return defined_before(first) && !another_copy_of_us(first) ? first : dlsym(RTLD_NEXT, name);
}

/* The program's free is another library's: sampled blocks would reach it, so nothing may
 * be sampled (set with the real functions). */
bool cts__free_shadowed;

/* The first definition of `name` in the global scope, as dlsym(RTLD_DEFAULT) would find
 * it: the address of this library's own exported function, which is preemptible, so read
 * from the GOT entry the dynamic loader bound at load time by that same look-up (a
 * canonical PLT entry of a non-PIE executable included). Looking it up again cost each
 * traced image's start 9 dlsym calls, ~1.1 k instructions each. */
#define FIRST_DEFINITION(name, out)         \
  do {                                      \
    __typeof__(&name) const bound_ = &name; \
    memcpy(&(out), &bound_, sizeof(out));   \
  } while (0)

#define RESOLVE(field, name)                       \
  do {                                             \
    void *first_;                                  \
    FIRST_DEFINITION(name, first_);                \
    void *const sym_ = real_symbol(#name, first_); \
    memcpy(&cts__real.field, &sym_, sizeof sym_);  \
  } while (0)

CTS_NOINLINE void cts__resolve_real_functions(void) {
  /* The tag key first (arena blocks are tagged). The same in every thread that gets here
   * at once: the kernel's random bytes of this process, and where this library is. */
  const unsigned char *const random = (const unsigned char *)getauxval(AT_RANDOM);
  uint64_t key = 0x6a09e667f3bcc908ull ^ (uintptr_t)&tag_key;
  if (random) {
    uint64_t r;
    memcpy(&r, random + 8, sizeof r); /* the first 8 are glibc's stack protector's */
    key ^= r;
  }
  tag_key = cts_mix64(key) | 1u;
  cts__in_dlsym++;
  RESOLVE(free, free);
  RESOLVE(calloc, calloc);
  RESOLVE(realloc, realloc);
  RESOLVE(memalign, memalign);
  RESOLVE(malloc_usable_size, malloc_usable_size);
  RESOLVE(execve, execve);
  RESOLVE(execvpe, execvpe);
  void *program_free;
  FIRST_DEFINITION(free, program_free);
  cts__behind_another_copy = defined_before(program_free) && another_copy_of_us(program_free);
  cts__free_shadowed = !cts__behind_another_copy &&
                       (defined_before(program_free) ||
                        (program_free && !is_ours(program_free) && preloaded_before_us()));
  RESOLVE(malloc, malloc); /* last: its being set means all are */
  cts__in_dlsym--;
  if (!cts__real.malloc || !cts__real.free || !cts__real.calloc || !cts__real.realloc ||
      !cts__real.memalign) {
    cts__preload_log("cannot find the real malloc, free, calloc, realloc or memalign; aborting");
    abort();
  }
}

/* cts__real.free before the real functions are known: free does not test for it. */
static CTS_NOINLINE void free_unresolved(void *p) {
  if (!p || cts__need_real() || cts__real.free == free_unresolved) return;
  cts__real.free(p);
}

/* ---- allocation hooks ------------------------------------------------------------------------
 * The fast path of every hook is inline: malloc-like hooks test the thread's sampling
 * countdown (cts__tracer_countdown, which also fails while not sampling) and tail-call the
 * real function; free and malloc_usable_size test the tag. Each fast path keeps no stack
 * frame and calls nothing but the real function: malloc 12 instructions around the real
 * call while sampling, free 7 (callgrind; the guard is
 * hooks_instructions_per_unsampled_call in tests/preload/test_preload.c). All the
 * rest (sampled blocks, start-up, tracing off) is out of line or after those tests. */

/* Tags the sampled block whose real block starts at q, `offset` bytes before the pointer
 * returned, and records it. A far block that finds no room in the side table is not
 * sampled: q itself is returned (q is aligned as asked, and large enough). */
static CTS_FORCE_INLINE void *sampled_block(void *q, size_t offset, size_t size, uint64_t nsamples,
                                            void *frame) {
  unsigned char *const p = (unsigned char *)q + offset;
  const unsigned shift = (unsigned)__builtin_ctzll(offset / HEADER);
  if (!in_page(p) && !far_insert(p, shift)) return q;
  const uint64_t full = cts__tracer_record(p, size, nsamples, frame, false);
  const uint64_t id = full & CTS__TRACER_NO_ID;
  const unsigned session = (unsigned)(full >> CTS__TRACER_ID_BITS) & CTS__TRACER_SESSION_MASK;
  const uint64_t info = shift | (uint64_t)session << SHIFT_BITS | id << ID_SHIFT;
  if (in_page(p))
    set_header(p, info);
  else
    __atomic_store_n(&far_find((uintptr_t)p)->info, info, __ATOMIC_RELAXED); /* entered above */
  return p;
}

/* Records the free of tagged block p (its header `info`) and removes its tag. */
static void untag(void *p, uint64_t info) {
  forget_tag(p);
  cts__tracer_record_free(info >> ID_SHIFT,
                          (unsigned)(info >> SHIFT_BITS) & CTS__TRACER_SESSION_MASK);
}

/* The offset of p in a real block at q with room for two headers (or two alignments
 * `step`): one step, unless that is the start of a page (then two, which is not). */
static size_t placed_offset(const void *q, size_t step) {
  return in_page((const unsigned char *)q + step) ? step : 2 * step;
}

/* ---- real blocks that cannot hold a header in page: parked ---------------------------------
 * A real block q whose q + HEADER is the start of a page cannot be a sampled block with one
 * header. Handing it back to the real allocator does not make it go away: free lists are
 * last in, first out (glibc's tcache and fast bins), so the next allocation of the same size
 * gets the same block again, and if the sampled blocks made instead are of another size
 * (one more header), the program's frees never cover it: at rate 1 every later allocation of
 * that size paid a second malloc and a free (cc1plus: 435 000 of its 1.37 M allocations).
 * Such a block is parked instead: kept out of the allocator's lists for good, the same size
 * is asked for again, and the program's frees then go to that size's list as untraced. Parked
 * blocks are at most one per page boundary crossed; PARK_BYTES bounds what they hold (beyond,
 * the block is freed as before). */
#define PARK_BYTES (4u << 20)
#define PARK_TRIES 4u
static size_t parked_bytes;

/* Whether real block q of `size` bytes is parked (false: over the bound; q is the caller's). */
static bool park(size_t size) {
  size_t used = __atomic_load_n(&parked_bytes, __ATOMIC_RELAXED);
  do
    if (size > PARK_BYTES - used) return false;
  while (!__atomic_compare_exchange_n(&parked_bytes, &used, used + size, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED));
  return true;
}

/* The real block for a sampled block of `size` bytes after the first one, q, could not hold
 * its header in page: another of the same size (q parked), else one HEADER larger, the
 * program's pointer placed in page (*offset). NULL: no memory. */
static CTS_NOINLINE void *place_again(void *q, size_t size, bool zero, size_t *offset) {
  for (unsigned tries = 0; tries < PARK_TRIES && park(size + HEADER); tries++) {
    q = zero ? cts__real.calloc(1, size + HEADER) : cts__real.malloc(size + HEADER);
    if (!q || in_page((unsigned char *)q + HEADER)) return q; /* (*offset is HEADER) */
  }
  void *const q2 =
      zero ? cts__real.calloc(1, size + 2 * HEADER) : cts__real.malloc(size + 2 * HEADER);
  cts__real.free(q); /* after: q2 is another block */
  if (q2) *offset = placed_offset(q2, HEADER);
  return q2;
}

/* A sampled block of `size` bytes with a HEADER-byte header (any alignment up to 16). When
 * the header would not be in page (about one block in 256), place_again. */
static CTS_FORCE_INLINE void *alloc_sampled(size_t size, uint64_t nsamples, bool zero,
                                            void *frame) {
  if (size > SIZE_MAX - 2 * HEADER) {
    errno = ENOMEM;
    return NULL;
  }
  void *q = zero ? cts__real.calloc(1, size + HEADER) : cts__real.malloc(size + HEADER);
  size_t offset = HEADER;
  if (CTS_UNLIKELY(q && !in_page((unsigned char *)q + HEADER)))
    q = place_again(q, size, zero, &offset);
  if (!q) return NULL;
  return sampled_block(q, offset, size, nsamples, frame);
}

/* A sampled block aligned to `align` (a power of two). Below a page, placed as above; from
 * a page up, p is page-aligned: a far block. */
static CTS_FORCE_INLINE void *alloc_sampled_aligned(size_t align, size_t size, uint64_t nsamples,
                                                    void *frame) {
  if (align <= HEADER) return alloc_sampled(size, nsamples, false, frame);
  if (align > (SIZE_MAX - size) / 2) {
    errno = ENOMEM;
    return NULL;
  }
  void *q = cts__real.memalign(align, size + align);
  if (!q) return NULL;
  size_t offset = align;
  if (align < MIN_PAGE && CTS_UNLIKELY(!in_page((unsigned char *)q + align))) {
    void *const q2 = cts__real.memalign(align, size + 2 * align);
    cts__real.free(q);
    if (!q2) return NULL;
    q = q2;
    offset = placed_offset(q, align);
  }
  return sampled_block(q, offset, size, nsamples, frame);
}

static CTS_NOINLINE void *malloc_slow(size_t size, void *frame) {
  if (cts__need_real()) return arena_alloc(size, 16);
  const uint64_t nsamples = cts__tracer_sample(size);
  if (!nsamples) return cts__real.malloc(size);
  return alloc_sampled(size, nsamples, false, frame);
}

/* A countdown that passes implies that the real functions are known (countdowns are drawn
 * only while a session runs, and the constructor finds the real functions before it starts
 * one): only the idle path tests them. */
CTS__PRELOAD_EXPORT void *malloc(size_t size) {
  const unsigned session = cts__tracer_session();
  if (CTS_LIKELY(cts__tracer_countdown(size, session))) return cts__real.malloc(size);
  if (!session) {
    void *(*const m)(size_t) = cts__real.malloc;
    if (CTS_LIKELY(m != NULL)) return m(size);
  }
  return malloc_slow(size, __builtin_frame_address(0));
}

/* free of a tagged block (its header's `info`): an arena block (kept) or a sampled one. */
static CTS_NOINLINE void free_tagged(void *p, uint64_t info) {
  if (shift_of(info) == SHIFT_ARENA) return;
  forget_tag(p);
  cts__real.free(real_block_of(p, info));
  /* After the real free, as a tail call (every sampled block's free at rate 1): the
   * collect names the object by its id, whatever the block becomes meanwhile. */
  cts__tracer_record_free(info >> ID_SHIFT,
                          (unsigned)(info >> SHIFT_BITS) & CTS__TRACER_SESSION_MASK);
}

/* free of a pointer whose header would not be in page (NULL included). */
static CTS_NOINLINE void free_not_in_page(void *p) {
  uint64_t info;
  if (tagged_far(p, &info)) {
    free_tagged(p, info);
    return;
  }
  cts__real.free(p); /* free_unresolved until the real functions are known */
}

CTS__PRELOAD_EXPORT void free(void *p) {
  if (CTS_LIKELY(in_page(p))) {
    if (CTS_UNLIKELY(tag_matches(p))) {
      free_tagged(p, info_in_header(p));
      return;
    }
    cts__real.free(p);
    return;
  }
  if (CTS_LIKELY(surely_untagged_far(p))) {
    cts__real.free(p); /* free_unresolved until the real functions are known */
    return;
  }
  free_not_in_page(p);
}

/* C23's sized frees (glibc 2.39 and later): a sampled block must not reach the real ones.
 * Declared here: older headers do not. */
CTS__PRELOAD_EXPORT void free_sized(void *p, size_t size);
CTS__PRELOAD_EXPORT void free_aligned_sized(void *p, size_t align, size_t size);

CTS__PRELOAD_EXPORT void free_sized(void *p, size_t size) {
  (void)size;
  free(p);
}

CTS__PRELOAD_EXPORT void free_aligned_sized(void *p, size_t align, size_t size) {
  (void)align, (void)size;
  free(p);
}

static CTS_NOINLINE void *calloc_slow(size_t n, size_t size, size_t total, void *frame) {
  if (cts__need_real()) return arena_alloc(total, 16);
  const uint64_t nsamples = cts__tracer_sample(total);
  if (!nsamples) return cts__real.calloc(n, size);
  return alloc_sampled(total, nsamples, true, frame);
}

/* Out of line: the errno call would give calloc's fast path a stack frame. */
static CTS_NOINLINE void *no_memory(void) {
  errno = ENOMEM;
  return NULL;
}

CTS__PRELOAD_EXPORT void *calloc(size_t n, size_t size) {
  size_t total;
  if (CTS_UNLIKELY(__builtin_mul_overflow(n, size, &total))) return no_memory();
  const unsigned session = cts__tracer_session();
  if (CTS_LIKELY(cts__tracer_countdown(total, session))) return cts__real.calloc(n, size);
  if (!session) {
    void *(*const c)(size_t, size_t) = cts__real.calloc;
    if (CTS_LIKELY(c != NULL)) return c(n, size);
  }
  return calloc_slow(n, size, total, __builtin_frame_address(0));
}

/* The usable size of a tagged block (what the program may use). */
static size_t tagged_usable_size(void *p, uint64_t info) {
  if (shift_of(info) == SHIFT_ARENA) return (size_t)(info >> SHIFT_BITS);
  const size_t offset = (size_t)HEADER << shift_of(info);
  const size_t n =
      cts__real.malloc_usable_size ? cts__real.malloc_usable_size(real_block_of(p, info)) : 0;
  return n > offset ? n - offset : 0;
}

/* realloc is recorded as the free of the old block (if sampled), then an allocation of the
 * new size sampled afresh. The free is recorded before the real call: if realloc then
 * fails, the still-valid old block is reported freed (a rare, documented inexactness). */

/* Samples the data at q[0, live) of a real block of size + HEADER bytes (from the real
 * realloc; live <= size): the data moves up behind a header. Only the live bytes move: the
 * rest of a grown block is not the program's data yet, and moving it would touch (fault in,
 * for a block the allocator mapped afresh) every page of the new size at once, a page
 * fault per 4 KiB that the untraced program may never pay. If the header would not be in
 * page, the block is made HEADER bytes larger first; if that fails, q is returned as it
 * is, unsampled (it holds the data: the program's block is still valid). */
static void *sample_in_place(unsigned char *q, size_t size, size_t live, uint64_t nsamples,
                             void *frame) {
  size_t offset = HEADER;
  if (CTS_UNLIKELY(!in_page(q + HEADER))) {
    unsigned char *const q2 = cts__real.realloc(q, size + 2 * HEADER);
    if (!q2) return q;
    q = q2;
    offset = placed_offset(q, HEADER);
  }
  memmove(q + offset, q, live);
  return sampled_block(q, offset, size, nsamples, frame);
}

/* realloc of an untagged block (or NULL) into a sampled one: the real realloc with room
 * for the header, then the old data moves up behind it. */
static void *realloc_into_sampled(void *old, size_t size, uint64_t nsamples, void *frame) {
  if (!old) return alloc_sampled(size, nsamples, false, frame);
  if (size > SIZE_MAX - 2 * HEADER) {
    errno = ENOMEM;
    return NULL;
  }
  /* The old block's usable size bounds its data (the whole new size when unknown). */
  const size_t old_size =
      cts__real.malloc_usable_size ? cts__real.malloc_usable_size(old) : SIZE_MAX;
  unsigned char *const q = cts__real.realloc(old, size + HEADER);
  return q ? sample_in_place(q, size, old_size < size ? old_size : size, nsamples, frame) : NULL;
}

/* realloc of tagged block `old` (its header's `info`). */
static void *realloc_tagged(void *old, uint64_t info, size_t size, void *frame) {
  const unsigned shift = shift_of(info);
  if (size == 0) { /* glibc's realloc(p, 0): frees p, returns NULL */
    if (shift != SHIFT_ARENA) free_tagged(old, info);
    return NULL;
  }
  const size_t old_size = tagged_usable_size(old, info);
  if (shift == SHIFT_ARENA && cts__need_real()) {
    void *const p = arena_alloc(size, 16);
    if (p) memcpy(p, old, old_size < size ? old_size : size);
    return p;
  }
  const uint64_t nsamples = cts__tracer_skip(size) ? 0 : cts__tracer_sample(size);
  if (shift != 0) {
    /* From the arena (never freed), aligned, placed two headers in, or far: a new block and
     * a copy. */
    void *const p = nsamples ? alloc_sampled(size, nsamples, false, frame) : cts__real.malloc(size);
    if (!p) return NULL;
    memcpy(p, old, old_size < size ? old_size : size);
    if (shift != SHIFT_ARENA) free_tagged(old, info);
    return p;
  }
  /* One header in: the header is in page (placement), so it can be put back below. */
  void *const q = real_block_of(old, info);
  const uint64_t unrecorded = info | CTS__TRACER_NO_ID << ID_SHIFT;
  untag(old, info);
  if (size > SIZE_MAX - 2 * HEADER) {
    set_header(old, unrecorded);
    errno = ENOMEM;
    return NULL;
  }
  unsigned char *const q2 = cts__real.realloc(q, size + HEADER);
  if (!q2) { /* the old block lives on, its free no longer recorded */
    set_header(old, unrecorded);
    return NULL;
  }
  if (nsamples && CTS_LIKELY(in_page(q2 + HEADER)))
    return sampled_block(q2, HEADER, size, nsamples, frame);
  /* The old data only (sample_in_place says why); the block keeps its HEADER spare bytes at
   * the end. */
  const size_t live = old_size < size ? old_size : size;
  memmove(q2, q2 + HEADER, live);
  return nsamples ? sample_in_place(q2, size, live, nsamples, frame) : q2;
}

static CTS_NOINLINE void *realloc_slow(void *old, size_t size, void *frame) {
  uint64_t info;
  if (old && tagged_info(old, &info)) return realloc_tagged(old, info, size, frame);
  if (cts__need_real()) return arena_alloc(size, 16);
  const uint64_t nsamples = cts__tracer_sample(size);
  if (!nsamples) return cts__real.realloc(old, size);
  return realloc_into_sampled(old, size, nsamples, frame);
}

/* realloc's fast path, a statement that returns the real realloc's result (a tail call)
 * for a pointer that is surely not tagged (NULL included) when the new block is not
 * sampled. The rest goes on to realloc_slow, whose countdown (cts__tracer_sample_slow) is
 * the same as this one. A macro, not an inline function taking the frame: the hook's frame
 * address is then taken in the slow path only, and the fast path keeps no stack frame. */
#define REALLOC_FAST_PATH(old, size)                                                              \
  do {                                                                                            \
    if (CTS_LIKELY(in_page(old) ? !tag_matches(old) : surely_untagged_far(old))) {                \
      const unsigned session_ = cts__tracer_session();                                            \
      if (CTS_LIKELY(cts__tracer_countdown(size, session_))) return cts__real.realloc(old, size); \
      void *(*const real_)(void *, size_t) = cts__real.realloc;                                   \
      if (!session_ && CTS_LIKELY(real_ != NULL)) return real_(old, size);                        \
    }                                                                                             \
  } while (0)

CTS__PRELOAD_EXPORT void *realloc(void *old, size_t size) {
  REALLOC_FAST_PATH(old, size);
  return realloc_slow(old, size, __builtin_frame_address(0));
}

CTS__PRELOAD_EXPORT void *reallocarray(void *old, size_t n, size_t size) {
  size_t total;
  if (CTS_UNLIKELY(__builtin_mul_overflow(n, size, &total))) return no_memory();
  REALLOC_FAST_PATH(old, total);
  return realloc_slow(old, total, __builtin_frame_address(0));
}

static CTS_NOINLINE size_t usable_size_slow(void *p) {
  if (!p) return 0;
  uint64_t info;
  if (tagged_info(p, &info)) return tagged_usable_size(p, info);
  cts__need_real();
  return cts__real.malloc_usable_size ? cts__real.malloc_usable_size(p) : 0;
}

/* Programs that count their heap call this once per malloc and once per free (redis's
 * zmalloc): the untagged in-page block goes straight to the real function. */
CTS__PRELOAD_EXPORT size_t malloc_usable_size(void *p) {
  if (CTS_LIKELY(in_page(p) ? !tag_matches(p) : p && surely_untagged_far(p))) {
    size_t (*const f)(void *) = cts__real.malloc_usable_size;
    if (CTS_LIKELY(f != NULL)) return f(p);
  }
  return usable_size_slow(p);
}

/* The aligned allocators: sampled blocks are made with memalign; an alignment that is not
 * a power of two is left to the real function (which rejects or rounds it). */
static CTS_NOINLINE void *aligned_slow(size_t align, size_t size, void *frame, int which) {
  const uint64_t nsamples = cts__tracer_sample(size);
  if (nsamples && align && (align & (align - 1)) == 0)
    return alloc_sampled_aligned(align, size, nsamples, frame);
  if (which == 1) return cts__real.memalign(align, size);
  if (which == 0) {
    void *(*f)(size_t, size_t);
    cts__lazy_real(CTS__LAZY_aligned_alloc, &f, sizeof f);
    return f ? f(align, size) : NULL;
  }
  void *(*f)(size_t);
  cts__lazy_real(which == 2 ? CTS__LAZY_valloc : CTS__LAZY_pvalloc, &f, sizeof f);
  return f ? f(size) : NULL;
}

CTS__PRELOAD_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (CTS_UNLIKELY(cts__need_real())) {
    void *const p = arena_alloc(size, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  int (*real)(void **, size_t, size_t);
  cts__lazy_real(CTS__LAZY_posix_memalign, &real, sizeof real);
  if (!real) return ENOMEM;
  if (CTS_LIKELY(cts__tracer_skip(size)) || align % sizeof(void *) != 0 ||
      (align & (align - 1)) != 0)
    return real(out, align, size);
  const uint64_t nsamples = cts__tracer_sample(size);
  if (!nsamples) return real(out, align, size);
  const int e = errno;
  void *const p = alloc_sampled_aligned(align, size, nsamples, __builtin_frame_address(0));
  errno = e;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

/* How an aligned hook finds its real function: memalign's is found with malloc's (sampled
 * aligned blocks are made with it), the others' at their first call. */
#define FIND_EAGER(name, fn) (fn = cts__real.name)
#define FIND_LAZY(name, fn)  cts__lazy_real(CTS__LAZY_##name, &fn, sizeof fn)

#define ALIGNED_HOOK(name, params, call, align_expr, size_expr, which, find)       \
  CTS__PRELOAD_EXPORT void *name params {                                          \
    if (CTS_UNLIKELY(cts__need_real())) return arena_alloc(size_expr, align_expr); \
    void *(*real_)params;                                                          \
    find(name, real_);                                                             \
    if (!real_) {                                                                  \
      errno = ENOMEM;                                                              \
      return NULL;                                                                 \
    }                                                                              \
    if (CTS_LIKELY(cts__tracer_skip(size_expr))) return real_ call;                \
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

ALIGNED_HOOK(aligned_alloc, (size_t align, size_t size), (align, size), align, size, 0, FIND_LAZY)
ALIGNED_HOOK(memalign, (size_t align, size_t size), (align, size), align, size, 1, FIND_EAGER)
ALIGNED_HOOK(valloc, (size_t size), (size), page_size(), size, 2, FIND_LAZY)
ALIGNED_HOOK(pvalloc, (size_t size), (size), page_size(), pvalloc_size(size), 3, FIND_LAZY)

/* ---- the allocators' own entry points -------------------------------------------------------
 * A program linked with (or preloaded with) jemalloc, tcmalloc or mimalloc may hand a block
 * it got from malloc to that allocator's own functions: jemalloc's sdallocx, tcmalloc's
 * tc_free_sized, mimalloc's mi_free... (folly frees malloc'd blocks with sdallocx). A
 * sampled block reaching them would be freed at the wrong address. So every such function
 * that takes a block is interposed here: a tagged block is handled as ours (freed, resized
 * by our realloc, measured), any other pointer goes to the allocator's function, found with
 * real_symbol() on first use. In a process without that allocator the libc equivalent
 * runs instead (sdallocx as free, rallocx as realloc...). Functions that allocate
 * (mallocx, tc_malloc, mi_malloc) are not interposed, and their blocks are not traced:
 * programs and libraries that test whether such a function exists (folly tests mallocx)
 * to detect an allocator must not find it here. */
/* clang-format off */
#define OWN_FUNCTIONS(X)                                                                          \
  X(dallocx)                                                                                      \
  X(sdallocx) X(rallocx) X(xallocx) X(sallocx) X(mallocx) X(tc_free) X(tc_free_sized) X(tc_cfree) \
      X(tc_delete) X(tc_delete_sized) X(tc_delete_nothrow) X(tc_deletearray)                      \
          X(tc_deletearray_sized) X(tc_deletearray_nothrow) X(tc_realloc) X(tc_malloc_size)       \
              X(mi_free) X(mi_free_size) X(mi_free_aligned) X(mi_free_size_aligned) X(mi_realloc) \
                  X(mi_usable_size)
/* clang-format on */
#define OWN_INDEX(name) OWN_##name,
enum { OWN_FUNCTIONS(OWN_INDEX) OWN_COUNT };
/* The allocators' functions, then the seldom called real functions (cts__lazy_real). */
#define OWN_NAME(name) #name,
static const char *const own_names[OWN_COUNT + CTS__LAZY_COUNT] = {
    OWN_FUNCTIONS(OWN_NAME) CTS__LAZY_FUNCTIONS(OWN_NAME)};
static void *own_address[OWN_COUNT + CTS__LAZY_COUNT];
static int own_known[OWN_COUNT + CTS__LAZY_COUNT]; /* own_address[i] looked up */

/* The allocator's function `which` into *fn (a function pointer of fn_size bytes), or NULL
 * when the process has none. */
static void own_function(unsigned which, void *fn, size_t fn_size) {
  if (!__atomic_load_n(&own_known[which], __ATOMIC_ACQUIRE)) {
    cts__need_real();
    cts__guard_enter(); /* what dlsym allocates is not the program's */
    void *const sym = real_symbol(own_names[which], dlsym(RTLD_DEFAULT, own_names[which]));
    cts__guard_leave();
    __atomic_store_n(&own_address[which], sym, __ATOMIC_RELAXED);
    __atomic_store_n(&own_known[which], 1, __ATOMIC_RELEASE);
  }
  void *const sym = __atomic_load_n(&own_address[which], __ATOMIC_RELAXED);
  memcpy(fn, &sym, fn_size);
}

void cts__lazy_real(unsigned which, void *fn, size_t fn_size) {
  own_function(OWN_COUNT + which, fn, fn_size);
}

/* Frees p if it is a tagged block; false if it is not (p may be NULL). */
static bool free_if_tagged(void *p) {
  uint64_t info;
  if (!p || !tagged_info(p, &info)) return false;
  free_tagged(p, info);
  return true;
}

/* The usable size of p if it is a tagged block, else 0 in *size and false. */
static bool usable_if_tagged(void *p, size_t *size) {
  uint64_t info;
  if (!p || !tagged_info(p, &info)) return false;
  *size = tagged_usable_size(p, info);
  return true;
}

/* A function that frees its first argument, p. */
#define OWN_FREE(name, params, args)        \
  CTS__PRELOAD_EXPORT void name params;     \
  CTS__PRELOAD_EXPORT void name params {    \
    if (free_if_tagged(p)) return;          \
    void(*f) params;                        \
    own_function(OWN_##name, &f, sizeof f); \
    if (f)                                  \
      f args;                               \
    else                                    \
      free(p);                              \
  }

/* A function that returns the usable size of its first argument, p. */
#define OWN_SIZE(name, params, args)                   \
  CTS__PRELOAD_EXPORT size_t name params;              \
  CTS__PRELOAD_EXPORT size_t name params {             \
    size_t n;                                          \
    if (usable_if_tagged((void *)p, &n)) return n;     \
    size_t(*f) params;                                 \
    own_function(OWN_##name, &f, sizeof f);            \
    return f ? f args : malloc_usable_size((void *)p); \
  }

/* A realloc without flags. */
#define OWN_REALLOC(name)                                \
  CTS__PRELOAD_EXPORT void *name(void *p, size_t size);  \
  CTS__PRELOAD_EXPORT void *name(void *p, size_t size) { \
    if (p && is_tagged(p)) return realloc(p, size);      \
    void *(*f)(void *, size_t);                          \
    own_function(OWN_##name, &f, sizeof f);              \
    return f ? f(p, size) : realloc(p, size);            \
  }

OWN_FREE(dallocx, (void *p, int flags), (p, flags))
OWN_FREE(sdallocx, (void *p, size_t size, int flags), (p, size, flags))
OWN_SIZE(sallocx, (const void *p, int flags), (p, flags))
OWN_FREE(tc_free, (void *p), (p))
OWN_FREE(tc_free_sized, (void *p, size_t size), (p, size))
OWN_FREE(tc_cfree, (void *p), (p))
OWN_FREE(tc_delete, (void *p), (p))
OWN_FREE(tc_delete_sized, (void *p, size_t size), (p, size))
OWN_FREE(tc_delete_nothrow, (void *p, const void *nothrow), (p, nothrow))
OWN_FREE(tc_deletearray, (void *p), (p))
OWN_FREE(tc_deletearray_sized, (void *p, size_t size), (p, size))
OWN_FREE(tc_deletearray_nothrow, (void *p, const void *nothrow), (p, nothrow))
OWN_REALLOC(tc_realloc)
OWN_SIZE(tc_malloc_size, (void *p), (p))
OWN_FREE(mi_free, (void *p), (p))
OWN_FREE(mi_free_size, (void *p, size_t size), (p, size))
OWN_FREE(mi_free_aligned, (void *p, size_t align), (p, align))
OWN_FREE(mi_free_size_aligned, (void *p, size_t size, size_t align), (p, size, align))
OWN_REALLOC(mi_realloc)
OWN_SIZE(mi_usable_size, (const void *p), (p))

/* jemalloc's rallocx: flags may ask for an alignment or zeroed memory, which only its
 * mallocx knows how to give; a tagged block moves into such a block (untraced, as mallocx's
 * blocks are). Without jemalloc, flags are ignored: realloc. */
CTS__PRELOAD_EXPORT void *rallocx(void *p, size_t size, int flags);
CTS__PRELOAD_EXPORT void *rallocx(void *p, size_t size, int flags) {
  void *(*mallocx_fn)(size_t, int), *(*rallocx_fn)(void *, size_t, int);
  own_function(OWN_mallocx, &mallocx_fn, sizeof mallocx_fn);
  own_function(OWN_rallocx, &rallocx_fn, sizeof rallocx_fn);
  uint64_t info;
  if (!tagged_info(p, &info)) return rallocx_fn ? rallocx_fn(p, size, flags) : realloc(p, size);
  if (!mallocx_fn || flags == 0) return realloc(p, size);
  void *const q = mallocx_fn(size, flags);
  if (!q) return NULL;
  const size_t old = tagged_usable_size(p, info);
  memcpy(q, p, old < size ? old : size);
  free_tagged(p, info);
  return q;
}

/* jemalloc's xallocx resizes in place, and a tagged block never is: its size is kept. */
CTS__PRELOAD_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags);
CTS__PRELOAD_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags) {
  size_t n;
  if (usable_if_tagged(p, &n)) return n;
  size_t (*f)(void *, size_t, size_t, int);
  own_function(OWN_xallocx, &f, sizeof f);
  return f ? f(p, size, extra, flags) : malloc_usable_size(p);
}
