"""A short run of the CFI checker's sanitizer fuzz target (`make -C native/fuzz asan-synth`,
native/fuzz/synth_driver.c): hand-written hostile functions and a few hundred seeded slices of
libc's, ld.so's and libstdc++'s .text (with random CFI, and mutants), interpreted and checked under
ASAN+UBSAN with the walk's invariants checked.

The full run (~30 s) is `make asan-synth` (or `make asan`). The seed is printed;
FASTUNWIND_SYNTH_FUZZ_SEED=<seed> repeats a run.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.test_walk_fuzz import sanitizers_unavailable
from tests.support.paths import FUZZ_DIR

INPUTS = 200  # slices per file, each with 3 mutants: ~5 s under ASAN, after a ~15 s build


def test_synth_fuzz_target_short_run(tmp_path: Path) -> None:
    reason = sanitizers_unavailable(tmp_path)
    if reason:
        pytest.skip(reason)
    seed = int(os.environ.get("FASTUNWIND_SYNTH_FUZZ_SEED", random.randrange(1, 2**32)))
    print(f"synth fuzz seed: FASTUNWIND_SYNTH_FUZZ_SEED={seed}")
    result = subprocess.run(
        ["make", "-C", str(FUZZ_DIR), "asan-synth", f"BUILD={tmp_path / 'build'}", f"SEED={seed}",
         f"SYNTH_INPUTS={INPUTS}", f"PYTHON={sys.executable}"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"make asan-synth failed (seed {seed}):\n{output[-6000:]}"
    assert "inputs clean" in output, output[-3000:]
