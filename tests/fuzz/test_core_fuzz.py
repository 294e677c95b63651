"""A short run of the core-file reader's sanitizer fuzz target (`make -C native/fuzz asan-core`,
native/fuzz/core_driver.c): cores built by the driver and a gcore of a sleeping process, with
seeded mutants of their headers and notes, parsed under ASAN+UBSAN with what the parse promises
checked and the memory read through both core readers.

The full run is `make asan-core` (or `make asan`). FASTUNWIND_CORE_FUZZ_SEED=<seed> repeats a run.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.fuzz_targets import run_target

BUILT = 2000  # with their mutants and MUTATIONS of a gcore: a few seconds under ASAN
MUTATIONS = 1000


def test_core_reader_fuzz_target_short_run(tmp_path: Path) -> None:
    output = run_target(tmp_path, "asan-core", "FASTUNWIND_CORE_FUZZ_SEED", CORE_BUILT=BUILT, CORE_MUTATIONS=MUTATIONS)
    assert "inputs passed" in output, output[-3000:]
