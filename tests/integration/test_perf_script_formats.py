"""`fastunwind perf-script --format`: speedscope's file checked against the facts of its format
(speedscope's src/lib/file-format-spec.ts, the schema https://www.speedscope.app/file-format-schema.json
is generated from) and holding every sample, per thread, with the first frames report counts; -o;
--folded as --format folded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

from tests.support.paths import SRC

#: the facts of speedscope's file format checked here
SCHEMA = "https://www.speedscope.app/file-format-schema.json"
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}
FILE_KEYS = {"$schema", "shared", "profiles", "name", "activeProfileIndex", "exporter"}
FRAME_KEYS = {"name", "file", "line", "col"}
SAMPLED_KEYS = {"type", "name", "unit", "startValue", "endValue", "samples", "weights"}


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
           **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}}
    return subprocess.run([sys.executable, "-m", "fastunwind", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)


def check_speedscope(document: dict) -> None:
    """Every required field with its type, nothing the format does not define."""
    assert set(document) <= FILE_KEYS and {"$schema", "shared", "profiles"} <= set(document)
    assert document["$schema"] == SCHEMA
    frames = document["shared"]["frames"]
    assert isinstance(frames, list) and frames
    for frame in frames:
        assert set(frame) <= FRAME_KEYS and isinstance(frame["name"], str)
        assert isinstance(frame.get("file", ""), str)
    assert 0 <= document.get("activeProfileIndex", 0) < len(document["profiles"])
    for profile in document["profiles"]:
        assert set(profile) == SAMPLED_KEYS and profile["type"] == "sampled"
        assert isinstance(profile["name"], str) and profile["unit"] in UNITS
        assert isinstance(profile["startValue"], (int, float)) and profile["endValue"] >= profile["startValue"]
        assert len(profile["samples"]) == len(profile["weights"])
        assert all(isinstance(weight, (int, float)) and weight >= 0 for weight in profile["weights"])
        for stack in profile["samples"]:
            assert stack and all(isinstance(index, int) and 0 <= index < len(frames) for index in stack)


def test_speedscope_holds_every_sample_of_every_thread(perf_recordings, tmp_path):
    data = str(perf_recordings.get("hackbench-threads").data_file)
    out = tmp_path / "profile.json"
    result = run("perf-script", "-i", data, "--format", "speedscope", "-o", str(out))
    assert result.returncode == 0 and result.stdout == "", result.stderr
    document = json.loads(out.read_text())
    check_speedscope(document)
    frames = document["shared"]["frames"]
    # every sample, in its thread's profile ("comm pid/tid"), as many as perf script prints per tid
    text = run("perf-script", "-i", data).stdout
    per_tid = Counter(int(block.split()[1]) for block in text.split("\n\n") if block.strip())
    profiles = {int(profile["name"].rsplit("/", 1)[1]): profile for profile in document["profiles"]}
    assert {tid: len(profile["samples"]) for tid, profile in profiles.items()} == per_tid
    # each stack's last frame (the leaf) is the function report counts as self
    leaves = Counter((frames[stack[-1]]["name"], frames[stack[-1]].get("file", ""))
                     for profile in document["profiles"] for stack in profile["samples"])
    report = json.loads(run("report", "-i", data, "--json", "--sort", "dso,sym").stdout)
    assert leaves == Counter({(f["name"], f["module"]): f["self"] for f in report["functions"]})
    # a stack that did not reach its end is rooted at its outcome, a frame in no file: "[truncated]"
    roots = [frames[stack[0]] for profile in document["profiles"] for stack in profile["samples"]]
    assert all(root.get("file") or (root["name"].startswith("[") and root["name"].endswith("]")) for root in roots)


def test_folded_is_format_folded_and_output_goes_to_the_file(perf_recordings, tmp_path):
    data = str(perf_recordings.get("c").data_file)
    folded = run("perf-script", "-i", data, "--folded").stdout
    assert folded and run("perf-script", "-i", data, "--format", "folded").stdout == folded
    out = tmp_path / "c.txt"
    assert run("perf-script", "-i", data, "-o", str(out)).stdout == ""
    assert out.read_text() == run("perf-script", "-i", data).stdout
    result = run("perf-script", "-i", data, "--format", "speedscope", "-o", str(tmp_path / "no" / "dir.json"))
    assert result.returncode == 1 and result.stderr.startswith("fastunwind: error: cannot write ")
    assert len(result.stderr.splitlines()) == 1
