#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The allocation-tracer benchmark: one binary (bench/bench_alloc.c: 10 M malloc+free pairs,
# 8 B - 64 KiB, mean ~2.4 KiB, 16 call stacks) run side by side, in the same session:
#
#   untraced          the binary alone
#   untraced-thread   the binary with one more thread, idle (bench/idle_thread.c): glibc's
#                     malloc then leaves its single-thread fast paths, as it does under the
#                     tracer with a writer thread (rate1-writer-thread; the default writer
#                     process leaves the program single-threaded). Overheads against it are
#                     in the column "over untraced-thread"
#   preload-inert     libctfscope-preload.so loaded, MEMTRACE unset: the hooks' own cost
#   sample-512KiB     tracing at one sample per 512 KiB on average (rate 8/524288 per word),
#                     with the default (mixed) unwinder
#   sample-512KiB-fp  the same with frame-pointer backtraces
#   sample-512KiB-libunwind  the same with libunwind backtraces
#   rate1             every allocation, default (mixed) backtraces
#   rate1-libunwind   every allocation, libunwind backtraces
#   rate1-fp          every allocation, frame-pointer backtraces
#   rate1-nobt        every allocation, no backtraces
#   rate1-writer-thread  every allocation, default backtraces, the writer in a thread of
#                     the program instead of a process of its own (CTFSCOPE_WRITER=thread)
#   heaptrack         heaptrack ./bench_alloc (if installed: apt-get install heaptrack)
#
# Each configuration runs RUNS times, interleaved (run 1 of every configuration, then run
# 2...), so that a change in the machine's load hits them all alike; the table gives
# medians. ns/pair is the binary's own loop time per pair (it prints it), wall-clock and as
# CPU time of the looping thread (loop CPU: on a shared machine the steadier of the two;
# the writer's CPU is not in it, see CPU s); wall, CPU and max RSS are figures of the
# program and the writer process together, from /usr/bin/time -v around bench/subreaper.c,
# which waits for the writer process and so has its CPU time counted (start-up and the
# trace's last flush included; max RSS is the larger of the two processes'). Trace bytes per sampled allocation count the allocation and its free.
#
# Usage: bench/run_alloc_bench.sh [BUILD_DIR]   (default: build/release, the release preset)
# Environment: RUNS (default 5), PAIRS (default 10000000), TMPDIR, CONFIGS (a space-separated
# subset of the names above). Build first: cmake --preset release && cmake --build
# build/release. Run it on a quiet machine: the figures are only as steady as the machine.
set -euo pipefail

BUILD=${1:-build/release}
RUNS=${RUNS:-5}
PAIRS=${PAIRS:-10000000}
CONFIGS=${CONFIGS:-"untraced untraced-thread preload-inert sample-512KiB sample-512KiB-fp sample-512KiB-libunwind rate1 rate1-libunwind rate1-fp rate1-nobt rate1-writer-thread heaptrack"}
BIN=$BUILD/bench/bench_alloc
IDLE_THREAD=$BUILD/bench/libbench_idle_thread.so
SUBREAPER=$BUILD/bench/subreaper
PRELOAD=$BUILD/src/cli/libctfscope-preload.so
CTFSCOPE=$BUILD/src/cli/ctfscope
RATE_512K=1.52587890625e-05 # 8 bytes per word / 524288 bytes

for f in "$BIN" "$IDLE_THREAD" "$SUBREAPER" "$PRELOAD" "$CTFSCOPE"; do
  [ -e "$f" ] || { echo "run_alloc_bench: $f is missing: build $BUILD first" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "run_alloc_bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
if [[ " $CONFIGS " == *" heaptrack "* ]] && ! command -v heaptrack > /dev/null; then
  echo "run_alloc_bench: heaptrack not installed (apt-get install heaptrack): skipped" >&2
  CONFIGS=${CONFIGS/heaptrack/}
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-alloc-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results.txt # config ns_per_pair wall_s cpu_s maxrss_kib trace_bytes sampled loop_cpu_ns run
: > "$RESULTS"

# Seconds from /usr/bin/time's "h:mm:ss" or "m:ss.ss".
to_seconds() { awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }' <<< "$1"; }

run_one() {
  local config=$1 run=$2 trace=$WORK/trace.ctf
  local -a cmd=("$BIN" "$PAIRS") env=()
  rm -f "$trace" "$WORK"/ht.*
  case $config in
    untraced) ;;
    untraced-thread) env=(LD_PRELOAD="$IDLE_THREAD") ;;
    preload-inert) env=(LD_PRELOAD="$PRELOAD") ;;
    sample-512KiB) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE="$RATE_512K") ;;
    sample-512KiB-fp) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE="$RATE_512K" CTFSCOPE_UNWIND=fp) ;;
    sample-512KiB-libunwind) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE="$RATE_512K" CTFSCOPE_UNWIND=libunwind) ;;
    rate1) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE=1) ;;
    rate1-libunwind) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE=1 CTFSCOPE_UNWIND=libunwind) ;;
    rate1-fp) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE=1 CTFSCOPE_UNWIND=fp) ;;
    rate1-nobt) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE=1 CTFSCOPE_UNWIND=none) ;;
    rate1-writer-thread) env=(LD_PRELOAD="$PRELOAD" MEMTRACE="$trace" MEMTRACE_RATE=1 CTFSCOPE_WRITER=thread) ;;
    heaptrack) cmd=(heaptrack -o "$WORK/ht" "$BIN" "$PAIRS") ;;
    *) echo "run_alloc_bench: unknown configuration $config" >&2; exit 2 ;;
  esac
  # env after time: /usr/bin/time itself must not be preloaded (it would be the one traced).
  /usr/bin/time -v -o "$WORK/time.txt" "$SUBREAPER" env -u LD_PRELOAD -u MEMTRACE -u MEMTRACE_RATE \
    "${env[@]}" "${cmd[@]}" > "$WORK/out.txt" 2> "$WORK/err.txt"
  local ns cns wall user sys rss bytes=0 sampled=0
  ns=$(grep -o ' ns_per_pair=[0-9.]*' "$WORK/out.txt" | cut -d= -f2)
  cns=$(grep -o 'cpu_ns_per_pair=[0-9.]*' "$WORK/out.txt" | cut -d= -f2)
  wall=$(to_seconds "$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$WORK/time.txt")")
  user=$(sed -n 's/.*User time (seconds): //p' "$WORK/time.txt")
  sys=$(sed -n 's/.*System time (seconds): //p' "$WORK/time.txt")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
  if [ -f "$trace" ]; then
    bytes=$(stat -c %s "$trace")
    sampled=$("$CTFSCOPE" info --json "$trace" | sed -n 's/.*"allocs_total": \([0-9]*\).*/\1/p')
  elif ls "$WORK"/ht.* > /dev/null 2>&1; then
    bytes=$(stat -c %s "$WORK"/ht.*)
    sampled=$PAIRS
  fi
  echo "$config $ns $wall $(awk "BEGIN { print $user + $sys }") $rss $bytes $sampled ${cns:-nan} $run" >> "$RESULTS"
}

echo "bench_alloc: $PAIRS pairs, $RUNS runs of: $CONFIGS" >&2
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)" >&2
for run in $(seq 1 "$RUNS"); do
  for config in $CONFIGS; do
    run_one "$config" "$run"
    echo "  run $run: $(tail -1 "$RESULTS")" >&2
  done
done

# Median of column $2 for configuration $1.
median() {
  awk -v c="$1" -v k="$2" '$1 == c { print $k }' "$RESULTS" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Smallest value of column $2 for configuration $1: the run least disturbed by the rest
# of the machine (on a shared host, times only ever get longer).
minimum() {
  awk -v c="$1" -v k="$2" '$1 == c { print $k }' "$RESULTS" | sort -g | head -1
}

# Median over the runs of (column $2 of configuration $1 - the same column of untraced in
# the same round): rounds follow each other within seconds, so a host that slows down or
# speeds up between rounds moves both terms of each difference alike.
# A third argument names another baseline than untraced.
paired_overhead() {
  awk -v c="$1" -v k="$2" -v b="${3:-untraced}" '$1 == b { u[$9] = $k } $1 == c { v[$9] = $k }
    END { for (r in v) if (r in u) print v[r] - u[r] }' "$RESULTS" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

base=$(median untraced 2)
cbase=$(median untraced 8)
[[ " $CONFIGS " == *" untraced "* ]] || base=nan cbase=nan
echo
echo "Medians of $RUNS runs, $PAIRS malloc+free pairs; $(nproc) CPUs, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Overheads are medians of the per-round differences to untraced (paired); min is the"
echo "fastest run, and 'overhead of mins' the difference of the two fastest runs."
echo
echo "| configuration | ns/pair (loop) | min | overhead ns/pair (paired) | overhead of mins | loop CPU ns/pair | overhead (loop CPU, paired) | over untraced-thread (loop CPU, paired) | wall s | CPU s | max RSS MiB | trace | bytes per sampled alloc+free |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for config in $CONFIGS; do
  ns=$(median "$config" 2)
  awk -v c="$config" -v ns="$ns" -v base="$base" -v wall="$(median "$config" 3)" \
    -v cns="$(median "$config" 8)" -v cbase="$cbase" \
    -v mn="$(minimum "$config" 2)" -v mnbase="$(minimum untraced 2)" \
    -v pover="$(paired_overhead "$config" 2)" -v pcover="$(paired_overhead "$config" 8)" \
    -v tover="$(paired_overhead "$config" 8 untraced-thread)" \
    -v cpu="$(median "$config" 4)" -v rss="$(median "$config" 5)" \
    -v bytes="$(median "$config" 6)" -v sampled="$(median "$config" 7)" 'BEGIN {
      over = (base == "nan" || pover == "nan") ? "-" : sprintf("%+.1f", pover)
      cover = (cbase == "nan" || pcover == "nan") ? "-" : sprintf("%+.1f", pcover)
      mover = (mnbase == "") ? "-" : sprintf("%+.1f", mn - mnbase)
      tcover = (tover == "nan") ? "-" : sprintf("%+.1f", tover)
      cpuloop = (cns == "nan") ? "-" : sprintf("%.1f", cns)
      trace = bytes > 0 ? sprintf("%.1f MB", bytes / 1e6) : "-"
      per = (bytes > 0 && sampled > 0) ? sprintf("%.1f (%d sampled)", bytes / sampled, sampled) : "-"
      printf "| %s | %.1f | %.1f | %s | %s | %s | %s | %s | %.2f | %.2f | %.0f | %s | %s |\n", c, ns, mn, over, mover, cpuloop, cover, tcover, wall, cpu, rss / 1024, trace, per
    }'
done
for config in rate1 rate1-libunwind; do
  if [[ " $CONFIGS " == *" heaptrack "* && " $CONFIGS " == *" $config "* ]]; then
    awk -v c="$config" -v t="$(median "$config" 2)" -v h="$(median heaptrack 2)" \
      -v tw="$(median "$config" 3)" -v hw="$(median heaptrack 3)" -v b="$base" 'BEGIN {
        printf "%s vs heaptrack: loop time %.2fx", c, t / h
        if (b != "nan") printf " (overhead %.2fx)", (t - b) / (h - b)
        printf ", wall time %.2fx\n", tw / hw
      }'
  fi
done
echo
echo "Targets: sample-512KiB overhead <= 3 ns/pair; rate 1 with backtraces <= 135 ns/pair;"
echo "trace <= 20 bytes per sampled allocation and its free."
