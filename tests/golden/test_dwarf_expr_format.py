"""`_core.format_expression(bytes, style)`: readelf's and llvm-dwarfdump's ways of printing an
expression, checked by hand for the expressions real binaries carry, and against the two tools
themselves for every operation CFI may use (one object assembled with gas `.cfi_escape`, where each
expression is a DW_CFA_val_expression of rbx).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from fastunwind import _core
from fastunwind.cfi import Rule, RuleKind

from tests.support.expr_reference import (
    abs_, addr, and_, bra, breg, bregx, const1s, const1u, const2s, const2u, const4s, const4u, const8s,
    const8u, consts, constu, deref, deref_size, div, drop, dup, eq, ge, gt, le, lit, lt, minus, mod, mul,
    ne, neg, nop, not_, or_, over, pick, plus, plus_uconst, reg, regx, rot, shl, shr, shra, skip, swap,
    xor,
)

PLT = bytes.fromhex("77 08 80 00 3f 1a 3b 2a 33 24 22")
DRAP = bytes.fromhex("76 78 06")


@pytest.mark.parametrize("expression, readelf, llvm", [
    (PLT,
     "DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge; "
     "DW_OP_lit3; DW_OP_shl; DW_OP_plus",
     "DW_OP_breg7 RSP+8, DW_OP_breg16 RIP+0, DW_OP_lit15, DW_OP_and, DW_OP_lit11, DW_OP_ge, DW_OP_lit3, "
     "DW_OP_shl, DW_OP_plus"),
    (DRAP, "DW_OP_breg6 (rbp): -8; DW_OP_deref", "DW_OP_breg6 RBP-8, DW_OP_deref"),
    (breg(7, 160) + deref(), "DW_OP_breg7 (rsp): 160; DW_OP_deref", "DW_OP_breg7 RSP+160, DW_OP_deref"),
    (b"", "", ""),
])
def test_known_expressions(expression, readelf, llvm):
    assert _core.format_expression(expression, "readelf") == readelf
    assert _core.format_expression(expression) == readelf  # the default style
    assert _core.format_expression(expression, "llvm") == llvm


def test_rule_describe_uses_the_llvm_style():
    assert Rule(RuleKind.CFA_EXPRESSION, expression=DRAP).describe() == "DW_OP_breg6 RBP-8, DW_OP_deref"
    assert Rule(RuleKind.EXPRESSION, expression=breg(7, 144)).describe() == "[DW_OP_breg7 RSP+144]"
    assert Rule(RuleKind.VAL_EXPRESSION, expression=breg(7, 8)).describe() == "DW_OP_breg7 RSP+8"
    assert Rule(RuleKind.EXPRESSION, expression=PLT).to_json() == {
        "kind": "expression", "expression": PLT.hex(), "text": _core.format_expression(PLT, "llvm")}


def test_every_byte_and_truncation_formats_without_raising():
    """The printers decode untrusted bytes: any opcode, any truncation, never an exception."""
    for opcode in range(256):
        for tail in (b"", b"\x80", b"\x01\x02\x03\x04\x05\x06\x07\x08\x09"):
            for style in ("readelf", "llvm"):
                assert isinstance(_core.format_expression(bytes([opcode]) + tail, style), str)


# ---- against the oracles ------------------------------------------------------------------------------

ORACLE_EXPRESSIONS = [
    ("plt", PLT),
    ("drap", DRAP),
    ("constants", lit(0) + lit(31) + const1u(200) + const1s(-3) + const2u(0x1234) + const2s(-2)
     + const4u(0x12345678) + const4s(-5) + const8u(0x1122334455667788) + const8s(-7) + constu(624485)
     + consts(-123)),
    ("stack and arithmetic", dup() + drop() + over() + pick(2) + swap() + rot() + abs_() + and_() + div()
     + minus() + mod() + mul() + neg() + not_() + or_() + plus() + plus_uconst(16) + shl() + shr() + shra()
     + xor()),
    ("relations and branches", eq() + ge() + gt() + le() + lt() + ne() + skip(3) + bra(-2) + nop()),
    ("general registers", reg(0) + reg(7) + reg(16) + breg(16, 0) + breg(5, -1) + bregx(16, 4) + bregx(3, -8)),
    ("registers past rip", reg(31) + regx(17) + regx(100) + bregx(33, -8) + breg(31, -1)),
    ("deref and addr", lit(8) + deref_size(4) + addr(0x401000)),
]

LLVM_DWARFDUMP = "llvm-dwarfdump-14"


@pytest.fixture(scope="module")
def oracle_outputs(tmp_path_factory):
    """{name: (readelf text, llvm text)} from one gas-built object."""
    if not shutil.which("gcc") or not shutil.which(LLVM_DWARFDUMP):
        pytest.skip("gcc and llvm-dwarfdump-14 are needed")
    lines = ["\t.text", "f:", "\t.cfi_startproc"]
    for _, expression in ORACLE_EXPRESSIONS:
        assert len(expression) < 128
        body = bytes([0x16, 3, len(expression)]) + expression  # DW_CFA_val_expression rbx, block
        lines += ["\t.cfi_escape " + ",".join(f"0x{b:02x}" for b in body), "\tnop"]
    lines += ["\t.cfi_endproc", ""]
    directory = tmp_path_factory.mktemp("expressions")
    source, obj = directory / "expressions.s", directory / "expressions.o"
    source.write_text("\n".join(lines))
    subprocess.run(["gcc", "-c", "-o", obj, source], check=True)
    readelf = subprocess.run(["readelf", "--debug-dump=frames", obj], capture_output=True, text=True,
                             check=True, env={"LC_ALL": "C"}).stdout
    llvm = subprocess.run([LLVM_DWARFDUMP, "--eh-frame", obj], capture_output=True, text=True, check=True).stdout
    readelf_texts = re.findall(r"DW_CFA_val_expression: r3 \(rbx\) \((.*)\)$", readelf, re.M)
    llvm_texts = re.findall(r"DW_CFA_val_expression: RBX (.*)$", llvm, re.M)
    assert len(readelf_texts) == len(llvm_texts) == len(ORACLE_EXPRESSIONS), (readelf, llvm)
    return {name: pair for (name, _), pair in zip(ORACLE_EXPRESSIONS, zip(readelf_texts, llvm_texts))}


@pytest.mark.parametrize("name, expression", ORACLE_EXPRESSIONS, ids=[n for n, _ in ORACLE_EXPRESSIONS])
def test_readelf_style_matches_readelf(name, expression, oracle_outputs):
    assert _core.format_expression(expression, "readelf") == oracle_outputs[name][0]




@pytest.mark.parametrize("name, expression", [
    pytest.param(n, e) for n, e in ORACLE_EXPRESSIONS], ids=[n for n, _ in ORACLE_EXPRESSIONS])
def test_llvm_style_matches_llvm_dwarfdump(name, expression, oracle_outputs):
    assert _core.format_expression(expression, "llvm") == oracle_outputs[name][1]
