"""A short run of the source-line sanitizer target (`make -C native/fuzz asan-srcline`,
native/fuzz/srcline_driver.c): a -g -O2 shared object and the driver itself opened through libdw,
looked up at random addresses and near those with a chain, then bit-flipped copies of both, under
ASAN+UBSAN with every chain checked.

The full run is `make asan-srcline` (or `make asan`). The seed is printed;
FASTUNWIND_SRCLINE_FUZZ_SEED=<seed> repeats a run.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.fuzz_targets import run_target

MUTATIONS = 10  # mutants of each file: a few seconds under ASAN, after a short build


def test_srcline_fuzz_target_short_run(tmp_path: Path) -> None:
    output = run_target(tmp_path, "asan-srcline", "FASTUNWIND_SRCLINE_FUZZ_SEED", SRCLINE_MUTATIONS=MUTATIONS)
    assert output.count(f": {MUTATIONS} mutants\n") == 2, output[-3000:]
    assert "addresses resolved" in output
