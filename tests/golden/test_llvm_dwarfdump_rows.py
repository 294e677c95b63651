"""Every row of every FDE against llvm-dwarfdump-14 (see llvm_rows.py for the comparison)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fastunwind.cfi import DEBUG_FRAME, EH_FRAME, cfi_sections
from fastunwind.elf import ElfFile

from tests.support.llvm_rows import LLVM_DWARFDUMP, compare

pytestmark = pytest.mark.skipif(shutil.which(LLVM_DWARFDUMP) is None, reason=f"{LLVM_DWARFDUMP} is not installed")

SYSTEM_FILES = [
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/ld-linux-x86-64.so.2",
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/lib/x86_64-linux-gnu/libm.so.6",
    "/usr/bin/readelf",
]


@pytest.mark.parametrize("path", SYSTEM_FILES)
def test_rows_match_llvm_dwarfdump_on_system_files(path: str) -> None:
    if not Path(path).exists():
        pytest.skip(f"{path} is not on this machine")
    assert compare(path) > 0


DRAP_AND_PLT = r"""
#include <stdio.h>
#include <string.h>
__attribute__((noinline)) int realign(int n) {
    _Alignas(64) char aligned[64];
    char vla[n];
    memset(vla, 1, n);
    memset(aligned, 2, sizeof aligned);
    return vla[n - 1] + aligned[3] + printf("%d\n", n);
}
int main(int argc, char **argv) { return realign(argc + 20); }
"""


@pytest.mark.parametrize(
    "flags, kind",
    [
        (["-O2"], EH_FRAME),  # DRAP (CFA = r10 / deref expression) and the PLT expression
        (["-O2", "-mstackrealign"], EH_FRAME),
        (["-O1", "-g", "-fno-asynchronous-unwind-tables"], DEBUG_FRAME),  # .debug_frame for main code
    ],
)
def test_rows_match_llvm_dwarfdump_on_built_programs(tmp_path: Path, flags: list[str], kind: int) -> None:
    source = tmp_path / "realign.c"
    source.write_text(DRAP_AND_PLT)
    binary = tmp_path / "realign"
    subprocess.run(["gcc", *flags, "-o", str(binary), str(source)], check=True)
    with ElfFile.open(binary) as elf:
        kinds = {section.kind for section in cfi_sections(elf)}
    assert kind in kinds
    assert compare(str(binary)) > 0
