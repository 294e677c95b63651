"""`fastunwind check` through its command line: exit statuses 0/1/2/3 on small shared objects built
here from assembly (`gcc -shared -nostdlib`: nothing but the functions written), the default summary
against --verbose, findings past the per-FDE cap, relocatable objects refused, a reader that goes
away, an unexpected exception, the progress bar off when stderr is not a terminal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import oracle_files

GOOD = """
        .globl good
        .type good, @function
good:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        pop %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size good, .-good
"""

SIGNAL_FRAME = """
        .globl handler_trampoline
        .type handler_trampoline, @function
handler_trampoline:               # a signal frame: undecided
        .cfi_startproc
        .cfi_signal_frame
        ret
        .cfi_endproc
        .size handler_trampoline, .-handler_trampoline
"""

NO_CFI = """
        .globl no_cfi
        .type no_cfi, @function
no_cfi:
        push %rbx
        pop %rbx
        ret
        .size no_cfi, .-no_cfi
"""


def wrong_cfa(name: str, instructions: int) -> str:
    """A function whose CFA is declared 8 too far after its push: a finding at each of the `instructions`
    instructions up to the pop, which is included."""
    body = "        mov %rdi, %rax\n" * (instructions - 1)
    return f"""
        .globl {name}
        .type {name}, @function
{name}:
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 24
{body}        pop %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size {name}, .-{name}
"""


def build(tmp_path: Path, name: str, source: str, *, shared: bool = True) -> Path:
    (tmp_path / f"{name}.s").write_text("        .text\n" + source)
    output = tmp_path / (f"{name}.so" if shared else f"{name}.o")
    command = ["gcc", *(["-shared", "-nostdlib"] if shared else ["-c"]), "-o", str(output), str(tmp_path / f"{name}.s")]
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode:
        pytest.fail(f"{' '.join(command)} failed:\n{built.stderr}", pytrace=False)
    return output


def check(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(oracle_files.tool_command(["check", *map(str, args)]), capture_output=True, text=True,
                          env=oracle_files.subprocess_env(), stdin=subprocess.DEVNULL)


def test_exit_0_when_every_fde_agrees_and_all_code_has_cfi(tmp_path: Path) -> None:
    ran = check(build(tmp_path, "good", GOOD))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 FDEs: 1 agree, 0 mismatch, 0 undecided" in ran.stdout


def test_code_without_cfi_is_listed_and_leaves_the_exit_status_to_the_fdes(tmp_path: Path) -> None:
    """Issue 23's exit codes judge the FDEs; code no FDE covers is reported beside them (nearly every
    program has some: crti's _init and _fini)."""
    ran = check(build(tmp_path, "nocfi", GOOD + NO_CFI))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 uncovered ranges" in ran.stdout


def test_exit_2_when_only_undecided(tmp_path: Path) -> None:
    ran = check(build(tmp_path, "signal", GOOD + SIGNAL_FRAME))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "a signal frame" in ran.stdout


@pytest.mark.parametrize("args", [["--no-such-option", "x.so"], ["-j", "many", "x.so"]])
def test_usage_errors_exit_3_not_2(args: list[str]) -> None:
    ran = check(*args)
    assert ran.returncode == 3, ran.stderr
    assert "usage:" in ran.stderr


def test_no_file_exits_3() -> None:
    ran = check()
    assert ran.returncode == 3 and "check needs at least one FILE" in ran.stderr, ran.stderr


def test_missing_file_and_relocatable_object_exit_3(tmp_path: Path) -> None:
    ran = check(tmp_path / "absent.so")
    assert ran.returncode == 3 and ran.stderr.count("\n") == 1, ran.stderr
    ran = check(build(tmp_path, "object", GOOD, shared=False))
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert "relocatable object (ET_REL)" in ran.stderr and ran.stdout == ""


def test_summary_names_the_first_mismatches_and_verbose_all(tmp_path: Path) -> None:
    library = build(tmp_path, "many", GOOD + "".join(wrong_cfa(f"wrong_{k}", 2) for k in range(8)))
    summary = check(library)
    assert summary.returncode == 1
    assert summary.stdout.count("  mismatch  ") == 5
    assert "... 3 more mismatching FDEs (--verbose lists them all)" in summary.stdout
    verbose = check("--verbose", library)
    assert verbose.returncode == 1
    assert verbose.stdout.count("  mismatch  ") == 8
    assert verbose.stdout.count(" cfa   declared rsp+24") == 8 * 2


def test_findings_past_the_cap_are_counted(tmp_path: Path) -> None:
    library = build(tmp_path, "long", wrong_cfa("long_wrong", 40))
    report = json.loads(check("--json", library).stdout)
    (fde,) = report["fdes"]
    assert fde["verdict"] == "mismatch"
    assert len(fde["findings"]) == 32 and fde["finding_total"] == 40 and fde["findings_truncated"] is True
    assert fde["unreached"] == 0
    verbose = check("--verbose", library).stdout
    assert "... 40 findings in all, the first 32 listed" in verbose


def test_a_reader_that_goes_away_fails_quietly(tmp_path: Path) -> None:
    library = build(tmp_path, "many", "".join(wrong_cfa(f"wrong_{k}", 40) for k in range(200)))
    process = subprocess.Popen(oracle_files.tool_command(["check", "--verbose", str(library)]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=oracle_files.subprocess_env())
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the first line is written: `| head -0`
    stderr = process.stderr.read()
    assert process.wait() == 3
    assert stderr == b""


def test_unexpected_exception_is_one_line_and_exit_3(tmp_path: Path) -> None:
    library = build(tmp_path, "good", GOOD)
    script = ("import sys, fastunwind.check as c\n"
              "def fail(*args, **kwargs): raise MemoryError('no room')\n"
              "c.check_file = fail\n"
              "from fastunwind.cli import main\n"
              f"sys.exit(main(['check', {str(library)!r}]))\n")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=oracle_files.subprocess_env())
    assert ran.returncode == 3
    assert ran.stderr == f"fastunwind: error: {library}: MemoryError: no room\n"


def test_no_progress_bar_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from fastunwind.commands.check import PROGRESS_FDES, _progress

    progress = _progress("big.so")
    with progress as update:
        update(1, PROGRESS_FDES * 10)
        update(PROGRESS_FDES * 10, PROGRESS_FDES * 10)
    assert progress.bar is None
    assert capsys.readouterr().err == ""


def test_unreached_code_and_outermost_rows_are_reported(tmp_path: Path) -> None:
    source = """
        .globl dead_tail, outermost
        .type dead_tail, @function
dead_tail:                        # three instructions after the ret nothing reaches: undecided
        .cfi_startproc
        ret
        push %rbx
        pop %rbx
        ret
        .cfi_endproc
        .size dead_tail, .-dead_tail
        .type outermost, @function
outermost:                        # the return address undefined, as _start's
        .cfi_startproc
        .cfi_undefined %rip
        xor %ebp, %ebp
        ret
        .cfi_endproc
        .size outermost, .-outermost
"""
    library = build(tmp_path, "dead", source)
    report = json.loads(check("--json", library).stdout)
    by_start = {fde["pc_begin"]: fde for fde in report["fdes"]}
    dead, outermost = sorted(by_start)
    assert (by_start[dead]["unreached"], by_start[dead]["skipped"]) == (3, 0)
    assert (by_start[outermost]["unreached"], by_start[outermost]["skipped"]) == (0, 2)
    verbose = check("--verbose", library).stdout
    assert "3 instructions no path reaches were not checked (the first at" in verbose, "an undecided FDE"
    assert by_start[dead]["verdict"] == "undecided" and by_start[outermost]["verdict"] == "agree"
    assert "left unchecked: 0 no path reached" in verbose and "2 in outermost-frame rows" in verbose
