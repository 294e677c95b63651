"""Seeded faults: a shared object built here from assembly with deliberately wrong `.cfi_*`
directives, C with inline assembly that moves rsp behind the CFI's back, and a function without CFI,
beside correct functions. `fastunwind check` must flag each fault exactly where it was seeded (the
`*_bad_start` / `*_bad_end` labels bound the instructions whose declared rows are wrong) and judge
the correct functions `agree`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastunwind.check import FileCheck, check_file
from fastunwind.elf import ElfFile

ASSEMBLY = r"""
        .text
        .globl good_frame, off_by_8, missing_sub_adjust, wrong_slot, no_cfi, calls_no_cfi
        .globl off_by_8_bad_start, off_by_8_bad_end, missing_sub_adjust_bad_start, missing_sub_adjust_bad_end
        .globl wrong_slot_bad_start, wrong_slot_bad_end

        .type good_frame, @function
good_frame:                       # correct: push, frame pointer, a call, epilogue
        .cfi_startproc
        push %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        mov %rsp, %rbp
        .cfi_def_cfa_register %rbp
        push %rbx
        sub $8, %rsp
        .cfi_offset %rbx, -24
        call calls_no_cfi
        mov -8(%rbp), %rbx
        leave
        .cfi_def_cfa %rsp, 8
        ret
        .cfi_endproc
        .size good_frame, .-good_frame

        .type off_by_8, @function
off_by_8:                         # the CFA is declared 8 too far after the push
        .cfi_startproc
        push %rbx
off_by_8_bad_start:
        .cfi_def_cfa_offset 24
        .cfi_offset %rbx, -16
        mov %rdi, %rbx
        call *%rbx
        pop %rbx
off_by_8_bad_end:
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size off_by_8, .-off_by_8

        .type missing_sub_adjust, @function
missing_sub_adjust:               # sub rsp without .cfi_adjust_cfa_offset
        .cfi_startproc
        sub $40, %rsp
missing_sub_adjust_bad_start:
        mov %rdi, (%rsp)
        call *%rdi
        add $40, %rsp
missing_sub_adjust_bad_end:
        ret
        .cfi_endproc
        .size missing_sub_adjust, .-missing_sub_adjust

        .type wrong_slot, @function
wrong_slot:                       # rbx is declared at CFA-24, the push put it at CFA-16
        .cfi_startproc
        push %rbx
wrong_slot_bad_start:
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -24
        mov %rdi, %rbx
        call *%rbx
        pop %rbx
wrong_slot_bad_end:
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size wrong_slot, .-wrong_slot

        .type no_cfi, @function
no_cfi:                           # hand-written code without any CFI
        push %rbx
        mov %rdi, %rbx
        pop %rbx
        ret
        .size no_cfi, .-no_cfi

        .type calls_no_cfi, @function
calls_no_cfi:                     # correct, and the only caller of a local label without CFI
        .cfi_startproc
        sub $8, %rsp
        .cfi_def_cfa_offset 16
        call no_symbol_code
        call no_cfi
        add $8, %rsp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size calls_no_cfi, .-calls_no_cfi

no_symbol_code:
        ret

        .globl all_off, all_off_bad_start, all_off_bad_end, early_cfa, early_cfa_bad_start, early_cfa_bad_end
        .globl called_wrong_bad_start, called_wrong_bad_end, calls_wrong

        .type all_off, @function
all_off:                          # every row 8 too far, the entry's included
all_off_bad_start:
        .cfi_startproc
        .cfi_def_cfa_offset 16
        push %rbx
        .cfi_def_cfa_offset 24
        pop %rbx
        .cfi_def_cfa_offset 16
        ret
all_off_bad_end:
        .cfi_endproc
        .size all_off, .-all_off

        .type early_cfa, @function
early_cfa:                        # the push's CFA declared at the entry, before the push
early_cfa_bad_start:
        .cfi_startproc
        .cfi_def_cfa_offset 16
        push %rbx
early_cfa_bad_end:
        .cfi_offset %rbx, -16
        pop %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size early_cfa, .-early_cfa

called_wrong:                     # no function symbol, but called: wrong at its entry
called_wrong_bad_start:
        .cfi_startproc
        .cfi_def_cfa_offset 16
        ret
called_wrong_bad_end:
        .cfi_endproc

        .type calls_wrong, @function
calls_wrong:
        .cfi_startproc
        sub $8, %rsp
        .cfi_def_cfa_offset 16
        call called_wrong                # a local label: a direct call, not through the PLT
        add $8, %rsp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size calls_wrong, .-calls_wrong
"""

C_SOURCE = r"""
extern void sink(long);
long correct_c(long n) {                 /* gcc's own CFI: must agree */
    long total = 0;
    for (long i = 0; i < n; i++) {
        sink(i);
        total += i * n;
    }
    return total;
}
void inline_asm_moves_rsp(long x) {      /* rsp moves inside the asm, the CFI does not know */
    sink(x);
    __asm__ volatile(".globl inline_asm_bad_start\n"
                     "sub $64, %%rsp\n"
                     "inline_asm_bad_start:\n"
                     "movq %0, (%%rsp)\n"
                     "add $64, %%rsp\n"
                     ".globl inline_asm_bad_end\n"
                     "inline_asm_bad_end:\n" : : "r"(x) : "memory");
    sink(x + 1);
}
void sink(long x) { __asm__ volatile("" : : "r"(x)); }
"""


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FileCheck, dict[str, int]]:
    directory = tmp_path_factory.mktemp("seeded")
    (directory / "faults.S").write_text(ASSEMBLY)
    (directory / "correct.c").write_text(C_SOURCE)
    library = directory / "libseeded.so"
    import subprocess

    built = subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(library), str(directory / "faults.S"),
                            str(directory / "correct.c")], capture_output=True, text=True)
    if built.returncode:
        pytest.fail(f"gcc failed:\n{built.stderr}", pytrace=False)
    with ElfFile.open(library) as elf:
        symbols = {s.name: s.value for s in elf.symbols() if s.name}
    return library, check_file(str(library)), symbols


def verdict_of(result: FileCheck, address: int) -> tuple[str, set[int], set[str]]:
    for verdict in result.verdicts():
        if verdict.pc_begin <= address < verdict.pc_end:
            return verdict.verdict, {f.address for f in verdict.findings}, {f.what for f in verdict.findings}
    raise AssertionError(f"no FDE covers {address:#x}")


@pytest.mark.parametrize("function, columns", [
    ("off_by_8", {"cfa"}),
    ("missing_sub_adjust", {"cfa"}),
    ("wrong_slot", {"rbx"}),
    ("inline_asm", {"cfa"}),
    ("all_off", {"cfa"}),
    ("early_cfa", {"cfa"}),
    ("called_wrong", {"cfa"}),
])
def test_seeded_fault_is_flagged_exactly_where_seeded(seeded, function: str, columns: set[str]) -> None:
    _library, result, symbols = seeded
    start, end = symbols[f"{function}_bad_start"], symbols[f"{function}_bad_end"]
    verdict, addresses, whats = verdict_of(result, start)
    assert verdict == "mismatch"
    assert min(addresses) == start and max(addresses) < end, [hex(a) for a in sorted(addresses)]
    assert whats == columns


@pytest.mark.parametrize("function", ["good_frame", "calls_no_cfi", "correct_c", "sink", "calls_wrong"])
def test_correct_functions_agree(seeded, function: str) -> None:
    _library, result, symbols = seeded
    verdict, addresses, _ = verdict_of(result, symbols[function])
    assert verdict == "agree", [hex(a) for a in sorted(addresses)]


def test_code_without_cfi_is_uncovered(seeded) -> None:
    _library, result, symbols = seeded
    uncovered = {u.start: u for u in result.uncovered}
    assert uncovered[symbols["no_cfi"]].symbol == "no_cfi"
    assert uncovered[symbols["no_cfi"]].end == symbols["no_cfi"] + 6
    target = uncovered[symbols["no_symbol_code"]]  # a call target, not a function symbol (no .type)
    assert target.symbol == "" and target.end > target.start


def test_cli_json_and_exit_status(seeded, fastunwind_cli) -> None:
    library, _result, symbols = seeded
    ran = fastunwind_cli(["check", "--json", library])
    assert ran.returncode == 1, ran.stderr
    report = json.loads(ran.stdout)
    assert set(report) == {"file", "fdes", "uncovered"}
    mismatches = [f for f in report["fdes"] if f["verdict"] == "mismatch"]
    assert {f["pc_begin"] for f in mismatches} == {symbols["off_by_8"], symbols["missing_sub_adjust"],
                                                   symbols["wrong_slot"], symbols["inline_asm_moves_rsp"],
                                                   symbols["all_off"], symbols["early_cfa"],
                                                   symbols["called_wrong_bad_start"]}
    finding = next(f for f in mismatches if f["pc_begin"] == symbols["off_by_8"])["findings"][0]
    assert finding == {"address": symbols["off_by_8_bad_start"], "what": "cfa", "declared": "rsp+24",
                       "derived": "rsp+16"}
