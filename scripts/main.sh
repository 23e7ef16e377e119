#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: installs missing Debian packages, builds ctfscope (release preset), writes a
# demo trace with the freestanding writer example, and shows `info` and `dump` on it and on
# the bundled real memtrace trace.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
cts_install_deps

cmake --preset release >/dev/null
cmake --build --preset release
bin=build/release/src/cli/ctfscope
mkdir -p out

echo
echo "==> Writing out/demo.ctf with examples/write_trace (no malloc, injected clock and write)"
build/release/examples/write_trace out/demo.ctf
echo
echo "==> ctfscope info out/demo.ctf"
"$bin" info out/demo.ctf
echo
echo "==> ctfscope info examples/traces/p2_leak.r1e-4.ctf (written by OCaml memtrace)"
"$bin" info examples/traces/p2_leak.r1e-4.ctf
echo
echo "==> ctfscope dump examples/traces/p2_leak.r1e-4.ctf | head -25"
"$bin" dump examples/traces/p2_leak.r1e-4.ctf | head -25
echo
echo "ctfscope is at $bin; the demo trace is out/demo.ctf."
