#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Offline estimate for issue 16's compressed traces (bench/JOURNAL.md, "Compressed cc1"):
the events of a `ctfscope dump` split into columns, each compressed on its own with zstd -3
(minimum match 3, as the writer's zstd stage), against today's `record -z`.

Columns: event kinds; time deltas (us); lengths; sample counts (0 when equal to the length);
backtraces as their rank in a move-to-front list of the 4096 most recently used whole
backtraces (0: not there, then a literal: the prefix shared with the previous backtrace,
the rest's length and its location-code indices); collects as the distance of the object
id from the last allocation's; and the `loc` lines as text (an upper bound for the location
packets). Everything the dump holds is in the columns, so it is a measure of what a
format-aware transform before zstd can reach, not of its speed (a Python prototype).

Implemented since in C, on the memtrace bytes rather than a dump's events so that readers
rebuild the writer's exact bytes: src/os/mtcols.c, docs/formats/memtrace-zstd.md (the
journal's "Compressed traces: the column transform, implemented" compares the two).

Usage: columns.py DUMP.txt OUTDIR   (needs the zstd command)
"""
import os
import subprocess
import sys


def vint(b, v):
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)


class Ranks:
    """Last-use stamps in a Fenwick tree: a backtrace's move-to-front rank is the number of
    distinct backtraces used since its last use."""

    def __init__(self, n):
        self.n = n
        self.tree = [0] * (n + 1)

    def add(self, i, d):
        i += 1
        while i <= self.n:
            self.tree[i] += d
            i += i & -i

    def upto(self, i):
        i += 1
        s = 0
        while i > 0:
            s += self.tree[i]
            i -= i & -i
        return s


def main(dump, out):
    names = ("kind", "dt", "len", "ns", "btidx", "btcp", "btlen", "btcodes", "free")
    cols = {k: bytearray() for k in names}
    locs = bytearray()
    ranks = Ranks(1 << 24)
    last = {}
    stamp = live = events = last_id = prev_t = 0
    prev_bt = ()
    for line in open(dump):
        if line[0] == "#" or line.startswith("info."):
            continue
        if line.startswith("loc "):
            locs += line.encode()
            continue
        head, _, rest = line.partition(":")
        f = head.split()
        events += 1
        t, oid, kind = int(f[0]), int(f[1]), f[2]
        vint(cols["dt"], t - prev_t)
        prev_t = t
        if kind == "collect":
            cols["kind"].append(4)
            vint(cols["free"], last_id - oid)
            continue
        cols["kind"].append(2)
        last_id = oid
        length, ns = int(f[3][4:]), int(f[4][3:])
        vint(cols["len"], length)
        vint(cols["ns"], 0 if ns == length else ns + 1)
        bt = tuple(int(x[1:]) for x in rest.split())
        if stamp >= ranks.n:
            sys.exit("more than 16 M allocations: not handled")
        s = last.get(bt)
        rank = live - ranks.upto(s) if s is not None else None
        if rank is not None and rank < 4096:
            vint(cols["btidx"], rank + 1)
        else:
            vint(cols["btidx"], 0)
            cp = 0
            while cp < len(bt) and cp < len(prev_bt) and bt[cp] == prev_bt[cp]:
                cp += 1
            vint(cols["btcp"], cp)
            vint(cols["btlen"], len(bt) - cp)
            for c in bt[cp:]:
                vint(cols["btcodes"], c)
        if s is not None:
            ranks.add(s, -1)
            live -= 1
        last[bt] = stamp
        ranks.add(stamp, 1)
        live += 1
        stamp += 1
        prev_bt = bt
    total = 0
    for k, b in list(cols.items()) + [("locs", locs)]:
        p = os.path.join(out, k)
        with open(p, "wb") as fh:
            fh.write(b)
        z = subprocess.run(["zstd", "-3", "--zstd=mml=3", "-c", "-q", p],
                           capture_output=True, check=True).stdout
        total += len(z)
        print(f"{k:8s} raw {len(b):>10d} zstd-3 {len(z):>9d} B/event {len(z) / events:.3f}")
    print(f"events {events} total zstd-3 {total} B/event {total / events:.3f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
