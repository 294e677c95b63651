"""The launcher's native `perf-script -i FILE` (native/cli/recording.c) against the Python path,
byte for byte (stdout, stderr, status), on the project's real recordings (a C program, Debian's
python3, the hackbench processes, clang compiling): text, --folded, -o, a recording cut short (its
note);
FASTUNWIND_NATIVE=require proves the launcher served each one itself. What it leaves to the
Python CLI (another format, a filter, a recording read from a pipe, a table not in the caches)
is the Python CLI's. The caches are a directory of the test's: the Python path's first run fills
them, as a user's first run does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastunwind import _core
from tests.support.paths import LAUNCHER
from tests.support.recordings import PerfRecordings

RECORDINGS = ["c", "python", "hackbench-processes", "compiler"]


def launch(args: list[str], cache: Path, native: str | None = None,
           verb: str = "perf-script") -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
    env["XDG_CACHE_HOME"] = str(cache)
    if native is not None:
        env["FASTUNWIND_NATIVE"] = native
    return subprocess.run([str(LAUNCHER), verb, *args], capture_output=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=600)


def assert_native_is_python(args: list[str], cache: Path, verb: str = "perf-script") -> subprocess.CompletedProcess[bytes]:
    """The Python path's run (first: it fills the caches), then the launcher's own, identical."""
    python = launch(args, cache, native="0", verb=verb)
    native = launch(args, cache, native="require", verb=verb)
    assert native.returncode != 125, native.stderr
    assert native.stderr == python.stderr
    assert (native.returncode, native.stdout) == (python.returncode, python.stdout)
    return native


@pytest.mark.parametrize("name", RECORDINGS)
def test_text_and_folded_stacks_are_the_python_paths(perf_recordings: PerfRecordings, name: str,
                                                     tmp_path: Path) -> None:
    recording = perf_recordings.get(name)
    result = assert_native_is_python(["-i", str(recording.data_file)], tmp_path / "cache")
    assert result.returncode == 0 and result.stdout.count(b"\n\n") > 10
    # the bigger recordings are several windows (8 MiB each): their stacks counted across them
    folded = assert_native_is_python(["-i", str(recording.data_file), "--folded"], tmp_path / "cache")
    assert folded.returncode == 0 and folded.stdout.count(b"\n") > 1


def test_output_file(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    data = str(perf_recordings.get("c").data_file)
    cache = tmp_path / "cache"
    python, native = tmp_path / "python.txt", tmp_path / "native.txt"
    assert launch(["-i", data, "-o", str(python)], cache, native="0").returncode == 0
    result = launch([f"--input={data}", "-o", str(native)], cache, native="require")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert native.read_bytes() == python.read_bytes() and python.stat().st_size


def test_a_recording_cut_short_has_the_python_paths_note(tmp_path: Path) -> None:
    """A file cut short loses the kernel's build-id with its feature sections (its symbols are then
    /proc/kallsyms', which the Python path reads): user samples only, cut at two thirds."""
    data = tmp_path / "user.data"
    recorded = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock:u", "--call-graph", "dwarf", "-o", str(data),
                               "--", "python3", "-c", "sum(range(3_000_000))"], capture_output=True, text=True)
    if recorded.returncode != 0:
        pytest.skip(f"perf record is not permitted here: {recorded.stderr.strip()[:200]}")
    cut = tmp_path / "cut.data"
    cut.write_bytes(data.read_bytes()[: data.stat().st_size * 2 // 3])
    result = assert_native_is_python(["-i", str(cut)], tmp_path / "cache")
    assert result.stderr.startswith(b"fastunwind: note: ") and result.stdout


@pytest.mark.parametrize("options", [["--format", "folded"], ["--stats"], ["--comm", "x"], ["--synth", "off"], ["-i", "-"]],
                         ids=["format", "stats", "filter", "synth", "pipe"])
def test_what_it_leaves_to_python(perf_recordings: PerfRecordings, options: list[str], tmp_path: Path) -> None:
    data = str(perf_recordings.get("c").data_file)
    cache = tmp_path / "cache"
    assert launch(["-i", data], cache, native="0").returncode == 0
    result = launch(["-i", data, *options], cache, native="require")
    assert result.returncode == 125 and result.stderr.startswith(b"fastunwind: not served natively: ")


def test_a_table_missing_from_the_caches_is_the_python_paths(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    data = str(perf_recordings.get("c").data_file)
    result = launch(["-i", data], tmp_path / "empty-cache", native="require")
    assert result.returncode == 125 and b"not in the cache" in result.stderr
    # the Python CLI serves it (and fills the caches): the next run is native
    assert_native_is_python(["-i", data], tmp_path / "empty-cache")


def test_a_cached_table_of_another_format_version_is_rebuilt_not_misread(perf_recordings: PerfRecordings,
                                                                         tmp_path: Path) -> None:
    """The compact tables the Python path cached, stamped with the previous format version (which
    read the save slots of DRAP frames otherwise): the launcher does not serve them, the Python
    CLI rebuilds them, and the launcher serves the next run."""
    data = str(perf_recordings.get("c").data_file)
    cache = tmp_path / "cache"
    assert launch(["-i", data], cache, native="0").returncode == 0
    tables = sorted((cache / "fastunwind" / "compact").glob("*.fut"))
    assert tables
    for table in tables:
        raw = bytearray(table.read_bytes())
        raw[8:12] = (_core.COMPACT_VERSION - 1).to_bytes(4, "little")  # fu_compact_header.version
        table.write_bytes(bytes(raw))
    result = launch(["-i", data], cache, native="require")
    assert result.returncode == 125, result.stderr
    assert_native_is_python(["-i", data], cache)
    assert all(int.from_bytes(t.read_bytes()[8:12], "little") == _core.COMPACT_VERSION for t in tables)


#: the launcher's output held before its first write (native/cli/recording.h FU_CLI_HELD_OUTPUT_BYTES)
HELD_OUTPUT_BYTES = 8 << 20

#: a recording whose text passes HELD_OUTPUT_BYTES before a module is mapped: deep Python stacks
#: (about 1.8 KB of text a sample), then _lzma and liblzma loaded (-S: no site module imports them)
LATE_MODULE_PROGRAM = """
def f(n): return f(n - 1) if n else sum(range(40_000))
for _ in range(800): f(40)
import lzma
lzma.compress(bytes(10_000), preset=0)
"""


def test_a_table_missing_late_falls_back_before_any_write(tmp_path: Path) -> None:
    """A module mapped after the first HELD_OUTPUT_BYTES of text, its tables gone from the caches
    since the last run: the launcher finds out before it writes anything (FASTUNWIND_NATIVE=require:
    not served, nothing on stdout), so the Python CLI's output is the whole output, once; so it
    does when the last run kept a record of the recording's needs."""
    data = tmp_path / "late.data"
    recorded = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-c", "50000", "--call-graph", "dwarf",
                               "-o", str(data), "--", sys.executable, "-S", "-c", LATE_MODULE_PROGRAM],
                              capture_output=True, text=True)
    if recorded.returncode != 0:
        pytest.skip(f"perf record is not permitted here: {recorded.stderr.strip()[:200]}")
    cache = tmp_path / "cache"
    python = launch(["-i", str(data)], cache, native="0")
    assert python.returncode == 0 and python.stderr == b""
    assert python.stdout.find(b"_lzma") > HELD_OUTPUT_BYTES, "the module is mapped before the first write"
    # the launcher's own run checks, then keeps what the recording needs: the next run's check is a
    # stat of each file it lists, which finds the table gone below
    native = launch(["-i", str(data)], cache, native="require")
    assert (native.returncode, native.stdout, native.stderr) == (0, python.stdout, b"")
    assert len(list((cache / "fastunwind" / "recordings").glob("*.needs"))) == 1
    import _lzma

    from fastunwind.elf import ElfFile

    build_id = ElfFile.open(_lzma.__file__).build_id_hex
    gone = [entry for folder in ("compact", "symbols") for entry in (cache / "fastunwind" / folder).glob(f"{build_id}*")]
    assert build_id and gone
    for entry in gone:
        entry.unlink()
    refused = launch(["-i", str(data)], cache, native="require")
    assert (refused.returncode, refused.stdout) == (125, b""), refused.stderr
    assert b"not in the cache" in refused.stderr and b"_lzma" in refused.stderr
    served = launch(["-i", str(data)], cache)  # the launcher, falling back to the Python CLI
    assert (served.returncode, served.stderr) == (0, b"")
    assert served.stdout == python.stdout  # whole, and once
    # the Python CLI filled the caches again: the next run is the launcher's own
    assert_native_is_python(["-i", str(data)], cache)


def test_a_reader_that_goes_away(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    """`| head`: the Python CLI stops quietly with 0 (SIGPIPE ignored, the broken pipe caught), so
    does the launcher."""
    data = str(perf_recordings.get("hackbench-processes").data_file)
    cache = tmp_path / "cache"
    assert launch(["-i", data], cache, native="0").returncode == 0
    for native in ("0", "require"):
        env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
        env.update(XDG_CACHE_HOME=str(cache), FASTUNWIND_NATIVE=native)
        writer = subprocess.Popen([str(LAUNCHER), "perf-script", "-i", data], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        assert writer.stdout is not None and writer.stdout.read(100)
        writer.stdout.close()
        _, stderr = writer.communicate(timeout=600)
        assert (writer.returncode, stderr) == (0, b""), native


def launch_to_file(args: list[str], cache: Path, out: Path, native: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """As `launch`, standard output a regular file (`> out` after what it holds: written from its end,
    not appended), where the launcher writes as it goes and takes back what it wrote before falling
    back to the Python CLI."""
    env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
    env["XDG_CACHE_HOME"] = str(cache)
    if native is not None:
        env["FASTUNWIND_NATIVE"] = native
    with open(out, "r+b") as stdout:
        stdout.seek(0, os.SEEK_END)
        return subprocess.run([str(LAUNCHER), "perf-script", *args], stdout=stdout, stderr=subprocess.PIPE, env=env,
                              stdin=subprocess.DEVNULL, timeout=600)


def test_text_to_a_file_is_the_python_paths(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    data = str(perf_recordings.get("hackbench-processes").data_file)
    cache = tmp_path / "cache"
    python = launch(["-i", data], cache, native="0")
    out = tmp_path / "out.txt"
    out.write_bytes(b"before\n")
    result = launch_to_file(["-i", data], cache, out, native="require")
    assert (result.returncode, result.stderr) == (0, b"")
    assert out.read_bytes() == b"before\n" + python.stdout


def test_a_file_written_to_is_taken_back_for_the_python_path(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    """A table missing from the caches: the launcher, which may have written text to the file, truncates
    it back to where it started; required to serve, it leaves the file as it was, else the Python CLI
    writes the text from there."""
    data = str(perf_recordings.get("c").data_file)
    out = tmp_path / "out.txt"
    out.write_bytes(b"before\n")
    result = launch_to_file(["-i", data], tmp_path / "empty-cache", out, native="require")
    assert result.returncode == 125 and b"not in the cache" in result.stderr
    assert out.read_bytes() == b"before\n"
    result = launch_to_file(["-i", data], tmp_path / "other-cache", out)
    python = launch(["-i", data], tmp_path / "third-cache", native="0")
    assert (result.returncode, result.stderr) == (python.returncode, python.stderr)
    assert out.read_bytes() == b"before\n" + python.stdout and python.stdout


def test_a_write_that_fails_is_the_python_paths_error(perf_recordings: PerfRecordings, tmp_path: Path) -> None:
    """Standard output /dev/full (every write fails with ENOSPC): the Python CLI says so and exits 1
    (its OSError), and so does the launcher, never a quiet 0 with the text lost; only a reader that
    went away (EPIPE, above) is quiet."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    data = str(perf_recordings.get("c").data_file)
    cache = tmp_path / "cache"
    results = []
    for native in ("0", "require"):
        env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
        env.update(XDG_CACHE_HOME=str(cache), FASTUNWIND_NATIVE=native)
        with open("/dev/full", "wb") as full:
            results.append(subprocess.run([str(LAUNCHER), "perf-script", "-i", data], stdout=full,
                                          stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL, timeout=600))
    python, native = results
    assert python.returncode == 1 and b"No space left on device" in python.stderr
    assert (native.returncode, native.stderr) == (python.returncode, python.stderr)
