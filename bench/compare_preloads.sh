#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Compares builds of the preload library (or settings of one) on bench_alloc, run
# interleaved so that a change in the machine's load hits every variant alike: round 1 runs
# each variant once, then round 2, and so on. Prints each variant's median loop CPU ns per
# pair and, against the first variant, the median of the per-round differences (paired),
# which is far steadier than the difference of two medians on a shared machine.
#
# Usage: bench/compare_preloads.sh [-n ROUNDS] [-r RATE] VARIANT...
#   VARIANT   LABEL=LIBRARY[:NAME=VALUE,...]   a preload library and environment settings,
#             e.g. before=/tmp/old.so after=build/release/src/cli/libctfscope-preload.so
#             fp=build/release/src/cli/libctfscope-preload.so:CTFSCOPE_UNWIND=fp;
#             LIBRARY "none" runs bench_alloc untraced
#   -n ROUNDS rounds (default 15)
#   -r RATE   MEMTRACE_RATE for the traced variants (default 1)
# Environment: BENCH (default build/release/bench/bench_alloc), PAIRS (default 10000000),
# TMPDIR. To keep a build for later: cp build/release/src/cli/libctfscope-preload.so /tmp/a.so
set -euo pipefail

usage() { sed -n '3,17s/^# \{0,1\}//p' "$0"; }

ROUNDS=15
RATE=1
while getopts "n:r:h" opt; do
  case $opt in
    n) ROUNDS=$OPTARG ;;
    r) RATE=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { usage >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "compare_preloads: -n wants a positive count" >&2; exit 2; }
BENCH=${BENCH:-build/release/bench/bench_alloc}
PAIRS=${PAIRS:-10000000}
[ -x "$BENCH" ] || { echo "compare_preloads: $BENCH is missing: cmake --preset release -DCTS_BUILD_BENCH=ON && cmake --build build/release" >&2; exit 2; }

labels=()
declare -A library settings
for variant in "$@"; do
  [[ $variant == *=* ]] || { echo "compare_preloads: '$variant' is not LABEL=LIBRARY[:SETTINGS]" >&2; exit 2; }
  label=${variant%%=*}
  rest=${variant#*=}
  library[$label]=${rest%%:*}
  settings[$label]=""
  [[ $rest == *:* ]] && settings[$label]=${rest#*:}
  if [ "${library[$label]}" != none ] && [ ! -f "${library[$label]}" ]; then
    echo "compare_preloads: ${library[$label]}: no such library" >&2
    exit 2
  fi
  labels+=("$label")
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Loop CPU ns per pair of one run of variant $1.
run_one() {
  local label=$1 out
  local -a env=()
  if [ -n "${settings[$label]}" ]; then IFS=, read -ra env <<< "${settings[$label]}"; fi
  if [ "${library[$label]}" != none ]; then
    env=(LD_PRELOAD="${library[$label]}" MEMTRACE="$WORK/trace.ctf" MEMTRACE_RATE="$RATE" "${env[@]}")
  fi
  out=$(env -u LD_PRELOAD -u MEMTRACE -u MEMTRACE_RATE "${env[@]}" "$BENCH" "$PAIRS")
  rm -f "$WORK/trace.ctf"
  sed -n 's/.*cpu_ns_per_pair=\([0-9.]*\).*/\1/p' <<< "$out"
}

echo "compare_preloads: $ROUNDS rounds of ${labels[*]}, $PAIRS pairs, rate $RATE" >&2
for round in $(seq 1 "$ROUNDS"); do
  line="$round"
  for label in "${labels[@]}"; do line="$line $(run_one "$label")"; done
  echo "$line" >> "$WORK/results.txt"
  echo "  round $line" >&2
done

awk -v names="${labels[*]}" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { for (v = 2; v <= NF; v++) { x[v, NR] = $v } rounds = NR; nv = NF - 1 }
  END {
    split(names, label, " ")
    printf "%-16s %12s %18s\n", "variant", "median ns", "paired vs " label[1]
    for (v = 1; v <= nv; v++) {
      for (r = 1; r <= rounds; r++) { m[r] = x[v + 1, r]; d[r] = x[v + 1, r] - x[2, r] }
      med = median(m, rounds)
      if (v == 1) printf "%-16s %12.2f %18s\n", label[v], med, "-"
      else printf "%-16s %12.2f %+18.2f\n", label[v], med, median(d, rounds)
    }
  }' "$WORK/results.txt"
