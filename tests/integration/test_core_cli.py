"""`fastunwind core`: the text, --json and -o; files checked by build-id (a replaced program is
named and not used), --exe and --sysroot finding the right ones; exit status 0 complete, 2 a stack
incomplete, 1 an unreadable core.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fastunwind import core as core_files
from tests.support import cores
from tests.support.cores import CoreUnavailable
from tests.support.tools import run_fastunwind


@pytest.fixture(scope="module")
def gcore(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the program, its gcore): the program is left in place; tests that replace it copy it."""
    out = tmp_path_factory.mktemp("cli")
    try:
        program = cores.blocked_threads(out)
        with cores.running([str(program), "wait"], out, prints_ready=True) as pid:
            return program, cores.gcore_of(pid, out / "core")
    except CoreUnavailable as error:
        pytest.skip(str(error))


def test_text_output(gcore: tuple[Path, Path]) -> None:
    program, core = gcore
    result = run_fastunwind(["core", core])
    text = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr == b""
    lines = text.splitlines()
    assert lines[0].startswith("PID ") and lines[1].startswith("TID ")
    assert "in main+0x" in text and f"({program})" in text and "in compare+0x" in text
    assert text.count("TID ") == 6


def test_json_and_output_file(gcore: tuple[Path, Path], tmp_path: Path) -> None:
    _program, core = gcore
    out = tmp_path / "stacks.json"
    result = run_fastunwind(["core", "--json", "--registers", "-o", out, core])
    assert result.returncode == 0 and result.stdout == b""
    document = json.loads(out.read_text())
    with core_files.open(core) as opened:
        assert document["pid"] == opened.pid
        expected = {thread.tid: [frame.address for frame in thread.frames] for thread in opened.threads()}
    assert {t["tid"]: [f["address"] for f in t["frames"]] for t in document["threads"]} == expected
    frame = document["threads"][0]["frames"][1]
    assert set(frame) >= {"address", "symbol", "offset", "module", "registers"}
    assert frame["registers"]["rsp"] is not None and frame["registers"]["rax"] is None


def replaced_program(program: Path, where: Path) -> Path:
    """A program of the same path but another build (another build-id); the original kept at
    where/original."""
    original = where / "original"
    shutil.copy2(program, original)
    built = subprocess.run(["gcc", "-O1", "-pthread", "-o", str(program), str(cores.BLOCKED_THREADS_SOURCE)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return original


def test_a_replaced_program_is_named_and_not_used_and_exe_finds_it(gcore: tuple[Path, Path], tmp_path: Path
                                                                  ) -> None:
    program, core = gcore
    original = replaced_program(program, tmp_path)
    try:
        result = run_fastunwind(["core", core])
        warnings = result.stderr.decode().splitlines()
        assert len(warnings) == 1, warnings
        assert warnings[0].startswith(f"fastunwind: warning: {program}: build-id ") and "not used" in warnings[0]
        assert "in main+0x" not in result.stdout.decode()  # its symbols were not taken from the wrong file
        fixed = run_fastunwind(["core", "--exe", original, core])
        assert fixed.returncode == 0 and fixed.stderr == b"", fixed.stderr.decode()
        assert "in main+0x" in fixed.stdout.decode()
    finally:
        shutil.copy2(original, program)


def sysroot_of(core: Path, sysroot: Path) -> Path:
    """`sysroot` holding a copy of every file the core maps, at its path under it."""
    with core_files.open(core) as opened:
        files = [module.path for module in opened.modules if module.path != core_files.VDSO]
    for path in files:
        target = sysroot / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return sysroot


def test_sysroot(gcore: tuple[Path, Path], tmp_path: Path) -> None:
    program, core = gcore
    sysroot = sysroot_of(core, tmp_path / "root")
    original = replaced_program(program, tmp_path)  # the program at its own path is now the wrong one
    try:
        result = run_fastunwind(["core", "--sysroot", sysroot, core])
        assert result.returncode == 0 and result.stderr == b"", result.stderr.decode()
        assert "in main+0x" in result.stdout.decode() and f"({program})" in result.stdout.decode()
        (sysroot / str(program).lstrip("/")).unlink()
        missing = run_fastunwind(["core", "--sysroot", sysroot, core])
        assert f"{program} (looked up as {sysroot}{program}): not found: not used" in missing.stderr.decode()
    finally:
        shutil.copy2(original, program)


def test_an_unreadable_core_is_one_line_and_status_1(tmp_path: Path) -> None:
    not_core = tmp_path / "not-a-core"
    not_core.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 100)
    result = run_fastunwind(["core", not_core])
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [f"fastunwind: error: {not_core}: not a core file (e_type 0)"]
    missing = run_fastunwind(["core", tmp_path / "nothing"])
    assert missing.returncode == 1 and b"No such file" in missing.stderr
