#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes the inputs of bench/real/run.sh's programs into DIR: deterministic (fixed seeds,
# fixed commit dates), so that every run of a program produces the same output and a run
# whose output differs shows a fault, not chance.
#
# Usage: gen_inputs.sh DIR "PROGRAM..."   (programs as run.sh names them)
#   sqlite3  sqlite.sql: 45 000 INSERTs in one transaction, CREATE INDEX, a GROUP BY; its
#            first line is an .output placeholder that run.sh replaces
#   python3  dict.py: a 200 000-entry dict, then string work (formatting, join, split, sort)
#   cc1      big.c: 50 generated functions with loops and switches, no #include
#   cc1plus  big.cpp: 12 generated functions over std::map, std::vector and std::string,
#            and class templates instantiated to depth 12
#   git      repo/: 800 commits of 4 changed files each (fast-import: seconds, not minutes)
#   sort, zstd  lines.txt: ~50 MB of random text lines
set -euo pipefail

dir=$1 programs=" $2 "
wants() { [[ $programs == *" $1 "* ]]; }

if wants sqlite3; then
  {
    echo ".output PLACEHOLDER"
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);"
    echo "BEGIN;"
    awk 'BEGIN {
      letters = "abcdefghijklmnopqrstuvwxyz"
      for (i = 1; i <= 45000; i++)
        printf "INSERT INTO t(grp, name, val) VALUES(%d, '\''name-%d-%s'\'', %d.5);\n",
          i % 97, (i * 7919) % 45000, substr(letters, 1 + i % 26), i
    }'
    echo "COMMIT;"
    echo "CREATE INDEX t_name ON t(name);"
    echo "SELECT grp, count(*), sum(val), min(name), max(name) FROM t GROUP BY grp ORDER BY grp;"
  } > "$dir/sqlite.sql"
fi

if wants python3; then
  cat > "$dir/dict.py" << 'EOF'
import hashlib
import sys

d = {}
for i in range(200000):
    d["key-%d" % i] = (i, str(i * 31))
words = []
for i in range(60000):
    s = "w%05d" % (i * 7 % 60000)
    words.append(s.upper() + "-" + s[::-1])
text = " ".join(sorted(words))
parts = text.split(" ")
h = hashlib.sha256()
for k in sorted(d)[::997]:
    h.update(k.encode())
h.update(text.encode())
with open(sys.argv[1], "w") as f:
    f.write("%d %d %s\n" % (len(d), len(parts), h.hexdigest()))
EOF
fi

if wants cc1plus; then
  awk -v n=12 'BEGIN {
    print "#include <map>\n#include <string>\n#include <vector>"
    print "template <int N> struct Sum { static constexpr long v = N + Sum<N - 1>::v; };"
    print "template <> struct Sum<0> { static constexpr long v = 0; };"
    for (f = 0; f < n; f++) {
      printf "template <typename T> struct Box%d { T v; std::vector<T> more; };\n", f
      printf "long work%d(int k) {\n  std::map<std::string, Box%d<long>> m;\n", f, f
      printf "  for (int i = 0; i < k; i++) m[std::to_string(i * %d)].more.push_back(Sum<%d>::v + i);\n", f + 1, f
      printf "  long s = 0;\n  for (auto &e : m) s += (long)e.first.size() + e.second.more.back();\n"
      printf "  return s;\n}\n"
    }
    print "long run(int k) {\n  long s = 0;"
    for (f = 0; f < n; f++) printf "  s += work%d(k + %d);\n", f, f % 7
    print "  return s;\n}"
  }' > "$dir/big.cpp"
fi

if wants cc1; then
  awk -v n=50 'BEGIN {
    print "typedef unsigned long u64;"
    print "struct node { struct node *next; u64 key; u64 val[4]; };"
    print "extern int printf(const char *, ...);"
    for (f = 0; f < n; f++) {
      printf "static u64 mix%d(u64 x) { x ^= x >> %d; x *= %luUL; x ^= x << %d; return x + %d; }\n",
        f, 7 + f % 13, 2654435761 + f * 2, 3 + f % 11, f
      printf "u64 work%d(struct node *n, int k) {\n  u64 acc = %d;\n", f, f
      printf "  for (int i = 0; i < k; i++) {\n    switch ((i + %d) %% 6) {\n", f
      for (c = 0; c < 6; c++)
        printf "    case %d: acc += mix%d(n->val[%d] + i) * %d; break;\n", c, f, c % 4, c + f
      printf "    }\n    if (n->next) n = n->next;\n    else break;\n  }\n"
      printf "  struct node tmp = { 0, acc, { acc, acc * 3, acc ^ %d, acc + k } };\n", f
      printf "  return tmp.val[acc %% 4] + mix%d(tmp.key);\n}\n", f
    }
    print "int main(void) {\n  struct node n = {0};\n  u64 s = 0;"
    for (f = 0; f < n; f++) printf "  s += work%d(&n, %d);\n", f, f % 17
    print "  printf(\"%lu\\n\", s);\n  return 0;\n}"
  }' > "$dir/big.c"
fi

if wants git; then
  git init -q -b main "$dir/repo"
  awk 'BEGIN {
    for (c = 1; c <= 800; c++) {
      printf "commit refs/heads/main\nmark :%d\n", c
      printf "committer Bench <bench@example.invalid> %d +0000\n", 1700000000 + c * 60
      msg = sprintf("change %d: update modules", c)
      printf "data %d\n%s\n", length(msg), msg
      if (c > 1) printf "from :%d\n", c - 1
      for (k = 0; k < 4; k++) {
        f = (c * 7 + k * 13) % 60
        body = ""
        for (l = 0; l < 150; l++)
          body = body sprintf("line %d of file %d, version %d: %d\n", l, f, (l % 7 == (c + k) % 7) ? c : 0, (l * 31 + f) % 97)
        printf "M 100644 inline src/file%02d.txt\ndata %d\n%s\n", f, length(body), body
      }
    }
  }' | git -C "$dir/repo" fast-import --quiet
fi

if wants sort || wants zstd; then
  awk 'BEGIN {
    srand(11)
    words = "the quick brown fox jumps over the lazy dog while five wizards box quietly"
    for (i = 0; i < 1300000; i++)
      printf "%08x %s row-%d\n", int(rand() * 4294967295), substr(words, 1 + int(rand() * 40), 12 + int(rand() * 16)), i
  }' > "$dir/lines.txt"
fi
