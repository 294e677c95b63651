"""A short run of the launcher's sanitizer fuzz target (`make -C native/fuzz asan-launcher`,
native/fuzz/launcher_driver.c): seeded command lines through its reader, its module reader over
mutated ELF files, the snapshot renderings of random threads, the caches' paths and keys under odd
environments, its core reader over a gcore and its mutants, and a backtrace of a child of its own,
under ASAN+UBSAN with what each promises checked.

The full run is `make asan-launcher` (or `make asan`). FASTUNWIND_LAUNCHER_FUZZ_SEED=<seed> repeats a
run.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.fuzz_targets import run_target

ROUNDS = 20000  # command lines; a tenth as many snapshots: a few seconds under ASAN


def test_launcher_fuzz_target_short_run(tmp_path: Path) -> None:
    output = run_target(tmp_path, "asan-launcher", "FASTUNWIND_LAUNCHER_FUZZ_SEED", LAUNCHER_ROUNDS=ROUNDS)
    assert "every one servable" in output and "a child backtraced, left running" in output, output[-3000:]
