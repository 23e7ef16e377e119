#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The rings' memory with many threads (issue #16): bench/many_threads (THREADS threads at
# once, PAIRS malloc/free pairs of 64 bytes each) untraced, under `ctfscope record --rate 1`
# of each build given, and under heaptrack, interleaved (round 1 runs every configuration
# once, then round 2...). Per run: wall and CPU (user + system of every process: the writer
# process and heaptrack's interpreter included, reaped by bench/subreaper.c), the program's
# peak RSS (its VmHWM, printed by many_threads itself), its resident shared memory at the
# end (RssShmem: the rings) and the largest peak RSS of any process of the run (the writer
# process's, or heaptrack_interpret's, when above the program's). Prints every run, then
# the medians.
#
# Usage: bench/run_many_threads.sh [-n ROUNDS] [-w THREADSxPAIRS,...] NAME=BUILD_DIR...
#   -n ROUNDS   rounds (default 3)
#   -w LIST     workloads (default 1000x20000,100x200000,1x20000000)
#   NAME=DIR    a build to trace with (DIR/src/cli/ctfscope); many_threads is taken from
#               the first one that has it (DIR/bench/many_threads)
# Example: bench/run_many_threads.sh -n 5 main=/work/main/build/release this=build/release
set -euo pipefail

ROUNDS=3
WORKLOADS=1000x20000,100x200000,1x20000000
while getopts n:w:h opt; do
  case $opt in
    n) ROUNDS=$OPTARG ;;
    w) WORKLOADS=$OPTARG ;;
    *) sed -n '3,17p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '3,17p' "$0"; exit 2; }

HERE=$(cd "$(dirname "$0")" && pwd)
declare -a NAMES=() DIRS=()
for b in "$@"; do
  NAMES+=("${b%%=*}")
  DIRS+=("$(cd "${b#*=}" && pwd)")
done
PROG=""
for d in "${DIRS[@]}"; do
  if [ -z "$PROG" ] && [ -x "$d/bench/many_threads" ]; then PROG=$d/bench/many_threads; fi
done
[ -n "$PROG" ] || { echo "run_many_threads.sh: no build has bench/many_threads" >&2; exit 1; }
HAVE_HEAPTRACK=0
command -v heaptrack > /dev/null && HAVE_HEAPTRACK=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-many-threads.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
/usr/bin/gcc -O2 -std=gnu11 -Wall -Wextra -o "$WORK/subreaper" "$HERE/subreaper.c"

# Runs configuration $1 on workload $2 ("THREADSxPAIRS"); prints one line:
# config workload wall_s cpu_s program_vmhwm_kb program_rssshmem_kb max_process_rss_kb
run_one() {
  local cfg=$1 w=$2 threads=${2%x*} pairs=${2#*x}
  local -a cmd
  case $cfg in
    untraced) cmd=("$PROG" "$threads" "$pairs") ;;
    heaptrack) cmd=(heaptrack -o "$WORK/ht" "$PROG" "$threads" "$pairs") ;;
    *)
      local dir=""
      for i in "${!NAMES[@]}"; do [ "${NAMES[$i]}" = "$cfg" ] && dir=${DIRS[$i]}; done
      cmd=("$dir/src/cli/ctfscope" record -q --rate 1 -o "$WORK/t.ctf" -- "$PROG" "$threads" "$pairs") ;;
  esac
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$WORK/subreaper" "${cmd[@]}" > "$WORK/out" 2> /dev/null
  rm -f "$WORK"/t.ctf "$WORK"/ht*
  local e u s m hwm shm
  read -r e u s m < "$WORK/time"
  hwm=$(sed -n 's/.*vmhwm_kb \([0-9-]*\).*/\1/p' "$WORK/out")
  shm=$(sed -n 's/.*rssshmem_kb \([0-9-]*\).*/\1/p' "$WORK/out")
  echo "$cfg $w $e $(echo "$u + $s" | bc) $hwm $shm $m"
}

CONFIGS="untraced ${NAMES[*]}"
[ $HAVE_HEAPTRACK = 1 ] && CONFIGS="$CONFIGS heaptrack"
echo "# config workload wall_s cpu_s program_vmhwm_kb program_rssshmem_kb max_process_rss_kb"
for r in $(seq 1 "$ROUNDS"); do
  for w in ${WORKLOADS//,/ }; do
    for c in $CONFIGS; do run_one "$c" "$w"; done
  done
done | tee "$WORK/all"
echo "# medians of $ROUNDS"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for w in ${WORKLOADS//,/ }; do
  for c in $CONFIGS; do
    line="$c $w"
    for col in 3 4 5 6 7; do
      line="$line $(awk -v c="$c" -v w="$w" -v k=$col '$1 == c && $2 == w {print $k}' "$WORK/all" | median)"
    done
    echo "$line"
  done
done
