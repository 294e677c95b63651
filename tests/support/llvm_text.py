"""Helpers for the api layer: the real files used, parsers for the LLVM 14 oracles' text, and a
session-built `.debug_frame` program (with its stripped twin and separate debug file).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LD_SO = "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
LLVM_READELF = "llvm-readelf-14"
LLVM_DWARFDUMP = "llvm-dwarfdump-14"

#: llvm-dwarfdump's names of the DWARF x86-64 registers 0-16 (X86RegisterInfo), column by name
LLVM_REGISTER_COLUMNS = {name: column for column, name in enumerate(
    "RAX RDX RCX RBX RSI RDI RBP RSP R8 R9 R10 R11 R12 R13 R14 R15 RIP".split())}


def require(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


def run(command: list, **kwargs) -> str:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, check=True,
                          env={**os.environ, "LC_ALL": "C"}, **kwargs).stdout


# ---- llvm-readelf-14 --unwind: the .eh_frame_hdr table ----------------------------------------------
@dataclass
class HdrOracle:
    eh_frame_ptr: int
    fde_count: int
    table_encoding: int
    entries: list[tuple[int, int]]  # (initial_location, address)


def llvm_eh_frame_hdr(path: str) -> HdrOracle:
    """Parse the EHFrameHeader block of `llvm-readelf-14 --unwind FILE`."""
    text = run([LLVM_READELF, "--unwind", path])
    header = text.split(".eh_frame section at offset", 1)[0]

    def field(name: str) -> int:
        match = re.search(rf"^\s*{name}: (0x[0-9a-f]+|\d+)$", header, re.M)
        assert match, f"no {name} in llvm-readelf output"
        return int(match.group(1), 0)

    entries = [(int(location, 16), int(address, 16)) for location, address in re.findall(
        r"initial_location: 0x([0-9a-f]+)\s+address: 0x([0-9a-f]+)", header)]
    return HdrOracle(field("eh_frame_ptr"), field("fde_count"), field("table_enc"), entries)


# ---- llvm-dwarfdump-14 --eh-frame: rows ---------------------------------------------------------------
@dataclass
class LlvmRow:
    address: int
    cfa: str
    registers: dict[str, str]  # llvm register name -> rule text


@dataclass
class LlvmFde:
    end: int  #: the end of the FDE's pc range (its begin is its key in llvm_fdes)
    rows: list[LlvmRow]
    #: the instruction listing ("DW_CFA_def_cfa_offset: +16", ...). Note that llvm-dwarfdump-14 does
    #: not restore the CFA rule on DW_CFA_restore_state (only the register rules; readelf and libgcc
    #: restore both), so its rows after one are not an oracle for the CFA.
    instructions: list[str]


_FDE_HEADER = re.compile(r"^[0-9a-f]{8} [0-9a-f]{8,16} [0-9a-f]{8,16} FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.\.([0-9a-f]+)$")
_ROW = re.compile(r"^  0x([0-9a-f]+): CFA=(.*)$")


def llvm_fdes(path: str, section: str = ".eh_frame") -> dict[int, LlvmFde]:
    """{pc_begin: FDE} of every FDE of `section` in `llvm-dwarfdump-14 --debug-frame FILE` (in LLVM
    14, --eh-frame is an alias of --debug-frame: both sections are printed, each after a
    "<name> contents:" line). A row line is "  0x3c04f: CFA=<cfa rule>: REG=<rule>, REG=<rule>";
    the CFA rule may itself contain ", " (expression operations), never ": "."""
    out: dict[int, LlvmFde] = {}
    current: LlvmFde | None = None
    in_section = False
    for line in run([LLVM_DWARFDUMP, "--debug-frame", path]).splitlines():
        if line.endswith(" contents:"):
            in_section = line == f"{section} contents:"
            current = None
            continue
        if not in_section:
            continue
        header = _FDE_HEADER.match(line)
        if header:
            current = out.setdefault(int(header.group(1), 16), LlvmFde(int(header.group(2), 16), [], []))
            continue
        if line and not line.startswith(" "):
            current = None
        if current is None:
            continue
        if line.startswith("  DW_CFA_"):
            current.instructions.append(line.strip())
            continue
        row = _ROW.match(line)
        if row:
            cfa, _, rest = row.group(2).partition(": ")
            registers = {}
            for item in re.split(r", (?=\w+=)", rest) if rest else []:
                name, _, rule = item.partition("=")
                registers[name] = rule
            current.rows.append(LlvmRow(int(row.group(1), 16), cfa, registers))
    return out


def assert_rows_match_llvm(section, fde, llvm: list[LlvmRow]) -> None:
    """The FDE's rows equal llvm-dwarfdump's: same row addresses; expression rules by their exact
    text (Rule.describe() and to_json()["text"] use llvm's style); other rules modulo the spelling
    differences of describe() (readelf-like lower-case register names, an explicit "+0")."""
    from fastunwind.cfi import RuleKind

    rows = section.rows(fde)
    assert [row.start for row in rows] == [row.address for row in llvm]
    for ours, theirs in zip(rows, llvm):
        if ours.cfa.kind == RuleKind.CFA_EXPRESSION:
            assert ours.cfa.describe() == theirs.cfa
            assert ours.cfa.to_json()["text"] == theirs.cfa
        else:
            # describe() is readelf-like ("rsp+8", "rdi+0"); llvm prints "RSP+8", "RDI"
            assert ours.cfa.describe().upper().removesuffix("+0") == theirs.cfa
        assert {LLVM_REGISTER_COLUMNS[name] for name in theirs.registers} == set(ours.registers)
        for name, text in theirs.registers.items():
            rule = ours.registers[LLVM_REGISTER_COLUMNS[name]]
            if rule.kind in (RuleKind.OFFSET, RuleKind.VAL_OFFSET):
                # describe() says "[CFA+0]" where llvm says "[CFA]"
                assert rule.describe().replace("CFA+0", "CFA") == text, name
            elif rule.kind == RuleKind.REGISTER:
                assert rule.describe().upper() == text, name  # "r9" / "R9"
            else:
                assert rule.describe() == text, name
            if rule.kind in (RuleKind.EXPRESSION, RuleKind.VAL_EXPRESSION):
                assert f"[{rule.to_json()['text']}]" == text or rule.to_json()["text"] == text



# ---- where a stack begins, by the LLVM oracles --------------------------------------------------------
def entry_point(path: str | Path) -> int:
    """The file's ELF entry point (llvm-readelf-14 -h)."""
    match = re.search(r"^\s*Entry point address:\s*(0x[0-9a-fA-F]+)$", run([LLVM_READELF, "-h", path]), re.M)
    assert match, f"no entry point in llvm-readelf's header of {path}"
    return int(match.group(1), 16)


@functools.lru_cache(maxsize=None)
def _eh_frame(path: str) -> tuple[tuple[int, LlvmFde], ...]:
    return tuple(sorted(llvm_fdes(path).items()))


def file_offset_to_svma(path: str | Path, offset: int) -> int | None:
    """The svma of the byte at file `offset` in a PT_LOAD segment (llvm-readelf-14 -l), or None.
    perf script prints a DSO-relative address as that offset (map_ip: ip - map start + pgoff)."""
    for line in run([LLVM_READELF, "-lW", path]).splitlines():
        fields = line.split()
        if fields[:1] == ["LOAD"]:
            start, vaddr, size = int(fields[1], 16), int(fields[2], 16), int(fields[4], 16)
            if start <= offset < start + size:
                return offset - start + vaddr
    return None


def begins_a_stack(path: str | Path, offset: int) -> bool:
    """Whether the code at file `offset` of `path` is a stack's outermost frame by the LLVM oracles:
    llvm-dwarfdump-14's row there leaves the return address undefined (the psABI's end of the call
    chain: glibc's _start, clone3), or no FDE covers it and it lies between the file's entry point
    and the next FDE (ld.so's _start, assembly without CFI: the first code a process runs)."""
    address = file_offset_to_svma(path, offset)
    if address is None:
        return False
    fdes = _eh_frame(str(path))
    covering = [fde for begin, fde in fdes if begin <= address < fde.end]
    if covering:
        rows = [row for row in covering[0].rows if row.address <= address]
        return bool(rows) and rows[-1].registers.get("RIP") == "undefined"
    entry = entry_point(path)
    return entry <= address and not any(entry <= begin <= address for begin, _fde in fdes)

# ---- nm -------------------------------------------------------------------------------------------------
def symbol_addresses(path: str | Path) -> dict[str, int]:
    """Defined text symbols (nm), name -> address."""
    out = {}
    for line in run(["nm", "--defined-only", path]).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            out[parts[2]] = int(parts[0], 16)
    return out


# ---- a .debug_frame program --------------------------------------------------------------------------
DEBUG_FRAME_PROGRAM = r"""
#include <stdio.h>

__attribute__((noinline)) long accumulate(long *values, int count)
{
    long total = 0;
    for (int i = 0; i < count; i++)
        total += values[i] * (i + 1);
    return total;
}

__attribute__((noinline)) long nested(int depth, long seed)
{
    long values[16];
    for (int i = 0; i < 16; i++)
        values[i] = seed + i * depth;
    if (depth > 0)
        values[3] += nested(depth - 1, seed ^ values[5]);
    return accumulate(values, 16);
}

int main(int argc, char **argv)
{
    (void)argv;
    printf("%ld\n", nested(argc + 2, 7));
    return 0;
}
"""


@dataclass
class DebugFrameProgram:
    program: Path         # linked with -g -fno-asynchronous-unwind-tables: .eh_frame (crt) + .debug_frame
    stripped: Path        # debug sections removed, .gnu_debuglink -> debug_file
    debug_file: Path      # objcopy --only-keep-debug
    functions: dict[str, int]


def build_debug_frame_program(directory: Path) -> DebugFrameProgram:
    require("gcc", "objcopy", "nm")
    source = directory / "debug_frame_program.c"
    source.write_text(DEBUG_FRAME_PROGRAM)
    program = directory / "debug_frame_program"
    run(["gcc", "-g", "-fno-asynchronous-unwind-tables", "-O2", "-o", program, source])
    debug_file = directory / "debug_frame_program.debug"
    stripped = directory / "debug_frame_program.stripped"
    run(["objcopy", "--only-keep-debug", program, debug_file])
    run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={debug_file}", program, stripped])
    functions = symbol_addresses(program)
    return DebugFrameProgram(program, stripped, debug_file,
                             {name: functions[name] for name in ("main", "nested", "accumulate", "_start")})
