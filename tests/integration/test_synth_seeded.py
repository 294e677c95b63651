"""`synth` on a program built here: a hand-written function without CFI (two saves and a frame)
gets synthesized rows, a function whose CFI misses its `sub rsp` gets corrected rows in the
`repair` view only, and the compiler's own FDEs stay as declared. The debug file written from the
table reads in readelf and llvm-dwarfdump-14 as synth prints it, and gdb, finding it by build-id,
backtraces through both functions to main, where without it it stops."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fastunwind import synth
from fastunwind.elf import ElfFile
from tests.support.llvm_rows import LLVM_DWARFDUMP, compare
from tests.support.tools import run_readelf

ASSEMBLY = r"""
        .text
        .globl no_cfi_frame, missing_sub_adjust
        .type no_cfi_frame, @function
no_cfi_frame:                     # hand-written code without CFI: two saves and a frame
        push %rbx
        push %r12
        sub $40, %rsp
        mov %rdi, %r12
        mov %rsi, %rdi
        call *%r12
        add $40, %rsp
        pop %r12
        pop %rbx
        ret
        .size no_cfi_frame, .-no_cfi_frame

        .type missing_sub_adjust, @function
missing_sub_adjust:               # sub rsp without .cfi_adjust_cfa_offset
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        sub $32, %rsp
        mov %rdi, %rbx
        mov %rsi, %rdi
        call *%rbx
        add $32, %rsp
        pop %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size missing_sub_adjust, .-missing_sub_adjust
        .section .note.GNU-stack,"",@progbits
"""

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
long no_cfi_frame(long (*)(long), long);
long missing_sub_adjust(long (*)(long), long);
__attribute__((noinline)) long leaf(long x) { __asm__ volatile("" ::: "memory"); return x + 1; }
int main(int argc, char **argv) {
    (void)argv;
    printf("%ld\n", no_cfi_frame(leaf, argc) + missing_sub_adjust(leaf, argc));
    return 0;
}
"""

#: (offset from the function's start, CFA, saved registers): what the code does, instruction by instruction
NO_CFI_FRAME_ROWS = [(0x0, "rsp+8", {}), (0x1, "rsp+16", {}), (0x3, "rsp+24", {}), (0x7, "rsp+64", {}),
                     (0xa, "rsp+64", {"r12": "c-24"}), (0x14, "rsp+24", {"r12": "c-24"}), (0x16, "rsp+16", {}),
                     (0x17, "rsp+8", {})]
MISSING_SUB_ADJUST_ROWS = [(0x0, "rsp+8", {}), (0x1, "rsp+16", {}), (0x5, "rsp+48", {}),
                           (0x8, "rsp+48", {"rbx": "c-16"}), (0x11, "rsp+16", {"rbx": "c-16"}), (0x12, "rsp+8", {})]


#: what readelf prints before the rows of a debug file's .debug_frame (its .eh_frame is empty)
READELF_PREAMBLE = b"\nSection '.eh_frame' has no debugging data.\nContents of the .debug_frame section:\n\n"


def build_program(directory: Path) -> Path:
    (directory / "faults.S").write_text(ASSEMBLY)
    (directory / "main.c").write_text(MAIN)
    program = directory / "seeded"
    built = subprocess.run(["gcc", "-O1", "-Wl,--build-id", "-o", str(program), str(directory / "main.c"),
                            str(directory / "faults.S")], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.fail(f"gcc failed:\n{built.stderr}", pytrace=False)
    return program


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_program(tmp_path_factory.mktemp("synth"))


def symbol(path: Path, name: str) -> int:
    with ElfFile.open(str(path)) as elf:
        return next(s.value for s in elf.symbols() if s.name == name)


def rows_of(json: dict[str, object], start: int) -> tuple[str, list[tuple[int, str, dict[str, str]]]]:
    fde = next(f for f in json["fdes"] if f["pc_begin"] == start)  # type: ignore[union-attr,index]
    return fde["origin"], [(row["address"] - start, row["cfa"], {k: v for k, v in row.items()
                                                                  if k not in ("address", "cfa", "ra")})
                           for row in fde["rows"]]


@pytest.mark.parametrize("mode", ["missing", "repair"])
def test_code_without_cfi_gets_the_rows_its_code_implies(program: Path, mode: str) -> None:
    json = synth.to_json(synth.synthesize(str(program), mode))
    assert rows_of(json, symbol(program, "no_cfi_frame")) == ("synthesized", NO_CFI_FRAME_ROWS)


def test_wrong_cfi_is_corrected_in_the_repair_view_only(program: Path) -> None:
    start = symbol(program, "missing_sub_adjust")
    assert rows_of(synth.to_json(synth.synthesize(str(program), "repair")), start) == (
        "corrected", MISSING_SUB_ADJUST_ROWS)
    origin, rows = rows_of(synth.to_json(synth.synthesize(str(program), "missing")), start)
    # the file's own rows: rsp+16 from the push to the pop, the sub not declared
    assert origin == "declared" and rows == [(0x0, "rsp+8", {}), (0x1, "rsp+16", {"rbx": "c-16"}),
                                             (0x12, "rsp+8", {"rbx": "c-16"})]


def test_the_compilers_fdes_stay_declared(program: Path) -> None:
    synthesis = synth.synthesize(str(program), "repair")
    main = symbol(program, "main")
    assert next(r for r in synthesis.ranges if r.start == main).origin == "declared"
    assert synthesis.table.error_count == 0


def gdb_backtraces(program: Path, debug_directory: Path) -> list[list[str]]:
    """The function names of gdb's backtraces at each stop in `leaf`, the debug files looked up under
    `debug_directory` (set before gdb reads the program: -iex)."""
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed")
    result = subprocess.run(["gdb", "-nx", "-batch", "-iex", f"set debug-file-directory {debug_directory}",
                             "-ex", "break leaf", "-ex", "run", "-ex", "bt", "-ex", "continue", "-ex", "bt",
                             str(program)], capture_output=True, text=True, timeout=120)
    stacks: list[list[str]] = []
    for line in result.stdout.splitlines():
        frame = re.match(r"^#(\d+) +(?:0x[0-9a-f]+ in )?(\S+)", line)
        if frame:
            if frame[1] == "0":
                stacks.append([])
            stacks[-1].append(frame[2])
    return stacks


@pytest.fixture(scope="module")
def debug_files(program: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A debug-file-directory per mode, holding the program's debug file at its build-id path."""
    directories = {}
    for mode in ("missing", "repair"):
        directory = tmp_path_factory.mktemp(f"debug-{mode}")
        written = synth.write_debug_file(synth.synthesize(str(program), mode), str(directory))
        assert written.startswith(str(directory / ".build-id")) and written.endswith(".debug")
        directories[mode] = directory
    return directories


def debug_file(directory: Path) -> Path:
    return next(directory.glob(".build-id/*/*.debug"))


def test_readelf_reads_the_debug_file_as_synth_prints_it(program: Path, debug_files: dict[str, Path]) -> None:
    path = debug_file(debug_files["repair"])
    result = run_readelf(["-wN", "-wF", path])
    assert result.returncode == 0 and not result.stderr, result.stderr
    printed = re.sub(rb"  # [^\n]*", b"", synth.render(synth.synthesize(str(program), "repair")))
    assert result.stdout == READELF_PREAMBLE + printed


def test_llvm_dwarfdump_reads_the_debug_file_without_complaint(debug_files: dict[str, Path]) -> None:
    if shutil.which(LLVM_DWARFDUMP) is None:
        pytest.skip(f"{LLVM_DWARFDUMP} is not installed")
    path = debug_file(debug_files["repair"])
    result = subprocess.run([LLVM_DWARFDUMP, "--debug-frame", str(path)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert compare(str(path)) > 0  # every row as our parser reads it, which is what synth prints


def test_gdb_unwinds_through_the_synthesized_and_corrected_rows(program: Path, debug_files: dict[str, Path],
                                                                tmp_path: Path) -> None:
    """Without the debug file gdb stops after both functions (no CFI: it takes rsp for the CFA; the
    wrong CFI: rsp+16 where the code moved it 32 further); with it gdb reaches main through both."""
    without = gdb_backtraces(program, tmp_path)
    assert [stack[:2] for stack in without] == [["leaf", "no_cfi_frame"], ["leaf", "missing_sub_adjust"]]
    assert not any("main" in stack for stack in without), without
    repaired = gdb_backtraces(program, debug_files["repair"])
    assert [stack[:3] for stack in repaired] == [["leaf", "no_cfi_frame", "main"],
                                                 ["leaf", "missing_sub_adjust", "main"]], repaired
    # the missing view leaves the declared (wrong) rows, which gdb still follows
    missing = gdb_backtraces(program, debug_files["missing"])
    assert missing[0][:3] == ["leaf", "no_cfi_frame", "main"] and "main" not in missing[1], missing
