#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The real-program benchmark: Debian's own binaries (no frame pointers, their own
# allocation patterns) run untraced, traced by ctfscope and under heaptrack, in the same
# session, interleaved (round 1 runs every configuration once, then round 2...), first on
# every CPU, then pinned to one (taskset -c 0, or the first CPU this script may use). Prints a Markdown report and writes it to
# bench/real/results-DATE.md, with the raw figures next to it (results-DATE.tsv).
#
# Usage: bench/real/run.sh [OPTIONS]
#   --build DIR      build to measure (default build/release; built with the release
#                    preset if it is the default and is missing)
#   --runs N         rounds (default 5)
#   --only LIST      programs, comma-separated: sqlite3,python3,cc1,cc1plus,git,sort,zstd,redis,exec
#   --configs LIST   configurations, comma-separated (default: all; see below)
#   --no-pin         only the run on every CPU
#   --pin-only       only the run pinned to one CPU
#   --out FILE       the report (default bench/real/results-DATE.md; never overwritten)
#   --timeout S      limit per run, seconds (default 300); a run over it counts as failed
#   --no-install     do not apt-get install missing programs; fail instead
#   --report TSV     no runs: print the tables of the raw figures of an earlier run
#   -h, --help       this help
#
# Configurations: untraced; default-rate (`ctfscope record`, no rate: 1e-6); rate1 (every
# allocation, default unwinder: mixed); rate1-fp; rate1-libunwind; rate1-nobt (rate 1, no
# backtraces: the floor of recording every event); rate1-compress (rate 1
# with --compress, only if `ctfscope record --help` offers it); heaptrack (heaptrack -o);
# floor-record and floor-record-walk (not in the default list: bench/real/floor_recorder.c,
# the least any tracer recording every allocation with a time must do, without and with
# libunwind's unw_backtrace per allocation; their file's bytes and 24-byte records show as
# the trace's); floor-forward (not in the default list: bench/real/floor_forward.c, a
# preload that interposes the allocation functions ctfscope's preload interposes and only
# forwards them: what any LD_PRELOAD tracer pays at a sampling rate of zero).
# Wall and CPU (user + system of every process, the writer process and heaptrack's
# interpreter included: bench/subreaper.c waits for them, bench/real/measure.c times it).
# Ratios are taken within each round, then their median reported. Each run's output (a
# file the program writes, deterministic) and exit status are compared with an untraced
# warm-up run's. Targets (issue #16): rate1 <= 0.5 x heaptrack's wall (0.7 x pinned),
# default-rate <= 1.05 x untraced, rate1-compress <= 2 bytes per event.
# Needs root (or sudo) only to install missing Debian packages.
set -euo pipefail

usage() { awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$ROOT/build/release
BUILD_GIVEN=0
RUNS=5
ONLY=sqlite3,python3,cc1,cc1plus,git,sort,zstd,redis,exec
CONFIGS_WANTED=untraced,default-rate,rate1,rate1-fp,rate1-libunwind,rate1-compress,heaptrack
MODES="all pinned"
OUT=""
TIMEOUT=300
INSTALL=1
REPORT_ONLY=""

die() { echo "run.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=${2:?}; BUILD_GIVEN=1; shift 2 ;;
    --runs) RUNS=${2:?}; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --configs) CONFIGS_WANTED=${2:?}; shift 2 ;;
    --no-pin) MODES=all; shift ;;
    --pin-only) MODES=pinned; shift ;;
    --out) OUT=${2:?}; shift 2 ;;
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --report) REPORT_ONLY=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs wants a positive count"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout wants seconds"

# The tables of raw figures $1 for modes $2, programs $3, configurations $4.
tables() {
  local mode
  for mode in $2; do
    awk -F'\t' -v mode="$mode" -v progs="$3" -v configs="$4" -f "$HERE/report.awk" "$1"
  done
}
if [ -n "$REPORT_ONLY" ]; then
  [ -f "$REPORT_ONLY" ] || die "$REPORT_ONLY: no such file"
  # Modes, programs and configurations in the order the run met them.
  in_order() { awk -F'\t' -v k="$1" '!seen[$k]++ { printf "%s ", $k }' "$REPORT_ONLY"; }
  echo "# Real-program benchmark: tables of $REPORT_ONLY"
  echo
  tables "$REPORT_ONLY" "$(in_order 1)" "$(in_order 2)" "$(in_order 3)"
  exit 0
fi

PROGRAMS=${ONLY//,/ }
for p in $PROGRAMS; do
  case $p in sqlite3 | python3 | cc1 | cc1plus | git | sort | zstd | redis | exec) ;; *) die "unknown program $p" ;; esac
done
for c in ${CONFIGS_WANTED//,/ }; do
  case $c in
    untraced | default-rate | rate1 | rate1-fp | rate1-libunwind | rate1-nobt | rate1-compress | heaptrack) ;;
    floor-record | floor-record-walk | floor-forward) ;;
    *) die "unknown configuration $c" ;;
  esac
done

# --- Debian packages --------------------------------------------------------------------
# command -> package; Debian's python3 and redis are wanted, not another install's.
declare -A PACKAGE_OF=([/usr/bin/sqlite3]=sqlite3 [/usr/bin/python3]=python3 [/usr/bin/gcc]=gcc
  [/usr/bin/g++]=g++
  [/usr/bin/git]=git [/usr/bin/sort]=coreutils [/usr/bin/zstd]=zstd
  [/usr/bin/redis-server]=redis-server [/usr/bin/redis-benchmark]=redis-tools
  [/usr/bin/redis-cli]=redis-tools [/usr/bin/heaptrack]=heaptrack [/usr/bin/taskset]=util-linux
  [/usr/bin/cmake]=cmake [/usr/bin/ninja]=ninja-build [/usr/bin/md5sum]=coreutils)
missing=()
for cmd in "${!PACKAGE_OF[@]}"; do
  [ -x "$cmd" ] || missing+=("${PACKAGE_OF[$cmd]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  [ $INSTALL = 1 ] || die "missing Debian packages: ${missing[*]} (apt-get install them, or drop --no-install)"
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  echo "run.sh: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { "${sudo[@]}" apt-get update >&2 && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
fi
CC1=$(/usr/bin/gcc -print-prog-name=cc1)
[ -x "$CC1" ] || die "gcc's cc1 not found ($CC1)"
CC1PLUS=$(/usr/bin/g++ -print-prog-name=cc1plus)
[ -x "$CC1PLUS" ] || die "g++'s cc1plus not found ($CC1PLUS)"

# --- the build measured -----------------------------------------------------------------
CTFSCOPE=$BUILD/src/cli/ctfscope
if [ ! -x "$CTFSCOPE" ] || [ ! -e "$BUILD/src/cli/libctfscope-preload.so" ]; then
  [ $BUILD_GIVEN = 0 ] || die "$BUILD has no ctfscope: build it first"
  echo "run.sh: building the release preset in $BUILD" >&2
  # The project's build dependencies (scripts/deps.sh's Debian packages; not its npm ones).
  if [ $INSTALL = 1 ]; then
    # shellcheck source=/dev/null
    (source "$ROOT/scripts/deps.sh" && cts_install_deps) >&2 || die "scripts/deps.sh failed"
  fi
  (cd "$ROOT" && cmake --preset release > /dev/null && cmake --build build/release -j2 > /dev/null) ||
    die "the release build failed: cmake --preset release && cmake --build build/release"
fi
COMPRESS_OPT=""
# (grep reads the whole help: with -q it may exit at the match, and under pipefail the
# writer's SIGPIPE would then read as "no such option".)
if "$CTFSCOPE" record --help 2>&1 | grep -- '--compress' > /dev/null; then COMPRESS_OPT=--compress; fi
CONFIGS=""
for c in ${CONFIGS_WANTED//,/ }; do
  if [ "$c" = rate1-compress ] && [ -z "$COMPRESS_OPT" ]; then
    echo "run.sh: ctfscope record has no --compress option: rate1-compress skipped" >&2
    continue
  fi
  CONFIGS="$CONFIGS $c"
done
CONFIGS=${CONFIGS# }
[[ " $CONFIGS " == *" untraced "* ]] || die "the configuration untraced is needed (every ratio uses it)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cts-real-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for tool in measure subreaper; do
  src=$HERE/$tool.c
  [ $tool = subreaper ] && src=$ROOT/bench/subreaper.c
  /usr/bin/gcc -O2 -std=gnu11 -Wall -Wextra -o "$WORK/$tool" "$src" || die "cannot compile $src"
done
cc_so=(/usr/bin/gcc -O2 -std=gnu11 -Wall -Wextra -fPIC -shared)
if [[ " $CONFIGS " == *" floor-forward "* ]]; then
  "${cc_so[@]}" -o "$WORK/floor_forward.so" "$HERE/floor_forward.c" -ldl ||
    die "cannot compile $HERE/floor_forward.c"
fi
if [[ " $CONFIGS " == *" floor-record"* ]]; then
  # libunwind's headers: libunwind-dev, one of the project's build dependencies.
  "${cc_so[@]}" -o "$WORK/floor_recorder.so" "$HERE/floor_recorder.c" -ldl -lpthread ||
    die "cannot compile $HERE/floor_recorder.c"
  "${cc_so[@]}" -DFLOOR_WALK -o "$WORK/floor_recorder_walk.so" "$HERE/floor_recorder.c" \
    -ldl -lpthread -lunwind || die "cannot compile $HERE/floor_recorder.c with FLOOR_WALK"
fi

DATE=$(date -u +%Y-%m-%dT%H%MZ)
if [ -z "$OUT" ]; then OUT=$HERE/results-$DATE.md; fi
[ ! -e "$OUT" ] || die "$OUT exists: not overwritten (--out FILE)"
RAW=${OUT%.md}.tsv
[ ! -e "$RAW" ] || die "$RAW exists: not overwritten"

# --- inputs (untimed) -------------------------------------------------------------------
echo "run.sh: generating the inputs in $WORK" >&2
IN=$WORK/in
mkdir -p "$IN"
# "$HERE/gen_inputs.sh" writes every program's input into $IN.
"$HERE/gen_inputs.sh" "$IN" "$PROGRAMS"

# The command of program $1, its output written to file $2, into the array CMD; its
# standard input into STDIN, extra environment into ENVV. Each writes its result to a file
# (not stdout: heaptrack prints its own lines there).
set_workload() {
  local prog=$1 out=$2
  STDIN=/dev/null
  ENVV=()
  case $prog in
    sqlite3)
      CMD=(/usr/bin/sqlite3 -batch :memory:)
      sed "1s|.*|.output $out|" "$IN/sqlite.sql" > "$WORK/sqlite.sql"
      STDIN=$WORK/sqlite.sql ;;
    python3)
      CMD=(/usr/bin/python3 "$IN/dict.py" "$out")
      ENVV=(PYTHONMALLOC=malloc) ;;
    cc1) CMD=("$CC1" -quiet -O2 "$IN/big.c" -o "$out") ;;
    # A C++ program (libstdc++ underneath, C++ names): g++'s own preprocessing options.
    cc1plus) CMD=("$CC1PLUS" -quiet -imultiarch "$(/usr/bin/g++ -print-multiarch)" -D_GNU_SOURCE
                  -O2 "$IN/big.cpp" -o "$out") ;;
    git) CMD=(/usr/bin/git -C "$IN/repo" log -p --output="$out" main) ;;
    sort) CMD=(/usr/bin/sort -o "$out" "$IN/lines.txt"); ENVV=(LC_ALL=C) ;;
    zstd) CMD=(/usr/bin/zstd -T2 -3 -q -f "$IN/lines.txt" -o "$out") ;;
    redis) CMD=(/usr/bin/redis-server) ;;
    exec)
      # A chain of 20 images, each exec'ing the next (the traced kind of exec: a forked
      # child is not traced), the last one writing the output: the start-up of a traced
      # image, paid 20 times, against a few milliseconds untraced.
      CMD=()
      for _ in $(seq 1 19); do CMD+=(/usr/bin/env); done
      # shellcheck disable=SC2016 # $0 is the inner shell's: the output file
      CMD+=(/bin/sh -c 'echo "exec chain done" > "$0"' "$out") ;;
  esac
}

# The tracer's (or heaptrack's) command prefix for configuration $1, trace file $2.
set_prefix() {
  local config=$1 trace=$2
  case $config in
    untraced) PREFIX=() ;;
    default-rate) PREFIX=("$CTFSCOPE" record -q -o "$trace" --) ;;
    rate1) PREFIX=("$CTFSCOPE" record -q -r 1 -o "$trace" --) ;;
    rate1-fp) PREFIX=("$CTFSCOPE" record -q -r 1 --unwind fp -o "$trace" --) ;;
    rate1-libunwind) PREFIX=("$CTFSCOPE" record -q -r 1 --unwind libunwind -o "$trace" --) ;;
    rate1-nobt) PREFIX=("$CTFSCOPE" record -q -r 1 --unwind none -o "$trace" --) ;;
    rate1-compress) PREFIX=("$CTFSCOPE" record -q -r 1 "$COMPRESS_OPT" -o "$trace" --) ;;
    heaptrack) PREFIX=(/usr/bin/heaptrack -o "$WORK/run/ht") ;;
    floor-record) PREFIX=(env LD_PRELOAD="$WORK/floor_recorder.so" FLOOR_RECORD_OUT="$WORK/run/floor.rec") ;;
    floor-record-walk)
      PREFIX=(env LD_PRELOAD="$WORK/floor_recorder_walk.so" FLOOR_RECORD_OUT="$WORK/run/floor.rec") ;;
    floor-forward) PREFIX=(env LD_PRELOAD="$WORK/floor_forward.so") ;;
  esac
}

REDIS_REQUESTS=${REDIS_REQUESTS:-20000}
# A loopback port nobody answers on, for one redis run: below the kernel's ephemeral range
# (32768 and up by default), where the local ends of earlier runs' client connections sit
# in TIME_WAIT, unseen by a connect test, and make the server's bind fail.
free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 12000))
    if ! timeout 2 /usr/bin/redis-cli -h 127.0.0.1 -p "$port" ping > /dev/null 2>&1 &&
      ! (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then
      echo "$port"
      return
    fi
  done
  die "no free loopback port found"
}

# One run: mode $1 (all/pinned), program $2, configuration $3, round $4 (0: the warm-up,
# whose output is the reference). Appends a line to $RAW: mode program config round wall
# user sys status output_md5 trace_bytes events trace_state.
run_one() {
  local mode=$1 prog=$2 config=$3 round=$4
  local run=$WORK/run out trace
  rm -rf "$run"
  mkdir -p "$run"
  out=$run/output trace=$run/trace.ctf
  set_workload "$prog" "$out"
  set_prefix "$config" "$trace"
  local -a full pin=()
  if [ "$prog" = redis ]; then
    full=("$HERE/redis_workload.sh" "$(free_port)" "$out" "$REDIS_REQUESTS" "${PREFIX[@]}" "${CMD[@]}")
  else
    full=("${PREFIX[@]}" "${CMD[@]}")
  fi
  [ "$mode" = pinned ] && pin=(taskset -c "$PIN_CPU")
  # env inside the timed tree: neither measure nor subreaper is traced; the user's own
  # tracer settings are cleared so that each configuration is what its name says.
  "${pin[@]}" "$WORK/measure" -o "$run/time.txt" "$WORK/subreaper" \
    timeout -k 5 "$TIMEOUT" env -u LD_PRELOAD -u MEMTRACE -u MEMTRACE_RATE -u CTFSCOPE_UNWIND \
    -u CTFSCOPE_WRITER -u CTFSCOPE_PRELOAD "${ENVV[@]}" "${full[@]}" \
    < "$STDIN" > "$run/stdout.txt" 2> "$run/stderr.txt" || true
  local wall=nan user=nan sys=nan status=255 sum="-" bytes=0 events=0 state="-" f json n
  # A missing figure (the timer itself failed) must not end an hour-long run.
  read -r wall user sys status < "$run/time.txt" ||
    echo "  run.sh: $mode $prog $config round $round: no timing" >&2
  [ -f "$out" ] && sum=$(md5sum < "$out" | cut -c1-12)
  shopt -s nullglob
  # trace*: the trace, the .execN.ctf of images it execs, whatever suffix compression adds.
  local traces=("$run"/trace*) hts=("$run"/ht.*)
  shopt -u nullglob
  if [ ${#traces[@]} -gt 0 ]; then
    state=ok
    for f in "${traces[@]}"; do
      bytes=$((bytes + $(stat -c %s "$f")))
      if json=$("$CTFSCOPE" info --json "$f" 2> /dev/null); then
        n=$(sed -n 's/^ *"events_total": \([0-9]*\).*/\1/p' <<< "$json")
        events=$((events + ${n:-0}))
        grep -q '"reader_result": "ok"' <<< "$json" || state=damaged
        grep -q '"packet_walk_end": "clean"' <<< "$json" || state=damaged
      else
        state=unreadable
      fi
    done
  elif [ ${#hts[@]} -gt 0 ]; then
    for f in "${hts[@]}"; do bytes=$((bytes + $(stat -c %s "$f"))); done
    state=heaptrack
  elif [ -f "$run/floor.rec" ]; then
    bytes=$(stat -c %s "$run/floor.rec")
    events=$((bytes / 24))
    state=floor
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$prog" "$config" "$round" \
    "$wall" "$user" "$sys" "$status" "$sum" "$bytes" "$events" "$state" >> "$RAW"
  # A failed or differing run keeps its logs for the reader.
  if [ "$round" != 0 ]; then
    local ref
    ref=$(awk -F'\t' -v m="$mode" -v p="$prog" '$1 == m && $2 == p && $4 == 0 { print $9 " " $8 }' "$RAW")
    if [ "$sum $status" != "$ref" ]; then
      local keep=${TMPDIR:-/tmp}/cts-real-bench-failed-$DATE/$mode-$prog-$config-$round
      mkdir -p "$keep"
      cp "$run"/*.txt "$run"/*.log "$keep"/ 2> /dev/null || true
      echo "  run.sh: $mode $prog $config round $round: output or status DIFFERS from untraced ($sum $status against $ref); logs in $keep" >&2
    fi
  fi
  rm -rf "$run"
}

machine() {
  echo "$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# CPU 0, unless a cpuset (a container) leaves it out: the first CPU allowed.
PIN_CPU=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')
START_MACHINE=$(machine)
# Taken before the runs: a commit made during an hour-long run is not what was measured.
# The build's own checkout (--build may be another worktree's); what was built from it
# is not known, only what is checked out.
commit=$(git -C "$BUILD" rev-parse --short=12 HEAD 2> /dev/null || echo unknown)
git -C "$BUILD" diff --quiet HEAD 2> /dev/null || commit="$commit (with uncommitted changes)"
echo "run.sh: $RUNS rounds of $PROGRAMS x $CONFIGS, modes: $MODES; $START_MACHINE" >&2
: > "$RAW"
for mode in $MODES; do
  for prog in $PROGRAMS; do
    run_one "$mode" "$prog" untraced 0
  done
  for round in $(seq 1 "$RUNS"); do
    for prog in $PROGRAMS; do
      for config in $CONFIGS; do
        run_one "$mode" "$prog" "$config" "$round"
        echo "  $(tail -1 "$RAW" | tr '\t' ' ')" >&2
      done
    done
  done
done

# --- report -----------------------------------------------------------------------------
{
  echo "# Real-program benchmark, $DATE"
  echo
  echo "- build: \`$BUILD\` ($("$CTFSCOPE" --version 2> /dev/null | head -1)), its source tree at commit $commit when the run began"
  echo "- machine: $START_MACHINE at the start; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
  echo "- $RUNS interleaved rounds; configurations: $CONFIGS"
  echo "- programs: $(/usr/bin/sqlite3 --version | cut -d' ' -f1) sqlite3, $(/usr/bin/python3 --version 2>&1),"\
    "cc1 and cc1plus of $(/usr/bin/gcc -dumpfullversion), $(/usr/bin/git --version), $(/usr/bin/sort --version | head -1),"\
    "$(/usr/bin/zstd -V | cut -d, -f1 | sed 's/^\*\*\* //'), redis-server $(/usr/bin/redis-server -v | sed -n 's/.*v=\([^ ]*\).*/\1/p'),"\
    "$(/usr/bin/heaptrack -v 2>&1 | head -1)"
  echo
  tables "$RAW" "$MODES" "$PROGRAMS" "$CONFIGS"
} > "$OUT"
cat "$OUT"
echo "run.sh: report in $OUT, raw figures in $RAW" >&2
