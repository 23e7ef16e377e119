#!/bin/sh
# SPDX-License-Identifier: MIT
# Boots the example unikernel (examples/unikernel) under QEMU (TCG) and checks what it
# streams. One scenario per CTest test:
#   rate1    every allocation recorded: both traces read clean (ctfscope info, OCaml's
#            memtrace reader), the allocation count equals the kernel's own (COM3), the
#            collections equal its frees, and main resolves in the task trace
#   sampled  rate 0.01: the samples in the trace are the kernel's, and within 5% of
#            λ × the words allocated (Poisson sampling per word; the seed is fixed)
#   bad      the ARP race lost: main is marked should_resolve and never resolved, the
#            other expected tasks are there
#   fault    a page fault halfway: the handler ends both traces, which read clean up to
#            the fault, with every allocation made before it
#   triple   a fault with no handler (a triple fault resets the machine): the memtrace
#            trace still reads clean, with the allocations ktrace_poll() flushed before
#   stalled  COM1 goes to a host that accepts and never reads: the kernel declares the
#            port dead after its stall bound, finishes, and counts the lost bytes (COM3
#            and the task trace's counter)
#   collect  run.sh: the two traces through `ctfscope collect` over loopback TCP, the
#            codes named on the host (`ctfscope symbolize`), and the report
#   dump     run.sh --files --dump, the bad run: the task ring saved from the halted
#            kernel's memory (QEMU's monitor) holds the same events as the COM2 stream
#   symbols  the default kernel writes its codes without locations; `ctfscope symbolize`
#            names them from its ELF file: the same `ctfscope top` sites and tree as the
#            kernel with embedded tables (unikernel_embedded) gives for the same run, and
#            OCaml's reader reads the named trace with those names
#   embedded run.sh --embedded: the kernel with its own tables, nothing resolved on the
#            host, the same sites
# Exit 77 (skipped) without qemu-system-x86_64, a failure under CI=true.
#
#   check_unikernel.sh SCENARIO KERNEL CTFSCOPE OCAML_READER WORKDIR RUN_SH BUILD_DIR
#                      EMBEDDED_KERNEL SOURCE_DIR
set -eu
scenario=$1 kernel=$2 ctfscope=$3 ocaml=$4 work=$5 run_sh=$6 build=$7 embedded=$8 src=$9
qemu=${QEMU:-qemu-system-x86_64}

fail() {
  echo "FAIL ($scenario): $*" >&2
  exit 1
}
if ! command -v "$qemu" >/dev/null 2>&1; then
  [ "${CI:-}" = true ] && fail "$qemu not found (apt-get install qemu-system-x86)"
  echo "SKIP: $qemu not found (apt-get install qemu-system-x86)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"

# boot ARGS COM1 [KERNEL]: runs the kernel with COM2 and COM3 to files; sets $status.
boot() {
  status=0
  timeout 30 "$qemu" -kernel "${3:-$kernel}" -append "$1" -display none -no-reboot -monitor none \
    -device isa-debug-exit,iobase=0xf4,iosize=0x04 -serial "$2" \
    -serial "file:$work/tasks.ctf" -serial "file:$work/counters.txt" || status=$?
  [ "$status" != 124 ] || fail "the kernel did not stop within 30 s"
}
counter() {
  sed -n "s/^$1 //p" "$work/counters.txt"
}
expect_status() {
  [ "$status" = "$1" ] || fail "QEMU exit status $status, expected $1; counters:
$(cat "$work/counters.txt" 2>/dev/null)"
}
# The memtrace trace reads clean with both readers; prints nothing, sets $mt_allocs.
check_memtrace() {
  "$ctfscope" info "$1" >"$work/info.txt" 2>&1 || fail "ctfscope info $1: $(cat "$work/info.txt")"
  grep -q '^Result  *ok' "$work/info.txt" || fail "ctfscope info: $(grep Result "$work/info.txt")"
  if [ -x "$ocaml" ]; then
    "$ocaml" summary "$1" >"$work/ocaml.txt" 2>&1 || fail "OCaml reader: $(tail -3 "$work/ocaml.txt")"
    grep -q '^reader_result ok' "$work/ocaml.txt" || fail "OCaml reader result"
    mt_allocs=$(sed -n 's/^allocs_total //p' "$work/ocaml.txt")
    mt_collects=$(sed -n 's/^events.collect //p' "$work/ocaml.txt")
  else
    [ "${CI:-}" = true ] && fail "OCaml reader $ocaml missing"
    echo "note: OCaml reader $ocaml missing: counts from ctfscope info only"
    mt_allocs=$(sed -n 's/^Allocations *\([0-9 ]*\) sampled.*/\1/p' "$work/info.txt" | tr -d ' ')
    mt_collects=$(sed -n 's/^Events.*collect \([0-9 ]*\)$/\1/p' "$work/info.txt" | tr -d ' ')
  fi
}
check_tasks() {
  "$ctfscope" info "$work/tasks.ctf" >"$work/tinfo.txt" 2>&1 || fail "ctfscope info tasks.ctf"
  grep -q '^Result  *ok (0 warnings)' "$work/tinfo.txt" || fail "task trace: $(cat "$work/tinfo.txt")"
  "$ctfscope" dump --no-comments "$work/tasks.ctf" >"$work/dump.txt" || fail "ctfscope dump"
}
# The id of the task labelled $1 (the first one).
task_id() {
  sed -n "s/^[0-9]* label thread=\([0-9]*\) label=\"$1\"\$/\1/p" "$work/dump.txt" | head -1
}

case $scenario in
  rate1)
    boot "rate=1 conns=4 segs=100" "file:$work/memtrace.ctf"
    expect_status 1
    check_memtrace "$work/memtrace.ctf"
    allocs=$(counter allocs)
    [ "$mt_allocs" = "$allocs" ] || fail "trace has $mt_allocs allocations, the kernel made $allocs"
    [ "$mt_collects" = "$(counter frees)" ] || fail "collections $mt_collects != frees $(counter frees)"
    [ "$(counter com1_lost)" = 0 ] || fail "bytes lost on COM1"
    check_tasks
    main=$(task_id __should_resolve)
    [ -n "$main" ] || fail "no should_resolve task"
    grep -q "fulfills thread=[0-9]* resolvee=$main\$" "$work/dump.txt" || fail "main not resolved"
    echo "rate 1: $allocs allocations made, $mt_allocs in the trace, $mt_collects collections"
    ;;
  sampled)
    boot "rate=0.01 segs=1000 seed=7" "file:$work/memtrace.ctf"
    expect_status 1
    check_memtrace "$work/memtrace.ctf"
    samples=$(counter samples)
    in_trace=$(sed -n 's/^Samples *\([0-9 ]*\):.*/\1/p' "$work/info.txt" | tr -d ' ')
    [ "$in_trace" = "$samples" ] || fail "trace has $in_trace samples, the kernel drew $samples"
    expected=$(($(counter alloc_bytes) / 800)) # bytes / 8 × 0.01
    diff=$((samples > expected ? samples - expected : expected - samples))
    [ $((diff * 20)) -le "$expected" ] || fail "$samples samples, expected about $expected"
    echo "rate 0.01: $samples samples, $expected expected, $(counter sampled) blocks sampled"
    ;;
  bad)
    boot "bad rate=0.01" "file:$work/memtrace.ctf"
    expect_status 5
    check_memtrace "$work/memtrace.ctf"
    check_tasks
    for label in unikernel port-4 main "TCP connect" "ARP response" ring.write \
      "Wait for ARP response"; do
      [ -n "$(task_id "$label")" ] || [ "$label" = unikernel ] || fail "no task labelled $label"
    done
    grep -q '^[0-9]* label thread=0 label="unikernel"$' "$work/dump.txt" || fail "no unikernel label"
    main=$(task_id __should_resolve)
    [ "$main" = "$(task_id main)" ] || fail "main ($(task_id main)) is not the should_resolve task"
    if grep -q "resolvee=$main\$" "$work/dump.txt"; then fail "the bad run resolved main"; fi
    [ "$(grep -c 'label="TCP connect"' "$work/dump.txt")" = 4 ] || fail "expected 4 connections"
    # The last event before the counters written at stop (lost serial bytes).
    last=$(grep -v '^[0-9]* counter ' "$work/dump.txt" | tail -1 | cut -d' ' -f2-)
    [ "$last" = "switch thread=-1" ] || fail "the bad run does not end idle: $last"
    echo "bad run: main (task $main) never resolved; $(grep -c . "$work/dump.txt") events"
    ;;
  fault)
    boot "fault rate=1 segs=100" "file:$work/memtrace.ctf"
    expect_status 7
    [ "$(counter end)" = fault ] || fail "counters do not end with the fault"
    [ "$(counter fault_vector)" = 14 ] || fail "expected a page fault, got $(counter fault_vector)"
    [ "$(counter traces_closed)" = 1 ] || fail "the handler did not end the traces"
    check_memtrace "$work/memtrace.ctf"
    [ "$mt_allocs" = "$(counter allocs)" ] ||
      fail "trace has $mt_allocs allocations, $(counter allocs) made before the fault"
    check_tasks
    echo "fault: $mt_allocs allocations before the page fault, all in the trace"
    ;;
  triple)
    boot "triple rate=1 segs=400" "file:$work/memtrace.ctf"
    expect_status 0 # -no-reboot: the reset ends QEMU
    if grep -q '^end ' "$work/counters.txt"; then fail "the kernel ended normally"; fi
    check_memtrace "$work/memtrace.ctf"
    [ "${mt_allocs:-0}" -gt 0 ] || fail "nothing was flushed before the triple fault"
    echo "triple fault: $mt_allocs allocations flushed before it, read clean"
    ;;
  stalled)
    # A host that accepts and never reads. A Unix socket, because its send buffer does not
    # grow as TCP's does (to 4 MB here) and QEMU sends the UART's bytes one by one, each
    # taking a buffer of its own: it fills after a few hundred bytes. Then QEMU's writes
    # fail, the UART's FIFO stays full, and the kernel must give the port up.
    python3 - "$work/sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
c, _ = s.accept()
time.sleep(60)
PY
    listener=$!
    for _ in $(seq 50); do [ -S "$work/sock" ] && break; sleep 0.1; done
    [ -S "$work/sock" ] || fail "the stuck listener did not start"
    start=$(date +%s)
    boot "rate=1" "unix:$work/sock"
    elapsed=$(($(date +%s) - start))
    kill "$listener" 2>/dev/null || true
    wait "$listener" 2>/dev/null || true
    expect_status 1
    lost=$(counter com1_lost)
    [ "${lost:-0}" -gt 0 ] || fail "no byte lost on COM1: the host never stalled it ($(counter com1_sent) sent)"
    check_tasks
    grep -q "counter thread=-1 value=$lost counter=\"memtrace-port-lost-bytes\"\$" "$work/dump.txt" ||
      fail "the task trace does not count the $lost lost bytes: $(grep lost-bytes "$work/dump.txt")"
    # The stall bound (SERIAL_STALL_US, 20 ms) is paid once: the whole run stays short.
    [ "$elapsed" -le 20 ] || fail "the run took $elapsed s"
    echo "stalled host: $(counter com1_sent) bytes sent, $lost lost, $(counter com1_waits) waits; run ${elapsed} s"
    ;;
  collect)
    CTS_BUILD_DIR=$build CTS_QEMU_TIMEOUT=30 sh "$run_sh" -o "$work" -- rate=0.1 >"$work/run.txt" 2>&1 ||
      fail "run.sh: $(cat "$work/run.txt")"
    check_memtrace "$work/memtrace.ctf"
    check_tasks
    [ -s "$work/report.html" ] || fail "no report"
    [ "$(ls "$work/collected" | wc -l)" = 2 ] || fail "collector saved: $(ls "$work/collected")"
    "$ctfscope" top "$work/memtrace.ctf" | grep -q 'net_deliver_later (examples/unikernel/kernel\.c:181)' ||
      fail "run.sh did not name the codes: $("$ctfscope" top "$work/memtrace.ctf")"
    echo "collect: $mt_allocs sampled allocations and the task trace through ctfscope collect"
    ;;
  dump)
    CTS_BUILD_DIR=$build CTS_QEMU_TIMEOUT=30 sh "$run_sh" -o "$work" --files --dump -- bad \
      >"$work/run.txt" 2>&1 && fail "run.sh: the bad run exited 0"
    grep -q '^kernel: main never resolved' "$work/run.txt" || fail "run.sh: $(cat "$work/run.txt")"
    check_tasks
    "$ctfscope" info "$work/ring.ctf" >"$work/rinfo.txt" 2>&1 || fail "ctfscope info ring.ctf"
    grep -q '^Result  *ok (0 warnings)' "$work/rinfo.txt" || fail "ring: $(cat "$work/rinfo.txt")"
    "$ctfscope" dump --no-comments "$work/ring.ctf" >"$work/rdump.txt" || fail "dump ring.ctf"
    cmp -s "$work/dump.txt" "$work/rdump.txt" || fail "the ring and the stream differ"
    echo "dump: the ring in memory and the COM2 stream hold the same $(grep -c . "$work/rdump.txt") events"
    ;;
  symbols)
    # Both kernels have their functions at the same addresses (check_ksyms.cmake) and make
    # the same allocations for the same command line: only the naming differs.
    args="rate=1 conns=4 segs=100"
    boot "$args" "file:$work/codes.ctf"
    expect_status 1
    "$ctfscope" symbolize --elf "$kernel" --strip-prefix "$src" -o "$work/memtrace.ctf" \
      "$work/codes.ctf" 2>"$work/symbolize.txt" || fail "symbolize: $(cat "$work/symbolize.txt")"
    grep -q ' 0 in no ELF file' "$work/symbolize.txt" || fail "codes left: $(cat "$work/symbolize.txt")"
    check_memtrace "$work/memtrace.ctf"
    if [ -x "$ocaml" ]; then
      "$ocaml" dump "$work/memtrace.ctf" >"$work/ocaml_dump.txt" 2>&1 || fail "OCaml reader dump"
      grep -q 'examples/unikernel/kernel\.c:181:[0-9]*-[0-9]*:net_deliver_later' "$work/ocaml_dump.txt" ||
        fail "OCaml's reader does not see net_deliver_later at kernel.c:181"
    fi
    boot "$args" "file:$work/embedded.ctf" "$embedded"
    expect_status 1
    for view in "" "--tree --min-percent 0"; do
      for t in memtrace embedded; do
        # shellcheck disable=SC2086 # $view is several words or none
        "$ctfscope" top -n 0 $view "$work/$t.ctf" | sed -n '/ \(site\|frame\)$/,$p' >"$work/${t}_top.txt"
      done
      [ -s "$work/memtrace_top.txt" ] || fail "no sites"
      cmp -s "$work/memtrace_top.txt" "$work/embedded_top.txt" ||
        fail "top $view differs: $(diff "$work/embedded_top.txt" "$work/memtrace_top.txt")"
      [ -n "$view" ] || cp "$work/memtrace_top.txt" "$work/host_top.txt"
    done
    grep -q 'net_deliver_later (examples/unikernel/kernel\.c:181)' "$work/host_top.txt" ||
      fail "no net_deliver_later site: $(cat "$work/host_top.txt")"
    # Without the names, the sites are bare addresses.
    if "$ctfscope" top "$work/codes.ctf" | grep -q net_deliver_later; then
      fail "the default kernel's trace is already named"
    fi
    echo "symbols: $(sed -n 's/.*symbolize: //p' "$work/symbolize.txt"); top and tree as the embedded kernel's"
    ;;
  embedded)
    CTS_BUILD_DIR=$build CTS_QEMU_TIMEOUT=30 sh "$run_sh" -o "$work" --files --embedded -- rate=1 \
      >"$work/run.txt" 2>&1 || fail "run.sh --embedded: $(cat "$work/run.txt")"
    if grep -q symbolize "$work/run.txt"; then fail "run.sh --embedded resolved on the host"; fi
    check_memtrace "$work/memtrace.ctf"
    "$ctfscope" top "$work/memtrace.ctf" | grep -q 'net_deliver_later (examples/unikernel/kernel\.c:181)' ||
      fail "the embedded kernel did not name its sites"
    echo "embedded: the kernel named its own sites"
    ;;
  *)
    fail "unknown scenario"
    ;;
esac
