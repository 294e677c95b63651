"""DWARF 5 Appendix D.6 "Call Frame Information Example", byte for byte.

The example machine (D.6): 4-byte instructions, byte addresses, eight 4-byte registers R0-R7 (R0
always 0, R1 holds the return address on call, R2-R3 scratch, R4-R6 preserved, R7 the stack pointer)
and R8 the return address column; the CFA is R7's value at the call. Function `foo` allocates a
frame of <fs> bytes; the spec leaves <fs> symbolic, we use 12 (as pyelftools' own copy of this
example does) so DW_CFA_def_cfa_offset(<fs>) is the two bytes 0e 0c.

Figure D.74 (the CIE, version 4 with address and segment sizes) and Figure D.75 (the FDE) are
encoded below from the figures' listings, not with the builder, so the layout is checked too;
Figure D.73 is the expected table:

    Location  CFA       R0 R1 R2 R3 R4   R5 R6   R7 R8
    foo       [R7]+0    s  u  u  u  s    s  s    s  r1
    foo+4     [R7]+fs   s  u  u  u  s    s  s    s  r1
    foo+8     [R7]+fs   s  u  u  u  s    s  s    s  c-4
    foo+12    [R7]+fs   s  u  u  u  s    s  c-8  s  c-4
    foo+16    [R6]+fs   s  u  u  u  s    s  c-8  s  c-4
    foo+20    [R6]+fs   s  u  u  u  c-12 s  c-8  s  c-4
    ...
    foo+64    [R6]+fs   s  u  u  u  c-12 s  c-8  s  c-4
    foo+68    [R6]+fs   s  u  u  u  s    s  c-8  s  c-4
    foo+72    [R7]+fs   s  u  u  u  s    s  s    s  c-4
    foo+76    [R7]+fs   s  u  u  u  s    s  s    s  r1
    foo+80    [R7]+0    s  u  u  u  s    s  s    s  r1

(s = same value, u = undefined, cN = saved at CFA+N, rN = in register N.)

The FDE of Figure D.75 advances by DW_CFA_advance_loc(11) (= 44 bytes) from foo+20, so its
DW_CFA_restore(4) takes effect at foo+64, and every epilogue change lands 4 bytes (one instruction)
before the row Figure D.73 shows it in: the figures disagree with each other by one
instruction there (advance_loc(12) would reproduce the table). The test checks the prologue rows
against Figure D.73 exactly and the epilogue rows against what the FDE's bytes say, and states the
one-instruction shift explicitly.
"""

from __future__ import annotations

import struct

from fastunwind.cfi import CfiSection

from tests.support.cfi_eval import DEBUG_FRAME, SAME, UNDEFINED, at, cfa, in_register

FS = 12
FOO = 0x1000

CIE = (
    struct.pack("<I", 36)          # cie      length
    + b"\xff\xff\xff\xff"          # cie+4    CIE_id
    + b"\x04"                      # cie+8    version
    + b"\x00"                      # cie+9    augmentation ""
    + b"\x04"                      # cie+10   address size
    + b"\x00"                      # cie+11   segment size
    + b"\x04"                      # cie+12   code_alignment_factor: 4-byte instructions
    + b"\x7c"                      # cie+13   data_alignment_factor: -4 (SLEB128)
    + b"\x08"                      # cie+14   R8 is the return address column
    + b"\x0c\x07\x00"              # cie+15   DW_CFA_def_cfa (7, 0): CFA = [R7]+0
    + b"\x08\x00"                  # cie+18   DW_CFA_same_value (0): R0 not modified (=0)
    + b"\x07\x01"                  # cie+20   DW_CFA_undefined (1): R1 scratch
    + b"\x07\x02"                  # cie+22   DW_CFA_undefined (2): R2 scratch
    + b"\x07\x03"                  # cie+24   DW_CFA_undefined (3): R3 scratch
    + b"\x08\x04"                  # cie+26   DW_CFA_same_value (4): R4 preserve
    + b"\x08\x05"                  # cie+28   DW_CFA_same_value (5): R5 preserve
    + b"\x08\x06"                  # cie+30   DW_CFA_same_value (6): R6 preserve
    + b"\x08\x07"                  # cie+32   DW_CFA_same_value (7): R7 preserve
    + b"\x09\x08\x01"              # cie+34   DW_CFA_register (8, 1): R8 is in R1
    + b"\x00\x00\x00"              # cie+37   DW_CFA_nop x3: padding to cie+40
)

FDE = (
    struct.pack("<I", 40)          # fde      length
    + struct.pack("<I", 0)         # fde+4    CIE_ptr: the CIE at offset 0
    + struct.pack("<I", FOO)       # fde+8    initial_location
    + struct.pack("<I", 84)        # fde+12   address_range
    + b"\x41"                      # fde+16   DW_CFA_advance_loc(1)
    + bytes([0x0E, FS])            # fde+17   DW_CFA_def_cfa_offset(<fs>)
    + b"\x41"                      # fde+19   DW_CFA_advance_loc(1)
    + b"\x88\x01"                  # fde+20   DW_CFA_offset(8, 1)
    + b"\x41"                      # fde+22   DW_CFA_advance_loc(1)
    + b"\x86\x02"                  # fde+23   DW_CFA_offset(6, 2)
    + b"\x41"                      # fde+25   DW_CFA_advance_loc(1)
    + b"\x0d\x06"                  # fde+26   DW_CFA_def_cfa_register(6)
    + b"\x41"                      # fde+28   DW_CFA_advance_loc(1)
    + b"\x84\x03"                  # fde+29   DW_CFA_offset(4, 3)
    + b"\x4b"                      # fde+31   DW_CFA_advance_loc(11)
    + b"\xc4"                      # fde+32   DW_CFA_restore(4)
    + b"\x41"                      # fde+33   DW_CFA_advance_loc(1)
    + b"\xc6"                      # fde+34   DW_CFA_restore(6)
    + b"\x0d\x07"                  # fde+35   DW_CFA_def_cfa_register(7)
    + b"\x41"                      # fde+37   DW_CFA_advance_loc(1)
    + b"\xc8"                      # fde+38   DW_CFA_restore(8)
    + b"\x41"                      # fde+39   DW_CFA_advance_loc(1)
    + b"\x0e\x00"                  # fde+40   DW_CFA_def_cfa_offset(0)
    + b"\x00\x00"                  # fde+42   DW_CFA_nop x2: padding to fde+44
)

s, u = SAME, UNDEFINED
c = at


def r(register):
    return in_register(register)


# Figure D.73, row by row: (location, CFA rule, rules of R0..R8)
FIGURE_D73 = [
    (FOO + 0, cfa(7, 0), [s, u, u, u, s, s, s, s, r(1)]),
    (FOO + 4, cfa(7, FS), [s, u, u, u, s, s, s, s, r(1)]),
    (FOO + 8, cfa(7, FS), [s, u, u, u, s, s, s, s, c(-4)]),
    (FOO + 12, cfa(7, FS), [s, u, u, u, s, s, c(-8), s, c(-4)]),
    (FOO + 16, cfa(6, FS), [s, u, u, u, s, s, c(-8), s, c(-4)]),
    (FOO + 20, cfa(6, FS), [s, u, u, u, c(-12), s, c(-8), s, c(-4)]),
    (FOO + 64, cfa(6, FS), [s, u, u, u, c(-12), s, c(-8), s, c(-4)]),
    (FOO + 68, cfa(6, FS), [s, u, u, u, s, s, c(-8), s, c(-4)]),
    (FOO + 72, cfa(7, FS), [s, u, u, u, s, s, s, s, c(-4)]),
    (FOO + 76, cfa(7, FS), [s, u, u, u, s, s, s, s, r(1)]),
    (FOO + 80, cfa(7, 0), [s, u, u, u, s, s, s, s, r(1)]),
]


def parse():
    data = CIE + FDE
    assert len(CIE) == 40 and len(FDE) == 44  # cie+40 and fde+44 in the figures
    # the CIE's address size (4) governs the FDE; the section's own setting is the ELF class
    return CfiSection(data, DEBUG_FRAME, 0, address_size=8)


def as_table(section, fde):
    return [(row.start, row.end, row.cfa, [row.registers[column] for column in range(9)])
            for row in section.rows(fde)]


def test_cie_fields_of_figure_d74():
    section = parse()
    (cie,) = section.cies()
    assert (cie.version, cie.augmentation, cie.address_size) == (4, "", 4)
    assert (cie.code_alignment, cie.data_alignment, cie.return_address_column) == (4, -4, 8)
    (fde,) = section.fdes()
    assert (fde.pc_begin, fde.pc_end, fde.cie.offset) == (FOO, FOO + 84, 0)


def test_prologue_rows_match_figure_d73():
    section = parse()
    (fde,) = section.fdes()
    table = as_table(section, fde)
    # foo .. foo+20: one row per instruction, exactly as the figure shows
    for (location, cfa_rule, registers), (start, _, got_cfa, got_registers) in zip(FIGURE_D73[:6], table[:6]):
        assert (start, got_cfa, got_registers) == (location, cfa_rule, registers)


def test_epilogue_rows_follow_the_fde_bytes():
    """The FDE's advance_loc(11) puts each epilogue change one instruction (4 bytes) before the
    row of Figure D.73 that shows it; otherwise the rules are the figure's."""
    section = parse()
    (fde,) = section.fdes()
    table = as_table(section, fde)
    assert [row[0] - FOO for row in table] == [0, 4, 8, 12, 16, 20, 64, 68, 72, 76]
    assert table[-1][1] == FOO + 84
    # row k of the FDE (from foo+64 on) == figure row for location + 4
    figure = {location: (cfa_rule, registers) for location, cfa_rule, registers in FIGURE_D73}
    for start, _, got_cfa, got_registers in table[6:]:
        assert (got_cfa, got_registers) == figure[start + 4], hex(start - FOO)
    # the prologue/body row foo+20 lasts until foo+64: 11 * code_alignment_factor bytes
    assert table[5][:2] == (FOO + 20, FOO + 64)


def test_lookup_inside_the_body():
    section = parse()
    fde, row = section.lookup(FOO + 40)
    assert (row.start, row.end) == (FOO + 20, FOO + 64)
    assert row.cfa == cfa(6, FS)
    assert row.registers[4] == c(-12) and row.registers[8] == c(-4)
