"""Hand-built pointer encodings and LEB128 numbers, decoded by CfiSection.

Each case builds a tiny .eh_frame (or .debug_frame) with `cfi_builder`, parses it and checks the
decoded FDE fields (pc_begin, pc_end, lsda) and CIE fields (personality and encodings).

References: LSB 5.0 §10.5.1 (DW_EH_PE_* tables 10-1/10-2), §10.6.1 (CIE/FDE fields of .eh_frame);
DWARF 5 §7.6 (LEB128, tables 7.7 and 7.8).
"""

from __future__ import annotations

import struct

import pytest

from fastunwind.errors import CfiError

from tests.support.cfi_builder import (
    DEBUG_FRAME, EH_FRAME, PE_absptr, PE_aligned, PE_datarel, PE_funcrel, PE_indirect, PE_omit,
    PE_pcrel, PE_sdata2, PE_sdata4, PE_sdata8, PE_sleb128, PE_textrel, PE_udata2, PE_udata4,
    PE_udata8, PE_uleb128, Bases, FrameSection, advance_loc, def_cfa, def_cfa_offset,
    def_cfa_offset_sf, encode_pointer, offset, parse_section, set_loc, sleb128, uleb128,
)

SECTION = 0x2000
BASES = Bases(text=0x1000, data=0x3000)
CIE_INITIAL = [def_cfa(7, 8), offset(16, 1)]  # CFA = rsp+8, return address at CFA-8


def only_fde(section):
    fdes = list(section.fdes())
    assert len(fdes) == 1, fdes
    return fdes[0]


# ---- FDE initial location / address range -------------------------------------------------------

# (encoding, pc_begin, pc_range): every DW_EH_PE format, and each application that x86-64 toolchains
# use for the initial location. The range always has the format alone (LSB 5.0 §10.6.1.2).
FDE_ENCODINGS = [
    pytest.param(PE_pcrel | PE_sdata4, 0x1000, 0x40, id="pcrel|sdata4 (0x1b, what ld emits)"),
    pytest.param(PE_pcrel | PE_sdata4, 0x7FFF0000, 0x10, id="pcrel|sdata4 forward"),
    pytest.param(PE_absptr, 0xFFFF_8000_0000_1000, 0x40, id="absptr (8 bytes)"),
    pytest.param(PE_udata8, 0x1234_5678_9ABC, 0x123, id="udata8"),
    pytest.param(PE_udata4, 0x8000_1000, 0x40, id="udata4 above 2^31"),
    pytest.param(PE_udata2, 0xFFF0, 0x8, id="udata2"),
    pytest.param(PE_sdata4, (-0x10) & (2**64 - 1), 0x8, id="sdata4 negative (sign-extended)"),
    pytest.param(PE_pcrel | PE_sdata2, SECTION - 0x100, 0x20, id="pcrel|sdata2"),
    pytest.param(PE_pcrel | PE_sdata8, 0x1000, 0x1_0000_0000, id="pcrel|sdata8, 4 GiB range"),
    pytest.param(PE_uleb128, 0x1000, 300, id="uleb128"),
    pytest.param(PE_pcrel | PE_sleb128, 0x1000, 0x40, id="pcrel|sleb128"),
    pytest.param(PE_datarel | PE_sdata4, 0x1000, 0x40, id="datarel|sdata4 (base .got)"),
    pytest.param(PE_textrel | PE_udata4, 0x1100, 0x40, id="textrel|udata4 (base .text)"),
]


@pytest.mark.parametrize("encoding, pc_begin, pc_range", FDE_ENCODINGS)
def test_fde_initial_location_encodings(encoding, pc_begin, pc_range):
    builder = FrameSection(EH_FRAME, SECTION, bases=BASES)
    cie = builder.cie(augmentation="zR", fde_encoding=encoding, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=pc_begin, pc_range=pc_range, instructions=[advance_loc(1), def_cfa_offset(16)])
    section = parse_section(builder)
    fde = only_fde(section)
    assert (fde.pc_begin, fde.pc_end) == (pc_begin, (pc_begin + pc_range) % 2**64)
    assert fde.cie.fde_encoding == encoding
    # the instructions after a variable-length pointer were found: two rows
    rows = section.rows(fde)
    assert [row.start for row in rows] == [pc_begin, pc_begin + 1]
    assert rows[1].cfa.offset == 16


def test_fde_aligned_encoding_skips_to_the_next_address_boundary():
    """DW_EH_PE_aligned (0x50): the value starts at the next address_size boundary of its svma."""
    builder = FrameSection(EH_FRAME, SECTION)
    # a CIE of odd size so that the FDE's initial location field is misaligned
    cie = builder.cie(augmentation="zR", fde_encoding=PE_aligned, instructions=CIE_INITIAL + [b"\x00"])
    fde_spec = builder.fde(cie, pc_begin=0x401000, pc_range=0x40, instructions=[advance_loc(2), def_cfa_offset(16)])
    data = builder.build()
    field = SECTION + builder.offsets[fde_spec] + 8
    assert field % 8 != 0, "the case must exercise the padding"
    padded = field + (8 - field % 8)
    assert struct.unpack_from("<Q", data, padded - SECTION)[0] == 0x401000
    section = parse_section(builder)
    fde = only_fde(section)
    assert (fde.pc_begin, fde.pc_end) == (0x401000, 0x401040)
    assert [row.start for row in section.rows(fde)] == [0x401000, 0x401002]


def test_fde_indirect_initial_location_resolves_through_segments():
    """DW_EH_PE_indirect (0x80): the encoded value is the address of a pointer-sized slot."""
    slot = 0x5008
    segment = (0x5000, bytes(8) + struct.pack("<Q", 0x401230) + bytes(8))
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zR", fde_encoding=PE_indirect | PE_pcrel | PE_sdata4, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=slot, pc_range=0x10)
    fde = only_fde(parse_section(builder, segments=[segment]))
    assert (fde.pc_begin, fde.pc_end) == (0x401230, 0x401240)


def test_fde_indirect_initial_location_outside_segments_is_an_error():
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zR", fde_encoding=PE_indirect | PE_udata8, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x9000, pc_range=0x10)
    with pytest.raises(CfiError, match=r"FDE at \.eh_frame\+0x[0-9a-f]+: indirect initial location"):
        parse_section(builder, segments=[(0x5000, bytes(16))])


def test_set_loc_operand_uses_the_fde_encoding_relative_to_its_own_field():
    """DW_CFA_set_loc's operand is encoded like the FDE's initial location (LSB 5.0 §10.6.1.1), so
    with pcrel its base is the operand's own address, not the FDE's."""
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zR", fde_encoding=PE_pcrel | PE_sdata4, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x100,
                instructions=[set_loc(0x1010), def_cfa_offset(16), set_loc(0x10F0), def_cfa_offset(8)])
    section = parse_section(builder)
    rows = section.rows(only_fde(section))
    assert [(row.start, row.end, row.cfa.offset) for row in rows] == [
        (0x1000, 0x1010, 8), (0x1010, 0x10F0, 16), (0x10F0, 0x1100, 8)]


def test_set_loc_udata8_in_a_cie_without_augmentation():
    """Without 'R' the FDE encoding is DW_EH_PE_absptr: address_size bytes (DWARF 5 §6.4.2.1)."""
    builder = FrameSection(DEBUG_FRAME, 0)
    cie = builder.cie(version=4, augmentation="", address_size=8, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x7000_0000_0000, pc_range=0x100,
                instructions=[set_loc(0x7000_0000_0080), def_cfa_offset(32)])
    section = parse_section(builder)
    rows = section.rows(only_fde(section))
    assert [(row.start, row.cfa.offset) for row in rows] == [(0x7000_0000_0000, 8), (0x7000_0000_0080, 32)]


# ---- LSDA ('L') ------------------------------------------------------------------------------------

# (lsda encoding, lsda value): the FDE's augmentation data holds the LSDA pointer.
LSDA_ENCODINGS = [
    pytest.param(PE_pcrel | PE_sdata4, 0x3010, id="pcrel|sdata4 (0x1b)"),
    pytest.param(PE_absptr, 0x40_3000, id="absptr"),
    pytest.param(PE_udata4, 0x40_3000, id="udata4"),
    pytest.param(PE_udata8, 0x7F00_0040_3000, id="udata8"),
    pytest.param(PE_datarel | PE_sdata4, 0x3100, id="datarel|sdata4"),
    pytest.param(PE_textrel | PE_udata4, 0x1080, id="textrel|udata4"),
    pytest.param(PE_funcrel | PE_udata4, 0x1000 + 0x24, id="funcrel|udata4 (base: pc_begin)"),
    pytest.param(PE_funcrel | PE_sleb128, 0x1000 - 0x30, id="funcrel|sleb128 negative"),
    pytest.param(PE_pcrel | PE_sdata8, 0x3010, id="pcrel|sdata8"),
]


@pytest.mark.parametrize("lsda_encoding, lsda", LSDA_ENCODINGS)
def test_lsda_encodings(lsda_encoding, lsda):
    builder = FrameSection(EH_FRAME, SECTION, bases=BASES)
    cie = builder.cie(augmentation="zLR", lsda_encoding=lsda_encoding, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x40, lsda=lsda, instructions=[advance_loc(1), def_cfa_offset(16)])
    section = parse_section(builder)
    fde = only_fde(section)
    assert fde.lsda == lsda
    assert fde.cie.lsda_encoding == lsda_encoding
    # the FDE's augmentation length was honoured: the instructions decode
    assert [row.cfa.offset for row in section.rows(fde)] == [8, 16]


def test_lsda_indirect_resolves_through_segments():
    slot = 0x6010
    segment = (0x6000, bytes(16) + struct.pack("<Q", 0x40_5000))
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zLR", lsda_encoding=PE_indirect | PE_pcrel | PE_sdata4, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x40, lsda=slot)
    assert only_fde(parse_section(builder, segments=[segment])).lsda == 0x40_5000


def test_lsda_absent_without_L_and_with_omit():
    builder = FrameSection(EH_FRAME, SECTION)
    plain = builder.cie(augmentation="zR", instructions=CIE_INITIAL)
    builder.fde(plain, pc_begin=0x1000, pc_range=0x10)
    omitted = builder.cie(augmentation="zLR", lsda_encoding=PE_omit, instructions=CIE_INITIAL)
    builder.fde(omitted, pc_begin=0x1010, pc_range=0x10, augmentation_data=b"")
    section = parse_section(builder)
    fdes = list(section.fdes())
    assert [fde.lsda for fde in fdes] == [None, None]
    assert fdes[1].cie.lsda_encoding == PE_omit


def test_fde_with_L_but_empty_augmentation_data_has_no_lsda():
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zLR", instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x10, augmentation_data=b"")
    assert only_fde(parse_section(builder)).lsda is None


@pytest.mark.parametrize("lsda_encoding, stored", [
    pytest.param(PE_pcrel | PE_sdata4, b"\0\0\0\0", id="pcrel|sdata4"),
    pytest.param(PE_absptr, bytes(8), id="absptr"),
])
def test_zero_lsda_pointer_means_no_lsda(lsda_encoding, stored):
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zLR", lsda_encoding=lsda_encoding, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x10, augmentation_data=stored)
    assert only_fde(parse_section(builder)).lsda is None


# ---- personality ('P') --------------------------------------------------------------------------

PERSONALITY_SLOT = 0x6008
PERSONALITY_TARGET = 0x40_1230
PERSONALITY_SEGMENT = (0x6000, bytes(8) + struct.pack("<Q", PERSONALITY_TARGET) + bytes(8))

# (personality encoding, value the CIE stores the pointer as, decoded personality)
PERSONALITY_ENCODINGS = [
    pytest.param(PE_indirect | PE_pcrel | PE_sdata4, PERSONALITY_SLOT, PERSONALITY_TARGET,
                 id="indirect|pcrel|sdata4 (0x9b, GCC -fPIC)"),
    pytest.param(PE_indirect | PE_absptr, PERSONALITY_SLOT, PERSONALITY_TARGET, id="indirect|absptr"),
    pytest.param(PE_indirect | PE_datarel | PE_sdata4, PERSONALITY_SLOT, PERSONALITY_TARGET,
                 id="indirect|datarel|sdata4"),
    pytest.param(PE_absptr, 0x40_2000, 0x40_2000, id="absptr"),
    pytest.param(PE_udata8, 0x40_2000, 0x40_2000, id="udata8"),
    pytest.param(PE_udata4, 0x40_2000, 0x40_2000, id="udata4 (GCC -fno-pic 0x03)"),
    pytest.param(PE_pcrel | PE_sdata4, 0x40_2000, 0x40_2000, id="pcrel|sdata4"),
    pytest.param(PE_aligned, 0x40_2000, 0x40_2000, id="aligned"),
]


@pytest.mark.parametrize("encoding, stored, expected", PERSONALITY_ENCODINGS)
def test_personality_encodings(encoding, stored, expected):
    builder = FrameSection(EH_FRAME, SECTION, bases=Bases(text=0x1000, data=0x6000))
    cie = builder.cie(augmentation="zPLR", personality_encoding=encoding, personality=stored,
                      instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x40, lsda=0x3000, instructions=[advance_loc(3), def_cfa_offset(16)])
    section = parse_section(builder, segments=[PERSONALITY_SEGMENT])
    fde = only_fde(section)
    assert fde.cie.personality == expected
    assert fde.cie.personality_encoding == encoding
    # after the personality pointer come 'L' and 'R': both decoded right
    assert fde.lsda == 0x3000
    assert (fde.pc_begin, fde.pc_end) == (0x1000, 0x1040)
    assert [row.cfa.offset for row in section.rows(fde)] == [8, 16]


def test_personality_absent_without_P():
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zR", instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x10)
    fde = only_fde(parse_section(builder))
    assert fde.cie.personality is None
    assert fde.cie.personality_encoding == PE_omit


# ---- LEB128 (DWARF 5 §7.6) ------------------------------------------------------------------------

# DWARF 5 table 7.7 "Examples of unsigned LEB128 encodings"
ULEB_EXAMPLES = [(2, b"\x02"), (127, b"\x7f"), (128, b"\x80\x01"), (129, b"\x81\x01"),
                 (130, b"\x82\x01"), (12857, b"\xb9\x64")]
# DWARF 5 table 7.8 "Examples of signed LEB128 encodings"
SLEB_EXAMPLES = [(2, b"\x02"), (-2, b"\x7e"), (127, b"\xff\x00"), (-127, b"\x81\x7f"),
                 (128, b"\x80\x01"), (-128, b"\x80\x7f"), (129, b"\x81\x01"), (-129, b"\xff\x7e")]


def test_builder_leb128_matches_the_spec_tables():
    assert [uleb128(value) for value, _ in ULEB_EXAMPLES] == [encoded for _, encoded in ULEB_EXAMPLES]
    assert [sleb128(value) for value, _ in SLEB_EXAMPLES] == [encoded for _, encoded in SLEB_EXAMPLES]


def _cfa_offsets(instructions, data_align=1):
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zR", data_align=data_align, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x100, instructions=instructions)
    section = parse_section(builder)
    return [row.cfa.offset for row in section.rows(only_fde(section))]


def test_uleb128_operands_decode_like_the_spec_tables():
    """DW_CFA_def_cfa_offset takes a ULEB128 (DWARF 5 §6.4.2.2); each spec example in turn,
    plus a padded (non-canonical) form and the largest 64-bit values."""
    instructions = []
    for value, encoded in ULEB_EXAMPLES:
        instructions += [advance_loc(1), b"\x0e" + encoded]
    instructions += [advance_loc(1), b"\x0e\x82\x80\x80\x00"]  # 2, padded to 4 bytes
    instructions += [advance_loc(1), def_cfa_offset(2**40 + 5)]
    instructions += [advance_loc(1), b"\x0e" + uleb128(2**63 - 1)]
    assert _cfa_offsets(instructions) == [8] + [v for v, _ in ULEB_EXAMPLES] + [2, 2**40 + 5, 2**63 - 1]


def test_sleb128_operands_decode_like_the_spec_tables():
    """DW_CFA_def_cfa_offset_sf takes an SLEB128 factored by data_align (DWARF 5 §6.4.2.2);
    with data_align 1 the offset is the number itself."""
    instructions = []
    for value, encoded in SLEB_EXAMPLES:
        instructions += [advance_loc(1), b"\x13" + encoded]
    instructions += [advance_loc(1), b"\x13\xfe\xff\xff\x7f"]  # -2 padded to 4 bytes
    instructions += [advance_loc(1), def_cfa_offset_sf(-(2**62))]
    assert _cfa_offsets(instructions) == [8] + [v for v, _ in SLEB_EXAMPLES] + [-2, -(2**62)]


def test_uleb128_wider_than_64_bits_is_an_error():
    # 2**64 needs 65 bits: ten 0x80 continuation bytes then 0x02 set bit 64 (past the limit)
    too_wide = b"\x0e" + b"\x80" * 9 + b"\x02"
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zR", instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x10, instructions=[too_wide])
    with pytest.raises(CfiError, match=r"DW_CFA_def_cfa_offset: operands truncated or too large"):
        parse_section(builder)


def test_builder_pointer_encoding_round_trips():
    """The builder's own encoder, checked against hand-computed bytes (so failures above point at
    the library, not at the builder)."""
    assert encode_pointer(PE_pcrel | PE_sdata4, 0x1000, 0x2010, 8) == struct.pack("<i", -0x1010)
    assert encode_pointer(PE_udata2, 0xFFF0, 0, 8) == b"\xf0\xff"
    assert encode_pointer(PE_absptr, 0x1122, 0, 4) == b"\x22\x11\x00\x00"
    assert encode_pointer(PE_aligned, 0x55, 0x1003, 8) == bytes(5) + struct.pack("<Q", 0x55)
    assert encode_pointer(PE_datarel | PE_sdata4, 0x3100, 0, 8, Bases(data=0x3000)) == struct.pack("<i", 0x100)
    assert encode_pointer(PE_funcrel | PE_uleb128, 0x1024, 0, 8, Bases(function=0x1000)) == b"\x24"
    assert encode_pointer(PE_omit, 0x1234, 0, 8) == b""


def test_unresolved_indirect_personality_is_not_reported_as_the_slot_address():
    builder = FrameSection(EH_FRAME, SECTION)
    cie = builder.cie(augmentation="zPR", personality_encoding=PE_indirect | PE_pcrel | PE_sdata4,
                      personality=PERSONALITY_SLOT, instructions=CIE_INITIAL)
    builder.fde(cie, pc_begin=0x1000, pc_range=0x10)
    section = parse_section(builder, strict=False)  # no segments: the slot cannot be read
    personalities = [c.personality for c in section.cies()]
    assert personalities != [PERSONALITY_SLOT] or section.errors
