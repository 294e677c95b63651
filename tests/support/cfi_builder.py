"""A tiny assembler for `.eh_frame` and `.debug_frame` bytes, for hand-built test cases.

Nothing here comes from the library under test: encodings follow DWARF 5 §6.4.1 (CIE and FDE
layout), §7.6 (LEB128), §7.24 (DW_CFA opcodes, table 7.29) and LSB 5.0 §10.5-10.6 (the .eh_frame
flavour: CIE id 0, self-relative CIE pointers, the 'z' augmentation and DW_EH_PE pointer encodings).

    section = FrameSection(EH_FRAME, address=0x2000)
    cie = section.cie(augmentation="zR", fde_encoding=PE_pcrel | PE_sdata4,
                      instructions=[def_cfa(7, 8), offset(16, 1)])
    section.fde(cie, pc_begin=0x1000, pc_range=0x40, instructions=[advance_loc(4), def_cfa_offset(16)])
    data = section.build()

Entries are laid out in the order they were added. Pointer-valued fields are given as the value a
consumer must decode; the builder stores whatever the encoding needs (value - field address for
pcrel, value - base for textrel/datarel/funcrel, padding for aligned). Instruction lists may hold
`Pointer` items (DW_CFA_set_loc operands) that are encoded where they land.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

EH_FRAME = 0
DEBUG_FRAME = 1

# ---- DW_EH_PE (LSB 5.0 §10.5.1, tables 10-1 and 10-2) ------------------------------------------
PE_absptr = 0x00
PE_uleb128 = 0x01
PE_udata2 = 0x02
PE_udata4 = 0x03
PE_udata8 = 0x04
PE_sleb128 = 0x09
PE_sdata2 = 0x0A
PE_sdata4 = 0x0B
PE_sdata8 = 0x0C
PE_pcrel = 0x10
PE_textrel = 0x20
PE_datarel = 0x30
PE_funcrel = 0x40
PE_aligned = 0x50
PE_indirect = 0x80
PE_omit = 0xFF


# ---- LEB128 (DWARF 5 §7.6) ----------------------------------------------------------------------
def uleb128(value: int, *, pad_to: int = 0) -> bytes:
    """Unsigned LEB128; `pad_to` > the minimal length emits a non-canonical (padded) encoding,
    which is still valid (DWARF 5 §7.6 does not require the shortest form)."""
    if value < 0:
        raise ValueError(f"uleb128 of a negative value {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte)
        if value == 0:
            break
    while len(out) < pad_to:
        out.append(0)
    for i in range(len(out) - 1):
        out[i] |= 0x80
    return bytes(out)


def sleb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7  # arithmetic shift: Python ints are signed
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
            return bytes(out)


def _fixed(value: int, size: int, signed: bool) -> bytes:
    fmt = {1: "b", 2: "h", 4: "i", 8: "q"}[size]
    if not signed:
        fmt = fmt.upper()
    return struct.pack("<" + fmt, value)


# ---- encoded pointers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Bases:
    """The bases relative encodings need: textrel (.text), datarel (.got on x86-64), funcrel (the
    FDE's pc_begin, for LSDA pointers)."""

    text: int = 0
    data: int = 0
    function: int = 0


def encode_pointer(encoding: int, value: int, field_address: int, address_size: int,
                   bases: Bases = Bases()) -> bytes:
    """The bytes of a DW_EH_PE-encoded pointer whose decoded value is `value`, stored at
    `field_address` (the svma of the first byte the field may occupy). DW_EH_PE_indirect does not
    change the stored bytes: `value` is then the address of the slot holding the real pointer."""
    if encoding == PE_omit:
        return b""
    application = encoding & 0x70
    padding = b""
    if application == PE_aligned:
        misalign = field_address % address_size
        if misalign:
            padding = bytes(address_size - misalign)
        field_address += len(padding)
    base = {
        0x00: 0,
        PE_pcrel: field_address,
        PE_textrel: bases.text,
        PE_datarel: bases.data,
        PE_funcrel: bases.function,
        PE_aligned: 0,
    }[application]
    stored = value - base
    form = encoding & 0x0F
    if form == PE_uleb128:
        body = uleb128(stored)
    elif form == PE_sleb128:
        body = sleb128(stored)
    else:
        size, signed = {
            PE_absptr: (address_size, False), PE_udata2: (2, False), PE_udata4: (4, False),
            PE_udata8: (8, False), PE_sdata2: (2, True), PE_sdata4: (4, True), PE_sdata8: (8, True),
        }[form]
        # store the low `size` bytes of the 64-bit value, as a linker would
        stored &= (1 << (8 * size)) - 1
        if signed and stored >= 1 << (8 * size - 1):
            stored -= 1 << (8 * size)
        body = _fixed(stored, size, signed)
    return padding + body


@dataclass(frozen=True)
class Pointer:
    """An encoded pointer inside an instruction list (the operand of DW_CFA_set_loc): `encoding`
    None means "the FDE's encoding" (what DW_CFA_set_loc uses, LSB 5.0 §10.6.1.1)."""

    value: int
    encoding: int | None = None


# ---- call frame instructions (DWARF 5 §6.4.2, opcodes from table 7.29) ---------------------------
def advance_loc(delta: int) -> bytes:
    assert 0 <= delta < 64
    return bytes([0x40 | delta])


def advance_loc1(delta: int) -> bytes:
    return b"\x02" + _fixed(delta, 1, False)


def advance_loc2(delta: int) -> bytes:
    return b"\x03" + _fixed(delta, 2, False)


def advance_loc4(delta: int) -> bytes:
    return b"\x04" + _fixed(delta, 4, False)


def set_loc(address: int, encoding: int | None = None) -> list:
    return [b"\x01", Pointer(address, encoding)]


def offset(register: int, factored: int) -> bytes:
    assert 0 <= register < 64
    return bytes([0x80 | register]) + uleb128(factored)


def restore(register: int) -> bytes:
    assert 0 <= register < 64
    return bytes([0xC0 | register])


def nop() -> bytes:
    return b"\x00"


def offset_extended(register: int, factored: int) -> bytes:
    return b"\x05" + uleb128(register) + uleb128(factored)


def restore_extended(register: int) -> bytes:
    return b"\x06" + uleb128(register)


def undefined(register: int) -> bytes:
    return b"\x07" + uleb128(register)


def same_value(register: int) -> bytes:
    return b"\x08" + uleb128(register)


def register(register: int, source: int) -> bytes:
    return b"\x09" + uleb128(register) + uleb128(source)


def remember_state() -> bytes:
    return b"\x0a"


def restore_state() -> bytes:
    return b"\x0b"


def def_cfa(register: int, cfa_offset: int) -> bytes:
    return b"\x0c" + uleb128(register) + uleb128(cfa_offset)


def def_cfa_register(register: int) -> bytes:
    return b"\x0d" + uleb128(register)


def def_cfa_offset(cfa_offset: int) -> bytes:
    return b"\x0e" + uleb128(cfa_offset)


def def_cfa_expression(expression: bytes) -> bytes:
    return b"\x0f" + uleb128(len(expression)) + expression


def expression(register: int, expr: bytes) -> bytes:
    return b"\x10" + uleb128(register) + uleb128(len(expr)) + expr


def offset_extended_sf(register: int, factored: int) -> bytes:
    return b"\x11" + uleb128(register) + sleb128(factored)


def def_cfa_sf(register: int, factored: int) -> bytes:
    return b"\x12" + uleb128(register) + sleb128(factored)


def def_cfa_offset_sf(factored: int) -> bytes:
    return b"\x13" + sleb128(factored)


def val_offset(register: int, factored: int) -> bytes:
    return b"\x14" + uleb128(register) + uleb128(factored)


def val_offset_sf(register: int, factored: int) -> bytes:
    return b"\x15" + uleb128(register) + sleb128(factored)


def val_expression(register: int, expr: bytes) -> bytes:
    return b"\x16" + uleb128(register) + uleb128(len(expr)) + expr


def gnu_args_size(size: int) -> bytes:
    return b"\x2e" + uleb128(size)


def gnu_negative_offset_extended(register: int, factored: int) -> bytes:
    return b"\x2f" + uleb128(register) + uleb128(factored)


# ---- entries ----------------------------------------------------------------------------------------
@dataclass(eq=False)
class CieSpec:
    """A CIE. `augmentation` drives the augmentation data ('z' + 'P', 'L', 'R', 'S', 'B'); the
    data may be overridden byte for byte with `augmentation_data`."""

    version: int = 1
    augmentation: str = "zR"
    code_align: int = 1
    data_align: int = -8
    return_address_column: int = 16
    #: version 4 only (DWARF 5 §6.4.1 items 5-6); None: the section's address size
    address_size: int | None = None
    segment_size: int = 0
    fde_encoding: int = PE_pcrel | PE_sdata4
    lsda_encoding: int = PE_pcrel | PE_sdata4
    personality_encoding: int = PE_pcrel | PE_sdata4
    personality: int = 0
    instructions: list = field(default_factory=list)
    dwarf64: bool = False
    #: the "eh" augmentation's pointer-sized eh_ptr field (old GCC, before 'z')
    eh_data: int = 0
    augmentation_data: bytes | None = None
    #: pad the entry with DW_CFA_nop to a multiple of this (the address size, as assemblers do)
    align: int = 1
    #: raw bytes for the return address column (non-canonical forms); None: encoded normally
    return_address_bytes: bytes | None = None


@dataclass(eq=False)
class FdeSpec:
    cie: CieSpec
    pc_begin: int
    pc_range: int
    lsda: int | None = None
    instructions: list = field(default_factory=list)
    dwarf64: bool = False
    segment_selector: int = 0
    #: override the FDE augmentation data (with 'z'); None: built from the CIE's 'L'
    augmentation_data: bytes | None = None
    align: int = 1
    #: replace the CIE pointer field's value (to build broken references)
    cie_pointer_override: int | None = None


@dataclass(eq=False)
class Terminator:
    """A zero length field (LSB 5.0 §10.6.1: ends .eh_frame)."""


class FrameSection:
    """Entries of one .eh_frame (kind EH_FRAME) or .debug_frame (DEBUG_FRAME) section at svma
    `address`. `build()` returns the bytes; `offsets[entry]` the offset of each entry."""

    def __init__(self, kind: int, address: int = 0, *, address_size: int = 8,
                 bases: Bases = Bases()) -> None:
        self.kind = kind
        self.address = address
        self.address_size = address_size
        self.bases = bases
        self.entries: list = []
        self.offsets: dict = {}

    # -- adding entries
    def cie(self, **fields) -> CieSpec:
        spec = CieSpec(**fields)
        self.entries.append(spec)
        return spec

    def fde(self, cie: CieSpec, **fields) -> FdeSpec:
        spec = FdeSpec(cie=cie, **fields)
        self.entries.append(spec)
        return spec

    def terminator(self) -> None:
        self.entries.append(Terminator())

    # -- layout
    def _cie_address_size(self, cie: CieSpec) -> int:
        if cie.version >= 4 and cie.address_size is not None:
            return cie.address_size
        return self.address_size

    def _instructions(self, items: list, start_address: int, cie: CieSpec, pc_begin: int) -> bytes:
        out = bytearray()
        for item in items:
            if isinstance(item, list):
                out += self._instructions(item, start_address + len(out), cie, pc_begin)
            elif isinstance(item, Pointer):
                encoding = cie.fde_encoding if item.encoding is None else item.encoding
                if "R" not in cie.augmentation and item.encoding is None:
                    encoding = PE_absptr
                out += encode_pointer(encoding, item.value, start_address + len(out),
                                      self._cie_address_size(cie), self.bases)
            else:
                out += item
        return bytes(out)

    def _header(self, dwarf64: bool, body_length: int) -> bytes:
        if dwarf64:
            return b"\xff\xff\xff\xff" + _fixed(body_length, 8, False)
        return _fixed(body_length, 4, False)

    def _pad(self, body: bytearray, header_size: int, align: int) -> None:
        while (header_size + len(body)) % align:
            body.append(0)  # DW_CFA_nop

    def _cie_bytes(self, cie: CieSpec, offset: int) -> bytes:
        header_size = 12 if cie.dwarf64 else 4
        id_size = 8 if cie.dwarf64 else 4
        if self.kind == EH_FRAME:
            cie_id = 0
        else:
            cie_id = (1 << (8 * id_size)) - 1  # DWARF 5 §7.24: 0xffffffff / 0xffffffffffffffff
        body = bytearray(_fixed(cie_id, id_size, False))
        body.append(cie.version)
        body += cie.augmentation.encode() + b"\x00"
        if cie.augmentation == "eh":
            body += _fixed(cie.eh_data, self.address_size, False)
        if cie.version >= 4:
            body.append(self._cie_address_size(cie))
            body.append(cie.segment_size)
        body += uleb128(cie.code_align)
        body += sleb128(cie.data_align)
        if cie.return_address_bytes is not None:
            body += cie.return_address_bytes
        elif cie.version == 1:
            body.append(cie.return_address_column)  # DWARF 2 / version 1: a ubyte
        else:
            body += uleb128(cie.return_address_column)
        if cie.augmentation.startswith("z"):
            if cie.augmentation_data is not None:
                data = cie.augmentation_data
            else:
                data = bytearray()
                # the data's address: after the length ULEB, whose size depends on the data; the
                # augmentation data of CIEs built here is always < 128 bytes (1-byte length)
                data_address = self.address + offset + header_size + len(body) + 1
                for letter in cie.augmentation[1:]:
                    if letter == "P":
                        data.append(cie.personality_encoding)
                        data += encode_pointer(cie.personality_encoding, cie.personality,
                                               data_address + len(data),
                                               self._cie_address_size(cie), self.bases)
                    elif letter == "L":
                        data.append(cie.lsda_encoding)
                    elif letter == "R":
                        data.append(cie.fde_encoding)
                    elif letter in "SB":
                        pass
                    else:
                        raise ValueError(f"builder has no data for augmentation letter {letter!r}")
                assert len(data) < 128
            body += uleb128(len(data)) + data
        body += self._instructions(cie.instructions, self.address + offset + header_size + len(body),
                                   cie, 0)
        self._pad(body, header_size, cie.align)
        return self._header(cie.dwarf64, len(body)) + bytes(body)

    def _fde_bytes(self, fde: FdeSpec, offset: int, cie_offset: int) -> bytes:
        cie = fde.cie
        header_size = 12 if fde.dwarf64 else 4
        id_size = 8 if fde.dwarf64 else 4
        if fde.cie_pointer_override is not None:
            pointer = fde.cie_pointer_override
        elif self.kind == EH_FRAME:
            # LSB 5.0 §10.6.1.2: offset from the CIE pointer field back to the CIE
            pointer = offset + header_size - cie_offset
        else:
            pointer = cie_offset  # DWARF 5 §6.4.1: a section offset
        body = bytearray(_fixed(pointer & ((1 << (8 * id_size)) - 1), id_size, False))
        address_size = self._cie_address_size(cie)
        if cie.version >= 4 and cie.segment_size:
            body += _fixed(fde.segment_selector, cie.segment_size, False)
        encoding = cie.fde_encoding if "R" in cie.augmentation else PE_absptr
        field_address = self.address + offset + header_size + len(body)
        body += encode_pointer(encoding, fde.pc_begin, field_address, address_size, self.bases)
        # LSB 5.0 §10.6.1.2: the address range has the encoding's format, never its application
        body += encode_pointer(encoding & 0x0F, fde.pc_range, 0, address_size, self.bases)
        if cie.augmentation.startswith("z"):
            if fde.augmentation_data is not None:
                data = fde.augmentation_data
            elif "L" in cie.augmentation and fde.lsda is not None:
                data_address = self.address + offset + header_size + len(body) + 1
                data = encode_pointer(cie.lsda_encoding, fde.lsda, data_address, address_size,
                                      Bases(self.bases.text, self.bases.data, fde.pc_begin))
            else:
                data = b""
            assert len(data) < 128
            body += uleb128(len(data)) + data
        body += self._instructions(fde.instructions, self.address + offset + header_size + len(body),
                                   cie, fde.pc_begin)
        self._pad(body, header_size, fde.align)
        return self._header(fde.dwarf64, len(body)) + bytes(body)

    def build(self) -> bytes:
        # Two passes: the first finds every entry's offset (CIE pointers are fixed-size, so sizes
        # do not depend on where the CIEs land), the second writes the final pointers.
        for _ in range(2):
            out = bytearray()
            offsets = {}
            for entry in self.entries:
                offsets[entry] = len(out)
                if isinstance(entry, Terminator):
                    out += b"\x00\x00\x00\x00"
                elif isinstance(entry, CieSpec):
                    out += self._cie_bytes(entry, len(out))
                else:
                    out += self._fde_bytes(entry, len(out), self.offsets.get(entry.cie, 0))
            self.offsets = offsets
        return bytes(out)


def parse_section(builder: FrameSection, **kwargs):
    """Build the bytes and parse them with fastunwind.cfi.CfiSection (strict unless told)."""
    from fastunwind.cfi import CfiSection

    data = builder.build()
    return CfiSection(data, builder.kind, builder.address, address_size=builder.address_size,
                      text_base=builder.bases.text, data_base=builder.bases.data, **kwargs)
