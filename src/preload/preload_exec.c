/* SPDX-License-Identifier: MIT */
/* libctfscope-preload.so, the exec family, dlopen and dlclose: when the traced process itself
 * execs, the trace is flushed and the new image gets the settings, with the next file name
 * (trace.execN.ctf) in MEMTRACE and CTFSCOPE_EXEC_BASE/_INDEX saying where the sequence
 * started (tracer.h, "Processes"); dlclose flushes before unloading a library. Also
 * `ctfscope record`'s notes pipe, on which an image says its trace lost its tail. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/held_fd.h"
#include "../common/setting_text.h"
#include "../tracer/elf_runtime.h"
#include "../tracer/exec_name.h"
#include "../tracer/program_path.h"
#include "preload_internal.h"

extern char **environ;

pid_t cts__traced_pid;
cts__exec_state_t cts__exec_state;
const char *const cts__kept_names[CTS__KEPT_COUNT] = {
    "MEMTRACE_RATE",   "MEMTRACE_CONTEXT",  "MEMTRACE_DROP",          "CTFSCOPE_UNWIND",
    "CTFSCOPE_WRITER", "CTFSCOPE_COMPRESS", "CTFSCOPE_STALL_TIMEOUT", "CTFSCOPE_MAX_FRAMES"};

/* `ctfscope record`'s notes: a pipe (CTFSCOPE_RECORD_NOTES=FD) on which an image whose
 * trace file lost its tail (the writer process died, the disk filled...) says so, for
 * record's summary. The tracer holds it (cts__tracer_notes_set: its identity is checked
 * before each use, and the writer process keeps a copy of its own). */
void cts__notes_from_environment(void) {
  const char *const v = cts__preload_env("CTFSCOPE_RECORD_NOTES");
  char number[32];
  if (!v || !cts_setting_trimmed(v, number, sizeof number)) return;
  char *end;
  const long fd = strtol(number, &end, 10);
  struct stat st;
  if (*end || fd < 0 || fd > 1 << 20 || fstat((int)fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  /* Out of the program's way (common/held_fd.h): record set it aside under its own
   * descriptor limit, which the program may have lowered since (`ulimit -S -n 32; exec
   * prog`). Close-on-exec: not handed to what forked children exec; an exec of this process
   * hands it on, by its new number (continued_environment). */
  const int aside = cts_fd_set_aside((int)fd);
  if (aside == fd) fcntl(aside, F_SETFD, FD_CLOEXEC);
  cts__tracer_notes_set(aside);
}

/* Tells record that this image's trace lost its tail; e: the tracer's error. */
void cts__note_lost_tail(int e) {
  if (cts__exec_state.file && cts__exec_state.memtrace)
    cts__tracer_note_loss(cts__exec_state.memtrace, e);
}

/* Whether this thread is the traced process itself: not a forked or vfork'd child, not
 * the tracer's own threads, and its settings fit (an exec can hand them on). One getpid. */
static bool is_the_traced_process(void) {
  return !cts__guarded() && cts__exec_state.usable && cts__traced_pid != 0 &&
         getpid() == cts__traced_pid;
}

/* Whether an exec by this thread continues the trace in the new image: the traced process,
 * while its session runs. */
static bool continues_trace(void) {
  return is_the_traced_process() && cts_tracer_is_active();
}

/* Whether `list` (an LD_PRELOAD value: names separated by spaces or colons, as ld.so reads
 * it) names this library: its path, or a file of the same name (another spelling of the
 * same build). */
/* Whether the LD_PRELOAD entry p[0, len) names the library at `path` (above). */
static bool entry_is_library(const char *p, size_t len, const char *path) {
  const char *const slash = strrchr(path, '/');
  const char *const base = slash ? slash + 1 : path;
  const size_t path_len = strlen(path), base_len = strlen(base);
  const char *const name_slash = memrchr(p, '/', len);
  const char *const name = name_slash ? name_slash + 1 : p;
  const size_t name_len = len - (size_t)(name - p);
  return (len == path_len && memcmp(p, path, len) == 0) ||
         (name_len == base_len && memcmp(name, base, name_len) == 0);
}

static bool preload_list_has(const char *list, const char *path) {
  for (const char *p = list; *p;) {
    const size_t len = strcspn(p, " :");
    if (entry_is_library(p, len, path)) return true;
    p += len;
    p += strspn(p, " :");
  }
  return false;
}

/* Writes `list` (an LD_PRELOAD value) without its entries naming the library at `self`,
 * joined by ':', at `out` (room for strlen(list) + 1 bytes); returns its length. */
static size_t list_without_library(char *out, const char *list, const char *self) {
  size_t k = 0;
  for (const char *p = list; *p;) {
    const size_t len = strcspn(p, " :");
    if (len && !entry_is_library(p, len, self)) {
      if (k) out[k++] = ':';
      memcpy(out + k, p, len);
      k += len;
    }
    p += len;
    p += strspn(p, " :");
  }
  out[k] = '\0';
  return k;
}

/* This library's path as the loader found it; NULL if unknown or unusable in a list. Looked
 * up once per image (cts__tracer_object_path: the loader's list; dladdr1 cost ~4 k
 * instructions): every exec and posix_spawn asks, some twice (environment_for_foreign_
 * program, then continued_preload), and the loader's name of a loaded library does not
 * change. Any thread: racing first callers store the same. */
static const char *library_path(void) {
  static _Atomic(const char *) path;
  static atomic_bool looked;
  if (atomic_load_explicit(&looked, memory_order_acquire))
    return atomic_load_explicit(&path, memory_order_relaxed);
  const char *const name = cts__tracer_object_path();
  const bool usable = name && !strpbrk(name, " :");
  atomic_store_explicit(&path, usable ? name : NULL, memory_order_relaxed);
  atomic_store_explicit(&looked, true, memory_order_release);
  return usable ? name : NULL;
}

/* The exec hooks' working memory, off the calling thread's stack: a program's path found
 * in PATH and its examination (~80 KiB with its dynamic entries read whole: only the pages
 * its bytes reach are touched; tracer/elf_runtime.h), then the new image's settings
 * (8 KiB). On the stack they took ~21 KiB where an untraced exec takes ~3 KiB, and
 * a thread or coroutine with a small stack (glibc's smallest, 16 KiB; makecontext's of
 * 16-32 KiB) that execs overflowed it. One static buffer, in pages that cost nothing until
 * an exec touches them (CTS__COLD_BSS); held from the examination until the new
 * environment is built, never across the exec itself (a vfork'd child that execs shares
 * it with its parent, and never comes back to give it up). */
typedef union {
  struct {
    char found[PATH_MAX];
    cts__elf_scratch_t elf;
  } examine;
  struct {
    char next[CTS__SETTING_SIZE];
    char preload[CTS__SETTING_SIZE];
  } environment;
} exec_scratch_t;

/* On a page boundary: an image's exec touches the fewest fresh pages (a minor fault each):
 * the 8 KiB head on two, not three. */
static CTS__COLD_BSS _Alignas(4096) exec_scratch_t exec_scratch;
static atomic_flag exec_scratch_busy = ATOMIC_FLAG_INIT;

/* The static scratch, or, while another thread holds it (two threads exec'ing at once, a
 * signal handler's exec during one, or a fork's child that copied it held), a mapping of
 * its own: two system calls more, for that exec alone. NULL without memory: the exec goes
 * ahead as when its environment cannot be built. Async-signal-safe. */
static exec_scratch_t *exec_scratch_take(void) {
  if (!atomic_flag_test_and_set_explicit(&exec_scratch_busy, memory_order_acquire))
    return &exec_scratch;
  void *const map = mmap(NULL, sizeof(exec_scratch_t), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return map == MAP_FAILED ? NULL : map;
}

/* Gives back what exec_scratch_take gave (NULL: nothing); errno kept. */
static void exec_scratch_give(exec_scratch_t *scratch) {
  if (!scratch) return;
  if (scratch == &exec_scratch) {
    atomic_flag_clear_explicit(&exec_scratch_busy, memory_order_release);
    return;
  }
  const int e = errno;
  munmap(scratch, sizeof *scratch);
  errno = e;
}

static const char *continued_preload(char *const envp[], char *buf, size_t size) {
  const char *const self = library_path();
  if (!self) return NULL;
  const char *old = NULL;
  for (size_t i = 0; envp && envp[i] && !old; i++)
    if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0) old = envp[i] + 11;
  if (old && preload_list_has(old, self)) return NULL;
  const int n =
      old && old[0] ? snprintf(buf, size, "%s:%s", self, old) : snprintf(buf, size, "%s", self);
  return n > 0 && (size_t)n < size ? buf : NULL;
}

/* Whether the image an exec from here starts is a child subreaper: this process is one (as
 * this image knows it, cts__program_subreaper) and the exec is this process's, not a vfork'd
 * or forked child's (a child is no subreaper; a vfork'd one shares this memory). Told on
 * under a filter (CTFSCOPE_EXEC_SECCOMP=2), where the next image does not ask prctl: taken
 * for no subreaper, it got a writer process, handed to it as its child by the exit of the
 * writer's intermediate. */
static bool exec_keeps_subreaper(void) {
  return __atomic_load_n(&cts__program_subreaper, __ATOMIC_RELAXED) && getpid() == cts__traced_pid;
}

/* Builds the new image's environment: envp without our variables, then ours with the next
 * trace's name. One block from the real malloc (untraced): the exec replaces it, or the
 * caller frees it if the exec fails. NULL if it cannot be built (the exec then goes ahead
 * with the environment it was given, untraced). `scratch` holds the settings meanwhile
 * (NULL: none could be had, nor the environment built). */
static char **continued_environment(char *const envp[], exec_scratch_t *scratch) {
  if (!scratch) return NULL;
  char *const next = scratch->environment.next;
  const size_t next_size = sizeof scratch->environment.next;
  if (cts__exec_state.file) {
    if (!cts__exec_trace_name(next, next_size, cts__exec_state.base, cts__exec_state.index + 1)) {
      /* Said: the new image's trace is lost (a base near PATH_MAX long). */
      cts__preload_log(
          "the trace of the image after the exec cannot be named: \"%.120s...\" "
          "with \".exec%u\" is longer than %zu bytes; that image is not traced",
          cts__exec_state.base, cts__exec_state.index + 1, next_size - 1);
      return NULL;
    }
  } else {
    snprintf(next, next_size, "%s", cts__exec_state.memtrace);
  }
  char index[16];
  snprintf(index, sizeof index, "%u", cts__exec_state.index + 1);
  const char *ours[2 * (7 + CTS__KEPT_COUNT)] = {
      "MEMTRACE", next, "CTFSCOPE_EXEC_BASE", cts__exec_state.base, "CTFSCOPE_EXEC_INDEX", index};
  size_t nours = 3;
  /* This machine's time-stamp counter, as this image found it (tracer_internal.h). */
  if (cts__tsc_usable_known >= 0) {
    ours[2 * nours] = "CTFSCOPE_EXEC_TSC";
    ours[2 * nours + 1] = cts__tsc_usable_known ? "1" : "0";
    nours++;
  }
  /* A seccomp filter this image knows of (tracer_internal.h): the next starts without
   * asking prctl, which the filter may kill on. */
  if (__atomic_load_n(&cts__seccomp_in_force, __ATOMIC_RELAXED)) {
    ours[2 * nours] = "CTFSCOPE_EXEC_SECCOMP";
    ours[2 * nours + 1] = exec_keeps_subreaper() ? "2" : "1";
    nours++;
  }
  char notes_fd[16];
  const int notes = cts__tracer_notes_fd();
  if (notes >= 0 && fcntl(notes, F_SETFD, 0) == 0) { /* exec_failed sets it back */
    snprintf(notes_fd, sizeof notes_fd, "%d", notes);
    ours[2 * nours] = "CTFSCOPE_RECORD_NOTES";
    ours[2 * nours + 1] = notes_fd;
    nours++;
  }
  const char *const ld_preload =
      continued_preload(envp, scratch->environment.preload, sizeof scratch->environment.preload);
  if (ld_preload) {
    ours[2 * nours] = "LD_PRELOAD";
    ours[2 * nours + 1] = ld_preload;
    nours++;
  }
  for (size_t i = 0; i < CTS__KEPT_COUNT; i++) {
    if (cts__exec_state.kept[i][0]) {
      ours[2 * nours] = cts__kept_names[i];
      ours[2 * nours + 1] = cts__exec_state.kept[i];
      nours++;
    }
  }
  size_t count = 0, bytes = 0;
  for (size_t i = 0; envp && envp[i]; i++) count++;
  for (size_t i = 0; i < nours; i++) bytes += strlen(ours[2 * i]) + strlen(ours[2 * i + 1]) + 2;
  cts__guard_enter();
  char **const env = cts__real.malloc((count + nours + 1) * sizeof *env + bytes);
  cts__guard_leave();
  if (!env) return NULL;
  char *strings = (char *)(env + count + nours + 1);
  size_t k = 0;
  for (size_t i = 0; i < count; i++)
    if (!cts__preload_is_setting(envp[i]) &&
        !(ld_preload && strncmp(envp[i], "LD_PRELOAD=", 11) == 0))
      env[k++] = envp[i];
  for (size_t i = 0; i < nours; i++) {
    env[k++] = strings;
    strings += sprintf(strings, "%s=%s", ours[2 * i], ours[2 * i + 1]) + 1;
  }
  env[k] = NULL;
  return env;
}

/* Whether this thread may flush: not the tracer's own threads (the writer thread would wait
 * for itself), only the traced process. */
static bool may_flush(void) {
  return !cts__guarded() && getpid() == cts__traced_pid && cts_tracer_is_active();
}

/* Before dlclose (and an exec that could not hand over): the trace holds everything up to
 * here. */
static void flush_trace(void) {
  if (!may_flush()) return;
  const int e = cts_tracer_flush();
  if (e && e != CTS_E_STATE && e != -ETIMEDOUT) cts__note_lost_tail(e);
}

/* Before an exec. With a writer process, the image's module list goes to it and the exec
 * goes ahead at once: the writer finishes this trace after the exec, as it would after a
 * kill, and `record` waits for it (the file's flock). Waiting for a flush here cost each
 * image of an exec chain 5-15 ms at rate 1 (the writer calibrating its clock and resolving
 * the image's codes meanwhile). With a writer thread, which the exec ends, a flush. */
static void before_exec(void) {
  if (!may_flush()) return;
  int e = 0;
  /* No writer process made yet (the lazy writer): the image finishes its own trace, in a
   * few system calls; a failed exec takes that back (exec_failed). */
  if (cts__session_exec_end()) return;
  /* The program closed the pipe by which the writer process sees an exec (closefrom...):
   * the trace ends here, complete, as at the program's exit. A failed exec then goes on
   * untraced. */
  if (cts__writer_watch_lost()) {
    e = cts_tracer_stop();
    if (e && e != CTS_E_STATE) cts__note_lost_tail(e);
    return;
  }
  if (!cts__tracer_exec_handoff(&e)) {
    flush_trace();
    return;
  }
  if (e && e != CTS_E_STATE) cts__note_lost_tail(e);
}

/* Set by chroot when this library is not at its path in the new root
 * (forget_the_library_out_of_reach): from then on every exec and posix_spawn takes it out
 * of the environment it is given, which the program may have copied before the chroot.
 * Nothing is paid before a chroot. Inherited by forked children, as the root is. */
static bool library_out_of_reach;

/* Why an exec's program runs without this library (environment_for_foreign_program), and
 * the descriptor its examination left open (cts__elf_examine: closed by a successful exec,
 * by close_examined after a failed one). */
typedef struct {
  int fd;
  cts__elf_verdict_t verdict;
  char runtime[64];
} examined_program_t;

/* Closes what cts__elf_examine left open; errno kept (the failed exec's). */
static void close_examined(const examined_program_t *examined) {
  if (examined->fd < 0) return;
  const int e = errno;
  syscall(SYS_close, examined->fd);
  errno = e;
}

/* For an exec of `path` (execvp and posix_spawnp: `by_path_search`, a bare name searched
 * in PATH): envp without this library in its LD_PRELOAD when `path` is a program it cannot
 * be loaded into (another ELF kind) or that links a sanitizer runtime which must come
 * first (libasan: it aborts at its start otherwise; tracer/elf_runtime.h), or when the
 * library is out of reach after a chroot, in one block from the real malloc (the exec
 * replaces it; exec_failed frees it). NULL otherwise: envp's LD_PRELOAD does not name the
 * library (no system call then), the program is loadable, or no memory. One open and read
 * of the program answers both questions, in `scratch` (NULL: none could be had, no
 * examination); its descriptor is left at examined->fd. */
static char **environment_for_foreign_program(const char *path, char *const envp[],
                                              bool by_path_search, examined_program_t *examined,
                                              exec_scratch_t *scratch) {
  examined->fd = -1;
  examined->verdict = CTS__ELF_LOADABLE;
  if (!path || !path[0]) return NULL;
  const char *const self = library_path();
  if (!self) return NULL;
  size_t count = 0, at = (size_t)-1;
  for (; envp && envp[count]; count++)
    if (at == (size_t)-1 && strncmp(envp[count], "LD_PRELOAD=", 11) == 0) at = count;
  if (at == (size_t)-1 || !preload_list_has(envp[at] + 11, self)) return NULL;
  if (!library_out_of_reach) {
    if (!scratch) return NULL;
    /* A bare name searched in this process's PATH (not the new image's), as glibc's
     * execvp and posix_spawnp do: paid only where the exec hands this library on. */
    char *const found = scratch->examine.found;
    const char *const program = by_path_search && !strchr(path, '/') ? found : path;
    if (program == found &&
        !cts__program_on_path(cts__preload_env("PATH"), path, found, sizeof scratch->examine.found))
      return NULL; /* the exec fails as it would have */
    examined->verdict = cts__elf_examine_in(program, &examined->fd, examined->runtime,
                                            sizeof examined->runtime, &scratch->examine.elf);
    if (examined->verdict == CTS__ELF_LOADABLE) return NULL;
  }
  const size_t entry = strlen(envp[at]) + 1;
  cts__guard_enter();
  char **const env = cts__real.malloc((count + 1) * sizeof *env + entry);
  cts__guard_leave();
  if (!env) return NULL;
  char *const kept = (char *)(env + count + 1);
  memcpy(kept, "LD_PRELOAD=", 11);
  list_without_library(kept + 11, envp[at] + 11, self);
  for (size_t i = 0; i < count; i++) env[i] = i == at ? kept : envp[i];
  env[count] = NULL;
  return env;
}

/* For an exec that does not continue this image's trace (a forked child's, or after
 * tracing stopped) but hands the library on in envp's LD_PRELOAD: envp with
 * CTFSCOPE_EXEC_SECCOMP=1 when this image knows a seccomp filter to be in force
 * (tracer_internal.h), in one block from the real malloc (the exec replaces it; the caller
 * frees it after a failed one); the image exec'd then asks no prctl at its start, which the
 * filter may kill on. NULL otherwise (no filter known: nothing is paid), when envp says so
 * already, or without memory. */
static char **environment_under_a_filter(char *const envp[]) {
  if (!__atomic_load_n(&cts__seccomp_in_force, __ATOMIC_RELAXED)) return NULL;
  const char *const setting =
      exec_keeps_subreaper() ? "CTFSCOPE_EXEC_SECCOMP=2" : "CTFSCOPE_EXEC_SECCOMP=1";
  const char *const self = library_path();
  if (!self) return NULL;
  size_t count = 0;
  bool hands_on = false;
  for (; envp && envp[count]; count++) {
    if (strcmp(envp[count], setting) == 0) return NULL;
    if (strncmp(envp[count], "LD_PRELOAD=", 11) == 0 && !hands_on)
      hands_on = preload_list_has(envp[count] + 11, self);
  }
  if (!hands_on) return NULL;
  cts__guard_enter();
  char **const env = cts__real.malloc((count + 2) * sizeof *env);
  cts__guard_leave();
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < count; i++)
    if (strncmp(envp[i], "CTFSCOPE_EXEC_SECCOMP=", 22) != 0) env[k++] = envp[i];
  env[k++] = (char *)setting;
  env[k] = NULL;
  return env;
}

/* Frees what environment_under_a_filter gave (NULL: nothing); errno kept. */
static void free_environment(char **env) {
  if (!env) return;
  const int e = errno;
  cts__real.free(env);
  errno = e;
}

/* After a failed exec of an image that continued its trace (continuing_exec): tracing goes
 * on in this image (when it was active), record's notes pipe is close-on-exec again
 * (continued_environment cleared it), env (NULL: none) is freed. -1, errno kept. */
static int exec_failed(char **env, bool was_active) {
  const int e = errno;
  if (was_active) {
    cts__session_exec_resume();
    cts__tracer_exec_handoff_cancel();
    cts__tracer_exec_pending(false);
  }
  const int notes = cts__tracer_notes_fd();
  if (notes >= 0) fcntl(notes, F_SETFD, FD_CLOEXEC);
  if (env) cts__real.free(env);
  errno = e;
  return -1;
}

/* What say_sanitizer_untraced says of `path`, into text (size bytes). */
static void sanitizer_untraced_text(char *text, size_t size, const char *path,
                                    const examined_program_t *examined) {
  snprintf(text, size,
           "%.200s links %s (a sanitizer), which must come first among its libraries: it "
           "ran untraced",
           path, examined->runtime);
}

/* Where an exec's word that its program runs untraced went (said before the exec, which
 * may still fail). */
typedef enum {
  NOT_SAID,       /* nowhere */
  SAID_TO_RECORD, /* record's notes pipe: one note, said after the program's end */
  SAID_ON_STDERR  /* this image's stderr (no record), at once */
} untraced_said_t;

/* Says that `path` links a sanitizer runtime and runs untraced: to `record` (its notes
 * pipe: said once, after the program's end, not on the program's stderr), or, without
 * record, on stderr when this image is traced (a forked child's exec says nothing there:
 * its stderr is the program's). Said before the exec, which may still fail:
 * unsay_untraced then takes it back. */
static untraced_said_t say_sanitizer_untraced(const char *path,
                                              const examined_program_t *examined) {
  char text[400];
  sanitizer_untraced_text(text, sizeof text, path, examined);
  if (cts__tracer_note_text(text)) return SAID_TO_RECORD;
  if (!continues_trace()) return NOT_SAID;
  cts__preload_log("%s", text);
  return SAID_ON_STDERR;
}

/* After the exec said to run untraced failed (ENOENT, EACCES, E2BIG...): record's note
 * taken back, so that record counts the programs that ran; a line said on stderr
 * followed by one that says the program did not run (a line once printed cannot be taken
 * back, and the word could not wait: after a successful exec this library is gone).
 * errno kept. */
static void unsay_untraced(const char *path, const examined_program_t *examined,
                           untraced_said_t said) {
  const int e = errno;
  char text[400];
  if (said == SAID_TO_RECORD) {
    sanitizer_untraced_text(text, sizeof text, path, examined);
    cts__tracer_note_retraction(text);
  } else if (said == SAID_ON_STDERR) {
    cts__preload_log("%.200s did not run after all: its exec failed (%s)", path, strerror(e));
  }
  errno = e;
}

/* An exec of a program this library cannot be loaded into, or must not be (a sanitizer's
 * runtime first), with `env` (environment_for_foreign_program): this image's trace ends as
 * at any exec, and the new one runs untraced, said when this image was traced. `said`:
 * where exec_with said so already, taken back if the exec fails. */
static int exec_foreign(const char *path, char *const argv[], char **env,
                        const examined_program_t *examined, untraced_said_t said,
                        int (*real_exec)(const char *, char *const[], char *const[])) {
  if (continues_trace()) {
    if (examined->verdict == CTS__ELF_RUNTIME_FIRST) {
      said = say_sanitizer_untraced(path, examined);
    } else {
      cts__preload_log(
          "%.200s is a program of another kind (32-bit?): this library cannot be "
          "loaded into it; it runs untraced",
          path);
      said = SAID_ON_STDERR;
    }
    before_exec();
    cts__tracer_exec_pending(true);
    real_exec(path, argv, env);
    unsay_untraced(path, examined, said);
    return exec_failed(env, true);
  }
  real_exec(path, argv, env);
  unsay_untraced(path, examined, said);
  const int e = errno;
  cts__real.free(env);
  errno = e;
  return -1;
}

/* An exec of the traced process: the new image traces into the next trace's name. Also
 * after the session stopped (the program closed the writer's pipe and an exec failed, so
 * the trace ended there): the environment the program hands may still hold this image's
 * MEMTRACE (one it read from /proc/self/environ, or wrote itself), and the new image then
 * truncated the stopped image's trace, its good part lost, and wrote its own there; there
 * is nothing to flush then (the stopped trace is complete). Returns only if the exec
 * failed. */
static int continuing_exec(const char *path, char *const argv[], char *const envp[],
                           exec_scratch_t *scratch,
                           int (*real_exec)(const char *, char *const[], char *const[])) {
  const bool active = cts_tracer_is_active();
  if (active) {
    before_exec();
    cts__tracer_exec_pending(true);
  }
  char **const env = continued_environment(envp, scratch);
  exec_scratch_give(scratch);
  real_exec(path, argv, env ? env : envp);
  return exec_failed(env, active);
}

/* execve and execvpe: `path` run by `real_exec`, which searches PATH for a bare name when
 * by_path_search. */
static int exec_with(const char *path, char *const argv[], char *const envp[], bool by_path_search,
                     int (*real_exec)(const char *, char *const[], char *const[])) {
  cts__writer_process_reap(); /* its intermediate process: no stray child for the next image */
  examined_program_t examined;
  exec_scratch_t *const scratch = exec_scratch_take();
  char **const foreign =
      environment_for_foreign_program(path, envp, by_path_search, &examined, scratch);
  int result;
  if (foreign) {
    exec_scratch_give(scratch);
    const untraced_said_t said = examined.verdict == CTS__ELF_RUNTIME_FIRST && !continues_trace()
                                     ? say_sanitizer_untraced(path, &examined)
                                     : NOT_SAID;
    result = exec_foreign(path, argv, foreign, &examined, said, real_exec);
  } else if (!is_the_traced_process()) {
    exec_scratch_give(scratch);
    char **const filtered = environment_under_a_filter(envp);
    result = real_exec(path, argv, filtered ? filtered : envp);
    free_environment(filtered);
  } else {
    result = continuing_exec(path, argv, envp, scratch, real_exec);
  }
  close_examined(&examined);
  return result;
}

CTS__PRELOAD_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  cts__need_real();
  if (!cts__real.execve) return errno = ENOSYS, -1;
  return exec_with(path, argv, envp, false, cts__real.execve);
}

CTS__PRELOAD_EXPORT int execv(const char *path, char *const argv[]) {
  return execve(path, argv, environ);
}

CTS__PRELOAD_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  cts__need_real();
  if (!cts__real.execvpe) return errno = ENOSYS, -1;
  return exec_with(file, argv, envp, true, cts__real.execvpe);
}

CTS__PRELOAD_EXPORT int execvp(const char *file, char *const argv[]) {
  return execvpe(file, argv, environ);
}

/* fexecve and execveat: glibc's fexecve makes the execveat system call itself, past the
 * interposed execve, so neither was seen: the next image lost its trace without a word (its
 * MEMTRACE had been taken out of the environment), and a 32-bit program's loader printed
 * "wrong ELF class: ELFCLASS64" on its stderr. They go through exec_with as execve does:
 * the program is examined under a path that names it (/proc/self/fd/N for a descriptor,
 * which opens the same file, close-on-exec or not), and exec'd by the execveat system call
 * with the caller's own arguments (exec_at_pending, on this thread: exec_with calls it
 * before it returns). */
typedef struct {
  int dirfd, flags;
  const char *path;
} exec_at_t;
static CTS__TLS exec_at_t exec_at_pending_call;

static int exec_at_pending(const char *name, char *const argv[], char *const envp[]) {
  (void)name;
  const exec_at_t *const c = &exec_at_pending_call;
  /* Not by syscall(): the hook there hands an execveat back to execveat (below). */
  return (int)cts__raw_system_call(SYS_execveat, c->dirfd, (long)c->path, (long)argv, (long)envp,
                                   c->flags, 0);
}

static int exec_at(int dirfd, const char *path, int flags, const char *name, char *const argv[],
                   char *const envp[]) {
  cts__need_real();
  exec_at_pending_call = (exec_at_t){.dirfd = dirfd, .flags = flags, .path = path};
  return exec_with(name, argv, envp, false, exec_at_pending);
}

CTS__PRELOAD_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  char name[40];
  snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
  return exec_at(fd, "", AT_EMPTY_PATH, name, argv, envp);
}

CTS__PRELOAD_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
                                 char *const envp[], int flags) {
  /* The name the examination opens: the path itself when absolute or relative to the
   * working directory, else through the directory's descriptor. */
  char name[PATH_MAX];
  if (path[0] == '/' || (dirfd == AT_FDCWD && path[0]))
    snprintf(name, sizeof name, "%s", path);
  else if (!path[0] && (flags & AT_EMPTY_PATH))
    snprintf(name, sizeof name, "/proc/self/fd/%d", dirfd);
  else
    snprintf(name, sizeof name, "/proc/self/fd/%d/%s", dirfd, path);
  return exec_at(dirfd, path, flags, name, argv, envp);
}

/* preload_internal.h. The arguments as the kernel takes them: ints in the low halves. */
long cts__exec_system_call(long number, long a1, long a2, long a3, long a4, long a5) {
  if (number == SYS_execve) return execve((const char *)a1, (char *const *)a2, (char *const *)a3);
  if (!a2) /* glibc's execveat declares its path nonnull: the kernel's answer, EFAULT */
    return cts__raw_system_call(number, a1, a2, a3, a4, a5, 0);
  return execveat((int)a1, (const char *)a2, (char *const *)a3, (char *const *)a4, (int)a5);
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

CTS__PRELOAD_EXPORT int execl(const char *path, const char *arg, ...) {
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

CTS__PRELOAD_EXPORT int execlp(const char *file, const char *arg, ...) {
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

CTS__PRELOAD_EXPORT int execle(const char *path, const char *arg, ...) {
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

/* posix_spawn and posix_spawnp: glibc's exec the child by their own internal execve, past
 * the interposed one: a 32-bit program spawned so (Python's os.posix_spawn) had its loader
 * print the "wrong ELF class" line, and an AddressSanitizer program aborted. Such a program
 * (a path, or a bare name found by PATH for posix_spawnp; tracer/elf_runtime.h) gets the
 * environment without the library; any other the one given. The child is a new process,
 * never traced (as a forked child's exec). */
typedef int (*posix_spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                              const posix_spawnattr_t *, char *const[], char *const[]);

static int spawn_with(unsigned which, pid_t *pid, const char *path,
                      const posix_spawn_file_actions_t *actions, const posix_spawnattr_t *attr,
                      char *const argv[], char *const envp[]) {
  cts__need_real();
  posix_spawn_fn real;
  cts__lazy_real(which, &real, sizeof real);
  if (!real) return ENOSYS;
  examined_program_t examined;
  exec_scratch_t *const scratch = exec_scratch_take();
  char **const foreign = environment_for_foreign_program(
      path, envp, which == CTS__LAZY_posix_spawnp, &examined, scratch);
  exec_scratch_give(scratch);
  close_examined(&examined); /* the child's exec must not be the one that closes it */
  char **const filtered = foreign ? NULL : environment_under_a_filter(envp);
  const int result = real(pid, path, actions, attr, argv,
                          foreign    ? foreign
                          : filtered ? filtered
                                     : envp);
  /* After the spawn: glibc's posix_spawn returns the child's exec error, so nothing is
   * said of a program that did not run. */
  if (result == 0 && examined.verdict == CTS__ELF_RUNTIME_FIRST)
    (void)say_sanitizer_untraced(path, &examined);
  if (foreign) cts__real.free(foreign);
  free_environment(filtered);
  return result;
}

CTS__PRELOAD_EXPORT int posix_spawn(pid_t *pid, const char *path,
                                    const posix_spawn_file_actions_t *actions,
                                    const posix_spawnattr_t *attr, char *const argv[],
                                    char *const envp[]) {
  return spawn_with(CTS__LAZY_posix_spawn, pid, path, actions, attr, argv, envp);
}

CTS__PRELOAD_EXPORT int posix_spawnp(pid_t *pid, const char *file,
                                     const posix_spawn_file_actions_t *actions,
                                     const posix_spawnattr_t *attr, char *const argv[],
                                     char *const envp[]) {
  return spawn_with(CTS__LAZY_posix_spawnp, pid, file, actions, attr, argv, envp);
}

/* dlopen with RTLD_DEEPBIND gives the library its own dependencies' symbols before the
 * global scope's: its malloc, free and realloc are the C library's, not this library's,
 * and a block the program allocated here and the library frees there (a sampled block
 * starts past its header) aborts the program, "double free or corruption" (PHP loads its
 * extensions so: php -r at rate 1 died in pdo.so's start). The flag is dropped, once said,
 * as heaptrack does; every other call is passed on unchanged. glibc's dlopen picks the
 * search path (the caller's RUNPATH, $ORIGIN) and namespace by its return address, so the
 * real dlopen must be reached by a jump that leaves it the program's: on x86-64 a stub in
 * assembly (below) asks cts__dlopen_prepare for the function and the mode, then jumps;
 * elsewhere dlopen is not interposed (a C sibling call is not guaranteed). */
typedef void *dlopen_function(const char *, int);

/* The real dlopen (NULL if none), with RTLD_DEEPBIND taken out of *mode. */
dlopen_function *cts__dlopen_prepare(const char *file, int *mode) CTS__PRELOAD_HIDDEN;
dlopen_function *cts__dlopen_prepare(const char *file, int *mode) {
  if (CTS_UNLIKELY(*mode & RTLD_DEEPBIND)) {
    *mode &= ~RTLD_DEEPBIND;
    static int said;
    if (getpid() == cts__traced_pid && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
      cts__preload_log(
          "dlopen(\"%s\") asked for RTLD_DEEPBIND, which would give the library "
          "the C library's malloc and free past the tracer (a block freed "
          "across aborts the program): loaded without it",
          file ? file : "(null)");
  }
  cts__need_real();
  dlopen_function *real;
  cts__lazy_real(CTS__LAZY_dlopen, &real, sizeof real);
  return real;
}

#if defined(__x86_64__)
/* dlopen(file, mode): both arguments kept on the stack (aligned to 16 for the call), the
 * saved mode's slot handed to cts__dlopen_prepare, then a jump to the real dlopen with the
 * caller's return address still on top. */
__asm__(
    ".text\n"
    ".globl dlopen\n"
    ".type dlopen, @function\n"
    ".p2align 4\n"
    "dlopen:\n"
    ".cfi_startproc\n"
    "  pushq %rdi\n"
    ".cfi_adjust_cfa_offset 8\n"
    "  pushq %rsi\n"
    ".cfi_adjust_cfa_offset 8\n"
    "  subq $8, %rsp\n"
    ".cfi_adjust_cfa_offset 8\n"
    "  leaq 8(%rsp), %rsi\n"
    "  call cts__dlopen_prepare\n"
    "  addq $8, %rsp\n"
    ".cfi_adjust_cfa_offset -8\n"
    "  popq %rsi\n"
    ".cfi_adjust_cfa_offset -8\n"
    "  popq %rdi\n"
    ".cfi_adjust_cfa_offset -8\n"
    "  testq %rax, %rax\n"
    "  jz 1f\n"
    "  jmp *%rax\n"
    "1:\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size dlopen, .-dlopen\n");
#endif

/* dlclose: flush first, so that the writer thread resolves the codes seen so far while
 * their library is still mapped (the symbolizer keeps them after that). */
CTS__PRELOAD_EXPORT int dlclose(void *handle) {
  cts__need_real();
  flush_trace();
  int (*real)(void *);
  cts__lazy_real(CTS__LAZY_dlclose, &real, sizeof real);
  if (!real) return -1;
  return real(handle);
}

/* prctl: a program that installs a seccomp filter (or enters strict mode) first has its
 * lazy session's writer process made (cts__tracer_before_confinement). A program that makes
 * itself a child subreaper (init-like programs do, first thing
 * in main) must not be handed the writer process as its child by the exit of the writer's
 * intermediate, which the program does not wait for at its start (an image that is a
 * subreaper already gets a writer thread: cts__process_writer_fits). Every other option
 * goes straight to the system call, as glibc's own prctl does: its four further arguments
 * are read whether given or not. */
CTS__PRELOAD_EXPORT int prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  const unsigned long arg2 = va_arg(ap, unsigned long), arg3 = va_arg(ap, unsigned long),
                      arg4 = va_arg(ap, unsigned long), arg5 = va_arg(ap, unsigned long);
  va_end(ap);
  if (option == PR_SET_CHILD_SUBREAPER && arg2 != 0 && !cts__guarded() &&
      getpid() == cts__traced_pid)
    cts__tracer_before_subreaper();
  /* A sandbox's filter may forbid the clone and exec that make the writer process. */
  if (option == PR_SET_SECCOMP) cts__tracer_before_seccomp();
  const int r = (int)syscall(SYS_prctl, option, arg2, arg3, arg4, arg5);
  /* kept for the images it execs under a filter (exec_keeps_subreaper) */
  if (option == PR_SET_CHILD_SUBREAPER && r == 0 && getpid() == cts__traced_pid)
    __atomic_store_n(&cts__program_subreaper, arg2 != 0, __ATOMIC_RELAXED);
  return r;
}

/* After a chroot: if this library is not at its path in the new root, it is taken out of
 * LD_PRELOAD in `environ` (a copy of the entry without it), and no exec continues the
 * trace: every dynamically linked image the program or its children exec there had the
 * loader print "ERROR: ld.so: object ... cannot be preloaded ...: ignored." on its
 * standard error. An environment the program copied before the chroot is cleaned by the
 * exec hooks (library_out_of_reach). */
static void forget_the_library_out_of_reach(void) {
  const char *const self = library_path();
  if (!self || access(self, R_OK) == 0) return;
  cts__exec_state.usable = false;
  library_out_of_reach = true;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "LD_PRELOAD=", 11) != 0) continue;
    const char *const list = *e + 11;
    cts__guard_enter();
    char *const kept = cts__real.malloc(11 + strlen(list) + 1);
    cts__guard_leave();
    if (!kept) return;
    memcpy(kept, "LD_PRELOAD=", 11);
    list_without_library(kept + 11, list, self);
    *e = kept;
  }
}

/* chroot: the writer executable (and the libraries it loads) may be outside the new root;
 * a waiting lazy session's writer is made first (cts__tracer_before_confinement). The
 * system call, as glibc's chroot is. */
CTS__PRELOAD_EXPORT int chroot(const char *path) {
  cts__tracer_before_confinement();
  const int result = (int)syscall(SYS_chroot, path);
  if (result == 0) forget_the_library_out_of_reach();
  return result;
}

/* _exit and _Exit end the process without the destructors (dash and other shells end so,
 * and most forked children): an image whose session made no writer process (the lazy
 * writer) finishes its trace here, as preload_fini does at exit. A forked or vfork'd child
 * is not the traced process and goes straight out. glibc's exit() reaches the system call
 * by its own path, after the destructors. */
static _Noreturn void exit_at_once(int status) {
  if (!cts__guarded() && cts__traced_pid != 0 && getpid() == cts__traced_pid &&
      cts__tracer_writer_waiting()) {
    cts__guard_enter();
    cts__session_end_at_exit();
  }
  for (;;) syscall(SYS_exit_group, status);
}

CTS__PRELOAD_EXPORT _Noreturn void _exit(int status) {
  exit_at_once(status);
}

CTS__PRELOAD_EXPORT _Noreturn void _Exit(int status) {
  exit_at_once(status);
}
