"""The abstract interpreter (native/core/synth.c) on hand-assembled functions: the CFA and the save
slots it derives at each instruction, and the reasons it gives up. Bytes from `as` (Intel syntax in
the comments), placed at START."""

from __future__ import annotations

import array

from fastunwind import _core

START = 0x1000
RSP, RBP = 7, 6
SAME_VALUE, OFFSET = 2, 3
CFA_REG_OFFSET = 8
RBX_COLUMN = _core.SYNTH_COLUMNS.index(3)
RA_COLUMN = _core.SYNTH_COLUMNS.index(16)


COUNTS: dict[str, int] = {}


def run(hex_bytes: str, noreturn: tuple[int, ...] = (), segments: bool = False, return_address_kept: bool = True
        ) -> tuple[int, str, dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
    """(outcome, reason, {address: (CFA register, offset)}, {address: rbx's (kind, value)}); the
    run's counts are left in COUNTS. `return_address_kept`: the code leaves the return address
    where the call put it (checked at every instruction)."""
    code = bytes.fromhex(hex_bytes)
    outcome, reason, rows, counts = _core.synth_function(
        code, START, array.array("Q", sorted(noreturn)).tobytes(), [(START, code)] if segments else ())
    COUNTS.clear()
    COUNTS.update(counts)
    cfa = {address: (rule[1], rule[2]) if rule[0] == CFA_REG_OFFSET else (-1, 0) for address, rule, _ in rows}
    rbx = {address: (columns[RBX_COLUMN][0], columns[RBX_COLUMN][2]) for address, _, columns in rows}
    for _address, _rule, columns in rows:
        assert not return_address_kept or columns[RA_COLUMN][:3] == (OFFSET, 0, -8), "the return address stays at CFA-8"
    return outcome, reason, cfa, rbx


def offsets(cfa: dict[int, tuple[int, int]]) -> list[int]:
    """The CFA's offset from rsp at each instruction, in address order (-1 when not rsp-based)."""
    return [offset if reg == RSP else -1 for _address, (reg, offset) in sorted(cfa.items())]


def test_push_pop_and_sub_add() -> None:
    # push rbp; mov rbp,rsp; push rbx; sub rsp,8; call 0x2000; add rsp,8; pop rbx; pop rbp; ret
    outcome, reason, cfa, rbx = run("55 4889e5 53 4883ec08 e8ed0f0000 4883c408 5b 5d c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert offsets(cfa) == [8, 16, 16, 24, 32, 32, 24, 16, 8]
    # rbx is saved at CFA-24 by the push, and still in place until the call's fall-through
    assert rbx[START + 5] == (SAME_VALUE, 0)


def test_spill_and_reload_of_a_callee_saved_register() -> None:
    # sub rsp,24; mov [rsp+8],rbx; mov rbx,rdi; mov rbx,[rsp+8]; add rsp,24; ret
    outcome, reason, cfa, rbx = run("4883ec18 48895c2408 4889fb 488b5c2408 4883c418 c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert rbx[START + 0x9] == (SAME_VALUE, 0)
    assert rbx[START + 0xC] == (OFFSET, -24), "after mov rbx,rdi the caller's rbx is only in its slot"
    assert rbx[START + 0x11] == (SAME_VALUE, 0), "reloaded"


def test_leave() -> None:
    # push rbp; mov rbp,rsp; sub rsp,0x20; leave; ret
    outcome, reason, cfa, _ = run("55 4889e5 4883ec20 c9 c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert offsets(cfa) == [8, 16, 16, 48, 8]


def test_enter() -> None:
    # enter 0x20,0; leave; ret
    outcome, reason, cfa, _ = run("c8200000 c9 c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert offsets(cfa) == [8, 48, 8]


def test_realignment_keeps_the_cfa_through_rbp() -> None:
    # push rbp; mov rbp,rsp; and rsp,-32; sub rsp,0x40; mov [rsp],rbx; mov rsp,rbp; pop rbp; ret
    outcome, reason, cfa, _ = run("55 4889e5 4883e4e0 4883ec40 48891c24 4889ec 5d c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert cfa[START + 0x8] == (RBP, 16), "after and rsp,-32 only rbp knows where the CFA is"
    assert cfa[START + 0xC] == (RBP, 16)
    assert offsets(cfa)[-2:] == [16, 8]


def test_jump_table() -> None:
    # lea rdx,[rip+table]; movsxd rax,[rdx+rdi*4]; add rax,rdx; push rbx; jmp rax;
    # case0: pop rbx; ret; case1: mov ebx,1; pop rbx; ret; (padding) table: case0-table, case1-table
    code = "488d1515000000 486304ba 4801d0 53 ffe0 5b c3 bb01000000 5b c3 6690 f5ffffff f7ffffff"
    outcome, reason, cfa, _ = run(code, segments=True)
    assert outcome == _core.SYNTH_DECIDED, reason
    assert cfa[START + 0x11] == (RSP, 16) and cfa[START + 0x13] == (RSP, 16), "both cases reached"
    assert START + 0x1C not in cfa, "the table is not code"
    assert COUNTS["jump_tables"] == 1
    outcome, reason, _, _ = run(code, segments=False)
    assert outcome == _core.SYNTH_UNDECIDED and "indirect jump at 0x100f" in reason, "without the table's bytes"


def test_paths_that_disagree_on_the_stack_pointer() -> None:
    # test edi,edi; je 1f; push rbx; 1: ret
    outcome, reason, _, _ = run("85ff 7401 53 c3")
    assert outcome == _core.SYNTH_UNDECIDED
    assert reason == "paths meet at 0x1005 with different stack pointers (rsp = CFA-8 and CFA-16)"


def test_noreturn_call_ends_a_path() -> None:
    # push rbx; call 0x2000 (abort); then bytes that do not decode
    code = "53 e8fa0f0000 ffff"
    outcome, reason, cfa, _ = run(code, noreturn=(0x2000,))
    assert outcome == _core.SYNTH_DECIDED, reason
    assert sorted(cfa) == [START, START + 1]
    outcome, reason, _, _ = run(code)
    assert outcome == _core.SYNTH_UNDECIDED and reason == "bytes at 0x1006 do not decode as an instruction"


def test_call_that_does_not_return_is_found_by_its_fall_through() -> None:
    # test edi,edi; je 1f; push rbx; call 0x2000 (not in the noreturn list); 1: ret
    outcome, reason, cfa, _ = run("85ff 7406 53 e8f70f0000 c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert COUNTS["assumed_noreturn"] == 1 and cfa[START + 0xA] == (RSP, 8)


def test_unknown_instruction_drops_what_it_writes() -> None:
    # push rbx; mov rsp,rdi; pop rbx; ret
    outcome, reason, cfa, _ = run("53 4889fc 5b c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert cfa[START + 1] == (RSP, 16)
    assert cfa[START + 4] == (-1, 0), "no register holds a known offset from the CFA any more"


def test_branch_into_the_middle_of_an_instruction() -> None:
    # jmp to the second byte of the 5-byte mov; mov eax,0x90909090; ret
    outcome, reason, _, _ = run("eb01 b890909090 c3")
    assert outcome == _core.SYNTH_UNDECIDED
    assert reason == "the branch at 0x1000 goes into the middle of the instruction at 0x1003"


def test_truncated_code_and_empty_input() -> None:
    outcome, reason, _, _ = run("4883")  # a cut add
    assert outcome == _core.SYNTH_UNDECIDED and "do not decode" in reason
    outcome, reason, _, _ = run("")
    assert outcome == _core.SYNTH_UNDECIDED and reason == "empty range"


def test_falling_off_the_end() -> None:
    # push rbx; nop: execution continues past the range with a frame on the stack
    outcome, reason, _, _ = run("53 90")
    assert outcome == _core.SYNTH_UNDECIDED and reason == "execution runs past the end of the range at 0x1002"


def test_jump_table_target_computed_by_lea() -> None:
    # lea rdx,[rip+table]; movsxd rax,[rdx+rdi*4]; lea rax,[rdx+rax]; push rbx; jmp rax;
    # case0: pop rbx; ret; case1: mov ebx,1; pop rbx; ret; nop; table: case0-table, case1-table
    code = "488d1515000000 486304ba 488d0402 53 ffe0 5bc3 bb01000000 5bc3 90 f6ffffff f8ffffff"
    outcome, reason, cfa, _ = run(code, segments=True)
    assert outcome == _core.SYNTH_DECIDED, reason
    assert cfa[START + 0x12] == (RSP, 16) and cfa[START + 0x14] == (RSP, 16), "both cases reached"
    assert COUNTS["jump_tables"] == 1

