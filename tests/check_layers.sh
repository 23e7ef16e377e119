#!/bin/sh
# SPDX-License-Identifier: MIT
# The layers of src/ are one-way: each directory may include (and link) only the ones below
# it, in this order:
#   common <- core <- tasks <- os <- {analysis, collector, tracer} <- report <- cli
#   tracer <- preload;  os <- lib (libctfscope: core, tasks and os packaged)
# analysis, collector and tracer are peers and include none of each other. An edge is an
# `#include "../X/..."` or `#include "X/..."` line (src/ is on the include path) of a file in
# src/D/, and a `target_link_libraries(T ... L ...)` line of src/D/CMakeLists.txt naming
# one of the project's libraries. A directory or library missing from the tables below is
# an error too, so that a new one gets its place.
#   check_layers.sh ROOT
set -u
root=${1:?usage: check_layers.sh ROOT}
src=$root/src

# What each layer may use, besides itself.
allowed() {
  case $1 in
    common) echo "" ;;
    core) echo "common" ;;
    tasks) echo "core common" ;;
    os) echo "tasks core common" ;;
    analysis | collector | tracer) echo "os tasks core common" ;;
    report) echo "analysis collector tracer os tasks core common" ;;
    cli) echo "report analysis collector tracer os tasks core common" ;;
    preload) echo "tracer os tasks core common" ;;
    lib) echo "os tasks core common" ;;
    *) return 1 ;;
  esac
}

# The layer of a CMake target, or nothing for a target that is not the project's.
target_layer() {
  case $1 in
    cts_core) echo core ;;
    cts_tasks) echo tasks ;;
    cts_os) echo os ;;
    cts_analysis | cts_elfsym) echo analysis ;;
    cts_collector) echo collector ;;
    cts_tracer | ctfscope_writer) echo tracer ;;
    cts_report) echo report ;;
    cts_cli | ctfscope | ctfscope_png) echo cli ;;
    ctfscope_preload) echo preload ;;
    ctfscope_shared | ctfscope_static) echo lib ;;
    cts_* | ctfscope*) echo unknown ;;
  esac
}

tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
fail=0
edges=0
complain() {
  echo "check_layers: $*" >&2
  fail=1
}

# Whether layer $1 may use layer $2.
may_use() {
  [ "$1" = "$2" ] && return 0
  for l in $(allowed "$1"); do [ "$l" = "$2" ] && return 0; done
  return 1
}

for dir in "$src"/*/; do
  layer=$(basename "$dir")
  if ! allowed "$layer" >/dev/null; then
    complain "src/$layer/ is not in the layer order: give it a place in tests/check_layers.sh"
    continue
  fi
  # Include edges: file:line:#include "path".
  for f in $(find "$dir" -type f \( -name '*.c' -o -name '*.h' \) | sort); do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
      sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' >"$tmp"
    while read -r line path; do
      case $path in
        ctfscope/* | ../../include/*) continue ;; # the public API (include/ctfscope/)
        ../*/*) to=${path#../} to=${to%%/*} ;;
        */*) to=${path%%/*} ;;
        *) continue ;; # the same directory
      esac
      edges=$((edges + 1))
      rel=${f#"$root"/}
      if ! allowed "$to" >/dev/null; then
        complain "$rel:$line: includes \"$path\", outside the layers"
      elif ! may_use "$layer" "$to"; then
        complain "$rel:$line: $layer includes $to (\"$path\"): a back edge; $layer may use: $(allowed "$layer")"
      fi
    done <"$tmp"
  done
  # Link edges.
  cm=$dir/CMakeLists.txt
  [ -f "$cm" ] || continue
  # One line per call, its arguments joined across lines: "LINE TARGET ARGS...".
  awk '!inside && /target_link_libraries\(/ { inside = 1; start = NR; buf = "";
                                              sub(/.*target_link_libraries\(/, "") }
       inside { end = index($0, ")"); buf = buf " " (end ? substr($0, 1, end - 1) : $0);
                if (end) { print start, buf; inside = 0 } }' "$cm" >"$tmp"
  while read -r line target rest; do
    from=$(target_layer "$target")
    [ -n "$from" ] || continue
    if [ "$from" != "$layer" ]; then
      complain "src/$layer/CMakeLists.txt:$line: links $target, a target of $from, from here"
      continue
    fi
    for lib in $rest; do
      to=$(target_layer "$lib")
      [ -n "$to" ] || continue
      edges=$((edges + 1))
      if [ "$to" = unknown ]; then
        complain "src/$layer/CMakeLists.txt:$line: $lib is not in tests/check_layers.sh"
      elif ! may_use "$layer" "$to"; then
        complain "src/$layer/CMakeLists.txt:$line: $target links $lib ($to): a back edge; $layer may use: $(allowed "$layer")"
      fi
    done
  done <"$tmp"
done

# A test that reads nothing proves nothing.
if [ "$edges" -lt 50 ]; then
  complain "only $edges edges found under $src: is ROOT right?"
fi
[ "$fail" = 0 ] && echo "check_layers: $edges include and link edges follow the layer order"
exit "$fail"
