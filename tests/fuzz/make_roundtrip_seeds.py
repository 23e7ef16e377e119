#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the named seeds of corpus/fuzz_memtrace_roundtrip/.

Each seed is a program in the input language of fuzz_memtrace_roundtrip.c; the encoder P
below consumes bytes exactly as that file's configure(), write_program() and helpers do, so
it must change with them. Usage: make_roundtrip_seeds.py OUTPUT_DIR (see docs/fuzzing.md).
"""
import os
import struct
import sys
def nbytes(span):
    n = 1
    while n < 8 and (span >> (8*n)) != 0: n += 1
    return n
class P:
    def __init__(s, flags=0, domain=0, sample=0xFFFFFFFF//100, pid=4242, infos=(b"prog", b"host", b"", b"ctx"),
                 now=1_700_000_000_000_000, fail=None, codes=(0x1234, 47387038569108, 77, 99), names=(b"a.ml", b"F.f"),
                 name_kinds=None, rseed=1, profile=4, split=0, rng=7):
        s.b = bytearray(); s.nallocs = 0; s.prev_depth = 0
        s.u8(flags); s.u16(domain); s.u32(sample); s.u64(pid)
        for x in infos:
            if x is None: s.u8(0)
            elif isinstance(x, int):   # long string of 7000 + x
                s.u8(1); s.rng(0, 2000, x); s.raw(b"L" * 40)
            else:
                s.u8(2); s.rng(0, 40, len(x)); s.raw(x)
        s.u64(now)
        if flags & 0x80: s.u8(fail)
        s.u8(len(codes) - 1)
        for i, c in enumerate(codes):
            if i % 2: s.u64(c)
            else: s.u16(c)
        nk = name_kinds or [None] * len(names)
        s.u8(len(names))
        for n, k in zip(names, nk):
            if k is None:
                s.u8(4); s.rng(0, 31, len(n) - 1); s.raw(n[:32])
            elif k == 'null': s.u8(0)
            elif k == 'empty': s.u8(1)
            elif k[0] == 'mid': s.u8(2); s.rng(0, 900, k[1]); s.raw(n[:32])
            elif k[0] == 'long': s.u8(3); s.rng(0, 2000, k[1]); s.raw(n[:32])
        s.u64(rseed); s.u8(profile)
        s.u16(split)
        s.u64(rng)
    def raw(s, x): s.b += x
    def u8(s, v): s.b += struct.pack('<B', v & 0xFF)
    def u16(s, v): s.b += struct.pack('<H', v & 0xFFFF)
    def u32(s, v): s.b += struct.pack('<I', v & 0xFFFFFFFF)
    def u64(s, v): s.b += struct.pack('<Q', v & 0xFFFFFFFFFFFFFFFF)
    def rng(s, lo, hi, v):
        if hi <= lo: return
        assert lo <= v <= hi
        n = nbytes(hi - lo); s.b += (v - lo).to_bytes(n, 'little')
    # shape: source = shape%3, length class = shape//3%4, nsamples class = shape//12%4
    def block(s, shape, length=None, nsamples=None):
        lc, nc = shape // 3 % 4, shape // 12 % 4
        if lc == 0: s.rng(1, 16, length or 1)
        elif lc == 1: s.u16(length or 0)
        elif lc == 2: s.u32(length or 0)
        else: s.u64(length or 0)
        if nc == 2: s.u16(nsamples or 0)
        elif nc == 3: s.u64(nsamples or 0)
    def when(s, how, back=1):
        s.u8(how)
        if how % 8 == 1: s.rng(1, 1000, back)
    def alloc(s, shape=3, length=None, nsamples=None, bt=('none',), how=2, back=1):
        s.u8(0); s.u8(shape); s.block(shape, length, nsamples)
        kind = bt[0]
        if kind == 'none': s.u8(0); d = 0
        elif kind == 'pick':  # frames = list of pool indices
            s.u8(1); s.rng(1, 24, len(bt[1])); [s.u8(i) for i in bt[1]]; d = len(bt[1])
        elif kind == 'prev':  # keep, extra list
            s.u8(3); s.rng(0, s.prev_depth, bt[1]); s.rng(0, 8, len(bt[2])); [s.u8(i) for i in bt[2]]
            d = (bt[1] if s.prev_depth else 0) + len(bt[2])
        elif kind == 'cycle':  # n, cycle, head
            s.u8(4); s.rng(0, 5000, bt[1]); s.rng(1, 8, bt[2]); s.rng(0, 4, bt[3]); d = bt[1]
        elif kind == 'random':
            s.u8(5); s.rng(0, 3000, bt[1]); d = bt[1]
        s.prev_depth = d
        s.when(how, back); s.nallocs += 1
    def ref(s, promote=False, back_ids=0, how=2):
        if s.nallocs == 0: return
        s.u8(4 + (12 if promote else 0)); s.u16(back_ids); s.when(how)
    def advance(s, cls, v):
        s.u8(6); s.u8(cls)
        hi = [1000, 40000000, 1 << 24, 1 << 36][cls]; s.rng(0, hi, v)
    def flush(s): s.u8(8)
    def invalid(s, k, extra=0):
        s.u8(9); s.u8(k)
        if k % 4 == 0: s.u8(extra)
    def burst(s, count, shape=3, share=False, step=0, length=None):
        s.u8(10 + 12 * ((1 if share else 0) | (step << 1) | 8)); s.u8(shape); s.rng(1, 4096, count)
        s.block(shape, length); s.u8(2); s.nallocs += count
        if not share: s.prev_depth = 0
    def collect_burst(s, count):
        if s.nallocs == 0: return
        s.u8(11 + 12 * 8); s.rng(1, 4096, count); s.u8(2)
    def save(s, path):
        open(path, 'wb').write(bytes(s.b))

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
seeds = {}
# 1-2: the basics in v2 and v3: every source, short and long forms, collect and promote
for v, name in ((0, 'basic-v2'), (1, 'basic-v3')):
    p = P(flags=v, domain=7)
    p.alloc(shape=0, length=3, bt=('pick', [0, 1, 2]))          # short form
    p.alloc(shape=1, length=5, bt=('pick', [0, 1, 3]))          # major
    p.alloc(shape=2 + 3, length=300, bt=('prev', 2, [2]))        # external, u16 length
    p.alloc(shape=0 + 24, length=2, nsamples=7, bt=('pick', [3]))
    p.ref(False, 0); p.ref(True, 2); p.advance(0, 500); p.alloc(shape=0, bt=('none',))
    p.flush(); p.alloc(shape=1, bt=('prev', 1, []))
    seeds[name] = p
# 3: deep recursion, prediction runs of up to 255, then prefixes of it
p = P(codes=(11, 12, 13, 14, 15, 16))
p.alloc(bt=('cycle', 5000, 1, 2)); p.alloc(bt=('prev', 4000, [1, 2])); p.alloc(bt=('cycle', 4999, 3, 4))
p.alloc(bt=('prev', 100, [5])); p.alloc(bt=('cycle', 2500, 8, 0))
seeds['deep-recursion'] = p
# 4: patternless backtraces beyond 4 KiB of codewords: truncation, then a longer prefix
p = P(codes=tuple(range(1000, 1064)))
p.alloc(bt=('random', 3000)); p.alloc(bt=('prev', 3000, [1, 2, 3])); p.alloc(bt=('random', 500))
p.alloc(bt=('random', 2999)); p.alloc(bt=('prev', 10, []))
seeds['truncated-backtraces'] = p
# 5: time: jumps past 30 s, around the 2^25 wrap, days, and steps backwards
p = P(flags=1, codes=(5, 6, 7))
for cls, v in ((0, 999), (1, 33554431), (2, 1 << 24), (3, 1 << 35), (1, 33554433), (2, 1)):
    p.advance(cls, v); p.alloc(bt=('pick', [0, 1]), how=1, back=999); p.ref(False, 0, how=1)
p.alloc(bt=('pick', [2]), how=0)
seeds['time-jumps'] = p
# 6: the resolver returning around 255 locations (profiles that favour it)
for prof in (2, 13):
    p = P(codes=tuple(range(1, 65)), names=(b"x.ml", b"y.ml", b"f", b"g"), profile=prof, rseed=prof * 99)
    for i in range(0, 64, 8): p.alloc(bt=('pick', list(range(i, i + 8))))
    seeds['many-locations-%d' % prof] = p
# 7: names too long for one definition: memtrace's sentinel
p = P(names=(b"long_file", b"long_def", b"s"), name_kinds=[('long', 2000), ('long', 96), None], profile=5)
p.alloc(bt=('pick', [0, 1, 2, 3])); p.alloc(bt=('pick', [3, 2, 1]))
seeds['oversize-names'] = p
# 8: medium names and many codes: several location packets per flush
p = P(codes=tuple(range(200, 264)), names=(b"m1", b"m2", b"m3", b"m4", b"m5", b"m6"),
      name_kinds=[('mid', 900), ('mid', 800), ('mid', 500), ('mid', 0), ('mid', 333), None], profile=1)
for i in range(0, 64, 4): p.alloc(bt=('pick', list(range(i, i + 4))))
seeds['location-packets'] = p
# 9: no resolver at all
p = P(flags=0x40); p.alloc(bt=('pick', [0, 1, 2, 3])); p.alloc(bt=('cycle', 300, 2, 1))
seeds['no-resolver'] = p
# 10: write errors at the first, third and a later packet
for k in (1, 3, 6):
    p = P(flags=0x80, fail=k - 1)
    for j in range(8): p.alloc(bt=('pick', [j % 4])); p.flush(); p.invalid(0, 3)
    p.ref(False, 0); p.flush()
    seeds['write-error-%d' % k] = p
# 11: start time from the clock, 32-bit words
p = P(flags=0x20 | 0x02 | 1, now=123456789); p.alloc(bt=('pick', [1])); p.advance(3, 12345678901)
p.alloc(bt=('pick', [1, 2]), how=0)
seeds['clock-start-word32'] = p
# 12: small remembered-backtrace capacities in the writer (0, 1, 8, 300 frames)
for cap in (1, 2, 3, 4):
    p = P(flags=cap << 2, codes=(3, 4, 5, 6, 7))
    p.alloc(bt=('cycle', 1000, 2, 1)); p.alloc(bt=('prev', 900, [0])); p.alloc(bt=('prev', 5, [1, 2]))
    p.alloc(bt=('random', 800)); p.alloc(bt=('prev', 799, [4]))
    seeds['writer-frames-%d' % cap] = p
# 13: long trace-info strings (beyond the writer's 8000-byte cap)
p = P(infos=(1500, 2000, b"params", 0)); p.alloc(bt=('pick', [0]))
seeds['long-info'] = p
# 14: invalid calls of every kind between valid ones
p = P()
p.invalid(0, 5); p.invalid(1); p.alloc(bt=('pick', [0])); p.invalid(0, 0); p.invalid(1); p.invalid(2); p.invalid(3)
p.ref(True, 0)
seeds['invalid-calls'] = p
# 15: flushes with nothing in between: empty event packets
p = P(flags=1); p.flush(); p.flush(); p.alloc(bt=('pick', [0])); p.flush(); p.flush(); p.ref(False, 0); p.flush()
seeds['empty-packets'] = p
# 16: v3 bursts over the 10 000-id chunks, then collects of them
p = P(flags=1, domain=3)
p.alloc(bt=('pick', [0, 1, 2])); p.burst(4096, share=True, step=1); p.burst(4096, shape=0, step=0)
p.burst(4000, share=True, step=2, shape=1, length=9); p.collect_burst(4096); p.collect_burst(100)
seeds['v3-id-chunks'] = p
# 17: v2 bursts far apart in time: a packet every 30 s
p = P(); p.alloc(bt=('cycle', 40, 2, 0)); p.burst(2000, share=True, step=3); p.collect_burst(1500)
seeds['v2-30s-packets'] = p
# 18: many distinct codes: more than 128 waiting locations forces flushes
p = P(codes=tuple(range(5000, 5064)) , profile=0)
for i in range(40): p.alloc(bt=('pick', [(i * 7 + j) % 64 for j in range(24)]))
seeds['pending-locations'] = p
# 19: just a configuration
seeds['empty-program'] = P(flags=1, infos=(None, None, None, None))
# 20: short-form allocations with small backtrace changes
p = P(codes=(1, 2, 3, 4, 5, 6, 7, 8))
for i in range(30): p.alloc(shape=0, length=1 + i % 16, bt=('prev', max(0, p.prev_depth - 1) if p.prev_depth else 0, [i % 8, (i * 3) % 8]))
seeds['short-forms'] = p
for name, p in seeds.items(): p.save(os.path.join(out, 'seed-' + name))
print(len(seeds), 'seeds')
# 21: location sizes chosen to end a location packet 3 bytes past 32 KiB (writer bug, fixed)
sizes = [4000] * 7 + [605, 4100]
codes = tuple((sz - 21) + 4096 * (i + 1) for i, sz in enumerate(sizes))
p = P(codes=codes, profile=0xE0, names=())
p.alloc(bt=('pick', list(range(len(codes)))))
p.save(os.path.join(out, 'regress-location-packet-overflow'))
