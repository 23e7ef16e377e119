#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The redis workload of bench/real/run.sh, one timed unit: starts the server with the
# command given (redis-server itself, or a tracer wrapping it), waits until it answers,
# runs a bounded redis-benchmark against it (the client is not traced), writes the
# database's key count to OUT (deterministic: the benchmark's fixed keys) and shuts the
# server down. Loopback only: the server binds 127.0.0.1 and every client connects there.
# Nothing runs unbounded: each step has a time limit, and a server that outlives the
# script's end is killed.
#
# Usage: redis_workload.sh PORT OUT REQUESTS SERVER_COMMAND [ARG...]
#   the server's own options (port, bind, no persistence) are appended to SERVER_COMMAND.
# Exit status: the server's, or 125 if it never answered, 124 if a step timed out, or the
# benchmark's if it failed.
set -uo pipefail

port=$1 out=$2 requests=$3
shift 3
dir=$(dirname "$out")
cli=(redis-cli -h 127.0.0.1 -p "$port")

"$@" --port "$port" --bind 127.0.0.1 --protected-mode yes --save '' --appendonly no \
  --daemonize no --dir "$dir" --logfile '' > "$dir/redis-server.log" 2>&1 &
server=$!
trap 'kill -9 "$server" 2> /dev/null' EXIT

# Up to 20 s for the server to answer (a traced start-up is slower). The port is tried
# every 2 ms from this shell (bash's /dev/tcp: no process per try), then one ping: a
# wait in steps of 50 ms with a client started per step put 0-50 ms of idle time into
# every round, more than the tracer's start-up and different from run to run.
ready=0
exec {tick}<> <(:)
for _ in $(seq 1 10000); do
  if { exec {probe}<> "/dev/tcp/127.0.0.1/$port"; } 2> /dev/null; then
    exec {probe}>&-
    [ "$(timeout 2 "${cli[@]}" ping 2> /dev/null)" = PONG ] && ready=1
    [ $ready = 1 ] && break
  fi
  kill -0 "$server" 2> /dev/null || break
  read -r -t 0.002 -u "$tick" _ || true
done
exec {tick}>&-
if [ $ready = 0 ]; then
  echo "redis_workload: the server on port $port never answered" >&2
  wait "$server"
  exit 125
fi

bench=0
timeout 120 redis-benchmark -h 127.0.0.1 -p "$port" -n "$requests" -c 8 -P 4 \
  -t set,get,incr,lpush,lpop,sadd,hset -q > "$dir/redis-benchmark.log" 2>&1 || bench=$?
timeout 10 "${cli[@]}" dbsize > "$out" 2>&1
timeout 10 "${cli[@]}" shutdown nosave > /dev/null 2>&1
# The server (and, traced, its tracer's summary) ends by itself after the shutdown.
status=0
if timeout 60 tail --pid="$server" -f /dev/null; then
  wait "$server" || status=$?
else
  kill -9 "$server" 2> /dev/null
  status=124
fi
trap - EXIT
[ $bench = 0 ] || status=$bench
exit "$status"
