/* SPDX-License-Identifier: MIT */
/* Guard (issue 16, points 2 and 5): recording every allocation of a real program makes no
 * system call per allocation on the allocating thread in steady state. Debian's sqlite3
 * (no frame pointers: the default unwinder's libunwind path runs for each allocation)
 * inserts rows in one transaction, untraced and traced at rate 1 with the default
 * settings, each under `strace` (not following forks: the writer process is another
 * process, its calls are its own); the program's main thread's calls are counted. Start-up and exit
 * cost the same whatever the work, and the first sight of each return address may cost libunwind a
 * look-up: so two sizes of work are run, and what the larger one adds must stay within one system
 * call per thousand sampled allocations it adds. Counts, not times. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../find_program.h"
#include "../test.h"
#include "decoded.h"

/* Writes the SQL that inserts `rows` rows in one transaction into `path`. */
static bool write_sql(const char *path, int rows) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  fprintf(f,
          "CREATE TABLE t(a INTEGER, b TEXT);\nBEGIN;\n"
          "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)\n"
          "INSERT INTO t SELECT x, printf('row %%d %%s', x, hex(randomblob(8))) FROM c;\n"
          "COMMIT;\nSELECT count(*) FROM t;\n",
          rows);
  return fclose(f) == 0;
}

/* Runs sqlite3 on `sql` under `strace -o log`, traced into `trace` at rate 1 unless it
 * is NULL; the exit status. */
static int run_under_strace(const char *strace, const char *sqlite, const char *sql,
                            const char *log, const char *trace) {
  char read_cmd[PATH_MAX + 8];
  snprintf(read_cmd, sizeof read_cmd, ".read %s", sql);
  fflush(NULL);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    unsetenv("LD_PRELOAD");
    unsetenv("MEMTRACE");
    unsetenv("MEMTRACE_RATE");
    unsetenv("CTFSCOPE_UNWIND");
    unsetenv("CTFSCOPE_WRITER");
    /* The tracer's variables for sqlite3 only (strace -E): strace itself is not traced. */
    char preload[PATH_MAX + 16], memtrace[PATH_MAX + 16];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", CTS_TEST_PRELOAD);
    snprintf(memtrace, sizeof memtrace, "MEMTRACE=%s", trace ? trace : "");
    if (trace)
      execl(strace, strace, "-qq", "-o", log, "-E", preload, "-E", memtrace, "-E",
            "MEMTRACE_RATE=1", sqlite, ":memory:", read_cmd, (char *)NULL);
    else
      execl(strace, strace, "-qq", "-o", log, sqlite, ":memory:", read_cmd, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The system calls in a `strace` log made without -f: the program's main thread's (which
 * does the allocating; the writer process, forked, is not followed). Signals and exits
 * are not calls. */
static long main_thread_calls(const char *log) {
  FILE *f = fopen(log, "r");
  if (!f) return -1;
  char line[4096];
  long n = 0;
  while (fgets(line, sizeof line, f))
    n += strncmp(line, "+++", 3) != 0 && strncmp(line, "---", 3) != 0 && line[0] != '\n';
  fclose(f);
  return n;
}

typedef struct run {
  long plain_calls, traced_calls;
  size_t allocs;
} run_t;

/* One size of work: untraced and traced calls of the main thread, sampled allocations. */
static bool measure(const char *strace, const char *sqlite, int rows, run_t *r) {
  char sql[64], log[64], trace[64];
  const int pid = (int)getpid();
  snprintf(sql, sizeof sql, "/tmp/cts_guard_%d.sql", pid);
  snprintf(log, sizeof log, "/tmp/cts_guard_%d.strace", pid);
  snprintf(trace, sizeof trace, "/tmp/cts_guard_%d.ctf", pid);
  bool ok = write_sql(sql, rows);
  ok = ok && run_under_strace(strace, sqlite, sql, log, NULL) == 0;
  r->plain_calls = ok ? main_thread_calls(log) : -1;
  ok = ok && run_under_strace(strace, sqlite, sql, log, trace) == 0;
  r->traced_calls = ok ? main_thread_calls(log) : -1;
  decoded_t d;
  if (ok) {
    decoded_from_file(&d, trace);
    ok = d.error == 0;
    if (!ok) fprintf(stderr, "  %s\n", d.message);
    r->allocs = d.nallocs;
    decoded_fini(&d);
  }
  unlink(sql);
  unlink(log);
  unlink(trace);
  return ok && r->plain_calls > 0 && r->traced_calls > 0;
}

CTS_TEST(rate_one_makes_no_system_call_per_allocation) {
  char strace[PATH_MAX], sqlite[PATH_MAX];
  if (!find_program("command -v strace 2>/dev/null", strace, sizeof strace))
    CTS_SKIP("strace is not installed (scripts/deps.sh installs it)");
  if (!find_program("command -v sqlite3 2>/dev/null", sqlite, sizeof sqlite))
    CTS_SKIP("sqlite3 is not installed (scripts/deps.sh installs it)");
  /* Up to three attempts, keeping the fewest calls: on a loaded machine the writer process
   * may be starved long enough for a ring to fill, and the program then waits (futex) as
   * lossless mode says it must. That is a few dozen calls; a tracer that made calls per
   * allocation would make tens of thousands in every attempt. */
  long added_calls = 0, added_allocs = 0;
  for (int attempt = 0; attempt < 3; attempt++) {
    run_t small, large;
    CTS_ASSERT(measure(strace, sqlite, 1000, &small));
    CTS_ASSERT(measure(strace, sqlite, 8000, &large));
    const long calls =
        (large.traced_calls - large.plain_calls) - (small.traced_calls - small.plain_calls);
    added_allocs = (long)large.allocs - (long)small.allocs;
    fprintf(stderr,
            "  attempt %d\n"
            "  1 000 rows: %ld calls untraced, %ld traced, %zu sampled allocations\n"
            "  8 000 rows: %ld calls untraced, %ld traced, %zu sampled allocations\n"
            "  the tracer's calls for %ld more allocations: %ld\n",
            attempt + 1, small.plain_calls, small.traced_calls, small.allocs, large.plain_calls,
            large.traced_calls, large.allocs, added_allocs, calls);
    CTS_ASSERT(added_allocs > 40000);
    added_calls = attempt == 0 || calls < added_calls ? calls : added_calls;
    if (added_calls * 1000 <= added_allocs) break;
  }
  CTS_ASSERT_MSG(added_calls * 1000 <= added_allocs,
                 "%ld system calls for %ld sampled allocations (at most one per thousand)",
                 added_calls, added_allocs);
}

CTS_TEST_MAIN()
