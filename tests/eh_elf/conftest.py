"""Session fixtures of the eh_elf tests: one cache directory per session, each library compiled once
(compiling libc costs ~1.5 s, libstdc++ ~2 s), and the bundled C workloads built once."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fastunwind import eh_elf
from fastunwind.address_space import ModuleImage

REPO_ROOT = Path(__file__).resolve().parents[2]
# the differential test reuses the compact table test's random states and record decoding
sys.path.insert(0, str(REPO_ROOT / "tests" / "compact_table"))


class Compiled:
    """Images and their eh_elfs, compiled on first request into the session's cache directory."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._done: dict[str, tuple[ModuleImage, object]] = {}

    def get(self, path: str | Path):
        path = str(path)
        if path not in self._done:
            image = ModuleImage.load(path)
            (result,) = eh_elf.compile_images([image], directory=str(self.directory))
            if isinstance(result, Exception):
                raise result
            self._done[path] = (image, result)
        return self._done[path]


@pytest.fixture(scope="session")
def compiled(tmp_path_factory) -> Compiled:
    return Compiled(tmp_path_factory.mktemp("eh_elf_cache"))


@pytest.fixture(scope="session")
def workloads(tmp_path_factory) -> Path:
    """workloads/'s C variants (CFI in .eh_frame; .debug_frame only; none), built once."""
    if not shutil.which("gcc") or not shutil.which("make"):
        pytest.skip("gcc and make are needed to build workloads/")
    out = tmp_path_factory.mktemp("workloads")
    built = subprocess.run(["make", "-s", "-C", str(REPO_ROOT / "workloads"), f"OUT={out}"], capture_output=True,
                           text=True)
    if built.returncode != 0:
        pytest.fail(f"make -C workloads failed:\n{built.stderr}", pytrace=False)
    return out
