#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The analysis commands against heaptrack_print on the same workload, in one run
# (bench/README.md, "Analysis commands against heaptrack_print"): bench_alloc makes
# PAIRS malloc+free pairs (default 10 M, so 20 M events) and is recorded twice, by
# ctfscope at rate 1 (every allocation, with backtraces) and by heaptrack; then
# `ctfscope stats|top|leaks` on the first and `heaptrack_print` on the second are timed,
# RUNS times each (median, /usr/bin/time: wall seconds and peak RSS).
#
# Usage: bench/run_analysis_bench.sh [BUILD_DIR]   (default: build/release, with
# -DCTS_BUILD_BENCH=ON). Needs heaptrack (Debian: apt-get install heaptrack).
set -euo pipefail

BUILD=${1:-build/release}
RUNS=${RUNS:-3}
PAIRS=${PAIRS:-10000000}
BIN=$BUILD/bench/bench_alloc
PRELOAD=$BUILD/src/cli/libctfscope-preload.so
CTFSCOPE=$BUILD/src/cli/ctfscope
for f in "$BIN" "$PRELOAD" "$CTFSCOPE"; do
  [ -e "$f" ] || { echo "run_analysis_bench: $f is missing: build $BUILD first" >&2; exit 2; }
done
command -v heaptrack_print > /dev/null ||
  { echo "run_analysis_bench: heaptrack is not installed (apt-get install heaptrack)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-analysis-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== recording $PAIRS pairs with ctfscope (rate 1) and with heaptrack"
env LD_PRELOAD="$PRELOAD" MEMTRACE="$WORK/trace.ctf" MEMTRACE_RATE=1 "$BIN" "$PAIRS" > /dev/null
heaptrack -o "$WORK/ht" "$BIN" "$PAIRS" > /dev/null 2>&1
HT=$(ls "$WORK"/ht.*)
echo "ctfscope trace: $(stat -c %s "$WORK/trace.ctf") bytes; heaptrack data: $(stat -c %s "$HT") bytes"

# Prints "median_wall_s max_rss_kib" of RUNS runs of the command.
measure() {
  local i
  for ((i = 0; i < RUNS; i++)); do
    /usr/bin/time -f "%e %M" -o "$WORK/t" "$@" > /dev/null 2>&1 || true
    cat "$WORK/t"
  done | sort -n | awk -v n="$RUNS" '{ w[NR] = $1; r[NR] = $2 }
    END { m = n % 2 ? w[(n + 1) / 2] : (w[n / 2] + w[n / 2 + 1]) / 2; print m, r[n] }'
}

read -r ht_s ht_kib < <(measure heaptrack_print "$HT")
printf "%-28s %8s %10s %10s\n" "command" "wall s" "RSS MiB" "vs heaptrack_print"
printf "%-28s %8.2f %10.1f %10s\n" "heaptrack_print" "$ht_s" "$(awk -v k="$ht_kib" 'BEGIN { print k / 1024 }')" "1.00"
for cmd in stats top leaks; do
  read -r s kib < <(measure "$CTFSCOPE" "$cmd" -q "$WORK/trace.ctf")
  printf "%-28s %8.2f %10.1f %10.2f\n" "ctfscope $cmd" "$s" \
    "$(awk -v k="$kib" 'BEGIN { print k / 1024 }')" "$(awk -v a="$s" -v b="$ht_s" 'BEGIN { print a / b }')"
done
