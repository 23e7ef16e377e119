#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite: installs missing Debian packages, then configures, builds and tests
# the `dev` preset (gcc, -Werror); builds the `clang` preset (clang, -Werror: the preload
# library and the LD_PRELOAD tests, which the sanitizer presets below do not build, are
# compiled by clang too; its tests are dev's); then the `release` preset (gcc -O2, what
# scripts/main.sh builds: the optimiser changes what the tracer sees, such as prologues and
# folded functions), the `asan` preset (clang, ASan+UBSan, -Werror) and the `tsan` preset (clang,
# ThreadSanitizer, CTS_ASSERT on; its test step runs only the tests labelled `concurrent`:
# tracer, task hooks, collector, serve; LD_PRELOAD tests cannot run under TSan).
# Usage: scripts/test.sh [WORKFLOW...]   (default: dev clang-build release asan tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
cts_install_deps
cts_install_node
cts_install_npm_packages

presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(dev clang-build release asan tsan)
# The release build's warnings are errors here too (gcc -O2 sees what -O0 does not: format
# truncation, array bounds after inlining); not for users' builds (scripts/main.sh,
# bench/real/run.sh), whose compiler may be newer than the one this is tested with.
for preset in "${presets[@]}"; do
  echo "==> ctfscope: workflow '$preset' (its preset's configure, build and, but for clang-build, test)" >&2
  CTS_RELEASE_WERROR=ON cmake --workflow --preset "$preset"
done
