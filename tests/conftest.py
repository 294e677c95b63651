"""Set-up for every test layer: src/ and scripts/ importable, the package's caches in a directory of
this run, and fixtures over the helpers of shared_helpers.py.

The package is used from src/ unless it is installed; subprocesses get src/ on PYTHONPATH too.
"""
from __future__ import annotations

import os
import tempfile
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
for _extra in (REPO_ROOT / "src", REPO_ROOT / "scripts"):
    if str(_extra) not in sys.path:
        sys.path.insert(0, str(_extra))

from shared_helpers import assemble_source, run_fastunwind, run_readelf  # noqa: E402  (needs scripts/ on sys.path)


def pytest_configure(config: pytest.Config) -> None:
    # caches the package writes (compact tables) go to a directory of this run, not the user's
    if "FASTUNWIND_TEST_KEEP_CACHE" not in os.environ:
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="fastunwind-test-cache-")
    config.addinivalue_line("markers", "slow: takes more than a minute; deselect with -m 'not slow'")


@pytest.fixture
def fastunwind_cli():
    """fastunwind_cli(["table", path]) -> CompletedProcess (bytes)."""
    return run_fastunwind


@pytest.fixture
def readelf():
    """readelf(["-wF", path]) -> CompletedProcess (bytes)."""
    return run_readelf


@pytest.fixture
def assemble():
    """assemble(source, tmp_path, extra_flags=()) -> Path of the built object (see assemble_source)."""
    return assemble_source
