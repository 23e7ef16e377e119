#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Whether two `ctfscope report` pages hold the same data, whatever deflated it.

The page's columns are deflated zlib streams in base64 ("z":"..." and "zs":"..."):
another compressor or level gives other bytes for the same data. This inflates every
stream of both pages and compares the pages with each stream replaced by its inflated
bytes. Exit 0 when they are the same, 1 (and where they part) when not.

Usage: bench/report_payload_cmp.py A.html B.html
"""
import base64
import re
import sys
import zlib

STREAM = re.compile(rb'"(zs?)":"([A-Za-z0-9+/=]*)"')


def inflated(page):
    """The page's text outside the streams, and the streams inflated, in order."""
    parts, streams, at = [], [], 0
    for m in STREAM.finditer(page):
        parts.append(page[at:m.start()])
        streams.append(zlib.decompress(base64.b64decode(m.group(2))))
        at = m.end()
    parts.append(page[at:])
    return parts, streams


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    pages = []
    for path in sys.argv[1:]:
        with open(path, 'rb') as f:
            pages.append(inflated(f.read()))
    (pa, sa), (pb, sb) = pages
    if len(sa) != len(sb):
        print(f'{len(sa)} streams against {len(sb)}')
        return 1
    for i, (a, b) in enumerate(zip(pa, pb)):
        if a != b:
            print(f'the text before stream {i} differs')
            return 1
    for i, (a, b) in enumerate(zip(sa, sb)):
        if a != b:
            print(f'stream {i} inflates to other bytes ({len(a)} and {len(b)})')
            return 1
    print(f'same: {len(sa)} streams, {sum(map(len, sa))} bytes inflated')
    return 0


if __name__ == '__main__':
    sys.exit(main())
