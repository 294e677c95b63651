"""Expressions that real x86-64 binaries carry in their CFI, evaluated with `_core.evaluate_expression`.

* The PLT rule that ld writes for every lazy-binding PLT (binutils elf_x86_64_eh_frame_plt): each
  16-byte PLT entry is `jmp *GOT(%rip)` (6 bytes), `push $index` (5 bytes), `jmp PLT0` (5 bytes), so
  for the first 11 bytes of an entry nothing has been pushed (CFA = rsp+8) and after the push one
  more word is on the stack (CFA = rsp+16):

      DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge;
      DW_OP_lit3; DW_OP_shl; DW_OP_plus          =  rsp + 8 + (((rip & 15) >= 11) << 3)

* The DRAP rule GCC emits for functions that realign the stack (-mstackrealign, `_Alignas(64)`
  locals): the CFA was saved at rbp-8 by the prologue, `DW_OP_breg6 (rbp): -8; DW_OP_deref`.
"""

from __future__ import annotations

import struct

import pytest

from fastunwind import _core

from tests.support.expr_reference import breg, deref, evaluate

#: written out here as an oracle independent of compact_table.h, which the package reads it from
PLT_EXPRESSION = bytes.fromhex("77 08 80 00 3f 1a 3b 2a 33 24 22")
DRAP_EXPRESSION = bytes.fromhex("76 78 06")
RSP, RBP, RIP = 7, 6, 16
STACK = 0x7FFD_1234_5670


def test_the_plt_bytes_are_the_documented_operations():
    from tests.support.expr_reference import and_, ge, lit, plus, shl

    assert PLT_EXPRESSION == breg(RSP, 8) + breg(RIP, 0) + lit(15) + and_() + lit(11) + ge() + lit(3) + shl() + plus()
    assert _core.COMPACT_PLT_EXPRESSION == PLT_EXPRESSION
    assert DRAP_EXPRESSION == breg(RBP, -8) + deref()


@pytest.mark.parametrize("plt_entry", [0x1020, 0x1030, 0x401FF0, 0x7F00_0000_1000])
@pytest.mark.parametrize("byte_in_entry", range(16))
def test_plt_cfa(plt_entry, byte_in_entry):
    """In the first 11 bytes of a PLT entry (jmp *GOT; push $n) CFA = rsp+8; at the jmp to PLT0
    after the push, CFA = rsp+16."""
    registers = {RSP: STACK, RIP: plt_entry + byte_in_entry}
    expected = STACK + (8 if byte_in_entry < 11 else 16)
    assert _core.evaluate_expression(PLT_EXPRESSION, registers) == expected
    assert evaluate(PLT_EXPRESSION, registers) == expected


def test_plt_cfa_needs_rsp_and_rip():
    from fastunwind.errors import ExprError

    with pytest.raises(ExprError, match="register 16 is unknown"):
        _core.evaluate_expression(PLT_EXPRESSION, {RSP: STACK})
    with pytest.raises(ExprError, match="register 7 is unknown"):
        _core.evaluate_expression(PLT_EXPRESSION, {RIP: 0x1020})


def test_drap_cfa_dereferences_the_saved_cfa():
    rbp = 0x7FFD_0000_1000
    saved_cfa = 0x7FFD_0000_1F80
    reads = []

    def read(address, size):
        reads.append((address, size))
        return struct.pack("<Q", saved_cfa) if (address, size) == (rbp - 8, 8) else None

    assert _core.evaluate_expression(DRAP_EXPRESSION, {RBP: rbp, RSP: 0x7FFD_0000_0F00}, read=read) == saved_cfa
    assert reads == [(rbp - 8, 8)]


def test_drap_register_rule_with_initial_cfa():
    """GCC's DRAP FDEs also save registers with DW_CFA_expression (`DW_OP_breg6 (rbp): -16`): the
    CFA is pushed first but the breg result is on top, so the CFA does not matter."""
    rbp = 0x7FFD_0000_1000
    assert _core.evaluate_expression(breg(RBP, -16), {RBP: rbp}, initial=0xDEAD) == rbp - 16
