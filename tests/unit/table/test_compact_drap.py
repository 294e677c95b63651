"""GCC's DRAP frames (functions that realign the stack) in the compact table, from hand-built CFI:
the CFA `DW_OP_breg6 (rbp): k; DW_OP_deref`, callee-saved registers at `DW_CFA_expression:
DW_OP_breg6 (rbp): k` (rbp itself at rbp + 0) and the DRAP register r13 pushed before the
realignment, CFA-relative, in the same rows. Every row is a compact rule (none left to the DWARF
interpreter), and a step through it on a constructed stack gives the registers the stack holds,
the same as the interpreter's step, also where rbp is unknown or a slot is unreadable."""

from __future__ import annotations

import array

import pytest

from fastunwind import _core

from tests.support.cfi_builder import (EH_FRAME, FrameSection, advance_loc, def_cfa, def_cfa_expression,
                                       def_cfa_offset, expression, offset)
from tests.support.step_batch import OUTCOMES, RECORD_SIZE, REGISTERS, STATE_WORDS

RBX, RBP, RSP, R12, R13, R14, R15, RA = 3, 6, 7, 12, 13, 14, 15, 16
DW_OP_breg6, DW_OP_deref = 0x76, 0x06
FUNCTION, SIZE = 0x1000, 0x100
#: where each row starts (the prologue of a function whose DRAP register is r13, as gcc -O2 lays out
#: a realigned nested function: push %r13; lea 16(%rsp),%r13; and $-32,%rsp; push -8(%r13);
#: push %rbp; mov %rsp,%rbp; push %r15; push %r13; push %rbx)
PUSHED_R13, CFA_IN_R13, RBP_SAVED, BODY = FUNCTION + 2, FUNCTION + 0xC, FUNCTION + 0x18, FUNCTION + 0x20
STACK = 0x7FFD_0000_0000
STACK_SIZE = 0x400


def breg6(offset_bytes: int, *, deref: bool = False) -> bytes:
    sleb = bytearray()
    value = offset_bytes
    while True:
        byte = value & 0x7F
        value >>= 7
        if (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40):
            sleb.append(byte)
            break
        sleb.append(byte | 0x80)
    return bytes([DW_OP_breg6, *sleb]) + (bytes([DW_OP_deref]) if deref else b"")


def drap_section() -> bytes:
    section = FrameSection(EH_FRAME, address=0x2000)
    cie = section.cie(instructions=[def_cfa(RSP, 8), offset(RA, 1)])
    section.fde(cie, pc_begin=FUNCTION, pc_range=SIZE, instructions=[
        advance_loc(PUSHED_R13 - FUNCTION), def_cfa_offset(16), offset(R13, 2),
        advance_loc(CFA_IN_R13 - PUSHED_R13), def_cfa(R13, 0),
        advance_loc(RBP_SAVED - CFA_IN_R13), expression(RBP, breg6(0)),
        advance_loc(BODY - RBP_SAVED), def_cfa_expression(breg6(-16, deref=True)),
        expression(R15, breg6(-8)), expression(RBX, breg6(-24)),
    ])
    return section.build()


@pytest.fixture(scope="module")
def tables() -> tuple[_core.CfiTable, _core.CompactTable]:
    cfi = _core.CfiTable(drap_section(), EH_FRAME, 0x2000)
    compact = _core.CompactTable(_core.build_compact_table(cfi, None, _core.COMPACT_KEY_BUILD_ID, b"drap"))
    return cfi, compact


def test_every_drap_row_is_a_compact_rule(tables) -> None:
    _, compact = tables
    assert compact.slow_row_count == 0
    body = compact.rule(compact.lookup(BODY)[1])
    assert (body["cfa"], body["register"], body["offset"], body["ra_offset"]) == ("deref", RBP, -16, -8)
    assert body["saved"] == {R13: -16}  # the DRAP register, pushed before the realignment
    assert body["saved_at_rbp"] == {RBX: -24, RBP: 0, R15: -8}
    prologue = compact.rule(compact.lookup(RBP_SAVED)[1])
    assert (prologue["cfa"], prologue["register"], prologue["offset"]) == ("register", R13, 0)
    assert prologue["saved"] == {R13: -16} and prologue["saved_at_rbp"] == {RBP: 0}


def spaces(cfi: _core.CfiTable, compact: _core.CompactTable) -> dict[str, _core.AddressSpace]:
    module = (FUNCTION, FUNCTION + SIZE, 0, cfi, None, [], 0, compact, None)
    return {backend: _core.AddressSpace([module], backend=backend) for backend in ("dwarf", "table-only")}


def step(space: _core.AddressSpace, regs: dict[int, int], stack: bytes) -> bytes:
    state = [regs.get(r, 0) for r in range(REGISTERS)]
    valid = sum(1 << r for r in regs)
    state.append(valid)  # the PC is the interrupted one (not a return address)
    return _core.step_batch(space, array.array("Q", state).tobytes(), stack, STACK)[:RECORD_SIZE]


def caller(record: bytes) -> dict[int, int]:
    assert record[0] != 0xFF, f"the step failed: {OUTCOMES[record[1]]}"
    valid = int.from_bytes(record[4:8], "little")
    values = array.array("Q", record[16:])
    return {r: values[r] for r in range(REGISTERS) if valid >> r & 1}


def failure(record: bytes) -> tuple[str, int]:
    assert record[0] == 0xFF
    return OUTCOMES[record[1]], int.from_bytes(record[8:16], "little")


#: the realigned frame: rsp, then rbp 0x40 above it, the CFA 0x100 above rbp (the gap the
#: realignment left); what each slot holds
RSP_VALUE = STACK + 0x80
RBP_VALUE = RSP_VALUE + 0x40
CFA = RBP_VALUE + 0x100
SLOTS = {RBP_VALUE: 0x1111, RBP_VALUE - 8: 0x1515, RBP_VALUE - 16: CFA, RBP_VALUE - 24: 0x3333,
         CFA - 8: FUNCTION + 0x80, CFA - 16: 0x1313}


def stack_bytes() -> bytes:
    words = array.array("Q", [0xDEAD_BEEF] * (STACK_SIZE // 8))
    for address, value in SLOTS.items():
        words[(address - STACK) // 8] = value
    return words.tobytes()


def callee(**extra: int) -> dict[int, int]:
    regs = {RSP: RSP_VALUE, RBP: RBP_VALUE, RA: BODY + 4, RBX: 0xB0, R12: 0xC0, R13: 0xD0, R14: 0xE0, R15: 0xF0}
    regs.update({int(k[1:]): v for k, v in extra.items()})
    return regs


def test_a_step_through_the_body_restores_every_register_from_its_slot(tables) -> None:
    by_backend = {name: step(space, callee(), stack_bytes()) for name, space in spaces(*tables).items()}
    assert by_backend["table-only"] == by_backend["dwarf"]
    assert caller(by_backend["table-only"]) == {
        RSP: CFA, RA: FUNCTION + 0x80, RBP: 0x1111, R15: 0x1515, RBX: 0x3333, R13: 0x1313,
        R12: 0xC0, R14: 0xE0,  # not saved: the callee's values are the caller's
    }


def test_the_compact_table_serves_the_drap_rows(tables) -> None:
    table = spaces(*tables)["table-only"]
    assert table.step_source(BODY + 4) == "rbp_slots_rule"
    assert table.step_source(CFA_IN_R13) == "rule"  # r13 + 0 and a CFA-relative save only


def test_without_rbp_the_rbp_relative_saves_are_an_expression_error(tables) -> None:
    regs = callee()
    del regs[RBP]
    regs[RSP] = RSP_VALUE
    # the body's CFA needs rbp too: the prologue row with CFA = r13 + 0 and rbp at rbp + 0
    regs[RA] = RBP_SAVED
    regs[R13] = CFA
    by_backend = {name: step(space, regs, stack_bytes()) for name, space in spaces(*tables).items()}
    assert by_backend["table-only"] == by_backend["dwarf"]
    assert failure(by_backend["table-only"])[0] == "expression_error"


def test_an_unreadable_rbp_relative_slot_fails_the_step_there(tables) -> None:
    # rbp 16 bytes into the dump: the CFA (at rbp - 16) and rbp's slot (rbp + 0) are read, rbx's
    # (rbp - 24) lies below the dump; unlike a CFA-relative slot's, its read must succeed
    low_rbp = STACK + 16  # rbp - 24 lies 8 bytes below the dump's start
    words = array.array("Q", [0] * (STACK_SIZE // 8))
    words[(low_rbp - 16 - STACK) // 8] = CFA
    words[(CFA - 8 - STACK) // 8] = FUNCTION + 0x80
    regs = callee(r6=low_rbp)
    regs[RSP] = STACK
    by_backend = {name: step(space, regs, words.tobytes()) for name, space in spaces(*tables).items()}
    assert by_backend["table-only"] == by_backend["dwarf"]
    assert failure(by_backend["table-only"]) == ("unreadable", low_rbp - 24)
