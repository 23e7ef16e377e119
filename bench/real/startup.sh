#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The start-up cost of a traced image at the default rate, against its floors: the exec
# chain of run.sh (19 `env` then `sh`, 20 images) run with LD_PRELOAD and MEMTRACE set
# directly (no `record`), interleaved round by round:
#   untraced     no preload
#   empty        a preload library with nothing in it (the dynamic loader's share)
#   file         one whose constructor creates a 320-byte file per image (the floor: a
#                traced image must at least create its trace; a new file each, as the
#                tracer's .execN.ctf: before wip/h25exec the images of a chain truncated
#                one file, which ext4 does for less than an inode's creation)
#   process      `file`, and a process that writes the header as a crash-surviving writer
#                minimally must be made: an intermediate sharing the program's memory
#                (clone CLONE_VM|CLONE_VFORK, no exit signal, on a small stack of its own,
#                every signal blocked) forks the writer and exits; the program reaps it;
#                the writer waits on a pipe for the program's end (its exit or exec closes
#                the program's end), then writes the 320 bytes and exits. The floor of a
#                writer process per image: nobody's child, the program never waits for it
#   LIB...       each preload library given (e.g. main's build, then this one); LIB@VAR=VALUE
#                runs it with that variable set too (e.g. CTFSCOPE_WRITER=thread: the
#                start-up without a writer process), several @ for several variables
# Prints, per configuration, the medians of CPU (user + system of every process, writer
# processes included: bench/subreaper.c waits for them) and wall per chain, and the CPU per
# image above untraced's, file's and process's (and, paired round by round, above
# process's).
#
# Usage: bench/real/startup.sh [-n ROUNDS] LIB.so[@VAR=VALUE...] [LIB.so...]
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROUNDS=21
if [ "${1:-}" = -n ]; then
  ROUNDS=${2:?}
  shift 2
fi
[ $# -gt 0 ] || { echo "usage: startup.sh [-n ROUNDS] LIB.so [LIB.so...]" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-startup.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
gcc -O2 -std=gnu11 -o "$WORK/measure" "$HERE/measure.c"
gcc -O2 -std=gnu11 -o "$WORK/subreaper" "$ROOT/bench/subreaper.c"
echo 'int cts_startup_empty;' > "$WORK/empty.c"
cat > "$WORK/file.c" << 'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
/* What every traced image must do at least: create its trace (a header's worth), a file of
 * its own (the images of a chain share their pid: a new name each, as the tracer's
 * .execN.ctf, so that each creates an inode rather than truncating the last one's). */
__attribute__((constructor)) static void make_file(void) {
  const char *const out = getenv("MEMTRACE");
  if (!out || !out[0]) return;
  char path[4096];
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  snprintf(path, sizeof path, "%s.%d.%lld.%09ld", out, (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  static const char header[320];
  if (write(fd, header, sizeof header) < 0) {}
  close(fd);
}
EOF
cat > "$WORK/process.c" << 'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
/* The least a writer process per image costs: `file`'s file, then an intermediate on the
 * program's memory (the program sleeps: CLONE_VFORK) that forks the writer and exits, so
 * that the writer is nobody's child; the writer waits for the program's end on a pipe. */
static int fd, watch[2];
static _Alignas(64) char stack[16384];
static int middle(void *arg) {
  (void)arg;
  /* A raw fork: the child is a copy, the intermediate touches nothing of the program's. */
  if (syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L) == 0) {
    static const char header[320];
    char c;
    syscall(SYS_close, watch[1]);
    while (syscall(SYS_read, watch[0], &c, 1L) > 0) {}
    syscall(SYS_write, fd, header, sizeof header);
    syscall(SYS_exit_group, 0);
  }
  syscall(SYS_exit, 0);
  return 0;
}
__attribute__((constructor)) static void make_process(void) {
  const char *const out = getenv("MEMTRACE");
  if (!out || !out[0]) return;
  char path[4096]; /* a file per image, as `file` */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  snprintf(path, sizeof path, "%s.%d.%lld.%09ld", out, (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (pipe2(watch, O_CLOEXEC) != 0) return;
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  const pid_t pid = clone(middle, stack + sizeof stack, CLONE_VM | CLONE_VFORK, NULL);
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid > 0) waitpid(pid, NULL, __WALL);
  close(watch[0]);
  close(fd);
}
EOF
gcc -O2 -shared -fPIC -o "$WORK/empty.so" "$WORK/empty.c"
gcc -O2 -shared -fPIC -o "$WORK/file.so" "$WORK/file.c"
gcc -O2 -shared -fPIC -o "$WORK/process.so" "$WORK/process.c"

CHAIN=()
for _ in $(seq 1 19); do CHAIN+=(/usr/bin/env); done
# shellcheck disable=SC2016 # $0 is the inner shell's
CHAIN+=(/bin/sh -c 'echo done > "$0"' "$WORK/out")

NAMES=(untraced empty file process)
LIBS=("" "$WORK/empty.so" "$WORK/file.so" "$WORK/process.so")
SETS=("" "" "" "")
for arg in "$@"; do
  NAMES+=("$arg")
  LIBS+=("$(realpath "${arg%%@*}")")
  [[ $arg == *@* ]] && SETS+=("${arg#*@}") || SETS+=("")
done

RAW=$WORK/raw
: > "$RAW"
run() { # $1 index, $2 round
  local lib=${LIBS[$1]} dir=$WORK/t
  rm -rf "$dir"
  mkdir -p "$dir"
  local -a pre=(env -u LD_PRELOAD -u MEMTRACE -u MEMTRACE_RATE)
  [ -n "$lib" ] && pre+=(LD_PRELOAD="$lib" MEMTRACE="$dir/x.ctf")
  local -a sets=()
  [ -n "${SETS[$1]}" ] && IFS=@ read -r -a sets <<< "${SETS[$1]}"
  pre+=("${sets[@]}")
  "$WORK/measure" -o "$WORK/time" "$WORK/subreaper" "${pre[@]}" "${CHAIN[@]}" < /dev/null
  local wall user sys status
  read -r wall user sys status < "$WORK/time"
  [ "$status" = 0 ] || echo "startup.sh: ${NAMES[$1]}: exit status $status" >&2
  echo "$1 $2 $wall $user $sys" >> "$RAW"
}
for i in "${!LIBS[@]}"; do run "$i" 0; done # warm-up
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!LIBS[@]}"; do run "$i" "$r"; done
done

echo "$ROUNDS interleaved rounds, load $(cut -d' ' -f1-3 /proc/loadavg); per chain of 20 images:"
awk -v names="${NAMES[*]}" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $2 > 0 { k = $1; n[k]++; cpu[k, n[k]] = $4 + $5; wall[k, n[k]] = $3; last = k > last ? k : last }
  END {
    split(names, nm, " ")
    for (k = 0; k in n; k++) {
      delete c; delete w
      for (i = 1; i <= n[k]; i++) { c[i] = cpu[k, i]; w[i] = wall[k, i] }
      mc[k] = median(c, n[k]); mw[k] = median(w, n[k])
    }
    printf "%-48s %8s %8s %10s %9s %9s %9s\n", "configuration", "CPU ms", "wall ms", "+untraced", "+file", "+process", "paired"
    for (k = 0; k in n; k++) {
      # paired: the median of per-round differences against `process` (the load drifts).
      p = ""
      if (k > 3) {
        delete c
        for (i = 1; i <= n[k]; i++) c[i] = cpu[k, i] - cpu[3, i]
        p = sprintf("%+9.3f", median(c, n[k]) * 1e3 / 20)
      }
      printf "%-48s %8.2f %8.2f %+10.3f %+9.3f %+9.3f %9s\n", nm[k + 1], mc[k] * 1e3, mw[k] * 1e3, (mc[k] - mc[0]) * 1e3 / 20, (mc[k] - mc[2]) * 1e3 / 20, (mc[k] - mc[3]) * 1e3 / 20, p
    }
    print "(+untraced, +file, +process: CPU ms per image above that configuration'"'"'s median;"
    print " paired: median of the per-round differences from process, ms per image)"
    # The last library against the one before, round by round (paired: the load drifts).
    if (last >= 5) {
      delete c; delete w
      for (i = 1; i <= n[last]; i++) { c[i] = cpu[last, i] - cpu[last - 1, i]; w[i] = wall[last, i] - wall[last - 1, i] }
      printf "last - previous, median of per-round differences: CPU %+.3f ms per image, wall %+.3f ms per image\n", median(c, n[last]) * 1e3 / 20, median(w, n[last]) * 1e3 / 20
    }
  }' "$RAW"
