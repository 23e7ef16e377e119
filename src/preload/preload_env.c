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
 *   CTFSCOPE_MAX_FRAMES=N frames kept per backtrace, 1 to 1024 (default 256); a deeper
 *                         stack ends in a marker frame saying so (docs/tracing.md)
 *   CTFSCOPE_WRITER=W     where the trace is encoded and written: process (default for
 *                         files and tcp://, see tracer.h "The writer process") or thread
 *   CTFSCOPE_COMPRESS=C   zstd (level 3), zstd:LEVEL (1-19) or none (default): the writer
 *                         compresses a file trace (tracer.h, "Compression")
 *   CTFSCOPE_STALL_TIMEOUT=S  tcp:// and listen://: seconds a peer may take nothing before
 *                         tracing stops (default 5; 0: wait for ever; tracer.h "TCP sinks")
 *
 * A bad setting, or a collector that cannot be reached, prints one line on stderr and
 * leaves the program untraced and otherwise untouched. These settings (and task
 * tracing's, preload_pthread.c) are removed from `environ` once read, by editing the array
 * itself ("forget_settings" below): forked children and what they exec are not traced
 * (memtrace removes MEMTRACE too); a forked child is not traced (tracer.h). LD_PRELOAD is
 * left as it is: the children load the library, which stays inert without MEMTRACE. When
 * the traced process itself execs, the exec family flushes the trace and hands the new
 * image the settings, with the next file name (trace.execN.ctf) in MEMTRACE and
 * CTFSCOPE_EXEC_BASE/_INDEX saying where the sequence started (tracer.h, "Processes").
 * dlclose flushes before unloading a library. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/held_fd.h"
#include "../common/setting_text.h"
#include "../tracer/zsink.h"
#include "common/check.h"
#include "os/net.h"
#include "preload_internal.h"

extern char **environ;

/* The value in environ entry `entry` if it sets variable `name`, else NULL. Compared by
 * hand: with -fno-builtin a strncmp is a call into libc, for entries that almost always
 * differ at their first byte. */
static const char *value_if_named(const char *entry, const char *name) {
  while (*name && *entry == *name) entry++, name++;
  return *name == '\0' && *entry == '=' ? entry + 1 : NULL;
}

/* Whether environ entry `entry` may be a setting: every setting's name starts so. */
static bool has_settings_prefix(const char *entry) {
  static const char memtrace[] = "MEMTRACE", ctfscope[] = "CTFSCOPE_";
  const char *p = entry[0] == 'M' ? memtrace : entry[0] == 'C' ? ctfscope : NULL;
  if (!p) return false;
  while (*p && *entry == *p) entry++, p++;
  return *p == '\0';
}

/* The constructor reads some twenty settings one by one, then forgets them: each look-up
 * used to walk the whole environment (~1 600 instructions per entry of it for a traced
 * image; 45 entries: 80 k, a fifth of the start-up's instructions in the program). It
 * first gathers, in one pass, the entries that may be settings, in environ's order, and
 * its thread's look-ups read these few until it returns. Later look-ups (at an exec; the
 * program may have changed its environment by then) walk `environ` again. */
#define GATHERED_MAX 32u
static CTS__TLS const char *const *gathered; /* NULL: walk environ */
static CTS__TLS size_t gathered_n;

const char *cts__preload_env(const char *name) {
  CTS_ASSERT(!gathered || has_settings_prefix(name)); /* only settings were gathered */
  if (gathered) {
    for (size_t i = 0; i < gathered_n; i++) {
      const char *const v = value_if_named(gathered[i], name);
      if (v) return v;
    }
    return NULL;
  }
  for (char **e = environ; e && *e; e++) {
    const char *const v = value_if_named(*e, name);
    if (v) return v;
  }
  return NULL;
}

/* The settings of both parts of the library (allocations here, threads in
 * preload_pthread.c), forgotten once read. */
static const char *const settings[] = {"MEMTRACE",
                                       "MEMTRACE_RATE",
                                       "MEMTRACE_CONTEXT",
                                       "MEMTRACE_DROP",
                                       "CTFSCOPE_UNWIND",
                                       "CTFSCOPE_MAX_FRAMES",
                                       "CTFSCOPE_WRITER",
                                       "CTFSCOPE_COMPRESS",
                                       "CTFSCOPE_STALL_TIMEOUT",
                                       "CTFSCOPE_EXEC_BASE",
                                       "CTFSCOPE_EXEC_INDEX",
                                       "CTFSCOPE_EXEC_TSC",
                                       "CTFSCOPE_EXEC_SECCOMP",
                                       "CTFSCOPE_TASKS",
                                       "CTFSCOPE_TASKS_SIZE",
                                       "CTFSCOPE_TASKS_PACKETS",
                                       "CTFSCOPE_TASKS_STREAM",
                                       "CTFSCOPE_TASKS_CLOCK",
                                       "CTFSCOPE_RECORD_NOTES"};

bool cts__preload_is_setting(const char *entry) {
  if (!has_settings_prefix(entry)) return false;
  for (size_t i = 0; i < sizeof settings / sizeof *settings; i++)
    if (value_if_named(entry, settings[i])) return true;
  return false;
}

void cts__preload_log(const char *fmt, ...) {
  char line[1024];
  const size_t prefix = sizeof CTS__PRELOAD_PREFIX - 1u;
  memcpy(line, CTS__PRELOAD_PREFIX, prefix);
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(line + prefix, sizeof line - prefix - 1u, fmt, ap);
  va_end(ap);
  size_t len = prefix + (n < 0 ? 0u : (size_t)n);
  if (len > sizeof line - 2u) len = sizeof line - 2u; /* cut: the line still ends */
  line[len++] = '\n';
  if (write(STDERR_FILENO, line, len) < 0) { /* nothing better to do */
  }
}

static void refuse(const char *what, const char *value, const char *why) {
  cts__preload_log("%s=\"%.200s\": %s; this program is not traced", what, value, why);
}

/* The sinks' log callback. */
static void log_line(void *user_data, const char *line) {
  (void)user_data;
  cts__preload_log("%s", line);
}

/* Copies `src` into cts__exec_state's strings, at *dst; "" there if it is too long. */
static bool copy_setting(const char **dst, const char *src) {
  const size_t n = strlen(src);
  *dst = "";
  if (n >= CTS__SETTING_SIZE) return false;
  char *const at = cts__exec_state.strings + cts__exec_state.used;
  CTS_ASSERT(cts__exec_state.used + n < sizeof cts__exec_state.strings);
  memcpy(at, src, n + 1);
  cts__exec_state.used += n + 1;
  *dst = at;
  return true;
}

/* Whether another process holds the lock of the file at `path` (memtrace's lockf). */
static bool file_is_locked(const char *path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  const bool locked = fcntl(fd, F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
  close(fd);
  return locked;
}

/* Why cts_tracer_start() failed, in words. EACCES and EAGAIN are those of a file another
 * process holds the lock of (tracer.h), but also an open's in a directory the program
 * cannot write in, which is said so (it was "another process is tracing into it"). */
static void start_error(char *why, size_t size, int e, const char *what, const char *path) {
  snprintf(why, size, "%s: %s", what,
           (e == -EAGAIN || e == -EACCES) && path && file_is_locked(path)
               ? "another process is tracing into it"
           : e == -ENXIO && path
               ? "it is a FIFO that nobody opened for reading within 1 s" /* sink.c */
           : e > -1000 ? strerror(-e)
                       : cts_strerror(e));
}

static void start_from_environment(void) {
  const char *const out = cts__preload_env("MEMTRACE");
  if (!out || !out[0]) return;
  if (cts__free_shadowed) {
    static const char why[] =
        "free is another library's (an allocator before this one in LD_PRELOAD, or the "
        "program's own): its blocks cannot be traced";
    refuse("MEMTRACE", out, why);
    /* record, finding no trace, guessed "statically linked, set-uid, or it cleared
     * LD_PRELOAD?" of a program that loaded the library (an executable that defines malloc
     * itself): it is told the reason instead. */
    cts__notes_from_environment();
    cts__tracer_note_untraced(out, why);
    return;
  }
  const char *const exec_base = cts__preload_env("CTFSCOPE_EXEC_BASE");
  const char *const exec_index = cts__preload_env("CTFSCOPE_EXEC_INDEX");
  cts_tracer_config_t cfg;
  cts_tracer_config_init(&cfg);
  const char *const rate = cts__preload_env("MEMTRACE_RATE");
  char number[128]; /* a numeric setting's text without white space (common/setting_text.h) */
  if (rate && rate[0]) {
    char *end = number;
    errno = 0;
    const double r = cts_setting_trimmed(rate, number, sizeof number) ? strtod(number, &end) : 0.0;
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
  const char *const max_frames = cts__preload_env("CTFSCOPE_MAX_FRAMES");
  if (max_frames && max_frames[0]) {
    char *end = number;
    errno = 0;
    const unsigned long n = cts_setting_trimmed(max_frames, number, sizeof number) &&
                                    number[0] >= '0' && number[0] <= '9'
                                ? strtoul(number, &end, 10)
                                : 0;
    if (errno || *end || n < 1 || n > CTS__MAX_FRAMES_LIMIT) {
      refuse("CTFSCOPE_MAX_FRAMES", max_frames, "expected a number of frames, 1 to 1024");
      return;
    }
    cfg.max_frames = (uint32_t)n;
  }
  const char *const drop = cts__preload_env("MEMTRACE_DROP");
  if (drop && drop[0]) {
    if (!cts_setting_trimmed(drop, number, sizeof number) ||
        (strcmp(number, "1") != 0 && strcmp(number, "0") != 0)) {
      refuse("MEMTRACE_DROP", drop, "expected 1 (drop mode) or 0 (lossless)");
      return;
    }
    cfg.drop_when_full = number[0] == '1';
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
  const char *const compress_text =
      compress && compress[0] && cts_setting_trimmed(compress, number, sizeof number) ? number
                                                                                      : compress;
  if (compress && compress[0] && strcmp(compress_text, "none") != 0) {
    char *end = NULL;
    long level = CTS__ZSINK_LEVEL_DEFAULT;
    const char *const c = compress_text;
    if (strncmp(c, "zstd", 4) != 0 || (c[4] && c[4] != ':') ||
        (c[4] == ':' && ((level = strtol(c + 5, &end, 10)) < CTS__ZSINK_LEVEL_MIN ||
                         level > CTS__ZSINK_LEVEL_MAX || end == c + 5 || *end))) {
      refuse("CTFSCOPE_COMPRESS", compress, "expected zstd, zstd:LEVEL (1-19) or none");
      return;
    }
    cfg.compress_level = (int)level;
  }
  const char *const stall = cts__preload_env("CTFSCOPE_STALL_TIMEOUT");
  if (stall && stall[0]) {
    char *end = number;
    errno = 0;
    const double sec =
        cts_setting_trimmed(stall, number, sizeof number) ? strtod(number, &end) : -1.0;
    if (errno || *end || end == number || !(sec >= 0.0 && sec <= 86400.0)) {
      refuse("CTFSCOPE_STALL_TIMEOUT", stall, "expected seconds, 0 to 86400 (0: for ever)");
      return;
    }
    cfg.stall_timeout_ms = (uint32_t)(sec * 1000.0 + 0.5);
    if (sec > 0.0 && cfg.stall_timeout_ms == 0) cfg.stall_timeout_ms = 1;
  }
  bool fits = true;
  for (size_t i = 0; i < sizeof cts__kept_names / sizeof *cts__kept_names; i++) {
    const char *const v = cts__preload_env(cts__kept_names[i]);
    fits = copy_setting(&cts__exec_state.kept[i], v ? v : "") && fits;
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
    cts__exec_state.file = false;
  } else {
    cts_tracer_sink_init(&sink, CTS_TRACER_SINK_FILE);
    sink.path = out;
    sink.log = log_line; /* e.g. a writer process that was killed */
    cts__exec_state.file = true;
  }
  /* The exec sequence: where it started and which image this is. */
  unsigned index = 0;
  if (exec_index && exec_base && cts_setting_trimmed(exec_index, number, sizeof number)) {
    char *end;
    const unsigned long v = strtoul(number, &end, 10);
    if (*end == '\0' && v < 1000000) index = (unsigned)v;
  }
  cts__exec_state.index = index;
  /* Only from an image of the same sequence, which asked the machine already. */
  const char *const tsc = cts__preload_env("CTFSCOPE_EXEC_TSC");
  if (index && tsc && cts_setting_trimmed(tsc, number, sizeof number) &&
      (strcmp(number, "0") == 0 || strcmp(number, "1") == 0))
    cts__tsc_usable_known = number[0] == '1';
  /* The image before this one knew a seccomp filter to be in force (tracer_internal.h):
   * from any image, a forked child's exec too (filters are inherited). */
  /* "2": and this process a child subreaper, which the exec kept (from the same process
   * only: preload_exec.c). */
  const char *const seccomp = cts__preload_env("CTFSCOPE_EXEC_SECCOMP");
  if (seccomp && cts_setting_trimmed(seccomp, number, sizeof number) &&
      (strcmp(number, "1") == 0 || strcmp(number, "2") == 0)) {
    __atomic_store_n(&cts__seccomp_in_force, true, __ATOMIC_RELAXED);
    __atomic_store_n(&cts__program_subreaper, number[0] == '2', __ATOMIC_RELAXED);
  }
  fits = copy_setting(&cts__exec_state.memtrace, out) && fits;
  /* The sequence's name made absolute: a script that changes directory before it execs
   * would otherwise have the next image trace into that other directory (truncating a file
   * of that name there), where `record` never looks for it. */
  const char *base = cts__exec_state.file && index ? exec_base : out;
  char absolute[CTS__SETTING_SIZE];
  if (cts__exec_state.file && base[0] != '/') {
    const size_t room = sizeof absolute, len = strlen(base);
    size_t n = getcwd(absolute, room) ? strlen(absolute) : room;
    if (n + 1u + len < room) {
      if (n == 0 || absolute[n - 1u] != '/') absolute[n++] = '/';
      memcpy(absolute + n, base, len + 1u);
      base = absolute;
    } else {
      fits = false; /* no exec continues the trace: better than one in the wrong place */
    }
  }
  fits = copy_setting(&cts__exec_state.base, base) && fits;
  cts__exec_state.usable = fits;

  cts__notes_from_environment();
  unsigned long long fd_limit;
  if (cts_fd_limit_is_tight(&fd_limit)) {
    /* record's notes pipe takes one of the program's numbers too: given back. */
    const int notes = cts__tracer_notes_fd();
    if (notes >= 0) close(notes);
    cts__tracer_notes_set(-1);
    snprintf(why, sizeof why,
             "the descriptor limit (ulimit -n %llu, soft and hard) leaves no room for the "
             "tracer's descriptors beside the program's",
             fd_limit);
    refuse("MEMTRACE", out, why);
    return;
  }
  const int e = cts_tracer_start(&cfg, &sink);
  if (e) {
    start_error(why, sizeof why, e,
                connect  ? "cannot connect"
                : listen ? "cannot listen"
                         : "cannot trace into this file",
                connect || listen ? NULL : out);
    refuse("MEMTRACE", out, why);
    return;
  }
  if (listen) {
    cts__preload_log("serving the trace on port %u (MEMTRACE=%.160s)",
                     (unsigned)cts_tracer_listen_port(), out);
  }
  cts__traced_pid = getpid();
  /* A fork while another thread holds far_lock would leave it held in the child. */
  pthread_atfork(cts__far_lock_before_fork, cts__far_unlock_after_fork, cts__far_unlock_after_fork);
}

/* After the settings' removal: the slots from the environment's new end (`end`, its NULL)
 * to its old one (`old_end`, the NULL the kernel put before the auxiliary vector), which
 * held stale pointers. Go's runtime (with cgo: the dynamically linked Go programs) finds
 * the auxiliary vector past the first NULL after argv's, and reads (type, value) pairs up
 * to AT_NULL: the stale pointers were read as pairs, and with an odd number of settings
 * removed (3: `record --rate 1`) the old NULL came as a type, the real vector was never
 * read, and the program died at its start ("fatal error: failed to get system page size").
 * With an even number of slots they are filled with (AT_IGNORE, 0) pairs, so that the
 * real vector comes next, aligned; else with zeros: an empty vector, for which Go reads
 * /proc/self/auxv instead (as it did when one setting was removed). */
static void keep_the_auxiliary_vector_found(char **end, char **old_end) {
  const size_t slots = (size_t)(old_end - end);
  for (size_t i = 1; i <= slots; i++)
    end[i] = slots % 2 == 0 && i % 2 == 1 ? (char *)(uintptr_t)AT_IGNORE : NULL;
}

/* Removes the settings from `environ`, in place: children and what they exec are not
 * traced (nor told about a bad setting again). Not with unsetenv: a program may bring its
 * own that never reaches `environ` (bash exports one that edits its shell variables,
 * which it has not even made yet when this runs). Editing the array itself also edits the
 * environment main() gets, which is the same array (bash builds its variables from it).
 * The strings stay where they are: the values read above stay valid. Allocates nothing. */
static void forget_settings(void) {
  char **e = environ;
  if (!e) return;
  char **kept = e;
  for (; *e; e++)
    if (!cts__preload_is_setting(*e)) *kept++ = *e;
  *kept = NULL;
  keep_the_auxiliary_vector_found(kept, e);
}

__attribute__((constructor)) static void preload_init(void) {
  cts__need_real();
  /* Behind another copy of this library (preload_hooks.c, another_copy_of_us), whose
   * constructor runs after this one: that copy reads the settings and traces; this one
   * starts nothing and leaves them in the environment for it. */
  if (cts__behind_another_copy) return;
  for (size_t i = 0; i < sizeof settings / sizeof *settings; i++)
    CTS_ASSERT(has_settings_prefix(settings[i])); /* others would be neither read nor forgotten */
  const char *candidates[GATHERED_MAX];
  size_t n = 0;
  bool all = true;
  for (char **e = environ; e && *e && all; e++) {
    if (!has_settings_prefix(*e)) continue;
    if (n < GATHERED_MAX)
      candidates[n++] = *e;
    else
      all = false; /* more than fit: the look-ups walk environ */
  }
  if (all) gathered = candidates, gathered_n = n;
  const char *const out = cts__preload_env("MEMTRACE");
  cts__guard_enter(); /* whatever libc allocates for us here is not the program's */
  start_from_environment();
  cts__guard_leave();
  const bool tasks = cts__preload_pthread_init();
  gathered = NULL; /* `candidates` ends here */
  /* Only an image asked to trace forgets: a library that is merely preloaded (in an
   * untraced child) leaves the environment as it found it. */
  if ((out && out[0]) || tasks) forget_settings();
}

__attribute__((destructor)) static void preload_fini(void) {
  if (!cts_tracer_is_active()) return;
  const int e = cts_tracer_stop();
  if (e && e != CTS_E_STATE && getpid() == cts__traced_pid) cts__note_lost_tail(e);
}
