"""Evaluation errors and limits, and edge cases where the library's behaviour is open to doubt.

Errors must say what, where (section and entry offset in hex) and which value (STYLE.md habit 4);
an entry that fails leaves the other entries usable when `strict=False`.
"""

from __future__ import annotations

import pytest

from fastunwind import _core
from fastunwind.errors import CfiError, NoUnwindInfo

from tests.support.cfi_eval import (
    END, PC_BEGIN as P, RA, advance_loc, at, build, cfa, cfa_expr, def_cfa, def_cfa_expression, def_cfa_offset,
    def_cfa_offset_sf, def_cfa_register, evaluate, evaluate_section, expression, offset, offset_extended,
    parse_section, register, remember_state, restore_extended, restore_state, row, set_loc, undefined,
    uleb128,
)

FDE_AT = r"FDE at \.eh_frame\+0x[0-9a-f]+: "


def fails(instructions, pattern, **options):
    with pytest.raises(CfiError, match=pattern):
        parse_section(build(instructions, **options))


def test_restore_state_with_an_empty_stack():
    fails([restore_state()], FDE_AT + r"DW_CFA_restore_state with an empty state stack \(instruction at offset 0x[0-9a-f]+\)")


def test_remember_state_depth_limit():
    """FU_MAX_STATE_STACK (64) nested DW_CFA_remember_state are accepted, one more is a named error."""
    limit = _core.MAX_STATE_STACK
    rows = evaluate([remember_state()] * limit + [def_cfa_offset(16), advance_loc(1)] + [restore_state()] * limit)
    assert rows == [row(P, P + 1, cfa(7, 16), RA), row(P + 1, END, cfa(7, 8), RA)]
    fails([remember_state()] * (limit + 1), FDE_AT + rf"DW_CFA_remember_state nested deeper than {limit}")


@pytest.mark.parametrize("instruction, name", [
    (offset_extended(128, 1), "DW_CFA_offset_extended"),
    (restore_extended(200), "DW_CFA_restore_extended"),
    (undefined(128), "DW_CFA_undefined"),
    (expression(128, b"\x30"), "DW_CFA_expression"),
])
def test_register_columns_beyond_the_limit(instruction, name):
    limit = _core.MAX_COLUMNS
    fails([instruction], FDE_AT + rf"{name}: register \d+ exceeds the limit of {limit} columns")


def test_cfa_register_is_not_bounded_by_the_columns():
    """The CFA register is a number, not a rule column: any 16-bit register is kept (readelf prints
    such rows as "r200+8"); only a number that cannot be a register is an error."""
    assert evaluate([def_cfa(200, 8)]) == [row(P, END, cfa(200, 8), RA)]
    assert evaluate([def_cfa_register(1000)]) == [row(P, END, cfa(1000, 8), RA)]
    fails([def_cfa(70000, 8)], FDE_AT + r"DW_CFA_def_cfa: CFA register 70000 is not a register number")
    fails([def_cfa_register(2**40)], FDE_AT + r"DW_CFA_def_cfa_register: CFA register \d+ is not a register number")


def test_register_rule_source_beyond_the_limit():
    fails([register(3, 128)], FDE_AT + r"DW_CFA_register: register 128 exceeds the limit")


def test_highest_register_column_is_accepted():
    top = _core.MAX_COLUMNS - 1
    assert evaluate([offset_extended(top, 2)]) == [row(P, END, cfa(7, 8), {**RA, top: at(-16)})]


def test_def_cfa_offset_while_the_cfa_is_an_expression_changes_only_the_remembered_offset():
    """DWARF 5 §6.4.2.2 calls DW_CFA_def_cfa_offset valid only for a register+offset CFA; libgcc's
    execute_cfa_program sets cfa_offset and "deliberately" leaves cfa_how alone, so the CFA stays
    the expression and a later DW_CFA_def_cfa_register uses the new offset."""
    rows = evaluate([def_cfa_expression(b"\x77\x08"), advance_loc(1), def_cfa_offset(48), advance_loc(1),
                     def_cfa_offset_sf(-4), advance_loc(1), def_cfa_register(6)])
    assert [r[2] for r in rows] == [cfa_expr(b"\x77\x08")] * 3 + [cfa(6, 32)]


def test_unknown_opcode():
    fails([b"\x1c"], FDE_AT + r"unknown call frame instruction 0x1c \(instruction at offset 0x[0-9a-f]+\)")


def test_expression_length_overrunning_the_entry():
    fails([b"\x0f" + uleb128(200) + b"\x77\x08"], FDE_AT + r"DW_CFA_def_cfa_expression: expression length 0xc8 overruns the entry")


def test_malformed_cie_instructions_fail_its_fdes_only():
    builder = build([advance_loc(1)], cie_instructions=[restore_state()])
    with pytest.raises(CfiError, match=r"CIE at \.eh_frame\+0x0: DW_CFA_restore_state with an empty state stack"):
        parse_section(builder)
    section = parse_section(builder, strict=False)
    messages = [str(e) for e in section.errors]
    assert messages[0].startswith("CIE at .eh_frame+0x0:")
    assert "its CIE's initial instructions are malformed" in messages[1]


def test_a_bad_fde_leaves_the_others_usable():
    builder = build([advance_loc(1), def_cfa_offset(16)])
    cie = builder.entries[0]
    builder.fde(cie, pc_begin=0x2000, pc_range=0x10, instructions=[restore_state()])
    builder.fde(cie, pc_begin=0x3000, pc_range=0x10, instructions=[def_cfa_offset(32)])
    section = parse_section(builder, strict=False)
    assert len(section.errors) == 1 and "DW_CFA_restore_state" in str(section.errors[0])
    assert [f.pc_begin for f in section.fdes()] == [P, 0x3000]
    assert section.lookup(0x3004)[1].cfa == cfa(7, 32)
    with pytest.raises(NoUnwindInfo):
        section.lookup(0x2004)


def test_remember_state_does_not_leak_between_fdes():
    """Each FDE starts with an empty state stack: a remember_state left on the stack by one FDE
    cannot be restored by the next."""
    builder = build([remember_state(), def_cfa_offset(16)])
    builder.fde(builder.entries[0], pc_begin=0x2000, pc_range=0x10, instructions=[restore_state()])
    section = parse_section(builder, strict=False)
    assert len(section.errors) == 1 and "empty state stack" in str(section.errors[0])


# ---- doubtful behaviours, pinned down ------------------------------------------------------------------

def test_def_cfa_register_after_an_expression_keeps_the_earlier_offset():
    """After DW_CFA_def_cfa_expression, DW_CFA_def_cfa_register returns to register+offset with
    the offset of the last register+offset rule, as libgcc and readelf do (gas-built
    `.cfi_def_cfa_offset 16; .cfi_escape 0x0f,2,0x77,0x08; .cfi_def_cfa_register 6`: readelf -wF
    prints rbp+16). llvm-dwarfdump-14 instead rejects the sequence."""
    rows = evaluate([def_cfa_offset(16), advance_loc(1), def_cfa_expression(b"\x77\x08"), advance_loc(1),
                     def_cfa_register(6)])
    assert [r[2] for r in rows] == [cfa(7, 16), cfa_expr(b"\x77\x08"), cfa(6, 16)]


def test_remembered_cfa_offset_is_part_of_the_saved_state():
    """The offset kept behind a CFA expression is saved and restored with the rest of the state."""
    rows = evaluate([def_cfa(7, 16), def_cfa_expression(b"\x77\x08"), remember_state(), def_cfa_offset(32),
                     restore_state(), def_cfa_register(6)])
    assert rows == [row(P, END, cfa(6, 16), RA)]


def test_fde_starts_from_the_cie_remembered_cfa_offset():
    """A CIE that ends with a CFA expression still hands its last register+offset offset to the
    FDEs (libgcc copies the whole CIE state)."""
    rows = evaluate([def_cfa_register(6)], cie_instructions=[def_cfa(7, 24), offset(16, 1),
                                                             def_cfa_expression(b"\x77\x08")])
    assert rows == [row(P, END, cfa(6, 24), RA)]


def test_rows_stay_inside_the_fde_range():
    section, fde = evaluate_section([advance_loc(0x30), def_cfa_offset(16), advance_loc(0x30), def_cfa_offset(24)],
                                    pc_range=0x40)
    for r in section.rows(fde):
        assert fde.pc_begin <= r.start <= r.end <= fde.pc_end, r


def test_set_loc_backwards_is_rejected_or_rows_stay_sorted():
    builder = build(set_loc(P + 0x20) + [def_cfa_offset(16)] + set_loc(P + 0x10) + [def_cfa_offset(24)], pc_range=0x40)
    try:
        section = parse_section(builder)
    except CfiError as error:
        assert "DW_CFA_set_loc" in str(error)
        return
    (fde,) = section.fdes()
    starts = [r.start for r in section.rows(fde)]
    assert starts == sorted(starts)


def test_def_cfa_offset_without_a_cfa_rule_uses_register_0():
    """Pinned current behaviour (readelf prints the same "rax+16"; LLVM reports an error,
    DWARF 5 §6.4.2.2 calls it invalid): with no CFA rule from the CIE, DW_CFA_def_cfa_offset makes
    the CFA register 0 + offset."""
    assert evaluate([def_cfa_offset(16)], cie_instructions=[]) == [row(P, END, cfa(0, 16), {})]
