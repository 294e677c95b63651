"""Every call frame instruction of DWARF 5 §6.4.2, evaluated into rows, as a data table.

In the spirit of LLVM's DWARFDebugFrameTest (UnwindTable_DW_CFA_* tests: the expected rows for each
opcode), each case is one FDE's instructions over a CIE with the usual x86-64 initial rules
(CFA = rsp+8, return address at CFA-8) and the rows `CfiSection.rows(fde)` must produce.

Every case runs twice: in `.eh_frame` ("zR", pcrel|sdata4) and in `.debug_frame` (version 4, no
augmentation, absptr addresses): evaluation must not depend on the section flavour.

Reading the cases: P = pc_begin (0x1000), END = pc_begin + pc_range (0x1100); data_align is -8 unless
a case says otherwise, so a factored offset n means CFA - 8n; code_align is 1 unless stated.
"""

from __future__ import annotations

import pytest

from fastunwind.errors import NoUnwindInfo

from tests.support.cfi_eval import (
    DEBUG_FRAME, EH_FRAME, END, PC_BEGIN as P, RA, SAME, UNDEFINED, advance_loc, advance_loc1,
    advance_loc2, advance_loc4, at, cfa, cfa_expr, def_cfa, def_cfa_expression, def_cfa_offset,
    def_cfa_offset_sf, def_cfa_register, def_cfa_sf, evaluate, evaluate_section, expr, expression,
    gnu_args_size, gnu_negative_offset_extended, in_register, nop, offset, offset_extended,
    offset_extended_sf, regs, register, remember_state, restore, restore_extended, restore_state, row,
    same_value, set_loc, uleb128, undefined, val, val_expr, val_expression, val_offset, val_offset_sf,
)

CFA8 = cfa(7, 8)
EXPR_CFA = bytes([0x77, 0x08, 0x06])            # DW_OP_breg7 8; DW_OP_deref
EXPR_SLOT = bytes([0x70, 0x10])                 # DW_OP_breg0 16
EXPR_VALUE = bytes([0x77, 0x20, 0x23, 0x08])    # DW_OP_breg7 32; DW_OP_plus_uconst 8

# (id, FDE instructions, CIE options, expected rows)
CASES = [
    # -- row creation (§6.4.2.1) ---------------------------------------------------------------------
    ("no instructions: one row with the CIE's rules", [], {},
     [row(P, END, CFA8, RA)]),
    ("DW_CFA_advance_loc, code_align 4", [advance_loc(3), def_cfa_offset(16)], {"code_align": 4},
     [row(P, P + 12, CFA8, RA), row(P + 12, END, cfa(7, 16), RA)]),
    ("DW_CFA_advance_loc1, code_align 4", [advance_loc1(0x30), def_cfa_offset(16)],
     {"code_align": 4, "pc_range": 0x400},
     [row(P, P + 0xC0, CFA8, RA), row(P + 0xC0, P + 0x400, cfa(7, 16), RA)]),
    ("DW_CFA_advance_loc2, code_align 4", [advance_loc2(0x123), def_cfa_offset(16)],
     {"code_align": 4, "pc_range": 0x1000},
     [row(P, P + 0x48C, CFA8, RA), row(P + 0x48C, P + 0x1000, cfa(7, 16), RA)]),
    ("DW_CFA_advance_loc4, code_align 4", [advance_loc4(0x12345), def_cfa_offset(16)],
     {"code_align": 4, "pc_range": 0x100000},
     [row(P, P + 0x48D14, CFA8, RA), row(P + 0x48D14, P + 0x100000, cfa(7, 16), RA)]),
    ("advances accumulate",
     [advance_loc(1), def_cfa_offset(16), advance_loc1(2), def_cfa_offset(24),
      advance_loc2(3), def_cfa_offset(32), advance_loc4(4), def_cfa_offset(40)], {},
     [row(P, P + 1, CFA8, RA), row(P + 1, P + 3, cfa(7, 16), RA), row(P + 3, P + 6, cfa(7, 24), RA),
      row(P + 6, P + 10, cfa(7, 32), RA), row(P + 10, END, cfa(7, 40), RA)]),
    ("DW_CFA_set_loc", set_loc(P + 0x20) + [def_cfa_offset(16)] + set_loc(P + 0x80) + [def_cfa_offset(8)], {},
     [row(P, P + 0x20, CFA8, RA), row(P + 0x20, P + 0x80, cfa(7, 16), RA), row(P + 0x80, END, CFA8, RA)]),
    ("zero advance: two rows at one address",
     [advance_loc(2), def_cfa_offset(16), advance_loc(0), def_cfa_offset(24)], {},
     [row(P, P + 2, CFA8, RA), row(P + 2, P + 2, cfa(7, 16), RA), row(P + 2, END, cfa(7, 24), RA)]),
    # -- CFA definition (§6.4.2.2) ---------------------------------------------------------------------
    ("DW_CFA_def_cfa", [def_cfa(6, 16)], {}, [row(P, END, cfa(6, 16), RA)]),
    ("DW_CFA_def_cfa with a 3-byte ULEB128 offset", [def_cfa(7, 100000)], {}, [row(P, END, cfa(7, 100000), RA)]),
    ("DW_CFA_def_cfa_sf: offset factored by data_align", [def_cfa_sf(6, -2)], {},
     [row(P, END, cfa(6, 16), RA)]),
    ("DW_CFA_def_cfa_sf: negative result", [def_cfa_sf(6, 3)], {}, [row(P, END, cfa(6, -24), RA)]),
    ("DW_CFA_def_cfa_register keeps the offset", [advance_loc(1), def_cfa_register(6)], {},
     [row(P, P + 1, CFA8, RA), row(P + 1, END, cfa(6, 8), RA)]),
    ("DW_CFA_def_cfa_offset keeps the register", [def_cfa_register(6), advance_loc(1), def_cfa_offset(32)], {},
     [row(P, P + 1, cfa(6, 8), RA), row(P + 1, END, cfa(6, 32), RA)]),
    ("DW_CFA_def_cfa_offset_sf: factored", [def_cfa_offset_sf(-4)], {}, [row(P, END, cfa(7, 32), RA)]),
    ("DW_CFA_def_cfa_offset_sf with data_align 1", [def_cfa_offset_sf(-4)], {"data_align": 1},
     [row(P, END, cfa(7, -4), {16: at(1)})]),
    ("DW_CFA_def_cfa_expression", [advance_loc(1), def_cfa_expression(EXPR_CFA)], {},
     [row(P, P + 1, CFA8, RA), row(P + 1, END, cfa_expr(EXPR_CFA), RA)]),
    ("DW_CFA_def_cfa after an expression returns to register+offset",
     [def_cfa_expression(EXPR_CFA), advance_loc(1), def_cfa(7, 16)], {},
     [row(P, P + 1, cfa_expr(EXPR_CFA), RA), row(P + 1, END, cfa(7, 16), RA)]),
    # -- register rules (§6.4.2.3) ------------------------------------------------------------------------
    ("DW_CFA_undefined", [undefined(16)], {}, [row(P, END, CFA8, {16: UNDEFINED})]),
    ("DW_CFA_same_value", [same_value(3)], {}, [row(P, END, CFA8, regs({3: SAME}))]),
    ("DW_CFA_offset", [offset(3, 2)], {}, [row(P, END, CFA8, regs({3: at(-16)}))]),
    ("DW_CFA_offset with data_align -4", [offset(3, 2)], {"data_align": -4},
     [row(P, END, CFA8, {16: at(-4), 3: at(-8)})]),
    ("DW_CFA_offset_extended (register above 63)", [offset_extended(17, 3), offset_extended(100, 1)], {},
     [row(P, END, CFA8, regs({17: at(-24), 100: at(-8)}))]),
    ("DW_CFA_offset_extended_sf (positive offset)", [offset_extended_sf(3, -2)], {},
     [row(P, END, CFA8, regs({3: at(16)}))]),
    ("DW_CFA_GNU_negative_offset_extended", [gnu_negative_offset_extended(3, 2)], {},
     [row(P, END, CFA8, regs({3: at(16)}))]),
    ("DW_CFA_val_offset", [val_offset(3, 2)], {}, [row(P, END, CFA8, regs({3: val(-16)}))]),
    ("DW_CFA_val_offset_sf", [val_offset_sf(3, -1), val_offset_sf(6, 2)], {},
     [row(P, END, CFA8, regs({3: val(8), 6: val(-16)}))]),
    ("DW_CFA_register", [register(3, 12)], {}, [row(P, END, CFA8, regs({3: in_register(12)}))]),
    ("DW_CFA_expression", [expression(3, EXPR_SLOT)], {}, [row(P, END, CFA8, regs({3: expr(EXPR_SLOT)}))]),
    ("DW_CFA_val_expression", [val_expression(7, EXPR_VALUE)], {},
     [row(P, END, CFA8, regs({7: val_expr(EXPR_VALUE)}))]),
    ("a later rule replaces an earlier one", [offset(3, 2), advance_loc(1), register(3, 5), advance_loc(1), undefined(3)], {},
     [row(P, P + 1, CFA8, regs({3: at(-16)})), row(P + 1, P + 2, CFA8, regs({3: in_register(5)})),
      row(P + 2, END, CFA8, regs({3: UNDEFINED}))]),
    # DW_CFA_restore: "the rule ... assigned by the initial_instructions in the CIE" (§6.4.2.3)
    ("DW_CFA_restore returns to the CIE's rule",
     [offset(16, 2), offset(12, 3), advance_loc(1), restore(16), advance_loc(1), restore(12)],
     {"cie_instructions": [def_cfa(7, 8), offset(16, 1), same_value(12)]},
     [row(P, P + 1, CFA8, {16: at(-16), 12: at(-24)}), row(P + 1, P + 2, CFA8, {16: at(-8), 12: at(-24)}),
      row(P + 2, END, CFA8, {16: at(-8), 12: SAME})]),
    ("DW_CFA_restore of a register the CIE has no rule for",
     [offset(3, 2), advance_loc(1), restore(3)], {},
     [row(P, P + 1, CFA8, regs({3: at(-16)})), row(P + 1, END, CFA8, RA)]),
    ("DW_CFA_restore_extended", [offset_extended(100, 5), offset(16, 3), advance_loc(1),
                                 restore_extended(100), restore_extended(16)],
     {"cie_instructions": [def_cfa(7, 8), offset(16, 1), offset_extended(100, 4)]},
     [row(P, P + 1, CFA8, {16: at(-24), 100: at(-40)}), row(P + 1, END, CFA8, {16: at(-8), 100: at(-32)})]),
    ("DW_CFA_restore brings back a CIE expression rule with its bytes",
     [offset(9, 2), advance_loc(1), restore(9)],
     {"cie_instructions": [def_cfa(7, 8), offset(16, 1), expression(9, EXPR_SLOT)]},
     [row(P, P + 1, CFA8, regs({9: at(-16)})), row(P + 1, END, CFA8, regs({9: expr(EXPR_SLOT)}))]),
    ("padded (non-canonical) ULEB128 operands", [b"\x05" + uleb128(3, pad_to=3) + uleb128(2, pad_to=2),
                                                  b"\x0c" + uleb128(6, pad_to=2) + uleb128(16, pad_to=4)], {},
     [row(P, END, cfa(6, 16), regs({3: at(-16)}))]),
    # -- row state (§6.4.2.4) --------------------------------------------------------------------------------
    ("DW_CFA_remember_state / DW_CFA_restore_state, nested; rows after each restore",
     [offset(3, 2), advance_loc(1),
      remember_state(), def_cfa_offset(16), offset(6, 3), advance_loc(1),
      remember_state(), def_cfa_offset(24), undefined(3), advance_loc(1),
      restore_state(), advance_loc(1),
      restore_state()], {},
     [row(P, P + 1, CFA8, regs({3: at(-16)})),
      row(P + 1, P + 2, cfa(7, 16), regs({3: at(-16), 6: at(-24)})),
      row(P + 2, P + 3, cfa(7, 24), regs({3: UNDEFINED, 6: at(-24)})),
      row(P + 3, P + 4, cfa(7, 16), regs({3: at(-16), 6: at(-24)})),
      row(P + 4, END, CFA8, regs({3: at(-16)}))]),
    # GCC's epilogue idiom: remember, drop the frame for `ret`, restore for the code after it. The
    # CFA is part of the remembered state, as in libgcc (frame_state_reg_info holds cfa_offset,
    # cfa_reg, cfa_exp) and readelf.
    ("DW_CFA_restore_state restores the CFA rule too (GCC epilogue)",
     [def_cfa_offset(16), offset(6, 2), advance_loc(4), remember_state(), def_cfa(7, 8), restore(6),
      advance_loc(1), restore_state()], {},
     [row(P, P + 4, cfa(7, 16), regs({6: at(-16)})), row(P + 4, P + 5, CFA8, RA),
      row(P + 5, END, cfa(7, 16), regs({6: at(-16)}))]),
    ("DW_CFA_restore_state restores a CFA expression",
     [def_cfa_expression(EXPR_CFA), remember_state(), advance_loc(1), def_cfa(7, 8), advance_loc(1), restore_state()], {},
     [row(P, P + 1, cfa_expr(EXPR_CFA), RA), row(P + 1, P + 2, CFA8, RA), row(P + 2, END, cfa_expr(EXPR_CFA), RA)]),
    # -- padding and no-ops ------------------------------------------------------------------------------------
    ("DW_CFA_nop anywhere", [nop(), advance_loc(1), nop(), nop(), def_cfa_offset(16), nop(), nop(), nop()], {},
     [row(P, P + 1, CFA8, RA), row(P + 1, END, cfa(7, 16), RA)]),
    ("DW_CFA_GNU_args_size changes no rule", [gnu_args_size(16), advance_loc(1), gnu_args_size(0x1234)], {},
     [row(P, P + 1, CFA8, RA), row(P + 1, END, CFA8, RA)]),
    # -- CIE initial instructions of every kind --------------------------------------------------------------
    ("CIE initial instructions of every rule kind", [advance_loc(1), restore(3), restore_extended(5)],
     {"cie_instructions": [def_cfa(7, 8), offset(16, 1), same_value(3), undefined(4), register(5, 6),
                           val_offset(8, 2), expression(9, EXPR_SLOT), val_expression(10, EXPR_VALUE)]},
     [row(P, P + 1, CFA8, {16: at(-8), 3: SAME, 4: UNDEFINED, 5: in_register(6), 8: val(-16),
                           9: expr(EXPR_SLOT), 10: val_expr(EXPR_VALUE)}),
      row(P + 1, END, CFA8, {16: at(-8), 3: SAME, 4: UNDEFINED, 5: in_register(6), 8: val(-16),
                               9: expr(EXPR_SLOT), 10: val_expr(EXPR_VALUE)})]),
]


def _case_options(options: dict, kind: int) -> dict:
    options = dict(options)
    options["kind"] = kind
    return options


@pytest.mark.parametrize("kind", [EH_FRAME, DEBUG_FRAME], ids=[".eh_frame", ".debug_frame"])
@pytest.mark.parametrize("instructions, options, expected", [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_rows(instructions, options, expected, kind):
    assert evaluate(instructions, **_case_options(options, kind)) == expected


@pytest.mark.parametrize("instructions, options, expected", [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_lookup_agrees_with_rows(instructions, options, expected):
    """CfiSection.lookup: the row whose [start, end) holds the address; of rows sharing a start
    (a zero advance), the later one is in force; pc_end and below pc_begin are not covered."""
    section, fde = evaluate_section(instructions, **options)
    for start, end, cfa_rule, registers in expected:
        if start == end:
            continue  # an empty row: never the answer of a lookup
        for address in (start, end - 1):
            found_fde, found = section.lookup(address)
            assert found_fde.offset == fde.offset
            assert (found.start, found.end, found.cfa, dict(found.registers)) == (start, end, cfa_rule, registers)
    with pytest.raises(NoUnwindInfo):
        section.lookup(fde.pc_end)
    with pytest.raises(NoUnwindInfo):
        section.lookup(fde.pc_begin - 1)


def test_expression_rules_carry_the_expression_bytes():
    section, fde = evaluate_section([def_cfa_expression(EXPR_CFA), expression(3, EXPR_SLOT),
                                     val_expression(6, EXPR_VALUE)])
    (only,) = section.rows(fde)
    assert only.cfa.expression == EXPR_CFA
    assert only.registers[3].expression == EXPR_SLOT
    assert only.registers[6].expression == EXPR_VALUE


def test_row_arrays_hold_the_fde_rows_in_order():
    """row_arrays(): (start addresses, state ids) of every row; an FDE's rows are the slice
    [first_row, first_row + row_count) and state(id) decodes each."""
    section, fde = evaluate_section([advance_loc(1), def_cfa_offset(16), advance_loc(1), offset(3, 2),
                                     advance_loc(1), def_cfa_offset(8)])
    starts, state_ids = section.row_arrays()
    assert len(starts) == len(state_ids) == section.row_count
    rows = section.rows(fde)
    mine = range(fde.first_row, fde.first_row + fde.row_count)
    assert [starts[i] for i in mine] == [r.start for r in rows] == [P, P + 1, P + 2, P + 3]
    assert [section.state(state_ids[i]) for i in mine] == [(r.cfa, dict(r.registers)) for r in rows]
    # the first and last rows differ (rbx is saved in the last): different states
    assert state_ids[fde.first_row] != state_ids[fde.first_row + 3]


def test_equal_row_states_are_interned_once():
    """Two FDEs whose rows have the same rules share state ids."""
    section, fde = evaluate_section([advance_loc(1), def_cfa_offset(16), advance_loc(1), def_cfa_offset(8)])
    _, state_ids = section.row_arrays()
    first, _, last = (state_ids[fde.first_row + i] for i in range(3))
    assert first == last
