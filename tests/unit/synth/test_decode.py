"""The decoder's fast path (native/core/synth_decode_fast.c) held to Zydis on hand-assembled
instructions: every prefix, ModRM, SIB, displacement, RIP-relative and immediate form it covers must
give exactly Zydis's summary (length, registers written, operands), every form it leaves to Zydis must
be left, and no cut-off instruction may be answered. Bytes from `as` (AT&T syntax in the comments);
the encodings are those of the Intel SDM vol. 2, chapter 2 and appendix A."""

from __future__ import annotations

import pytest

from fastunwind import _core

ADDRESS = 0x401000

#: (bytes, what they are): the fast path answers these, exactly as Zydis does
FAST = [
    # ModRM register-direct, both directions, every width, REX.R/B
    ("4889e5", "mov %rsp,%rbp"),
    ("4889ec", "mov %rbp,%rsp"),
    ("89c7", "mov %eax,%edi"),
    ("6689c7", "mov %ax,%di (66)"),
    ("88c4", "mov %al,%ah (no REX: ah)"),
    ("4088c4", "mov %al,%spl (REX: spl)"),
    ("4d89c1", "mov %r8,%r9 (REX.WRB)"),
    ("8b07", "mov (%rdi),%eax"),
    # ModRM memory: mod 0/1/2, SIB with and without index, no base, RIP-relative, r12/r13 bases
    ("488b4508", "mov 0x8(%rbp),%rax (disp8)"),
    ("488b45f8", "mov -0x8(%rbp),%rax (negative disp8)"),
    ("488b8500010000", "mov 0x100(%rbp),%rax (disp32)"),
    ("488b0424", "mov (%rsp),%rax (SIB, no index)"),
    ("488b442410", "mov 0x10(%rsp),%rax"),
    ("488b04c8", "mov (%rax,%rcx,8),%rax (SIB scale 8)"),
    ("4a8b0460", "mov (%rax,%r12,2),%rax (REX.X)"),
    ("498b0424", "mov (%r12),%rax (REX.B base 100b: SIB)"),
    ("498b4500", "mov 0x0(%r13),%rax (REX.B base 101b: disp8)"),
    ("488b04cd10000000", "mov 0x10(,%rcx,8),%rax (SIB, no base)"),
    ("488b0425efbeadde", "mov 0xffffffffdeadbeef,%rax (SIB, neither)"),
    ("488b0510000000", "mov 0x10(%rip),%rax"),
    ("4c8b2d00000080", "mov -0x80000000(%rip),%r13"),
    ("64488b042528000000", "mov %fs:0x28,%rax"),
    ("65488b0500000000", "mov %gs:0x0(%rip),%rax"),
    ("48890424", "mov %rax,(%rsp) (a store)"),
    ("4c896c2418", "mov %r13,0x18(%rsp)"),
    # mov with immediates: imm8, imm16, imm32 (zero- and sign-extended), imm64
    ("b0ff", "mov $0xff,%al"),
    ("b4ff", "mov $0xff,%ah"),
    ("66b8ffff", "mov $0xffff,%ax"),
    ("b8ffffffff", "mov $0xffffffff,%eax"),
    ("49bbefcdab8967452301", "movabs $0x0123456789abcdef,%r11"),
    ("48c7c0ffffffff", "mov $-1,%rax"),
    ("c7042401000000", "movl $1,(%rsp)"),
    ("66c704240100", "movw $1,(%rsp)"),
    ("c6450001", "movb $1,0x0(%rbp)"),
    ("48630c88", "movslq (%rax,%rcx,4),%rcx"),
    ("4863c7", "movslq %edi,%rax"),
    ("63c7", "movsxd %edi,%eax (no REX.W)"),
    # lea
    ("488d6c2408", "lea 0x8(%rsp),%rbp"),
    ("8d4401ff", "lea -0x1(%rcx,%rax,1),%eax (32-bit destination)"),
    ("488d05f0ffffff", "lea -0x10(%rip),%rax"),
    ("4c8d14c500000000", "lea 0x0(,%rax,8),%r10"),
    # the arithmetic group: register, memory, accumulator and group-1 immediate forms
    ("4883ec18", "sub $0x18,%rsp"),
    ("4881ec00100000", "sub $0x1000,%rsp"),
    ("4883c408", "add $0x8,%rsp"),
    ("4883e4f0", "and $-16,%rsp"),
    ("4801c8", "add %rcx,%rax"),
    ("4803442408", "add 0x8(%rsp),%rax"),
    ("480104c8", "add %rax,(%rax,%rcx,8)"),
    ("4829c4", "sub %rax,%rsp"),
    ("31c0", "xor %eax,%eax"),
    ("4109c0", "or %eax,%r8d"),
    ("4811d0", "adc %rdx,%rax"),
    ("4819d0", "sbb %rdx,%rax"),
    ("4839f8", "cmp %rdi,%rax"),
    ("3c2f", "cmp $0x2f,%al"),
    ("663d1000", "cmp $0x10,%ax"),
    ("83f80a", "cmp $0xa,%eax"),
    ("4883f8ff", "cmp $-1,%rax"),
    ("48817c2408ffff0000", "cmpq $0xffff,0x8(%rsp)"),
    ("807f0100", "cmpb $0,0x1(%rdi)"),
    ("0480", "add $0x80,%al"),
    ("4805ffffff7f", "add $0x7fffffff,%rax"),
    ("2c01", "sub $1,%al"),
    ("8304240c", "addl $0xc,(%rsp)"),
    ("66830701", "addw $1,(%rdi)"),
    ("8037ff", "xorb $0xff,(%rdi)"),
    # test, xchg
    ("4885c0", "test %rax,%rax"),
    ("84c0", "test %al,%al"),
    ("a801", "test $1,%al"),
    ("a900010000", "test $0x100,%eax"),
    ("f6470102", "testb $2,0x1(%rdi)"),
    ("f7c700010000", "test $0x100,%edi"),
    ("4887c3", "xchg %rax,%rbx"),
    ("48870424", "xchg %rax,(%rsp)"),
    ("86c4", "xchg %al,%ah"),
    # push, pop, leave, ret
    ("55", "push %rbp"),
    ("4154", "push %r12"),
    ("5d", "pop %rbp"),
    ("415f", "pop %r15"),
    ("6a00", "push $0"),
    ("68ffffffff", "push $-1"),
    ("ff742408", "push 0x8(%rsp)"),
    ("41ff33", "push (%r11)"),
    ("c9", "leave"),
    ("c3", "ret"),
    ("f3c3", "repz ret"),
    ("c20800", "ret $8"),
    # branches: rel8 and rel32, forwards and backwards, conditions, indirect
    ("e800000000", "call .+5"),
    ("e8fbffffff", "call . (backwards)"),
    ("ffd0", "call *%rax"),
    ("41ff5510", "call *0x10(%r13)"),
    ("ff15f0ffffff", "call *-0x10(%rip)"),
    ("e9fbffffff", "jmp ."),
    ("eb00", "jmp .+2"),
    ("ebfe", "jmp . (rel8)"),
    ("ffe0", "jmp *%rax"),
    ("41ffe3", "jmp *%r11"),
    ("ff24c5a0104000", "jmp *0x4010a0(,%rax,8)"),
    ("7702", "ja .+4"),
    ("7302", "jae .+4"),
    ("74fe", "je ."),
    ("0f8710000000", "ja .+0x16"),
    ("0f8300000000", "jae .+6"),
    ("0f84f0ffffff", "je (backwards)"),
    ("0f8f00000000", "jg"),
    # shifts, group 3, inc/dec, sign extension of rax
    ("48c1e004", "shl $4,%rax"),
    ("d1f8", "sar %eax"),
    ("48d3e8", "shr %cl,%rax"),
    ("c02f02", "shrb $2,(%rdi)"),
    ("48f7d8", "neg %rax"),
    ("f7d0", "not %eax"),
    ("48f7e1", "mul %rcx"),
    ("f6e1", "mul %cl"),
    ("48f7f9", "idiv %rcx"),
    ("f7f1", "div %ecx"),
    ("48f7ea", "imul %rdx"),
    ("48ffc0", "inc %rax"),
    ("ff4f08", "decl 0x8(%rdi)"),
    ("fec8", "dec %al"),
    ("4898", "cltq"),
    ("98", "cwtl"),
    ("4899", "cqto"),
    ("99", "cltd"),
    ("486bc00c", "imul $0xc,%rax,%rax"),
    ("4869c000010000", "imul $0x100,%rax,%rax"),
    ("480fafc1", "imul %rcx,%rax"),
    # the 0F map: cmovcc, setcc, movzx/movsx, bit tests, double shifts, bswap
    ("480f44c1", "cmove %rcx,%rax"),
    ("0f4f0424", "cmovg (%rsp),%eax"),
    ("0f94c0", "sete %al"),
    ("410f95c0", "setne %r8b"),
    ("0f940424", "sete (%rsp)"),
    ("0fb6c0", "movzbl %al,%eax"),
    ("0fb6c4", "movzbl %ah,%eax"),
    ("480fbf07", "movswq (%rdi),%rax"),
    ("0fb74708", "movzwl 0x8(%rdi),%eax"),
    ("480fbec0", "movsbq %al,%rax"),
    ("480fa3c8", "bt %rcx,%rax"),
    ("480fabc8", "bts %rcx,%rax"),
    ("480fbdc0", "bsr %rax,%rax"),
    ("480fa4d004", "shld $4,%rdx,%rax"),
    ("480fadd0", "shrd %cl,%rdx,%rax"),
    ("480fc8", "bswap %rax"),
    ("410fcc", "bswap %r12d"),
    # nops, endbr64, traps
    ("90", "nop"),
    ("6690", "xchg %ax,%ax"),
    ("0f1f00", "nopl (%rax)"),
    ("0f1f4000", "nopl 0x0(%rax)"),
    ("0f1f440000", "nopl 0x0(%rax,%rax,1)"),
    ("660f1f440000", "nopw 0x0(%rax,%rax,1)"),
    ("0f1f8000000000", "nopl 0x0(%rax)"),
    ("662e0f1f840000000000", "cs nopw 0x0(%rax,%rax,1)"),
    ("66662e0f1f840000000000", "data16 cs nopw 0x0(%rax,%rax,1)"),
    ("f30f1efa", "endbr64"),
    ("cc", "int3"),
    ("f4", "hlt"),
    ("0f0b", "ud2"),
    # SSE moves: loads and stores of each width, register forms, movd/movq with general registers
    ("0f100424", "movups (%rsp),%xmm0"),
    ("0f110424", "movups %xmm0,(%rsp)"),
    ("660f11442410", "movupd %xmm0,0x10(%rsp)"),
    ("f30f11442404", "movss %xmm0,0x4(%rsp)"),
    ("f20f11442408", "movsd %xmm0,0x8(%rsp)"),
    ("f20f10c1", "movsd %xmm1,%xmm0"),
    ("0f2907", "movaps %xmm0,(%rdi)"),
    ("440f2807", "movaps (%rdi),%xmm8"),
    ("660f7f07", "movdqa %xmm0,(%rdi)"),
    ("f30f7f07", "movdqu %xmm0,(%rdi)"),
    ("f30f6f07", "movdqu (%rdi),%xmm0"),
    ("660fd60424", "movq %xmm0,(%rsp)"),
    ("0f57c0", "xorps %xmm0,%xmm0"),
    ("660fefc0", "pxor %xmm0,%xmm0"),
    ("0f2ec1", "ucomiss %xmm1,%xmm0"),
    ("660f2f0424", "comisd (%rsp),%xmm0"),
    ("660f6ec7", "movd %edi,%xmm0"),
    ("66480f6ec7", "movq %rdi,%xmm0"),
    ("660f6e07", "movd (%rdi),%xmm0"),
    ("660f7ec7", "movd %xmm0,%edi"),
    ("66480f7ec7", "movq %xmm0,%rdi"),
    ("660f7e07", "movd %xmm0,(%rdi)"),
    ("f30f7e07", "movq (%rdi),%xmm0"),
]

#: (bytes, what they are): left to Zydis
FALLBACK = [
    ("f0480fb10f", "lock cmpxchg %rcx,(%rdi)"),
    ("f0830701", "lock addl $1,(%rdi)"),
    ("67488b07", "mov (%edi),%rax (address size)"),
    ("2e488b07", "mov %cs:(%rdi),%rax"),
    ("3effe0", "notrack jmp *%rax"),
    ("f2e800000000", "bnd call"),
    ("f2c3", "bnd ret"),
    ("c5f877", "vzeroupper (VEX)"),
    ("c4e27d18c0", "vbroadcastss %xmm0,%ymm0 (VEX)"),
    ("62f1fd48100424", "vmovupd (%rsp),%zmm0 (EVEX)"),
    ("660f3800c1", "pshufb %xmm1,%xmm0 (0F 38)"),
    ("660f3a0fc108", "palignr $8,%xmm1,%xmm0 (0F 3A)"),
    ("f3a4", "rep movsb"),
    ("f348ab", "rep stos %rax,(%rdi)"),
    ("0f05", "syscall"),
    ("0fa2", "cpuid"),
    ("c8100000", "enter $0x10,$0"),
    ("8f00", "pop (%rax)"),
    ("9c", "pushf"),
    ("4190", "xchg %eax,%r8d"),
    ("f390", "pause"),
    ("e2fe", "loop ."),
    ("e3fe", "jrcxz ."),
    ("66e800000000", "call with 66 (ignored in 64-bit mode)"),
    ("d9c0", "fld %st(0) (x87)"),
    ("0fb10f", "cmpxchg %ecx,(%rdi)"),
    ("0fc10f", "xadd %ecx,(%rdi)"),
    ("f30fb8c0", "popcnt %eax,%eax"),
    ("f30fbcc0", "tzcnt %eax,%eax"),
    ("d1f0", "shl %eax (/6)"),
    ("f6c801", "test $1,%al (F6 /1)"),
    ("0f1fc8", "nop %eax (0F 1F /1)"),
    ("40404889c0", "two REX prefixes"),
    ("48f2c3", "REX before a legacy prefix"),
    ("66f30f6f07", "66 and F3 together"),
    ("6464488b07", "fs twice"),
    ("f30f1ec8", "rdsspd %eax"),
]


def compare(code: bytes) -> dict[str, int | str]:
    result = _core.compare_decoders(code, ADDRESS)
    assert result["mismatches"] == 0, f"{code.hex()}: at 0x{result['first_mismatch']:x}: {result['first_difference']}"
    return result


@pytest.mark.parametrize("hex_bytes, what", FAST, ids=[what for _, what in FAST])
def test_fast_path_answers_as_zydis(hex_bytes: str, what: str) -> None:
    result = compare(bytes.fromhex(hex_bytes))
    assert result["instructions"] == 1, f"{what}: the case must be one instruction"
    assert result["fast"] == 1, f"{what}: left to Zydis"


@pytest.mark.parametrize("hex_bytes, what", FALLBACK, ids=[what for _, what in FALLBACK])
def test_other_encodings_are_left_to_zydis(hex_bytes: str, what: str) -> None:
    result = compare(bytes.fromhex(hex_bytes))
    assert result["instructions"] == 1, f"{what}: the case must be one instruction"
    assert result["fast"] == 0, f"{what}: answered by the fast path"


@pytest.mark.parametrize("hex_bytes, what", FAST, ids=[what for _, what in FAST])
def test_cut_off_instructions_are_never_answered(hex_bytes: str, what: str) -> None:
    """Every proper prefix of an instruction is rejected by Zydis; the fast path must not answer
    for it either (the comparison counts that as a mismatch), and whatever the remaining bytes
    decode as must agree too."""
    code = bytes.fromhex(hex_bytes)
    for length in range(1, len(code)):
        compare(code[:length])
