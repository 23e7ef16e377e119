#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the example unikernel and ctfscope, boots the kernel under QEMU, collects its two
# traces and writes the report (README.md here).
#
#   examples/unikernel/run.sh [-o DIR] [--files] [--dump] [--embedded] [-- KERNEL_ARGS...]
#
#   -o DIR      where everything goes (default: ./unikernel-run)
#   --files     QEMU writes the serial ports to files instead of `ctfscope collect` over TCP
#   --dump      also save the task ring from the kernel's memory once it stops (ring.ctf,
#               through QEMU's monitor: pmemsave), as mirage-trace-viewer reads a Xen
#               domain's ring; the kernel halts instead of exiting
#   --embedded  boot unikernel_embedded, which names its codes from tables linked into it,
#               instead of naming them on the host from the kernel's ELF file afterwards
#               (`ctfscope symbolize`: memtrace-codes.ctf, as sent, to memtrace.ctf)
#   KERNEL_ARGS   the kernel's command line (kernel.c): bad, fault, rate=X, conns=N,
#                 segs=N, seed=N (default: rate=0.01)
#
# Environment: CTS_BUILD_DIR (default build/release in the source tree; configured if
# missing), QEMU (default qemu-system-x86_64), CTS_QEMU_TIMEOUT (seconds, default 120),
# CTS_QEMU_KVM=1 to run under KVM (default: TCG, the emulator, which works everywhere; the
# machine these were written on has a /dev/kvm that cannot run the kernel's SSE code).
# Exit status: 0 when the kernel's main task resolved, 2 when it did not (the bad run),
# 3 when it faulted, 1 for any other failure.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
out=unikernel-run
mode=collect
dump=0
embedded=0
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift 2 ;;
    --files) mode=files; shift ;;
    --dump) dump=1; shift ;;
    --) shift; break ;;
    --embedded) embedded=1; shift ;;
    -h|--help) sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 1 ;;
  esac
done
args=${*:-rate=0.01}
[ "$dump" = 0 ] || args="$args halt"
build=${CTS_BUILD_DIR:-$root/build/release}
qemu=${QEMU:-qemu-system-x86_64}

if ! command -v "$qemu" >/dev/null 2>&1; then
  echo "run.sh: $qemu not found (Debian: apt-get install qemu-system-x86)" >&2
  exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
if [ "$embedded" = 1 ]; then
  target=unikernel_embedded
  raw=memtrace.ctf # named by the kernel itself
else
  target=unikernel
  raw=memtrace-codes.ctf # location codes only, named here afterwards
fi
cmake --build "$build" --target $target ctfscope >/dev/null
kernel=$build/examples/unikernel/$target.elf
ctfscope=$build/src/cli/ctfscope

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/collected" "$out/memtrace.ctf" "$out/memtrace-codes.ctf" "$out/tasks.ctf" "$out/counters.txt" \
  "$out/ring.ctf" "$out/monitor.sock"
accel=
if [ "${CTS_QEMU_KVM:-0}" = 1 ]; then accel="-enable-kvm -cpu host"; fi

collector=
if [ "$mode" = collect ]; then
  # Port 0: the collector picks a free one and says which on its first line.
  : >"$out/collect.log"
  "$ctfscope" collect --listen 127.0.0.1:0 --dir "$out/collected" 2>"$out/collect.log" &
  collector=$!
  port=
  for _ in $(seq 50); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/collect.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    kill "$collector" 2>/dev/null || true
    echo "run.sh: the collector did not start:" >&2
    cat "$out/collect.log" >&2
    exit 1
  fi
  com1="tcp:127.0.0.1:$port"
  com2="tcp:127.0.0.1:$port"
else
  com1="file:$out/$raw"
  com2="file:$out/tasks.ctf"
fi

monitor=none
[ "$dump" = 0 ] || monitor="unix:$out/monitor.sock,server=on,wait=off"
echo "booting: $qemu -kernel $kernel -append \"$args\" (${accel:-TCG})"
status=0
# shellcheck disable=SC2086 # $accel is two words or none
timeout "${CTS_QEMU_TIMEOUT:-120}" "$qemu" $accel -kernel "$kernel" -append "$args" \
  -display none -no-reboot -monitor "$monitor" -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
  -serial "$com1" -serial "$com2" -serial "file:$out/counters.txt" &
qemu_pid=$!
if [ "$dump" = 1 ]; then
  # The kernel's last COM3 line is "end ...": then it has halted and the ring is complete.
  for _ in $(seq "$((${CTS_QEMU_TIMEOUT:-120} * 10))"); do
    grep -q '^end ' "$out/counters.txt" 2>/dev/null && break
    kill -0 "$qemu_pid" 2>/dev/null || break
    sleep 0.1
  done
  addr=$(sed -n 's/^ring_addr //p' "$out/counters.txt")
  size=$(sed -n 's/^ring_size //p' "$out/counters.txt")
  if [ -n "$addr" ] && [ -n "$size" ]; then
    python3 - "$out/monitor.sock" "$addr" "$size" "$out/ring.ctf" <<'PY'
import socket, sys, time
sock, addr, size, path = sys.argv[1:]
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
s.sendall(f'pmemsave {addr} {size} "{path}"\nquit\n'.encode())
s.settimeout(30)
try:
    while s.recv(4096):
        pass
except OSError:
    pass
PY
  fi
fi
wait "$qemu_pid" || status=$?
if [ "$dump" = 1 ] && [ "$status" = 0 ]; then
  # Quit through the monitor: the kernel's code is on COM3, mapped as isa-debug-exit does.
  code=$(sed -n 's/^exit_code //p' "$out/counters.txt")
  status=$(( ${code:-0} * 2 + 1 ))
fi

if [ -n "$collector" ]; then
  kill -INT "$collector"
  wait "$collector" || true
  for f in "$out"/collected/*.ctf; do
    [ -e "$f" ] || continue
    if "$ctfscope" info "$f" 2>/dev/null | head -1 | grep -q memtrace; then
      cp "$f" "$out/$raw"
    else
      cp "$f" "$out/tasks.ctf"
    fi
  done
fi

# isa-debug-exit: QEMU exits with (code << 1) | 1 (kernel.c).
case $status in
  1) result=0; echo "kernel: main resolved" ;;
  5) result=2; echo "kernel: main never resolved (the bad run)" ;;
  7) result=3; echo "kernel: faulted (see $out/counters.txt)" ;;
  124) echo "run.sh: the kernel did not stop within the time limit" >&2; exit 1 ;;
  *) echo "run.sh: QEMU exited with status $status" >&2; exit 1 ;;
esac
for f in $raw tasks.ctf; do
  if [ ! -s "$out/$f" ]; then
    echo "run.sh: no $f was collected" >&2
    exit 1
  fi
done
if [ "$embedded" = 0 ]; then
  # The kernel sent return addresses only: name them from its ELF file, with file names
  # relative to the source tree.
  "$ctfscope" symbolize --elf "$kernel" --strip-prefix "$root" -o "$out/memtrace.ctf" \
    "$out/$raw" || exit 1
fi
"$ctfscope" info "$out/memtrace.ctf" | sed -n '/^Allocations/p;/^Result/p'
"$ctfscope" info "$out/tasks.ctf" | sed -n '/^Tasks/p;/^Result/p'
if [ "$dump" = 1 ]; then
  [ -s "$out/ring.ctf" ] || { echo "run.sh: the ring was not dumped" >&2; exit 1; }
  "$ctfscope" info "$out/ring.ctf" | sed -n '/^Tasks/s/^/ring dump: /p;/^Result/s/^/ring dump: /p'
fi
"$ctfscope" report "$out/memtrace.ctf" "$out/tasks.ctf" -o "$out/report.html"
echo "kernel counters: $out/counters.txt; report: $out/report.html"
exit $result
