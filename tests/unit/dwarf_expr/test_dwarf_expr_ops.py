"""The C evaluator (`_core.evaluate_expression`) on every operation CFI may use, with expected values
written out by hand (DWARF 5 §2.5.1; the CFI restrictions of §6.4.2).

Each case is checked against the hand-written value and against the pure-Python reference in
tests/support/expr_reference.py, so a disagreement says which of the two is wrong.
"""

from __future__ import annotations

import struct

import pytest

from fastunwind import _core
from fastunwind.errors import ExprError

from tests.support.expr_reference import (
    ReferenceError, abs_, addr, and_, bra, breg, bregx, const1s, const1u, const2s, const2u, const4s,
    const4u, const8s, const8u, consts, constu, deref, deref_size, div, drop, dup, eq, evaluate, ge, gt,
    le, lit, lt, minus, mod, mul, ne, neg, nop, not_, or_, over, pick, plus, plus_uconst, reg, regx,
    rot, shl, shr, shra, skip, swap, xor,
)

M = 2**64
RSP, RBP = 7, 6
REGISTERS = {0: 5, 3: 0xFFFF_FFFF_FFFF_FFF0, RBP: 0x7FFC_0000_2000, RSP: 0x7FFC_0000_1000, 16: 0x40_1234,
             31: 0x31, 100: 0x1000}


def neg64(v: int) -> int:
    return v % M


def c_eval(expression: bytes, registers=REGISTERS, **kwargs) -> int:
    return _core.evaluate_expression(expression, registers, **kwargs)


# (id, expression, expected top of stack)
CASES = [
    # literals and constants (§2.5.1.1)
    ("lit0", lit(0), 0),
    ("lit31", lit(31), 31),
    ("addr", addr(0x1122_3344_5566_7788), 0x1122_3344_5566_7788),
    ("const1u", const1u(0xFF), 0xFF),
    ("const1s", const1s(-1), neg64(-1)),
    ("const2u", const2u(0xFFFF), 0xFFFF),
    ("const2s", const2s(-300), neg64(-300)),
    ("const4u", const4u(0xFFFF_FFFF), 0xFFFF_FFFF),
    ("const4s", const4s(-70000), neg64(-70000)),
    ("const8u", const8u(0xFEDC_BA98_7654_3210), 0xFEDC_BA98_7654_3210),
    ("const8s", const8s(-(2**62)), neg64(-(2**62))),
    ("constu", constu(624485), 624485),
    ("constu 2^64-1", constu(M - 1), M - 1),
    ("consts", consts(-123456), neg64(-123456)),
    # register values (§2.5.1.2); in CFI DW_OP_regN pushes the register's value (libgcc)
    ("breg7 8", breg(RSP, 8), REGISTERS[RSP] + 8),
    ("breg6 -8", breg(RBP, -8), REGISTERS[RBP] - 8),
    ("breg31 0", breg(31, 0), 0x31),
    ("breg3 wraps", breg(3, 0x20), 0x10),
    ("bregx 16 +4", bregx(16, 4), 0x40_1238),
    ("bregx 100 -16", bregx(100, -16), 0xFF0),
    ("reg0 pushes the value", reg(0), 5),
    ("regx 100 pushes the value", regx(100), 0x1000),
    # stack operations (§2.5.1.3)
    ("dup", lit(7) + dup() + plus(), 14),
    ("drop", lit(1) + lit(2) + drop(), 1),
    ("over", lit(1) + lit(2) + over(), 1),
    ("over then minus", lit(1) + lit(5) + over() + minus(), 4),
    ("pick 0 == dup", lit(3) + lit(4) + pick(0), 4),
    ("pick 2", lit(10) + lit(20) + lit(30) + pick(2), 10),
    ("swap", lit(1) + lit(2) + swap(), 1),
    ("swap then minus", lit(10) + lit(3) + swap() + minus(), neg64(-7)),
    # rot: 1 2 3(top) -> 3 1 2(top)
    ("rot: top", lit(1) + lit(2) + lit(3) + rot(), 2),
    ("rot: second", lit(1) + lit(2) + lit(3) + rot() + drop(), 1),
    ("rot: third", lit(1) + lit(2) + lit(3) + rot() + drop() + drop(), 3),
    # arithmetic and logical operations (§2.5.1.4)
    ("and", const1u(0xF0) + const1u(0x3C) + and_(), 0x30),
    ("or", const1u(0xF0) + const1u(0x0F) + or_(), 0xFF),
    ("xor", const1u(0xFF) + const1u(0x0F) + xor(), 0xF0),
    ("plus", lit(20) + lit(22) + plus(), 42),
    ("plus wraps", const8u(M - 1) + lit(2) + plus(), 1),
    ("minus", lit(5) + lit(8) + minus(), neg64(-3)),
    ("mul", consts(-3) + lit(7) + mul(), neg64(-21)),
    ("mul wraps", const8u(2**63) + lit(2) + mul(), 0),
    ("div signed", consts(-7) + lit(2) + div(), neg64(-3)),
    ("div signed, both negative", consts(-7) + consts(-2) + div(), 3),
    ("div positive", lit(30) + lit(4) + div(), 7),
    ("div INT64_MIN / -1 wraps", const8u(2**63) + consts(-1) + div(), 2**63),
    ("mod", lit(30) + lit(7) + mod(), 2),
    ("mod of a negative is unsigned", consts(-1) + lit(10) + mod(), (M - 1) % 10),
    ("neg", lit(5) + neg(), neg64(-5)),
    ("neg of negative", consts(-9) + neg(), 9),
    ("not", lit(0) + not_(), M - 1),
    ("abs", consts(-42) + abs_(), 42),
    ("abs positive", lit(9) + abs_(), 9),
    ("abs INT64_MIN", const8u(2**63) + abs_(), 2**63),
    ("plus_uconst", lit(1) + plus_uconst(1000), 1001),
    ("shl", lit(3) + lit(4) + shl(), 48),
    ("shl 63", lit(1) + const1u(63) + shl(), 2**63),
    ("shr is logical", consts(-16) + lit(2) + shr(), (M - 16) >> 2),
    ("shra is arithmetic", consts(-16) + lit(2) + shra(), neg64(-4)),
    ("shra of a positive", lit(16) + lit(2) + shra(), 4),
    # relational operators compare signed (§2.5.1.5)
    ("eq true", lit(3) + lit(3) + eq(), 1),
    ("eq false", lit(3) + lit(4) + eq(), 0),
    ("ne", lit(3) + lit(4) + ne(), 1),
    ("lt signed: -1 < 1", consts(-1) + lit(1) + lt(), 1),
    ("gt signed: -1 > 1 is false", consts(-1) + lit(1) + gt(), 0),
    ("le equal", lit(5) + lit(5) + le(), 1),
    ("le signed", lit(1) + consts(-1) + le(), 0),
    ("ge signed", consts(-5) + consts(-6) + ge(), 1),
    ("ge false", lit(1) + lit(2) + ge(), 0),
    ("gt", lit(2) + lit(1) + gt(), 1),
    # control flow (§2.5.1.5): offsets count from the end of the branch operation
    ("skip over a lit", lit(1) + skip(1) + lit(2), 1),
    ("skip 0", lit(1) + skip(0) + lit(2), 2),
    ("skip to the end", lit(9) + skip(2) + lit(1) + lit(2), 9),
    ("bra taken", lit(7) + lit(1) + bra(1) + lit(8), 7),
    ("bra not taken", lit(7) + lit(0) + bra(1) + lit(8), 8),
    # a countdown loop: 5 -> 0 via a backward bra
    ("loop with bra", lit(5) + lit(1) + minus() + dup() + bra(-6), 0),
    ("nop", lit(3) + nop() + nop(), 3),
]


@pytest.mark.parametrize("expression, expected", [pytest.param(e, v, id=i) for i, e, v in CASES])
def test_operation(expression, expected):
    assert c_eval(expression) == expected
    assert evaluate(expression, REGISTERS) == expected, "the Python reference disagrees with the table"


def test_initial_value_is_pushed_first():
    """DW_CFA_expression / DW_CFA_val_expression: the CFA is pushed before the expression runs
    (DWARF 5 §6.4.2.3)."""
    cfa = 0x7FFC_0000_1100
    assert c_eval(plus_uconst(16), initial=cfa) == cfa + 16
    assert c_eval(lit(8) + minus(), initial=cfa) == cfa - 8
    assert c_eval(b"", initial=cfa) == cfa  # an empty expression yields the CFA itself
    assert c_eval(dup() + plus(), initial=cfa) == 2 * cfa
    with pytest.raises(ExprError, match="stack underflow"):
        c_eval(plus_uconst(16))


# ---- memory -------------------------------------------------------------------------------------------

MEMORY = {0x7FFC_0000_1FF8: struct.pack("<Q", 0x7FFC_0000_3000), 0x5000: bytes(range(1, 9))}


def read_memory(address, size):
    for base, data in MEMORY.items():
        if base <= address and address + size <= base + len(data):
            return data[address - base:address - base + size]
    return None


@pytest.mark.parametrize("expression, expected", [
    pytest.param(breg(RBP, -8) + deref(), 0x7FFC_0000_3000, id="deref: 8 bytes"),
    pytest.param(const2u(0x5000) + deref_size(1), 0x01, id="deref_size 1"),
    pytest.param(const2u(0x5000) + deref_size(2), 0x0201, id="deref_size 2"),
    pytest.param(const2u(0x5002) + deref_size(4), 0x06050403, id="deref_size 4"),
    pytest.param(const2u(0x5000) + deref_size(8), 0x0807060504030201, id="deref_size 8"),
    pytest.param(const2u(0x5000) + deref_size(3), 0x030201, id="deref_size 3 (zero-extended)"),
])
def test_deref(expression, expected):
    calls = []

    def reader(address, size):
        calls.append((address, size))
        return read_memory(address, size)

    assert c_eval(expression, read=reader) == expected
    assert evaluate(expression, REGISTERS, read=read_memory) == expected
    assert len(calls) == 1


def test_deref_of_unreadable_memory():
    with pytest.raises(ExprError, match=r"DW_OP_deref: memory at 0x1234 is unreadable"):
        c_eval(const2u(0x1234) + deref(), read=read_memory)
    with pytest.raises(ExprError, match=r"unreadable"):
        c_eval(const2u(0x1234) + deref())  # no reader at all


def test_deref_reader_exception_propagates():
    def broken(address, size):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        c_eval(lit(8) + deref(), read=broken)


def test_deref_reader_returning_the_wrong_size():
    with pytest.raises(ValueError, match="memory reader returned 3 bytes, expected 8"):
        c_eval(lit(8) + deref(), read=lambda address, size: b"abc")


@pytest.mark.parametrize("size", [0, 9, 255])
def test_deref_size_out_of_range(size):
    with pytest.raises(ExprError, match=rf"DW_OP_deref_size of {size} bytes"):
        c_eval(lit(8) + deref_size(size), read=read_memory)


# ---- errors ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expression, message", [
    pytest.param(b"", r"expression left an empty stack", id="empty"),
    pytest.param(lit(1) + drop(), r"expression left an empty stack", id="emptied"),
    pytest.param(drop(), r"DW_OP_drop at expression offset 0x0: stack underflow", id="drop"),
    pytest.param(lit(1) + plus(), r"DW_OP_plus at expression offset 0x1: stack underflow", id="plus"),
    pytest.param(lit(1) + lit(2) + rot(), r"DW_OP_rot at expression offset 0x2: stack underflow", id="rot"),
    pytest.param(lit(1) + pick(1), r"DW_OP_pick at expression offset 0x1: stack underflow", id="pick"),
    pytest.param(lit(1) + swap(), r"DW_OP_swap .*stack underflow", id="swap"),
    pytest.param(lit(1) + over(), r"DW_OP_over .*stack underflow", id="over"),
    pytest.param(bra(0), r"DW_OP_bra .*stack underflow", id="bra"),
    pytest.param(lit(1) + lit(0) + div(), r"DW_OP_div by zero at expression offset 0x2", id="div by zero"),
    pytest.param(lit(1) + lit(0) + mod(), r"DW_OP_mod by zero at expression offset 0x2", id="mod by zero"),
    pytest.param(skip(-4), r"DW_OP_skip at expression offset 0x0 jumps outside the expression \(to -1\)", id="skip before"),
    pytest.param(lit(1) + skip(5), r"DW_OP_skip .*jumps outside the expression \(to 9\)", id="skip after"),
    pytest.param(lit(1) + bra(-10), r"DW_OP_bra .*jumps outside", id="bra outside"),
    pytest.param(skip(-3), r"expression executed more than 4096 operations", id="infinite loop"),
    pytest.param(lit(1) * 65, r"expression stack deeper than 64 values", id="stack overflow"),
    pytest.param(b"\x01", r"unknown operation 0x01 at expression offset 0x0", id="unknown 0x01"),
    pytest.param(lit(0) + b"\xff", r"unknown operation 0xff at expression offset 0x1", id="unknown 0xff"),
    pytest.param(const4u(0)[:3], r"DW_OP_const4u at expression offset 0x0: truncated operand", id="truncated"),
    pytest.param(b"\x9c", r"DW_OP_call_frame_cfa at expression offset 0x0 is not allowed in call frame information",
                 id="call_frame_cfa"),
    pytest.param(b"\x98\x00\x00", r"DW_OP_call2 .*is not allowed", id="call2"),
    pytest.param(b"\x97", r"DW_OP_push_object_address .*is not allowed", id="push_object_address"),
    pytest.param(b"\x91\x08", r"DW_OP_fbreg .*is not allowed", id="fbreg"),
    pytest.param(breg(5, 0), r"value of register 5 is unknown", id="unknown register breg"),
    pytest.param(regx(127), r"DW_OP_regx: value of register 127 is unknown", id="unknown register regx"),
    pytest.param(bregx(1000, 0), r"DW_OP_bregx: value of register 1000 is unknown", id="register beyond the columns"),
])
def test_errors(expression, message):
    with pytest.raises(ExprError, match=message):
        c_eval(expression)
    with pytest.raises(ReferenceError):
        evaluate(expression, REGISTERS)


def test_step_and_stack_limits_are_exported():
    assert (_core.EXPR_STACK, _core.EXPR_MAX_STEPS) == (64, 4096)
    # exactly 64 values fit
    assert c_eval(lit(1) * 64) == 1


def test_shift_counts_of_64_and_more():
    """Pinned: counts >= 64 give 0 (shl, shr) or the sign (shra). C leaves them undefined; libgcc's
    `second << first` on x86-64 uses the count modulo 64 instead."""
    assert c_eval(lit(1) + const1u(64) + shl()) == 0
    assert c_eval(consts(-1) + const1u(64) + shr()) == 0
    assert c_eval(consts(-1) + const1u(200) + shra()) == M - 1
    assert c_eval(lit(1) + const1u(200) + shra()) == 0


def test_registers_outside_the_column_range_are_refused():
    with pytest.raises(ValueError, match="register 128 out of range"):
        _core.evaluate_expression(lit(0), {128: 1})
