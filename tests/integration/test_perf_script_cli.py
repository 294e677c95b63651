"""`fastunwind perf-script`: the CLI's three outputs on a recording, recordings without user stacks
(their callchains, with a note) and recordings cut short (what is complete, with a note)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import BinaryIO

import pytest

from tests.support.paths import SRC

CLI = [sys.executable, "-m", "fastunwind", "perf-script"]


def run(*args: str, stdin: BinaryIO | int = subprocess.DEVNULL) -> subprocess.CompletedProcess:
    # this checkout's package (not an installed one), and the test run's cache directory
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
           **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, stdin=stdin)


def test_folded_stacks_count_every_sample_and_mark_truncation(perf_recordings):
    recording = perf_recordings.get("c")
    result = run("-i", str(recording.data_file), "--folded")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines]
    assert sum(counts) == recording.samples or sum(counts) > 100
    complete = [line for line in lines if ";_start;" in line]
    truncated = [line for line in lines if ";[truncated];" in line]
    assert complete and all(line.split(";")[1] == "_start" for line in complete)
    # the big-frame recursion overflows perf's 8 KiB stack copy: those stacks are marked, not rooted anywhere
    assert truncated and all("recurse_big_frames" in line for line in truncated)


def test_stats_report_outcomes_and_time(perf_recordings):
    result = run("-i", str(perf_recordings.get("python").data_file), "--stats")
    assert result.returncode == 0, result.stderr
    assert "ns/frame" in result.stdout and "end" in result.stdout


def test_recording_without_user_stacks_says_how_to_record(tmp_path):
    """A frame-pointer recording is printed from its callchains, every output works, and one note
    line says that DWARF unwinding needs --call-graph dwarf."""
    data = tmp_path / "fp.data"
    recorded = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "--call-graph", "fp", "-o", str(data),
                               "--", sys.executable, "-c", "sum(range(3_000_000))"], capture_output=True, text=True)
    if recorded.returncode != 0:
        pytest.skip(f"perf record is not permitted here: {recorded.stderr.strip()[:200]}")
    for mode in ((), ("--folded",), ("--stats",)):
        result = run("-i", str(data), *mode)
        assert result.returncode == 0, result.stderr
        assert result.stdout
        assert result.stderr.startswith("fastunwind: note:") and len(result.stderr.splitlines()) == 1
        assert "DWARF unwinding needs perf record --call-graph dwarf" in result.stderr
    assert "from the kernel's callchains" in result.stdout and "callchain" in result.stdout


def test_standard_input_is_a_recording_as_for_perf_script(tmp_path):
    """`-i -` reads a pipe-mode recording from standard input (`perf record -o - | ...`), as
    `perf script -i -` does: the same output as the recording read from a file; a cut one, an error."""
    data = tmp_path / "pipe.data"
    with open(data, "wb") as out:
        recorded = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "--call-graph", "dwarf", "-o", "-",
                                   "--", sys.executable, "-c", "sum(range(3_000_000))"], stdout=out,
                                  stderr=subprocess.PIPE, text=True)
    if recorded.returncode != 0:
        pytest.skip(f"perf record is not permitted here: {recorded.stderr.strip()[:200]}")
    from_file = run("-i", str(data))
    with open(data, "rb") as stdin:
        from_stdin = run("-i", "-", stdin=stdin)
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_file.stdout and from_stdin.stdout == from_file.stdout
    # perf record -o - killed: the samples before the cut, and one note saying where it was
    cut = tmp_path / "cut.data"
    cut.write_bytes(data.read_bytes()[:data.stat().st_size // 2])
    with open(cut, "rb") as stdin:
        from_cut = run("-i", "-", stdin=stdin)
    assert from_cut.returncode == 0 and from_cut.stderr.startswith("fastunwind: note: -: the stream ends inside")
    assert len(from_cut.stderr.splitlines()) == 1
    assert from_cut.stdout and from_file.stdout.startswith(from_cut.stdout.rsplit("\n\n", 2)[0])


def test_text_and_folded_output_are_the_api_renderings(perf_recordings):
    import io

    from fastunwind.perf_script import render_folded, render_perf_script, unwind_recording

    path = str(perf_recordings.get("c").data_file)
    unwound, _stats = unwind_recording(path, synth="missing")  # the CLI's default mode
    for option, render in ((None, render_perf_script), ("--folded", render_folded)):
        expected = io.StringIO()
        render(unwound, expected)
        result = run("-i", path, *([option] if option else []))
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected.getvalue() and result.stdout


def test_a_long_input_on_a_terminal_shows_progress_on_stderr(perf_recordings):
    """The progress bar goes to stderr, only on a terminal and for a long input (the threshold is
    lowered here), and changes nothing on stdout."""
    from tests.support.terminal import on_a_terminal

    data = str(perf_recordings.get("c").data_file)
    shown, progress = on_a_terminal(["perf-script", "-i", data, "--folded"], {})
    plain = run("-i", data, "--folded")
    assert shown.returncode == 0 and plain.returncode == 0
    assert shown.stdout.decode() == plain.stdout
    assert b"writing folded stacks" in progress and b"c.data" in progress
    assert "writing" not in plain.stderr  # not a terminal: no progress


def test_every_header_names_the_event_as_speedscope_reads_it(perf_recordings):
    """speedscope's perf importer (import/linux-tools-perf.ts) takes the last `(\\S+):\\s*$` of a
    sample's first line as its event and keeps only the samples of the first event it saw: without
    the name it took the time, and kept one sample."""
    import re

    result = run("-i", str(perf_recordings.get("c").data_file))
    headers = [block.split("\n", 1)[0] for block in result.stdout.split("\n\n") if block]
    assert headers and {re.search(r"(\S+):\s*$", header).group(1) for header in headers} == {"cpu-clock"}
