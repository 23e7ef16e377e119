#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: installs missing Debian packages, builds ctfscope (release preset), records
# the bundled demo — the ARP-race event loop of examples/arp_race, its good and its bad
# run, with allocation tracing and the task trace of its threads (record --tasks) together,
# and its own promise-level task trace — and writes report.html (memory by task of the bad
# run), printing where everything is.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
cts_install_deps

cmake --preset release >/dev/null
cmake --build --preset release
bin=build/release/src/cli/ctfscope
demo=build/release/examples/arp_race/arp_race
out=out
rm -rf "$out"
mkdir -p "$out"

echo
echo "==> Recording the demo: the ARP race, good and bad run (allocations at rate 1; threads"
echo "    as tasks into arp_RUN.alloc.tasks.ctf; the demo's own promise trace arp_RUN.ctf)"
for run in good bad; do
  # The bad run ends with its main task unresolved, and says so with a non-zero exit code.
  status=0
  "$bin" record --rate 1 --tasks --context "ARP race, $run run" -o "$out/arp_$run.alloc.ctf" -- \
    "$demo" "--$run" -o "$out/arp_$run.ctf" || status=$?
  if [ "$run" = good ] && [ "$status" != 0 ]; then
    echo "ctfscope: the good run failed ($status)" >&2
    exit 1
  fi
done
echo
echo "==> ctfscope info $out/arp_bad.alloc.ctf"
"$bin" info "$out/arp_bad.alloc.ctf"
echo
echo "==> The bad run's task trace: the main task (should_resolve) never resolves"
"$bin" dump "$out/arp_bad.ctf" | tail -n 8
echo
echo "==> Memory by task of the bad run: each allocation counts for the task (thread) that made it"
"$bin" top --by task "$out/arp_bad.alloc.ctf" "$out/arp_bad.alloc.tasks.ctf"
echo
echo "==> The good run against the bad one: where they first diverge, what ended differently"
# diff exits 1 when the runs differ, which is the point here.
"$bin" diff "$out/arp_good.ctf" "$out/arp_bad.ctf" || true
echo
echo "==> Writing the reports"
"$bin" report "$out/arp_bad.alloc.ctf" "$out/arp_bad.alloc.tasks.ctf" \
  --title "ctfscope demo: ARP race (bad run)" -o report.html
"$bin" report "$out/arp_good.alloc.ctf" "$out/arp_good.alloc.tasks.ctf" \
  --title "ctfscope demo: ARP race (good run)" -o "$out/report-good.html"
"$bin" report "$out/arp_bad.ctf" --title "ctfscope demo: ARP race, the promises (bad run)" \
  -o "$out/report-promises-bad.html"
"$bin" report "$out/arp_good.ctf" "$out/arp_bad.ctf" \
  --title "ctfscope demo: ARP race, good against bad" -o "$out/report-compare.html"
"$bin" report examples/traces/p2_leak.r1e-4.ctf --title "OCaml memtrace trace: a leak" \
  -o "$out/report-ocaml-leak.html"
echo
echo "ctfscope: the report is $(pwd)/report.html (tab Tasks, panel 'Memory by running task')"
echo "ctfscope: also $out/report-good.html (the good run), $out/report-promises-bad.html (the"
echo "ctfscope: race at the promise level), $out/report-compare.html (good against bad, tab"
echo "ctfscope: 'Good vs bad': the first divergence marked in both) and $out/report-ocaml-leak.html;"
echo "ctfscope: traces in $out/, the binary is $bin"
