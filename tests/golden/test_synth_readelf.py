"""`synth`'s table against readelf: every declared FDE of the view prints, row for row and byte for
byte, what `readelf --debug-dump=frames-interp` prints for that FDE of the file itself (the view is
written as a `.debug_frame` section and printed as readelf prints it); the `repair` view differs
from the `missing` one only in the FDEs the check proved wrong."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from fastunwind import synth
from tests.integration.test_synth_seeded import READELF_PREAMBLE
from tests.support.llvm_rows import LLVM_DWARFDUMP, compare
from tests.support.tools import run_readelf

FILES = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libm.so.6",
         "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/bin/python3.11"]
_HEADER = re.compile(r"^[0-9a-f]{8} [0-9a-f]+ [0-9a-f]+ FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)")


def rows_by_range(text: str) -> dict[tuple[int, int], list[str]]:
    """The row lines (column header included) readelf -wF prints under each FDE, by its pc range."""
    found: dict[tuple[int, int], list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = found.setdefault((int(header[1], 16), int(header[2], 16)), [])
        elif not line or re.match(r"^[0-9a-f]{8} ", line) and ("CIE" in line or "ZERO" in line):
            current = None
        elif current is not None:
            current.append(line)
    return found


@pytest.mark.parametrize("path", FILES)
def test_declared_rows_print_as_readelf_prints_them(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    synthesis = synth.synthesize(path, "repair")
    ours = rows_by_range(synth.render(synthesis).decode())
    theirs = rows_by_range(run_readelf(["-wF", path]).stdout.decode())
    declared = [r for r in synthesis.ranges if r.origin == "declared"]
    assert declared
    differing = [hex(r.start) for r in declared if ours.get((r.start, r.end)) != theirs.get((r.start, r.end))]
    assert not differing, differing[:10]


def test_repair_differs_from_missing_only_where_the_check_found_a_mismatch() -> None:
    path = FILES[0]
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    missing, repair = synth.synthesize(path, "missing"), synth.synthesize(path, "repair")
    mismatching = {(v.pc_begin, v.pc_end) for v in repair.checked.verdicts() if v.verdict == "mismatch"}
    corrected = {(r.start, r.end) for r in repair.ranges if r.origin == "corrected"}
    assert corrected and corrected <= mismatching
    assert not any(r.origin == "corrected" for r in missing.ranges)
    unchanged = [(r.start, r.end, r.origin) for r in repair.ranges if (r.start, r.end) not in corrected]
    assert unchanged == [(r.start, r.end, r.origin) for r in missing.ranges if (r.start, r.end) not in corrected]


@pytest.mark.parametrize("path", FILES[:2])
def test_debug_file_reads_in_readelf_and_llvm_dwarfdump_as_synth_prints_it(path: str, tmp_path) -> None:
    """The debug file of the repair view: readelf -wF prints exactly synth's table (its notes aside)
    without a warning, and llvm-dwarfdump-14 reads every row as our parser does, without complaint."""
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    synthesis = synth.synthesize(path, "repair")
    written = synth.write_debug_file(synthesis, str(tmp_path / "file.debug"))
    result = run_readelf(["-wN", "-wF", written])  # not the system's debug file of the same build-id
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert result.stdout == READELF_PREAMBLE + re.sub(rb"  # [^\n]*", b"", synth.render(synthesis))
    if shutil.which(LLVM_DWARFDUMP) is None:
        pytest.skip(f"{LLVM_DWARFDUMP} is not installed")
    dumped = subprocess.run([LLVM_DWARFDUMP, "--debug-frame", written], capture_output=True, text=True)
    assert dumped.returncode == 0 and not dumped.stderr, dumped.stderr
    assert compare(written) >= sum(r.rows for r in synthesis.ranges)
