#!/bin/sh
# SPDX-License-Identifier: MIT
# Every section the code cites in the format notes must exist there, so that the
# repository cites only itself. Usage: check_doc_citations.sh ROOT
#
# Checked, in include/, src/, tests/ and bench/ (C, headers, JavaScript):
#  - named citations: `mprof.md §2.3, §4`, `mprof-viewer.md §D.2-D.3`, `memtrace.md §8.5`;
#  - bare citations (`§7.2`) in a file that names mprof.md or mprof-viewer.md and no
#    other format note: §<number> is mprof.md's, §<letter>… is mprof-viewer.md's. A bare
#    citation in a file that names notes of both formats is ambiguous, hence an error.
# A section exists when the note has a heading `## N. …`, `### N.M …` or `## B. …`.
set -eu
root=${1:?usage: check_doc_citations.sh ROOT}
docs=$root/docs/formats
export LC_ALL=C
el='([A-Z]|[0-9]+)(\.[0-9]+)*' # 2, 2.3, B, B.5
sec="§$el(-$el)?"               # one section or a range
named="(mprof-viewer|mprof|memtrace)\\.md[ )]*$sec(, $sec)*"
checked=0
bad=0

# has_section DOC SECTION: whether DOC has a heading for SECTION.
has_section() {
  s=$(printf '%s' "$2" | sed 's/\./\\./g')
  grep -qE "^#{2,4} $s(\\.| )" "$docs/$1"
}

# check FILE DOC SECTIONS: SECTIONS is a citation's text from its first §.
check() {
  for item in $(printf '%s\n' "$3" | grep -oE "$sec"); do
    item=${item#§}
    [ "$item" != N ] || continue # "section numbers cited as §N" (tasks.h) is no citation
    ends=$item
    case $item in *-*) ends="${item%%-*} ${item#*-}" ;; esac
    for s in $ends; do
      checked=$((checked + 1))
      [ -n "$s" ] && has_section "$2" "$s" && continue
      echo "$1: '$2 §$item' names no section of docs/formats/$2" >&2
      bad=$((bad + 1))
    done
  done
}

files=$(find "$root/include" "$root/src" "$root/tests" "$root/bench" -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.js' \) -not -path '*/corpus/*' \
  -not -path '*/node_modules/*' | sort)
for f in $files; do
  grep -q '§' "$f" || continue
  rel=${f#"$root"/}
  cites=$(grep -oE "$named" "$f" || true)
  # Named citations.
  old_ifs=$IFS
  IFS='
'
  for c in $cites; do
    IFS=$old_ifs # the list is split already; check() splits on blanks
    doc=${c%%.md*}.md
    check "$rel" "$doc" "${c#*.md}"
  done
  IFS=$old_ifs
  # Bare citations: what is left once the named ones are removed.
  grep -qE 'mprof(-viewer)?\.md' "$f" || continue
  bare=$(sed -E "s/$named//g" "$f" | grep -oE "$sec" || true)
  [ -n "$bare" ] || continue
  if grep -q 'memtrace\.md' "$f"; then
    echo "$rel: cites mprof and memtrace notes, so its bare citations are ambiguous:" \
      "name the note (e.g. 'memtrace.md §11'):" $bare >&2
    bad=$((bad + 1))
    continue
  fi
  for b in $bare; do
    case $b in
      §[A-Z]*) check "$rel" mprof-viewer.md "$b" ;;
      *) check "$rel" mprof.md "$b" ;;
    esac
  done
done
echo "$checked citations checked, $bad bad"
[ "$bad" -eq 0 ]
