"""Debug files from a debuginfod server (fastunwind/elf/debuginfod.py): Debian's `debuginfod`,
started here on a free port over a directory holding one debug file (`debuginfod -F DIR`), asked
on 127.0.0.1 through DEBUGINFOD_URLS, stopped after. A program whose DWARF was moved out (and
whose debuglink names a file that is not there) gets its source lines from the server, cached in
DEBUGINFOD_CACHE_PATH; a server that cannot be reached costs one line and no source lines.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fastunwind.elf import ElfFile
from fastunwind.elf.debuginfod import DebuginfodClient
from fastunwind.srcline import open_source_lines

from tests.support.cli import build_split_debug_program

#: seconds the server gets to scan its directory
SCAN_SECONDS = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def program_and_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str, str]]:
    """(the stripped program, its build-id, the server's URL), the server serving its debug file."""
    if shutil.which("debuginfod") is None:
        pytest.skip("debuginfod is not installed (Debian package debuginfod)")
    stripped, debug_file = build_split_debug_program(tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    debug_file.rename(served / debug_file.name)  # the debuglink now names a missing file
    with ElfFile.open(str(stripped)) as elf:
        build_id = elf.build_id_hex
    assert build_id is not None
    port = _free_port()
    server = subprocess.Popen(["debuginfod", "-F", str(served), "-p", str(port), "-d", str(tmp_path / "db.sqlite"),
                               "-t", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SCAN_SECONDS
        while True:  # until the scan has indexed the file (404 before)
            try:
                with urllib.request.urlopen(f"{url}/buildid/{build_id}/debuginfo", timeout=5):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"debuginfod did not serve {build_id} within {SCAN_SECONDS} s")
                time.sleep(0.2)
        monkeypatch.setenv("DEBUGINFOD_URLS", url)
        monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
        yield stripped, build_id, url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_source_lines_from_the_server(program_and_server: tuple[Path, str, str], tmp_path: Path) -> None:
    stripped, build_id, _ = program_and_server
    with ElfFile.open(str(stripped)) as elf:
        assert open_source_lines(elf) is None  # nothing local
        client = DebuginfodClient()
        lines = open_source_lines(elf, client)
    assert client.failures == []
    assert lines is not None and lines.dwarf_error is None
    cached = tmp_path / "cache" / build_id / "debuginfo"
    assert cached.is_file()
    with ElfFile.open(str(stripped)) as elf:
        main = next(s for s in elf.symbols() if s.name == "main")
    chain = lines.lookup(main.value)
    assert chain and chain[-1][0] == "main" and chain[-1][1].endswith("small.c")
    # the second client finds the cached file without asking
    assert DebuginfodClient(["http://127.0.0.1:9"]).debuginfo(build_id) == str(cached)


def test_unreachable_server_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
    monkeypatch.setenv("DEBUGINFOD_TIMEOUT", "2")
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    client = DebuginfodClient([url])
    assert client.debuginfo("ab" * 20) is None
    assert client.debuginfo("cd" * 20) is None  # not asked again
    assert len(client.failures) == 1
    assert client.failures[0].startswith(f"debuginfod: {url}/buildid/{'ab' * 20}/debuginfo: ")
    assert "\n" not in client.failures[0]
    assert DebuginfodClient([]).debuginfo("ab" * 20) is None
