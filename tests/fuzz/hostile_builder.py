"""Byte-level builders for hostile CFI: LEB128 and a small .eh_frame / .debug_frame assembler that
records where every entry and instruction lands, so tests can state the exact offsets (in hex) that
the error messages must name.

Layouts follow DWARF 5 §6.4.1 (CIE and FDE fields), §7.6 (LEB128) and LSB 5.0 §10.6 (.eh_frame: CIE
id 0, CIE pointer = distance back from the pointer field, 'z' augmentation data).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

EH_FRAME = 0
DEBUG_FRAME = 1

# DW_EH_PE_udata4: FDE pointers stored as plain 4-byte values, so pc_begin reads back as written.
UDATA4 = 0x03

# DW_CFA_def_cfa rsp+8; DW_CFA_offset r16 (rip) at cfa-8: what every x86-64 CIE starts with.
CIE_INSNS = b"\x0c\x07\x08\x90\x01"


def uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


@dataclass
class Frames:
    """A section under construction. `cie()` and `fde()` return the entry's offset; `insns_at`
    maps an entry offset to the offset of its first instruction."""

    kind: int = EH_FRAME
    data: bytearray = field(default_factory=bytearray)
    insns_at: dict[int, int] = field(default_factory=dict)

    @property
    def eh(self) -> bool:
        return self.kind == EH_FRAME

    def cie(self, insns: bytes = CIE_INSNS, *, version: int = 1, augmentation: bytes | None = None,
            augmentation_data: bytes | None = None, ra: int = 16, header: bytes | None = None) -> int:
        """A 32-bit CIE; `header` replaces everything between the CIE id and the instructions."""
        offset = len(self.data)
        if header is None:
            if augmentation is None:
                augmentation = b"zR" if self.eh else b""
            if augmentation_data is None:
                augmentation_data = bytes([UDATA4]) if augmentation == b"zR" else b""
            header = bytes([version]) + augmentation + b"\0" + uleb(1) + sleb(-8)
            header += bytes([ra]) if version == 1 else uleb(ra)
            if augmentation.startswith(b"z"):
                header += uleb(len(augmentation_data)) + augmentation_data
        cie_id = 0 if self.eh else 0xFFFFFFFF
        body = struct.pack("<I", cie_id) + header
        self.insns_at[offset] = offset + 4 + len(body)
        self.data += struct.pack("<I", len(body) + len(insns)) + body + insns
        return offset

    def fde(self, cie_offset: int, insns: bytes = b"", *, pc_begin: int = 0x1000, pc_range: int = 0x40,
            head: bytes | None = None, augmentation: bytes | None = b"", pointer: int | None = None) -> int:
        """An FDE of the CIE at `cie_offset`. `head` replaces the pc_begin/pc_range fields (udata4
        in .eh_frame, 8-byte absptr in .debug_frame); `augmentation` is the FDE's augmentation
        data (None when the CIE has no 'z'); `pointer` overrides the CIE pointer as stored."""
        offset = len(self.data)
        if head is None:
            head = struct.pack("<II", pc_begin, pc_range) if self.eh else struct.pack("<QQ", pc_begin, pc_range)
        if augmentation is None or not self.eh and augmentation == b"":
            aug = b""
        else:
            aug = uleb(len(augmentation)) + augmentation
        if pointer is None:
            pointer = (offset + 4 - cie_offset) if self.eh else cie_offset
        body = struct.pack("<I", pointer & 0xFFFFFFFF) + head + aug
        self.insns_at[offset] = offset + 4 + len(body)
        self.data += struct.pack("<I", len(body) + len(insns)) + body + insns
        return offset

    def raw(self, data: bytes) -> int:
        offset = len(self.data)
        self.data += data
        return offset

    def bytes(self) -> bytes:
        return bytes(self.data)


def nested_entry_value(depth: int) -> bytes:
    """A DWARF expression of DW_OP_entry_value blocks nested `depth` deep (DWARF 5 §2.5.1.7)."""
    prefixes, inner = [], 0
    for _ in range(depth):
        prefix = b"\xa3" + uleb(inner)
        prefixes.append(prefix)
        inner += len(prefix)
    return b"".join(reversed(prefixes))
