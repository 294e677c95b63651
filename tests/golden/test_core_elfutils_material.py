"""elfutils' own backtrace test cores (Debian source package elfutils, pulled at test time by
tests/support/material.py): the x86-64 ones unwind to the frames elfutils' tests expect of them.

elfutils' check_core (tests/backtrace-subr.sh) and callback_verify (tests/backtrace.c) ask, of the
thread that raised SIGUSR2: raise, sigusr2, stdarg, backtracegen in that order from frame 0 (the
core was dumped without the raise-jmp patching, so frames 2 and 3 are stdarg and backtracegen);
of the main thread: main; of no thread: gsignal. The cores are static executables dumped on
another machine, so their program is given with --exe as eu-stack's -e. Every stack must also be
complete and the same as eu-stack's. The x32 core (ELFCLASS32 on x86-64) is refused with a clear
error.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from fastunwind import core as core_files
from fastunwind.errors import CoreFileError
from tests.support import cores
from tests.support.cores import CoreUnavailable
from tests.support.material import MaterialUnavailable, elfutils_backtrace_cores

SIGNALLED_THREAD = ["raise", "sigusr2", "stdarg", "backtracegen"]


@pytest.fixture(scope="module")
def material() -> Path:
    try:
        return elfutils_backtrace_cores()
    except MaterialUnavailable as error:
        pytest.skip(f"elfutils' test cores unavailable: {error}")


@pytest.mark.parametrize("name", ["backtrace.x86_64", "backtrace.x86_64.fp"])
def test_the_frames_elfutils_expects(name: str, material: Path) -> None:
    core, exe = material / f"{name}.core", material / f"{name}.exec"
    with core_files.open(core, exe=str(exe)) as opened:
        assert opened.problems == []
        threads = opened.threads()
    symbols = {thread.tid: [frame.symbol for frame in thread.frames] for thread in threads}
    assert all(thread.complete for thread in threads), [(t.tid, t.outcome) for t in threads]
    signalled = [names for names in symbols.values() if "sigusr2" in names]
    assert len(signalled) == 1 and signalled[0][:4] == SIGNALLED_THREAD, symbols
    assert any("main" in names for names in symbols.values())
    assert not any("gsignal" in names for names in symbols.values())
    try:
        oracle = cores.eu_stack_of_core(core, exe)
    except CoreUnavailable as error:
        pytest.skip(str(error))
    assert {thread.tid: [frame.address for frame in thread.frames] for thread in threads} == oracle


def test_the_x32_core_is_refused_clearly(material: Path) -> None:
    with pytest.raises(CoreFileError, match="not a 64-bit little-endian ELF file"):
        core_files.open(material / "backtrace.x32.core")
