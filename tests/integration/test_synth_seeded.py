"""`synth` on a program built here: a hand-written function without CFI (two saves and a frame)
gets synthesized rows, a function whose CFI misses its `sub rsp` gets corrected rows in the
`repair` view only, and the compiler's own FDEs stay as declared. The debug file written from the
table reads in readelf and llvm-dwarfdump-14 as synth prints it, and gdb, finding it by build-id,
backtraces through both functions to main, where without it it stops; so does eu-stack (libdw)
through the synthesized one. A function gcc -O2 compiled without unwind tables gets the same."""

from __future__ import annotations

import array
import io
import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fastunwind import _core, synth
from fastunwind.cfi import ENTRY_FDE
from fastunwind.elf import ElfFile
from tests.integration import test_check_seeded as check_seeded
from tests.support.llvm_rows import LLVM_DWARFDUMP, compare
from scripts import oracle_files
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

        .globl keeps_rsp_in_rcx, loses_rsp_in_rcx
        .type keeps_rsp_in_rcx, @function
keeps_rsp_in_rcx:                 # no CFI: the stack realigned, the entry rsp kept in rcx across calls
        mov %rsp, %rcx            # to a helper that leaves rcx alone (x264's x86inc.asm functions)
        and $-32, %rsp
        sub $64, %rsp
        call .Lleaves_rcx
        call .Lleaves_rcx
        mov %rcx, %rsp
        ret
        .size keeps_rsp_in_rcx, .-keeps_rsp_in_rcx
.Lleaves_rcx:                     # no symbol: found as a call target
        mov %rdi, %rax
        add %rsi, %rax
        ret

        .type loses_rsp_in_rcx, @function
loses_rsp_in_rcx:                 # the same with a helper that writes rcx: nothing known after the call
        mov %rsp, %rcx
        and $-32, %rsp
        sub $64, %rsp
        call .Lwrites_rcx
        mov %rcx, %rsp
        ret
        .size loses_rsp_in_rcx, .-loses_rsp_in_rcx
.Lwrites_rcx:
        mov %rdi, %rcx
        ret
        .section .note.GNU-stack,"",@progbits
"""

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
long no_cfi_frame(long (*)(long), long);
long missing_sub_adjust(long (*)(long), long);
long keeps_rsp_in_rcx(long, long), loses_rsp_in_rcx(long);
#include <signal.h>
/* with an argument, the program stops itself here (for eu-stack) */
__attribute__((noinline)) long leaf(long x) { if (x > 1) raise(SIGSTOP); __asm__ volatile("" ::: "memory"); return x + 1; }
int main(int argc, char **argv) {
    (void)argv;
    printf("%ld\n", no_cfi_frame(leaf, argc) + missing_sub_adjust(leaf, argc));
    if (argc > 5) /* linked, not run */
        printf("%ld\n", keeps_rsp_in_rcx(argc, argc) + loses_rsp_in_rcx(argc));
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


def as_json(synthesis: synth.Synthesis) -> dict[str, object]:
    out = io.BytesIO()
    synth.write_json(synthesis, out)
    loaded: dict[str, object] = json.loads(out.getvalue())
    return loaded


def rows_of(document: dict[str, object], start: int) -> tuple[str, list[tuple[int, str, dict[str, str]]]]:
    fde = next(f for f in document["fdes"] if f["pc_begin"] == start)  # type: ignore[union-attr,index]
    return fde["origin"], [(row["address"] - start, row["cfa"], {k: v for k, v in row.items()
                                                                  if k not in ("address", "cfa", "ra")})
                           for row in fde["rows"]]


@pytest.mark.parametrize("mode", ["missing", "repair"])
def test_code_without_cfi_gets_the_rows_its_code_implies(program: Path, mode: str) -> None:
    document = as_json(synth.synthesize(str(program), mode))
    assert rows_of(document, symbol(program, "no_cfi_frame")) == ("synthesized", NO_CFI_FRAME_ROWS)


def call_target(path: Path, call: int) -> int:
    """Where the `call rel32` at `call` goes."""
    with ElfFile.open(str(path)) as elf:
        text = next(s for s in elf.sections if s.name == ".text")
        rel32 = int.from_bytes(bytes(elf.section_data(text))[call - text.addr + 1:call - text.addr + 5], "little", signed=True)
    return call + 5 + rel32


def test_a_frame_kept_in_a_caller_saved_register_across_calls(program: Path) -> None:
    """A function that realigns the stack and keeps its entry rsp in rcx (x86inc.asm's) gets rows
    with CFA = rcx+8 past its calls when the callee's code leaves rcx alone, and the callee's rows
    say rcx keeps the caller's value (so the walker carries it there); when the callee writes rcx,
    the rows stop at the call."""
    document = as_json(synth.synthesize(str(program), "missing"))
    keeps, loses = symbol(program, "keeps_rsp_in_rcx"), symbol(program, "loses_rsp_in_rcx")
    origin, rows = rows_of(document, keeps)
    assert origin == "synthesized" and [(offset, cfa) for offset, cfa, _ in rows] == [(0x0, "rsp+8"), (0x7, "rcx+8")]
    fde = next(f for f in document["fdes"] if f["pc_begin"] == keeps)
    assert fde["pc_end"] == keeps + 0x19  # to its ret, past both calls
    origin, helper_rows = rows_of(document, call_target(program, keeps + 0xb))
    assert origin == "synthesized" and helper_rows and all(saved.get("rcx") == "same value" for _, _, saved in helper_rows)
    assert all("rcx" not in saved and "rax" not in saved for _, _, saved in rows)  # written here
    origin, rows = rows_of(document, loses)
    assert [(offset, cfa) for offset, cfa, _ in rows] == [(0x0, "rsp+8"), (0x7, "rcx+8")]
    assert next(f for f in document["fdes"] if f["pc_begin"] == loses)["pc_end"] == loses + 0x10  # the call's end
    origin, helper_rows = rows_of(document, call_target(program, loses + 0xb))
    assert all("rcx" not in saved for _, _, saved in helper_rows)


def test_wrong_cfi_is_corrected_in_the_repair_view_only(program: Path) -> None:
    start = symbol(program, "missing_sub_adjust")
    assert rows_of(as_json(synth.synthesize(str(program), "repair")), start) == (
        "corrected", MISSING_SUB_ADJUST_ROWS)
    origin, rows = rows_of(as_json(synth.synthesize(str(program), "missing")), start)
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


@pytest.mark.parametrize("command", ["table", "synth"])
def test_a_reader_going_away_ends_the_printing_quietly(command: str) -> None:
    """`fastunwind synth libc.so.6 | head -1`: the write fails with EPIPE; the printer stops there
    (it once went on filling its buffer past its end) and the command exits 0, as readelf does."""
    path = "/lib/x86_64-linux-gnu/libc.so.6"
    reader = subprocess.Popen(oracle_files.tool_command([command, path]), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=oracle_files.subprocess_env())
    assert reader.stdout is not None
    reader.stdout.readline()
    reader.stdout.close()
    assert reader.wait(timeout=120) == 0, reader.stderr.read() if reader.stderr else ""


def wait_stopped(process: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        with open(f"/proc/{process.pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.05)
    pytest.fail("the program did not stop in leaf")


def eu_stack(pid: int, debuginfo_path: str) -> list[str]:
    result = subprocess.run(["eu-stack", "-p", str(pid), f"--debuginfo-path={debuginfo_path}"],
                            capture_output=True, text=True, timeout=60)
    return [line.split()[-1] for line in result.stdout.splitlines() if re.match(r"^#\d+ ", line)]


def test_eu_stack_unwinds_through_the_synthesized_rows(program: Path, debug_files: dict[str, Path],
                                                       tmp_path: Path) -> None:
    """libdw (eu-stack's unwinder) finds the debug file by build-id under its debuginfo path and
    uses its `.debug_frame` where the file's `.eh_frame` has no FDE: through no_cfi_frame to main.
    It looks in `.eh_frame` first, so a corrected FDE does not replace the declared one there."""
    if shutil.which("eu-stack") is None:
        pytest.skip("eu-stack is not installed")
    process = subprocess.Popen([str(program), "stop"], stdout=subprocess.DEVNULL)
    try:
        wait_stopped(process)
        without = eu_stack(process.pid, str(tmp_path))
        with_file = eu_stack(process.pid, f"{debug_files['repair']}:/usr/lib/debug")
        process.send_signal(signal.SIGCONT)
        time.sleep(0.2)
        wait_stopped(process)  # again, in leaf called from missing_sub_adjust
        corrected = eu_stack(process.pid, f"{debug_files['repair']}:/usr/lib/debug")
    finally:
        process.kill()
        process.wait()
    at = without.index("leaf")
    assert without[at + 1] == "no_cfi_frame" and "main" not in without, without
    at = with_file.index("leaf")
    assert with_file[at + 1:at + 3] == ["no_cfi_frame", "main"] and with_file[-1] == "_start", with_file
    assert "missing_sub_adjust" in corrected and "main" not in corrected, corrected


def test_cli_json_table_and_failure(program: Path, fastunwind_cli, tmp_path: Path) -> None:
    """The verb: --json parses and names every FDE's origin, -o writes the table there, a file that is
    not ELF is one line on stderr and exit status 1."""
    listed = fastunwind_cli(["synth", "--mode", "repair", "--json", program])
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert {f["origin"] for f in document["fdes"]} == {"declared", "corrected", "synthesized"}
    out = tmp_path / "table.txt"
    written = fastunwind_cli(["synth", "-o", out, program])
    assert written.returncode == 0 and written.stdout == b"" and b"# synthesized: no CFI (no_cfi_frame)" in out.read_bytes()
    (tmp_path / "not-elf").write_bytes(b"hello")
    failed = fastunwind_cli(["synth", tmp_path / "not-elf"])
    assert failed.returncode == 1 and failed.stderr.startswith(b"fastunwind: error:") and failed.stderr.count(b"\n") == 1


def test_the_compact_table_builder_takes_the_view(program: Path) -> None:
    """The view's CfiTable is all a compact table needs (the walker's fast path): its rules at the
    synthesized and corrected instructions are the derived ones."""
    synthesis = synth.synthesize(str(program), "repair")
    table = _core.CompactTable(_core.build_compact_table(synthesis.table, None, _core.COMPACT_KEY_FILE_HASH,
                                                         bytes(32)))

    def rule_at(address: int) -> tuple[str, int, int, dict[int, int]]:
        found = table.lookup(address)
        assert found is not None
        rule = table.rule(found[1])
        return rule["cfa"], rule["offset"], rule["ra_offset"], rule["saved"]

    no_cfi, corrected = symbol(program, "no_cfi_frame"), symbol(program, "missing_sub_adjust")
    assert rule_at(no_cfi + 0xa) == ("rsp", 64, -8, {12: -24})
    assert rule_at(corrected + 0x8) == ("rsp", 48, -8, {3: -16})


NO_UNWIND_TABLES = r"""
long mid_no_cfi(long (*f)(long), long x) {
    volatile long buf[8];
    for (int i = 0; i < 8; i++)
        buf[i] = x + i;
    return f(buf[x & 7]) + buf[3];
}
"""

NO_UNWIND_TABLES_MAIN = r"""
#include <stdio.h>
long mid_no_cfi(long (*)(long), long);
__attribute__((noinline)) long leaf(long x) { __asm__ volatile("" ::: "memory"); return x + 1; }
int main(int argc, char **argv) { (void)argv; printf("%ld\n", mid_no_cfi(leaf, argc)); return 0; }
"""


def test_gdb_unwinds_through_compiled_code_built_without_unwind_tables(tmp_path: Path) -> None:
    """gcc -O2 -fno-asynchronous-unwind-tables: a function with a 0x48-byte frame and no FDE. gdb,
    without CFI, takes its stack's contents for return addresses (frames 1, 2, 3 ... of garbage);
    with the synthesized rows it reaches main."""
    (tmp_path / "mid.c").write_text(NO_UNWIND_TABLES)
    (tmp_path / "main.c").write_text(NO_UNWIND_TABLES_MAIN)
    program = tmp_path / "no-unwind-tables"
    for command in (["gcc", "-O2", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-c", "-o",
                     str(tmp_path / "mid.o"), str(tmp_path / "mid.c")],
                    ["gcc", "-O1", "-Wl,--build-id", "-o", str(program), str(tmp_path / "main.c"),
                     str(tmp_path / "mid.o")]):
        built = subprocess.run(command, capture_output=True, text=True)
        if built.returncode != 0:
            pytest.fail(f"{' '.join(command)} failed:\n{built.stderr}", pytrace=False)
    synthesis = synth.synthesize(str(program), "missing")
    start = symbol(program, "mid_no_cfi")
    assert next(r for r in synthesis.ranges if r.start == start).origin == "synthesized"
    (tmp_path / "debug").mkdir()
    synth.write_debug_file(synthesis, str(tmp_path / "debug"))
    without = gdb_backtraces(program, tmp_path / "nothing")
    assert without[0][:2] == ["leaf", "mid_no_cfi"] and "main" not in without[0], without
    assert gdb_backtraces(program, tmp_path / "debug")[0][:3] == ["leaf", "mid_no_cfi", "main"]


def test_every_seeded_fault_is_corrected_and_the_corrections_pass_the_check(tmp_path: Path) -> None:
    """The shared object of test_check_seeded.py (CFA off by 8, a missing adjustment, a register at
    the wrong slot, every row off including the entry's, inline asm moving rsp): in the repair view
    every FDE the check proved wrong is corrected, and the check run on the view's own table judges
    none of them wrong any more."""
    (tmp_path / "faults.S").write_text(check_seeded.ASSEMBLY)
    (tmp_path / "correct.c").write_text(check_seeded.C_SOURCE)
    library = tmp_path / "libseeded.so"
    built = subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(library), str(tmp_path / "faults.S"),
                            str(tmp_path / "correct.c")], capture_output=True, text=True)
    if built.returncode:
        pytest.fail(f"gcc failed:\n{built.stderr}", pytrace=False)
    synthesis = synth.synthesize(str(library), "repair")
    wrong = {(v.pc_begin, v.pc_end) for v in synthesis.checked.verdicts() if v.verdict == "mismatch"}
    corrected = {(r.start, r.end) for r in synthesis.ranges if r.origin == "corrected"}
    assert len(wrong) >= 5 and corrected == wrong and synthesis.corrected_kept_declared == 0
    view, inputs = synthesis.table, synthesis.checked.inputs
    assert inputs is not None
    kinds, _first, _count, _begin, _range = view.entry_arrays()
    fde_entries = [i for i, kind in enumerate(kinds) if kind == ENTRY_FDE]
    entries = array.array("I", (entry for r, entry in zip(synthesis.ranges, fde_entries) if r.origin == "corrected"))
    results, _details, _uncovered, _called, _foreign = _core.check_fdes(
        view, entries.tobytes(), _core.check_overlaps(view), inputs.code, inputs.segments, inputs.noreturn,
        inputs.function_entries, view, None, array.array("Q", [0]))
    fields = len(_core.CHECK_RESULT_FIELD_NAMES)
    verdicts = array.array("I", results)[_core.CHECK_RESULT_FIELD_NAMES.index("verdict")::fields]
    assert len(verdicts) == len(entries) and _core.CHECK_MISMATCH not in verdicts, list(verdicts)
