"""Programs linked by every linker and layout whose segments differ (issue 21): GNU ld (bfd), gold,
lld and mold, PIE and not, with and without separate code pages. lld and mold start the executable
PT_LOAD in the file page where the read-only one ends, which is what a mapping's bias must get
right; the ELF reader's tests compare its headers of each with readelf's."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import CORPUS_SOURCES

LINKED_C = CORPUS_SOURCES / "linked.c"

LAYOUTS = {
    "bfd": ("bfd", ()), "bfd-nopie": ("bfd", ("-no-pie",)),
    "bfd-noseparate-code": ("bfd", ("-Wl,-z,noseparate-code",)),
    "bfd-fixed": ("bfd", ("-no-pie", "-Wl,-Ttext-segment=0x20000000")),
    "bfd-static-pie": ("bfd", ("-static-pie",)),
    "gold": ("gold", ()), "lld": ("lld", ()), "lld-nopie": ("lld", ("-no-pie",)),
    "lld-separate-code": ("lld", ("-Wl,-z,separate-code",)), "mold": ("mold", ()), "mold-nopie": ("mold", ("-no-pie",)),
}
LINKER_TOOLS = {"bfd": "ld.bfd", "gold": "ld.gold", "lld": "ld.lld", "mold": "mold"}


def build_linked(layout: str, directory: Path) -> Path:
    """workloads/corpus/linked.c linked as `layout` says, in `directory`; skips the test when gcc
    or the linker is not installed."""
    linker, flags = LAYOUTS[layout]
    if not shutil.which("gcc") or not shutil.which(LINKER_TOOLS[linker]):
        pytest.skip(f"gcc or {LINKER_TOOLS[linker]} not found")
    program = directory / f"linked-{layout}"
    subprocess.run(["gcc", "-O2", f"-fuse-ld={linker}", *flags, str(LINKED_C), "-o", str(program)], check=True)
    return program
