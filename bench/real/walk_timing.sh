#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times the default unwinder's walk per allocation of a program traced at rate 1, by the
# CPU's time-stamp counter around cts__unwind_mixed, under conditions that split its cost
# (issue #16, bench/README.md "Where cc1's walk spends its time (wip/h34walk)"). Builds a
# scratch copy of COMMIT with walk_timing.patch (bench only: never merged) and runs the
# program once per mode, the modes interleaved, ROUNDS times. The patch also lets the
# preload library trace under valgrind (vgpreload* skipped in preloaded_before_us), for
# cachegrind runs of the same build.
#
# Usage: [MODES="0 3 17"] walk_timing.sh COMMIT SCRATCH ROUNDS -- PROGRAM ARGS...
# (MODES: the modes run in each round, in that order; all of them by default)
# Modes (WALKPROF=N in the traced process; stderr: "WALKPROF ... mode N ..."):
#   0  the walk as it runs
#   1  the kept walk and the current walk's own frames loaded into the caches first
#   7  1, and the ring's lines the frames go to written first
#   3  the same walk made first, untimed, and its state put back: everything warm, the
#      branch predictors trained on this very walk
#   9  3, the rule-cache sets it looked up then flushed (clflush): those sets from memory
#  12  3, then 1 MiB of other data written: the data out of L1 and L2, the predictors warm
#  17  3, then 16 384 branches on random bits: the predictors scrambled, code and data warm
#  13  the floor: the walk made untimed, then its frames walked again with each frame's
#      offset of the return address known (no look-up, no check, no rejoin)
#  15  the floor with the rejoin: 13 for the walk's own frames, the rest compared with the
#      last walk's words and copied, as the splice does
#  14  nothing timed: the counter's own cost, to subtract
# Each line: walks, the median and the mean ticks of the walks below 8 192 ticks (a
# preemption lands in "out"), the rule-cache misses and their ticks (the CFI read again).
set -euo pipefail
if [ $# -lt 5 ] || [ "$4" != -- ]; then
  echo "usage: $0 COMMIT SCRATCH ROUNDS -- PROGRAM ARGS..." >&2
  exit 2
fi
commit=$1 scratch=$2 rounds=$3
shift 4
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
tree=$scratch/walk-timing-tree
rm -rf "$tree" && mkdir -p "$tree"
git -C "$repo" archive "$commit" | tar -x -C "$tree"
patch -s -d "$tree" -p1 < "$here/walk_timing.patch"
(cd "$tree" && nice -n 19 cmake --preset release -DCMAKE_C_FLAGS=-Wno-error > /dev/null &&
  nice -n 19 cmake --build --preset release --target ctfscope_preload ctfscope > /dev/null)
cli=$tree/build/release/src/cli/ctfscope
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) commit $commit: $*"
for ((r = 0; r < rounds; r++)); do
  for mode in ${MODES:-14 0 1 7 3 9 12 17 13 15}; do
    WALKPROF=$mode "$cli" record -q --rate 1 -o "$scratch/walk-timing.ctf" -- "$@" 2>&1 >/dev/null |
      grep '^WALKPROF' || true
  done
done
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
