/* SPDX-License-Identifier: MIT */
/* ctfscope record: runs an unmodified program under libctfscope-preload.so and says where
 * its trace went. The program's stdout, stderr and exit code are its own; our summary
 * lines (one per traced image: the program may exec others) go to stderr after it exits.
 * The trace can also stream over TCP (--connect, --listen): the preload library does
 * that, and the summary then says nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/file.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/held_fd.h"
#include "../os/net.h"
#include "../os/os.h"
#include "../tracer/elf_kind.h"
#include "../tracer/elf_runtime.h"
#include "../tracer/exec_name.h"
#include "../tracer/program_path.h"
#include "cli.h"
#include "record_tasks.h"

#define PRELOAD_NAME   "libctfscope-preload.so"
#define WRITER_WAIT_MS 10000 /* how long the summary waits for a writer process */

static const char help[] =
    "Usage: ctfscope record [OPTIONS] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Run PROGRAM with allocation tracing (LD_PRELOAD of " PRELOAD_NAME
    ") and write\n"
    "a memtrace trace of its sampled heap allocations. PROGRAM's output and exit code are\n"
    "its own; when it exits, a summary line per trace file on stderr says where it is.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE        trace file (default: ctfscope.PROGRAM.PID.ctf in the\n"
    "                           current directory). Each image PROGRAM execs (env, a\n"
    "                           script's exec) traces into the next file: FILE.exec1.ctf,\n"
    "                           FILE.exec2.ctf... (the number goes before .ctf)\n"
    "      --connect HOST:PORT  stream the trace to a collector (ctfscope collect)\n"
    "                           instead; if it cannot be reached, PROGRAM runs untraced\n"
    "                           (one warning)\n"
    "      --listen [ADDR:]PORT serve the trace to one client at a time (ctfscope fetch);\n"
    "                           ADDR defaults to 127.0.0.1; each client gets a fresh trace\n"
    "      --drop               never let a slow trace reader slow PROGRAM: drop samples\n"
    "                           when the tracer's queue is full and record the loss in the\n"
    "                           trace (ctfscope info shows it)\n"
    "      --stall-timeout S    --connect, --listen: a reader that takes nothing for S\n"
    "                           seconds ends tracing (one message; PROGRAM runs on\n"
    "                           untraced); default CTFSCOPE_STALL_TIMEOUT or 5, 0 = never\n"
    "  -z, --compress[=LEVEL]   compress the trace file with zstd (level 1-19, default 3;\n"
    "                           CTFSCOPE_COMPRESS=zstd[:LEVEL]); default name *.ctf.zst.\n"
    "                           Every ctfscope command reads it; OCaml's memtrace tools\n"
    "                           need 'zstd -d' first, so plain stays the default\n"
    "  -r, --rate R             sampling rate per 8-byte word, 0 < R <= 1 (default:\n"
    "                           MEMTRACE_RATE if set, else 1e-6; 1 records every\n"
    "                           allocation)\n"
    "  -c, --context TEXT       free text stored in the trace\n"
    "      --unwind M           backtraces: mixed (default: frame pointers where the code\n"
    "                           has them, libunwind beyond), libunwind, fp (frame\n"
    "                           pointers only), none\n"
    "      --max-frames N       keep a sampled allocation's N innermost frames, 1 to 1024\n"
    "                           (default: CTFSCOPE_MAX_FRAMES if set, else 256); a deeper\n"
    "                           stack ends in a frame '[deeper frames not recorded:\n"
    "                           --max-frames N]', and ctfscope info counts those stacks\n"
    "      --tasks              also trace PROGRAM's threads as tasks (creation, joins,\n"
    "                           contended mutexes, condition variables) into a\n"
    "                           mirage-profile task trace, named after the memory trace:\n"
    "                           its .ctf (or .ctf.zst) replaced by .tasks.ctf, so\n"
    "                           '-o run.ctf --tasks' writes run.tasks.ctf next to run.ctf,\n"
    "                           and without -o it is ctfscope.PROGRAM.PID.tasks.ctf\n"
    "  -T, --tasks-output FILE  the task trace file (implies --tasks)\n"
    "      --tasks-size BYTES   the task trace's ring, which keeps the last BYTES of\n"
    "                           events (default 16M; K, M, G suffixes; implies --tasks)\n"
    "      --tasks-packets N    packets in that ring, 1 to 4096 (default 256): one per\n"
    "                           thread alive at once (implies --tasks)\n"
    "  -q, --quiet              no summary lines; a trace that was not written and a\n"
    "                           program killed by a signal are still said\n"
    "  -h, --help               show this help\n";

/* --help's parts after the options, printed in turn (one string would pass the
 * 4095-character limit of a C string literal that gcc warns about). */
static const char help_writer[] =
    "\n"
    "The trace is encoded and written by a writer process (ctfscope-writer), which\n"
    "finishes it even if PROGRAM is killed or execs; record waits for it (at most\n"
    "10 s), quiet or not.\n"
    "A trace whose tail was lost (the writer died, the disk filled, the last packet is\n"
    "cut off) says so at the end of its summary line.\n"
    "CTFSCOPE_WRITER=thread keeps the writer in PROGRAM, as a thread.\n";

static const char help_untraced[] =
    "\n"
    "Forked child processes are not traced; images the program execs are. A program the\n"
    "dynamic loader runs without LD_PRELOAD runs untraced; when no trace was written,\n"
    "record names the cause PROGRAM's file shows: statically linked; set-uid or set-gid\n"
    "to another user or group, or file capabilities (getcap shows them), which the\n"
    "kernel runs in secure-execution mode; else that it may have cleared LD_PRELOAD.\n"
    "Programs the library cannot be loaded into (another ELF class: 32-bit) or must not\n"
    "be (a sanitizer's runtime that must come first: -fsanitize=address's libasan) run\n"
    "without it, said; so do such programs exec'd or posix_spawn'ed by a traced one (said\n"
    "once, after the end, with how many). Set CTFSCOPE_PRELOAD to use another build of\n"
    "the preload library.\n"
    "\n"
    "Exit status: PROGRAM's, or 128 + N if it was killed by signal N; 127 if it was not\n"
    "found, 126 if it could not be run, 2 for a usage error.\n";

static const char help_environment[] =
    "\n"
    "Environment (docs/environment.md has them all): the options above set the preload\n"
    "library's settings, which can also be given directly: MEMTRACE (-o, --connect,\n"
    "--listen), MEMTRACE_RATE (-r), MEMTRACE_CONTEXT (-c), MEMTRACE_DROP (--drop),\n"
    "CTFSCOPE_UNWIND (--unwind), CTFSCOPE_MAX_FRAMES (--max-frames), CTFSCOPE_COMPRESS\n"
    "(-z), CTFSCOPE_STALL_TIMEOUT (--stall-timeout), CTFSCOPE_TASKS (--tasks, -T), "
    "CTFSCOPE_TASKS_SIZE (--tasks-size),\n"
    "CTFSCOPE_TASKS_PACKETS (--tasks-packets); and with no option: CTFSCOPE_WRITER,\n"
    "CTFSCOPE_CACHE=off|DIR (the writer's location cache, ~/.cache/ctfscope by default),\n"
    "CTFSCOPE_TASKS_STREAM=1 (stream the task trace instead of a ring),\n"
    "CTFSCOPE_TASKS_CLOCK=tsc|monotonic (the task trace's clock; CTFSCOPE_CLOCK is that\n"
    "choice for programs using libctfscope's rings), CTFSCOPE_PRELOAD. record sets\n"
    "CTFSCOPE_EXEC_BASE, CTFSCOPE_EXEC_INDEX and CTFSCOPE_RECORD_NOTES for itself, the\n"
    "preload CTFSCOPE_EXEC_TSC and CTFSCOPE_EXEC_SECCOMP (an image under a seccomp\n"
    "filter tells the next). The reading commands wait CTFSCOPE_PROGRESS_DELAY_MS (1000)\n"
    "before a progress line.\n";

typedef struct record_opts {
  const char *output, *rate, *context, *unwind, *connect, *listen, *stall, *max_frames;
  const char *compress; /* the zstd level, "" for the default */
  bool quiet, drop;
  record_tasks_opts_t tasks; /* --tasks, -T, --tasks-*: thread tracing (record_tasks.c) */
} record_opts_t;

/* Whether `text` is a frame limit the tracer takes: 1 to its MAX_FRAMES_LIMIT, 1024
 * (include/ctfscope/tracer.h, max_frames; the preload library checks it again). */
static bool max_frames_ok(const char *text) {
  char *end;
  errno = 0;
  const unsigned long n = strtoul(text, &end, 10);
  return !errno && end != text && !*end && text[0] != '-' && n >= 1 && n <= 1024;
}

/* The preload library: $CTFSCOPE_PRELOAD, or found as ctfscope's other modules are. */
static bool find_preload(char *out, size_t size) {
  const char *env = getenv("CTFSCOPE_PRELOAD");
  if (env && env[0]) {
    snprintf(out, size, "%s", env);
    return access(out, R_OK) == 0;
  }
  return cli_find_module(PRELOAD_NAME, out, size);
}

/* Parses options up to the program: stops at "--" or the first non-option, so the
 * program's own options are never taken for ours. Returns -1 and sets *first, or an exit
 * code. */
static int parse(int argc, char **argv, record_opts_t *o, int *first) {
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      const char *const parts[] = {help, help_writer, help_untraced, help_environment};
      for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) fputs(parts[k], stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
      o->quiet = true;
      continue;
    }
    if (strcmp(a, "--tasks") == 0) {
      o->tasks.on = true;
      continue;
    }
    if (strcmp(a, "--drop") == 0) {
      o->drop = true;
      continue;
    }
    /* An optional value, so only attached: "--compress=9", "-z9". */
    if (strcmp(a, "-z") == 0 || strcmp(a, "--compress") == 0) {
      o->compress = "";
      continue;
    }
    if (strncmp(a, "--compress=", 11) == 0 || (strncmp(a, "-z", 2) == 0 && a[2])) {
      o->compress = a + (a[1] == '-' ? 11 : 2);
      continue;
    }
    static const struct {
      const char *s, *l;
      size_t off;
    } valued[] = {
        {"-o", "--output", offsetof(record_opts_t, output)},
        {"-r", "--rate", offsetof(record_opts_t, rate)},
        {"-c", "--context", offsetof(record_opts_t, context)},
        {NULL, "--unwind", offsetof(record_opts_t, unwind)},
        {NULL, "--max-frames", offsetof(record_opts_t, max_frames)},
        {NULL, "--connect", offsetof(record_opts_t, connect)},
        {NULL, "--listen", offsetof(record_opts_t, listen)},
        {NULL, "--stall-timeout", offsetof(record_opts_t, stall)},
        {"-T", "--tasks-output", offsetof(record_opts_t, tasks.output)},
        {NULL, "--tasks-size", offsetof(record_opts_t, tasks.size)},
        {NULL, "--tasks-packets", offsetof(record_opts_t, tasks.packets)},
    };
    bool known = false;
    for (size_t k = 0; k < CTS_ARRAY_SIZE(valued) && !known; k++) {
      const size_t ll = strlen(valued[k].l);
      const char *value = NULL;
      if ((valued[k].s && strcmp(a, valued[k].s) == 0) || strcmp(a, valued[k].l) == 0) {
        if (i + 1 >= argc) return cli_usage_error("option '%s' needs a value", a);
        value = argv[++i];
      } else if (strncmp(a, valued[k].l, ll) == 0 && a[ll] == '=') {
        value = a + ll + 1;
      } else if (valued[k].s && strncmp(a, valued[k].s, 2) == 0 && a[2] != '\0') {
        value = a + 2;
      } else {
        continue;
      }
      *(const char **)((char *)o + valued[k].off) = value;
      known = true;
    }
    if (!known) return cli_usage_error("unknown option '%s'", a);
  }
  *first = i;
  return -1;
}

typedef struct record_counts {
  uint64_t allocs, samples, collects, truncated;
  uint64_t packets_after_info; /* 0: the header alone, the trace never closed */
  double rate;
} record_counts_t;

static int count_packet(void *ud, const cts_mt_packet_t *p) {
  if (p->kind != CTS_MT_PACKET_TRACE_INFO) ((record_counts_t *)ud)->packets_after_info++;
  return 0;
}

static int count_info(void *ud, const cts_mt_info_t *info) {
  ((record_counts_t *)ud)->rate = info->sample_rate;
  return 0;
}

static int count_event(void *ud, const cts_mt_event_t *ev) {
  record_counts_t *c = ud;
  if (ev->kind == CTS_MT_ALLOC) {
    c->allocs++;
    c->samples += ev->nsamples;
  } else if (ev->kind == CTS_MT_COLLECT) {
    c->collects++;
  }
  return 0;
}

static void count_warning(void *ud, int code, uint64_t offset, const char *message) {
  (void)offset, (void)message;
  if (code == CTS_E_TRUNCATED_PACKET) ((record_counts_t *)ud)->truncated++;
}

/* The writer process of a program that was killed (or that exec'd) finishes its trace
 * after the program is gone; it holds an flock on the file until then (tracer.h, "The
 * writer process"). Waits for it, at most WRITER_WAIT_MS, in a blocking flock: record
 * returns as soon as the writer lets go, and spends nothing meanwhile (looking every 1 ms,
 * as before, cost up to 1 ms of every run's wall time and a wake-up per look). A timer
 * interrupts the flock every WAKE_MS (no SA_RESTART) so that the bound is kept even if
 * its first signal came before the flock started waiting. */
#define WAKE_MS 100
static void on_wake(int sig) {
  (void)sig;
}

static void wait_for_the_writer(const char *path) {
  /* O_NONBLOCK: a FIFO's open would wait for a writer (record -o fifo hung after the
   * program's end); only a regular file has a lock to wait for. */
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return;
  }
  bool free_now = flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK;
  if (!free_now) {
    struct sigaction wake = {.sa_handler = on_wake}, old_action;
    sigemptyset(&wake.sa_mask);
    const struct itimerval every = {{0, WAKE_MS * 1000}, {0, WAKE_MS * 1000}};
    struct itimerval old_timer;
    const bool handled = sigaction(SIGALRM, &wake, &old_action) == 0;
    const bool timed = handled && setitimer(ITIMER_REAL, &every, &old_timer) == 0;
    const uint64_t deadline = cts_mono_ms() + WRITER_WAIT_MS;
    while (!free_now && cts_mono_ms() < deadline) {
      if (timed) {
        free_now = flock(fd, LOCK_SH) == 0 || errno != EINTR;
        continue;
      }
      /* No timer to bound a blocking flock: a look every 10 ms. */
      free_now = flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK;
      const struct timespec step = {0, 10000000L};
      if (!free_now) nanosleep(&step, NULL);
    }
    if (timed) setitimer(ITIMER_REAL, &old_timer, NULL);
    if (handled) sigaction(SIGALRM, &old_action, NULL);
  }
  close(fd);
  if (!free_now)
    cli_warn("%s is still being written after %d s; the summary is of what is there so far", path,
             WRITER_WAIT_MS / 1000);
}

/* Why a trace ends inside a packet: a killed program stops its writer mid-packet; a program
 * that exited normally had a write fail (a full disk, most often). */
static const char *cut_reason(const char *path, bool killed, char *buf, size_t size) {
  if (killed) return "the program was killed";
  struct statvfs fs;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash)
    slash[slash == dir ? 1 : 0] = '\0';
  else
    snprintf(dir, sizeof dir, ".");
  if (statvfs(dir, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < 65536)
    snprintf(buf, size, "writing the trace failed: the file system of %s is full", dir);
  else
    snprintf(buf, size, "writing the trace failed");
  return buf;
}

/* The traced images' notes (preload_exec.c, note_lost_tail): "PATH\0REASON\0" records, read
 * once the program has exited. */
static struct {
  char buf[1 << 16];
  size_t len;
} notes;

/* Reads what the notes pipe holds now, without waiting: a child of the program may keep
 * its write end open long after. */
static void read_notes(int fd) {
  if (fd < 0) return;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  for (;;) {
    const ssize_t n = read(fd, notes.buf + notes.len, sizeof notes.buf - 1 - notes.len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    notes.len += (size_t)n;
  }
  notes.buf[notes.len] = '\0';
  close(fd);
}

/* Whether the note at offset i of the notes was taken back (say_program_notes). */
static bool note_retracted[sizeof notes.buf];

/* Says the notes that are no trace's (an empty path: an image's exec hook telling that a
 * program it ran, an AddressSanitizer one, ran untraced): the first, and how many more, in
 * one line, quiet or not (`make check` of an ASan build runs hundreds). A note with the
 * path "-" takes back an earlier one of the same text (its exec failed: preload_exec.c,
 * unsay_sanitizer_untraced); the image that wrote both wrote them in that order. */
static void say_program_notes(void) {
  for (size_t i = 0; i < notes.len;) {
    const char *const p = notes.buf + i, *const why = p + strlen(p) + 1;
    if (why >= notes.buf + notes.len) break;
    if (strcmp(p, "-") == 0)
      for (size_t k = 0; k < i;) {
        const char *const q = notes.buf + k, *const its = q + 1;
        if (!q[0] && !note_retracted[k] && strcmp(its, why) == 0) {
          note_retracted[k] = true;
          break;
        }
        k = (size_t)(q + strlen(q) + 1 - notes.buf);
        k += strlen(notes.buf + k) + 1;
      }
    i = (size_t)(why - notes.buf) + strlen(why) + 1;
  }
  const char *first = NULL;
  size_t more = 0;
  for (size_t i = 0; i < notes.len;) {
    const char *const p = notes.buf + i, *const why = p + strlen(p) + 1;
    if (why >= notes.buf + notes.len) break;
    const bool counted = !p[0] && !note_retracted[i];
    if (counted && first) more++;
    if (counted && !first) first = why;
    i = (size_t)(why - notes.buf) + strlen(why) + 1;
  }
  if (!first) return;
  if (more)
    cli_warn("%s (and %zu more such programs)", first, more);
  else
    cli_warn("%s", first);
}

/* The notes' reason given for the trace at `path`, or NULL: why its tail was lost, or, for a
 * path with no file, why the image made none (cts__tracer_note_untraced). */
static const char *noted_reason(const char *path) {
  for (size_t i = 0; i < notes.len;) {
    const char *const p = notes.buf + i, *const why = p + strlen(p) + 1;
    if (why >= notes.buf + notes.len) break;
    if (strcmp(p, path) == 0) return why;
    i = (size_t)(why - notes.buf) + strlen(why) + 1;
  }
  return NULL;
}

/* Whether the directory `path` would be made in (into `dir`) refuses a new file; then *why:
 * errno. A program run in a directory it cannot write in (or with -o naming one) runs
 * untraced, and record said it "did not load the preload library". */
static bool directory_refuses_the_file(const char *path, char *dir, size_t size, int *why) {
  const char *const slash = strrchr(path, '/');
  if (!slash)
    snprintf(dir, size, ".");
  else if (slash == path)
    snprintf(dir, size, "/");
  else
    snprintf(dir, size, "%.*s", (int)(slash - path), path);
  if (access(dir, W_OK | X_OK) == 0) return false;
  *why = errno;
  return true;
}

/* What a summary found of a trace, for the line on a killed program (say_killed). */
typedef enum trace_state {
  TRACE_MISSING,   /* no file: said, with the signal */
  TRACE_COMPLETE,  /* every record the program made, and its end */
  TRACE_TAIL_LOST, /* said on its summary line */
  TRACE_NO_END,    /* the header only: killed before its first sample */
  TRACE_NOT_READ   /* not a regular file, or it does not read back */
} trace_state_t;

static bool program_file(const char *prog, char *full, size_t size);

/* The file the kernel runs for the file `full`: itself, or for a script the interpreter
 * its "#!" line names, followed as the kernel follows one that is a script itself
 * (tracer/elf_script.h), into `runs` (size bytes). True when `full` is a script: `runs`
 * then names the last interpreter (one that could not be read ends the chain). */
static bool script_interpreter_file(const char *full, char *runs, size_t size) {
  snprintf(runs, size, "%s", full);
  bool script = false;
  for (int depth = 0; depth <= CTS__SCRIPT_DEPTH; depth++) {
    unsigned char head[CTS__SCRIPT_HEAD];
    const int fd = open(runs, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) break;
    const ssize_t got = pread(fd, head, sizeof head, 0);
    close(fd);
    char next[CTS__SCRIPT_HEAD];
    if (got <= 0 || !cts__script_interpreter(head, (size_t)got, next, sizeof next)) break;
    snprintf(runs, size, "%s", next);
    script = true;
  }
  return script;
}

/* What record's lines call the file the kernel runs for `program` (whose file is `full`):
 * the program, or "SCRIPT's interpreter PATH" for a script; `runs` gets that file's path. */
static void program_as_run(const char *program, const char *full, char *runs, size_t runs_size,
                           char *subject, size_t subject_size) {
  if (script_interpreter_file(full, runs, runs_size))
    snprintf(subject, subject_size, "%s's interpreter %s", program, runs);
  else
    snprintf(subject, subject_size, "%s", program);
}

/* Why `program` (where execvp finds it) ran without the preload library, when its file
 * shows it: statically linked, set-uid or set-gid to another user or group, or file
 * capabilities (security.capability: the kernel runs it in secure-execution mode, in which
 * the loader ignores an LD_PRELOAD entry with a '/'); for a script, its interpreter's file
 * (named). Written at why (a clause); false when the file shows none of these (the program
 * may have cleared LD_PRELOAD). Asked only after a run that left no trace. */
static bool no_preload_cause(const char *program, char *why, size_t size) {
  char full[4096], runs[4096], subject[8400];
  struct stat st;
  if (!program_file(program, full, sizeof full)) return false;
  program_as_run(program, full, runs, sizeof runs, subject, sizeof subject);
  program = subject;
  if (stat(runs, &st) != 0) return false;
  if (cts__elf_is_statically_linked(runs))
    snprintf(why, size, "%.4000s is statically linked: no dynamic loader reads LD_PRELOAD",
             program);
  else if ((st.st_mode & S_ISUID) && st.st_uid != getuid())
    snprintf(why, size,
             "%.4000s is set-uid (owner uid %u): the loader runs it in secure-execution mode and "
             "ignores LD_PRELOAD",
             program, (unsigned)st.st_uid);
  else if ((st.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) && st.st_gid != getgid())
    snprintf(why, size,
             "%.4000s is set-gid (group %u): the loader runs it in secure-execution mode and "
             "ignores LD_PRELOAD",
             program, (unsigned)st.st_gid);
  else if (getxattr(runs, "security.capability", NULL, 0) > 0)
    snprintf(why, size,
             "%.4000s has file capabilities (security.capability; getcap shows them): the loader "
             "runs it in secure-execution mode and ignores LD_PRELOAD",
             program);
  else
    return false;
  return true;
}

/* Says why no trace was written to `path` (no file there); `killed_by`: the signal that
 * ended the program, or 0. An error, said quiet or not. */
static void say_no_trace(const char *path, const char *program, int killed_by) {
  const bool killed = killed_by != 0;
  /* A killed program may have loaded the preload and died before its constructor made the
   * trace (SIGXFSZ at its start, a crash in the loader): its signal is said too. */
  int why = 0;
  char dir[4096];
  unsigned long long fd_limit;
  char cause[4400];
  /* The image's own word (the notes pipe: preload_env.c), when it gave one. */
  const char *const untraced = noted_reason(path);
  if (untraced) {
    if (killed)
      cli_warn("no trace was written to %s (%s: %s; killed by signal %d (%s))", path, program,
               untraced, killed_by, strsignal(killed_by));
    else
      cli_warn("no trace was written to %s (%s: %s)", path, program, untraced);
  } else if (directory_refuses_the_file(path, dir, sizeof dir, &why)) {
    cli_warn("no trace was written to %s: no file can be made in %s (%s)", path, dir,
             strerror(why));
  } else if (!killed && cts_fd_limit_is_tight(&fd_limit)) {
    /* The preload's reason (preload_env.c), under record's own limit: the program's. */
    cli_warn(
        "no trace was written to %s: the descriptor limit (ulimit -n %llu, soft and "
        "hard) leaves no room for the tracer's descriptors beside the program's",
        path, fd_limit);
  } else if (no_preload_cause(program, cause, sizeof cause)) {
    if (killed)
      cli_warn("no trace was written to %s (%s; killed by signal %d (%s))", path, cause, killed_by,
               strsignal(killed_by));
    else
      cli_warn("no trace was written to %s (%s)", path, cause);
  } else if (killed) {
    cli_warn(
        "no trace was written to %s (%s was killed by signal %d (%s) before a trace was "
        "made, or it did not load the preload library: statically linked, set-uid, or "
        "it cleared LD_PRELOAD?)",
        path, program, killed_by, strsignal(killed_by));
  } else {
    cli_warn(
        "no trace was written to %s (%s did not load the preload library: statically "
        "linked, set-uid, or it cleared LD_PRELOAD?)",
        path, program);
  }
}

/* One line about the trace in `path`; `killed_by`: the signal that ended the program, or 0.
 * Returns what it found. */
static trace_state_t summarise(const char *path, const char *program, int killed_by) {
  const bool killed = killed_by != 0;
  struct stat st;
  wait_for_the_writer(path);
  if (stat(path, &st) != 0) {
    say_no_trace(path, program, killed_by);
    return TRACE_MISSING;
  }
  /* A FIFO (or a device): what went through it cannot be read again here. */
  if (!S_ISREG(st.st_mode)) {
    fprintf(stderr, "ctfscope record: %s is not a regular file: its trace is not read back\n",
            path);
    return TRACE_NOT_READ;
  }
  trace_state_t state = TRACE_NOT_READ;
  record_counts_t c = {0};
  cts_mt_reader_config_t cfg;
  cts_mt_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cfg.decode_backtraces = false;
  const cts_mt_handler_t h = {.user_data = &c,
                              .on_info = count_info,
                              .on_event = count_event,
                              .on_packet = count_packet,
                              .on_warning = count_warning};
  cts_mt_reader_t *r;
  int e = cts_mt_reader_create(&r, &cfg, &h);
  bool input_error = false;
  if (!e) e = cts_os_read_memtrace(path, r, NULL, NULL, &input_error);
  char size[32], bytes[32], allocs[32], frees[32], why[4200];
  cli_human_bytes((double)st.st_size, size, sizeof size);
  if (e) {
    cli_warn("trace written to %s (%s), but it does not read back: %s", path, size,
             input_error ? cts_os_strerror(e) : cts_mt_reader_error_message(r));
  } else {
    cli_human_bytes(c.rate > 0 ? (double)c.samples / c.rate * 8.0 : 0, bytes, sizeof bytes);
    const char *const lost = noted_reason(path);
    /* A lazy session's program killed before its first sample: no writer had started, and
     * the program could not write the last packet (docs/tracing.md, "The lazy writer"). Nothing
     * sampled was lost, only when the program ended. */
    const bool no_end = killed && !lost && !c.truncated && c.packets_after_info == 0;
    state = lost || c.truncated ? TRACE_TAIL_LOST : no_end ? TRACE_NO_END : TRACE_COMPLETE;
    fprintf(stderr,
            "ctfscope record: trace written to %s (%s): %s sampled allocations, %s frees, "
            "about %s allocated (rate %g)%s%s%s%s%s\n",
            path, size, cli_grouped(c.allocs, allocs, sizeof allocs),
            cli_grouped(c.collects, frees, sizeof frees), bytes, c.rate,
            lost || c.truncated ? "; its tail was lost: " : "",
            c.truncated ? "the last packet is cut off (" : "",
            lost          ? lost
            : c.truncated ? cut_reason(path, killed, why, sizeof why)
                          : "",
            c.truncated ? ")" : "",
            no_end ? "; it has no end time: the program was killed before its first sample" : "");
  }
  cts_mt_reader_destroy(r);
  return state;
}

/* The traces of the images the program exec'd (path.exec1.ctf...), written since `start`
 * (older files of that name are from another run), in order: summed up (`killed_by`: the
 * signal that ended the program, or 0), or only waited for (quiet); the first one missing
 * that an image's note names (it refused to trace) said too. Returns the state of
 * the last one (the image that ended the program), or `first`: the first image's, when it
 * exec'd nothing. */
static trace_state_t exec_traces(const char *path, time_t start, bool quiet, int killed_by,
                                 trace_state_t first) {
  trace_state_t last = first;
  for (unsigned i = 1; i < 1000; i++) {
    char next[4096];
    struct stat st;
    if (!cts__exec_trace_name(next, sizeof next, path, i)) break;
    if (stat(next, &st) != 0 || st.st_mtime < start) {
      /* An image that loaded the library and refused to trace (an executable that is its
       * own allocator) said why under its path: said here, as for the first image. It
       * hands nothing on: the chain of traces ends there. */
      if (noted_reason(next)) {
        say_no_trace(next, "the exec'd program", killed_by);
        last = TRACE_MISSING;
      }
      break;
    }
    if (quiet)
      wait_for_the_writer(next);
    else
      last = summarise(next, "the exec'd program", killed_by);
  }
  return last;
}

/* A program killed by a signal, said as a shell says it ("Killed", "Segmentation fault
 * (core dumped)"; nothing for SIGINT and SIGPIPE, which the user or the reader of a pipe
 * meant), with what became of its trace (`state`; TRACE_NOT_READ: not known, -q). Exit
 * status 137 alone left an OOM-killed program's user guessing. Where no trace was written,
 * say_no_trace gave the signal already. */
static void say_killed(const char *program, int status, trace_state_t state) {
  if (!WIFSIGNALED(status) || state == TRACE_MISSING) return;
  const int sig = WTERMSIG(status);
  if (sig == SIGINT || sig == SIGPIPE) return;
  const char *const abbrev = sigabbrev_np(sig);
  const char *const trace = state == TRACE_COMPLETE    ? "; its trace is complete"
                            : state == TRACE_TAIL_LOST ? "; its trace lost its tail (above)"
                            : state == TRACE_NO_END
                                ? "; its trace has no end time (killed before its first sample)"
                                : "";
  fprintf(stderr, "ctfscope record: %s: %s (SIG%s%s%s)%s\n", program, strsignal(sig),
          abbrev ? abbrev : "?", WCOREDUMP(status) ? ", core dumped" : "",
          sig == SIGKILL ? ": the OOM killer, or kill -9?" : "", trace);
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* The file `prog` names, found through PATH as execvpe (spawn_program) finds it when it
 * has no slash, into full (size bytes); false if none is found. */
static bool program_file(const char *prog, char *full, size_t size) {
  if (strchr(prog, '/')) return snprintf(full, size, "%s", prog) < (int)size;
  return cts__program_on_path(getenv("PATH"), prog, full, size);
}

/* What record does to one variable of the program's environment. */
typedef enum { ENV_KEEP, ENV_SET, ENV_CLEAR, ENV_SET_LATER } env_action_t;

/* One variable: set to `value`, cleared, left as record's environment has it, or set later,
 * in the program's process, to a name that holds its pid (room for NAME_ROOM bytes). */
typedef struct env_setting {
  const char *name;
  env_action_t action;
  const char *value;
} env_setting_t;

/* ENV_SET to `value`, or ENV_KEEP when there is none (an option not given). */
static env_setting_t env_set_if(const char *name, const char *value) {
  return (env_setting_t){name, value ? ENV_SET : ENV_KEEP, value};
}

#define NAME_ROOM 4096

/* The program's environment: record's own, less every variable record sets or clears, then
 * record's settings. Owns `vars` and its strings but those of record's environment. */
typedef struct child_env {
  char **vars; /* NULL-terminated, for execve */
  size_t len;
  char *owned[32];
  size_t owned_len;
} child_env_t;

static bool names_match(const char *var, const char *name) {
  const size_t n = strlen(name);
  return strncmp(var, name, n) == 0 && var[n] == '=';
}

/* False when out of memory (`env` then holds what it has, for child_env_free). */
static bool child_env_build(child_env_t *env, const env_setting_t *settings, size_t count) {
  extern char **environ;
  size_t inherited = 0;
  for (char **v = environ; v && *v; v++) inherited++;
  env->vars = calloc(inherited + count + 1, sizeof *env->vars);
  if (!env->vars || count > CTS_ARRAY_SIZE(env->owned)) return false;
  for (char **v = environ; v && *v; v++) {
    bool overridden = false;
    for (size_t i = 0; i < count && !overridden; i++)
      overridden = settings[i].action != ENV_KEEP && names_match(*v, settings[i].name);
    if (!overridden) env->vars[env->len++] = *v;
  }
  for (size_t i = 0; i < count; i++) {
    const bool later = settings[i].action == ENV_SET_LATER;
    if (settings[i].action != ENV_SET && !later) continue;
    const size_t size =
        strlen(settings[i].name) + 2 + (later ? NAME_ROOM : strlen(settings[i].value));
    char *const var = malloc(size);
    if (!var) return false;
    snprintf(var, size, "%s=%s", settings[i].name, later ? "" : settings[i].value);
    env->owned[env->owned_len++] = var;
    env->vars[env->len++] = var;
  }
  return true;
}

/* The value of `name`'s variable, to be written, or NULL. */
static char *child_env_value(const child_env_t *env, const char *name) {
  for (size_t i = 0; i < env->owned_len; i++)
    if (names_match(env->owned[i], name)) return env->owned[i] + strlen(name) + 1;
  return NULL;
}

static void child_env_free(child_env_t *env) {
  for (size_t i = 0; i < env->owned_len; i++) free(env->owned[i]);
  free(env->vars);
}

/* What the program's process needs, all of it made before: it runs on record's memory. */
typedef struct spawn {
  char *const *prog;
  char *const *envp;
  int status_read_fd, status_fd;
  const record_opts_t *opts;
  const char *memtrace_url, *compress;
  char *memtrace_value, *tasks_value; /* in envp, NAME_ROOM bytes each (NULL: none) */
} spawn_t;

/* The trace files' names, which hold the program's pid unless given. */
static void name_outputs(const spawn_t *sp, int pid, char output[NAME_ROOM],
                         char tasks_output[NAME_ROOM]) {
  const record_opts_t *const o = sp->opts;
  if (o->output)
    snprintf(output, NAME_ROOM, "%s", o->output);
  else
    snprintf(output, NAME_ROOM, "ctfscope.%s.%d.ctf%s", base_name(sp->prog[0]), pid,
             sp->compress[0] ? ".zst" : "");
  record_tasks_path(tasks_output, NAME_ROOM, &o->tasks, sp->memtrace_url[0] ? NULL : output,
                    sp->prog[0], pid);
}

/* The program's process, before its exec. It shares record's memory, record waiting (vfork):
 * it writes only its stack, the two names reserved in its environment and its own
 * descriptors. A fork copied record's address space (its ~10 shared libraries' page
 * tables) only for the exec to throw the copy away, and both processes then took
 * copy-on-write faults: ~70 page faults and ~0.26 ms of CPU a run. */
static _Noreturn void program_main(const spawn_t *sp) {
  close(sp->status_read_fd);
  char output[NAME_ROOM], tasks_output[NAME_ROOM];
  name_outputs(sp, (int)getpid(), output, tasks_output);
  snprintf(sp->memtrace_value, NAME_ROOM, "%s", sp->memtrace_url[0] ? sp->memtrace_url : output);
  if (sp->tasks_value) snprintf(sp->tasks_value, NAME_ROOM, "%s", tasks_output);
  execvpe(sp->prog[0], sp->prog, sp->envp);
  const int err = errno;
  if (write(sp->status_fd, &err, sizeof err) < 0) { /* the parent sees EOF */
  }
  _exit(127);
}

/* Starts the program: its pid, or -1 (errno set). Not inlined: vfork's child returns into
 * nothing of ours but program_main. */
__attribute__((noinline)) static pid_t spawn_program(const spawn_t *sp) {
  const pid_t pid = vfork();
  if (pid == 0) program_main(sp);
  return pid;
}

/* The signals that stop or poke a program, sent to record by its pid (`kill $!` in a
 * script, `docker stop` of a container whose first process is record, supervisord, a
 * `kill` by hand): they killed record and left the program running, nobody's child,
 * untold. While record waits they are passed on to the program, as `perf record` does, so
 * that it ends (or reloads) as it would untraced, and record summarises its trace and
 * exits as it did. Not passed on: what the kernel sent (a terminal's hang-up reaches the
 * program itself) or the program sent, and what another process of the program's group
 * sent (the program's children signalling their group), record's parent excepted (a
 * script's `kill $!`). SIGINT and SIGQUIT stay ignored, as a shell does while a job runs:
 * ^C and ^\ are the program's. A signal to record and to the program's whole group
 * (`timeout` without --foreground, a shell's `kill %1`, systemd stopping a unit) reaches
 * the program twice. */
static const int relayed_signals[] = {SIGTERM, SIGUSR1, SIGUSR2};
#define RELAYED_COUNT (sizeof relayed_signals / sizeof relayed_signals[0])
static volatile pid_t relay_to;

static void relay_signal(int sig, siginfo_t *info, void *context) {
  (void)context;
  const int saved_errno = errno;
  const pid_t to = relay_to;
  /* si_code <= 0: sent by kill, sigqueue or tgkill, not by the kernel. */
  if (to > 0 && info->si_code <= 0 && info->si_pid != to &&
      (info->si_pid == getppid() || getpgid(info->si_pid) != getpgid(to)))
    kill(to, sig);
  errno = saved_errno;
}

/* Relays relayed_signals to pid until relay_end; old: the actions to put back. */
static void relay_start(pid_t pid, struct sigaction old[RELAYED_COUNT]) {
  relay_to = pid;
  struct sigaction relay = {.sa_sigaction = relay_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&relay.sa_mask);
  for (size_t i = 0; i < RELAYED_COUNT; i++) sigaction(relayed_signals[i], &relay, &old[i]);
}

static void relay_end(const struct sigaction old[RELAYED_COUNT]) {
  relay_to = 0; /* first: the pid is reaped, and could be another process's */
  for (size_t i = 0; i < RELAYED_COUNT; i++) sigaction(relayed_signals[i], &old[i], NULL);
}

/* No process could be made for the program (`ulimit -u` reached: a shell that execs its
 * last command runs a program where record cannot): the program runs anyway, exec'd in
 * record's own process, where it keeps record's pid (its trace's name) and its exit status
 * is record's. Nothing is left to summarise the trace or read the notes, which the
 * program is not told of (a pipe nobody reads would fail its writes). Returns only if the
 * exec fails, with record's exit code. */
static int run_in_records_place(const spawn_t *sp, child_env_t *env, const int notes_pipe[2],
                                int spawn_errno) {
  cli_warn(
      "cannot make a process for %s (%s: the limit of processes, ulimit -u?): it runs in "
      "record's place, with no summary of its trace",
      sp->prog[0], strerror(spawn_errno));
  char *const notes_value = child_env_value(env, "CTFSCOPE_RECORD_NOTES");
  if (notes_value) notes_value[0] = 0;
  if (notes_pipe[0] >= 0) close(notes_pipe[0]);
  if (notes_pipe[1] >= 0) close(notes_pipe[1]);
  close(sp->status_fd);
  char output[NAME_ROOM], tasks_output[NAME_ROOM];
  name_outputs(sp, (int)getpid(), output, tasks_output);
  snprintf(sp->memtrace_value, NAME_ROOM, "%s", sp->memtrace_url[0] ? sp->memtrace_url : output);
  if (sp->tasks_value) snprintf(sp->tasks_value, NAME_ROOM, "%s", tasks_output);
  fflush(NULL);
  execvpe(sp->prog[0], sp->prog, sp->envp);
  const int err = errno;
  close(sp->status_read_fd);
  child_env_free(env);
  cli_error("cannot run '%s': %s", sp->prog[0], strerror(err));
  return err == ENOENT ? 127 : 126;
}

int cmd_record(int argc, char **argv) {
  record_opts_t o = {0};
  int first = 0;
  const int rc = parse(argc, argv, &o, &first);
  if (rc >= 0) return rc;
  if (first >= argc) return cli_usage_error("no program given");
  if (o.rate) {
    char *end;
    errno = 0;
    const double r = strtod(o.rate, &end);
    if (errno || *end || end == o.rate || !(r > 0.0 && r <= 1.0))
      return cli_usage_error("--rate '%s' is not a number in (0, 1]", o.rate);
  }
  if (o.unwind && strcmp(o.unwind, "mixed") != 0 && strcmp(o.unwind, "fp") != 0 &&
      strcmp(o.unwind, "libunwind") != 0 && strcmp(o.unwind, "none") != 0)
    return cli_usage_error("--unwind '%s': expected mixed, fp, libunwind or none", o.unwind);
  if (o.max_frames && !max_frames_ok(o.max_frames))
    return cli_usage_error("--max-frames '%s': expected a number of frames, 1 to 1024",
                           o.max_frames);
  if (!!o.output + !!o.connect + !!o.listen > 1)
    return cli_usage_error("--output, --connect and --listen are alternatives: give one");
  char compress[32] = "";
  if (o.compress) {
    char *end;
    const long level = o.compress[0] ? strtol(o.compress, &end, 10) : 3;
    if (o.compress[0] && (*end || level < 1 || level > 19))
      return cli_usage_error("--compress=%s: expected a zstd level, 1 to 19", o.compress);
    if (o.connect || o.listen)
      return cli_usage_error(
          "--compress is for trace files: --connect and --listen stream plain memtrace");
    snprintf(compress, sizeof compress, "zstd:%ld", level);
  }
  if (o.stall) {
    char *end;
    errno = 0;
    const double sec = strtod(o.stall, &end);
    if (errno || *end || end == o.stall || !(sec >= 0.0 && sec <= 86400.0))
      return cli_usage_error("--stall-timeout '%s': expected seconds, 0 to 86400", o.stall);
  }
  const int tasks_rc = record_tasks_check(&o.tasks);
  if (tasks_rc >= 0) return tasks_rc;
  if (o.tasks.output && o.output && strcmp(o.tasks.output, o.output) == 0)
    return cli_usage_error("-T %s: the task trace and the memory trace need two files",
                           o.tasks.output);
  char memtrace_url[512] = "";
  if (o.connect || o.listen) {
    /* Checked here, so that a typo is a usage error rather than an untraced run. */
    cts_net_addr_t addr;
    char err[CTS_NET_ERR_LEN];
    const int e = o.connect ? cts_net_parse_connect(o.connect, &addr, err, sizeof err)
                            : cts_net_parse_listen(o.listen, &addr, err, sizeof err);
    if (e) return cli_usage_error("%s %s", o.connect ? "--connect" : "--listen", err);
    snprintf(memtrace_url, sizeof memtrace_url, "%s%s", o.connect ? "tcp://" : "listen://",
             o.connect ? o.connect : o.listen);
  }
  char preload[4096];
  if (!find_preload(preload, sizeof preload)) {
    cli_error(
        "cannot find %s next to the ctfscope binary or in the library directory "
        "(set CTFSCOPE_PRELOAD to its path)",
        PRELOAD_NAME);
    return CLI_EXIT_INTERNAL;
  }
  /* A slip of the hand (`-o main.c`) must not cost the user a file: refused before the
   * program runs (the preload library refuses it too, for the images an exec starts). */
  if (o.output && !memtrace_url[0]) {
    const int fd = open(o.output, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    const bool other = fd >= 0 && cts_os_fd_holds_other_data(fd);
    if (fd >= 0) close(fd);
    if (other) {
      cli_error(
          "%s holds something else than a trace: not overwritten (remove it, or choose "
          "another name with -o)",
          o.output);
      return CLI_EXIT_USAGE;
    }
  }

  /* The output name needs the child's pid, known before it execs. A pipe tells the parent
   * whether exec failed (close-on-exec: EOF means it worked). */
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    cli_error("pipe: %s", strerror(errno));
    return CLI_EXIT_INTERNAL;
  }
  /* The traced images tell on this one when their trace loses its tail (preload_exec.c). None
   * for TCP traces (not summarised) or if it cannot be made (the summary then knows less). */
  int notes_pipe[2] = {-1, -1};
  if (!memtrace_url[0] && pipe2(notes_pipe, O_CLOEXEC) != 0) notes_pipe[0] = notes_pipe[1] = -1;
  /* The program's end out of its way (common/held_fd.h): above its descriptor limit where
   * it can be, and never on 0-2 (run with stdout closed, `record -- prog >&-`, it would find
   * the pipe there and write its output into the notes). */
  if (notes_pipe[1] >= 0 && (notes_pipe[1] = cts_fd_set_aside(notes_pipe[1])) < 0) {
    close(notes_pipe[0]);
    notes_pipe[0] = -1;
  }
  /* The notes pipe's end goes to the program (record closes its copy once it runs). */
  char notes_fd[16] = "";
  if (notes_pipe[1] >= 0 && fcntl(notes_pipe[1], F_SETFD, 0) == 0)
    snprintf(notes_fd, sizeof notes_fd, "%d", notes_pipe[1]);
  /* A program the library cannot be loaded into runs without it: its loader would print
   * "ERROR: ld.so: object ... cannot be preloaded (wrong ELF class ...)" on its stderr; and
   * an AddressSanitizer program aborted at its start with the library first in its list.
   * One look at the file answers both, as the preload's exec hooks ask it
   * (tracer/elf_runtime.h). */
  char program_path[4096], runtime[64];
  cts__elf_verdict_t verdict = CTS__ELF_LOADABLE;
  if (program_file(argv[first], program_path, sizeof program_path)) {
    int examined_fd = -1;
    verdict = cts__elf_examine(program_path, &examined_fd, runtime, sizeof runtime);
    if (examined_fd >= 0) close(examined_fd);
  }
  if (verdict == CTS__ELF_OTHER_KIND) {
    char runs[4096], subject[8400];
    program_as_run(argv[first], program_path, runs, sizeof runs, subject, sizeof subject);
    cli_warn("%s is a program of another kind (32-bit?) than %s: it runs untraced", subject,
             PRELOAD_NAME);
  } else if (verdict == CTS__ELF_RUNTIME_FIRST)
    cli_warn(
        "%s links %s (a sanitizer), which must come first among its libraries: it runs "
        "untraced",
        argv[first], runtime);
  const bool other_kind = verdict != CTS__ELF_LOADABLE;
  char preload_value[8192];
  const char *old = getenv("LD_PRELOAD");
  if (old && old[0])
    snprintf(preload_value, sizeof preload_value, "%s:%s", preload, old);
  else
    snprintf(preload_value, sizeof preload_value, "%s", preload);
  const bool tasks = record_tasks_wanted(&o.tasks);
  const env_setting_t settings[] = {
      {"LD_PRELOAD", other_kind ? ENV_KEEP : ENV_SET, preload_value},
      {"MEMTRACE", ENV_SET_LATER, NULL},
      env_set_if("MEMTRACE_DROP", o.drop ? "1" : NULL),
      {"CTFSCOPE_RECORD_NOTES", notes_fd[0] ? ENV_SET : ENV_CLEAR, notes_fd},
      {"CTFSCOPE_EXEC_BASE", ENV_CLEAR, NULL}, /* a fresh sequence of traces */
      {"CTFSCOPE_EXEC_INDEX", ENV_CLEAR, NULL},
      env_set_if("MEMTRACE_RATE", o.rate),
      env_set_if("MEMTRACE_CONTEXT", o.context),
      env_set_if("CTFSCOPE_UNWIND", o.unwind),
      env_set_if("CTFSCOPE_MAX_FRAMES", o.max_frames),
      env_set_if("CTFSCOPE_COMPRESS", compress[0] ? compress : NULL),
      env_set_if("CTFSCOPE_STALL_TIMEOUT", o.stall),
      {"CTFSCOPE_TASKS", tasks ? ENV_SET_LATER : ENV_KEEP, NULL},
      env_set_if("CTFSCOPE_TASKS_SIZE", tasks ? o.tasks.size : NULL),
      env_set_if("CTFSCOPE_TASKS_PACKETS", tasks ? o.tasks.packets : NULL),
  };
  child_env_t env = {0};
  if (!child_env_build(&env, settings, CTS_ARRAY_SIZE(settings))) {
    child_env_free(&env);
    cli_error("out of memory");
    return CLI_EXIT_INTERNAL;
  }
  const spawn_t sp = {.prog = argv + first,
                      .envp = env.vars,
                      .status_read_fd = status_pipe[0],
                      .status_fd = status_pipe[1],
                      .opts = &o,
                      .memtrace_url = memtrace_url,
                      .compress = compress,
                      .memtrace_value = child_env_value(&env, "MEMTRACE"),
                      .tasks_value = tasks ? child_env_value(&env, "CTFSCOPE_TASKS") : NULL};
  fflush(NULL);
  const time_t start = time(NULL);
  const pid_t pid = spawn_program(&sp);
  const int spawn_errno = errno;
  if (pid < 0 && (spawn_errno == EAGAIN || spawn_errno == ENOMEM))
    return run_in_records_place(&sp, &env, notes_pipe, spawn_errno);
  child_env_free(&env);
  if (pid < 0) {
    cli_error("fork: %s", strerror(spawn_errno));
    return CLI_EXIT_INTERNAL;
  }
  char output[NAME_ROOM], tasks_output[NAME_ROOM];
  name_outputs(&sp, (int)pid, output, tasks_output);
  char *const *const prog = argv + first;
  close(status_pipe[1]);
  if (notes_pipe[1] >= 0) close(notes_pipe[1]);
  /* Like a shell waiting for a job: ^C and ^\ are for the program; we report after it. */
  struct sigaction ignore = {.sa_handler = SIG_IGN}, old_int, old_quit;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  struct sigaction old_relayed[RELAYED_COUNT];
  relay_start(pid, old_relayed);
  int exec_errno = 0;
  ssize_t got;
  do got = read(status_pipe[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  close(status_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  relay_end(old_relayed);
  if (got == (ssize_t)sizeof exec_errno) {
    cli_error("cannot run '%s': %s", prog[0], strerror(exec_errno));
    return exec_errno == ENOENT ? 127 : 126;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  read_notes(notes_pipe[0]);
  say_program_notes();
  if (other_kind) return code; /* no trace, said before it ran */
  const int killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (!o.quiet && !memtrace_url[0]) {
    const trace_state_t first_image = summarise(output, prog[0], killed_by);
    say_killed(prog[0], status, exec_traces(output, start, false, killed_by, first_image));
  } else if (!memtrace_url[0]) {
    /* Quiet, record still returns only once every trace is complete: an image that
     * exec'd left its trace for its writer process to finish. -q silences the summaries,
     * not what went wrong: a trace that was not written (a static program), a killed
     * program. */
    wait_for_the_writer(output);
    struct stat st;
    const bool missing = stat(output, &st) != 0;
    if (missing) say_no_trace(output, prog[0], killed_by);
    exec_traces(output, start, true, 0, TRACE_NOT_READ);
    say_killed(prog[0], status, missing ? TRACE_MISSING : TRACE_NOT_READ);
  } else {
    say_killed(prog[0], status, TRACE_NOT_READ);
  }
  /* With a trace file, its summary said whether the preload library was loaded, and a
   * loaded library that refused the task trace said why. */
  if (!o.quiet && tasks_output[0]) record_tasks_summarise(tasks_output, !memtrace_url[0]);
  return code;
}
