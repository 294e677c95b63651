"""Comparison of fastunwind's rows with llvm-dwarfdump-14, which prints full expressions and register
rules where readelf abbreviates them ("exp", "vexp").

llvm-dwarfdump prints each FDE's rows as `  0xADDR: CFA=RSP+8: RBX=[CFA-16], RIP=[CFA-8]`
(UnwindLocation::dump in LLVM 14): `[CFA+n]` offset, `CFA+n` val_offset, `R9` register,
`[DW_OP_...]` expression, `DW_OP_...` val_expression, `undefined`, `same`; registers in column
order. The same text is rendered here from fastunwind's rows and compared FDE by FDE.

One known LLVM 14 divergence is allowed: its DW_CFA_remember_state saves the register rules but
not the CFA rule, so after DW_CFA_restore_state it keeps the current CFA. DWARF 5 §6.4.2.4 pushes
"the set of rules for every register" (the CFA included, as libgcc's unwinder and readelf do; GCC's
epilogues rely on it, see parca-agent PR #841 on this very libc pattern). Rows may therefore differ
in their CFA alone, and only in FDEs that use DW_CFA_restore_state; readelf's golden test pins our
CFA there.
"""

from __future__ import annotations

import re
import subprocess

from fastunwind import _core
from fastunwind.cfi import EH_FRAME, CfiSection, Rule, RuleKind, cfi_sections
from fastunwind.elf import ElfFile

LLVM_DWARFDUMP = "llvm-dwarfdump-14"
LLVM_REGISTERS = ["RAX", "RDX", "RCX", "RBX", "RSI", "RDI", "RBP", "RSP",
                  "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15", "RIP"]

FDE_HEADER = re.compile(r"^([0-9a-f]{8,16}) [0-9a-f]{8,16} [0-9a-f]{8,16} FDE ")
ROW = re.compile(r"^  0x([0-9a-f]+): (.*)$")

def llvm_register(column: int) -> str:
    return LLVM_REGISTERS[column] if column < len(LLVM_REGISTERS) else f"reg{column}"


def llvm_location(rule: Rule) -> str:
    kind = rule.kind
    if kind == RuleKind.CFA_REG_OFFSET:
        return llvm_register(rule.register) + (f"{rule.offset:+d}" if rule.offset else "")
    if kind in (RuleKind.OFFSET, RuleKind.VAL_OFFSET):
        text = "CFA" + (f"{rule.offset:+d}" if rule.offset else "")
        return f"[{text}]" if kind == RuleKind.OFFSET else text
    if kind == RuleKind.REGISTER:
        return llvm_register(rule.register)
    if kind == RuleKind.UNDEFINED:
        return "undefined"
    if kind == RuleKind.SAME_VALUE:
        return "same"
    text = _core.format_expression(rule.expression, "llvm")
    return f"[{text}]" if kind == RuleKind.EXPRESSION else text


def our_rows(section: CfiSection) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for fde in section.fdes():
        lines = []
        for row in section.rows(fde):
            text = f"CFA={llvm_location(row.cfa)}"
            registers = [f"{llvm_register(c)}={llvm_location(r)}" for c, r in sorted(row.registers.items())]
            if registers:
                text += ": " + ", ".join(registers)
            lines.append(f"0x{row.start:x}: {text}")
        out[fde.offset] = lines
    return out


def llvm_rows(path: str, section_name: str) -> dict[int, list[str]]:
    """Rows per FDE offset of one section. llvm-dwarfdump-14's --eh-frame is an alias of
    --debug-frame: it dumps both sections, each under a "<name> contents:" heading."""
    result = subprocess.run([LLVM_DWARFDUMP, "--debug-frame", path], capture_output=True, text=True, check=True)
    out: dict[int, list[str]] = {}
    current: list[str] | None = None
    in_section = False
    for line in result.stdout.splitlines():
        if line.endswith(" contents:"):
            in_section = line == f"{section_name} contents:"
            current = None
            continue
        header = FDE_HEADER.match(line)
        if header:
            current = out.setdefault(int(header.group(1), 16), []) if in_section else None
            continue
        if line and not line.startswith(" "):
            current = None  # a CIE
            continue
        row = ROW.match(line)
        if row and current is not None:
            current.append(f"0x{row.group(1)}: {row.group(2)}")
    return out


def fdes_restoring_state(path: str, section_name: str) -> set[int]:
    """Offsets of the FDEs in `section_name` whose instructions include DW_CFA_restore_state (readelf -wf)."""
    listing = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True, text=True).stdout
    found: set[int] = set()
    current_section = None
    current_fde = None
    for line in listing.splitlines():
        if line.startswith("Contents of the "):
            current_section = line.split()[3]
        elif FDE_HEADER.match(line):
            current_fde = int(line.split()[0], 16)
        elif line.strip() == "DW_CFA_restore_state" and current_section == section_name and current_fde is not None:
            found.add(current_fde)
    return found


def cfa_only_difference(ours: str, theirs: str) -> bool:
    """The rows differ in their CFA rule and nothing else."""
    def split(text: str) -> tuple[str, str, str]:
        address, _, rest = text.partition(": CFA=")
        cfa, _, registers = rest.partition(": ")
        return address, cfa, registers

    a, b = split(ours), split(theirs)
    return a[0] == b[0] and a[2] == b[2] and a[1] != b[1]


def compare(path: str) -> int:
    """Compare every FDE row of `path` with llvm-dwarfdump-14; return the number of rows compared."""
    with ElfFile.open(path) as elf:
        sections = list(cfi_sections(elf, strict=True))
    assert sections, f"{path} has no CFI"
    compared = 0
    for section in sections:
        theirs = llvm_rows(path, ".eh_frame" if section.kind == EH_FRAME else ".debug_frame")
        ours = our_rows(section)
        assert sorted(ours) == sorted(theirs), f"{path} {section.name}: FDE offsets differ"
        restoring = None
        for offset, lines in ours.items():
            if lines != theirs[offset]:
                if restoring is None:
                    restoring = fdes_restoring_state(path, section.name)
                allowed = offset in restoring and len(lines) == len(theirs[offset]) and all(
                    a == b or cfa_only_difference(a, b) for a, b in zip(lines, theirs[offset])
                )
                assert allowed, (
                    f"{path} {section.name} FDE at 0x{offset:x}:\n  ours:  {lines}\n  llvm:  {theirs[offset]}"
                )
            compared += len(lines)
    return compared
