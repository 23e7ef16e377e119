#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed inputs of tests/fuzz/fuzz_cfi.c into OUTPUT_DIR.

Each seed is the target's input: pc (int32, from the mapping's start), the offset of
.eh_frame_hdr in the mapping (u16), the offset of an FDE to run directly (u16), then the
mapping: an .eh_frame_hdr with its binary-search table and an .eh_frame with one CIE and
its FDEs, encoded as binutils and lld write them (version 1 header, pcrel/datarel sdata4
pointers) and holding the call frame instructions gcc and clang emit: frame-pointer
prologues, early epilogues bracketed by remember/restore_state, %rsp-based frames, the
outermost frame's undefined return address, personality and LSDA augmentations, signal
frames, the long advance and offset forms, and one unsupported expression.

Usage: make_cfi_seeds.py OUTPUT_DIR
"""
import os
import struct
import sys

FUNC_BASE = -0x8000  # functions lie below .eh_frame_hdr, as .text does in a real module
FUNC_SIZE = 0x100


def uleb(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def sleb(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        done = (v == 0 and not b & 0x40) or (v == -1 and b & 0x40)
        out.append(b | (0 if done else 0x80))
        if done:
            return bytes(out)


def pad4(body):
    return body + b"\0" * (-(len(body) + 4) % 4)  # DW_CFA_nop up to the length's alignment


def cie(aug=b"zR", version=1, aug_data=b"\x1b", initial=None):
    if initial is None:  # CFA = %rsp + 8, return address at CFA - 8
        initial = b"\x0c\x07\x08" + b"\x90\x01"
    ra = bytes([16]) if version == 1 else uleb(16)
    body = struct.pack("<I", 0) + bytes([version]) + aug + b"\0" + uleb(1) + sleb(-8) + ra
    if aug.startswith(b"z"):
        body += uleb(len(aug_data)) + aug_data
    body = pad4(body + initial)
    return struct.pack("<I", len(body)) + body


# Instruction sequences (the FDE's), with the pc offsets worth asking about.
FRAME_POINTER = (  # push %rbp; mov %rsp,%rbp; ...; leave; ret
    b"\x41\x0e\x10\x86\x02" + b"\x43\x0d\x06" + b"\x02\x40" + b"\x0c\x07\x08", [0, 1, 4, 20, 0x4A])
EARLY_EPILOGUE = (  # gcc -O2: an early return bracketed by remember/restore_state
    b"\x41\x0e\x10\x86\x02\x43\x0d\x06" + b"\x48\x0a\x0c\x07\x08\x41\x0b" + b"\x50\xc6",
    [4, 12, 13, 14, 40])
RSP_FRAME = (  # no frame pointer: sub $24,%rsp; push %rbx
    b"\x44\x0e\x20" + b"\x41\x0e\x28\x83\x05" + b"\x60\x0e\x08", [0, 4, 6, 0x30])
OUTERMOST = (b"\x07\x10" + b"\x41\x0e\x10", [0, 2])  # _start, clone3: RA undefined
LONG_FORMS = (  # advance_loc1/2/4, offset_extended(_sf), def_cfa_sf, def_cfa_offset_sf,
    # GNU_args_size, same_value, register, restore(_extended), negative offset
    b"\x02\x10" + b"\x05\x06\x02" + b"\x03\x20\x00" + b"\x11\x06\x7e" + b"\x04\x08\x00\x00\x00" +
    b"\x12\x06\x7e" + b"\x13\x7c" + b"\x2e\x10" + b"\x08\x06" + b"\x09\x10\x00" + b"\xc6" +
    b"\x06\x06" + b"\x2f\x06\x02" + b"\x0d\x06",
    [0, 0x10, 0x30, 0x38, 0xF0])
EXPRESSION = (b"\x41\x0e\x10\x10\x06\x02\x76\x00", [0, 2])  # DW_CFA_expression: not read


def fde(cie_off, fde_off, func, size, insns, aug_data=b""):
    body = struct.pack("<I", fde_off + 4 - cie_off)
    body += struct.pack("<i", func - (fde_off + 8)) + struct.pack("<I", size)
    body = pad4(body + uleb(len(aug_data)) + aug_data + insns)
    return struct.pack("<I", len(body)) + body


def mapping(the_cie, insn_list, fde_aug=b"", hdr_last=False):
    """The mapping, the offsets of its header and of each FDE, and each function's address
    (all relative to the mapping's start)."""
    funcs = [FUNC_BASE + i * FUNC_SIZE for i in range(len(insn_list))]
    count = len(insn_list)
    hdr_len = 12 + 8 * count
    eh = bytearray(the_cie)
    fde_offs = []
    for f, insns in zip(funcs, insn_list):
        fde_offs.append(len(eh))
        eh += fde(0, len(eh), 0, FUNC_SIZE, insns, fde_aug)  # pc_begin patched below
    eh += struct.pack("<I", 0)  # the terminator
    eh_at, hdr_at = (0, len(eh)) if hdr_last else (hdr_len, 0)
    for f, off in zip(funcs, fde_offs):  # pc_begin: pcrel from the field itself
        struct.pack_into("<i", eh, off + 8, f - (eh_at + off + 8))
    hdr = bytes([1, 0x1B, 0x03, 0x3B]) + struct.pack("<i", eh_at - (hdr_at + 4))
    hdr += struct.pack("<I", count)
    for f, off in sorted(zip(funcs, fde_offs)):
        hdr += struct.pack("<ii", f - hdr_at, eh_at + off - hdr_at)
    blob = eh + hdr if hdr_last else hdr + eh
    return bytes(blob), hdr_at, [eh_at + o for o in fde_offs], funcs


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = {
        "fp": (cie(), [FRAME_POINTER, EARLY_EPILOGUE, RSP_FRAME], b"", False),
        "hdr-last": (cie(), [FRAME_POINTER, RSP_FRAME], b"", True),
        "outermost": (cie(), [OUTERMOST, FRAME_POINTER], b"", False),
        "long-forms": (cie(), [LONG_FORMS], b"", False),
        "expression": (cie(), [EXPRESSION], b"", False),
        # personality (indirect pcrel sdata4), LSDA pointer encoding, R: as g++ writes them
        "zPLR": (cie(b"zPLR", 1, b"\x9b" + struct.pack("<i", -64) + b"\x1b\x1b"),
                 [FRAME_POINTER, EARLY_EPILOGUE], struct.pack("<i", 0), False),
        "signal-v3": (cie(b"zRS", 3, b"\x1b"), [RSP_FRAME], b"", False),
        "udata8-R": (cie(b"zR", 1, b"\x04"), [FRAME_POINTER], b"", False),
    }
    for name, (the_cie, insns, fde_aug, hdr_last) in cases.items():
        blob, hdr_at, fde_offs, funcs = mapping(the_cie, [i[0] for i in insns], fde_aug, hdr_last)
        for k, ((_, pcs), func, fde_at) in enumerate(zip(insns, funcs, fde_offs)):
            for pc in pcs:
                head = struct.pack("<iHH", func + pc, hdr_at, fde_at)
                with open(os.path.join(out, f"seed-{name}-f{k}-pc{pc:x}"), "wb") as f:
                    f.write(head + blob)


if __name__ == "__main__":
    main()
