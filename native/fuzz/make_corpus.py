#!/usr/bin/env python3
"""Write the hand-made hostile corpus for native/fuzz (`make asan`, `make fuzz`) into a directory.

    PYTHONPATH=../.. python3 make_corpus.py build/corpus    (from native/fuzz; the Makefile does this)

Each file is one blob that the driver takes as .eh_frame, .debug_frame, .eh_frame_hdr and a DWARF
expression in turn; its name says what it is built to break. The blobs are assembled byte by byte
here (DWARF 5 §6.4.1-2, §7.7, §7.24; LSB 5.0 §10.5-10.6) rather than committed as binaries, and
writing twice yields identical files. The section builder is tests/support/hostile_builder.py, shared
with the hostile-input tests. Standard library only: it runs before the venv exists.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

# The section builder is shared with the hostile-input tests (stdlib only, like this script); the
# repository root must be on PYTHONPATH.
from tests.support.hostile_builder import (
    CIE_INSNS,
    DEBUG_FRAME,
    EH_FRAME,
    Frames,
    nested_entry_value,
    one_fde,
    sleb,
    uleb,
)

# Limits of the C core (native/cfi.h): cases sit on both sides of each.
MAX_COLUMNS = 128
MAX_STATE_STACK = 64
MAX_AUGMENTATION = 32
EXPR_STACK = 64

# DW_EH_PE_pcrel | DW_EH_PE_sdata4: what GCC and LLVM write for x86-64 FDE pointers.
PCREL_SDATA4 = 0x1B


def eh_frame() -> Frames:
    """.eh_frame as compilers write it: pcrel|sdata4 FDE pointers, each FDE's code 0x100 bytes
    before its initial-location field."""
    return Frames(EH_FRAME, encoding=PCREL_SDATA4, pc_begin=-0x100)


def debug_frame() -> Frames:
    """.debug_frame with absolute 8-byte initial locations in a typical non-PIE text segment."""
    return Frames(DEBUG_FRAME, pc_begin=0x401000)


def cases() -> dict[str, bytes]:
    out: dict[str, bytes] = {}

    # ---- lengths and framing ----
    out["empty"] = b""
    out["one-byte"] = b"\x01"
    out["truncated-length"] = b"\x10\x00"
    out["zero-terminators"] = b"\0" * 64
    out["length-overruns-section"] = struct.pack("<I", 0x1000) + b"\0" * 12
    out["length-too-short-for-id"] = struct.pack("<I", 2) + b"\0\0"
    out["dwarf64-length-truncated"] = b"\xff\xff\xff\xff\x10\x00"
    out["dwarf64-length-huge"] = b"\xff\xff\xff\xff" + b"\xff" * 8 + b"\0" * 16
    f = eh_frame()
    cie = f.cie(dwarf64=True)
    f.fde(cie, b"\x41\x0e\x10", dwarf64=True)
    out["dwarf64-valid"] = f.bytes()
    f = debug_frame()
    cie = f.cie(dwarf64=True)
    f.fde(cie, b"\x41\x0e\x10", dwarf64=True, augmentation=None)
    out["dwarf64-debug-frame-valid"] = f.bytes()
    out["valid-then-garbage"] = one_fde(eh_frame(), b"\x41\x0e\x10\x0a\x0b") + b"\x07\x00\x00"

    # ---- CIE pointers ----
    f = eh_frame()
    f.cie()
    f.fde(0, pointer=0x7FFFFFF0)
    out["cie-pointer-to-nowhere"] = f.bytes()
    f = eh_frame()
    cie = f.cie()
    fde = f.fde(cie)
    f.fde(fde)  # points at the FDE before it
    out["cie-pointer-to-fde"] = f.bytes()
    f = eh_frame()
    f.cie()
    f.fde(0, pointer=-0x1000 & 0xFFFFFFFF)  # forward, past the end
    out["cie-pointer-forward-beyond-end"] = f.bytes()
    # An FDE before its CIE: a forward reference, which readelf accepts. The FDE is 4 + 4 + 8 + 1
    # + 1 bytes long, so the CIE starts at 18 and the pointer field (at 4) holds 4 - 18.
    f = eh_frame()
    f.fde(0, b"\x41", pointer=(4 - 18) & 0xFFFFFFFF)
    assert len(f.data) == 18
    f.cie()
    out["cie-pointer-forward-valid"] = f.bytes()
    f = eh_frame()
    f.cie()
    f.fde(0, pointer=4)  # to itself
    out["cie-pointer-to-itself"] = f.bytes()
    f = debug_frame()
    cie = f.cie()
    fde = f.fde(cie, augmentation=None)
    f.fde(fde, augmentation=None)
    f.fde(0, augmentation=None, pointer=3)  # into the middle of the CIE
    out["debug-frame-pointer-to-fde-and-middle"] = f.bytes()

    # ---- CIE headers ----
    for version in (0, 2, 5, 255):
        f = eh_frame()
        f.cie(b"", header=bytes([version]) + b"zR\0\x01\x78\x10\x01\x1b")
        out[f"cie-version-{version}"] = f.bytes()
    out["augmentation-without-nul"] = struct.pack("<II", 8, 0) + b"\x01zRzR"
    f = eh_frame()
    f.cie(b"", header=b"\x01" + b"z" + b"R" * (MAX_AUGMENTATION + 4) + b"\0\x01\x78\x10\x01\x1b")
    out["augmentation-too-long"] = f.bytes()
    f = eh_frame()
    f.cie(augmentation=b"xyz")
    out["unknown-augmentation-without-z"] = f.bytes()
    f = eh_frame()
    f.cie(b"", header=b"\x01zR\0\x01\x78\x10\x7f\x1b")
    out["augmentation-data-length-overrun"] = f.bytes()
    f = eh_frame()
    f.cie(header=b"\x01zPLR\0\x01\x78\x10\x01\x9b")  # 'P' wants 5 bytes, has 1
    out["augmentation-data-too-short"] = f.bytes()
    out["augmentation-unknown-char-with-z"] = one_fde(eh_frame(), b"\x41", augmentation=b"zRX",
                                                      augmentation_data=b"\x1b\x99")
    f = eh_frame()
    f.cie(header=b"\x01eh\0" + b"\0" * 8 + b"\x01\x78\x10")  # old GCC's eh_ptr field
    out["augmentation-eh"] = f.bytes()
    out["augmentation-S-B"] = one_fde(eh_frame(), b"\x41", augmentation=b"zRSB", augmentation_data=b"\x1b")
    for size, segment in ((0, 0), (9, 0), (8, 8), (4, 5)):
        f = debug_frame()
        f.cie(header=bytes([4]) + b"\0" + bytes([size, segment]) + b"\x01\x78\x10")
        out[f"cie-v4-address-size-{size}-segment-{segment}"] = f.bytes()
    f = debug_frame()
    cie = f.cie(header=b"\x04\0\x04\x04\x01\x78\x10")
    f.fde(cie, b"\x41\x0e\x10", head=struct.pack("<III", 7, 0x1000, 0x40), augmentation=None)
    out["cie-v4-segment-selector"] = f.bytes()
    out["ra-column-200"] = one_fde(eh_frame(), b"", ra=200)
    out["ra-column-huge-v3"] = one_fde(eh_frame(), b"", version=3, ra=2**64 - 1)
    out["cie-truncated-before-version"] = struct.pack("<II", 4, 0)
    out["cie-truncated-in-factors"] = struct.pack("<II", 7, 0) + b"\x01\0\x81"

    # ---- pointer encodings ----
    for encoding in (0x05, 0x06, 0x07, 0x0D, 0x0E, 0x0F, 0x60, 0x70, 0x50, 0x51, 0x80, 0x9B,
                     0x20 | 0x03, 0x30 | 0x03, 0x40 | 0x03, 0x01, 0x09):
        out[f"fde-encoding-0x{encoding:02x}"] = one_fde(
            eh_frame(), b"\x41", augmentation_data=bytes([encoding]))
    for encoding in (0x07, 0x70, 0x80 | 0x1B):
        out[f"personality-encoding-0x{encoding:02x}"] = one_fde(
            eh_frame(), b"", augmentation=b"zPR", augmentation_data=bytes([encoding]) + b"\0\0\0\0" + b"\x1b")
        frames = eh_frame()
        cie = frames.cie(augmentation=b"zLR", augmentation_data=bytes([encoding, 0x1B]))
        frames.fde(cie, b"\x41", augmentation=b"\x10\0\0\0")
        out[f"lsda-encoding-0x{encoding:02x}"] = frames.bytes()
    heads = {
        "fde-pc-range-wraps": (struct.pack("<iI", 0x7FFFFFF0, 0xFFFFFFFF), b""),
        "fde-head-truncated": (b"\x01\x02", None),
        "fde-augmentation-overrun": (struct.pack("<ii", 0, 4) + b"\x7f", None),
    }
    for name, (head, augmentation) in heads.items():
        f = eh_frame()
        f.fde(f.cie(), b"\x41" if augmentation is not None else b"", head=head,
              augmentation=augmentation)
        out[name] = f.bytes()

    # ---- call frame instructions ----
    for opcode in list(range(0x17, 0x1D)) + list(range(0x30, 0x40)) + [0x1E, 0x1F, 0x2C]:
        out[f"unknown-opcode-0x{opcode:02x}"] = one_fde(eh_frame(), bytes([0x41, opcode, 0x41]))
    out["truncated-uleb-operand"] = one_fde(eh_frame(), b"\x0e\x87")
    out["overlong-uleb-operand"] = one_fde(eh_frame(), b"\x0e" + b"\xff" * 10 + b"\x7f")
    out["truncated-advance-loc4"] = one_fde(eh_frame(), b"\x04\x01\x02")
    out["truncated-set-loc"] = one_fde(eh_frame(), b"\x01\x01")
    out["restore-state-empty"] = one_fde(eh_frame(), b"\x41\x0b")
    out["remember-64"] = one_fde(eh_frame(), b"\x0a" * MAX_STATE_STACK + b"\x0b" * MAX_STATE_STACK)
    out["remember-65"] = one_fde(eh_frame(), b"\x0a" * (MAX_STATE_STACK + 1))
    out["remember-in-cie"] = one_fde(eh_frame(), b"\x0b", insns=CIE_INSNS + b"\x0a" * (MAX_STATE_STACK + 1))
    out["remember-restore-100k"] = one_fde(eh_frame(), b"\x0a\x41\x0b" * 33000)
    out["advance-100k-rows"] = one_fde(eh_frame(), bytes([0x41, 0x0e, 0x10, 0x41, 0x0e, 0x08]) * 16000)
    for column in (MAX_COLUMNS - 1, MAX_COLUMNS, 1000, 2**32, 2**64 - 1):
        name = f"register-{column}"
        out[f"{name}-offset-extended"] = one_fde(eh_frame(), b"\x05" + uleb(column) + b"\x02")
        out[f"{name}-def-cfa"] = one_fde(eh_frame(), b"\x0c" + uleb(column) + b"\x10")
        out[f"{name}-register-second"] = one_fde(eh_frame(), b"\x09\x03" + uleb(column))
        out[f"{name}-expression"] = one_fde(eh_frame(), b"\x10" + uleb(column) + b"\x02\x77\x00")
        out[f"{name}-restore-extended"] = one_fde(eh_frame(), b"\x06" + uleb(column))
    out["expression-length-overrun"] = one_fde(eh_frame(), b"\x10\x03\x40\x77")
    out["def-cfa-expression-length-overrun"] = one_fde(eh_frame(), b"\x0f\x7f\x77\x00")
    out["def-cfa-offset-after-expression"] = one_fde(eh_frame(), b"\x0f\x02\x77\x08\x0e\x10")
    out["def-cfa-register-after-expression"] = one_fde(eh_frame(), b"\x0f\x02\x77\x08\x0d\x06\x41")
    # Factored offsets at the edges of int64: operand * data_align = INT64_MIN, then negated.
    out["negative-offset-extended-int64-min"] = one_fde(eh_frame(), b"\x2f\x03" + uleb(2**60), data_align=-8)
    out["negative-offset-extended-int64-min-da1"] = one_fde(eh_frame(), b"\x2f\x03" + uleb(2**63),
                                                            data_align=1)
    out["offset-extended-sf-overflow"] = one_fde(eh_frame(), b"\x11\x03" + sleb(-(2**63)), data_align=-8)
    out["def-cfa-sf-int64-min"] = one_fde(eh_frame(), b"\x12\x07" + sleb(-(2**63)), data_align=1)
    out["def-cfa-offset-sf-overflow"] = one_fde(eh_frame(), b"\x13" + sleb(2**62), data_align=-(2**62))
    out["advance-code-align-huge"] = one_fde(eh_frame(), b"\x7f\x04\xff\xff\xff\xff\x41",
                                             code_align=2**63 + 1)
    out["set-loc-backwards"] = one_fde(eh_frame(), b"\x41\x01" + struct.pack("<i", -0x1000) + b"\x41")
    out["advance-loc8-mips"] = one_fde(eh_frame(), b"\x1d" + struct.pack("<Q", 2**64 - 1) + b"\x41")
    out["args-size-window-save"] = one_fde(eh_frame(), b"\x2e\x10\x2d\x41")
    # Deeply nested DW_OP_entry_value in a register rule: the readelf printer recurses per level.
    deep = nested_entry_value(60000)
    out["expression-nested-entry-value-deep"] = one_fde(eh_frame(), b"\x10\x06" + uleb(len(deep)) + deep)
    eight = nested_entry_value(8)
    out["expression-nested-entry-value-8"] = one_fde(eh_frame(), b"\x10\x06" + uleb(len(eight)) + eight)

    # ---- many FDEs: overlapping, empty and wrapping ranges (lookup) ----
    f = eh_frame()
    cie = f.cie()
    for i in range(200):
        start = (i * 7919) % 0x1000 - 0x800
        f.fde(cie, b"\x41\x0e\x10" * (i % 3), pc_begin=start - len(f.data),
              pc_range=(i * 37) % 0x300)
    out["many-overlapping-fdes"] = f.bytes()

    # ---- expressions, as the evaluator sees them (the whole blob is also tried as one) ----
    out["expr-dup-skip-loop"] = b"\x30\x12\x2f\xfc\xff"  # lit0; dup; skip -4
    out["expr-bra-loop"] = b"\x31\x12\x28\xfc\xff"  # lit1; dup; bra -4
    out["expr-65-pushes"] = b"\x30" * (EXPR_STACK + 1)
    out["expr-underflow"] = b"\x22"
    out["expr-div-zero"] = b"\x31\x30\x1b"
    out["expr-mod-zero"] = b"\x31\x30\x1d"
    out["expr-div-int64-min"] = b"\x0e" + struct.pack("<Q", 2**63) + b"\x11\x7f\x1b"
    out["expr-skip-out-of-range"] = b"\x2f\x00\x10"
    out["expr-skip-backward-out"] = b"\x2f\xf0\xff"
    out["expr-unknown-op"] = b"\x30\xff"
    out["expr-deref-unreadable"] = b"\x30\x06"
    out["expr-deref-size-0"] = b"\x77\x00\x94\x00"
    out["expr-deref-size-9"] = b"\x77\x00\x94\x09"
    out["expr-pick-255"] = b"\x30\x15\xff"
    out["expr-shifts"] = b"\x31\x08\x40\x24\x31\x08\xff\x25\x0e" + b"\xff" * 8 + b"\x08\x80\x26"
    out["expr-bregx-huge"] = b"\x92" + uleb(2**64 - 1) + b"\x00"
    out["expr-regx-128"] = b"\x90" + uleb(128)
    out["expr-truncated-const8"] = b"\x0e\x01\x02"
    out["expr-implicit-value-overrun"] = b"\x9e\x7f\x01"
    out["expr-nested-entry-value-deep"] = nested_entry_value(60000)
    out["expr-rot-swap-over"] = b"\x31\x32\x33\x17\x16\x14\x13\x13\x13"

    # ---- .eh_frame_hdr ----
    def hdr(version=1, ptr_enc=0x1B, count_enc=0x03, table_enc=0x3B, ptr=0x100, count=2, table=None):
        body = bytes([version, ptr_enc, count_enc, table_enc]) + struct.pack("<i", ptr)
        body += struct.pack("<I", count & 0xFFFFFFFF)
        if table is None:
            table = [(0x10, 0x200), (0x20, 0x240)][: max(0, min(count, 2))]
        for location, fde in table:
            body += struct.pack("<ii", location, fde)
        return body
    out["hdr-valid"] = hdr()
    out["hdr-truncated"] = hdr()[:3]
    out["hdr-version-2"] = hdr(version=2)
    out["hdr-count-huge"] = hdr(count=0xFFFFFFFF)
    out["hdr-unsorted"] = hdr(table=[(0x20, 0x200), (0x10, 0x240)])
    out["hdr-table-encoding-udata4"] = hdr(table_enc=0x03)
    out["hdr-omit"] = hdr(count_enc=0xFF)
    out["hdr-bad-ptr-encoding"] = hdr(ptr_enc=0x07)
    out["hdr-indirect-ptr"] = hdr(ptr_enc=0x9B)
    out["hdr-aligned"] = hdr(ptr_enc=0x50, count_enc=0x03)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    directory = Path(argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    corpus = cases()
    for name in sorted(corpus):
        (directory / name).write_bytes(corpus[name])
    print(f"make_corpus: {len(corpus)} files in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
