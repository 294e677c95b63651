"""A short run of the CFI checker's sanitizer fuzz target (`make -C native/fuzz asan-synth`,
native/fuzz/synth_driver.c): hand-written hostile functions and a few hundred seeded slices of
libc's, ld.so's and libstdc++'s .text (with random CFI, and mutants), interpreted and checked under
ASAN+UBSAN with the walk's invariants checked.

The full run (~30 s) is `make asan-synth` (or `make asan`). The seed is printed;
FASTUNWIND_SYNTH_FUZZ_SEED=<seed> repeats a run.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.fuzz_targets import run_target

INPUTS = 200  # slices per file, each with 3 mutants: ~5 s under ASAN, after a ~15 s build


def test_synth_fuzz_target_short_run(tmp_path: Path) -> None:
    output = run_target(tmp_path, "asan-synth", "FASTUNWIND_SYNTH_FUZZ_SEED", SYNTH_INPUTS=INPUTS)
    assert "inputs clean" in output, output[-3000:]
