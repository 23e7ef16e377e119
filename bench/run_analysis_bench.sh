#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The analysis commands at production scale, against the reader's own decode time and the
# peer tools, in one run (issue #20; figures in bench/README.md, "Analysis commands at production scale"). Traces:
#   survivors  gen_trace --shape survivors --mb MB: rate 1, 90 % of blocks never collected
#   default    gen_trace --mb MB: sampled, most blocks short-lived
#   real       a real program of bench/real (REAL: sqlite3, the default, 45 000 INSERTs, an
#              index and a GROUP BY, 1.1 M allocations; or python3, with
#              PYTHONMALLOC=malloc so that its objects go through malloc: 4.7 M events, where
#              pymalloc's arenas leave 13 k) recorded by `ctfscope record --rate 1`, and
#              under heaptrack
#   alloc      bench_alloc PAIRS malloc+free pairs at rate 1, and under heaptrack
# On each: `read_bench --decode` (the reader alone: the yardstick), `ctfscope info`,
# `stats`, `top`, `leaks`, `diff` (the trace against itself), `export -f folded|pprof|csv`,
# `report`; memtrace-ocaml-reader count (../shared/tools, v002 traces) and
# heaptrack_print where the workload was recorded by heaptrack too (and, as diff's peer,
# `heaptrack_print -d` of that recording against itself: "heaptrack-d"). RUNS rounds,
# interleaved (each round runs every command once), medians of CPU time (user + system,
# /usr/bin/time) and the largest peak RSS. CPU time, not wall: the machine may be shared.
# The analysis commands run with --threads 1 (the CPU targets are the single-threaded
# path's), and once more per round in the automatic mode (a decode thread for 64 MiB or
# more when a CPU is idle, docs/user-guide.md): "wall 1" and "wall auto" are the medians
# of both runs' wall times, "cpu auto" the automatic run's CPU time.
#
# Usage: bench/run_analysis_bench.sh [BUILD_DIR]   (default: build/release, with
# -DCTS_BUILD_BENCH=ON). Environment: RUNS (3), MB (160), PAIRS (10000000), REAL
# (sqlite3; "none" skips it), TRACES (survivors default real alloc), COMMANDS (all).
# heaptrack (Debian: apt-get install heaptrack) is used when installed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${1:-build/release}
RUNS=${RUNS:-3}
MB=${MB:-160}
PAIRS=${PAIRS:-10000000}
REAL=${REAL:-sqlite3}
TRACES=${TRACES:-survivors default real alloc}
COMMANDS=${COMMANDS:-decode info stats top leaks diff folded pprof csv report ocaml heaptrack heaptrack-d}
CTFSCOPE=$BUILD/src/cli/ctfscope
GEN=$BUILD/bench/gen_trace
READ=$BUILD/bench/read_bench
ALLOC=$BUILD/bench/bench_alloc
OCAML=$ROOT/../shared/tools/memtrace-ocaml-reader
for f in "$CTFSCOPE" "$GEN" "$READ" "$ALLOC"; do
  [ -e "$f" ] || { echo "run_analysis_bench: $f is missing: build $BUILD first" >&2; exit 2; }
done
HAVE_HT=0
command -v heaptrack_print > /dev/null && HAVE_HT=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-analysis-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
wants() { [[ " $1 " == *" $2 "* ]]; }

echo "== machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); build $BUILD"
for t in $TRACES; do
  case $t in
    survivors) "$GEN" -o "$WORK/survivors.ctf" --mb "$MB" --shape survivors ;;
    default) "$GEN" -o "$WORK/default.ctf" --mb "$MB" ;;
    real)
      [ "$REAL" = none ] && continue
      mkdir -p "$WORK/real"
      penv=()
      bash "$HERE/real/gen_inputs.sh" "$WORK/real" "$REAL"
      case $REAL in
        python3) prog=(/usr/bin/python3 "$WORK/real/dict.py" "$WORK/real/out")
                 penv=(PYTHONMALLOC=malloc) ;;
        sqlite3) sed -i "1s|.*|.output $WORK/real/out|" "$WORK/real/sqlite.sql"
                 prog=(/usr/bin/sqlite3 -init "$WORK/real/sqlite.sql" :memory: .quit) ;;
        *) echo "run_analysis_bench: REAL=$REAL: use python3 or sqlite3" >&2; exit 2 ;;
      esac
      env "${penv[@]}" "$CTFSCOPE" record --rate 1 -o "$WORK/real.ctf" -- "${prog[@]}" > /dev/null 2>&1
      [ $HAVE_HT = 1 ] && env "${penv[@]}" heaptrack -o "$WORK/real.ht" "${prog[@]}" > /dev/null 2>&1
      echo "wrote $WORK/real.ctf: $(stat -c %s "$WORK/real.ctf") bytes ($REAL, rate 1)" ;;
    alloc)
      env LD_PRELOAD="$BUILD/src/cli/libctfscope-preload.so" MEMTRACE="$WORK/alloc.ctf" \
        MEMTRACE_RATE=1 "$ALLOC" "$PAIRS" > /dev/null
      [ $HAVE_HT = 1 ] && heaptrack -o "$WORK/alloc.ht" "$ALLOC" "$PAIRS" > /dev/null 2>&1
      echo "wrote $WORK/alloc.ctf: $(stat -c %s "$WORK/alloc.ctf") bytes (bench_alloc, rate 1)" ;;
    *) echo "run_analysis_bench: unknown trace $t" >&2; exit 2 ;;
  esac
done

# The command line of command $2 on trace file $1, or nothing where it does not apply; the
# analysis commands get $TH: " --threads 1", or nothing (the automatic mode).
TH=" --threads 1"
threaded() { [[ " stats top leaks diff folded pprof csv report " == *" $1 "* ]]; }
cmdline() {
  local tr=$1 c=$2 ht
  ht=$(ls "${tr%.ctf}".ht.* 2> /dev/null | head -1 || true)
  case $c in
    decode) echo "$READ --decode -n 1 --warmup 0 $tr" ;;
    info) echo "$CTFSCOPE $c -q $tr" ;;
    stats | top | leaks) echo "$CTFSCOPE $c -q$TH $tr" ;;
    diff) echo "$CTFSCOPE diff -q$TH $tr $tr" ;;
    folded | pprof | csv) echo "$CTFSCOPE export -q$TH -f $c -o $WORK/out.$c $tr" ;;
    report) echo "$CTFSCOPE report -q$TH $tr -o $WORK/out.html" ;;
    ocaml) [ -x "$OCAML" ] && echo "$OCAML count $tr" ;;
    heaptrack) [ $HAVE_HT = 1 ] && [ -n "$ht" ] && echo "heaptrack_print $ht" ;;
    heaptrack-d) [ $HAVE_HT = 1 ] && [ -n "$ht" ] && echo "heaptrack_print -d $ht $ht" ;;
  esac
  return 0
}

# RUNS interleaved rounds; each line of $WORK/raw: trace command cpu_s rss_kib status
# wall_s, the automatic mode's runs as command "C@auto".
: > "$WORK/raw"
run() { # trace, name in raw, command line
  local st=0 u s m e
  # shellcheck disable=SC2086 # the command line is split on purpose
  /usr/bin/time -f "%U %S %M %e" -o "$WORK/t" $3 > /dev/null 2> "$WORK/err" || st=$?
  read -r u s m e < <(tail -1 "$WORK/t")
  echo "$1 $2 $(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }') $m $st $e" >> "$WORK/raw"
}
for ((r = 0; r < RUNS; r++)); do
  for t in $TRACES; do
    [ -e "$WORK/$t.ctf" ] || continue
    for c in $COMMANDS; do
      line=$(cmdline "$WORK/$t.ctf" "$c")
      [ -n "$line" ] || continue
      run "$t" "$c" "$line"
      [ -e "$WORK/out.html" ] && echo "$t html $(stat -c %s "$WORK/out.html") 0 0 0" >> "$WORK/raw"
      rm -f "$WORK/out.html"
      threaded "$c" || continue
      run "$t" "$c@auto" "$(TH="" cmdline "$WORK/$t.ctf" "$c")"
      rm -f "$WORK/out.html"
    done
  done
done

printf "%-10s %-10s %9s %9s %9s %12s %7s %9s %8s %s\n" trace command "cpu s" "x decode" \
  "RSS MiB" "heaptrack/x" "wall 1" "wall auto" "cpu auto" "(exit status; MB/events per trace below)"
awk -v traces="$TRACES" -v cmds="$COMMANDS" '
  function median(k, f,   n, i, j, v, a) {
    n = cnt[k]; for (i = 1; i <= n; i++) a[i] = f == "wall" ? wall[k, i] : cpu[k, i]
    for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $1 SUBSEP $2; cnt[k]++; cpu[k, cnt[k]] = $3; wall[k, cnt[k]] = $6
    if ($4 > rss[k]) rss[k] = $4; if ($5) bad[k] = $5 }
  END {
    nt = split(traces, T, " "); nc = split(cmds, C, " ")
    for (i = 1; i <= nt; i++) {
      d = (T[i] SUBSEP "decode") in cnt ? median(T[i] SUBSEP "decode") : 0
      h = (T[i] SUBSEP "heaptrack") in cnt ? median(T[i] SUBSEP "heaptrack") : 0
      hd = (T[i] SUBSEP "heaptrack-d") in cnt ? median(T[i] SUBSEP "heaptrack-d") : 0
      for (j = 1; j <= nc; j++) {
        k = T[i] SUBSEP C[j]; if (!(k in cnt)) continue
        m = median(k)
        # diff reads two traces: against heaptrack_print -d (its diff of two files) when run
        hr = C[j] == "diff" && hd ? hd : C[j] ~ /^(heaptrack|ocaml)/ ? 0 : h
        a = k "@auto"
        printf "%-10s %-10s %9.2f %9s %9.1f %12s %7.2f %9s %8s %s\n", T[i], C[j], m,
          d ? sprintf("%.2f", m / d) : "-", rss[k] / 1024,
          hr ? sprintf("%.2f", hr / m) : "-", median(k, "wall"),
          (a in cnt) ? sprintf("%.2f", median(a, "wall")) : "-",
          (a in cnt) ? sprintf("%.2f", median(a)) : "-",
          (k in bad) ? "exit " bad[k] : (a in bad) ? "exit " bad[a] " (auto)" : ""
      }
      k = T[i] SUBSEP "html"
      if (k in cnt) printf "%-10s %-10s report HTML %.1f MB\n", T[i], "", median(k) / 1e6
    }
  }' "$WORK/raw"
for t in $TRACES; do
  [ -e "$WORK/$t.ctf" ] || continue
  "$READ" --decode -n 1 --warmup 0 "$WORK/$t.ctf" | awk -v t="$t" '/^trace/ { $1 = t; print }'
done
