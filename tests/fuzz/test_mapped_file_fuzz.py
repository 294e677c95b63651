"""A short run of the guarded file mappings' sanitizer fuzz target (`make -C native/fuzz
asan-mapped-file`, native/fuzz/mapped_file_driver.c): files of random size and bytes mapped by
core/mapped_file.c, cut to a random size under the mapping and read whole under ASAN+UBSAN (the bytes
below the cut the file's, those past it zeros, the change told exactly when a page lay wholly past
it), the table's bound (one file more is read into memory) and a SIGBUS of a mapping the guard does
not know, which must still end the process.

The full run is `make -C native/fuzz asan-mapped-file`. FASTUNWIND_MAPPED_FILE_FUZZ_SEED=<seed>
repeats a run.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.fuzz_targets import run_target

ROUNDS = 1000  # a few seconds under ASAN


def test_mapped_file_fuzz_target_short_run(tmp_path: Path) -> None:
    output = run_target(tmp_path, "asan-mapped-file", "FASTUNWIND_MAPPED_FILE_FUZZ_SEED", MAPPED_FILE_ROUNDS=ROUNDS)
    assert f"{ROUNDS} rounds, " in output and "pages read as zeros" in output, output[-3000:]
