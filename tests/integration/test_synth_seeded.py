"""`synth` on a program built here: a hand-written function without CFI (two saves and a frame)
gets synthesized rows, a function whose CFI misses its `sub rsp` gets corrected rows in the
`repair` view only, and the compiler's own FDEs stay as declared."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fastunwind import synth
from fastunwind.elf import ElfFile

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
