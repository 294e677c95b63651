"""The launcher's native `report -i FILE [-o FILE] [--children] [--sort KEYS] [--top N]`
(native/cli/recording.c: the same stream, replay, walk and C table as the Python path's) against
the Python path, byte for byte (stdout, stderr, status), on the project's real recordings;
FASTUNWIND_NATIVE=require proves the launcher served each one itself. Other options, srcline, a
terminal's table (its columns fit the width) and a recording read from a pipe are the Python
CLI's."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_launcher_perf_script import RECORDINGS, assert_native_is_python, launch
from tests.support.paths import LAUNCHER
from tests.support.recordings import PerfRecordings


@pytest.mark.parametrize("name", RECORDINGS)
def test_the_table_is_the_python_paths(perf_recordings: PerfRecordings, name: str, tmp_path: Path) -> None:
    recording = perf_recordings.get(name)
    result = assert_native_is_python(["-i", str(recording.data_file)], tmp_path / "cache", verb="report")
    assert result.returncode == 0 and result.stdout.startswith(b"# ") and result.stdout.count(b"\n") > 5


#: the options it serves, in the spellings the Python parser reads too
SERVED = [["--children"], ["--sort", "dso,sym"], ["-s", "comm,tid,dso"], ["--sort=tid,sym,tid", "--children"],
          ["--top", "3"], ["--sort", "dso", "--top=2", "--children"]]


@pytest.mark.parametrize("options", SERVED, ids=["children", "dso-sym", "comm-tid-dso", "tid-sym", "top", "dso-top"])
@pytest.mark.parametrize("name", ["c", "hackbench-processes"])
def test_served_options_are_the_python_paths(perf_recordings: PerfRecordings, name: str, options: list[str],
                                             tmp_path: Path) -> None:
    recording = perf_recordings.get(name)
    result = assert_native_is_python(["-i", str(recording.data_file), *options], tmp_path / "cache", verb="report")
    assert result.returncode == 0 and result.stdout.startswith(b"# ")


def test_output_file(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    data = str(perf_recordings.get("c").data_file)
    cache = tmp_path / "cache"
    python, native = tmp_path / "python.txt", tmp_path / "native.txt"
    assert launch(["-i", data, "-o", str(python)], cache, native="0", verb="report").returncode == 0
    result = launch([f"--input={data}", "-o", str(native)], cache, native="require", verb="report")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert native.read_bytes() == python.read_bytes() and python.stat().st_size


@pytest.mark.parametrize("options", [["--no-children"], ["--sort", "sym,srcline"], ["--sort", "sym, dso"],
                                     ["--sort", "bogus"], ["--top", "0"], ["--json"], ["--per-thread"],
                                     ["--synth", "off"], ["--tid", "1"], ["-i", "-"]],
                         ids=["no-children", "srcline", "space", "unknown", "top-0", "json", "per-thread", "synth",
                              "filter", "pipe"])
def test_what_it_leaves_to_python(perf_recordings: PerfRecordings, options: list[str], tmp_path: Path) -> None:
    data = str(perf_recordings.get("c").data_file)
    cache = tmp_path / "cache"
    assert launch(["-i", data], cache, native="0", verb="report").returncode == 0
    result = launch(["-i", data, *options], cache, native="require", verb="report")
    assert result.returncode == 125 and result.stderr.startswith(b"fastunwind: not served natively: ")


def test_a_terminal_is_the_python_paths(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    """On a terminal the columns fit its width: standard output a terminal is left to Python."""
    data = str(perf_recordings.get("c").data_file)
    cache = tmp_path / "cache"
    assert launch(["-i", data], cache, native="0", verb="report").returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
    env.update(XDG_CACHE_HOME=str(cache), FASTUNWIND_NATIVE="require")
    leader, follower = pty.openpty()
    try:
        result = subprocess.run([str(LAUNCHER), "report", "-i", data], stdout=follower, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=env, timeout=600)
    finally:
        os.close(follower)
        os.close(leader)
    assert result.returncode == 125 and b"terminal" in result.stderr
