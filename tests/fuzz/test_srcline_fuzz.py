"""A short run of the source-line sanitizer target (`make -C native/fuzz asan-srcline`,
native/fuzz/srcline_driver.c): a -g -O2 shared object and the driver itself opened through libdw,
looked up at random addresses and near those with a chain, then bit-flipped copies of both, under
ASAN+UBSAN with every chain checked.

The full run is `make asan-srcline` (or `make asan`). The seed is printed;
FASTUNWIND_SRCLINE_FUZZ_SEED=<seed> repeats a run.
"""
from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from tests.fuzz.test_walk_fuzz import sanitizers_unavailable
from tests.support.paths import FUZZ_DIR

MUTATIONS = 10  # mutants of each file: a few seconds under ASAN, after a short build


def test_srcline_fuzz_target_short_run(tmp_path: Path) -> None:
    reason = sanitizers_unavailable(tmp_path)
    if reason:
        pytest.skip(reason)
    seed = int(os.environ.get("FASTUNWIND_SRCLINE_FUZZ_SEED", random.randrange(1, 2**32)))
    print(f"srcline fuzz seed: FASTUNWIND_SRCLINE_FUZZ_SEED={seed}")
    result = subprocess.run(
        ["make", "-C", str(FUZZ_DIR), "asan-srcline", f"BUILD={tmp_path / 'build'}", f"SEED={seed}",
         f"SRCLINE_MUTATIONS={MUTATIONS}"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"make asan-srcline failed (seed {seed}):\n{output[-6000:]}"
    assert output.count(f": {MUTATIONS} mutants\n") == 2, output[-3000:]
    assert "addresses resolved" in output
