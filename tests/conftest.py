"""Set-up for every test layer: the package's caches in a directory of this run, fixtures over the
helpers of tests/support/tools.py, and the perf recording fixtures of tests/support/recordings.py.

Every test folder is a package (tests/__init__.py and below), so pytest puts the repository root on
the import path and `tests.support`, `scripts` and `benchmarks` import by their full names. The package
itself is the installed one (`make build` installs it editable); subprocesses get src/ on PYTHONPATH.
"""
from __future__ import annotations

import os
import tempfile

import pytest

from tests.support.recordings import perf_recordings, perf_script_samples, perf_script_text  # noqa: F401 (fixtures)
from tests.support.tools import assemble_source, run_fastunwind, run_readelf


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
