"""Short runs of the sanitizer fuzz targets of native/fuzz from the suite: whether ASAN+UBSAN
programs build and run here, and one run of a `make asan-X` target in a build directory of the
test's own (never racing a developer's `make asan` in native/fuzz/build), with a seed that is
printed and can be fixed by an environment variable."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import FUZZ_DIR

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


def run_target(tmp_path: Path, target: str, seed_variable: str, **make_variables: object) -> str:
    """The output of `make -C native/fuzz TARGET` with `make_variables` (and PYTHON, SEED, BUILD),
    asserted to have succeeded; skips the test where sanitizers do not run. The seed is
    `seed_variable`'s value from the environment, else random, and is printed."""
    reason = sanitizers_unavailable(tmp_path)
    if reason:
        pytest.skip(reason)
    seed = int(os.environ.get(seed_variable, random.randrange(1, 2**32)))
    print(f"{target} seed: {seed_variable}={seed}")
    result = subprocess.run(
        ["make", "-C", str(FUZZ_DIR), target, f"BUILD={tmp_path / 'build'}", f"SEED={seed}",
         f"PYTHON={sys.executable}", *(f"{name}={value}" for name, value in make_variables.items())],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"make {target} failed (seed {seed}):\n{output[-6000:]}"
    return output
