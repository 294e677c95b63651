"""`fastunwind bench`: backends timed side by side on one recording, the same frames from each."""

from __future__ import annotations

import re
import subprocess
import sys

CLI = [sys.executable, "-m", "fastunwind", "bench"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True,
                          env={"NO_COLOR": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_backends_are_timed_and_agree(perf_recordings):
    result = run("-i", str(perf_recordings.get("c").data_file), "--backend", "auto,dwarf,table", "--repeat", "2")
    assert result.returncode == 0, result.stderr
    walked = int(re.search(r"(\d+) samples walked", result.stdout).group(1))
    assert walked > 100
    rows = {line.split()[0]: line for line in result.stdout.splitlines()
            if line.split() and line.split()[0] in ("auto", "dwarf", "table")}
    assert set(rows) == {"auto", "dwarf", "table"}
    for backend in ("dwarf", "table"):
        assert f"{walked} of {walked}" in rows[backend], rows[backend]
    # ns/frame all / first / best are numbers
    assert re.search(r"\d+\.\d / \d+\.\d / \d+\.\d", rows["auto"])


def test_unknown_backend_is_refused(perf_recordings):
    result = run("-i", str(perf_recordings.get("c").data_file), "--backend", "auto,fast")
    assert result.returncode == 1
    assert "--backend: fast: choose from" in result.stderr
