"""`fastunwind report`: the JSON document's exact shape, -o, sections per thread, sort keys, and bad
input as one line on stderr with a non-zero exit (never a traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import SRC

CLI = [sys.executable, "-m", "fastunwind", "report"]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
           **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fastunwind: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_json_is_exactly_the_documented_document_and_counts_every_sample(perf_recordings, tmp_path):
    data = str(perf_recordings.get("c").data_file)
    result = run("-i", data, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"samples", "functions", "synth"} and isinstance(document["samples"], int)
    synth = document["synth"]  # --synth missing, the default
    assert set(synth) == {"mode", "synthesized_frames", "corrected_frames", "samples", "complete_samples"}
    assert synth["mode"] == "missing" and synth["corrected_frames"] == 0
    assert synth["complete_samples"] <= synth["samples"] <= synth["synthesized_frames"]
    for function in document["functions"]:
        assert set(function) == {"name", "module", "self", "total"}
        assert isinstance(function["name"], str) and isinstance(function["module"], str)
        assert isinstance(function["self"], int) and isinstance(function["total"], int)
        assert function["self"] <= function["total"] <= document["samples"]
    assert sum(function["self"] for function in document["functions"]) == document["samples"]
    selfs = [function["self"] for function in document["functions"]]
    assert selfs == sorted(selfs, reverse=True)
    # -o writes the same document
    written = tmp_path / "report.json"
    assert run("-i", data, "--json", "-o", str(written)).returncode == 0
    assert json.loads(written.read_text()) == document


def test_children_sorts_by_total_and_sort_keys_are_columns(perf_recordings):
    data = str(perf_recordings.get("c").data_file)
    document = json.loads(run("-i", data, "--json", "--children", "--sort", "comm,tid,sym").stdout)
    totals = [function["total"] for function in document["functions"]]
    assert totals == sorted(totals, reverse=True)
    first = document["functions"][0]
    assert set(first) == {"name", "module", "self", "total", "comm", "pid", "tid"} and first["comm"] == "cworkload"
    text = run("-i", data, "--sort", "dso,sym", "--top", "3").stdout.splitlines()
    assert text[2].split()[-2:] == ["Shared", "Object"] or "Shared Object" in text[2]
    assert len([line for line in text if not line.startswith("#")]) == 3


def test_sections_per_thread_add_up_to_the_samples(perf_recordings):
    data = str(perf_recordings.get("hackbench-threads").data_file)
    document = json.loads(run("-i", data, "--json", "--per-thread", "--top", "2").stdout)
    threads = document["threads"]
    assert len(threads) > 1
    assert sum(thread["samples"] for thread in threads) == document["samples"]
    assert all(len(thread["functions"]) <= 2 for thread in threads)
    assert [t["samples"] for t in threads] == sorted((t["samples"] for t in threads), reverse=True)
    text = run("-i", data, "--per-thread", "--top", "2").stdout
    assert text.count("\n# thread ") == len(threads)


def test_names_are_whole_when_piped(perf_recordings):
    data = str(perf_recordings.get("compiler").data_file)
    longest = max(len(function["name"]) for function in json.loads(run("-i", data, "--json").stdout)["functions"])
    assert longest > 200  # C++ names
    assert max(len(line) for line in run("-i", data).stdout.splitlines()) > longest


def test_bad_input_is_one_line_and_a_failure(perf_recordings, tmp_path):
    data = str(perf_recordings.get("c").data_file)
    assert "cannot write" in one_error_line(run("-i", data, "-o", str(tmp_path / "missing" / "out.txt")))
    assert "No such file" in one_error_line(run("-i", str(tmp_path / "absent.data")))
    garbage = tmp_path / "garbage.data"
    garbage.write_bytes(b"not a recording")
    one_error_line(run("-i", str(garbage)))
    result = run("-i", data, "--sort", "sym,cycles")
    assert result.returncode == 2 and "unknown sort key 'cycles'" in result.stderr


def test_a_recording_without_samples_is_an_error(tmp_path):
    empty = tmp_path / "empty.data"
    recorded = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-c", "1000000000", "--call-graph", "dwarf",
                               "-o", str(empty), "--", "true"], capture_output=True, text=True)
    if recorded.returncode != 0:
        pytest.skip(f"perf cannot record here: {recorded.stderr.strip()}")
    assert "no samples" in one_error_line(run("-i", str(empty)))
    perf_script = subprocess.run([sys.executable, "-m", "fastunwind", "perf-script", "-i", str(empty)],
                                 capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert "no samples" in one_error_line(perf_script) and perf_script.stdout == ""
