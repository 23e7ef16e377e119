#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stats, top, diff and export -f csv against the reader's decode and their own floors
# (bench/floor_bench.c), on gen_trace's survivors and default shapes, optionally against a
# second build in the same run (issue #20; figures in bench/README.md, "Survivors-shape
# commands against their floors"). RUNS rounds, interleaved: each round runs every
# command of every build once on every trace; medians of CPU time (user + system,
# /usr/bin/time) and the largest peak RSS. Commands run with --threads 1 (CPU time of the
# single-threaded path; two threads add CPU on the other core).
#
# Usage: bench/run_floor_bench.sh BUILD [OTHER_BUILD]   (release builds with the benchmarks;
# OTHER_BUILD needs only src/cli/ctfscope). Environment: RUNS (3), MB (160),
# SHAPES (survivors default).
set -euo pipefail

BUILD=${1:?usage: run_floor_bench.sh BUILD [OTHER_BUILD]}
OTHER=${2:-}
RUNS=${RUNS:-3}
MB=${MB:-160}
SHAPES=${SHAPES:-survivors default}
FLOOR=$BUILD/bench/floor_bench
GEN=$BUILD/bench/gen_trace
for f in "$FLOOR" "$GEN" "$BUILD/src/cli/ctfscope" ${OTHER:+"$OTHER/src/cli/ctfscope"}; do
  [ -x "$f" ] || { echo "run_floor_bench: $f is missing" >&2; exit 2; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-floor-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A LINE
for s in $SHAPES; do
  "$GEN" -o "$WORK/$s.ctf" --mb "$MB" --shape "$s" > /dev/null
  events=$("$FLOOR" --decode "$WORK/$s.ctf" | cut -d' ' -f1)
  "$BUILD/src/cli/ctfscope" export -q -f csv --threads 1 -o "$WORK/out.csv" "$WORK/$s.ctf"
  bytes=$(stat -c %s "$WORK/out.csv")
  LINE[$s]=$(((bytes + events / 2) / events))
  echo "$s: $(stat -c %s "$WORK/$s.ctf") bytes, $events events; csv $bytes bytes, ${LINE[$s]} a line"
done

# run NAME SHAPE COMMAND...: one timed run, appended to $WORK/raw.
run() {
  local name=$1 shape=$2 st=0 u s m
  shift 2
  /usr/bin/time -f "%U %S %M" -o "$WORK/t" "$@" > /dev/null 2> "$WORK/err" || st=$?
  read -r u s m < <(tail -1 "$WORK/t")
  echo "$shape $name $(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }') $m $st $u" >> "$WORK/raw"
}

: > "$WORK/raw"
builds="new"
[ -n "$OTHER" ] && builds="new other"
for ((r = 0; r < RUNS; r++)); do
  for s in $SHAPES; do
    tr=$WORK/$s.ctf
    run decode "$s" "$FLOOR" --decode "$tr"
    run floor-live "$s" "$FLOOR" --live "$tr"
    run floor-sites "$s" "$FLOOR" --sites "$tr"
    run floor-csv "$s" "$FLOOR" --write "${LINE[$s]}" -o "$WORK/floor.csv" "$tr"
    for c in stats top diff csv; do
      for b in $builds; do
        bin=$BUILD/src/cli/ctfscope
        [ "$b" = other ] && bin=$OTHER/src/cli/ctfscope
        case $c in
          stats | top) run "$c/$b" "$s" "$bin" "$c" -q --threads 1 "$tr" ;;
          diff) run "$c/$b" "$s" "$bin" diff -q --threads 1 "$tr" "$tr" ;;
          csv) run "$c/$b" "$s" "$bin" export -q -f csv --threads 1 -o "$WORK/out.csv" "$tr" ;;
        esac
      done
    done
  done
done

[ -n "${RAW:-}" ] && cp "$WORK/raw" "$RAW"
printf "%-10s %-12s %7s %7s %9s %9s %8s %s\n" shape command "cpu s" "user s" "x decode" "x floor" \
  "RSS MiB" "new/other cpu, user (median of the rounds' ratios)"
awk '
  function median(k,   n, i, j, v, a) {
    n = cnt[k]; for (i = 1; i <= n; i++) a[i] = cpu[k, i]
    for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function med(x, n,   i, j, v) {
    for (i = 2; i <= n; i++) { v = x[i]; for (j = i - 1; j >= 1 && x[j] > v; j--) x[j + 1] = x[j]; x[j + 1] = v }
    return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
  }
  { k = $1 SUBSEP $2; if (!(k in cnt)) order[++nk] = k; cnt[k]++; cpu[k, cnt[k]] = $3
    usr[k, cnt[k]] = $6; if ($4 > rss[k]) rss[k] = $4; if ($5) bad[k] = $5 }
  END {
    for (i = 1; i <= nk; i++) {
      split(order[i], p, SUBSEP); s = p[1]; c = p[2]; m = median(order[i]); d = median(s SUBSEP "decode")
      split(c, q, "/"); f = ""
      if (q[1] == "stats") f = "floor-live"; else if (q[1] == "top") f = "floor-sites"
      else if (q[1] == "diff") f = "floor-sites"; else if (q[1] == "csv") f = "floor-csv"
      fl = f == "" ? 0 : median(s SUBSEP f) * (q[1] == "diff" ? 2 : 1)
      xd = d > 0 ? m / d / (q[1] == "diff" ? 2 : 1) : 0
      n = cnt[order[i]]; for (j = 1; j <= n; j++) ua[j] = usr[order[i], j]; um = med(ua, n)
      ratio = ""
      if (q[2] == "new" && ((s SUBSEP q[1] "/other") in cnt)) {
        o = s SUBSEP q[1] "/other"
        for (j = 1; j <= n; j++) { ra[j] = cpu[order[i], j] / cpu[o, j]; rb[j] = usr[order[i], j] / usr[o, j] }
        ratio = sprintf("%.2f, %.2f", med(ra, n), med(rb, n))
      }
      printf "%-10s %-12s %7.2f %7.2f %9.2f %9s %8.1f %s%s\n", s, c, m, um, xd,
        (fl > 0 ? sprintf("%.2f", m / fl) : ""), rss[order[i]] / 1024, ratio,
        (bad[order[i]] ? " (exit " bad[order[i]] ")" : "")
    }
  }' "$WORK/raw"
echo "(x decode of diff is per trace read: its CPU over two decodes; its floor is two --sites)"
