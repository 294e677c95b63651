"""Byte-level builders for hostile CFI: LEB128 and a small .eh_frame / .debug_frame assembler that
records where every entry and instruction lands, so tests can state the exact offsets (in hex) that
the error messages must name.

Shared by the hostile-input tests (tests/fuzz/) and by native/fuzz/make_corpus.py, which imports it
as tests.support.hostile_builder (the fuzz Makefile puts the repository on PYTHONPATH) and runs
before the venv exists: standard library only.

Layouts follow DWARF 5 §6.4.1 (CIE and FDE fields), §7.4 (64-bit DWARF), §7.6 (LEB128) and LSB 5.0
§10.6 (.eh_frame: CIE id 0, CIE pointer = distance back from the pointer field, 'z' augmentation
data).
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

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF


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
    maps an entry offset to the offset of its first instruction.

    `encoding` is the FDE pointer encoding that a default 'zR' CIE declares; `pc_begin` the initial
    location a default FDE head stores (as stored: with a pcrel encoding, the distance from the
    field; negative values wrap)."""

    kind: int = EH_FRAME
    encoding: int = UDATA4
    pc_begin: int = 0x1000
    data: bytearray = field(default_factory=bytearray)
    insns_at: dict[int, int] = field(default_factory=dict)

    @property
    def eh(self) -> bool:
        return self.kind == EH_FRAME

    def _entry(self, id_value: int, head: bytes, insns: bytes, dwarf64: bool) -> int:
        """Append length, CIE id / pointer, `head`, `insns`; return the entry's offset."""
        offset = len(self.data)
        if dwarf64:
            prefix = struct.pack("<IQQ", MASK32, 8 + len(head) + len(insns), id_value & MASK64)
        else:
            prefix = struct.pack("<II", 4 + len(head) + len(insns), id_value & MASK32)
        self.insns_at[offset] = offset + len(prefix) + len(head)
        self.data += prefix + head + insns
        return offset

    def cie(self, insns: bytes = CIE_INSNS, *, version: int = 1, augmentation: bytes | None = None,
            augmentation_data: bytes | None = None, code_align: int = 1, data_align: int = -8,
            ra: int = 16, dwarf64: bool = False, header: bytes | None = None) -> int:
        """A CIE; `header` replaces everything between the CIE id and the instructions."""
        if header is None:
            if augmentation is None:
                augmentation = b"zR" if self.eh else b""
            if augmentation_data is None:
                augmentation_data = bytes([self.encoding]) if augmentation == b"zR" else b""
            header = bytes([version]) + augmentation + b"\0"
            if version == 4:
                header += b"\x08\x00"  # address_size, segment_selector_size
            header += uleb(code_align) + sleb(data_align) + (bytes([ra]) if version == 1 else uleb(ra))
            if augmentation.startswith(b"z"):
                header += uleb(len(augmentation_data)) + augmentation_data
        cie_id = 0 if self.eh else MASK64 if dwarf64 else MASK32
        return self._entry(cie_id, header, insns, dwarf64)

    def fde(self, cie_offset: int, insns: bytes = b"", *, pc_begin: int | None = None, pc_range: int = 0x40,
            head: bytes | None = None, augmentation: bytes | None = b"", dwarf64: bool = False,
            pointer: int | None = None) -> int:
        """An FDE of the CIE at `cie_offset`. `head` replaces the pc_begin/pc_range fields (4 bytes
        each in .eh_frame, 8-byte absptr in .debug_frame); `augmentation` is the FDE's augmentation
        data (None when the CIE has no 'z'; b"" writes nothing in .debug_frame); `pointer`
        overrides the CIE pointer as stored."""
        offset = len(self.data)
        if head is None:
            if pc_begin is None:
                pc_begin = self.pc_begin
            if self.eh:
                head = struct.pack("<II", pc_begin & MASK32, pc_range & MASK32)
            else:
                head = struct.pack("<QQ", pc_begin & MASK64, pc_range & MASK64)
        if augmentation is None or not self.eh and augmentation == b"":
            aug = b""
        else:
            aug = uleb(len(augmentation)) + augmentation
        if pointer is None:
            field_offset = offset + (12 if dwarf64 else 4)
            pointer = field_offset - cie_offset if self.eh else cie_offset
        return self._entry(pointer, head + aug, insns, dwarf64)

    def raw(self, data: bytes) -> int:
        offset = len(self.data)
        self.data += data
        return offset

    def bytes(self) -> bytes:
        return bytes(self.data)


def one_fde(frames: Frames, fde_insns: bytes, **cie_args) -> bytes:
    """A CIE (`cie_args` as for `Frames.cie`, `insns` included) and one FDE with `fde_insns`,
    appended to `frames`; returns the section's bytes."""
    frames.fde(frames.cie(**cie_args), fde_insns)
    return frames.bytes()


def nested_entry_value(depth: int) -> bytes:
    """A DWARF expression of DW_OP_entry_value blocks nested `depth` deep (DWARF 5 §2.5.1.7); each
    level is 0xa3 and the ULEB length of the rest."""
    prefixes, inner = [], 0
    for _ in range(depth):
        prefix = b"\xa3" + uleb(inner)
        prefixes.append(prefix)
        inner += len(prefix)
    return b"".join(reversed(prefixes))
