"""Session fixtures: the workloads built, recorded with `perf record --call-graph dwarf`, and perf's
own `perf script` output parsed, for tests of fastunwind's perf walker against perf 6.1.

    def test_something(perf_recordings, perf_script_samples):
        recording = perf_recordings.get("c")        # record_workloads.Recording (skips if unavailable)
        recording.data_file                         # Path to c.data
        samples = perf_script_samples("c")          # list[perf_script_format.Sample], perf's stacks

Workload names are scripts/record_workloads.py's: c, c-fp, c-fp-debugframe, python, compiler,
hackbench-threads, hackbench-processes. Each is recorded on first use, once per session, into a
temporary directory; a test asking for one that cannot be recorded (perf missing or not permitted,
hackbench not installed) is skipped with the reason.

Environment:
    FASTUNWIND_PERF_RECORDINGS=DIR   use recordings made by `scripts/record_workloads.py DIR` (its
                                     manifest.json) instead of recording: quicker when iterating
    FASTUNWIND_PERF_SECONDS=S        seconds per workload when recording (default 0.5)
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from scripts import record_workloads
from tests.support.perf_script_format import Sample, parse

# 0.5 s at -F 1000 gives ~500 samples per workload, about 60 per C phase: enough to find every
# phase, and the seven recordings plus perf script take ~12 s here.
DEFAULT_SECONDS = 0.5
FREQUENCY = 1000


class PerfRecordings:
    """Records each workload on first request; remembers failures so each is tried once."""

    def __init__(self, out_dir: Path, settings: record_workloads.Settings,
                 prerecorded: dict[str, record_workloads.Recording] | None = None):
        self.out_dir = out_dir
        self.settings = settings
        self._recordings: dict[str, record_workloads.Recording] = dict(prerecorded or {})
        self._problem: record_workloads.PerfProblem | None | bool = False if prerecorded is None else None
        self._built = prerecorded is not None
        self._build_error = ""

    def _ensure_ready(self) -> None:
        if self._problem is False:
            self._problem = record_workloads.perf_problem(self.out_dir)
        if self._problem:
            pytest.skip(self._problem.message)
        if not self._built and not self._build_error:
            missing = [tool for tool in ("make", "gcc") if not shutil.which(tool)]
            if missing:
                self._build_error = f"cannot build workloads/: {', '.join(missing)} not found"
            else:
                try:
                    record_workloads.build(self.settings)
                    self._built = True
                except RuntimeError as error:
                    self._build_error = str(error)
        if self._build_error:
            pytest.fail(self._build_error, pytrace=False)

    def get(self, name: str) -> record_workloads.Recording:
        """The recording of workload `name`; skips the test when it cannot be recorded here."""
        if name not in record_workloads.WORKLOADS:
            raise KeyError(f"no workload {name!r}; known: {', '.join(record_workloads.WORKLOADS)}")
        if name not in self._recordings:
            self._ensure_ready()
            self._recordings[name] = record_workloads.record(record_workloads.WORKLOADS[name],
                                                             self.out_dir, self.settings)
        recording = self._recordings[name]
        if recording.status == "skipped":
            pytest.skip(f"workload {name}: {recording.reason}")
        if recording.status != "recorded":
            pytest.fail(f"workload {name}: {recording.reason}", pytrace=False)
        return recording


def _prerecorded(directory: Path) -> dict[str, record_workloads.Recording]:
    manifest_path = directory / "manifest.json"
    if not manifest_path.exists():
        pytest.fail(f"FASTUNWIND_PERF_RECORDINGS={directory}: no manifest.json there; make one with "
                    f"scripts/record_workloads.py {directory}", pytrace=False)
    manifest = json.loads(manifest_path.read_text())
    recordings = {}
    for entry in manifest["recordings"]:
        for key in ("data_file", "script_file"):
            entry[key] = Path(entry[key]) if entry[key] else None
        for key in ("command", "perf_command"):
            entry[key] = tuple(entry[key])
        recordings[entry["name"]] = record_workloads.Recording(**entry)
    return recordings


@pytest.fixture(scope="session")
def perf_recordings(tmp_path_factory: pytest.TempPathFactory) -> PerfRecordings:
    """PerfRecordings: .get(name) -> record_workloads.Recording (data_file, script_file, command...)."""
    given = os.environ.get("FASTUNWIND_PERF_RECORDINGS")
    if given:
        directory = Path(given).resolve()
        return PerfRecordings(directory, record_workloads.Settings(build_dir=directory / "build"),
                              _prerecorded(directory))
    out_dir = tmp_path_factory.mktemp("perf-recordings")
    seconds = float(os.environ.get("FASTUNWIND_PERF_SECONDS", DEFAULT_SECONDS))
    settings = record_workloads.Settings(seconds=seconds, frequency=FREQUENCY, build_dir=out_dir / "build")
    return PerfRecordings(out_dir, settings)


@pytest.fixture(scope="session")
def perf_script_text(perf_recordings: PerfRecordings):
    """perf_script_text(name) -> str: perf 6.1's `perf script --no-inline -F comm,tid,time,ip,sym,
    symoff,dso` output for the workload's recording (the oracle)."""
    cache: dict[str, str] = {}

    def text(name: str) -> str:
        if name not in cache:
            recording = perf_recordings.get(name)
            if recording.script_file is None:
                pytest.fail(f"workload {name}: recorded without its perf script output", pytrace=False)
            cache[name] = recording.script_file.read_text()
        return cache[name]
    return text


@pytest.fixture(scope="session")
def perf_script_samples(perf_script_text):
    """perf_script_samples(name) -> list[Sample]: perf's stacks for the workload, parsed."""
    cache: dict[str, list[Sample]] = {}

    def samples(name: str) -> list[Sample]:
        if name not in cache:
            cache[name] = parse(perf_script_text(name))
        return cache[name]
    return samples
