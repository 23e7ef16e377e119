#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Final figures for the task tracer (bench/README.md, "bench_tasks"): builds bench_tasks
# optimised, sets up an LTTng-UST session that enables the comparison tracepoint, runs the
# benchmark once (every case side by side), and tears the session down. Run it on a quiet
# machine; as root or not (LTTng then uses a per-user session daemon).
#
#   bench/run_tasks_bench.sh [bench_tasks options]     e.g. --events 10000000 --runs 9
#
# Environment: BUILD (build directory, default build/bench-tasks), CC (compiler, default
# gcc). Needs cmake and ninja; the LTTng comparison needs liblttng-ust-dev and lttng-tools
# (Debian: apt-get install -y liblttng-ust-dev lttng-tools). Without them the tracepoint is
# measured compiled in but disabled, or not at all, and the script says so.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build/bench-tasks}

echo "== machine"
grep -m1 "model name" /proc/cpuinfo || true
echo "cpus: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo '?')"
governor=/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
[ -r "$governor" ] && echo "governor: $(cat "$governor")"

echo "== build ($build)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER="${CC:-gcc}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" \
  -DCTS_BUILD_TESTS=OFF -DCTS_BUILD_BENCH=ON > "$build.cmake.log" 2>&1 ||
  { cat "$build.cmake.log"; exit 1; }
grep "bench_tasks:" "$build.cmake.log" || echo "(lttng-ust not found: no LTTng comparison)"
ninja -C "$build" bench_tasks > /dev/null

# ---- LTTng session ------------------------------------------------------------------------
session=""
started_sessiond=""
cleanup() {
  if [ -n "$session" ]; then
    lttng destroy "$session" > /dev/null 2>&1 || true
  fi
  if [ -n "$started_sessiond" ]; then
    kill "$started_sessiond" 2> /dev/null || true
  fi
  if [ -n "${snapshot_dir:-}" ]; then rm -rf "$snapshot_dir"; fi
}
trap cleanup EXIT

if command -v lttng > /dev/null && command -v lttng-sessiond > /dev/null &&
  grep -q "bench_tasks: compared with LTTng-UST" "$build.cmake.log"; then
  if [ "$(id -u)" = 0 ]; then
    pidfile=/var/run/lttng/lttng-sessiond.pid
  else
    pidfile=$HOME/.lttng/lttng-sessiond.pid
  fi
  if ! { [ -r "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2> /dev/null; }; then
    # Our own session daemon (user-space tracing only), stopped again at the end.
    lttng-sessiond --daemonize --no-kernel
    for _ in $(seq 50); do [ -r "$pidfile" ] && break; sleep 0.1; done
    started_sessiond=$(cat "$pidfile")
    echo "== started lttng-sessiond (pid $started_sessiond)"
  fi
  session=ctsbench-$$
  snapshot_dir=$(mktemp -d)
  # Snapshot mode: the channel overwrites its oldest sub-buffers when full, like our ring,
  # and no consumer drains it while the benchmark runs. 4 x 4 MiB per CPU.
  lttng create "$session" --snapshot --output="$snapshot_dir" > /dev/null
  lttng enable-channel -u -s "$session" --subbuf-size=4M --num-subbuf=4 --overwrite ctschan \
    > /dev/null
  lttng enable-event -u -s "$session" -c ctschan 'cts_bench:event' > /dev/null
  lttng start "$session" > /dev/null
  echo "== LTTng session $session: cts_bench:event enabled (snapshot mode, overwrite)"
else
  echo "== no LTTng session (lttng-tools or lttng-ust missing): the tracepoint stays disabled"
fi

echo "== bench_tasks $*"
"$build/bench/bench_tasks" "$@"

# What the preload library's pthread hooks add to an uncontended lock.
preload=$build/src/cli/libctfscope-preload.so
ninja -C "$build" ctfscope_preload > /dev/null
echo "== uncontended mutex, with and without libctfscope-preload.so"
printf "no preload:                  "
"$build/bench/bench_tasks" --mutex
printf "preload, task tracing off:   "
LD_PRELOAD=$preload "$build/bench/bench_tasks" --mutex
printf "preload, task tracing on:    "
tasks_file=$(mktemp)
LD_PRELOAD=$preload CTFSCOPE_TASKS=$tasks_file "$build/bench/bench_tasks" --mutex
rm -f "$tasks_file"
