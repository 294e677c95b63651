"""`fastunwind perf-script` streams the recording (windows, perf_data.h "Streaming") and walks on
every CPU: the output is the same bytes whatever the window size and the number of threads, and the
same as the whole recording unwound at once through the API."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys

import pytest

from fastunwind import _core
from fastunwind.perf.data import PerfData
from fastunwind.perf_script import render_folded, render_perf_script, unwind_recording
from fastunwind.perf.replay import replay

from tests.support.paths import SRC

CLI = [sys.executable, "-m", "fastunwind", "perf-script"]


def run(*args: str, stdin=subprocess.DEVNULL, **env: str) -> bytes:
    environment = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
                   **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}, **env}
    result = subprocess.run([*CLI, *args], capture_output=True, env=environment, stdin=stdin)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout


@pytest.mark.parametrize("name", ["c", "python"])
def test_small_windows_and_threads_give_the_same_bytes(perf_recordings, name):
    path = str(perf_recordings.get(name).data_file)
    # the CLI's default mode: a sample in code without CFI (a library's _init at startup) unwinds
    # through synthesized rows there
    unwound, _stats = unwind_recording(path, synth="missing")
    whole, folded = io.BytesIO(), io.BytesIO()
    render_perf_script(unwound, whole)
    render_folded(unwound, folded)
    default = run("-i", path)
    assert default == whole.getvalue() and default
    # 1-byte windows: a window at every FINISHED_ROUND (but the first: perf's rule lags a round)
    assert run("-i", path, FASTUNWIND_WINDOW_BYTES="1") == default
    assert run("-i", path, FASTUNWIND_WINDOW_BYTES="1", FASTUNWIND_THREADS="1") == default
    assert run("-i", path, FASTUNWIND_THREADS="2") == default
    assert run("-i", path, "--folded", FASTUNWIND_WINDOW_BYTES="1") == folded.getvalue()
    with open(path, "rb") as stdin:  # a regular file on stdin is mapped as any other
        assert run("-i", "-", stdin=stdin, FASTUNWIND_WINDOW_BYTES="1") == default


def test_a_pipe_in_small_windows_gives_the_same_bytes(perf_recordings):
    path = str(perf_recordings.get("c").data_file)
    default = run("-i", path)
    cat = subprocess.Popen(["cat", path], stdout=subprocess.PIPE)
    piped = run("-i", "-", stdin=cat.stdout, FASTUNWIND_WINDOW_BYTES="1")
    cat.stdout.close()
    assert cat.wait() == 0
    assert piped == default  # a file-mode recording through a pipe is read whole (its features follow the data)


@pytest.mark.parametrize("name", ["c", "python"])
def test_walking_threads_give_the_single_threads_frames(perf_recordings, name):
    perf = PerfData.open(str(perf_recordings.get(name).data_file))
    replayed = replay(perf)
    space_ids = replayed.space_ids.tobytes()
    spaces = [space.to_core() for space in replayed.session.spaces]
    one = _core.unwind_samples(perf.native, space_ids, spaces, 127, threads=1)
    for threads in (2, 3, 8):
        assert _core.unwind_samples(perf.native, space_ids, spaces, 127, threads=threads)[:6] == one[:6]


def test_a_file_descriptor_gets_the_bytes_a_callable_gets(perf_recordings, tmp_path):
    """A stream's text goes to a file's descriptor, written by C (no bytes object per chunk), and
    to anything else through its write method: the same bytes; a closed pipe is BrokenPipeError."""
    from fastunwind.perf.script import stream_recording

    path = str(perf_recordings.get("c").data_file)
    through_python = io.BytesIO()
    stream_recording(path, through_python, window_bytes=1)
    with open(tmp_path / "out.txt", "wb") as f:
        f.write(b"before\n")  # buffered by Python: flushed before C writes
        stream_recording(path, f, window_bytes=1)
    assert (tmp_path / "out.txt").read_bytes() == b"before\n" + through_python.getvalue()
    with gzip.open(tmp_path / "out.txt.gz", "wb") as compressed:  # its fileno() is the .gz file's
        stream_recording(path, compressed, window_bytes=1)
    assert gzip.decompress((tmp_path / "out.txt.gz").read_bytes()) == through_python.getvalue()
    reader, writer = os.pipe()
    os.close(reader)
    with open(writer, "wb") as closed, pytest.raises(BrokenPipeError):
        stream_recording(path, closed)
