"""The `fastunwind` command (native/cli, the launcher): a command line it does not serve itself
runs the Python CLI, with the Python CLI's output and exit status to the byte; FASTUNWIND_NATIVE=0
sends every command line there. (Its native `backtrace` and `core` are compared with the Python
path's in tests/integration/test_launcher_native.py.)"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.paths import LAUNCHER

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def launch(args: list[str], native: bool = True) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
    if not native:
        env["FASTUNWIND_NATIVE"] = "0"
    return subprocess.run([str(LAUNCHER), *args], capture_output=True, env=env, stdin=subprocess.DEVNULL, timeout=120)


@pytest.mark.parametrize("args", [
    ["--version"],
    [],
    ["lookup", LIBC, "0x27000"],
    ["backtrace", "--help"],
    ["backtrace"],
    ["backtrace", "-p", "abc"],
    ["backtrace", "-p", "0"],
    ["backtrace", "-p", "-5"],
    ["backtrace", "--reg", "-p", "1"],
    ["backtrace", "-p", "1", "--frobnicate"],
    ["core"],
    ["core", "--exe"],
    ["core", "a", "b"],
    ["core", "--", "-file"],
])
def test_what_the_launcher_does_not_serve_is_the_python_clis(args: list[str]) -> None:
    launched, python = launch(args), launch(args, native=False)
    assert (launched.returncode, launched.stdout, launched.stderr) == (python.returncode, python.stdout,
                                                                       python.stderr)


def test_the_launcher_is_a_native_program() -> None:
    with open(LAUNCHER, "rb") as f:
        assert f.read(4) == b"\x7fELF"
