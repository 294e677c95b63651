"""A short run of the stack walker's sanitizer fuzz target (`make -C native/fuzz asan-walk`,
native/fuzz/walk_driver.c): the hand-written hostile stacks and a few thousand seeded random and
mutated ones, walked under ASAN+UBSAN with the walk's invariants checked, with and without the walk
cache, frame by frame through fu_walk_step, and in the auto and dwarf backends.

The full run (~40 s) is `make asan-walk` (or `make asan`). The seed is printed;
FASTUNWIND_WALK_FUZZ_SEED=<seed> repeats a run, and the driver's output names the saved failing
input and how to replay it.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.fuzz_targets import run_target

ITERATIONS = 20000  # ~2 s under ASAN, after a ~10 s build


def test_walker_fuzz_target_short_run(tmp_path: Path) -> None:
    output = run_target(tmp_path, "asan-walk", "FASTUNWIND_WALK_FUZZ_SEED", WALK_ITERATIONS=ITERATIONS)
    assert "hand-written cases clean" in output and "inputs clean" in output, output[-3000:]
