"""A short run of the core-file reader's sanitizer fuzz target (`make -C native/fuzz asan-core`,
native/fuzz/core_driver.c): cores built by the driver and a gcore of a sleeping process, with
seeded mutants of their headers and notes, parsed under ASAN+UBSAN with what the parse promises
checked and the memory read through both core readers.

The full run is `make asan-core` (or `make asan`). FASTUNWIND_CORE_FUZZ_SEED=<seed> repeats a run.
"""
from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from tests.fuzz.test_walk_fuzz import sanitizers_unavailable
from tests.support.paths import FUZZ_DIR

BUILT = 2000  # with their mutants and MUTATIONS of a gcore: a few seconds under ASAN
MUTATIONS = 1000


def test_core_reader_fuzz_target_short_run(tmp_path: Path) -> None:
    reason = sanitizers_unavailable(tmp_path)
    if reason:
        pytest.skip(reason)
    seed = int(os.environ.get("FASTUNWIND_CORE_FUZZ_SEED", random.randrange(1, 2**32)))
    print(f"core fuzz seed: FASTUNWIND_CORE_FUZZ_SEED={seed}")
    result = subprocess.run(
        ["make", "-C", str(FUZZ_DIR), "asan-core", f"BUILD={tmp_path / 'build'}", f"SEED={seed}",
         f"CORE_BUILT={BUILT}", f"CORE_MUTATIONS={MUTATIONS}"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"make asan-core failed (seed {seed}):\n{output[-6000:]}"
    assert "inputs passed" in output, output[-3000:]
