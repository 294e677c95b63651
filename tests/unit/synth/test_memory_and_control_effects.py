"""The interpreter (native/core/synth.c) on instructions whose effects are easy to miss: a `pop` to
memory, memory written without an explicit operand or with one the summary cannot size (`rep stos`,
`stos`, `fxsave`, `xsave`), a `call` to the next instruction, a store through a register the state
does not track, the 0x67 address-size prefix, jumps into the middle of an instruction, and a
jump-table bound compared on another register than the index. Bytes from `as` (Intel syntax in the
comments), placed at START like test_interpreter's."""

from __future__ import annotations

from fastunwind import _core
from tests.support.cfi_builder import advance_loc, def_cfa_offset, offset, restore
from tests.unit.synth.test_interpreter import COUNTS, RSP, START, offsets, run
from tests.unit.synth.test_structural_faults import check

UNSPECIFIED = 0
SAVED_AT_CFA_MINUS_16 = (3, -16)  # rbx's derived rule: offset, CFA-16


def test_pop_to_memory_stores_and_keeps_the_stack_pointer() -> None:
    # push rbx; xor ebx,ebx; push rax; pop qword [rsp] (rax's word over rbx's save); pop rbx; ret
    outcome, reason, cfa, rbx = run("53 31db 50 8f0424 5b c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert offsets(cfa) == [8, 16, 16, 24, 16, 8]
    assert rbx[START + 3] == SAVED_AT_CFA_MINUS_16
    assert rbx[START + 7][0] == UNSPECIFIED, "the popped word overwrote the slot that held the caller's rbx"


def test_rep_stos_clobbers_the_slots_its_count_reaches() -> None:
    # push rbx; xor ebx,ebx; sub rsp,16; mov rdi,rsp; mov ecx,N; xor eax,eax; rep stosq; add rsp,16; pop rbx; ret
    code = "53 31db 4883ec10 4889e7 b9{:02x}000000 31c0 f348ab 4883c410 5b c3"
    after = START + 0x14
    outcome, reason, _, rbx = run(code.format(3))
    assert outcome == _core.SYNTH_DECIDED, reason
    assert rbx[after][0] == UNSPECIFIED, "three quadwords from rsp reach rbx's save at rsp+16"
    _, _, _, rbx = run(code.format(2))
    assert rbx[after] == SAVED_AT_CFA_MINUS_16, "two stop below it"
    # mov ecx,N replaced by mov ecx,edx: a count not known, taken as the program's object (which
    # ends below the saves) beyond the first quadword
    _, _, _, rbx = run("53 31db 4883ec10 4889e7 89d1 90 90 90 31c0 f348ab 4883c410 5b c3")
    assert rbx[after] == SAVED_AT_CFA_MINUS_16


def test_string_store_without_rep_writes_rdi() -> None:
    # push rbx; xor ebx,ebx; mov rdi,rsp; stosq; pop rbx; ret
    outcome, reason, _, rbx = run("53 31db 4889e7 48ab 5b c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert rbx[START + 0x6] == SAVED_AT_CFA_MINUS_16
    assert rbx[START + 0x8][0] == UNSPECIFIED, "stosq wrote over rbx's save"


def test_state_saves_of_hundreds_of_bytes_clobber_the_slots_they_reach() -> None:
    # push rbx; xor ebx,ebx; sub rsp,N; fxsave [rsp] (512 bytes); add rsp,N; pop rbx; ret
    code = "53 31db 4881ec{:02x}{:02x}0000 0fae0424 4881c4{:02x}{:02x}0000 5b c3"
    outcome, reason, _, rbx = run(code.format(0xf8, 0x01, 0xf8, 0x01))
    assert outcome == _core.SYNTH_DECIDED, reason
    assert rbx[START + 0xA] == SAVED_AT_CFA_MINUS_16
    assert rbx[START + 0xE][0] == UNSPECIFIED, "fxsave's 512 bytes reach rbx's save at rsp+0x1f8"
    _, _, _, rbx = run(code.format(0x00, 0x02, 0x00, 0x02))
    assert rbx[START + 0xE] == SAVED_AT_CFA_MINUS_16, "not at rsp+0x200"
    # sub rsp,0x200 and xsave64 [rsp]: an area of at least 576 bytes (its size is the machine's)
    outcome, reason, _, rbx = run("53 31db 4881ec00020000 480fae2424 4881c400020000 5b c3",
                                  return_address_kept=False)
    assert outcome == _core.SYNTH_DECIDED, reason
    assert rbx[START + 0xF][0] == UNSPECIFIED


def test_call_to_the_next_instruction_is_a_push() -> None:
    # push rbx; call 1f; 1: pop rax; pop rbx; ret (how 32-bit PIC code reads its address)
    outcome, reason, cfa, _ = run("53 e800000000 58 5b c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert offsets(cfa) == [8, 16, 24, 16, 8]


def test_store_with_a_32_bit_address_is_not_a_stack_slot() -> None:
    # push rbx; xor ebx,ebx; mov qword [esp],0 (67: the low half of rsp, not the stack); pop rbx; ret
    outcome, reason, _, rbx = run("53 31db 6748c7042400000000 5b c3")
    assert outcome == _core.SYNTH_DECIDED, reason
    assert rbx[START + 0xC] == SAVED_AT_CFA_MINUS_16, "rbx's save is not where the store went"


def test_store_through_an_untracked_register_may_be_the_save() -> None:
    # sub rsp,24; mov rax,rsp; or rax,0 (rax no longer tracked); mov [rax],rbx; mov rbx,[rax]; add rsp,24; ret
    # and the CFI saying so: rbx at CFA-32 from the store on, which the code cannot deny
    code = bytes.fromhex("4883ec18 4889e0 4883c800 488918 488b18 4883c418 c3")
    cfi = [advance_loc(4), def_cfa_offset(32), advance_loc(10), offset(3, 4), advance_loc(7), def_cfa_offset(8)]
    verdict, reason, findings = check([(START, len(code), cfi)], code=code)[START]
    assert verdict == _core.CHECK_UNDECIDED and not findings, (reason, findings)
    assert "rbx = c-32" in reason


def test_jump_over_a_prefix_that_changes_the_instruction() -> None:
    # jmp to the 89 e5 of 48 89 e5 (mov ebp,esp, not mov rbp,rsp); ret
    outcome, reason, _, _ = run("eb01 4889e5 c3")
    assert outcome == _core.SYNTH_UNDECIDED
    assert reason == "the branch at 0x1000 goes into the middle of the instruction at 0x1003"
    # over a lock prefix it is the same instruction: je 1f+1; 1: lock cmpxchg [rdi],edx; ret
    outcome, reason, _, _ = run("7401 f00fb117 c3")
    assert outcome == _core.SYNTH_DECIDED, reason


def test_jump_table_entry_into_the_middle_of_an_instruction() -> None:
    # cmp edi,1; ja 9f; lea rdx,[rip+T]; movsxd rax,[rdx+rdi*4]; add rax,rdx; jmp rax;
    # c0: ret; c1: mov eax,0xc3c3c3c3; ret; 9: ret; T: c0-T, c1+1-T
    code = "83ff01 7717 488d1511000000 486304ba 4801d0 ffe0 c3 b8c3c3c3c3 c3 c3 f8ffffff faffffff"
    outcome, reason, _, _ = run(code, segments=True)
    assert outcome == _core.SYNTH_UNDECIDED
    assert reason == "entry 1 of the jump table at 0x101d goes into the middle of an instruction (0x1017)"


# cmp R,1; ja 9f; [mov ecx,edi;] lea rdx,[rip+T]; movsxd rax,[rdx+I*4]; add rax,rdx; jmp rax;
# c0: ret; c1: ret; c2: push rbx; pop rbx; ret; 9: ret; T: c0-T, c1-T, c2-T
def test_jump_table_bound_compared_on_another_register_is_not_taken() -> None:
    # R = esi, I = rdi: the cmp says nothing about the index, so every entry on code is a case
    code = "83fe01 7715 488d150f000000 486304ba 4801d0 ffe0 c3 c3 535bc3 c3 faffffff fbffffff fcffffff"
    outcome, reason, cfa, _ = run(code, segments=True)
    assert outcome == _core.SYNTH_DECIDED, reason
    assert cfa[START + 0x17] == (RSP, 8), "the third entry's case is reached"
    assert COUNTS["jump_tables"] == 1


def test_jump_table_bound_follows_a_copy_of_the_index() -> None:
    # R = edi, copied to ecx, I = rcx: two entries, the third (on code) is not a case
    code = "83ff01 7717 89f9 488d150f000000 4863048a 4801d0 ffe0 c3 c3 535bc3 c3 faffffff fbffffff fcffffff"
    outcome, reason, cfa, _ = run(code, segments=True)
    assert outcome == _core.SYNTH_DECIDED, reason
    assert START + 0x17 in cfa and START + 0x18 in cfa and START + 0x19 not in cfa


def test_jump_table_bound_follows_zero_extension_and_a_compared_load() -> None:
    # cmp dx,1; ja 9f; movzx ecx,dx; (the table as above, indexed by rcx)
    code = "6683fa01 7718 0fb7ca 488d150f000000 4863048a 4801d0 ffe0 c3 c3 535bc3 c3 faffffff fbffffff fcffffff"
    outcome, reason, cfa, _ = run(code, segments=True)
    assert outcome == _core.SYNTH_DECIDED, reason
    assert START + 0x1A in cfa and START + 0x1B not in cfa
    # cmp byte [rdi+8],1; ja 9f; movzx ecx,byte [rdi+8]; (the same table)
    code = "807f0801 7719 0fb64f08 488d150f000000 4863048a 4801d0 ffe0 c3 c3 535bc3 c3 faffffff fbffffff fcffffff"
    outcome, reason, cfa, _ = run(code, segments=True)
    assert outcome == _core.SYNTH_DECIDED, reason
    assert START + 0x1B in cfa and START + 0x1C not in cfa


def test_a_store_through_an_untracked_register_on_one_path_reaches_the_join() -> None:
    # sub rsp,24; test edi,edi; je 1f; mov rax,rsp; or rax,0; mov [rax],rbx; 1: mov rbx,[rsp]; add rsp,24; ret
    # with rbx declared at CFA-32 from 1: on, which only the path through the store could have made true
    code = bytes.fromhex("4883ec18 85ff 740a 4889e0 4883c800 488918 488b1c24 4883c418 c3")
    cfi = [advance_loc(4), def_cfa_offset(32), advance_loc(14), offset(3, 4), advance_loc(4), restore(3),
           advance_loc(4), def_cfa_offset(8)]
    verdict, reason, findings = check([(START, len(code), cfi)], code=code)[START]
    assert verdict == _core.CHECK_UNDECIDED and not findings, (reason, findings)
