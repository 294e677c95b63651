"""Property test: the C evaluator agrees with the pure-Python reference
(tests/support/expr_reference.py) on random straight-line stack/arithmetic programs, including
programs that fail (underflow, division by zero, overflow of the 64-entry stack): both must fail, or
both must produce the same value.

Seeds: the run is derandomised with a fixed seed, printed in the test header and in every failure
report (`note`), so a failure reproduces exactly. Explore other seeds with
FASTUNWIND_HYPOTHESIS_SEED=<n> (and FASTUNWIND_HYPOTHESIS_EXAMPLES=<n> for longer runs); a failure
also prints hypothesis' @reproduce_failure blob. No example database is written.
"""

from __future__ import annotations

import hashlib
import os

from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from fastunwind import _core
from fastunwind.errors import ExprError

from tests.support import expr_reference as ops
from tests.support.expr_reference import ReferenceError, evaluate

SEED = int(os.environ.get("FASTUNWIND_HYPOTHESIS_SEED", "6402"))
EXAMPLES = int(os.environ.get("FASTUNWIND_HYPOTHESIS_EXAMPLES", "600"))
print(f"\n[dwarf_expr property] hypothesis seed {SEED}, {EXAMPLES} examples")

REGISTER_NUMBERS = [0, 3, 6, 7, 12, 16, 31, 100]

u8 = st.integers(0, 2**8 - 1)
s8 = st.integers(-(2**7), 2**7 - 1)
u16 = st.integers(0, 2**16 - 1)
s16 = st.integers(-(2**15), 2**15 - 1)
u32 = st.integers(0, 2**32 - 1)
s32 = st.integers(-(2**31), 2**31 - 1)
u64 = st.integers(0, 2**64 - 1)
s64 = st.integers(-(2**63), 2**63 - 1)
interesting_u64 = st.one_of(u64, st.sampled_from([0, 1, 2**63, 2**63 - 1, 2**64 - 1, 2**32, 7, 15]))

PUSHES = st.one_of(
    st.builds(ops.lit, st.integers(0, 31)),
    st.builds(ops.const1u, u8), st.builds(ops.const1s, s8),
    st.builds(ops.const2u, u16), st.builds(ops.const2s, s16),
    st.builds(ops.const4u, u32), st.builds(ops.const4s, s32),
    st.builds(ops.const8u, interesting_u64), st.builds(ops.const8s, s64),
    st.builds(ops.constu, interesting_u64), st.builds(ops.consts, s64),
    st.builds(ops.addr, u64),
    st.builds(ops.breg, st.sampled_from([n for n in REGISTER_NUMBERS if n < 32]), s64),
    st.builds(ops.reg, st.sampled_from([n for n in REGISTER_NUMBERS if n < 32])),
    st.builds(ops.bregx, st.sampled_from(REGISTER_NUMBERS), s64),
    st.builds(ops.regx, st.sampled_from(REGISTER_NUMBERS)),
)
STACK_OPS = st.one_of(
    st.sampled_from([ops.dup(), ops.drop(), ops.over(), ops.swap(), ops.rot(), ops.nop()]),
    st.builds(ops.pick, st.integers(0, 6)),
)
UNARY = st.one_of(
    st.sampled_from([ops.abs_(), ops.neg(), ops.not_()]),
    st.builds(ops.plus_uconst, interesting_u64),
)
BINARY = st.sampled_from([ops.and_(), ops.or_(), ops.xor(), ops.plus(), ops.minus(), ops.mul(), ops.div(),
                          ops.mod(), ops.eq(), ops.ne(), ops.lt(), ops.gt(), ops.le(), ops.ge()])
# shifts with a count below 64 pushed just before (counts >= 64 are undefined in C: not compared)
SHIFTS = st.builds(lambda count, op: ops.const1u(count) + op, st.integers(0, 63),
                   st.sampled_from([ops.shl(), ops.shr(), ops.shra()]))
DEREFS = st.one_of(st.just(ops.deref()), st.builds(ops.deref_size, st.integers(1, 8)))

OPERATION = st.one_of(PUSHES, PUSHES, STACK_OPS, UNARY, BINARY, BINARY, SHIFTS, DEREFS)
PROGRAM = st.lists(OPERATION, min_size=1, max_size=40).map(b"".join)
REGISTERS = st.fixed_dictionaries({n: interesting_u64 for n in REGISTER_NUMBERS})


def memory(address: int, size: int) -> bytes | None:
    """A deterministic memory image: readable except on 'pages' whose number ends in 0xf."""
    if (address >> 12) & 0xF == 0xF:
        return None
    return hashlib.blake2b(address.to_bytes(8, "little"), digest_size=8).digest()[:size]


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(program=PROGRAM, registers=REGISTERS, initial=st.one_of(st.none(), interesting_u64))
def test_c_evaluator_agrees_with_the_reference(program, registers, initial):
    note(f"seed {SEED}; program {program.hex()}; initial {initial}")
    note(f"readelf text: {_core.format_expression(program, 'readelf')}")
    try:
        expected = evaluate(program, registers, read=memory, initial=initial)
    except ReferenceError as error:
        expected = error
    try:
        got = _core.evaluate_expression(program, registers, read=memory, initial=initial)
    except ExprError as error:
        got = error
    if isinstance(expected, ReferenceError):
        assert isinstance(got, ExprError), f"reference failed ({expected}) but C returned {got:#x}"
    else:
        assert not isinstance(got, ExprError), f"C failed ({got}) but reference returned {expected:#x}"
        assert got == expected


@seed(SEED)
@settings(max_examples=EXAMPLES // 3, deadline=None, database=None, print_blob=True)
@given(program=PROGRAM)
def test_formatting_round_trips_operation_count(program):
    """Both printers show one entry per operation of a well-formed program."""
    count = 0
    position = 0
    while position < len(program):
        count += 1
        position += _operation_length(program, position)
    readelf = _core.format_expression(program, "readelf")
    llvm = _core.format_expression(program, "llvm")
    assert readelf.count("DW_OP_") == count
    assert llvm.count("DW_OP_") == count
    assert len(readelf.split("; ")) == count


def _operation_length(program: bytes, position: int) -> int:
    opcode = program[position]
    fixed = {0x03: 8, 0x08: 1, 0x09: 1, 0x0A: 2, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8, 0x0F: 8, 0x15: 1,
             0x94: 1}
    if opcode in fixed:
        return 1 + fixed[opcode]
    lebs = {0x10: 1, 0x11: 1, 0x23: 1, 0x90: 1, 0x92: 2}
    count = lebs.get(opcode, 1 if 0x70 <= opcode <= 0x8F else 0)
    length = 1
    for _ in range(count):
        while program[position + length] & 0x80:
            length += 1
        length += 1
    return length
