#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The start-up cost of a traced image at the default rate, against its floors: the exec
# chain of run.sh (19 `env` then `sh`, 20 images) run with LD_PRELOAD and MEMTRACE set
# directly (no `record`), interleaved round by round:
#   untraced     no preload
#   empty        a preload library with nothing in it (the dynamic loader's share)
#   file         one whose constructor creates a 320-byte file per image (the floor: a
#                traced image must at least create its trace)
#   LIB...       each preload library given (e.g. main's build, then this one); LIB@VAR=VALUE
#                runs it with that variable set too (e.g. CTFSCOPE_WRITER=thread: the
#                start-up without a writer process), several @ for several variables
# Prints, per configuration, the medians of CPU (user + system of every process, writer
# processes included: bench/subreaper.c waits for them) and wall per chain, and the CPU per
# image above untraced's.
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
/* What every traced image must do at least: create its trace (a header's worth). */
__attribute__((constructor)) static void make_file(void) {
  const char *const out = getenv("MEMTRACE");
  if (!out || !out[0]) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  static const char header[320];
  if (write(fd, header, sizeof header) < 0) {}
  close(fd);
}
EOF
gcc -O2 -shared -fPIC -o "$WORK/empty.so" "$WORK/empty.c"
gcc -O2 -shared -fPIC -o "$WORK/file.so" "$WORK/file.c"

CHAIN=()
for _ in $(seq 1 19); do CHAIN+=(/usr/bin/env); done
# shellcheck disable=SC2016 # $0 is the inner shell's
CHAIN+=(/bin/sh -c 'echo done > "$0"' "$WORK/out")

NAMES=(untraced empty file)
LIBS=("" "$WORK/empty.so" "$WORK/file.so")
SETS=("" "" "")
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
    printf "%-60s %10s %10s %14s\n", "configuration", "CPU ms", "wall ms", "CPU/image +ms"
    for (k = 0; k in n; k++)
      printf "%-60s %10.2f %10.2f %14.3f\n", nm[k + 1], mc[k] * 1e3, mw[k] * 1e3, (mc[k] - mc[0]) * 1e3 / 20
    # The last library against the one before, round by round (paired: the load drifts).
    if (last >= 4) {
      delete c; delete w
      for (i = 1; i <= n[last]; i++) { c[i] = cpu[last, i] - cpu[last - 1, i]; w[i] = wall[last, i] - wall[last - 1, i] }
      printf "last - previous, median of per-round differences: CPU %+.3f ms per image, wall %+.3f ms per image\n", median(c, n[last]) * 1e3 / 20, median(w, n[last]) * 1e3 / 20
    }
  }' "$RAW"
