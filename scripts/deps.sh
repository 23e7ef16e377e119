#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages ctfscope needs to build and test, if any are missing.
# Sourced by scripts/main.sh and scripts/test.sh; also runnable on its own.
# As root it runs apt-get itself; otherwise it uses sudo when available, or says what to run.
set -euo pipefail

CTS_PACKAGES=(
  cmake ninja-build gcc g++ pkg-config     # build
  clang libclang-rt-14-dev                 # asan and fuzz presets (sanitizer/libFuzzer runtimes)
  zlib1g-dev                               # gzip-compressed traces
  libzstd-dev zstd                         # zstd-compressed traces (zstd: the tests' reference)
  libdeflate-dev                           # the report's embedded columns, deflated
  librsvg2-dev fonts-dejavu-core           # stats --png: the SVG histograms rendered (librsvg)
  clang-format                             # the format check test
  binutils                                 # nm, for the freestanding-core check
  libunwind-dev libdw-dev                  # allocation tracer: unwinding, symbolisation
  libiberty-dev                            # C++ and Rust names demangled (cplus_demangle)
  rustc                                    # a Rust program traced in the tests (tests/cpp)
  sqlite3 python3 git strace               # allocation tracer: real programs traced in tests (strace: the syscall guard)
  libjemalloc2 libtcmalloc-minimal4        # ... with other allocators preloaded,
  libmimalloc2.0 redis-server redis-tools  # ... and redis (linked with jemalloc)
  babeltrace2                              # task traces: checked against babeltrace2
  chromium                                 # the HTML report, tested in a real browser
  qemu-system-x86                          # examples/unikernel: the kernel booted in the tests (TCG)
  valgrind                                 # the preload constructor's instructions (callgrind)
  gcc-multilib                             # a 32-bit program exec'd from a traced one (tests/preload)
  libcap2-bin                              # setcap: a program with file capabilities (tests/preload)
)

cts_missing_packages() {
  local p
  for p in "${CTS_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
  done
}

cts_install_deps() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "ctfscope: not a Debian-like system; install: ${CTS_PACKAGES[*]}" >&2
    return 0
  fi
  local missing
  missing=$(cts_missing_packages | tr '\n' ' ')
  [ -z "${missing// /}" ] && return 0
  echo "ctfscope: installing missing Debian packages: $missing" >&2
  local apt=(apt-get)
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      apt=(sudo apt-get)
    else
      echo "ctfscope: run as root: apt-get install -y $missing" >&2
      return 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${apt[@]}" update -qq
  # shellcheck disable=SC2086
  "${apt[@]}" install -y -qq --no-install-recommends $missing >/dev/null
}

# Node.js for the tests that check exports and the report with real consumers (speedscope,
# pprof-format, playwright-core + Chromium). Debian's nodejs/npm are installed only when no
# node is on the PATH, so an existing Node.js installation is left alone.
cts_install_node() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then return 0; fi
  local CTS_PACKAGES=(nodejs npm) # seen by cts_install_deps (dynamic scope)
  cts_install_deps
}

# Installs the pinned npm packages of each test directory with a package-lock.json, when
# node_modules is missing or older than the lock file. Needs the npm registry once.
cts_install_npm_packages() {
  local dir
  for dir in tests/js tests/report; do
    [ -f "$dir/package-lock.json" ] || continue
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
      echo "ctfscope: npm ci in $dir" >&2
      npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
      touch "$dir/node_modules"
    fi
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  cts_install_deps
  cts_install_node
  cts_install_npm_packages
fi
