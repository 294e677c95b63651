"""A short run of the stack walker's sanitizer fuzz target (`make -C native/fuzz asan-walk`,
native/fuzz/walk_driver.c): the hand-written hostile stacks and a few thousand seeded random and
mutated ones, walked under ASAN+UBSAN with the walk's invariants checked, with and without the walk
cache, frame by frame through fu_walk_step, and in the auto and dwarf backends.

The full run (~40 s) is `make asan-walk` (or `make asan`). The seed is printed;
FASTUNWIND_WALK_FUZZ_SEED=<seed> repeats a run, and the driver's output names the saved failing
input and how to replay it.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import FUZZ_DIR

ITERATIONS = 20000  # ~2 s under ASAN, after a ~10 s build
ASAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:abort_on_error=1",
}


def sanitizers_unavailable(tmp_path: Path) -> str | None:
    """Why gcc cannot build and run an ASAN+UBSAN program here, or None."""
    for tool in ("make", "gcc", "objcopy"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    built = subprocess.run(["gcc", "-fsanitize=address,undefined", "-o", str(tmp_path / "probe"), str(probe)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return f"gcc cannot link the ASAN/UBSAN runtimes (libasan, libubsan): {built.stderr.strip()[-300:]}"
    ran = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, env={**os.environ, **ASAN_ENV})
    if ran.returncode != 0:
        return f"an ASAN program does not run here (ptrace, ASLR or memory limits?): {ran.stderr.strip()[-300:]}"
    return None


def test_walker_fuzz_target_short_run(tmp_path: Path) -> None:
    reason = sanitizers_unavailable(tmp_path)
    if reason:
        pytest.skip(reason)
    seed = int(os.environ.get("FASTUNWIND_WALK_FUZZ_SEED", random.randrange(1, 2**32)))
    print(f"walk fuzz seed: FASTUNWIND_WALK_FUZZ_SEED={seed}")
    # a build directory of its own: never races a developer's `make asan` in native/fuzz/build
    result = subprocess.run(
        ["make", "-C", str(FUZZ_DIR), "asan-walk", f"BUILD={tmp_path / 'build'}", f"SEED={seed}",
         f"WALK_ITERATIONS={ITERATIONS}", f"PYTHON={sys.executable}"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"make asan-walk failed (seed {seed}):\n{output[-6000:]}"
    assert "hand-written cases clean" in output and "inputs clean" in output, output[-3000:]
