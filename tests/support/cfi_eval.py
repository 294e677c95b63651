"""Helpers for the cfi_eval layer: build one CIE + FDE with tests/support/cfi_builder.py, evaluate
it with fastunwind, and write expected rules tersely.

    rows = evaluate([advance_loc(4), def_cfa_offset(16)])
    assert rows == [row(0x1000, 0x1004, cfa(7, 8), RA), row(0x1004, END, cfa(7, 16), RA)]
"""

from __future__ import annotations

from tests.support.cfi_builder import *  # noqa: F401,F403  (re-exported for the tests)
from tests.support.cfi_builder import EH_FRAME, FrameSection, def_cfa, offset, parse_section
from fastunwind.cfi import Rule, RuleKind  # after the star import: these names are fastunwind's

PC_BEGIN = 0x1000
PC_RANGE = 0x100
END = PC_BEGIN + PC_RANGE
SECTION_ADDRESS = 0x8000

#: the CIE that every GCC-built x86-64 object starts from: CFA = rsp+8, return address at CFA-8
DEFAULT_CIE = [def_cfa(7, 8), offset(16, 1)]


# ---- expected rules ----------------------------------------------------------------------------------
def cfa(register: int, cfa_offset: int) -> Rule:
    return Rule(RuleKind.CFA_REG_OFFSET, register=register, offset=cfa_offset)


def cfa_expr(expression: bytes) -> Rule:
    return Rule(RuleKind.CFA_EXPRESSION, expression=expression)


def at(cfa_offset: int) -> Rule:
    """DW_CFA_offset and friends: saved at CFA + offset."""
    return Rule(RuleKind.OFFSET, offset=cfa_offset)


def val(cfa_offset: int) -> Rule:
    """DW_CFA_val_offset: the value is CFA + offset."""
    return Rule(RuleKind.VAL_OFFSET, offset=cfa_offset)


def in_register(register: int) -> Rule:
    return Rule(RuleKind.REGISTER, register=register)


def expr(expression: bytes) -> Rule:
    return Rule(RuleKind.EXPRESSION, expression=expression)


def val_expr(expression: bytes) -> Rule:
    return Rule(RuleKind.VAL_EXPRESSION, expression=expression)


SAME = Rule(RuleKind.SAME_VALUE)
UNDEFINED = Rule(RuleKind.UNDEFINED)

#: the register rules of DEFAULT_CIE
RA = {16: at(-8)}


def regs(*extra: dict) -> dict:
    """RA merged with the given {column: rule} dicts (later ones win)."""
    out = dict(RA)
    for more in extra:
        out.update(more)
    return out


def row(start: int, end: int, cfa_rule: Rule, registers: dict) -> tuple:
    return (start, end, cfa_rule, dict(registers))


# ---- evaluation ----------------------------------------------------------------------------------------
def build(fde_instructions: list, *, cie_instructions: list | None = None, kind: int = EH_FRAME,
          code_align: int = 1, data_align: int = -8, pc_begin: int = PC_BEGIN,
          pc_range: int = PC_RANGE, **cie_fields) -> FrameSection:
    builder = FrameSection(kind, SECTION_ADDRESS)
    if kind == EH_FRAME:
        cie_fields.setdefault("augmentation", "zR")
    else:
        cie_fields.setdefault("version", 4)
        cie_fields.setdefault("augmentation", "")
    cie = builder.cie(code_align=code_align, data_align=data_align,
                      instructions=DEFAULT_CIE if cie_instructions is None else cie_instructions, **cie_fields)
    builder.fde(cie, pc_begin=pc_begin, pc_range=pc_range, instructions=fde_instructions)
    return builder


def evaluate_section(fde_instructions: list, strict: bool = True, **options):
    """(section, fde) of a one-CIE, one-FDE section."""
    section = parse_section(build(fde_instructions, **options), strict=strict)
    fdes = list(section.fdes())
    assert len(fdes) == 1, (fdes, section.errors)
    return section, fdes[0]


def evaluate(fde_instructions: list, **options) -> list[tuple]:
    """The FDE's rows as (start, end, cfa rule, {column: rule}) tuples."""
    section, fde = evaluate_section(fde_instructions, **options)
    return [(r.start, r.end, r.cfa, dict(r.registers)) for r in section.rows(fde)]
