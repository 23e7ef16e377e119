#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets (the `fuzz` preset) and runs each for a few minutes, then
# prints what the runs did. See docs/fuzzing.md.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/fuzz.sh [OPTIONS] [MINUTES] [TARGET...]

Build the fuzz preset (clang, ASan + UBSan, libFuzzer) and run every fuzz target of
tests/fuzz/ (or the TARGETs named) for MINUTES minutes each (default 1), one after the
other, then print a table: target, executions, executions per second, coverage (libFuzzer's
'cov', covered edges) at the start and the end, corpus files the run added, and the
failing inputs it saved (crashes, leaks, timeouts, out-of-memory).

Each run reads the committed corpus tests/fuzz/corpus/TARGET/ and writes what it finds to
a scratch corpus; nothing under tests/ changes unless --merge is given.

Options:
  -j, --jobs N       run N targets at once (default 1; at most one per core is useful)
  -k, --keep-going   do not stop at the first failing input: save it and go on
                     (libFuzzer's -fork=1 with -ignore_crashes, -ignore_timeouts and
                     -ignore_ooms; its coverage counts differ from a plain run's)
      --merge        fold each run's new inputs into tests/fuzz/corpus/TARGET/ with
                     libFuzzer's -merge=1 (only inputs that add coverage are kept)
      --work DIR     keep corpora, logs and failing inputs in DIR (default: a new
                     directory under ${TMPDIR:-/tmp}, printed at the end)
      --build DIR    the fuzz build directory (default build/fuzz)
      --no-build     do not configure or build first
      --summary      only print the table of the runs kept in --work DIR
      --list         list the targets and exit
  -h, --help         show this help

Each target's log (WORK/TARGET/log) has every libFuzzer line prefixed with the seconds
since the run started, and the table is followed by the coverage at each minute.

Exit status: 0 when no run saved a failing input, 1 when one did (reproduce it with
BUILD/tests/fuzz/TARGET FILE), 2 for a usage error, 3 when the build failed.
EOF
}

cd "$(dirname "$0")/.."
minutes=1
jobs=1
merge=0
keep_going=()
summary=0
build_dir=build/fuzz
build=1
work=
targets=()

all_targets() {
  # A target is a tests/fuzz/fuzz_*.c file that defines the libFuzzer entry point.
  grep -l '^int LLVMFuzzerTestOneInput(const uint8_t \*data, size_t size) {' tests/fuzz/fuzz_*.c |
    sed 's|.*/||; s|\.c$||' | sort
}

die_usage() {
  echo "fuzz.sh: $*" >&2
  echo "Try 'scripts/fuzz.sh --help' for more information." >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --list) all_targets; exit 0 ;;
    -j | --jobs)
      [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || die_usage "$1 needs a positive number"
      jobs=$2; shift ;;
    --merge) merge=1 ;;
    -k | --keep-going) keep_going=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1) ;;
    --work)
      [ $# -ge 2 ] || die_usage "--work needs a directory"
      work=$2; shift ;;
    --build)
      [ $# -ge 2 ] || die_usage "--build needs a directory"
      build_dir=$2; shift ;;
    --no-build) build=0 ;;
    --summary) summary=1 ;;
    -*) die_usage "unknown option '$1'" ;;
    *)
      if [[ "$1" =~ ^[0-9]+([.][0-9]+)?$ ]] && [ ${#targets[@]} -eq 0 ]; then
        minutes=$1
      elif [ -f "tests/fuzz/$1.c" ]; then
        targets+=("$1")
      else
        die_usage "'$1' is neither a number of minutes nor a target (see --list)"
      fi ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(all_targets)
seconds=$(awk -v m="$minutes" 'BEGIN { s = int(m * 60 + 0.5); print s < 1 ? 1 : s }')

if [ "$summary" = 1 ]; then
  [ -n "$work" ] && [ -d "$work" ] || die_usage "--summary needs --work DIR of earlier runs"
  build=0
fi
if [ "$build" = 1 ]; then
  echo "==> building ${targets[*]} in $build_dir" >&2
  if { [ -f "$build_dir/CMakeCache.txt" ] || cmake --preset fuzz -B "$build_dir" >/dev/null; } &&
    cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}" >/dev/null; then
    :
  else
    echo "fuzz.sh: the build failed (run: cmake --build $build_dir)" >&2
    exit 3
  fi
fi
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/ctfscope-fuzz.XXXXXX")
mkdir -p "$work"

# Longest input per target: the trace targets read real traces cut to this length.
max_len() {
  case "$1" in
    fuzz_cfi | fuzz_http_request) echo 9000 ;;
    fuzz_analysis | fuzz_report) echo 32768 ;;
    *) echo 8192 ;;
  esac
}

# Runs one target; its log lines get the seconds since the start in front.
run_target() {
  local t=$1 dir="$work/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  # One process, one core (libFuzzer's -jobs=1 -workers=1 would add a parent process and
  # hold the log back in fuzz-0.log until the end). -close_fd_mask=3: the targets' own
  # stdout and stderr (the commands' messages) are dropped; libFuzzer's and the
  # sanitizers' reports still reach the log.
  "$build_dir/tests/fuzz/$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
    -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 -close_fd_mask=3 \
    ${keep_going[@]+"${keep_going[@]}"} -artifact_prefix="$dir/artifacts/" \
    "$dir/corpus" "tests/fuzz/corpus/$t" 2>&1 |
    {
      local start=$SECONDS line
      while IFS= read -r line; do printf '%d %s\n' "$((SECONDS - start))" "$line"; done
    } >"$dir/log" || true
  if [ "$merge" = 1 ] && [ -n "$(ls -A "$dir/corpus")" ]; then
    "$build_dir/tests/fuzz/$t" -merge=1 -max_len="$(max_len "$t")" -close_fd_mask=3 \
      "tests/fuzz/corpus/$t" "$dir/corpus" >"$dir/merge.log" 2>&1 || true
  fi
}

if [ "$summary" = 1 ]; then
  mapfile -t targets < <(for t in "${targets[@]}"; do [ -f "$work/$t/log" ] && echo "$t"; done)
else
  echo "==> running ${#targets[@]} targets for $minutes min each, $jobs at a time; work: $work" >&2
fi
running=0
for t in "${targets[@]}"; do
  [ "$summary" = 0 ] || break
  [ -x "$build_dir/tests/fuzz/$t" ] || { echo "fuzz.sh: no $build_dir/tests/fuzz/$t" >&2; exit 3; }
  echo "    $t" >&2
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=0
printf '\n%-22s %12s %8s %9s %7s %10s %8s\n' target executions exec/s cov-start cov-end new-files failures
for t in "${targets[@]}"; do
  dir="$work/$t"
  field() { sed -n "s/^[0-9]* stat::$1: *//p" "$dir/log" | tail -1; }
  execs=$(field number_of_executed_units)
  rate=$(field average_exec_per_sec)
  if [ -z "$execs" ]; then # -fork: "#EXECS: cov: N ... exec/s R ..." lines, no final stats
    execs=$(sed -n 's/^[0-9]* #\([0-9]*\): cov: .*/\1/p' "$dir/log" | tail -1)
    rate=$(sed -n 's/^[0-9]* #[0-9]*: cov: .* exec\/s \([0-9]*\) .*/\1/p' "$dir/log" | tail -1)
  fi
  cov0=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' "$dir/log" | sed -n 1p) # no SIGPIPE
  cov1=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' "$dir/log" | tail -1)
  new=$(find "$dir/corpus" -type f | wc -l)
  fails=$(find "$dir/artifacts" -type f | wc -l)
  [ "$fails" -eq 0 ] || failed=1
  printf '%-22s %12s %8s %9s %7s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov0:-?}" \
    "${cov1:-?}" "$new" "$fails"
done
echo
echo "coverage at the end of each minute (cov):"
for t in "${targets[@]}"; do
  awk -v t="$t" '
    { if (match($0, / cov: [0-9]+ /)) { cov = substr($0, RSTART + 6, RLENGTH - 7); last = $1 }
      m = int($1 / 60); if (cov != "") at[m] = cov; if (m > max) max = m }
    END { line = sprintf("  %-20s", t); prev = "";
          for (i = 0; i <= max; i++) { if (i in at) prev = at[i]; line = line " " (prev == "" ? "-" : prev) }
          print line }' "$work/$t/log"
done
echo
echo "logs, scratch corpora and failing inputs: $work"
for t in "${targets[@]}"; do
  for f in "$work/$t"/artifacts/*; do
    [ -e "$f" ] && echo "  failing input of $t: $f (replay: $build_dir/tests/fuzz/$t $f)"
  done
done
exit "$failed"
